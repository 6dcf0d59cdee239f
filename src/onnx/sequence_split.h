// A SplitToSequence read only by SequenceAt at indices known when compiling is a set of
// slices: TorchScript writes `torch.split`, `tensor_split` and `unbind` this way when the
// sizes are computed from shapes (the Mamba family's scans). tpc has no sequence values;
// each SequenceAt becomes a Slice of the split tensor, its bounds constants where the
// sizes are known and small ONNX computations (CumSum, Gather) where they are not.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "onnx/onnx_pb.h"

namespace tpc::onnx::internal {

// A SplitToSequence's operands, as its SequenceAt uses are lowered.
struct SequenceSplit {
  std::string label;  // the node, for messages
  std::string input;  // the tensor split
  std::string split;  // the sizes (1-D) or the chunk length (scalar); empty when absent
  int64_t axis = 0;
  bool keepdims = true;  // without `split`: whether the size-1 axis stays
  // What is known when compiling.
  bool split_is_scalar = false;
  bool split_is_int32 = false;
  std::optional<std::vector<int64_t>> split_values;  // all static
  std::optional<int64_t> dim;                        // input's extent along axis, static
};

// OK when every use of `split`'s output is the sequence operand of a SequenceAt among
// `nodes`; otherwise why tpc cannot take it apart. `kept`: names read outside `nodes`
// (graph outputs, a branch's results); `label` names a node in messages.
absl::Status CheckSequenceUses(const ::onnx::NodeProto& split,
                               const std::vector<::onnx::NodeProto>& nodes,
                               const absl::flat_hash_set<std::string>& kept,
                               const std::function<std::string(const ::onnx::NodeProto&)>& label);

// The sizes known when compiling, checked as SplitToSequence does at run time: no
// negative size, a sum equal to the axis, a positive chunk. Sizes computed at run time
// are not checked (onnxruntime refuses a sum other than the axis's there; tpc's slices
// then take what the sizes say, clipped to the axis).
absl::Status CheckSequenceSplit(const SequenceSplit& s);

// The nodes that compute element `index` of the sequence into `output` (opset `opset`
// of the default domain); `fresh` names their intermediate values and `name` prefixes
// their node names. An index out of range, where the count is known, is an error
// (phrased to follow the SequenceAt's name).
absl::StatusOr<std::vector<::onnx::NodeProto>> SequenceAtNodes(
    const SequenceSplit& s, int64_t index, int64_t opset, const std::string& output,
    const std::string& name, const std::function<std::string(const std::string&)>& fresh);

}  // namespace tpc::onnx::internal
