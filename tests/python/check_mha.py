#!/usr/bin/env python3
"""ctest entry: onnxruntime's MultiHeadAttention and Attention split by heads, their cache
stays sharded.

usage: check_mha.py --tp-compile PATH --tp-run PATH --work DIR

Writes a 2-layer decoder as onnxruntime's transformer optimizer leaves one (separate Q,
K and V projections into com.microsoft::MultiHeadAttention with the projections' bias,
a key padding mask, unidirectional, past_key/past_value in, present_key/present_value
out; a residual MLP), 4 heads, and compiles it with no annotation at N = 2 and 4. Checks
  - each rank's MultiHeadAttention has num_heads 4 / N and its bias is a third of each
    rank's Q, K and V biases (the heads' split, `S(0/3)`), and every cache input and
    output is placed S(1) in plan.json (split by heads, never gathered);
  - per layer one all-reduce after the attention's output projection and one after the
    MLP (Megatron's layout), or, with sequence parallelism, a reduce-scatter there and an
    all-gather before the attention and the MLP; nothing else;
  - `tp-run --check-against` the unsharded model passes on a decoding step (past 5,
    seq 1) and a prefill (past 0, seq 6), as processes.
The kernel itself is checked against onnxruntime by the com.microsoft node tests.

Exit status: 0 all pass, 1 something failed, 77 onnx or numpy is not importable.
"""
import argparse
import json
import os
import shutil
import sys

from decoder_checks import run

SKIP = 77
HEADS, HEAD, LAYERS = 4, 16, 2


def write_model(path, fused):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(7)
    hidden = HEADS * HEAD
    inits, nodes = [], []

    def weight(name, *shape):
        inits.append(numpy_helper.from_array(
            (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32), name))
        return name

    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", hidden]),
              helper.make_tensor_value_info("key_padding_mask", TensorProto.INT32,
                                            ["batch", "total"])]
    outputs = []
    x = "x"
    for i in range(LAYERS):
        pre = f"layers.{i}"
        inits.append(numpy_helper.from_array(
            (rng.standard_normal(3 * hidden) * 0.1).astype(np.float32), f"{pre}.qkv_bias"))
        if fused:
            # GPT-2's fusion: one projection weight, the cache as [2, B, H, P, hd].
            inputs.append(helper.make_tensor_value_info(f"past.{i}", TensorProto.FLOAT,
                                                        [2, "batch", HEADS, "past", HEAD]))
            outputs.append(helper.make_tensor_value_info(f"present.{i}", TensorProto.FLOAT,
                                                         [2, "batch", HEADS, "total", HEAD]))
            nodes.append(helper.make_node(
                "Attention",
                [x, weight(f"{pre}.qkv_proj", hidden, 3 * hidden), f"{pre}.qkv_bias",
                 "key_padding_mask", f"past.{i}"],
                [f"{pre}.attn", f"present.{i}"], domain="com.microsoft", num_heads=HEADS,
                unidirectional=1))
        else:
            for name in ("q", "k", "v"):
                nodes.append(helper.make_node(
                    "MatMul", [x, weight(f"{pre}.{name}_proj", hidden, hidden)], [f"{pre}.{name}"]))
            for kind in ("key", "value"):
                inputs.append(helper.make_tensor_value_info(
                    f"past_{kind}.{i}", TensorProto.FLOAT, ["batch", HEADS, "past", HEAD]))
                outputs.append(helper.make_tensor_value_info(
                    f"present_{kind}.{i}", TensorProto.FLOAT, ["batch", HEADS, "total", HEAD]))
            nodes.append(helper.make_node(
                "MultiHeadAttention",
                [f"{pre}.q", f"{pre}.k", f"{pre}.v", f"{pre}.qkv_bias", "key_padding_mask", "",
                 f"past_key.{i}", f"past_value.{i}"],
                [f"{pre}.attn", f"present_key.{i}", f"present_value.{i}"],
                domain="com.microsoft", num_heads=HEADS, unidirectional=1))
        nodes.append(helper.make_node("MatMul", [f"{pre}.attn", weight(f"{pre}.o_proj", hidden, hidden)],
                                      [f"{pre}.o"]))
        nodes.append(helper.make_node("Add", [x, f"{pre}.o"], [f"{pre}.h"]))
        nodes.append(helper.make_node("MatMul", [f"{pre}.h", weight(f"{pre}.up", hidden, 2 * hidden)],
                                      [f"{pre}.u"]))
        nodes.append(helper.make_node("Relu", [f"{pre}.u"], [f"{pre}.r"]))
        nodes.append(helper.make_node("MatMul", [f"{pre}.r", weight(f"{pre}.down", 2 * hidden, hidden)],
                                      [f"{pre}.d"]))
        nodes.append(helper.make_node("Add", [f"{pre}.h", f"{pre}.d"], [f"{pre}.out"]))
        x = f"{pre}.out"
    nodes.append(helper.make_node("Identity", [x], ["y"]))
    outputs.insert(0, helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                    ["batch", "seq", hidden]))
    graph = helper.make_graph(nodes, "mha_decoder", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    onnx.save(model, path)


def check(args, n, fused):
    import onnx

    op = "Attention" if fused else "MultiHeadAttention"
    label = f"{op} N={n}"
    work = os.path.join(args.work, f"{op}_tp{n}")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    model = os.path.join(work, "model.onnx")
    write_model(model, fused)
    plan = os.path.join(work, "plan")
    code, out = run([args.tp_compile, model, "--tp", str(n), "-o", plan, "--quiet"])
    if code != 0:
        return [f"{label}: tp-compile failed: {out}"]
    errors = []
    rank0 = onnx.load(os.path.join(plan, "rank0.onnx"), load_external_data=False)
    mha = [node for node in rank0.graph.node if node.op_type == op]
    heads = [a.i for node in mha for a in node.attribute if a.name == "num_heads"]
    if heads != [HEADS // n] * LAYERS:
        errors.append(f"{label}: rank 0's {op} num_heads {heads}, expected "
                      f"{[HEADS // n] * LAYERS}")
    # (tpc::Shard slices a replicated value locally: no communication.)
    collectives = sorted(node.op_type for node in rank0.graph.node
                         if node.domain == "tpc" and node.op_type != "Shard")
    megatron = sorted(["AllReduce"] * (2 * LAYERS))
    megatron_sp = sorted(["AllGather", "ReduceScatter"] * (2 * LAYERS))
    if collectives not in (megatron, megatron_sp):
        errors.append(f"{label}: collectives {collectives}, expected {megatron} or, with "
                      f"sequence parallelism, {megatron_sp} (Megatron's layouts)")
    with open(os.path.join(plan, "plan.json")) as f:
        manifest = json.load(f)
    cache = [v for v in manifest["inputs"] + manifest["outputs"]
             if v["value"].startswith(("past", "present"))]
    want_count, want_dim = (2 * LAYERS, "2") if fused else (4 * LAYERS, "1")
    if len(cache) != want_count:
        errors.append(f"{label}: {len(cache)} cache inputs/outputs in plan.json, expected "
                      f"{want_count}")
    for v in cache:
        p = v["placements"][0]
        if (p.get("kind") != "SHARD" or p.get("dim") != want_dim or
                p.get("groups") not in (None, "", "0")):
            errors.append(f"{label}: {v['value']} placed {p}, expected S({want_dim})")
    for past, seq in ((5, 1), (0, 6)):
        code, out = run([args.tp_run, plan, "--check-against", model, "--dim", "batch=2",
                         "--dim", f"seq={seq}", "--dim", f"past={past}", "--dim",
                         f"total={past + seq}"])
        if code != 0 or "PASS" not in out:
            errors.append(f"{label} past={past} seq={seq}: tp-run --check-against: {out}")
    return errors


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tp-compile", required=True)
    ap.add_argument("--tp-run", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    try:
        import numpy  # noqa: F401
        import onnx  # noqa: F401
    except ImportError as e:
        print(f"skipped: {e}")
        return SKIP
    os.makedirs(args.work, exist_ok=True)
    errors = []
    for fused in (False, True):
        for n in (2, 4):
            errors += check(args, n, fused)
    for e in errors:
        print("FAIL:", e)
    print(f"4 cases, {len(errors)} failures")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
