#!/usr/bin/env python3
"""Writes node tests of onnxruntime's com.microsoft operators into .cache/ort-contrib-node-tests.

The operators that onnxruntime-genai's model builder and Optimum's exports use have no
ONNX backend test data: onnxruntime (which implements them all) is the reference. Each
case is a one-op model in the ONNX node-test layout (model.onnx, test_data_set_0/
input_K.pb, output_K.pb), its inputs drawn from a seeded generator and its outputs
computed by onnxruntime's CPU provider. tests/runtime/onnx_node_conformance_test.cc runs
them when the folder exists; `make deps` writes it (again when this script changes).

usage: generate_contrib_node_tests.py [OUT]   (default .cache/ort-contrib-node-tests)
"""
import os
import shutil
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import unfuse_geglu_moe  # noqa: E402
import unfuse_gqa_norms  # noqa: E402
MS = "com.microsoft"


class Case:
    def __init__(self, name, op, inputs, outputs, opset=17, domain=MS, reference=None, **attrs):
        """inputs: list of (name, array or None for an absent optional input);
        outputs: list of names, "" for an output the node leaves out. `domain` "": an
        operator onnxruntime registers in the default domain (SimplifiedLayerNormalization).
        `reference`: the equivalent model onnxruntime's CPU runs, for a node it refuses."""
        self.name, self.op, self.inputs, self.outputs = name, op, inputs, outputs
        self.opset, self.domain, self.attrs = opset, domain, attrs
        self.reference = reference

    def model(self):
        node = helper.make_node(self.op, [n if a is not None else "" for n, a in self.inputs],
                                self.outputs, domain=self.domain, **self.attrs)
        graph_inputs = [helper.make_tensor_value_info(
            n, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape))
            for n, a in self.inputs if a is not None]
        graph_outputs = [helper.make_empty_tensor_value_info(o)
                         for o in self.outputs if o]
        graph = helper.make_graph([node], self.name, graph_inputs, graph_outputs)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset),
                                                        helper.make_opsetid(MS, 1)])
        model.ir_version = 8
        return model

    def write(self, out):
        model = self.model()
        feeds = {n: a for n, a in self.inputs if a is not None}
        run = self.reference(model) if self.reference else model
        sess = ort.InferenceSession(run.SerializeToString(), providers=["CPUExecutionProvider"])
        # (A reference may hold some inputs as initializers: those are not fed.)
        names = {i.name for i in sess.get_inputs()}
        results = sess.run(None, {n: a for n, a in feeds.items() if n in names})
        # Declare the output types onnxruntime produced (tpc reads typed outputs).
        del model.graph.output[:]
        for name, r in zip([o for o in self.outputs if o], results):
            model.graph.output.append(helper.make_tensor_value_info(
                name, helper.np_dtype_to_tensor_dtype(r.dtype), list(r.shape)))
        d = os.path.join(out, "node", f"test_ms_{self.name}")
        data = os.path.join(d, "test_data_set_0")
        os.makedirs(data)
        onnx.save(model, os.path.join(d, "model.onnx"))
        for k, (n, a) in enumerate((n, a) for n, a in self.inputs if a is not None):
            t = numpy_helper.from_array(a, n)
            with open(os.path.join(data, f"input_{k}.pb"), "wb") as f:
                f.write(t.SerializeToString())
        for k, r in enumerate(results):
            with open(os.path.join(data, f"output_{k}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(r).SerializeToString())


def cases():
    rng = np.random.default_rng(0)

    def f32(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    x, skip = f32(2, 3, 16), f32(2, 3, 16)
    gamma, beta, bias = f32(16), f32(16), f32(16)
    out = [
        Case("fastgelu", "FastGelu", [("x", f32(2, 3, 16))], ["y"]),
        Case("fastgelu_bias", "FastGelu", [("x", f32(2, 3, 16)), ("bias", f32(16))], ["y"]),
        Case("biasgelu", "BiasGelu", [("a", f32(2, 3, 16)), ("b", f32(16))], ["y"]),
        Case("quickgelu", "QuickGelu", [("x", f32(2, 3, 16))], ["y"]),
        Case("quickgelu_alpha", "QuickGelu", [("x", f32(2, 3, 16))], ["y"], alpha=1.5),
        Case("gelu", "Gelu", [("x", f32(2, 3, 16))], ["y"]),
        Case("simplified_layer_norm", "SimplifiedLayerNormalization",
             [("x", f32(2, 3, 16)), ("scale", f32(16))], ["y"], domain="", epsilon=1e-5),
        Case("skip_layer_norm", "SkipLayerNormalization",
             [("input", x), ("skip", skip), ("gamma", gamma)], ["output"], epsilon=1e-5),
        Case("skip_layer_norm_beta_bias_all_outputs", "SkipLayerNormalization",
             [("input", x), ("skip", skip), ("gamma", gamma), ("beta", beta), ("bias", bias)],
             ["output", "mean", "inv_std_var", "input_skip_bias_sum"], epsilon=1e-5),
        Case("skip_layer_norm_sum_only", "SkipLayerNormalization",
             [("input", x), ("skip", skip), ("gamma", gamma), ("beta", None), ("bias", bias)],
             ["output", "", "", "input_skip_bias_sum"], epsilon=1e-6),
        Case("skip_layer_norm_2d", "SkipLayerNormalization",
             [("input", f32(5, 16)), ("skip", f32(5, 16)), ("gamma", gamma), ("beta", beta)],
             ["output"], epsilon=1e-5),
        Case("skip_simplified_layer_norm", "SkipSimplifiedLayerNormalization",
             [("input", x), ("skip", skip), ("gamma", gamma)], ["output"], epsilon=1e-6),
        Case("skip_simplified_layer_norm_sum", "SkipSimplifiedLayerNormalization",
             [("input", x), ("skip", skip), ("gamma", gamma), ("bias", bias)],
             ["output", "", "inv_std_var", "input_skip_bias_sum"], epsilon=1e-5),
    ]
    out += matmul_nbits_cases(rng)
    out += group_query_attention_cases(rng)
    out += windowed_gqa_cases(rng)
    angles = rng.random((32, 8)) * 3
    cos, sin = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
    for name, x, pos, attrs in [
            ("rotary_3d", f32(2, 3, 32), np.array([[0, 1, 2], [5, 6, 7]], np.int64), {}),
            ("rotary_3d_offset", f32(2, 3, 32), np.array([4], np.int64), {}),
            ("rotary_3d_interleaved_heads", f32(1, 4, 32), np.array([[3, 4, 5, 6]], np.int64),
             {"interleaved": 1, "num_heads": 2}),
            ("rotary_4d", f32(2, 2, 3, 16), np.array([[0, 1, 2], [1, 2, 3]], np.int64), {}),
            ("rotary_partial", f32(1, 3, 64), np.array([2], np.int64),
             {"num_heads": 2, "rotary_embedding_dim": 16})]:
        out.append(Case(f"rotary_embedding_{name[7:]}", "RotaryEmbedding",
                        [("input", x), ("position_ids", pos), ("cos_cache", cos),
                         ("sin_cache", sin)], ["output"], **attrs))
    out += multi_head_attention_cases(np.random.default_rng(1))
    out += attention_cases(np.random.default_rng(2))
    out += gqa_qk_norm_cases(np.random.default_rng(3))
    out += gqa_head_sink_cases(np.random.default_rng(4))
    out += moe_cases(np.random.default_rng(5))
    out += qmoe_cases(np.random.default_rng(11))
    out += causal_conv_cases(np.random.default_rng(6))
    out += gather_block_quantized_cases(np.random.default_rng(12))
    out += qwen35_cases(np.random.default_rng(13))
    return out


def qwen35_cases(rng):
    """Qwen 3.5's operators as onnxruntime-genai's builder writes them. Its Gated DeltaNet layer:
    LinearAttention under each update rule, inverse GQA (more value heads than query and key
    heads: Qwen 3.5's) and GQA, a first prompt (no state), a decode step, per-key-row decay
    and one rate per token, large heads; LinearAttentionGate with and without the rate (softplus past its
    threshold of 20 included); GatedRMSNorm, silu and sigmoid; M-RoPE (MRotaryEmbedding) in
    both layouts, 3-D and 4-D, partial rotary, interleaved pairs and a scale; and ONNX's
    LpNormalization (p 1 and 2, a zero vector, an inner axis). Its MoE's GatedAdd (plain
    mode: the shared expert joined to the routed experts, a gate per row)."""
    def f32(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    def sigmoid(x):
        return (1 / (1 + np.exp(-x))).astype(np.float32)

    out = []
    b, t = 2, 5
    for name, hq, hv, dk, dv, rule, extra in [
            ("gated_delta_inverse_gqa", 2, 4, 8, 6, "gated_delta", {}),
            ("gated_delta_gqa", 4, 2, 8, 6, "gated_delta", {"scale": 0.5}),
            ("gated_delta_first_prompt", 2, 2, 8, 8, "gated_delta", {"no_past": 1}),
            ("gated_delta_decode", 2, 4, 16, 16, "gated_delta", {"tokens": 1}),
            ("gated_per_key_decay", 2, 2, 4, 6, "gated", {"per_key": 1}),
            ("delta_rate_per_token", 2, 2, 4, 6, "delta", {"rate_one": 1}),
            ("linear_default_scale", 3, 3, 4, 5, "linear", {"default_scale": 1}),
            # heads as large as Qwen 3.5's (dk 128) and wide rows of odd widths (80, 72 and
            # 48 columns: vectors of 16 and a rest)
            ("gated_delta_wide_heads", 2, 4, 128, 80, "gated_delta", {}),
            ("gated_per_key_decay_wide_heads", 2, 2, 64, 72, "gated", {"per_key": 1}),
            ("gated_delta_first_prompt_wide_heads", 2, 2, 128, 48, "gated_delta",
             {"no_past": 1}),
            # tpc's CPU kernel keeps a row of 16 to 128 value columns in registers (AVX-512,
            # one query head per state head): every rule, per-key decay, a rate per token
            ("gated_per_key_decay_dv_32", 2, 2, 16, 32, "gated", {"per_key": 1}),
            ("delta_rate_per_token_dv_16", 2, 2, 8, 16, "delta", {"rate_one": 1}),
            ("linear_dv_16", 3, 3, 4, 16, "linear", {"default_scale": 1}),
            ("gated_delta_dv_128", 2, 4, 32, 128, "gated_delta", {}),
            # its one pass a token sums the next token's Sᵀk under that token's decay of
            # each key row
            ("gated_delta_per_key_decay_dv_32", 2, 2, 16, 32, "gated_delta", {"per_key": 1}),
            ("gated_delta_per_key_first_prompt_dv_16", 2, 2, 8, 16, "gated_delta",
             {"per_key": 1, "no_past": 1})]:
        extra = dict(extra)
        tokens = extra.pop("tokens", t)
        hk = min(hq, hv)
        decay = None
        if "gated" in rule:
            width = hv * dk if extra.pop("per_key", 0) else hv
            decay = -np.abs(f32(b, tokens, width))
        rate = None
        if "delta" in rule:
            rate = sigmoid(f32(b, tokens, 1 if extra.pop("rate_one", 0) else hv))
        key = f32(b, tokens, hk * dk)
        key /= np.linalg.norm(key.reshape(b, tokens, hk, dk), axis=-1).repeat(dk, -1)
        attrs = {"q_num_heads": hq, "kv_num_heads": hv, "update_rule": rule}
        if not extra.pop("default_scale", 0):
            attrs["scale"] = extra.pop("scale", 1.0 / np.sqrt(dk))
        past = None if extra.pop("no_past", 0) else f32(b, hv, dk, dv) * 0.5
        out.append(Case(f"linear_attention_{name}", "LinearAttention",
                        [("query", f32(b, tokens, hq * dk)), ("key", key),
                         ("value", f32(b, tokens, hv * dv)), ("past_state", past),
                         ("decay", decay), ("beta", rate)],
                        ["output", "present_state"], **attrs))
    a = f32(2, 3, 4) * 8
    a[0, 0] = [25.0, -25.0, 19.0, 0.0]
    dt_bias, decay_scale = f32(4), -np.exp(f32(4))
    out.append(Case("linear_attention_gate", "LinearAttentionGate",
                    [("a", a), ("dt_bias", dt_bias), ("decay_scale", decay_scale),
                     ("b", f32(2, 3, 4))], ["decay", "beta"]))
    out.append(Case("linear_attention_gate_decay_only", "LinearAttentionGate",
                    [("a", a), ("dt_bias", dt_bias), ("decay_scale", decay_scale)], ["decay"]))
    for act in ("silu", "sigmoid"):
        out.append(Case(f"gated_rms_norm_{act}", "GatedRMSNorm",
                        [("X", f32(2, 3, 32)), ("scale", f32(8)), ("gate", f32(2, 3, 32))],
                        ["Y"], activation=act, epsilon=1e-6))
    angles = rng.random((16, 6)) * 3
    cos, sin = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
    for name, x, sections, attrs in [
            ("interleaved_3d_partial", f32(2, 3, 2 * 16), [2, 1, 1],
             {"num_heads": 2, "rotary_embedding_dim": 8, "mrope_layout": 1}),
            ("chunked_3d", f32(2, 3, 2 * 12), [2, 2, 2], {"num_heads": 2}),
            ("chunked_4d_pairs", f32(2, 2, 3, 12), [3, 2, 1], {"interleaved": 1}),
            ("interleaved_4d_scale", f32(1, 2, 3, 12), [2, 2, 2],
             {"mrope_layout": 1, "scale": 0.5})]:
        half = sum(sections)
        positions = rng.integers(0, 16, (3, x.shape[0], x.shape[-2] if x.ndim == 4 else
                                         x.shape[1])).astype(np.int64)
        out.append(Case(f"mrotary_embedding_{name}", "MRotaryEmbedding",
                        [("input", x), ("position_ids", positions),
                         ("cos_cache", np.ascontiguousarray(cos[:, :half])),
                         ("sin_cache", np.ascontiguousarray(sin[:, :half]))],
                        ["output"], mrope_section=sections, **attrs))
    out.append(Case("gated_add", "GatedAdd", [("X", f32(2, 3, 8)), ("Y", f32(2, 3, 8)),
                                              ("gate", sigmoid(f32(2, 3, 1)))], ["output"]))
    out.append(Case("gated_add_2d", "GatedAdd", [("X", f32(5, 6)), ("Y", f32(5, 6)),
                                                 ("gate", f32(5, 1))], ["output"]))
    x = f32(2, 3, 8)
    x[1, 2] = 0
    for name, p, axis in [("l2", 2, -1), ("l1", 1, -1), ("l2_axis1", 2, 1)]:
        out.append(Case(f"lp_normalization_{name}", "LpNormalization", [("input", x)],
                        ["output"], domain="", p=p, axis=axis))
    return out


def causal_conv_cases(rng):
    """onnxruntime's CausalConvWithState (LFM2's, Mamba's short convolutions): a prompt after
    a state, SiLU with a bias and dilation 2, a first prompt (no state), a decode step of one
    position, and an input shorter than the state (the present keeps some of the past)."""
    def f32(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    out = []
    b, c, k = 2, 6, 3
    for name, length, extra in [
            ("prompt", 5, {}),
            ("silu_bias_dilation", 4, {"activation": "silu", "dilation": 2, "bias": 1}),
            ("first_prompt", 4, {"activation": "silu", "no_past": 1}),
            ("decode_bias", 1, {"bias": 1}),
            ("short_dilated", 2, {"dilation": 3})]:
        extra = dict(extra)
        state = (k - 1) * extra.get("dilation", 1)
        inputs = [("input", f32(b, c, length)), ("weight", f32(c, 1, k)),
                  ("bias", f32(c) if extra.pop("bias", 0) else None),
                  ("past_state", None if extra.pop("no_past", 0) else f32(b, c, state))]
        out.append(Case(f"causal_conv_with_state_{name}", "CausalConvWithState", inputs,
                        ["output", "present_state"], **extra))
    return out


def moe_cases(rng):
    """onnxruntime's MoE as its CPU runs it: each activation (gelu: the tanh form), top 1 and
    2, routing weights normalized or not, with and without the biases, a 3-D input,
    gpt-oss's SwiGLU (interleaved, alpha 1.702, beta 1, limit 7; a limit that clamps), and
    routers with ties."""
    def f32(*shape, scale=1.0):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    out = []
    h, inter, experts = 16, 8, 4
    for name, shape, k, extra in [
            ("relu_top2", (5, h), 2, {"activation_type": "relu"}),
            ("gelu_top1_no_bias", (5, h), 1, {"activation_type": "gelu", "no_bias": 1}),
            ("silu_normalized_3d", (2, 3, h), 2,
             {"activation_type": "silu", "normalize_routing_weights": 1}),
            ("identity_top3", (4, h), 3, {"activation_type": "identity"}),
            ("swiglu_gpt_oss", (6, h), 2,
             {"activation_type": "swiglu", "swiglu_fusion": 1, "activation_alpha": 1.702,
              "activation_beta": 1.0, "swiglu_limit": 7.0, "normalize_routing_weights": 1}),
            ("swiglu_clamped", (3, h), 2,
             {"activation_type": "swiglu", "swiglu_fusion": 1, "activation_alpha": 1.702,
              "activation_beta": 1.0, "swiglu_limit": 0.5})]:
        extra = dict(extra)
        bias = not extra.pop("no_bias", 0)
        rows = 2 * inter if extra["activation_type"] == "swiglu" else inter
        tokens = int(np.prod(shape[:-1]))
        inputs = [("input", f32(*shape)), ("router_probs", f32(tokens, experts)),
                  ("fc1_experts_weights", f32(experts, rows, h, scale=0.3)),
                  ("fc1_experts_bias", f32(experts, rows) if bias else None),
                  ("fc2_experts_weights", f32(experts, h, inter, scale=0.3)),
                  ("fc2_experts_bias", f32(experts, h) if bias else None)]
        out.append(Case(f"moe_{name}", "MoE", inputs, ["output"], k=k, **extra))
    # GeGLU (Gemma 4's experts: gelu_tanh(gate) · linear, rows interleaved), which only
    # onnxruntime's CUDA kernel has: the reference is the MoE written out densely.
    for name, shape, k, bias, normalize in [("geglu_top2_3d", (2, 3, h), 2, True, 1),
                                            ("geglu_top1_no_bias", (5, h), 1, False, 0)]:
        tokens = int(np.prod(shape[:-1]))
        inputs = [("input", f32(*shape)), ("router_probs", f32(tokens, experts)),
                  ("fc1_experts_weights", f32(experts, 2 * inter, h, scale=0.3)),
                  ("fc1_experts_bias", f32(experts, 2 * inter) if bias else None),
                  ("fc2_experts_weights", f32(experts, h, inter, scale=0.3)),
                  ("fc2_experts_bias", f32(experts, h) if bias else None)]
        out.append(Case(f"moe_{name}", "MoE", inputs, ["output"], k=k,
                        activation_type="geglu", swiglu_fusion=1,
                        normalize_routing_weights=normalize, reference=unfuse_geglu_moe.unfuse))
    # Ties (onnxruntime's CPU ranks (probability, index) pairs: the higher index first): a
    # router row of zeros (a padded token's), and rows with equal pairs of logits.
    router = np.array([[0, 0, 0, 0], [1, 1, 0.5, 0.5], [0.5, 2, 0.5, 2], [0, 0, 0, 0]],
                      np.float32)
    inputs = [("input", f32(4, h)), ("router_probs", router),
              ("fc1_experts_weights", f32(experts, inter, h, scale=0.3)),
              ("fc1_experts_bias", f32(experts, inter)),
              ("fc2_experts_weights", f32(experts, h, inter, scale=0.3)),
              ("fc2_experts_bias", f32(experts, h))]
    for k in (1, 3):
        out.append(Case(f"moe_ties_top{k}", "MoE", inputs, ["output"], k=k,
                        activation_type="silu"))
    return out


def gather_block_quantized_cases(rng):
    """GatherBlockQuantized as onnxruntime-genai's builder writes its tied int4 embedding: a
    uint8 table [rows, K · bits / 8] (MatMulNBits' codes) gathered by rows: 4-bit in blocks
    of 16 with packed zero points and 2-D indices, one negative; in blocks of 32 without
    zero points (8) and int32 indices; 8-bit with zero points; f16 scales."""
    out = []
    rows, k = 6, 64
    for name, bits, block, zero_points, indices, scale_type in [
            ("int4_zero_points", 4, 16, True, np.array([[1, 5], [0, -2]], np.int64), np.float32),
            ("int4_block32_int32", 4, 32, False, np.array([3, 3, 0], np.int32), np.float32),
            ("int8_zero_points", 8, 16, True, np.array([[2], [4]], np.int64), np.float32),
            ("int4_f16_scales", 4, 32, False, np.array([[5, 1, 2]], np.int64), np.float16)]:
        blocks = k // block
        inputs = [("data", rng.integers(0, 256, (rows, k * bits // 8)).astype(np.uint8)),
                  ("indices", indices),
                  ("scales", rng.uniform(0.01, 0.2, (rows, blocks)).astype(scale_type))]
        if zero_points:
            inputs.append(("zero_points", rng.integers(0, 256, (rows, (blocks * bits + 7) // 8))
                           .astype(np.uint8)))
        out.append(Case(f"gather_block_quantized_{name}", "GatherBlockQuantized", inputs,
                        ["output"], bits=bits, block_size=block, gather_axis=0, quantize_axis=1))
    return out


def quantize(w, bits, block):
    """w [E, N, K] as QMoE's integer codes (uint8 [E, N, K·bits/8], low nibble first) and
    scales [E, N, K / block] ([E, N] when block is None: one per row), symmetric around the
    default zero point 2^(bits - 1)."""
    e, n, k = w.shape
    b = block or k
    blocks = w.reshape(e, n, k // b, b)
    top = 2 ** (bits - 1) - 1
    scale = np.abs(blocks).max(axis=-1) / top
    scale[scale == 0] = 1
    codes = np.clip(np.round(blocks / scale[..., None]), -top - 1, top).astype(np.int32)
    codes = (codes + 2 ** (bits - 1)).reshape(e, n, k).astype(np.uint8)
    if bits == 4:
        codes = (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)
    scale = scale.astype(np.float32)
    return codes, scale if block else scale.reshape(e, n)


def qmoe_cases(rng):
    """onnxruntime's QMoE as its CPU runs it (integer codes, the default zero points,
    fp32 activations; 8-bit codes in blocks round each FC's input to int8 per block):
    4-bit in blocks of 16 with SwiGLU (the builder's int4 LFM2-MoE), 8-bit in blocks and
    with one scale per row, 4-bit with one scale per row, gelu with top 1, identity with top 3,
    and no biases with a 3-D input; the routing weights normalized (its CPU normalizes them
    whatever normalize_routing_weights says, and refuses FC1 and FC2 of different
    widths)."""
    def f32(*shape, scale=1.0):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    out = []
    h, inter, experts = 32, 16, 4
    for name, shape, bits1, bits2, block, extra in [
            ("int4_block16_swiglu", (5, h), 4, 4, 16,
             {"activation_type": "swiglu", "swiglu_fusion": 1}),
            ("int8_block16_silu", (4, h), 8, 8, 16, {"activation_type": "silu"}),
            ("int8_per_row_silu", (4, h), 8, 8, None, {"activation_type": "silu"}),
            ("int4_per_row_relu", (5, h), 4, 4, None, {"activation_type": "relu"}),
            ("int4_gelu_top1", (3, h), 4, 4, 16, {"activation_type": "gelu", "k": 1}),
            ("int4_identity_top3", (3, h), 4, 4, 16, {"activation_type": "identity", "k": 3}),
            ("int4_no_bias_3d", (2, 3, h), 4, 4, 16,
             {"activation_type": "silu", "no_bias": 1})]:
        extra = dict(extra)
        bias = not extra.pop("no_bias", 0)
        rows = 2 * inter if extra["activation_type"] == "swiglu" else inter
        tokens = int(np.prod(shape[:-1]))
        w1, s1 = quantize(f32(experts, rows, h, scale=0.3), bits1, block)
        w2, s2 = quantize(f32(experts, h, inter, scale=0.3), bits2, block)
        inputs = [("input", f32(*shape)), ("router_probs", f32(tokens, experts)),
                  ("fc1_experts_weights", w1), ("fc1_scales", s1),
                  ("fc1_experts_bias", f32(experts, rows) if bias else None),
                  ("fc2_experts_weights", w2), ("fc2_scales", s2),
                  ("fc2_experts_bias", f32(experts, h) if bias else None)]
        if block:
            extra["block_size"] = block
        if bits1 == 8:
            extra["expert_weight_bits"] = 8
        extra.setdefault("k", 2)
        extra["normalize_routing_weights"] = 1  # (onnxruntime's CPU normalizes anyway)
        # The codes, scales and biases as constants, as in an export: given 8-bit codes in
        # blocks so, onnxruntime's CPU rounds each FC's input rows to int8 per block (as
        # graph inputs it multiplies in f32); 4-bit codes and a scale per row it multiplies
        # in f32 either way.
        constants = {n: a for n, a in inputs if n.startswith("fc")}
        out.append(Case(f"qmoe_{name}", "QMoE", inputs, ["output"],
                        reference=lambda model, c=constants: with_initializers(model, c),
                        **extra))
    return out


def gqa_head_sink_cases(rng):
    """GroupQueryAttention's head_sink (gpt-oss's attention sinks: a score per query head in
    each softmax row, then dropped): a decode step with rotary, a padded first prompt with
    smooth_softmax too (the sink wins), packed Q/K/V, and gpt-oss's local layers' windowed
    cache (capacity 4, window 3) after 5 tokens."""
    out = []
    hq, hkv, hd = 4, 2, 16
    for name, b, s, p, extra in [
            ("decode_rotary", 2, 1, 5, {"do_rotary": 1}),
            ("prefill_padded_smooth", 2, 4, 0, {"lens": [4, 2], "smooth_softmax": 1}),
            ("packed", 2, 1, 3, {"packed": 1}),
            ("window_cache", 1, 1, 4, {"do_rotary": 1, "local_window_size": 3,
                                       "sliding_window_cache": 1, "lens": [6]})]:
        extra = dict(extra)
        lens = extra.pop("lens", None)
        packed = extra.pop("packed", 0)
        inputs = gqa_inputs(rng, b, s, p, hq, hkv, hd, lens, packed,
                            hd if extra.get("do_rotary") else 0, max(lens) if lens else None)
        inputs += [("position_ids", None), ("attention_bias", None),
                   ("head_sink", (rng.standard_normal(hq) * 2).astype(np.float32))]
        out.append(Case(f"group_query_attention_head_sink_{name}", "GroupQueryAttention", inputs,
                        ["output", "present_key", "present_value"], num_heads=hq,
                        kv_num_heads=hkv, **extra))
    return out


def gqa_qk_norm_cases(rng):
    """GroupQueryAttention's fused per-head Q/K norms (q_norm_weight, k_norm_weight: the CUDA
    exports of Qwen 3), which onnxruntime's CPU refuses: the reference is the unfused graph
    (tools/unfuse_gqa_norms.py). A decode step with rotary and the default epsilon; a prompt
    after a past, interleaved, with Q's and K's own epsilons, large enough to matter beside
    inputs scaled down; packed Q/K/V (V's heads untouched) with a padded row."""
    def f32(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    out = []
    hq, hkv, hd = 4, 2, 16
    for name, b, s, p, extra in [
            ("decode_rotary", 2, 1, 5, {"do_rotary": 1}),
            ("prompt_epsilons", 1, 3, 4, {"do_rotary": 1, "rotary_interleaved": 1,
                                          "q_norm_epsilon": 0.05, "k_norm_epsilon": 0.2,
                                          "scale_inputs": 0.2}),
            ("packed_padded", 2, 1, 4, {"packed": 1, "lens": [5, 3], "qk_norm_epsilon": 1e-5})]:
        extra = dict(extra)
        lens = extra.pop("lens", None)
        packed = extra.pop("packed", 0)
        x = extra.pop("scale_inputs", 1.0)
        inputs = gqa_inputs(rng, b, s, p, hq, hkv, hd, lens, packed,
                            hd if extra.get("do_rotary") else 0, scale=x)
        inputs += [(n, None) for n in ("position_ids", "attention_bias", "head_sink", "k_scale",
                                       "v_scale")]
        inputs += [("q_norm_weight", f32(hd)), ("k_norm_weight", f32(hd))]
        out.append(Case(f"group_query_attention_qk_norm_{name}", "GroupQueryAttention", inputs,
                        ["output", "present_key", "present_value"], num_heads=hq,
                        kv_num_heads=hkv, reference=unfuse_gqa_norms.unfuse, **extra))
    return out


def attention_cases(rng):
    """onnxruntime's Attention (its BERT and GPT-2 fusions): the Q, K and V projections in
    one weight, with and without the bias, a key padding mask [B, total] (a row masked
    throughout among them) and key counts [B], unidirectional with a past (present out),
    an attention bias, unequal qkv_hidden_sizes and a scale."""
    def f32(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    out = []
    h, d = 4, 32
    for name, b, s, p, extra in [
            ("plain", 2, 3, 0, {}),
            ("no_bias_mask_2d", 2, 3, 0, {"no_bias": 1, "mask": "2d"}),
            ("key_counts", 2, 4, 0, {"mask": "1d"}),
            ("gpt2_past", 2, 1, 4, {"unidirectional": 1}),
            ("gpt2_prefill_mask", 2, 3, 0, {"unidirectional": 1, "mask": "2d"}),
            ("attention_bias_scale", 1, 3, 0, {"attention_bias": 1, "scale": 0.3}),
            ("qkv_hidden_sizes", 2, 3, 0, {"qkv_hidden_sizes": [32, 32, 16]})]:
        extra = dict(extra)
        sizes = extra.get("qkv_hidden_sizes", [d, d, d])
        width = sum(sizes)
        total = p + s
        inputs = [("input", f32(b, s, d)), ("weights", (f32(d, width) / np.sqrt(d)).astype(np.float32)),
                  ("bias", None if extra.pop("no_bias", 0) else f32(width))]
        mask = extra.pop("mask", None)
        if mask == "2d":
            m = np.ones((b, total), np.int32)
            m[0, -1] = 0
            m[1, :] = 0
            inputs.append(("mask_index", m))
        elif mask == "1d":
            inputs.append(("mask_index", np.array([total - 1, 2], np.int32)))
        else:
            inputs.append(("mask_index", None))
        inputs.append(("past", f32(2, b, h, p, d // h) if p > 0 else None))
        inputs.append(("attention_bias", f32(1, h, s, total) if extra.pop("attention_bias", 0)
                       else None))
        outputs = ["output", "present"] if p > 0 else ["output"]
        out.append(Case(f"attention_{name}", "Attention", inputs, outputs, num_heads=h, **extra))
    return out


def multi_head_attention_cases(rng):
    """onnxruntime's MultiHeadAttention: self-attention with the projections' bias, a key
    padding mask (a row masked throughout among them), an attention bias broadcast over
    batch or heads, a past cache, unidirectional (causal after the past), a scale,
    cross-attention (a key sequence of its own) and K/V given per head [B, H, L, hd]."""
    def f32(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    out = []
    h, hd = 4, 8
    for name, b, s, l, p, extra in [
            ("self", 2, 3, 3, 0, {}),
            ("bias_padding_mask", 2, 3, 3, 0, {"bias": 1, "padding": "all"}),
            ("attention_bias_past", 2, 2, 2, 3, {"attention_bias": (1, h)}),
            ("unidirectional_past_scale", 1, 3, 3, 2, {"unidirectional": 1, "scale": 0.2}),
            ("unidirectional_padded_row", 2, 3, 3, 0, {"unidirectional": 1, "padding": "all"}),
            ("decode_padding_bias_heads", 2, 1, 1, 4,
             {"padding": "some", "attention_bias": (2, 1), "bias": 1}),
            ("cross", 2, 3, 5, 0, {"attention_bias": (2, h)}),
            ("cross_kv_in_heads", 2, 3, 5, 0, {"kv_4d": 1})]:
        extra = dict(extra)
        total = p + l
        kv_4d = extra.pop("kv_4d", 0)
        if kv_4d:
            inputs = [("query", f32(b, s, h * hd)), ("key", f32(b, h, l, hd)),
                      ("value", f32(b, h, l, hd))]
        else:
            inputs = [("query", f32(b, s, h * hd)), ("key", f32(b, l, h * hd)),
                      ("value", f32(b, l, h * hd))]
        inputs.append(("bias", f32(3 * h * hd) if extra.pop("bias", 0) else None))
        mask = None
        padding = extra.pop("padding", None)
        if padding:
            # Row 0 without its last key; row 1 without its first two, or without any.
            mask = np.ones((b, total), np.int32)
            mask[0, -1] = 0
            mask[1, :total if padding == "all" else 2] = 0
        inputs.append(("key_padding_mask", mask))
        ab = extra.pop("attention_bias", None)
        inputs.append(("attention_bias", f32(ab[0], ab[1], s, total) if ab else None))
        if p > 0:
            inputs += [("past_key", f32(b, h, p, hd)), ("past_value", f32(b, h, p, hd))]
        outputs = ["output", "present_key", "present_value"] if p > 0 else ["output"]
        out.append(Case(f"multi_head_attention_{name}", "MultiHeadAttention", inputs, outputs,
                        num_heads=h, **extra))
    return out


def gqa_inputs(rng, b, s, p, hq, hkv, hd, lens=None, packed=False, rotary_dim=0, total=None,
               scale=1.0):
    """GroupQueryAttention's inputs 0 to 8 (seeded draws in this order: Q/K/V, the pasts when
    p > 0, the rotary caches of rotary_dim when given): seqlens_k from `lens` (each row's
    keys; default all p + s) and total_sequence_length `total` (default p + s). `scale`
    multiplies the query and key (not the value)."""
    def f32(*shape, x=1.0):
        return (rng.standard_normal(shape) * x).astype(np.float32)

    full = p + s
    if packed:
        inputs = [("query", f32(b, s, (hq + 2 * hkv) * hd, x=scale)), ("key", None),
                  ("value", None)]
    else:
        inputs = [("query", f32(b, s, hq * hd, x=scale)), ("key", f32(b, s, hkv * hd, x=scale)),
                  ("value", f32(b, s, hkv * hd))]
    if p > 0:
        inputs += [("past_key", f32(b, hkv, p, hd)), ("past_value", f32(b, hkv, p, hd))]
    else:
        inputs += [("past_key", None), ("past_value", None)]
    inputs += [("seqlens_k", np.array(lens, np.int32) - 1 if lens else
                np.full((b,), full - 1, np.int32)),
               ("total_sequence_length", np.array([total or full], np.int32))]
    if rotary_dim:
        angles = rng.random((32, rotary_dim // 2)) * 3
        inputs += [("cos_cache", np.cos(angles).astype(np.float32)),
                   ("sin_cache", np.sin(angles).astype(np.float32))]
    else:
        inputs += [("cos_cache", None), ("sin_cache", None)]
    return inputs


def group_query_attention_cases(rng):
    """onnxruntime's GroupQueryAttention: prefill (no past), decode steps, a prompt after a
    past (onnxruntime wants batch 1 then), rotary (halves, interleaved, partial), packed
    QKV, a local window, softcap, one K/V head (multi-query). Head size 16 (onnxruntime
    wants a multiple of 16)."""
    out = []
    for name, b, s, p, hq, hkv, extra in [
            ("prefill", 2, 4, 0, 4, 2, {}),
            ("decode", 2, 1, 5, 4, 2, {}),
            ("prompt_after_past", 1, 3, 4, 4, 2, {}),
            ("rotary", 2, 1, 5, 4, 2, {"do_rotary": 1}),
            ("rotary_prefill_interleaved", 1, 5, 0, 4, 2,
             {"do_rotary": 1, "rotary_interleaved": 1}),
            ("rotary_partial", 1, 3, 2, 4, 2, {"do_rotary": 1, "rotary_dim": 16, "head_size": 32}),
            ("packed", 2, 1, 3, 4, 2, {"packed": 1}),
            ("local_window", 1, 6, 0, 4, 2, {"local_window_size": 3}),
            ("softcap_scale", 2, 1, 4, 4, 2, {"softcap": 2.0, "scale": 0.3}),
            ("smooth_softmax", 1, 4, 2, 4, 2, {"smooth_softmax": 1}),
            # The schema's default written out: onnxruntime's softmax is the plain one then.
            ("smooth_softmax_default", 1, 4, 2, 4, 2, {"smooth_softmax": -1}),
            ("multi_query", 2, 1, 3, 4, 1, {}),
            # Padded batches: rows with fewer keys than past + seq (seqlens_k + 1).
            ("decode_padded", 3, 1, 5, 4, 2, {"lens": [6, 4, 1]}),
            ("rotary_decode_padded", 2, 1, 4, 4, 2, {"do_rotary": 1, "lens": [5, 2]}),
            ("prefill_padded", 2, 4, 0, 4, 2, {"lens": [4, 2]})]:
        extra = dict(extra)
        lens = extra.pop("lens", None)
        packed = extra.pop("packed", 0)
        hd = extra.pop("head_size", 16)
        rotary_dim = extra.pop("rotary_dim", hd)
        inputs = gqa_inputs(rng, b, s, p, hq, hkv, hd, lens, packed,
                            rotary_dim if extra.get("do_rotary") else 0)
        while inputs[-1][1] is None:  # (no trailing absent inputs, as before)
            inputs.pop()
        out.append(Case(f"group_query_attention_{name}", "GroupQueryAttention", inputs,
                        ["output", "present_key", "present_value"], num_heads=hq,
                        kv_num_heads=hkv, **extra))
    return out


def windowed_cache_end(length, capacity, window):
    """Rows onnxruntime's windowed cache holds after `length` tokens (math::GqaWindowEnd)."""
    gap = capacity - window + 1
    return length if length <= capacity else length - gap * -(-(length - capacity) // gap)


def windowed_gqa_cases(rng):
    """GroupQueryAttention with sliding_window_cache = 1 (onnxruntime-genai's Gemma 2 and 3
    local layers): past and presents are a cache of capacity C holding each row's latest
    keys. Each case ends with full caches (onnxruntime leaves the rows past the end
    unwritten): filling, a step that drifts, one that compacts in place (C = window), a batch
    of rows at different lengths, a prefill past the capacity and a step of several tokens
    (through onnxruntime's staging cache), rotary at the absolute positions."""
    def f32(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    out = []
    hq, hkv, hd = 4, 2, 16
    for name, s, capacity, window, pasts, rotary in [
            ("drift", 1, 4, 3, [5], False),
            ("compact", 1, 3, 3, [5, 3], False),
            ("prefill_overflow", 5, 3, 3, [0], True),
            ("tokens_staged", 3, 4, 3, [3], True)]:
        b = len(pasts)
        for p in pasts:
            assert windowed_cache_end(p + s, capacity, window) == capacity, name
        inputs = [("query", f32(b, s, hq * hd)), ("key", f32(b, s, hkv * hd)),
                  ("value", f32(b, s, hkv * hd)),
                  ("past_key", f32(b, hkv, capacity, hd)), ("past_value", f32(b, hkv, capacity, hd)),
                  ("seqlens_k", np.array(pasts, np.int32) + s - 1),
                  ("total_sequence_length", np.array([max(pasts) + s], np.int32))]
        extra = {}
        if rotary:
            angles = rng.random((32, hd // 2)) * 3
            inputs += [("cos_cache", np.cos(angles).astype(np.float32)),
                       ("sin_cache", np.sin(angles).astype(np.float32))]
            extra["do_rotary"] = 1
        out.append(Case(f"group_query_attention_window_cache_{name}", "GroupQueryAttention",
                        inputs, ["output", "present_key", "present_value"], num_heads=hq,
                        kv_num_heads=hkv, local_window_size=window, sliding_window_cache=1,
                        **extra))
    return out


def quantize_blocks(rng, n, k, bits, block, zero_points):
    """Random codes packed as MatMulNBits reads them: B [N, blocks, blob], scales
    [N, blocks], zero points packed uint8 [N, ceil(blocks * bits / 8)] (or None)."""
    blocks = -(-k // block)
    per_byte = 8 // bits
    codes = rng.integers(0, 1 << bits, (n, blocks, block)).astype(np.uint8)
    b = np.zeros((n, blocks, block // per_byte), np.uint8)
    for j in range(block):
        b[:, :, j // per_byte] |= (codes[:, :, j] << (bits * (j % per_byte))).astype(np.uint8)
    scales = (rng.random((n, blocks)) * 0.1 + 0.01).astype(np.float32)
    zp = None
    if zero_points:
        values = rng.integers(0, 1 << bits, (n, blocks)).astype(np.uint8)
        zp = np.zeros((n, -(-blocks * bits // 8)), np.uint8)
        for j in range(blocks):
            zp[:, j // per_byte] |= (values[:, j] << (bits * (j % per_byte))).astype(np.uint8)
    return b, scales, zp


def matmul_nbits_cases(rng):
    out = []
    for name, m_shape, k, n, bits, block, zp_kind, scales_1d, bias in [
            ("4bit", (2, 3), 64, 16, 4, 16, "packed", True, False),
            ("4bit_2d_scales_bias", (2, 3), 64, 16, 4, 32, "packed", False, True),
            ("4bit_no_zero_points", (5,), 64, 8, 4, 16, None, True, False),
            ("4bit_float_zero_points", (1, 4), 64, 8, 4, 16, "float", True, True),
            ("4bit_partial_block", (2, 2), 40, 8, 4, 16, "packed", True, False),
            ("8bit", (2, 3), 64, 16, 8, 32, "packed", True, False),
            ("2bit", (3,), 64, 8, 2, 16, "packed", False, False),
            # Up to 3 rows of f32 with blocks of 32 and more: the vectorized int4 decode
            # (4 rows: the dequantized tiles)
            # (packed zero points of odd and even blocks, float ones, none: 8).
            ("4bit_decode_packed_zero_points", (1, 1), 160, 40, 4, 32, "packed", True, True),
            ("4bit_decode_rows_block_64", (3,), 256, 24, 4, 64, None, False, False),
            ("4bit_decode_float_zero_points", (2, 2), 96, 16, 4, 32, "float", True, True),
            ("4bit_decode_two_rows", (2,), 96, 16, 4, 32, "packed", True, True),
            # One row (decoding one sequence: its own loop, blocks alternating between two
            # accumulators; 3 and 4 blocks) with float zero points and with none.
            ("4bit_decode_row_float_zero_points", (1,), 96, 16, 4, 32, "float", True, True),
            ("4bit_decode_row_block_64", (1, 1), 256, 24, 4, 64, None, False, False),
            # 6 rows (the dequantizing path) over several column tiles (16 columns at K 4096,
            # the last one partial)
            ("4bit_column_tiles", (2, 3), 4096, 300, 4, 32, "packed", False, True),
            # f32 prefills (RowColumnDots): 70 rows, two passes of up to 64 (4-row tiles and
            # 2 rows left), columns in tiles of 4 and 3 left (at K 2048 tiles of 32: 39 is
            # one full and one partial), with each kind of zero point and blocks of 32 to 128
            ("4bit_prefill_packed_zero_points", (2, 35), 2048, 39, 4, 32, "packed", False, True),
            ("4bit_prefill_float_zero_points", (7, 10), 256, 21, 4, 64, "float", True, False),
            ("4bit_prefill_block_128", (9,), 512, 6, 4, 128, None, False, True),
            # 5 blocks (packed zero points of an odd count: 3 bytes a column), and K = 80
            # with blocks of 32 (the last partial: the BLAS path)
            ("4bit_prefill_odd_blocks", (6,), 160, 20, 4, 32, "packed", False, False),
            ("4bit_prefill_partial_block_32", (6,), 80, 8, 4, 32, "packed", False, True),
            # The CUDA GEMV's row counts (up to 8) and paths: 32-bit words of codes (K a
            # multiple of 8) and single codes (K = 36), then 9 rows past it.
            ("4bit_rows_8_float_zero_points", (8,), 128, 20, 4, 32, "float", True, True),
            ("4bit_rows_7_packed_zero_points", (7,), 96, 9, 4, 32, "packed", False, False),
            ("4bit_rows_8_k_36", (2, 4), 36, 10, 4, 16, "packed", True, True),
            ("8bit_rows_9", (9,), 64, 12, 8, 32, None, False, True)]:
        b, scales, zp = quantize_blocks(rng, n, k, bits, block, zp_kind == "packed")
        if zp_kind == "float":
            zp = (rng.random(scales.shape) * (1 << bits)).astype(np.float32)
        a = rng.standard_normal(m_shape + (k,)).astype(np.float32)
        inputs = [("A", a), ("B", b),
                  ("scales", scales.reshape(-1) if scales_1d else scales),
                  ("zero_points", None if zp is None else
                   (zp.reshape(-1) if scales_1d else zp))]
        if bias:
            inputs += [("g_idx", None), ("bias", rng.standard_normal(n).astype(np.float32))]
        out.append(Case(f"matmul_nbits_{name}", "MatMulNBits", inputs, ["Y"], K=k, N=n,
                        bits=bits, block_size=block))
    # accuracy_level 4: onnxruntime's CPU rounds A to int8 per block, where B is a constant
    # (prepacked; given B as a graph input it computes in f32): the reference holds B, the
    # scales and the zero points as initializers. tpc's integer kernel (AVX-512 VNNI, f32,
    # 4- and 8-bit codes in whole blocks of 16 and more, no float zero points; panels of 16
    # columns, 8 rows at a time) takes B as a graph input (as these tests feed it) from 8
    # rows on: 8 rows against 2 panels and 8 columns (8 bits), 9 (8 and 1) in blocks of 16
    # and 64, 12 (8 and 4) of 8-bit codes in blocks of 16, 16 and 17 rows; packed and no
    # zero points. Fewer rows (1 to 6; the same kernel when B is a constant: the unit
    # tests), 70 rows with float zero points, 2 bits and a partial block: A rounded, then
    # the f32 loops. Float zero points: f32 in onnxruntime, and so in tpc.
    for name, m_shape, k, n, bits, block, zp_kind, bias in [
            ("row", (1, 1), 256, 42, 4, 32, "packed", True),
            ("rows_3_block_64", (3,), 256, 24, 4, 64, None, True),
            ("rows_2_float_zero_points", (2,), 256, 18, 4, 32, "float", False),
            ("row_block_128", (1,), 512, 16, 4, 128, "packed", False),
            ("row_20_blocks", (1,), 640, 12, 4, 32, "packed", True),
            ("row_64_blocks", (1,), 2048, 10, 4, 32, None, False),
            ("rows_4_20_blocks_float_zero_points", (2, 2), 640, 10, 4, 32, "float", True),
            ("rows_16", (2, 8), 128, 21, 4, 32, "packed", True),
            ("rows_17", (17,), 128, 21, 4, 32, "packed", True),
            ("rows_70", (2, 35), 256, 39, 4, 64, "float", False),
            ("row_k_96", (1,), 96, 16, 4, 32, "packed", False),
            ("8bit", (2, 3), 64, 16, 8, 32, "packed", False),
            ("8bit_row", (1,), 256, 40, 8, 32, None, True),
            ("8bit_rows_9_block_64", (9,), 256, 20, 8, 64, "packed", False),
            ("8bit_rows_5_block_16", (5,), 64, 17, 8, 16, None, False),
            ("row_block_16", (1,), 128, 24, 4, 16, "packed", True),
            ("8bit_rows_8", (8,), 256, 40, 8, 32, None, True),
            ("8bit_rows_12_block_16", (12,), 64, 17, 8, 16, None, False),
            ("rows_9_block_16", (9,), 128, 24, 4, 16, "packed", True),
            ("2bit", (3,), 64, 8, 2, 32, None, True),
            # f32 in onnxruntime (no int8 kernel): float zero points (above), 2 bits in
            # blocks of 16
            ("2bit_block_16", (3,), 64, 8, 2, 16, "packed", True),
            ("partial_block", (2, 2), 40, 8, 4, 16, "packed", False)]:
        b, scales, zp = quantize_blocks(rng, n, k, bits, block, zp_kind == "packed")
        if zp_kind == "float":
            zp = (rng.random(scales.shape) * (1 << bits)).astype(np.float32)
        a = rng.standard_normal(m_shape + (k,)).astype(np.float32)
        constants = {"B": b, "scales": scales, "zero_points": zp}
        inputs = [("A", a), ("B", b), ("scales", scales), ("zero_points", zp)]
        if bias:
            inputs += [("g_idx", None), ("bias", rng.standard_normal(n).astype(np.float32))]
        out.append(Case(f"matmul_nbits_int8_{name}", "MatMulNBits", inputs, ["Y"], K=k, N=n,
                        bits=bits, block_size=block, accuracy_level=4,
                        reference=lambda model, c=constants: with_initializers(model, c)))
    return out


def with_initializers(model, arrays):
    """A copy of `model` whose graph inputs named in `arrays` are initializers of those
    values (None: left as they are)."""
    out = type(model)()
    out.CopyFrom(model)
    keep = [i for i in out.graph.input if arrays.get(i.name) is None]
    for name, a in arrays.items():
        if a is not None:
            out.graph.initializer.append(numpy_helper.from_array(a, name))
    del out.graph.input[:]
    out.graph.input.extend(keep)
    return out


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, ".cache",
                                                            "ort-contrib-node-tests")
    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    all_cases = cases()
    for c in all_cases:
        c.write(tmp)
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    print(f"wrote {len(all_cases)} tests to {out}/node (onnxruntime {ort.__version__})")


if __name__ == "__main__":
    main()
