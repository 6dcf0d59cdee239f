#!/usr/bin/env python3
"""Build the tpc model zoo: small random-weight models from real transformers
configs, exported to ONNX, with an ONNX-style test_data_set_0 per model.

    pip install -r tools/requirements-models.txt
    python3 tools/make_models.py --out models [--only NAME ...]

Every model is built with torch.manual_seed(0) and its test inputs come from a
fixed numpy RNG, so re-running with the pinned versions gives the same files.
"""
import argparse
import collections
import io
import os
import shutil
import sys
import warnings

import numpy as np
import onnx
import onnx.numpy_helper
import torch
from torch import nn

BATCH, SEQ = 2, 8
KV_STEP = 3  # new tokens of gpt2_kv's test inputs (past = SEQ - KV_STEP)
VOCAB = 512
MAX_BYTES = 2 * 1024 * 1024
LEGACY_OPSET = 17
DYNAMO_OPSET = 18


# --------------------------------------------------------------------------
# model definitions
# --------------------------------------------------------------------------

class LogitsOnly(nn.Module):
    """Wraps a HF *ForCausalLM model: input_ids -> logits."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids):
        return self.m(input_ids=input_ids, use_cache=False, return_dict=False)[0]


class LossOnly(nn.Module):
    """Wraps a HF *LMHeadModel: (input_ids, labels) -> scalar loss."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids, labels):
        return self.m(input_ids=input_ids, labels=labels, use_cache=False,
                      return_dict=False)[0]


class KvCache(nn.Module):
    """Wraps a HF *LMHeadModel as one decoding step with a KV cache, the cache
    as separate named tensors: (input_ids, past_key_0, past_value_0, ...) ->
    (logits, present_key_0, present_value_0, ...), each past/present
    [batch, heads, past, head_dim]."""

    def __init__(self, m):
        super().__init__()
        self.m = m
        self.layers = m.config.num_hidden_layers

    def forward(self, input_ids, *past):
        from transformers.cache_utils import DynamicCache
        cache = DynamicCache([(past[2 * i], past[2 * i + 1]) for i in range(self.layers)],
                             config=self.m.config)
        logits, present = self.m(input_ids=input_ids, past_key_values=cache,
                                 use_cache=True, return_dict=False)[:2]
        flat = []
        for layer in present.layers:
            flat += [layer.keys, layer.values]
        return (logits, *flat)


def kv_names(prefix, layers):
    return [f"{prefix}_{kv}_{i}" for i in range(layers) for kv in ("key", "value")]


class BertOut(nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids, attention_mask):
        out = self.m(input_ids=input_ids, attention_mask=attention_mask,
                     return_dict=False)
        return out[0], out[1]


def _patch_transformers():
    """transformers' mask builder checks position_ids for *packed* sequences
    (torch.diff + cumsum) when no attention_mask is given.  Outside tracing it
    returns None for ordinary inputs; while tracing it keeps the check in the
    graph, and aten::diff does not export with the TorchScript exporter.  Our
    inputs are never packed, so make it return None always (this is exactly
    what eager mode computes for them)."""
    import transformers.masking_utils as mu
    mu.find_packed_sequence_indices = lambda position_ids: None


def _ids(rng):
    return rng.integers(0, VOCAB, size=(BATCH, SEQ), dtype=np.int64)


def _mask():
    m = np.ones((BATCH, SEQ), dtype=np.int64)
    m[1, SEQ - 3:] = 0  # padding at the end of the second row
    return m


def build_mlp():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, SEQ, 64)).astype(np.float32)
    return model, {"x": x}, ["y"]


def _gpt2():
    _patch_transformers()
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=VOCAB,
                     n_positions=128, n_inner=None, tie_word_embeddings=True,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                     use_cache=False, attn_implementation="eager")
    torch.manual_seed(0)
    return GPT2LMHeadModel(cfg)


def build_gpt2():
    model = LogitsOnly(_gpt2())
    rng = np.random.default_rng(0)
    return model, {"input_ids": _ids(rng)}, ["logits"]


def build_gpt2_loss():
    model = LossOnly(_gpt2())
    rng = np.random.default_rng(0)
    ids = _ids(rng)
    labels = _ids(rng)
    return model, {"input_ids": ids, "labels": labels}, ["loss"]


def build_gpt2_kv():
    """gpt2's weights as one decoding step: the test inputs are the last
    KV_STEP of 8 tokens, with the cache of the first 8 - KV_STEP (computed by
    the same module from an empty cache)."""
    model = KvCache(_gpt2())
    model.eval()
    cfg = model.m.config
    layers, heads = cfg.n_layer, cfg.n_head
    rng = np.random.default_rng(0)
    ids = _ids(rng)
    past_len = SEQ - KV_STEP
    empty = np.zeros((BATCH, heads, 0, cfg.n_embd // heads), dtype=np.float32)
    with torch.no_grad():
        prefix = model(torch.from_numpy(ids[:, :past_len]),
                       *(torch.from_numpy(empty) for _ in range(2 * layers)))
    inputs = {"input_ids": np.ascontiguousarray(ids[:, past_len:])}
    for name, t in zip(kv_names("past", layers), prefix[1:]):
        inputs[name] = t.numpy()
    return model, inputs, ["logits"] + kv_names("present", layers)


def build_llama():
    from transformers import LlamaConfig, LlamaForCausalLM
    _patch_transformers()
    cfg = LlamaConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=176,
                      num_attention_heads=4, num_key_value_heads=2,
                      vocab_size=VOCAB, max_position_embeddings=128,
                      attention_dropout=0.0, tie_word_embeddings=False,
                      use_cache=False, attn_implementation="eager")
    torch.manual_seed(0)
    model = LogitsOnly(LlamaForCausalLM(cfg))
    rng = np.random.default_rng(0)
    return model, {"input_ids": _ids(rng)}, ["logits"]


def build_mistral():
    from transformers import MistralConfig, MistralForCausalLM
    _patch_transformers()
    cfg = MistralConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=176,
                        num_attention_heads=4, num_key_value_heads=2,
                        head_dim=16, vocab_size=VOCAB, max_position_embeddings=128,
                        # a real (but larger than any test seq) sliding window
                        # and Mistral-v0.2 rope_theta, so the graph differs
                        # from llama's: the mask gets the sliding-window ops
                        sliding_window=4096, rope_theta=1e6,
                        attention_dropout=0.0,
                        tie_word_embeddings=False, use_cache=False,
                        attn_implementation="eager")
    torch.manual_seed(0)
    model = LogitsOnly(MistralForCausalLM(cfg))
    rng = np.random.default_rng(0)
    return model, {"input_ids": _ids(rng)}, ["logits"]


def build_phi3(kv_heads=4):
    """Fused projections cut by Slice: qkv_proj sliced into Q, K, V with constant
    bounds, gate_up_proj halved by chunk (bounds from Shape in the exports). With
    kv_heads < 4 (grouped-query attention) the Q, K and V parts are unequal."""
    from transformers import Phi3Config, Phi3ForCausalLM
    _patch_transformers()
    cfg = Phi3Config(num_hidden_layers=2, hidden_size=64, intermediate_size=176,
                     num_attention_heads=4, num_key_value_heads=kv_heads,
                     vocab_size=VOCAB, max_position_embeddings=128,
                     original_max_position_embeddings=128, pad_token_id=0,
                     bos_token_id=1, eos_token_id=2,
                     attention_dropout=0.0, resid_pdrop=0.0, embd_pdrop=0.0,
                     tie_word_embeddings=False, use_cache=False,
                     attn_implementation="eager")
    torch.manual_seed(0)
    model = LogitsOnly(Phi3ForCausalLM(cfg))
    rng = np.random.default_rng(0)
    return model, {"input_ids": _ids(rng)}, ["logits"]


def build_phi3_gqa():
    return build_phi3(kv_heads=2)


def build_bert():
    from transformers import BertConfig, BertModel
    cfg = BertConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                     intermediate_size=256, vocab_size=VOCAB,
                     max_position_embeddings=128, hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0,
                     attn_implementation="eager")
    torch.manual_seed(0)
    model = BertOut(BertModel(cfg))
    rng = np.random.default_rng(0)
    return (model, {"input_ids": _ids(rng), "attention_mask": _mask()},
            ["last_hidden_state", "pooler_output"])


class VitOut(nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, pixel_values):
        out = self.m(pixel_values=pixel_values, return_dict=False)
        return out[0], out[1]


def build_vit():
    """A vision transformer: the patch embedding is a Conv (kernel = stride = patch)."""
    from transformers import ViTConfig, ViTModel
    cfg = ViTConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                    intermediate_size=256, image_size=32, patch_size=8, num_channels=3,
                    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                    attn_implementation="eager")
    torch.manual_seed(0)
    model = VitOut(ViTModel(cfg))
    rng = np.random.default_rng(0)
    pixels = rng.standard_normal((BATCH, 3, 32, 32)).astype(np.float32)
    return model, {"pixel_values": pixels}, ["last_hidden_state", "pooler_output"]


def build_bloom():
    """Heads folded into batch: BLOOM computes attention on [batch*heads, s, d] tensors
    (Reshape merging batch and heads, batched MatMul) with an ALiBi bias built per head
    and repeated over the batch (Tile)."""
    from transformers import BloomConfig, BloomForCausalLM
    _patch_transformers()
    cfg = BloomConfig(n_layer=2, hidden_size=64, n_head=4, vocab_size=VOCAB,
                      hidden_dropout=0.0, attention_dropout=0.0,
                      tie_word_embeddings=True, use_cache=False)
    torch.manual_seed(0)
    model = LogitsOnly(BloomForCausalLM(cfg))
    rng = np.random.default_rng(0)
    return model, {"input_ids": _ids(rng)}, ["logits"]


# name -> (builder, exporter)
MODELS = {
    "mlp": (build_mlp, "legacy"),
    "gpt2": (build_gpt2, "legacy"),
    "gpt2_loss": (build_gpt2_loss, "legacy"),
    "gpt2_kv": (build_gpt2_kv, "legacy"),
    "llama": (build_llama, "legacy"),
    "bert": (build_bert, "legacy"),
    "mistral": (build_mistral, "legacy"),
    "vit": (build_vit, "legacy"),
    "bloom": (build_bloom, "legacy"),
    "phi3": (build_phi3, "legacy"),
    "phi3_gqa": (build_phi3_gqa, "legacy"),
    "mlp_dynamo": (build_mlp, "dynamo"),
    "phi3_dynamo": (build_phi3, "dynamo"),
    "phi3_gqa_dynamo": (build_phi3_gqa, "dynamo"),
    "gpt2_dynamo": (build_gpt2, "dynamo"),
    "gpt2_kv_dynamo": (build_gpt2_kv, "dynamo"),
    "vit_dynamo": (build_vit, "dynamo"),
    "bloom_dynamo": (build_bloom, "dynamo"),
}


# --------------------------------------------------------------------------
# export
# --------------------------------------------------------------------------

def _dyn_axes_for(name, arr):
    # KV cache tensors are [batch, heads, past, head_dim]; present = past + seq
    # is named "total" (tpc infers past+seq itself); images [batch, channels, h, w]
    # keep their size (a ViT's patch count is fixed).
    if name == "pixel_values":
        return {0: "batch"}
    if name.startswith("past_"):
        return {0: "batch", 2: "past"}
    if name.startswith("present_"):
        return {0: "batch", 2: "total"}
    return {0: "batch", 1: "seq"} if arr.ndim >= 2 else {}


def export_legacy(model, inputs, out_names, path):
    args = tuple(torch.from_numpy(v) for v in inputs.values())
    dynamic_axes = {k: _dyn_axes_for(k, v) for k, v in inputs.items()}
    images = "pixel_values" in inputs
    for o in out_names:
        if o == "pooler_output" or images:
            dynamic_axes[o] = {0: "batch"}
        elif o != "loss":
            dynamic_axes[o] = _dyn_axes_for(o, np.zeros((1, 1)))
    torch.onnx.export(model, args, path, dynamo=False, opset_version=LEGACY_OPSET,
                      input_names=list(inputs), output_names=out_names,
                      dynamic_axes=dynamic_axes, do_constant_folding=True)


def export_dynamo(model, inputs, out_names, path):
    args = tuple(torch.from_numpy(v) for v in inputs.values())
    batch = torch.export.Dim("batch", min=1, max=1024)
    seq = torch.export.Dim("seq", min=2, max=128)
    past = torch.export.Dim("past", min=2, max=128)

    def dims(k):
        if k == "pixel_values":
            return {0: batch}
        if k.startswith("past_"):  # KV cache [batch, heads, past, head_dim]
            return {0: batch, 2: past}
        return {0: batch, 1: seq}

    # a tuple matching the positional args (dict keys would have to be the
    # forward() parameter names, which differ for nn.Sequential)
    dynamic_shapes = tuple(dims(k) for k in inputs)
    if isinstance(model, KvCache):  # forward(input_ids, *past): the cache is one tuple
        dynamic_shapes = (dynamic_shapes[0], dynamic_shapes[1:])
    prog = torch.onnx.export(model, args, dynamo=True, opset_version=DYNAMO_OPSET,
                             input_names=list(inputs), output_names=out_names,
                             dynamic_shapes=dynamic_shapes, external_data=False,
                             verbose=False)
    prog.optimize()
    proto = prog.model_proto
    # Rename the symbolic dims to batch/seq if the exporter used its own names
    # (s0, s1, ...): map by the first input's dims.
    first = proto.graph.input[0].type.tensor_type.shape.dim
    ren = {}
    for d, want in zip(first, ("batch", "seq")):
        if d.dim_param and d.dim_param != want:
            ren[d.dim_param] = want

    def _fix(vi):
        if not vi.type.HasField("tensor_type"):
            return
        for d in vi.type.tensor_type.shape.dim:
            if d.dim_param in ren:
                d.dim_param = ren[d.dim_param]

    if ren:
        for vi in list(proto.graph.input) + list(proto.graph.output) + list(proto.graph.value_info):
            _fix(vi)
    onnx.save(proto, path, save_as_external_data=False)


# --------------------------------------------------------------------------
# verification
# --------------------------------------------------------------------------

def op_counts(model):
    c = collections.Counter()

    def walk(g):
        for n in g.node:
            c[n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}::{n.op_type}"] += 1
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    walk(a.g)
                for sg in a.graphs:
                    walk(sg)

    walk(model.graph)
    return dict(sorted(c.items()))


def opset_of(model):
    return {(i.domain or "ai.onnx"): i.version for i in model.opset_import}


def write_test_data(dirpath, model, inputs, outputs):
    if os.path.isdir(dirpath):
        shutil.rmtree(dirpath)
    os.makedirs(dirpath)
    for k, (vi, arr) in enumerate(zip(model.graph.input, inputs)):
        t = onnx.numpy_helper.from_array(arr, vi.name)
        with open(os.path.join(dirpath, f"input_{k}.pb"), "wb") as f:
            f.write(t.SerializeToString())
    for k, (vi, arr) in enumerate(zip(model.graph.output, outputs)):
        t = onnx.numpy_helper.from_array(arr, vi.name)
        with open(os.path.join(dirpath, f"output_{k}.pb"), "wb") as f:
            f.write(t.SerializeToString())


def check_symbolic_dims(model, name):
    for vi in model.graph.input:
        dims = vi.type.tensor_type.shape.dim
        if vi.name.startswith("past_"):
            params, want = [d.dim_param for d in dims[:3:2]], ["batch", "past"]
        elif vi.name == "pixel_values":
            params, want = [d.dim_param for d in dims[:1]], ["batch"]
        else:
            params, want = [d.dim_param for d in dims[:2]], ["batch", "seq"]
        if params != want:
            raise RuntimeError(f"{name}: input {vi.name} dims {[(d.dim_param or d.dim_value) for d in dims]}"
                               f" are not symbolic {'/'.join(want)}")


def build_one(name, out_dir):
    import onnxruntime as ort
    builder, exporter = MODELS[name]
    model, inputs, out_names = builder()
    model.eval()
    with torch.no_grad():
        targs = tuple(torch.from_numpy(v) for v in inputs.values())
        ref = model(*targs)
    ref = ref if isinstance(ref, tuple) else (ref,)
    ref = [r.detach().numpy() for r in ref]

    path = os.path.join(out_dir, f"{name}.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.no_grad():
            if exporter == "legacy":
                export_legacy(model, inputs, out_names, path)
            else:
                export_dynamo(model, inputs, out_names, path)

    # Make sure everything is embedded in one file.
    m = onnx.load(path, load_external_data=True)
    if "pixel_values" in inputs:
        # The TorchScript exporter names the output dims it could not size behind the
        # dynamic batch (`LayerNormalization..._dim_1`); they are fixed by the image size.
        for vi, r in zip(m.graph.output, ref):
            for d, size in list(zip(vi.type.tensor_type.shape.dim, r.shape))[1:]:
                if d.dim_param:
                    d.dim_value = size
    onnx.save(m, path, save_as_external_data=False)
    for f in os.listdir(out_dir):
        if f.endswith(".data") and f.startswith(name):
            os.remove(os.path.join(out_dir, f))
    m = onnx.load(path)
    onnx.checker.check_model(m, full_check=True)
    check_symbolic_dims(m, name)
    size = os.path.getsize(path)
    if size >= MAX_BYTES:
        raise RuntimeError(f"{name}: {size} bytes >= 2 MiB")

    graph_in = [vi.name for vi in m.graph.input]
    if graph_in != list(inputs):
        raise RuntimeError(f"{name}: graph inputs {graph_in} != {list(inputs)}")
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    got = sess.run(None, {k: v for k, v in inputs.items()})
    if len(got) != len(ref):
        raise RuntimeError(f"{name}: {len(got)} outputs vs {len(ref)} torch outputs")
    for i, (g, r) in enumerate(zip(got, ref)):
        if g.shape != r.shape or not np.allclose(g, r, rtol=1e-4, atol=1e-5):
            err = np.abs(g.astype(np.float64) - r).max() if g.shape == r.shape else "shape"
            raise RuntimeError(f"{name}: output {i} mismatch vs torch (max abs err {err})")

    write_test_data(os.path.join(out_dir, name, "test_data_set_0"), m,
                    list(inputs.values()), ref)
    funcs = [f"{f.domain}::{f.name}" for f in m.functions]
    print(f"== {name}: {size} bytes, exporter={exporter}, opset={opset_of(m)}, "
          f"inputs={graph_in}, outputs={[o.name for o in m.graph.output]}, "
          f"local_functions={len(funcs)}")
    print(f"   ops={op_counts(m)}")
    if funcs:
        print(f"   functions={funcs}")
    return dict(name=name, size=size, exporter=exporter, opset=opset_of(m),
                ops=op_counts(m), functions=funcs)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="models", help="output folder (default: models)")
    ap.add_argument("--only", action="append", choices=sorted(MODELS),
                    help="build only this model (repeatable)")
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    names = a.only or list(MODELS)
    failed = []
    for n in names:
        try:
            build_one(n, a.out)
        except Exception as e:  # keep going, report at the end
            print(f"!! {n}: FAILED: {type(e).__name__}: {e}", file=sys.stderr)
            failed.append(n)
    if failed:
        print(f"failed: {failed}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
