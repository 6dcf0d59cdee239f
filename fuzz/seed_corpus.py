#!/usr/bin/env python3
"""Writes the seed corpora of the fuzzers into OUT/<harness>/ (fuzz/run.sh calls it).

  import_model   models/*.onnx, a few tiny valid models
  external_data  valid inputs for its fixed model
  ir_parser      tests/golden/**/*.ir
  plan_loader    models/mlp.onnx compiled by BUILD/tp-compile (--tp 1 and --tp 2, rank 0
                 packed as fuzz/targets.h says), a tiny plan

Seeds are generated, not committed: they follow the committed models and goldens. The
crash inputs of fuzz/regressions/ are not seeds: one that still crashes would stop the
fuzzer before it starts (the regression test replays them instead).

    python3 fuzz/seed_corpus.py --build build-fuzz --out build-fuzz/fuzz-seeds
"""

import argparse
import glob
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import onnx
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_regressions as regressions  # noqa: E402  (beside this file)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HARNESSES = ("import_model", "external_data", "ir_parser", "plan_loader")


def tiny_models():
    """Small valid models: the fuzzer mutates these far faster than the committed ones."""
    f32 = regressions.f32_info
    w = helper.make_tensor("w", TensorProto.FLOAT, [4, 2], [float(i) for i in range(8)])
    w_raw = helper.make_tensor("w", TensorProto.FLOAT, [4, 2],
                               struct.pack("<8f", *range(8)), raw=True)
    b = helper.make_tensor("b", TensorProto.FLOAT, [2], [1.0, 2.0])
    c = helper.make_tensor("c", TensorProto.FLOAT, [2], [0.5, 0.25])
    matmul_add = [helper.make_node("MatMul", ["x", "w"], ["xw"]),
                  helper.make_node("Add", ["xw", "b"], ["y"])]
    x = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])]
    y = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 2])]
    return {
        "tiny_matmul_add.onnx": regressions.model_bytes(matmul_add, x, y, [w, b]),
        "tiny_matmul_add_raw.onnx": regressions.model_bytes(matmul_add, x, y, [w_raw, b]),
        "tiny_constant.onnx": regressions.model_bytes(
            [helper.make_node("Constant", [], ["c"], value=c),
             helper.make_node("Mul", ["x", "c"], ["y"])],
            [f32("x", [3, 2])], [f32("y", [3, 2])]),
        "tiny_reshape_softmax.onnx": regressions.model_bytes(
            [helper.make_node("Constant", [], ["s"],
                              value=helper.make_tensor("s", TensorProto.INT64, [2], [2, 3])),
             helper.make_node("Reshape", ["x", "s"], ["r"]),
             helper.make_node("Softmax", ["r"], ["y"], axis=-1)],
            [f32("x", [6])], [f32("y", [2, 3])]),
    }


def external_data_seeds():
    data = struct.pack("<4f", 1.0, 2.0, 3.0, 4.0)
    seed = regressions.external_data_input
    return {
        "offset_length.bin": seed("0", "16", data),
        "no_offset_no_length.bin": seed(None, None, data),
        "offset_16.bin": seed("16", "16", data + data),
        "indirect_location.bin": seed("0", "16", data, location=3),
    }


def plan_seeds(build):
    """rank 0 of models/mlp.onnx compiled for 1 and 2 ranks, packed for FuzzPlanLoader."""
    tp_compile = os.path.join(build, "tp-compile")
    out = {}
    with tempfile.TemporaryDirectory(dir=build) as work:
        for tp in (1, 2):
            plan = os.path.join(work, f"tp{tp}")
            subprocess.run([tp_compile, os.path.join(ROOT, "models/mlp.onnx"), "--tp", str(tp),
                            "-o", plan, "--quiet"], check=True)
            parts = []
            for name in ("plan.json", "rank0.onnx", "rank0.weights"):
                with open(os.path.join(plan, name), "rb") as f:
                    parts.append(f.read())
            out[f"mlp_tp{tp}.bin"] = regressions.pack_plan(*parts)
    model, weights = regressions.tiny_plan_rank()
    out["tiny_plan.bin"] = regressions.pack_plan(regressions.plan_json(model, weights), model,
                                                 weights)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", required=True, help="the fuzz build (for tp-compile)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    generated = {
        "import_model": tiny_models(),
        "external_data": external_data_seeds(),
        "ir_parser": {},
        "plan_loader": plan_seeds(args.build),
    }
    copied = {
        "import_model": sorted(glob.glob(os.path.join(ROOT, "models", "*.onnx"))),
        "external_data": [],
        "ir_parser": sorted(glob.glob(os.path.join(ROOT, "tests", "golden", "**", "*.ir"),
                                      recursive=True)),
        "plan_loader": [],
    }
    for harness in HARNESSES:
        folder = os.path.join(args.out, harness)
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
        for path in copied[harness]:
            # Goldens of different folders share names (gpt2.tp2.ir): keep them apart.
            rel = os.path.relpath(path, ROOT).replace(os.sep, "_")
            shutil.copyfile(path, os.path.join(folder, rel))
        for name, data in generated[harness].items():
            with open(os.path.join(folder, name), "wb") as f:
                f.write(data)
        print(f"seeds: {harness}: {len(os.listdir(folder))} inputs")


if __name__ == "__main__":
    main()
