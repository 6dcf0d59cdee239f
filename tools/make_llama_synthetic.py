#!/usr/bin/env python3
"""Build a synthetic Llama-shaped decoder ONNX model with the `onnx` package
only (no torch), for benchmarks with many layers.

    python3 tools/make_llama_synthetic.py --layers 32 -o /tmp/llama32.onnx
    python3 tools/make_llama_synthetic.py --layers 2 -o /tmp/l2.onnx --check

The graph follows what the TorchScript exporter emits for LlamaForCausalLM
(eager attention, no KV cache), opset 17, input `input_ids` int64
[batch, seq], output `logits` float [batch, seq, vocab]:

  Gather(embed_tokens)
  per layer:
    RMSNorm        Pow, ReduceMean, Add(eps), Sqrt, Div, Mul(weight)
    q/k/v_proj     MatMul
    to heads       Reshape with shape Concat(Unsqueeze(Gather(Shape(x))), ...)
                   Transpose [0,2,1,3]
    RoPE           Slice(cos/sin tables to seq), Unsqueeze, Mul, Slice, Neg,
                   Concat (rotate_half), Mul, Add
    GQA            Unsqueeze, Expand, Reshape of K and V
    attention      Transpose(K), MatMul, Div(sqrt(head_dim)), Add(causal
                   mask sliced from an initializer), Softmax, MatMul,
                   Transpose, Reshape, o_proj MatMul, residual Add
    MLP            RMSNorm, gate MatMul, Sigmoid, Mul (SiLU), up MatMul, Mul,
                   down MatMul, residual Add
  final RMSNorm, lm_head MatMul

Weights are random (numpy seed --seed), stored as [in, out] initializers the
way the legacy exporter stores transposed Linear weights.  --check runs
onnx.checker and onnxruntime on batch=2, seq=8 and compares with a numpy
reference implementation.

--past adds a KV cache with Optimum's names: inputs
`past_key_values.{i}.key|value` float [batch, kv_heads, past, head_dim] and
outputs `present.{i}.key|value` [batch, kv_heads, past + seq, head_dim] (the
past concatenated with the new keys after RoPE, and the new values); RoPE
positions and the causal mask start at `past`. --check then runs the same
8 tokens once whole (past = 0) and as a prefix of 5 and a step of 3 fed the
prefix's present, and compares the step's logits and presents.

--gqa-op (implies --past) writes attention as onnxruntime-genai's model builder does: one
com.microsoft GroupQueryAttention per layer (rotary inside, do_rotary=1, from cos/sin
caches [max_pos, head_dim/2]) fed the Q/K/V projections, the past and seqlens_k /
total_sequence_length computed from an `attention_mask` input [batch, past + seq].

--int4 BLOCK quantizes every projection and the LM head to 4 bits with onnxruntime's
MatMulNBitsQuantizer (what onnxruntime-genai's model builder uses: com.microsoft
MatMulNBits, asymmetric, blocks of BLOCK along K; needs onnxruntime and onnx_ir).
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
INT64_MAX = np.iinfo(np.int64).max


class Builder:
    def __init__(self):
        self.nodes = []
        self.inits = []
        self.n = 0

    def name(self, hint):
        self.n += 1
        return f"{hint}_{self.n}"

    def op(self, op_type, inputs, prefix, n_out=1, **attrs):
        nm = f"{prefix}/{op_type}_{self.n}"
        outs = [f"{nm}_output_{i}" for i in range(n_out)]
        self.n += 1
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=nm, **attrs))
        return outs[0] if n_out == 1 else outs

    def const(self, value, prefix, dtype=np.int64):
        """A Constant node, as the TorchScript exporter emits for small values."""
        arr = np.array(value, dtype=dtype)
        out = f"{prefix}/Constant_{self.n}_output_0"
        self.n += 1
        self.nodes.append(helper.make_node(
            "Constant", [], [out], name=f"{prefix}/Constant_{self.n}",
            value=numpy_helper.from_array(arr, out)))
        return out

    def init(self, name, arr):
        self.inits.append(numpy_helper.from_array(arr, name))
        return name


def make_weights(args):
    rng = np.random.default_rng(args.seed)
    H, V, nh, nkv = args.hidden, args.vocab, args.heads, args.kv_heads
    hd = H // nh
    I = args.intermediate

    def w(*shape, scale=0.02):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    def norm_w():
        return (1.0 + 0.1 * rng.standard_normal(H)).astype(np.float32)

    W = {"embed": w(V, H, scale=1.0), "layers": []}
    for _ in range(args.layers):
        W["layers"].append(dict(
            in_norm=norm_w(), q=w(H, nh * hd), k=w(H, nkv * hd), v=w(H, nkv * hd),
            o=w(nh * hd, H), post_norm=norm_w(), gate=w(H, I), up=w(H, I), down=w(I, H)))
    W["norm"] = norm_w()
    W["lm_head"] = w(H, V)
    inv_freq = 1.0 / (args.rope_theta ** (np.arange(0, hd, 2, dtype=np.float64) / hd))
    t = np.arange(args.max_pos, dtype=np.float64)
    freqs = np.outer(t, inv_freq)
    emb = np.concatenate([freqs, freqs], axis=-1)
    W["cos"] = np.cos(emb).astype(np.float32)
    W["sin"] = np.sin(emb).astype(np.float32)
    mask = np.triu(np.full((args.max_pos, args.max_pos), np.finfo(np.float32).min,
                           dtype=np.float32), k=1)
    W["mask"] = mask
    return W


def build(args, W):
    H, V, nh, nkv = args.hidden, args.vocab, args.heads, args.kv_heads
    past = args.past or args.gqa_op
    hd = H // nh
    rep = nh // nkv
    eps = args.eps
    b = Builder()

    ids = "input_ids"
    b.init("model.embed_tokens.weight", W["embed"])
    b.init("model.rotary_emb.cos_cached", W["cos"])
    b.init("model.rotary_emb.sin_cached", W["sin"])
    b.init("model.causal_mask", W["mask"])

    # shapes from the input: batch, seq as 1-D tensors
    p = "/model"
    shp = b.op("Shape", [ids], p)
    bsz = b.op("Gather", [shp, b.const(0, p)], p, axis=0)
    seq = b.op("Gather", [shp, b.const(1, p)], p, axis=0)
    bsz_u = b.op("Unsqueeze", [bsz, b.const([0], p)], p)
    seq_u = b.op("Unsqueeze", [seq, b.const([0], p)], p)
    if past:
        # positions past .. past + seq: the cache's length from layer 0's past keys
        pshp = b.op("Shape", ["past_key_values.0.key"], p)
        past_u = b.op("Unsqueeze", [b.op("Gather", [pshp, b.const(2, p)], p, axis=0),
                                    b.const([0], p)], p)
        total_u = b.op("Add", [past_u, seq_u], p)
    else:
        past_u, total_u = b.const([0], p), seq_u

    h = b.op("Gather", ["model.embed_tokens.weight", ids], f"{p}/embed_tokens", axis=0)
    if args.gqa_op:
        # genai's attention inputs: the keys of each row minus one, and the total length,
        # from the mask; cos/sin caches of half the head size.
        b.init("model.rotary_emb.cos_cache", W["cos"][:, :hd // 2].copy())
        b.init("model.rotary_emb.sin_cache", W["sin"][:, :hd // 2].copy())
        pa = f"{p}/attn_mask_reformat"
        keys = b.op("ReduceSum", ["attention_mask", b.const([1], pa)], pa, keepdims=0)
        seqlens_k = b.op("Cast", [b.op("Sub", [keys, b.const(1, pa)], pa)], pa,
                         to=TensorProto.INT32)
        mshp = b.op("Shape", ["attention_mask"], pa)
        total_len = b.op("Cast", [b.op("Gather", [mshp, b.const(1, pa)], pa, axis=0)], pa,
                         to=TensorProto.INT32)

    # rotary tables and the causal mask sliced to seq
    pr = f"{p}/rotary_emb"
    cos = b.op("Slice", ["model.rotary_emb.cos_cached", past_u, total_u, b.const([0], pr)], pr)
    sin = b.op("Slice", ["model.rotary_emb.sin_cached", past_u, total_u, b.const([0], pr)], pr)
    cos = b.op("Unsqueeze", [cos, b.const([0, 1], pr)], pr)  # [1,1,S,hd]
    sin = b.op("Unsqueeze", [sin, b.const([0, 1], pr)], pr)
    pm = f"{p}/mask"
    starts = b.op("Concat", [past_u, b.const([0], pm)], pm, axis=0)
    ends = b.op("Concat", [total_u, total_u], pm, axis=0)
    mask = b.op("Slice", ["model.causal_mask", starts, ends, b.const([0, 1], pm)], pm)
    mask = b.op("Unsqueeze", [mask, b.const([0, 1], pm)], pm)  # [1,1,S,S]

    def rmsnorm(x, wname, prefix):
        sq = b.op("Pow", [x, b.const(2.0, prefix, np.float32)], prefix)
        mean = b.op("ReduceMean", [sq], prefix, axes=[-1], keepdims=1)
        var = b.op("Add", [mean, b.const(eps, prefix, np.float32)], prefix)
        rms = b.op("Sqrt", [var], prefix)
        y = b.op("Div", [x, rms], prefix)
        return b.op("Mul", [wname, y], prefix)

    def heads(x, n, prefix):
        shape = b.op("Concat", [bsz_u, seq_u, b.const([n], prefix), b.const([hd], prefix)],
                     prefix, axis=0)
        r = b.op("Reshape", [x, shape], prefix)
        return b.op("Transpose", [r], prefix, perm=[0, 2, 1, 3])  # [B,n,S,hd]

    def rope(x, prefix):
        x1 = b.op("Slice", [x, b.const([0], prefix), b.const([hd // 2], prefix),
                            b.const([3], prefix)], prefix)
        x2 = b.op("Slice", [x, b.const([hd // 2], prefix), b.const([INT64_MAX], prefix),
                            b.const([3], prefix)], prefix)
        rot = b.op("Concat", [b.op("Neg", [x2], prefix), x1], prefix, axis=-1)
        return b.op("Add", [b.op("Mul", [x, cos], prefix), b.op("Mul", [rot, sin], prefix)],
                    prefix)

    def repeat_kv(x, prefix):
        if rep == 1:
            return x
        u = b.op("Unsqueeze", [x, b.const([2], prefix)], prefix)  # [B,kv,1,S,hd]
        eshape = b.op("Concat", [bsz_u, b.const([nkv], prefix), b.const([rep], prefix),
                                 kv_len, b.const([hd], prefix)], prefix, axis=0)
        e = b.op("Expand", [u, eshape], prefix)
        rshape = b.op("Concat", [bsz_u, b.const([nh], prefix), kv_len, b.const([hd], prefix)],
                      prefix, axis=0)
        return b.op("Reshape", [e, rshape], prefix)

    for i, L in enumerate(W["layers"]):
        pl = f"{p}/layers.{i}"
        wn = f"model.layers.{i}"
        for k, arr in (("input_layernorm.weight", L["in_norm"]),
                       ("self_attn.q_proj.weight", L["q"]), ("self_attn.k_proj.weight", L["k"]),
                       ("self_attn.v_proj.weight", L["v"]), ("self_attn.o_proj.weight", L["o"]),
                       ("post_attention_layernorm.weight", L["post_norm"]),
                       ("mlp.gate_proj.weight", L["gate"]), ("mlp.up_proj.weight", L["up"]),
                       ("mlp.down_proj.weight", L["down"])):
            b.init(f"{wn}.{k}", arr)
        pa = f"{pl}/self_attn"
        x = rmsnorm(h, f"{wn}.input_layernorm.weight", f"{pl}/input_layernorm")
        # like the real export, each attention block re-derives batch/seq from
        # the shape of its own input (the closures below read these)
        lshp = b.op("Shape", [x], pa)
        bsz_u = b.op("Unsqueeze", [b.op("Gather", [lshp, b.const(0, pa)], pa, axis=0),
                                   b.const([0], pa)], pa)
        seq_u = b.op("Unsqueeze", [b.op("Gather", [lshp, b.const(1, pa)], pa, axis=0),
                                   b.const([0], pa)], pa)
        kv_len = b.op("Add", [past_u, seq_u], pa) if past else seq_u
        q = b.op("MatMul", [x, f"{wn}.self_attn.q_proj.weight"], f"{pa}/q_proj")
        k = b.op("MatMul", [x, f"{wn}.self_attn.k_proj.weight"], f"{pa}/k_proj")
        v = b.op("MatMul", [x, f"{wn}.self_attn.v_proj.weight"], f"{pa}/v_proj")
        if args.gqa_op:
            o = f"{pa}/GroupQueryAttention_output_0"
            b.nodes.append(helper.make_node(
                "GroupQueryAttention",
                [q, k, v, f"past_key_values.{i}.key", f"past_key_values.{i}.value", seqlens_k,
                 total_len, "model.rotary_emb.cos_cache", "model.rotary_emb.sin_cache"],
                [o, f"present.{i}.key", f"present.{i}.value"], name=f"{pa}/GroupQueryAttention",
                domain="com.microsoft", num_heads=nh, kv_num_heads=nkv, do_rotary=1))
            o = b.op("MatMul", [o, f"{wn}.self_attn.o_proj.weight"], f"{pa}/o_proj")
            h = b.op("Add", [h, o], pl)
            pmlp = f"{pl}/mlp"
            x = rmsnorm(h, f"{wn}.post_attention_layernorm.weight",
                        f"{pl}/post_attention_layernorm")
            g = b.op("MatMul", [x, f"{wn}.mlp.gate_proj.weight"], f"{pmlp}/gate_proj")
            g = b.op("Mul", [g, b.op("Sigmoid", [g], f"{pmlp}/act_fn")], f"{pmlp}/act_fn")
            u = b.op("MatMul", [x, f"{wn}.mlp.up_proj.weight"], f"{pmlp}/up_proj")
            d = b.op("MatMul", [b.op("Mul", [g, u], pmlp), f"{wn}.mlp.down_proj.weight"],
                     f"{pmlp}/down_proj")
            h = b.op("Add", [h, d], pl)
            continue
        q = rope(heads(q, nh, pa), pa)
        k = rope(heads(k, nkv, pa), pa)
        v = heads(v, nkv, pa)
        if past:
            # the present is the Concat itself, as in the exporters' graphs
            for kind, t in (("key", k), ("value", v)):
                b.nodes.append(helper.make_node(
                    "Concat", [f"past_key_values.{i}.{kind}", t], [f"present.{i}.{kind}"],
                    name=f"{pa}/Concat_present_{kind}", axis=2))
            k, v = f"present.{i}.key", f"present.{i}.value"
        k = repeat_kv(k, pa)
        v = repeat_kv(v, pa)
        kt = b.op("Transpose", [k], pa, perm=[0, 1, 3, 2])
        s = b.op("MatMul", [q, kt], pa)
        s = b.op("Div", [s, b.const(float(np.sqrt(hd)), pa, np.float32)], pa)
        s = b.op("Add", [s, mask], pa)
        pmat = b.op("Softmax", [s], pa, axis=-1)
        o = b.op("MatMul", [pmat, v], pa)
        o = b.op("Transpose", [o], pa, perm=[0, 2, 1, 3])
        oshape = b.op("Concat", [bsz_u, seq_u, b.const([nh * hd], pa)], pa, axis=0)
        o = b.op("Reshape", [o, oshape], pa)
        o = b.op("MatMul", [o, f"{wn}.self_attn.o_proj.weight"], f"{pa}/o_proj")
        h = b.op("Add", [h, o], pl)

        pmlp = f"{pl}/mlp"
        x = rmsnorm(h, f"{wn}.post_attention_layernorm.weight", f"{pl}/post_attention_layernorm")
        g = b.op("MatMul", [x, f"{wn}.mlp.gate_proj.weight"], f"{pmlp}/gate_proj")
        g = b.op("Mul", [g, b.op("Sigmoid", [g], f"{pmlp}/act_fn")], f"{pmlp}/act_fn")
        u = b.op("MatMul", [x, f"{wn}.mlp.up_proj.weight"], f"{pmlp}/up_proj")
        m = b.op("Mul", [g, u], pmlp)
        d = b.op("MatMul", [m, f"{wn}.mlp.down_proj.weight"], f"{pmlp}/down_proj")
        h = b.op("Add", [h, d], pl)

    b.init("model.norm.weight", W["norm"])
    b.init("lm_head.weight", W["lm_head"])
    x = rmsnorm(h, "model.norm.weight", f"{p}/norm")
    logits = b.op("MatMul", [x, "lm_head.weight"], "/lm_head")
    b.nodes.append(helper.make_node("Identity", [logits], ["logits"], name="/lm_head/Identity"))

    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])]
    if args.gqa_op:
        inputs.append(helper.make_tensor_value_info("attention_mask", TensorProto.INT64,
                                                    ["batch", "past + seq"]))
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "seq", V])]
    if past:
        for i in range(args.layers):
            for kind in ("key", "value"):
                inputs.append(helper.make_tensor_value_info(
                    f"past_key_values.{i}.{kind}", TensorProto.FLOAT,
                    ["batch", nkv, "past", hd]))
                outputs.append(helper.make_tensor_value_info(
                    f"present.{i}.{kind}", TensorProto.FLOAT,
                    ["batch", nkv, "past + seq", hd]))
    graph = helper.make_graph(b.nodes, f"llama_synthetic_{args.layers}l", inputs, outputs,
                              initializer=b.inits)
    opsets = [helper.make_opsetid("", OPSET)]
    if args.gqa_op:
        opsets.append(helper.make_opsetid("com.microsoft", 1))
    model = helper.make_model(graph, opset_imports=opsets,
                              producer_name="tpc-make_llama_synthetic")
    model.ir_version = 8
    return model


def reference(args, W, ids):
    """numpy Llama forward, for --check."""
    H, nh, nkv = args.hidden, args.heads, args.kv_heads
    hd = H // nh
    B, S = ids.shape

    def rms(x, w):
        return w * (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + args.eps))

    def rot(x):
        return np.concatenate([-x[..., hd // 2:], x[..., :hd // 2]], axis=-1)

    cos, sin = W["cos"][:S], W["sin"][:S]
    mask = W["mask"][:S, :S]
    h = W["embed"][ids]
    for L in W["layers"]:
        x = rms(h, L["in_norm"])
        q = (x @ L["q"]).reshape(B, S, nh, hd).transpose(0, 2, 1, 3)
        k = (x @ L["k"]).reshape(B, S, nkv, hd).transpose(0, 2, 1, 3)
        v = (x @ L["v"]).reshape(B, S, nkv, hd).transpose(0, 2, 1, 3)
        q = q * cos + rot(q) * sin
        k = k * cos + rot(k) * sin
        k = np.repeat(k, nh // nkv, axis=1)
        v = np.repeat(v, nh // nkv, axis=1)
        s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(hd) + mask
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        o = (s @ v).transpose(0, 2, 1, 3).reshape(B, S, H)
        h = h + o @ L["o"]
        x = rms(h, L["post_norm"])
        g = x @ L["gate"]
        h = h + ((g / (1 + np.exp(-g))) * (x @ L["up"])) @ L["down"]
    return rms(h, W["norm"]) @ W["lm_head"]


def check_cache(a, sess, ids):
    """The 8 tokens at once (past = 0) against a prefix of 5 and a step of 3."""
    hd = a.hidden // a.heads
    if a.gqa_op:
        ids = ids[:1]  # onnxruntime's GroupQueryAttention: batch 1 for a prompt after a past

    def feeds(tokens, cache):
        f = {"input_ids": tokens}
        if a.gqa_op:
            f["attention_mask"] = np.ones((tokens.shape[0], cache[0].shape[2] + tokens.shape[1]),
                                          np.int64)
        for i in range(a.layers):
            for j, kind in enumerate(("key", "value")):
                f[f"past_key_values.{i}.{kind}"] = cache[2 * i + j]
        return f

    empty = [np.zeros((ids.shape[0], a.kv_heads, 0, hd), np.float32)] * (2 * a.layers)
    whole = sess.run(None, feeds(ids, empty))
    prefix = sess.run(None, feeds(ids[:, :5], empty))
    step = sess.run(None, feeds(ids[:, 5:], prefix[1:]))
    ok = np.allclose(step[0], whole[0][:, 5:], rtol=1e-4, atol=1e-4)
    for got, want in zip(step[1:], whole[1:]):
        ok = ok and got.shape == want.shape and np.allclose(got, want, rtol=1e-4, atol=1e-4)
    print(f"check: checker ok, prefix 5 + step 3 {'equals' if ok else 'DIFFERS FROM'} "
          f"8 tokens at once (logits and {2 * a.layers} presents)")
    return 0 if ok else 1


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-o", "--output", required=True, help="output .onnx file")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--intermediate", type=int, default=None,
                    help="MLP size (default: 8/3*hidden rounded up to a multiple of 16)")
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--max-pos", type=int, default=128,
                    help="rows of the cos/sin tables and causal mask (max seq)")
    ap.add_argument("--rope-theta", type=float, default=10000.0)
    ap.add_argument("--eps", type=float, default=1e-6)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--int4", type=int, metavar="BLOCK", default=0,
                    help="quantize the MatMuls to 4 bits in blocks of BLOCK (MatMulNBits)")
    ap.add_argument("--gqa-op", action="store_true",
                    help="attention as com.microsoft GroupQueryAttention (genai's builder)")
    ap.add_argument("--past", action="store_true",
                    help="a KV cache: past_key_values.* inputs, present.* outputs")
    ap.add_argument("--check", action="store_true",
                    help="run onnx.checker and onnxruntime (batch 2, seq 8) vs numpy")
    a = ap.parse_args(argv)
    if a.hidden % a.heads or a.heads % a.kv_heads or (a.hidden // a.heads) % 2:
        ap.error("need hidden % heads == 0, heads % kv_heads == 0 and an even head_dim")
    if a.intermediate is None:
        a.intermediate = -(-(a.hidden * 8 // 3) // 16) * 16

    W = make_weights(a)
    model = build(a, W)
    if a.int4:
        import logging
        logging.disable(logging.INFO)  # the quantizer logs every node
        from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
        quantizer = MatMulNBitsQuantizer(model, block_size=a.int4, is_symmetric=False)
        quantizer.process()
        model = quantizer.model.model
    weight_bytes = sum(int(np.prod(t.dims)) * 4 for t in model.graph.initializer)
    if weight_bytes >= 2 ** 30:
        # Past protobuf's 2 GiB: the weights go to OUTPUT.data (ONNX external data).
        onnx.save(model, a.output, save_as_external_data=True, all_tensors_to_one_file=True,
                  location=os.path.basename(a.output) + ".data", size_threshold=1024)
    else:
        onnx.save(model, a.output)
    n_params = sum(int(np.prod(t.dims)) for t in model.graph.initializer)
    print(f"wrote {a.output}: {os.path.getsize(a.output)} bytes, {len(model.graph.node)} nodes, "
          f"{n_params} initializer elements, layers={a.layers} hidden={a.hidden} "
          f"heads={a.heads} kv_heads={a.kv_heads} intermediate={a.intermediate} vocab={a.vocab}")

    if a.check:
        import onnxruntime as ort
        onnx.checker.check_model(a.output, full_check=True)
        ids = np.random.default_rng(0).integers(0, a.vocab, size=(2, 8), dtype=np.int64)
        sess = ort.InferenceSession(a.output, providers=["CPUExecutionProvider"])
        if a.past or a.gqa_op:
            return check_cache(a, sess, ids)
        (got,) = sess.run(None, {"input_ids": ids})
        want = reference(a, W, ids)
        err = float(np.abs(got - want).max())
        ok = got.shape == want.shape and np.allclose(got, want, rtol=1e-4, atol=1e-4)
        print(f"check: checker ok, onnxruntime logits {list(got.shape)}, "
              f"max abs err vs numpy {err:.3g}: {'OK' if ok else 'MISMATCH'}")
        return 0 if ok else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
