#include "tpc/partition/collective_factory.h"

namespace tpc::partition {

namespace {

ir::Value* Make(ir::Graph& g, ir::Node* before, const std::string& op, ir::Value* x,
                ir::Attributes attrs) {
  const std::string name = g.UniqueName(x->name() + "/" + op);
  ir::Node* n = g.InsertCallBefore(before, kTpcDomain, op, {x}, {name}, std::move(attrs), name);
  return n->output(0);
}

}  // namespace

CollectiveFactory TpcCollectives(int64_t group_size) {
  CollectiveFactory f;
  f.all_reduce = [group_size](ir::Graph& g, ir::Node* before, ir::Value* x, ir::ReduceOp op) {
    return Make(g, before, "AllReduce", x,
                {{"reduce", std::string(ir::ReduceOpName(op))}, {"group_size", group_size}});
  };
  f.all_gather = [group_size](ir::Graph& g, ir::Node* before, ir::Value* x, int64_t axis,
                              int64_t blocks, int64_t parts) {
    ir::Attributes attrs = {{"axis", axis}, {"blocks", blocks}, {"group_size", group_size}};
    if (parts != group_size) attrs["parts"] = parts;
    return Make(g, before, "AllGather", x, std::move(attrs));
  };
  f.reduce_scatter = [group_size](ir::Graph& g, ir::Node* before, ir::Value* x, int64_t axis,
                                  int64_t blocks, ir::ReduceOp op) {
    return Make(g, before, "ReduceScatter", x,
                {{"axis", axis},
                 {"blocks", blocks},
                 {"reduce", std::string(ir::ReduceOpName(op))},
                 {"group_size", group_size}});
  };
  f.all_to_all = [group_size](ir::Graph& g, ir::Node* before, ir::Value* x, int64_t split_axis,
                              int64_t concat_axis) {
    return Make(
        g, before, "AllToAll", x,
        {{"split_axis", split_axis}, {"concat_axis", concat_axis}, {"group_size", group_size}});
  };
  f.shard = [group_size](ir::Graph& g, ir::Node* before, ir::Value* x, int64_t axis, int64_t blocks,
                         int64_t parts, int64_t stride) {
    ir::Attributes attrs = {{"axis", axis}, {"blocks", blocks}, {"group_size", group_size}};
    // The defaults (parts N, stride 1) are left out: plans read as before.
    if (parts != group_size) attrs["parts"] = parts;
    if (stride != 1) attrs["stride"] = stride;
    return Make(g, before, "Shard", x, std::move(attrs));
  };
  return f;
}

}  // namespace tpc::partition
