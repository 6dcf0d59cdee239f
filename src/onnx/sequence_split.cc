#include "sequence_split.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "subgraph_names.h"
#include "tpc/util/checked_math.h"

namespace tpc::onnx::internal {
namespace {

constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();  // Slice's "to the end"

// Builds the nodes of one lowering; values get fresh names, nodes `name/op_k`.
class Emitter {
 public:
  Emitter(std::string name, const std::function<std::string(const std::string&)>& fresh)
      : name_(std::move(name)), fresh_(fresh) {}

  ::onnx::NodeProto& Add(const std::string& op, std::vector<std::string> inputs,
                         std::string output = {}) {
    ::onnx::NodeProto& n = nodes_.emplace_back();
    n.set_op_type(op);
    n.set_name(absl::StrCat(name_, "/", op, "_", nodes_.size() - 1));
    for (auto& in : inputs) n.add_input(std::move(in));
    n.add_output(output.empty() ? fresh_(absl::StrCat(name_, "/", op, "_output")) : output);
    return n;
  }

  // A constant int64 tensor: a scalar, or 1-D.
  std::string Ints(const std::vector<int64_t>& values, bool scalar = false) {
    ::onnx::NodeProto& n = Add("Constant", {});
    ::onnx::AttributeProto* a = n.add_attribute();
    a->set_name("value");
    a->set_type(::onnx::AttributeProto::TENSOR);
    ::onnx::TensorProto* t = a->mutable_t();
    t->set_data_type(::onnx::TensorProto::INT64);
    if (!scalar) t->add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values) t->add_int64_data(v);
    return n.output(0);
  }

  static void SetInt(::onnx::NodeProto& n, const std::string& key, int64_t value) {
    ::onnx::AttributeProto* a = n.add_attribute();
    a->set_name(key);
    a->set_type(::onnx::AttributeProto::INT);
    a->set_i(value);
  }

  static void SetInts(::onnx::NodeProto& n, const std::string& key,
                      const std::vector<int64_t>& values) {
    ::onnx::AttributeProto* a = n.add_attribute();
    a->set_name(key);
    a->set_type(::onnx::AttributeProto::INTS);
    for (int64_t v : values) a->add_ints(v);
  }

  std::vector<::onnx::NodeProto> Take() { return std::move(nodes_); }

 private:
  std::string name_;
  const std::function<std::string(const std::string&)>& fresh_;
  std::vector<::onnx::NodeProto> nodes_;
};

// Element `index` of `count` elements, counted from 0; an error when out of range.
absl::StatusOr<int64_t> Normalize(const SequenceSplit& s, int64_t index, int64_t count) {
  if (count == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("it reads element ", index, " of the empty sequence of ", s.label));
  }
  if (index < -count || index >= count) {
    return absl::InvalidArgumentError(absl::StrCat("it reads element ", index, " of the ", count,
                                                   " tensor(s) of ", s.label, " (-", count, " to ",
                                                   count - 1, ")"));
  }
  return index < 0 ? index + count : index;
}

// [start, end) along the axis as constants, when the sizes allow; nullopt when the
// bounds are computed at run time.
absl::StatusOr<std::optional<std::pair<int64_t, int64_t>>> StaticBounds(const SequenceSplit& s,
                                                                        int64_t index) {
  // No tensor has 2^48 parts; the bounds below (index · chunk) stay far from overflow.
  if (index >= kMaxTensorElements || index <= -kMaxTensorElements) {
    return absl::InvalidArgumentError(
        absl::StrCat("it reads element ", index, " of ", s.label, ", past any tensor's size"));
  }
  if (s.split.empty()) {
    if (s.dim) {
      auto k = Normalize(s, index, *s.dim);
      if (!k.ok()) return k.status();
      return std::make_pair(*k, *k + 1);
    }
    // Slice counts a negative start from the end as SequenceAt does.
    return std::make_pair(index, index == -1 ? kEnd : index + 1);
  }
  if (!s.split_values) return std::nullopt;
  const std::vector<int64_t>& v = *s.split_values;
  if (s.split_is_scalar) {
    const int64_t chunk = v.at(0);
    if (chunk <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(s.label, ": its split is ", chunk, "; a chunk length is positive"));
    }
    if (!s.dim) {
      if (index < 0) return std::nullopt;  // counted from the end: the count is needed
      return std::make_pair(index * chunk, index * chunk + chunk);
    }
    auto k = Normalize(s, index, (*s.dim + chunk - 1) / chunk);
    if (!k.ok()) return k.status();
    return std::make_pair(*k * chunk, std::min(*k * chunk + chunk, *s.dim));
  }
  int64_t total = 0;
  for (int64_t size : v) {
    if (size < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(s.label, ": its split has a negative size, ", size));
    }
    total += size;
  }
  if (s.dim && total != *s.dim) {
    return absl::InvalidArgumentError(absl::StrCat(s.label, ": its split sums to ", total,
                                                   " but the axis has ", *s.dim, " elements"));
  }
  auto k = Normalize(s, index, static_cast<int64_t>(v.size()));
  if (!k.ok()) return k.status();
  int64_t start = 0;
  for (int64_t i = 0; i < *k; ++i) start += v[static_cast<size_t>(i)];
  return std::make_pair(start, start + v[static_cast<size_t>(*k)]);
}

}  // namespace

absl::Status CheckSequenceUses(const ::onnx::NodeProto& split,
                               const std::vector<::onnx::NodeProto>& nodes,
                               const absl::flat_hash_set<std::string>& kept,
                               const std::function<std::string(const ::onnx::NodeProto&)>& label) {
  const std::string& seq = split.output(0);
  auto refuse = [&](const std::string& why) {
    return absl::UnimplementedError(absl::StrCat(
        "'", seq, "', the sequence a SplitToSequence makes, ", why,
        "; tpc has no sequence values and takes a SplitToSequence apart only when every use "
        "is a SequenceAt at an index known when compiling"));
  };
  if (kept.contains(seq)) return refuse("is read outside the graph's nodes (an output)");
  for (const auto& n : nodes) {
    for (int i = 0; i < n.input_size(); ++i) {
      if (n.input(i) != seq) continue;
      const bool at =
          (n.domain().empty() || n.domain() == "ai.onnx") && n.op_type() == "SequenceAt";
      if (!at || i != 0) return refuse(absl::StrCat("is input ", i, " of ", label(n)));
    }
    for (const std::string& name : SubgraphReads(n)) {
      if (name == seq) return refuse(absl::StrCat("is read in a subgraph of ", label(n)));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckSequenceSplit(const SequenceSplit& s) {
  if (s.split.empty() || !s.split_values) return absl::OkStatus();
  // The bounds of element 0 check the sizes (a chunk, their sum against the dim); an
  // empty sequence has none to check.
  if (!s.split_is_scalar && s.split_values->empty()) {
    if (s.dim && *s.dim != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(s.label, ": its split is empty but the axis has ", *s.dim, " elements"));
    }
    return absl::OkStatus();
  }
  if (s.split_is_scalar && s.dim && *s.dim == 0) return absl::OkStatus();
  absl::StatusOr<std::optional<std::pair<int64_t, int64_t>>> first = StaticBounds(s, 0);
  return first.status();
}

absl::StatusOr<std::vector<::onnx::NodeProto>> SequenceAtNodes(
    const SequenceSplit& s, int64_t index, int64_t opset, const std::string& output,
    const std::string& name, const std::function<std::string(const std::string&)>& fresh) {
  auto bounds = StaticBounds(s, index);
  if (!bounds.ok()) return bounds.status();
  const bool squeeze = s.split.empty() && !s.keepdims;
  Emitter e(name, fresh);
  std::string start, end;
  if (bounds->has_value()) {
    start = e.Ints({(*bounds)->first});
    end = e.Ints({(*bounds)->second});
  } else {
    std::string split = s.split;
    if (s.split_is_int32) {
      ::onnx::NodeProto& cast = e.Add("Cast", {split});
      Emitter::SetInt(cast, "to", ::onnx::TensorProto::INT64);
      split = cast.output(0);
    }
    if (s.split_is_scalar) {
      // Chunks of `split`; the last one shorter (Slice clips its end).
      const std::string chunk = e.Add("Reshape", {split, e.Ints({1})}).output(0);
      std::string k = e.Ints({index});
      if (index < 0) {  // counted from the end: index + ceil(dim / chunk)
        const std::string shape = e.Add("Shape", {s.input}).output(0);
        const std::string dim = e.Add("Gather", {shape, e.Ints({s.axis})}).output(0);
        const std::string up =
            e.Add("Sub", {e.Add("Add", {dim, chunk}).output(0), e.Ints({1})}).output(0);
        const std::string count = e.Add("Div", {up, chunk}).output(0);
        k = e.Add("Add", {count, k}).output(0);
      }
      start = e.Add("Mul", {k, chunk}).output(0);
      end = e.Add("Add", {start, chunk}).output(0);
    } else {
      // end = sizes[0] + ... + sizes[index], start = end - sizes[index]; Gather counts a
      // negative index from the end as SequenceAt does.
      const std::string sums = e.Add("CumSum", {split, e.Ints({0}, true)}).output(0);
      const std::string k = e.Ints({index});
      end = e.Add("Gather", {sums, k}).output(0);
      start = e.Add("Sub", {end, e.Add("Gather", {split, k}).output(0)}).output(0);
    }
  }
  const std::string axes = e.Ints({s.axis});
  const std::string sliced =
      e.Add("Slice", {s.input, start, end, axes}, squeeze ? std::string() : output).output(0);
  if (squeeze) {  // unbind: the size-1 axis goes (Squeeze's axes an input from opset 13)
    if (opset >= 13) {
      e.Add("Squeeze", {sliced, axes}, output);
    } else {
      Emitter::SetInts(e.Add("Squeeze", {sliced}, output), "axes", {s.axis});
    }
  }
  return e.Take();
}

}  // namespace tpc::onnx::internal
