#!/usr/bin/env python3
"""A gpt-oss-style mixture-of-experts layer as one onnxruntime MoE node, for benchmarks.

    python3 tools/make_moe_layer.py OUT.onnx [--hidden 512] [--inter 512] [--experts 16] [--k 4]
        [--int4]

x [batch, seq, hidden] -> router MatMul (+ bias) -> Reshape [tokens, experts] -> MoE
(SwiGLU interleaved, alpha 1.702, beta 1, limit 7, normalized routing weights, biases);
random weights (seeded) in OUT.onnx.data. --int4: the experts as QMoE, 4-bit codes in blocks
of 32 (as onnxruntime-genai's int4 exports). bench/executor_bench.py times it against
onnxruntime (--shapes 1x1 for a decode step, 1x128 for a prompt).
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--inter", type=int, default=512)
    ap.add_argument("--experts", type=int, default=16)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--int4", action="store_true", help="QMoE with 4-bit experts (blocks of 32)")
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    h, i, e = a.hidden, a.inter, a.experts

    def w(*shape):
        return (rng.standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float32)

    weights = [("router_w", w(h, e)), ("router_b", w(e)), ("shape", np.array([-1, e], np.int64))]
    attrs = dict(domain="com.microsoft", k=a.k, activation_type="swiglu", swiglu_fusion=1,
                 activation_alpha=1.702, activation_beta=1.0, swiglu_limit=7.0,
                 normalize_routing_weights=1)
    fc1, fc2 = w(e, 2 * i, h), w(e, h, i)
    if a.int4:
        import sys
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__))), "tests", "runtime"))
        from generate_contrib_node_tests import quantize
        (c1, s1), (c2, s2) = quantize(fc1, 4, 32), quantize(fc2, 4, 32)
        weights += [("fc1", c1), ("fc1_s", s1), ("fc1_b", w(e, 2 * i)), ("fc2", c2),
                    ("fc2_s", s2), ("fc2_b", w(e, h))]
        moe = helper.make_node("QMoE", ["x", "logits", "fc1", "fc1_s", "fc1_b", "fc2", "fc2_s",
                                        "fc2_b"], ["y"], expert_weight_bits=4, block_size=32,
                               **attrs)
    else:
        weights += [("fc1", fc1), ("fc1_b", w(e, 2 * i)), ("fc2", fc2), ("fc2_b", w(e, h))]
        moe = helper.make_node("MoE", ["x", "logits", "fc1", "fc1_b", "fc2", "fc2_b"], ["y"],
                               **attrs)
    inits = [numpy_helper.from_array(v, n) for n, v in weights]
    nodes = [
        helper.make_node("MatMul", ["x", "router_w"], ["logits0"]),
        helper.make_node("Add", ["logits0", "router_b"], ["logits1"]),
        helper.make_node("Reshape", ["logits1", "shape"], ["logits"]), moe]
    graph = helper.make_graph(
        nodes, "moe_layer",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", h])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", h])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    data = os.path.basename(a.out) + ".data"
    onnx.save(model, a.out, save_as_external_data=True, location=data)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
