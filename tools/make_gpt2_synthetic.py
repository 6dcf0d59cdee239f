#!/usr/bin/env python3
"""A GPT-2-small shaped ONNX model with random weights, for the executor benchmark.

12 layers, hidden 768, 12 heads, MLP 3072, 1024 positions, vocabulary 8192 (GPT-2's is
50257; 8192 keeps the file at ~370 MB instead of ~500 MB and changes only the size of
the last GEMM). Input `input_ids: i64[batch, seq]`, output `logits: f32[batch, seq,
vocab]`; causal attention as torch's exporter writes it (MatMul/Softmax/MatMul, an
additive mask sliced to seq). Weights go to external data beside the model. Only the
`onnx` package and numpy are needed:

    python3 tools/make_gpt2_synthetic.py -o build/bench/gpt2_small.onnx
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def build(layers, hidden, heads, vocab, positions, seed):
    rng = np.random.default_rng(seed)
    inits, nodes = [], []
    counter = [0]

    def const(name, array):
        inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def weight(name, shape, scale=0.02):
        return const(name, (rng.standard_normal(shape) * scale).astype(np.float32))

    def node(op, inputs, **attrs):
        counter[0] += 1
        out = f"{op}_{counter[0]}"
        nodes.append(helper.make_node(op, inputs, [out], name=f"/{op}_{counter[0]}", **attrs))
        return out

    head_dim = hidden // heads
    shape = node("Shape", ["input_ids"])
    seq = node("Gather", [shape, const("one", np.array([1], np.int64))], axis=0)
    zero2 = const("zero2", np.array([0, 0], np.int64))
    seq2 = node("Concat", [seq, seq], axis=0)
    mask = const("mask", np.triu(np.full((1, 1, positions, positions), -1e9, np.float32), k=1))
    mask = node("Slice", [mask, zero2, seq2, const("axes23", np.array([2, 3], np.int64))])
    positions_ids = node("Range", [const("zero", np.array(0, np.int64)),
                                   node("Squeeze", [seq, const("axis0", np.array([0], np.int64))]),
                                   const("one_s", np.array(1, np.int64))])
    x = node("Add", [node("Gather", [weight("wte", (vocab, hidden)), "input_ids"]),
                     node("Gather", [weight("wpe", (positions, hidden)), positions_ids])])
    heads_shape = const("heads_shape", np.array([0, 0, heads, head_dim], np.int64))
    merge_shape = const("merge_shape", np.array([0, 0, hidden], np.int64))
    scale = const("scale", np.array(np.sqrt(head_dim), np.float32))

    def layer_norm(v, name):
        return node("LayerNormalization", [v, const(f"{name}.g", np.ones(hidden, np.float32)),
                                           const(f"{name}.b", np.zeros(hidden, np.float32))],
                    axis=-1, epsilon=1e-5)

    def linear(v, name, n_in, n_out):
        return node("Add", [node("MatMul", [v, weight(f"{name}.w", (n_in, n_out))]),
                            const(f"{name}.b", np.zeros(n_out, np.float32))])

    for i in range(layers):
        p = f"h.{i}"
        h = layer_norm(x, f"{p}.ln_1")
        qkv = linear(h, f"{p}.attn.c_attn", hidden, 3 * hidden)
        q, k, v = [f"{p}.{n}" for n in "qkv"]
        nodes.append(helper.make_node("Split", [qkv, const(f"{p}.split", np.array([hidden] * 3, np.int64))],
                                      [q, k, v], axis=2, name=f"/{p}/Split"))
        q, k, v = [node("Transpose", [node("Reshape", [t, heads_shape])], perm=[0, 2, 1, 3]) for t in (q, k, v)]
        kt = node("Transpose", [k], perm=[0, 1, 3, 2])
        att = node("Add", [node("Div", [node("MatMul", [q, kt]), scale]), mask])
        att = node("Softmax", [att], axis=-1)
        y = node("Reshape", [node("Transpose", [node("MatMul", [att, v])], perm=[0, 2, 1, 3]), merge_shape])
        x = node("Add", [x, linear(y, f"{p}.attn.c_proj", hidden, hidden)])
        h = layer_norm(x, f"{p}.ln_2")
        h = linear(h, f"{p}.mlp.c_fc", hidden, 4 * hidden)
        h = node("Gelu", [h], approximate="tanh")
        x = node("Add", [x, linear(h, f"{p}.mlp.c_proj", 4 * hidden, hidden)])
    x = layer_norm(x, "ln_f")
    logits = node("MatMul", [x, node("Transpose", ["wte"], perm=[1, 0])])
    nodes.append(helper.make_node("Identity", [logits], ["logits"], name="/logits"))
    graph = helper.make_graph(
        nodes, "gpt2_small_synthetic",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "seq", vocab])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], producer_name="tpc-bench")
    model.ir_version = 10  # what onnxruntime 1.2x reads
    return model


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--positions", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    model = build(a.layers, a.hidden, a.heads, a.vocab, a.positions, a.seed)
    os.makedirs(os.path.dirname(os.path.abspath(a.output)), exist_ok=True)
    weights = os.path.basename(a.output) + ".weights"
    onnx.save_model(model, a.output, save_as_external_data=True, all_tensors_to_one_file=True,
                    location=weights, size_threshold=1024)
    onnx.checker.check_model(a.output)
    print(f"wrote {a.output} (+ {weights})")


if __name__ == "__main__":
    main()
