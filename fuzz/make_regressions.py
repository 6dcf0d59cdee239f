#!/usr/bin/env python3
"""Writes the hand-made regression inputs of fuzz/regressions/<harness>/.

Each file is one input of a harness in fuzz/targets.h that once crashed tpc (the known
bugs of issue 9); tests/fuzz/fuzz_regression_test.cc replays every file of those
folders, so a fixed crash stays fixed. Crash inputs the fuzzers find are copied there
by hand, next to these. The output is deterministic: running this again rewrites the
same bytes.

    python3 fuzz/make_regressions.py [--out fuzz/regressions]
"""

import argparse
import hashlib
import json
import os
import random
import struct

import onnx
from onnx import TensorProto, helper

OPSET = 17


def model_bytes(nodes, inputs, outputs, initializers=()):
    graph = helper.make_graph(nodes, "regression", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    return model.SerializeToString()


def f32_info(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def import_model_inputs():
    """ONNX files for FuzzImportModel."""
    out = {}
    # onnx.checker: Constant's `value` must be a TENSOR; tpc aborted with
    # bad_variant_access reading an INT as a tensor.
    out["constant_value_int_attribute.onnx"] = model_bytes(
        [helper.make_node("Constant", [], ["c"], value=3),
         helper.make_node("Add", ["x", "c"], ["y"])],
        [f32_info("x", [2])], [f32_info("y", [2])])
    # The same with a string `value`: another wrong alternative of the variant.
    out["constant_value_string_attribute.onnx"] = model_bytes(
        [helper.make_node("Constant", [], ["c"], value="three"),
         helper.make_node("Add", ["x", "c"], ["y"])],
        [f32_info("x", [2])], [f32_info("y", [2])])
    # MatMul takes exactly 2 inputs; tpc accepted 4.
    w = helper.make_tensor("w", TensorProto.FLOAT, [2, 2], [1.0, 2.0, 3.0, 4.0])
    out["matmul_four_inputs.onnx"] = model_bytes(
        [helper.make_node("MatMul", ["x", "w", "w", "w"], ["y"])],
        [f32_info("x", [2, 2])], [f32_info("y", [2, 2])], [w])
    # A negative dim in an initializer (its element count would be negative).
    neg = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[-2, 2])
    out["initializer_negative_dim.onnx"] = model_bytes(
        [helper.make_node("Add", ["x", "w"], ["y"])],
        [f32_info("x", [2, 2])], [f32_info("y", [2, 2])], [neg])
    # Dims whose product overflows int64 (2^62 * 4): the element count must be checked
    # arithmetic, not a signed overflow.
    huge = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[1 << 62, 4])
    out["initializer_element_count_overflow.onnx"] = model_bytes(
        [helper.make_node("Add", ["x", "w"], ["y"])],
        [f32_info("x", [2, 2])], [f32_info("y", [2, 2])], [huge])
    return out


def external_data_input(offset=None, length=None, data=b"", location=0):
    """An input of FuzzExternalData: selector, offset, length (None: key left out), data."""
    out = bytes([location])
    for value in (offset, length):
        if value is None:
            out += b"\xff"
        else:
            raw = value.encode()
            assert len(raw) < 0xFF
            out += bytes([len(raw)]) + raw
    return out + data


def external_data_inputs():
    data = struct.pack("<4f", 1.0, 2.0, 3.0, 4.0)  # the model's w: f32[2, 2]
    return {
        # std::stoll threw std::invalid_argument (SIGABRT).
        "offset_not_a_number.bin": external_data_input("abc", None, data),
        # std::stoll threw std::out_of_range (SIGABRT).
        "offset_out_of_range.bin": external_data_input("99999999999999999999", None, data),
        "length_not_a_number.bin": external_data_input("0", "16x", data),
        # offset + length overflows int64 in the bounds check.
        "offset_plus_length_overflow.bin":
            external_data_input("9223372036854775807", "16", data),
        "negative_length.bin": external_data_input("0", "-16", data),
    }


def ir_parser_inputs():
    """IR text for FuzzIrParser: corners of the syntax no golden file has."""
    return {
        # The parser reads statements first and leaves the order error to the verifier.
        "use_before_definition.ir": b"""graph "g" opsets("": 17) {
  %y: f32[2] = Add(%x, %x) name="add"
  %x: f32[2] = placeholder
  output(%y)
}
""",
        # Names that need quoting and escapes, an omitted input, every attribute kind.
        "quoting_and_attributes.ir": rb"""graph "q\\\"\n" opsets("": 17, "tpc": 1, "com.x": 1) {
  %"a b": f32[batch*seq, 4] sharding(S(0)) = placeholder
  %"\t\001": i64[2] value=[batch, 4] sharding(R) = constant [1, -9223372036854775808]
  %h: f16[2] = constant [0.5, inf]
  %k: bool[3] = constant [true, false, true]
  %"y\"": f32[batch*seq, 4] sharding(P(sum)) = "com.x"::"odd op"(%"a b", _, %"\t\001") {f=1.5, floats=[1.0, -0.0, nan], floats0=floats[], i=-1, ints=[1, 2], ints0=ints[], s="\xff", strings=["a", ""], strings0=strings[], t=tensor<f32[2]>[1.0, 2.0], t2=tensor<f32[64, 64]> elided} name="n\000"
  output(%"y\"")
}
""",
    }


def pack_plan(plan_json, rank0_onnx, rank0_weights):
    """An input of FuzzPlanLoader: three parts, each a 4-byte little-endian length first."""
    out = b""
    for part in (plan_json, rank0_onnx, rank0_weights):
        out += struct.pack("<I", len(part)) + part
    return out


def tiny_plan_rank():
    """rank0.onnx of a 1-rank plan (y = x + w, w external in rank0.weights) and its weights."""
    weights = struct.pack("<4f", 1.0, 2.0, 3.0, 4.0)
    w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2, 2],
                    data_location=TensorProto.EXTERNAL)
    for key, value in (("location", "rank0.weights"), ("offset", "0"), ("length", "16")):
        entry = w.external_data.add()
        entry.key, entry.value = key, value
    model = model_bytes([helper.make_node("Add", ["x", "w"], ["y"])],
                   [f32_info("x", [2, 2])], [f32_info("y", [2, 2])], [w])
    return model, weights


def plan_json(rank0_onnx, rank0_weights):
    """A plan.json as tp-compile writes it (proto/plan.proto), for one rank."""
    replicated = [{"kind": "REPLICATE", "dim": "0", "reduce": ""}]
    plan = {
        "tpc_version": "0.1.0",
        "source_model": "tiny.onnx",
        "source_sha256": hashlib.sha256(rank0_onnx).hexdigest(),
        "mesh": {"axes": [{"name": "tp", "size": "1"}]},
        "ranks": [{
            "rank": "0",
            "model": "rank0.onnx",
            "sha256": hashlib.sha256(rank0_onnx).hexdigest(),
            "shards": [{"name": "w", "source": "w", "shape": ["2", "2"],
                        "file": "rank0.weights", "offset": "0", "length": "16"}],
            "weights": "rank0.weights",
            "weights_sha256": hashlib.sha256(rank0_weights).hexdigest(),
            "weight_bytes": str(len(rank0_weights)),
        }],
        "inputs": [{"value": "x", "placements": replicated}],
        "outputs": [{"value": "y", "placements": replicated}],
        "options": {"tp": "1"},
    }
    return json.dumps(plan, indent=1).encode()


def plan_loader_inputs():
    model, weights = tiny_plan_rank()
    garbage = random.Random(9).randbytes(512)
    truncated = model[: len(model) // 2]
    return {
        "plan_json_not_json.bin": pack_plan(b"this is not JSON {\"ranks\": [", model, weights),
        "plan_json_empty.bin": pack_plan(b"", model, weights),
        # Hashes in plan.json match the garbage, so the loader gets as far as importing it.
        "rank0_onnx_garbage.bin": pack_plan(plan_json(garbage, weights), garbage, weights),
        "rank0_onnx_truncated.bin": pack_plan(plan_json(truncated, weights), truncated, weights),
    }


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(here, "regressions"))
    args = parser.parse_args()
    for harness, files in (("import_model", import_model_inputs()),
                           ("external_data", external_data_inputs()),
                           ("ir_parser", ir_parser_inputs()),
                           ("plan_loader", plan_loader_inputs())):
        folder = os.path.join(args.out, harness)
        os.makedirs(folder, exist_ok=True)
        for name, data in sorted(files.items()):
            assert len(data) < 64 * 1024, name
            with open(os.path.join(folder, name), "wb") as f:
                f.write(data)
        print(f"{folder}: {len(files)} files")


if __name__ == "__main__":
    main()
