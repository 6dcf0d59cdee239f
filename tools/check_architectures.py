#!/usr/bin/env python3
"""Export tiny random-weight models of many Hugging Face architectures with both torch
exporters, compile each with tp-compile at several N, and run tp-run --check-against
(the unsharded run) on it: does tpc shard them with no annotation, and run them right?

    pip install torch transformers onnx onnxscript onnxruntime   # a venv of its own
    python3 tools/check_architectures.py --bin build [--only qwen2 gemma2] [--tp 2 4]
        [--backend cuda --tp-run build/tests/tp_run_cuda_host] [--dtype f16]

Not part of make test (it needs torch). Prints one line per export and N, and the
exports that failed; exit status 1 when one did. An export that torch itself refuses is
listed, not counted as tpc's failure. Each architecture is a small config (hidden 64, 4
heads, 2 layers, vocabulary 512) of a transformers class, exported for input_ids
[batch, seq] with batch and seq dynamic.
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


def decoder(cls, **kw):
    c = dict(BASE)
    c.update(kw)
    return ("causal", cls, c)


ARCHITECTURES = {
    "qwen2": decoder("Qwen2Config", num_key_value_heads=2),
    "qwen3": decoder("Qwen3Config", num_key_value_heads=2, head_dim=16),
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
}


def build(name):
    import torch
    import transformers as tf

    kind, cls, cfg = ARCHITECTURES[name]
    torch.manual_seed(0)
    config = getattr(tf, cls)(**cfg)
    if kind == "causal":
        config.use_cache = False
        model = tf.AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    elif kind == "masked":
        model = tf.AutoModelForMaskedLM.from_config(config, attn_implementation="eager")
    else:
        model = tf.T5EncoderModel(config)

    class Logits(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids):
            return self.m(input_ids=input_ids, return_dict=False)[0]

    return Logits(model.eval())


def export(name, dynamo, path):
    import torch

    model = build(name)
    ids = torch.randint(0, 32, (2, 8))
    if dynamo:
        dims = {"input_ids": {0: torch.export.Dim("batch"), 1: torch.export.Dim("seq", max=60)}}
        program = torch.onnx.export(model, (ids,), dynamo=True, input_names=["input_ids"],
                                    output_names=["logits"], dynamic_shapes=dims,
                                    opset_version=18)
        program.optimize()
        program.save(path)
    else:
        torch.onnx.export(model, (ids,), path, dynamo=False, input_names=["input_ids"],
                          output_names=["logits"],
                          dynamic_axes={"input_ids": {0: "batch", 1: "seq"},
                                        "logits": {0: "batch", 1: "seq"}},
                          opset_version=17)


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
    args = ap.parse_args()
    compile_bin = os.path.join(args.bin, "tp-compile")
    run_bin = args.tp_run or os.path.join(args.bin, "tp-run")
    tol = {"f32": [], "f16": ["--rtol", "1e-2", "--atol", "1e-2"],
           "bf16": ["--rtol", "5e-2", "--atol", "5e-2"]}[args.dtype]
    work = args.work or tempfile.mkdtemp(prefix="tpc_architectures_")
    os.makedirs(work, exist_ok=True)
    failed, refused = [], []
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
            for n in args.tp:
                plan = os.path.join(work, f"{key}_tp{n}")
                rc, out = run([compile_bin, path, "--tp", str(n), "-o", plan, "--force",
                               "--quiet", "--dtype", args.dtype])
                if rc == 0:
                    rc, out = run([run_bin, plan, "--backend", args.backend, "--ranks",
                                   "threads", "--check-against", path, "--dim", "batch=2",
                                   "--dim", "seq=20", "--quiet", "--no-verify"] + tol)
                result = "PASS" if rc == 0 else f"FAIL (exit {rc})"
                print(f"{key:24s} N={n}  {result}", flush=True)
                if rc != 0:
                    failed.append(f"{key} N={n}: {out[-400:]}")
    print(f"\n{len(failed)} failed; torch refused {len(refused)} export(s); work in {work}")
    for f in refused:
        print("  torch refused " + f)
    for f in failed:
        print("  FAILED " + f)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
