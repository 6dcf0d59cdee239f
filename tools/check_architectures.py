#!/usr/bin/env python3
"""Export tiny random-weight models of many Hugging Face architectures with both torch
exporters, compile each with tp-compile at several N, and run tp-run --check-against
(the unsharded run) on it, then compare its outputs with onnxruntime's run of the export:
does tpc shard them with no annotation, and run them right?

    pip install torch transformers onnx onnxscript onnxruntime   # a venv of its own
    python3 tools/check_architectures.py --bin build [--only qwen2 gemma2] [--tp 2 4]
        [--backend cuda --tp-run build/tests/tp_run_cuda_host] [--dtype f16]
        [--ranks processes] [--compile-args "--objective time"]

Not part of make test (it needs torch). Prints one line per export and N, and the
exports that failed; exit status 1 when one did. An export that torch itself refuses is
listed, not counted as tpc's failure; so is one that onnxruntime refuses (an invalid
export), with what tp-compile says of it. Each architecture is a small config (hidden 64, 4
heads, 2 layers, vocabulary 512, or the family's like) of a transformers class. The
inputs by family (INPUTS): token ids [batch, seq] (decoders, encoders), and
decoder_input_ids [batch, tgt] (encoder-decoders); pixel_values [batch, 3, 32, 32]
(vision); raw samples [batch, samples] (speech); mel frames [batch, 16, 32] and
decoder_input_ids (Whisper). The named dims are dynamic; the checks bind them (DIMS) and
draw the inputs with numpy (ids in [0, 32), floats in [-1, 1)).
"""
import argparse
import os
import subprocess
import sys
import tempfile
import warnings

warnings.filterwarnings("ignore")

BASE = dict(hidden_size=64, num_attention_heads=4, num_hidden_layers=2, intermediate_size=128,
            vocab_size=512, max_position_embeddings=64)


SEQ2SEQ = dict(d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
               decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128,
               vocab_size=512, max_position_embeddings=64, decoder_start_token_id=0,
               pad_token_id=1)
CNN = dict(hidden_sizes=[16, 32], depths=[1, 1], num_labels=10)
VIT = dict(image_size=32, patch_size=8, hidden_size=64, num_hidden_layers=2,
           num_attention_heads=4, intermediate_size=128, num_labels=10)
WAV2VEC = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
               conv_dim=(32, 32), conv_stride=(5, 2), conv_kernel=(10, 3),
               num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4,
               do_stable_layer_norm=True, feat_extract_norm="layer")


def decoder(cls, **kw):
    c = dict(BASE)
    c.update(kw)
    return ("causal", cls, c)


ARCHITECTURES = {
    "qwen2": decoder("Qwen2Config", num_key_value_heads=2),
    "qwen3": decoder("Qwen3Config", num_key_value_heads=2, head_dim=16),
    # Mixtures of experts: 4 experts, top 2 (Optimum's Qwen 3 MoE loops over every expert,
    # with NonZero picking its tokens; transformers 5 exports batched_mm, see build()).
    "qwen3_moe": decoder("Qwen3MoeConfig", num_key_value_heads=2, head_dim=16,
                         moe_intermediate_size=64, num_experts=4, num_experts_per_tok=2,
                         decoder_sparse_step=1, mlp_only_layers=[]),
    "mixtral": decoder("MixtralConfig", num_key_value_heads=2, num_local_experts=4,
                       num_experts_per_tok=2),
    "olmoe": decoder("OlmoeConfig", num_key_value_heads=2, num_experts=4,
                     num_experts_per_tok=2),
    "gemma2": decoder("Gemma2Config", num_key_value_heads=2, head_dim=16),
    "gemma3": decoder("Gemma3TextConfig", num_key_value_heads=2, head_dim=16),
    "falcon": ("causal", "FalconConfig",
               dict(hidden_size=64, num_attention_heads=4, num_hidden_layers=2, vocab_size=512)),
    "falcon_new": ("causal", "FalconConfig",
                   dict(hidden_size=64, num_attention_heads=4, num_hidden_layers=2,
                        vocab_size=512, new_decoder_architecture=True, num_kv_heads=2)),
    "gpt_neox": decoder("GPTNeoXConfig"),
    "gptj": ("causal", "GPTJConfig",
             dict(n_embd=64, n_head=4, n_layer=2, vocab_size=512, n_positions=64, rotary_dim=8)),
    "opt": ("causal", "OPTConfig",
            dict(hidden_size=64, num_attention_heads=4, num_hidden_layers=2, ffn_dim=128,
                 vocab_size=512, max_position_embeddings=64, word_embed_proj_dim=64)),
    "stablelm": decoder("StableLmConfig", num_key_value_heads=2),
    "starcoder2": decoder("Starcoder2Config", num_key_value_heads=2),
    "olmo2": decoder("Olmo2Config", num_key_value_heads=2),
    "granite": decoder("GraniteConfig", num_key_value_heads=2),
    "phi": decoder("PhiConfig"),
    "codegen": ("causal", "CodeGenConfig",
                dict(n_embd=64, n_head=4, n_layer=2, vocab_size=512, n_positions=64,
                     rotary_dim=8, n_ctx=64)),
    "mpt": ("causal", "MptConfig", dict(d_model=64, n_heads=4, n_layers=2, vocab_size=512,
                                        max_seq_len=64)),
    "cohere": decoder("CohereConfig", num_key_value_heads=2),
    "gpt_bigcode": ("causal", "GPTBigCodeConfig",
                    dict(n_embd=64, n_head=4, n_layer=2, vocab_size=512, n_positions=64)),
    # Added 2026-12: the newer decoders of transformers 5.
    "deepseek_v3": decoder("DeepseekV3Config", num_key_value_heads=4, q_lora_rank=32,
                           kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=16,
                           v_head_dim=16, moe_intermediate_size=64, n_routed_experts=4,
                           num_experts_per_tok=2, n_shared_experts=1, first_k_dense_replace=1,
                           n_group=1, topk_group=1),
    "glm4": decoder("Glm4Config", num_key_value_heads=2, head_dim=16, pad_token_id=0),
    "glm4_moe": decoder("Glm4MoeConfig", num_key_value_heads=2, head_dim=16,
                        moe_intermediate_size=64, n_routed_experts=4, num_experts_per_tok=2,
                        n_shared_experts=1, first_k_dense_replace=1, n_group=1, topk_group=1),
    "smollm3": decoder("SmolLM3Config", num_key_value_heads=2, pad_token_id=0),
    "ministral": decoder("MinistralConfig", num_key_value_heads=2, head_dim=16),
    "qwen2_moe": decoder("Qwen2MoeConfig", num_key_value_heads=2, moe_intermediate_size=64,
                         shared_expert_intermediate_size=64, num_experts=4,
                         num_experts_per_tok=2, decoder_sparse_step=1, mlp_only_layers=[]),
    "phimoe": decoder("PhimoeConfig", num_key_value_heads=2, num_local_experts=4,
                      num_experts_per_tok=2),
    "granitemoe": decoder("GraniteMoeConfig", num_key_value_heads=2, num_local_experts=4,
                          num_experts_per_tok=2),
    "granitemoeshared": decoder("GraniteMoeSharedConfig", num_key_value_heads=2,
                                num_local_experts=4, num_experts_per_tok=2,
                                shared_intermediate_size=64),
    "ernie4_5": decoder("Ernie4_5Config", num_key_value_heads=2, head_dim=16),
    "ernie4_5_moe": decoder("Ernie4_5_MoeConfig", num_key_value_heads=2,
                            moe_intermediate_size=64, moe_num_experts=4, moe_k=2,
                            moe_num_shared_experts=1, moe_layer_start_index=0),
    "exaone4": decoder("Exaone4Config", num_key_value_heads=2, head_dim=16),
    "olmo3": decoder("Olmo3Config", num_key_value_heads=2),
    "cohere2": decoder("Cohere2Config", num_key_value_heads=2),
    "helium": decoder("HeliumConfig", num_key_value_heads=2, head_dim=16),
    "hunyuan_dense": decoder("HunYuanDenseV1Config", num_key_value_heads=2, head_dim=16),
    "seed_oss": decoder("SeedOssConfig", num_key_value_heads=2, head_dim=16),
    "apertus": decoder("ApertusConfig", num_key_value_heads=2),
    "nemotron": decoder("NemotronConfig", num_key_value_heads=2, head_dim=16),
    "arcee": decoder("ArceeConfig", num_key_value_heads=2),
    "bitnet": decoder("BitNetConfig", num_key_value_heads=2),
    "diffllama": decoder("DiffLlamaConfig", num_key_value_heads=2),
    "vaultgemma": decoder("VaultGemmaConfig", num_key_value_heads=2, head_dim=16),
    "nanochat": decoder("NanoChatConfig", num_key_value_heads=2),
    "gpt_neo": ("causal", "GPTNeoConfig",
                dict(hidden_size=64, num_layers=2, num_heads=4, window_size=4, vocab_size=512,
                     attention_types=[[["global", "local"], 1]], intermediate_size=128,
                     max_position_embeddings=64)),
    "biogpt": decoder("BioGptConfig"),
    "xglm": ("causal", "XGLMConfig", dict(d_model=64, num_layers=2, attention_heads=4,
                                          ffn_dim=128, vocab_size=512,
                                          max_position_embeddings=64)),
    "persimmon": decoder("PersimmonConfig"),
    # State-space and recurrent layers (2026-12-07): TorchScript's exports of the Mamba
    # family are invalid (Tile repeats [1, 1], Transpose perm [0, -2, -1, 1]: onnxruntime
    # and tp-compile refuse them); dynamo specializes the sequence to the traced 8 (the
    # checks then keep it), except Mamba 2's chunked scan.
    "mamba": decoder("MambaConfig", state_size=16, expand=2, conv_kernel=4),
    "mamba2": decoder("Mamba2Config", num_heads=8, head_dim=16, expand=2, n_groups=1,
                      state_size=16, chunk_size=4),
    "falcon_mamba": decoder("FalconMambaConfig", state_size=16, expand=2, conv_kernel=4),
    "bamba": decoder("BambaConfig", num_key_value_heads=2, mamba_n_heads=8, mamba_d_head=16,
                     mamba_n_groups=1, mamba_d_state=16, mamba_chunk_size=4,
                     attn_layer_indices=[1]),
    "jamba": decoder("JambaConfig", num_key_value_heads=2, num_experts=4, num_experts_per_tok=2,
                     attn_layer_period=2, attn_layer_offset=1, expert_layer_period=2,
                     expert_layer_offset=1, mamba_d_state=16, mamba_expand=2,
                     use_mamba_kernels=False),
    "nemotron_h": decoder("NemotronHConfig", num_key_value_heads=2, head_dim=16,
                          mamba_num_heads=8, mamba_head_dim=16, n_groups=1, ssm_state_size=16,
                          chunk_size=4, hybrid_override_pattern="M*"),
    "granitemoehybrid": decoder("GraniteMoeHybridConfig", num_key_value_heads=2,
                                num_local_experts=4, num_experts_per_tok=2, mamba_n_heads=8,
                                mamba_d_head=16, mamba_n_groups=1, mamba_d_state=16,
                                mamba_chunk_size=4, layer_types=["mamba", "attention"]),
    "qwen3_next": decoder("Qwen3NextConfig", num_key_value_heads=2, head_dim=16,
                          linear_num_key_heads=2, linear_num_value_heads=4,
                          linear_key_head_dim=16, linear_value_head_dim=16, num_experts=4,
                          num_experts_per_tok=2, moe_intermediate_size=64,
                          shared_expert_intermediate_size=64,
                          layer_types=["linear_attention", "full_attention"]),
    "qwen3_5_text": decoder("Qwen3_5TextConfig", num_key_value_heads=2, head_dim=16,
                            linear_num_key_heads=2, linear_num_value_heads=4,
                            linear_key_head_dim=16, linear_value_head_dim=16,
                            layer_types=["linear_attention", "full_attention"]),
    "lfm2": decoder("Lfm2Config", num_key_value_heads=2, layer_types=["conv", "full_attention"],
                    block_ff_dim=128),
    "lfm2_moe": decoder("Lfm2MoeConfig", num_key_value_heads=2,
                        layer_types=["conv", "full_attention"], num_experts=4,
                        num_experts_per_tok=2, moe_intermediate_size=64, num_dense_layers=1),
    "recurrent_gemma": decoder("RecurrentGemmaConfig", num_key_value_heads=1, lru_width=64,
                               attention_window_size=16, block_types=["recurrent", "attention"]),
    "minimax": decoder("MiniMaxConfig", num_key_value_heads=2, head_dim=16, num_local_experts=4,
                       num_experts_per_tok=2, layer_types=["linear_attention", "full_attention"],
                       block_size=4),
    "rwkv": ("causal", "RwkvConfig", dict(hidden_size=64, num_hidden_layers=2, vocab_size=512,
                                          attention_hidden_size=64, intermediate_size=128,
                                          context_length=64)),
    "xlstm": ("causal", "xLSTMConfig", dict(hidden_size=64, num_heads=4, num_blocks=2,
                                            vocab_size=512, mode="inference", chunk_size=4)),
    # More decoders and mixtures of experts of transformers 5.25.
    "hunyuan_moe": decoder("HunYuanMoEV1Config", num_key_value_heads=2, head_dim=16,
                           num_experts=4, moe_topk=2),
    "gpt_oss": decoder("GptOssConfig", num_key_value_heads=2, head_dim=16, num_local_experts=4,
                       num_experts_per_tok=2, sliding_window=4,
                       layer_types=["sliding_attention", "full_attention"]),
    "jais2": decoder("Jais2Config", num_key_value_heads=2),
    "cwm": decoder("CwmConfig", num_key_value_heads=2, head_dim=16, sliding_window=4),
    "glm4_moe_lite": decoder("Glm4MoeLiteConfig", num_key_value_heads=4, n_routed_experts=4,
                             num_experts_per_tok=2, moe_intermediate_size=64,
                             first_k_dense_replace=1, n_group=1, topk_group=1),
    "afmoe": decoder("AfmoeConfig", num_key_value_heads=2, head_dim=16, num_experts=4,
                     num_experts_per_tok=2, moe_intermediate_size=64, num_dense_layers=1),
    "solar_open": decoder("SolarOpenConfig", num_key_value_heads=2, head_dim=16),
    "longcat_flash": decoder("LongcatFlashConfig", num_key_value_heads=4, n_routed_experts=4,
                             moe_topk=2),
    "ministral3": decoder("Ministral3Config", num_key_value_heads=2, head_dim=16),
    "modernbert": ("masked", "ModernBertConfig",
                   dict(BASE, global_attn_every_n_layers=2, local_attention=8, pad_token_id=0)),
    "roberta": ("masked", "RobertaConfig", dict(BASE, max_position_embeddings=80)),
    "distilbert": ("masked", "DistilBertConfig",
                   dict(dim=64, n_heads=4, n_layers=2, hidden_dim=128, vocab_size=512,
                        max_position_embeddings=64)),
    "electra": ("masked", "ElectraConfig", dict(BASE, embedding_size=64)),
    "albert": ("masked", "AlbertConfig", dict(BASE, embedding_size=32)),
    "deberta_v2": ("masked", "DebertaV2Config", dict(BASE)),
    "mpnet": ("masked", "MPNetConfig", dict(BASE, max_position_embeddings=80)),
    "t5_encoder": ("t5", "T5Config", dict(d_model=64, num_heads=4, num_layers=2, d_ff=128,
                                          d_kv=16, vocab_size=512)),
    # Encoder-decoders: input_ids and decoder_input_ids -> logits (cross-attention).
    "t5": ("seq2seq", "T5Config", dict(d_model=64, num_heads=4, num_layers=2, d_ff=128,
                                       d_kv=16, vocab_size=512, decoder_start_token_id=0)),
    "bart": ("seq2seq", "BartConfig", SEQ2SEQ),
    "marian": ("seq2seq", "MarianConfig", dict(SEQ2SEQ, decoder_vocab_size=512)),
    "pegasus": ("seq2seq", "PegasusConfig", SEQ2SEQ),
    "m2m100": ("seq2seq", "M2M100Config", SEQ2SEQ),
    # Vision: pixel_values [batch, 3, 32, 32] -> class logits.
    "resnet": ("image", "ResNetConfig", dict(CNN, embedding_size=16)),
    "regnet": ("image", "RegNetConfig", dict(CNN, embedding_size=16, groups_width=8)),
    "convnext": ("image", "ConvNextConfig", dict(CNN, num_stages=2)),
    "convnextv2": ("image", "ConvNextV2Config", dict(CNN, num_stages=2)),
    "mobilenet_v2": ("image", "MobileNetV2Config", dict(image_size=32, num_labels=10,
                                                          depth_multiplier=0.35)),
    "swin": ("image", "SwinConfig", dict(image_size=32, patch_size=4, embed_dim=32,
                                         depths=[1, 1], num_heads=[2, 4], window_size=4,
                                         num_labels=10)),
    "deit": ("image", "DeiTConfig", dict(VIT, architectures=["DeiTForImageClassification"])),
    "beit": ("image", "BeitConfig", dict(VIT, use_relative_position_bias=True)),
    "dinov2": ("image", "Dinov2Config", dict(VIT, mlp_ratio=2)),
    "segformer": ("image", "SegformerConfig",
                  dict(image_size=32, num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1],
                       hidden_sizes=[32, 64], patch_sizes=[7, 3], strides=[4, 2],
                       num_attention_heads=[2, 4], mlp_ratios=[2, 2], num_labels=10,
                       decoder_hidden_size=64)),
    "poolformer": ("image", "PoolFormerConfig",
                   dict(num_encoder_blocks=2, hidden_sizes=[32, 64], depths=[1, 1],
                        patch_sizes=[7, 3], strides=[4, 2], padding=[2, 1], num_labels=10)),
    # Speech: wav2vec2-style CTC on raw samples [batch, samples]; Whisper on mel frames.
    "siglip": ("image", "SiglipConfig",
               dict(vision_config=dict(image_size=32, patch_size=8, hidden_size=64,
                                       num_hidden_layers=2, num_attention_heads=4,
                                       intermediate_size=128), num_labels=10)),
    "clip": ("image", "CLIPConfig",
             dict(vision_config=dict(image_size=32, patch_size=8, hidden_size=64,
                                     num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=128), num_labels=10)),
    "swinv2": ("image", "Swinv2Config", dict(image_size=32, patch_size=4, embed_dim=32,
                                             depths=[1, 1], num_heads=[2, 4], window_size=4,
                                             num_labels=10)),
    "levit": ("image", "LevitConfig", dict(image_size=32, hidden_sizes=[32, 64, 96],
                                           num_attention_heads=[2, 4, 4], depths=[1, 1, 1],
                                           key_dim=[8, 8, 8], num_labels=10,
                                           architectures=["LevitForImageClassification"])),
    "pvt_v2": ("image", "PvtV2Config", dict(image_size=32, hidden_sizes=[16, 32, 48, 64],
                                            depths=[1, 1, 1, 1], num_attention_heads=[1, 2, 4, 8],
                                            num_labels=10)),
    "focalnet": ("image", "FocalNetConfig", dict(image_size=32, patch_size=4, embed_dim=16,
                                                 depths=[1, 1], num_labels=10)),
    "mobilevit": ("image", "MobileViTConfig", dict(image_size=32, num_labels=10)),
    "wav2vec2": ("audio", "Wav2Vec2Config", dict(WAV2VEC, vocab_size=32)),
    "hubert": ("audio", "HubertConfig", dict(WAV2VEC, vocab_size=32)),
    "whisper": ("whisper", "WhisperConfig",
                dict(d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                     decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128,
                     vocab_size=512, num_mel_bins=16, max_source_positions=16,
                     max_target_positions=64, decoder_start_token_id=0, pad_token_id=0,
                     bos_token_id=0, eos_token_id=1, suppress_tokens=None,
                     begin_suppress_tokens=None)),
}

# The inputs of each kind: name -> (shape with symbolic dims as names, dtype). Integer inputs
# are token ids in [0, 32) (tp-run's random integers); floats are in [-1, 1).
INPUTS = {
    "causal": {"input_ids": (["batch", "seq"], "int64")},
    "masked": {"input_ids": (["batch", "seq"], "int64")},
    "t5": {"input_ids": (["batch", "seq"], "int64")},
    "seq2seq": {"input_ids": (["batch", "seq"], "int64"),
                "decoder_input_ids": (["batch", "tgt"], "int64")},
    "image": {"pixel_values": (["batch", 3, 32, 32], "float32")},
    "audio": {"input_values": (["batch", "samples"], "float32")},
    "whisper": {"input_features": (["batch", 16, 32], "float32"),
                "decoder_input_ids": (["batch", "tgt"], "int64")},
}
# The sizes the checks bind (the exports trace at batch 2, seq 8, tgt 5, samples 400).
DIMS = {"batch": 2, "seq": 20, "tgt": 7, "samples": 480}


def build(name):
    import torch
    import transformers as tf

    kind, cls, cfg = ARCHITECTURES[name]
    torch.manual_seed(0)
    config = getattr(tf, cls)(**cfg)
    if kind == "causal":
        config.use_cache = False
        extra = {}
        if hasattr(config, "num_experts_per_tok") and int(tf.__version__.split(".")[0]) >= 5:
            # transformers 5's default experts loop over the experts a batch hits (a
            # data-dependent loop neither exporter takes); batched_mm gathers each token's
            # experts' weights and multiplies them, as a static graph.
            extra["experts_implementation"] = "batched_mm"
        model = tf.AutoModelForCausalLM.from_config(config, attn_implementation="eager", **extra)
    elif kind == "masked":
        model = tf.AutoModelForMaskedLM.from_config(config, attn_implementation="eager")
    elif kind == "t5":
        model = tf.T5EncoderModel(config)
    elif kind in ("seq2seq", "whisper"):
        config.use_cache = False
        model = tf.AutoModelForSeq2SeqLM.from_config(config, attn_implementation="eager") \
            if kind == "seq2seq" else tf.WhisperForConditionalGeneration(config)
    elif kind == "image":
        model = tf.AutoModelForImageClassification.from_config(config)
    else:
        model = tf.AutoModelForCTC.from_config(config)
    names = list(INPUTS[kind])

    class Logits(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, first, second=None):  # torch.export takes no *args
            args = (first,) if second is None else (first, second)
            return self.m(**dict(zip(names, args)), return_dict=False)[0]

    return Logits(model.eval()), names


def trace_inputs(kind):
    """The example inputs the exporters trace with (not the sizes the checks bind)."""
    import torch

    sizes = {"batch": 2, "seq": 8, "tgt": 5, "samples": 400}
    out = []
    for shape, dtype in INPUTS[kind].values():
        dims = [sizes[d] if isinstance(d, str) else d for d in shape]
        out.append(torch.randint(0, 32, dims) if dtype == "int64" else torch.rand(dims) * 2 - 1)
    return tuple(out)


def export(name, dynamo, path):
    import torch

    model, names = build(name)
    kind = ARCHITECTURES[name][0]
    args = trace_inputs(kind)
    shapes = {n: INPUTS[kind][n][0] for n in names}
    if dynamo:
        made = {}

        def dim(d):
            if d not in made:
                made[d] = torch.export.Dim(d, min=2, max=60 if d != "samples" else 4096)
            return made[d]

        dims = tuple({i: dim(d) for i, d in enumerate(shapes[n]) if isinstance(d, str)}
                     for n in names)
        program = torch.onnx.export(model, args, dynamo=True, input_names=names,
                                    output_names=["logits"], dynamic_shapes=dims,
                                    opset_version=18)
        program.optimize()
        program.save(path)
    else:
        axes = {n: {i: d for i, d in enumerate(s) if isinstance(d, str)}
                for n, s in shapes.items()}
        torch.onnx.export(model, args, path, dynamo=False, input_names=names,
                          output_names=["logits"], dynamic_axes=axes, opset_version=17)


def write_inputs(kind, folder, path):
    """Draws the check's inputs, writes them as input_K.pb, returns {name: array}. A dim
    the export at `path` fixed (torch specialized it: a loop over the sequence unrolled)
    keeps the export's size."""
    import numpy as np
    import onnx
    import onnx.numpy_helper

    fixed = {i.name: [d.dim_value for d in i.type.tensor_type.shape.dim]
             for i in onnx.load(path, load_external_data=False).graph.input}
    rng = np.random.default_rng(0)
    os.makedirs(folder, exist_ok=True)
    feeds = {}
    for k, (name, (shape, dtype)) in enumerate(INPUTS[kind].items()):
        dims = [DIMS[d] if isinstance(d, str) else d for d in shape]
        if len(fixed.get(name, [])) == len(dims):
            dims = [f if f > 0 else d for d, f in zip(dims, fixed[name])]
        if dtype == "int64":
            a = rng.integers(0, 32, dims).astype(np.int64)
        else:
            a = rng.uniform(-1, 1, dims).astype(np.float32)
        feeds[name] = a
        with open(os.path.join(folder, f"input_{k}.pb"), "wb") as f:
            f.write(onnx.numpy_helper.from_array(a, name).SerializeToString())
    return feeds


def against_ort(path, feeds, out_dir, rtol, atol):
    """"" when tpc's outputs in out_dir equal onnxruntime's run of the export, else why."""
    import numpy as np
    import onnx.numpy_helper
    import onnxruntime as ort

    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    expected = session.run(None, feeds)
    for k, (out, want) in enumerate(zip(session.get_outputs(), expected)):
        t = onnx.TensorProto()
        with open(os.path.join(out_dir, f"output_{k}.pb"), "rb") as f:
            t.ParseFromString(f.read())
        got = onnx.numpy_helper.to_array(t)
        if got.shape != want.shape:
            return f"{out.name}: shape {got.shape}, onnxruntime {want.shape}"
        if not np.allclose(got, want, rtol=rtol, atol=atol):
            err = np.abs(got.astype(np.float64) - want)
            return f"{out.name}: max |tpc - onnxruntime| {err.max():.3g} (rtol {rtol}, atol {atol})"
    return ""


def ort_refusal(path, feeds):
    """"" when onnxruntime loads and runs the export on `feeds`, else its error."""
    import onnxruntime as ort

    try:
        options = ort.SessionOptions()
        options.log_severity_level = 3  # its error is returned, not logged
        ort.InferenceSession(path, options, providers=["CPUExecutionProvider"]).run(None, feeds)
    except Exception as e:  # onnxruntime's own errors are of several pybind types
        return str(e).splitlines()[0][-200:]
    return ""


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    return p.returncode, (p.stdout + p.stderr).strip()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default="build", help="where tp-compile and tp-run are")
    ap.add_argument("--tp-run", help="tp-run to use (default: BIN/tp-run)")
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--dtype", default="f32", choices=["f32", "f16", "bf16"])
    ap.add_argument("--tp", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--only", nargs="+", choices=sorted(ARCHITECTURES))
    ap.add_argument("--work", help="where exports and plans go (default: a temporary folder)")
    ap.add_argument("--ranks", default="threads", choices=["threads", "processes"])
    ap.add_argument("--compile-args", default="",
                    help="more tp-compile flags, e.g. '--objective time' or '--sequence-parallel'")
    args = ap.parse_args()
    compile_bin = os.path.join(args.bin, "tp-compile")
    run_bin = args.tp_run or os.path.join(args.bin, "tp-run")
    tol = {"f32": [], "f16": ["--rtol", "1e-2", "--atol", "1e-2"],
           "bf16": ["--rtol", "5e-2", "--atol", "5e-2"]}[args.dtype]
    # Against onnxruntime (another implementation, other summation orders): looser in f32.
    ort_tol = {"f32": (1e-3, 1e-4), "f16": (2e-2, 2e-2), "bf16": (1e-1, 1e-1)}[args.dtype]
    work = args.work or tempfile.mkdtemp(prefix="tpc_architectures_")
    os.makedirs(work, exist_ok=True)
    failed, refused, invalid = [], [], []
    for name in args.only or ARCHITECTURES:
        for dynamo in (False, True):
            key = name + ("_dynamo" if dynamo else "")
            path = os.path.join(work, key + ".onnx")
            try:
                if not os.path.exists(path):
                    export(name, dynamo, path)
            except Exception as e:  # torch's exporter, not tpc
                refused.append(f"{key}: {str(e).splitlines()[0][:160]}")
                print(f"{key:24s} torch did not export it", flush=True)
                continue
            kind = ARCHITECTURES[name][0]
            inputs = os.path.join(work, key + "_inputs")
            feeds = write_inputs(kind, inputs, path)
            ort_error = ort_refusal(path, feeds)
            if ort_error:  # an invalid export: tpc should refuse it too, and say why
                rc, out = run([compile_bin, path, "--tp", str(args.tp[0]), "-o",
                               os.path.join(work, f"{key}_tp{args.tp[0]}"), "--force", "--quiet"])
                said = out.splitlines()[-1][:200] if out else ""
                invalid.append(f"{key}: onnxruntime: {ort_error}\n      tp-compile: "
                               + (f"exit {rc}, {said}" if rc else "compiles it"))
                print(f"{key:24s} onnxruntime refuses the export; tp-compile "
                      + ("refuses it too" if rc else "compiles it"), flush=True)
                continue
            for n in args.tp:
                plan = os.path.join(work, f"{key}_tp{n}")
                outputs = plan + "_outputs"
                rc, out = run([compile_bin, path, "--tp", str(n), "-o", plan, "--force",
                               "--quiet", "--dtype", args.dtype] + args.compile_args.split())
                if rc == 0:
                    rc, out = run([run_bin, plan, "--backend", args.backend, "--ranks",
                                   args.ranks, "--check-against", path, "--input-dir", inputs,
                                   "--output-dir", outputs, "--quiet", "--no-verify"] + tol)
                if rc == 0:  # the sharded run equals the unsharded one; both equal ort?
                    out = against_ort(path, feeds, outputs, *ort_tol)
                    rc = 1 if out else 0
                result = "PASS" if rc == 0 else f"FAIL (exit {rc})"
                print(f"{key:24s} N={n}  {result}", flush=True)
                if rc != 0:
                    failed.append(f"{key} N={n}: {out[-400:]}")
    print(f"\n{len(failed)} failed; torch refused {len(refused)} export(s), onnxruntime "
          f"{len(invalid)}; work in {work}")
    for f in refused:
        print("  torch refused " + f)
    for f in invalid:
        print("  onnxruntime refused " + f)
    for f in failed:
        print("  FAILED " + f)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
