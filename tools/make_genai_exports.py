#!/usr/bin/env python3
"""Real onnxruntime-genai exports of small random-weight decoders, for tests.

    python3 tools/make_genai_exports.py --out models/genai

For each architecture (Llama: GQA, SwiGLU, RMSNorm; Gemma: GeGLU, the embedding scaled by
sqrt(hidden), RMSNorm with its weight + 1; Gemma 2, with --archs gemma2: a sliding window of
3 on every other layer, whose cache is a windowed one of 3 rows, `sliding_window_cache`,
and softcapped scores and logits; gpt-oss, --archs gptoss: a mixture of 4 experts, 2 a
token (MoE, SwiGLU), attention sinks and Gemma 2's windows; LFM2-MoE, --archs lfm2moe:
an attention layer and a short-convolution one, whose state is carried between steps
(CausalConvWithState), each with 4 experts; Qwen 3.5, --archs qwen35 or qwen35moe: a
Gated DeltaNet layer, its convolution and recurrent states carried, beside a gated
attention layer with M-RoPE, and in the MoE form 4 experts beside a shared one; Gemma 4's
dense form, --archs gemma4: windowed and global layers of different head sizes, Q/K/V
norms, a scalar per layer) and
precision (fp32, int4: MatMulNBits with block 32), this saves a random-weight
transformers model (and a small WordLevel tokenizer, which the builder wants) to a temporary
folder, runs `python -m onnxruntime_genai.models.builder -e cpu` (--ep cuda: the builder's
GPU exports, e.g. `--precisions fp16`), and copies model.onnx, model.onnx.data and
genai_config.json to OUT/<arch>_<precision>/ (OUT/<arch>_<precision>_<ep> for another EP), with
test_data_set_0/: a prefill of 4 tokens after a cache of 3 (input_*.pb) and onnxruntime's
outputs (output_*.pb). onnxruntime's CPU refuses GroupQueryAttention's fused Q/K norms (the
CUDA exports of Qwen 3): their outputs come from the unfused graph (tools/unfuse_gqa_norms.py).

Needs torch, transformers >= 5, onnxruntime-genai (0.18 checked) and onnxruntime; `make
test` never runs this, it reads the committed outputs. Gemma 4 (--archs gemma4moe) needs a
transformers whose Gemma 4 configuration has global_head_dim (5.10.4 checked): from 5.20
it moved to per_layer_config, which the builder 0.18 cannot read; its dense form (--archs
gemma4, Gemma4Unified) a transformers that has it (5.11 to 5.14; 5.14.1 checked).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

ARCHS = {
    "llama": "LlamaForCausalLM",
    "gemma": "GemmaForCausalLM",
    "gemma2": "Gemma2ForCausalLM",
    # Not committed; tools/check_cached_decoders.py sweeps them.
    "gemma3": "Gemma3ForCausalLM",
    "mistral": "MistralForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
    "phi": "PhiForCausalLM",
    "phi3": "Phi3ForCausalLM",
    "granite": "GraniteForCausalLM",
    "olmo": "OlmoForCausalLM",
    "nemotron": "NemotronForCausalLM",
    "smollm3": "SmolLM3ForCausalLM",
    "ernie": "Ernie4_5ForCausalLM",
    "hunyuan": "HunYuanDenseV1ForCausalLM",
    "gptoss": "GptOssForCausalLM",
    "lfm2moe": "Lfm2MoeForCausalLM",
    "lfm2": "Lfm2ForCausalLM",
    "gemma4moe": "Gemma4ForConditionalGeneration",
    "gemma4": "Gemma4UnifiedForConditionalGeneration",
    "qwen35": "Qwen3_5ForConditionalGeneration",
    "qwen35moe": "Qwen3_5MoeForConditionalGeneration",
}
# Beyond SHAPE, by architecture: onnxruntime wants a windowed cache of at least the window's
# rows (the test data's past is 3 rows), a rotary cache of a multiple of 8 (partial rotary:
# head size 32), and pad ids inside the vocabulary.
CONFIG = {
    "gemma2": dict(sliding_window=3),
    "gemma3": dict(sliding_window=3, pad_token_id=0),
    "mistral": dict(sliding_window=None),
    "phi": dict(hidden_size=128, head_dim=32),
    "nemotron": dict(hidden_size=128, head_dim=32),
    "phi3": dict(pad_token_id=0, original_max_position_embeddings=128),
    "smollm3": dict(pad_token_id=0),
    # gpt-oss: 4 experts, 2 a token (MoE), attention sinks, a sliding window of 3 on every
    # other layer (its cache a windowed one of 3 rows).
    "gptoss": dict(num_local_experts=4, num_experts_per_tok=2, sliding_window=3,
                   layer_types=["sliding_attention", "full_attention"]),
    # LFM2-MoE: an attention layer and a short-convolution one (its state carried), each
    # with a mixture of 4 experts, 2 a token; their inner size 64 is two of the int4
    # export's blocks of 32 (QMoE), one for each of 2 ranks.
    "lfm2moe": dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64,
                    num_dense_layers=0, layer_types=["full_attention", "conv"]),
    # LFM2 (dense): an attention layer and a short-convolution one.
    "lfm2": dict(layer_types=["full_attention", "conv"]),
    # Gemma 4's MoE form (the builder's Gemma4MoEModel, text only): a windowed layer (head
    # size 16) and a global one (32, partial rotary), Q/K/V norms, each layer's dense MLP
    # and its 4 experts (2 a token, GeGLU, which onnxruntime's CPU refuses: the reference
    # writes them out, tools/unfuse_geglu_moe.py) in parallel; no per-layer inputs (the
    # builder writes none). The experts' inner size 64 is two int4 blocks of 32, one for
    # each of 2 ranks.
    "gemma4moe": dict(sliding_window=3, pad_token_id=0, global_head_dim=32,
                      num_global_key_value_heads=2, hidden_size_per_layer_input=0,
                      vocab_size_per_layer_input=256, enable_moe_block=True, num_experts=4,
                      top_k_experts=2, moe_intermediate_size=64,
                      # (the builder reads Gemma 4's logits weight from the embedding's)
                      tie_word_embeddings=True,
                      layer_types=["sliding_attention", "full_attention"]),
}
# Gemma 4's dense form (the builder's Gemma4Model, text only): a windowed layer (head size
# 16) and a global one (32, partial rotary), Q/K norms and a V norm without a scale, the
# layer's output scaled by its layer_scalar, tied embeddings (the int4 export's logits
# weight its GatherBlockQuantized embedding). KV-shared layers (num_kv_shared_layers > 0)
# have no K/V projections, which the builder 0.18 cannot export ("no attribute k_proj").
CONFIG["gemma4"] = dict(sliding_window=3, pad_token_id=0, global_head_dim=32,
                        num_global_key_value_heads=2, tie_word_embeddings=True,
                        layer_types=["sliding_attention", "full_attention"])
CONFIG["qwen35"] = dict(
    # Qwen 3.5 (text): a Gated DeltaNet layer (its short-convolution state and its
    # recurrent state carried: CausalConvWithState, LinearAttention) and a gated full
    # attention layer (M-RoPE positions [3, batch, seq], partial rotary 1/4, Q/K norms);
    # 2 key heads and 4 value heads of 16 in the linear layer.
    pad_token_id=0, linear_conv_kernel_dim=4, linear_key_head_dim=16, linear_value_head_dim=16,
    linear_num_key_heads=2, linear_num_value_heads=4,
    layer_types=["linear_attention", "full_attention"],
    rope_parameters={"rope_theta": 10000.0, "partial_rotary_factor": 0.25,
                     "rope_type": "default", "mrope_section": [1, 1, 0],
                     "mrope_interleaved": True})
# Qwen 3.5's mixture of experts: the same layers, each MLP 4 experts of inner size 64 (top
# 2) beside a shared expert with its sigmoid gate.
CONFIG["qwen35moe"] = dict(CONFIG["qwen35"], moe_intermediate_size=64,
                           shared_expert_intermediate_size=64, num_experts=4,
                           num_experts_per_tok=2)
# Multimodal models whose builder reads only the text model: their configuration is the
# text model's, under text_config.
TEXT_CONFIG = {"gemma4moe": "Gemma4Config", "gemma4": "Gemma4UnifiedConfig", "qwen35": "Qwen3_5Config",
               "qwen35moe": "Qwen3_5MoeConfig"}
# Architectures whose norm weights are drawn at random (save_hf).
RANDOM_NORMS = {"gemma4"}
# Configuration classes not named after the model's.
CONFIG_CLASS = {"gemma3": "Gemma3TextConfig"}


# --set KEY=VALUE: a larger shape for a benchmark (bench/genai_decode.py --model).
OVERRIDES = {}


def config_of(arch):
    return {**SHAPE, **CONFIG.get(arch, {}), **OVERRIDES}
SHAPE = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, vocab_size=256, max_position_embeddings=128,
             head_dim=16, tie_word_embeddings=False)
BATCH, SEQ, PAST = 1, 4, 3


def save_hf(arch, folder):
    import torch
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers
    torch.manual_seed(0)
    if arch in TEXT_CONFIG:
        config = getattr(transformers, TEXT_CONFIG[arch])(text_config=config_of(arch))
        config.architectures = [ARCHS[arch]]
    else:
        config = getattr(transformers, CONFIG_CLASS.get(
            arch, ARCHS[arch].replace("ForCausalLM", "Config")))(**config_of(arch))
    model = getattr(transformers, ARCHS[arch])(config).eval()
    if arch in RANDOM_NORMS:
        # Norm weights off their initial ones: after the int4 embedding (codes times a
        # block's scale) unit weights put activations exactly halfway between two int8
        # codes (127 · 4/8 = 63.5), where a last bit decides accuracy_level 4's rounding.
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "norm" in name:
                    p.add_(0.1 * torch.randn_like(p))
    model.save_pretrained(folder)
    vocab = {f"t{i}": i for i in range(config_of(arch)["vocab_size"])}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="t0"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="t0", bos_token="t1",
                                         eos_token="t2", pad_token="t0").save_pretrained(folder)


def write_test_data(model_path, out_dir, config=SHAPE):
    import numpy as np
    import onnx
    from onnx import numpy_helper
    import unfuse_gqa_norms
    # onnxruntime computes each MatMulNBits as its accuracy_level asks (the builder's 4:
    # activations rounded to int8 per block), as tpc does.
    sess = unfuse_gqa_norms.cpu_session(model_path)
    rng = np.random.default_rng(0)
    head_dim = config["head_dim"]
    feeds = {}
    for i in sess.get_inputs():
        if i.name == "input_ids":
            feeds[i.name] = rng.integers(0, config["vocab_size"], (BATCH, SEQ), dtype=np.int64)
        elif i.name == "attention_mask":
            feeds[i.name] = np.ones((BATCH, PAST + SEQ), dtype=np.int64)
        elif i.name == "position_ids":  # Optimum's exports; M-RoPE's [3, batch, seq]
            ids = np.tile(np.arange(PAST, PAST + SEQ, dtype=np.int64), (BATCH, 1))
            feeds[i.name] = np.stack([ids] * 3) if len(i.shape) == 3 else ids
        elif i.name.startswith("past_key_values"):
            # [batch, K/V heads, past, head size]: the layer's own heads and size where the
            # export names them (Gemma 4's global layers differ from its windowed ones).
            dtype = np.float16 if i.type == "tensor(float16)" else np.float32
            heads = i.shape[1] if isinstance(i.shape[1], int) else config["num_key_value_heads"]
            size = i.shape[3] if isinstance(i.shape[3], int) else head_dim
            feeds[i.name] = rng.standard_normal((BATCH, heads, PAST, size)).astype(dtype)
        elif i.name.startswith("past."):  # a convolution's or a recurrence's state
            dtype = np.float16 if i.type == "tensor(float16)" else np.float32
            feeds[i.name] = rng.standard_normal(
                [BATCH if isinstance(d, str) else d for d in i.shape]).astype(dtype)
        else:
            raise SystemExit(f"unexpected input {i.name}")
    outs = sess.run(None, feeds)
    data = os.path.join(out_dir, "test_data_set_0")
    os.makedirs(data, exist_ok=True)
    for k, i in enumerate(sess.get_inputs()):
        t = numpy_helper.from_array(feeds[i.name], i.name)
        open(os.path.join(data, f"input_{k}.pb"), "wb").write(t.SerializeToString())
    for k, (o, v) in enumerate(zip(sess.get_outputs(), outs)):
        t = numpy_helper.from_array(v, o.name)
        open(os.path.join(data, f"output_{k}.pb"), "wb").write(t.SerializeToString())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--archs", default="llama,gemma", help=", ".join(ARCHS))
    ap.add_argument("--precisions", default="fp32,int4")
    ap.add_argument("--ep", default="cpu",
                    help="the builder's execution provider; other than cpu, the folders are "
                         "<arch>_<precision>_<ep>")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a configuration value over the small shape (VALUE as JSON), e.g. "
                         "hidden_size=1024: a benchmark's model, not a committed one")
    ap.add_argument("--refresh", action="store_true",
                    help="only write test_data_set_0 again for the folders already in --out "
                         "(the same inputs, onnxruntime's outputs now): no export, no torch")
    args = ap.parse_args()
    for kv in args.set:
        key, value = kv.split("=", 1)
        OVERRIDES[key] = json.loads(value)
    if args.refresh:
        for arch in args.archs.split(","):
            for precision in args.precisions.split(","):
                dst = os.path.join(args.out, f"{arch}_{precision}")
                if os.path.exists(os.path.join(dst, "model.onnx")):
                    write_test_data(os.path.join(dst, "model.onnx"), dst, config_of(arch))
                    print(f"refreshed {dst}")
        return
    for arch in args.archs.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            hf = os.path.join(tmp, "hf")
            save_hf(arch, hf)
            for precision in args.precisions.split(","):
                built = os.path.join(tmp, precision)
                subprocess.run([sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", hf,
                                "-o", built, "-p", precision, "-e", args.ep,
                                "-c", os.path.join(tmp, "cache")],
                               check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                suffix = "" if args.ep == "cpu" else f"_{args.ep}"
                dst = os.path.join(args.out, f"{arch}_{precision}{suffix}")
                shutil.rmtree(dst, ignore_errors=True)
                os.makedirs(dst)
                for f in ("model.onnx", "model.onnx.data", "genai_config.json"):
                    if os.path.exists(os.path.join(built, f)):
                        shutil.copy(os.path.join(built, f), dst)
                write_test_data(os.path.join(dst, "model.onnx"), dst, config_of(arch))
                size = sum(os.path.getsize(os.path.join(r, f))
                           for r, _, fs in os.walk(dst) for f in fs)
                print(f"wrote {dst} ({size} bytes)")


if __name__ == "__main__":
    sys.exit(main())
