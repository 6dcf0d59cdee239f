#!/usr/bin/env python3
"""GPU benchmark: greedy decoding with a KV cache, tpc against PyTorch on the same GPU.

    python3 bench/gpu_decode.py --tp-compile build/tp-compile --tp-run build/tp-run \\
        --work /tmp/gpu_decode [--out decode.json] [--layers 4 --batch 8 --prompt 128
                                --new 64 --rounds 2]

The model is tools/make_llama_synthetic.py's with a KV cache (--past: Optimum's
past_key_values.* inputs and present.* outputs; the rest of the Llama-1B shape: hidden
2048, 32 heads, 8 KV heads, intermediate 8192, vocab 128256), compiled with
`tp-compile --tp 1 --dtype f16`. tpc: `tp-run --generate NEW` from a [batch, prompt]
prompt of random ids: the prefill, then NEW - 1 decode steps, each feeding the last
step's presents back (kept on the GPU: Executor::Resident). PyTorch: transformers'
LlamaForCausalLM of the same shape in f16 (attention "eager" and "sdpa"),
`generate(max_new_tokens=NEW, min_new_tokens=NEW)` greedy with its dynamic cache; its
decode time is that run's minus a run of one new token (the prefill). Interleaved
rounds, medians; decode tokens/s counts every row's tokens. Weights differ (random on
both sides), so the ids do; the shapes and the work per step are the same.

`--int4 BLOCK` also times the same model with its MatMuls quantized to 4 bits in blocks
of BLOCK (com.microsoft MatMulNBits, as onnxruntime-genai's int4 exports; f16
activations): tpc's int4 decode, which reads each weight's codes once a step
(`tpc_int4_*`).

`--device cpu` runs the tpc side on the CPU backend without PyTorch (`--no-torch`): a
check of this script on a machine without a GPU.
"""
import json
import os
import re
import statistics
import subprocess
import sys
import time

import numpy as np

from gpu_llama import llama_args

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
STARTED = time.time()


def progress(what):
    print(f"gpu_decode: {time.time() - STARTED:6.1f} s: {what}", file=sys.stderr, flush=True)


def tpc_decode(args, plan, ids_path):
    """(prefill s, decode tokens/s) of one tp-run --generate."""
    r = subprocess.run([args.tp_run, plan, "--backend", args.device, "--ranks", "threads",
                        "--generate", str(args.new), "--input-ids", ids_path],
                       capture_output=True, text=True)
    text = r.stdout + r.stderr
    m = re.search(r"prefill of \d+ in ([0-9.]+) s; \d+ decode step\(s\) in ([0-9.]+) s, "
                  r"([0-9.]+) tokens/s", text)
    if r.returncode != 0 or not m:
        raise RuntimeError(f"tp-run failed ({r.returncode}): {text[-2000:]}")
    return float(m.group(1)), float(m.group(3))


def torch_model(args, attn):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(hidden_size=args.hidden, intermediate_size=args.intermediate,
                      num_hidden_layers=args.layers, num_attention_heads=args.heads,
                      num_key_value_heads=args.kv_heads, vocab_size=args.vocab,
                      max_position_embeddings=args.prompt + args.new, rms_norm_eps=1e-6,
                      tie_word_embeddings=False, attn_implementation=attn)
    torch.manual_seed(0)
    return LlamaForCausalLM(cfg).half().cuda().eval()


def torch_generate_s(model, ids, new):
    import torch
    with torch.inference_mode():
        torch.cuda.synchronize()
        t = time.perf_counter()
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new,
                             min_new_tokens=new, do_sample=False, use_cache=True,
                             pad_token_id=0)
        torch.cuda.synchronize()
        assert out.shape[1] == ids.shape[1] + new
        return time.perf_counter() - t


def torch_decode(model, ids, new):
    """(prefill s, decode tokens/s): a run of `new` tokens less a run of one."""
    whole = torch_generate_s(model, ids, new)
    prefill = torch_generate_s(model, ids, 1)
    return prefill, ids.shape[0] * (new - 1) / max(whole - prefill, 1e-9)


def main():
    ap = llama_args(4)
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--no-torch", action="store_true", help="time tpc only")
    ap.add_argument("--int4", type=int, metavar="BLOCK", default=0,
                    help="also time the model quantized to int4 in blocks of BLOCK")
    args = ap.parse_args()
    if args.new < 2:
        ap.error("--new must be at least 2 (a prefill and a decode step)")
    torch_too = not args.no_torch and args.device == "cuda"
    os.makedirs(args.work, exist_ok=True)
    model_path = os.path.join(args.work, "llama_past.onnx")
    plan = os.path.join(args.work, "plan_past_f16")
    ids_path = os.path.join(args.work, "prompt.npy")
    summary = {"device": args.device,
               "shape": {k: getattr(args, k) for k in ("layers", "hidden", "heads", "kv_heads",
                                                        "intermediate", "vocab", "batch",
                                                        "prompt", "new")},
               "complete": False}
    results = {}

    def save():
        med = {k: round(statistics.median(v), 4) for k, v in results.items() if v}
        summary["median"] = med
        for mine in ("tpc", "tpc_int4"):
            for other in ("torch_eager", "torch_sdpa"):
                if f"{mine}_tokens_s" in med and f"{other}_tokens_s" in med:
                    summary[f"{mine}_over_{other}_tokens_s"] = round(
                        med[f"{mine}_tokens_s"] / med[f"{other}_tokens_s"], 3)
        summary["rounds"] = results
        if args.out:  # whole or not at all
            with open(args.out + ".tmp", "w") as f:
                json.dump(summary, f, indent=1)
            os.replace(args.out + ".tmp", args.out)

    plans = {"tpc": plan}
    if args.int4:
        plans["tpc_int4"] = os.path.join(args.work, "plan_past_int4_f16")
    for name, out in plans.items():
        progress(f"generating the model ({name})")
        t = time.time()
        quantize = ["--int4", str(args.int4)] if name == "tpc_int4" else []
        subprocess.run([sys.executable, os.path.join(ROOT, "tools", "make_llama_synthetic.py"),
                        "-o", model_path, "--past", "--layers", str(args.layers),
                        "--hidden", str(args.hidden), "--heads", str(args.heads),
                        "--kv-heads", str(args.kv_heads), "--intermediate", str(args.intermediate),
                        "--vocab", str(args.vocab), "--max-pos", str(args.prompt + args.new)]
                       + quantize, check=True)
        summary[f"{name}_generate_s"] = round(time.time() - t, 1)
        progress(f"compiling tp=1 f16 ({name})")
        subprocess.run([args.tp_compile, model_path, "--tp", "1", "--dtype", "f16", "-o", out,
                        "--quiet"], check=True)
        for leftover in (model_path, model_path + ".data"):
            if os.path.exists(leftover):
                os.remove(leftover)
    rng = np.random.default_rng(0)
    np.save(ids_path, rng.integers(0, args.vocab, (args.batch, args.prompt), dtype=np.int64))
    models = {}
    if torch_too:
        import torch
        ids = torch.from_numpy(np.load(ids_path)).cuda()
        for attn in ("eager", "sdpa"):
            progress(f"PyTorch {attn}: loading")
            models[attn] = torch_model(args, attn)
            torch_generate_s(models[attn], ids, 2)  # warm-up
    for out in plans.values():
        tpc_decode(args, out, ids_path)  # warm-up (the first run plans its memory)
    for r in range(args.rounds):
        progress(f"round {r + 1} of {args.rounds}")
        for name, out in plans.items():
            prefill, rate = tpc_decode(args, out, ids_path)
            results.setdefault(f"{name}_prefill_s", []).append(prefill)
            results.setdefault(f"{name}_tokens_s", []).append(rate)
        for attn, model in models.items():
            prefill, rate = torch_decode(model, ids, args.new)
            results.setdefault(f"torch_{attn}_prefill_s", []).append(prefill)
            results.setdefault(f"torch_{attn}_tokens_s", []).append(rate)
        save()
    summary["complete"] = True
    save()
    progress("done")
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
