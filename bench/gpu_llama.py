#!/usr/bin/env python3
"""GPU benchmark: the f16 forward of a generated Llama-1B-shaped model on one GPU, tpc
(tp-run --backend cuda, tp = 1) against PyTorch eager on the same GPU, interleaved.

usage: gpu_llama.py --tp-compile PATH --tp-run PATH --work DIR [--out FILE.json]
                    [--layers 16 --hidden 2048 --heads 32 --kv-heads 8
                     --intermediate 8192 --vocab 128256 --batch 8 --seq 512]
                    [--rounds 3 --iters 10] [--tp-sizes 2,4]

The model is tools/make_llama_synthetic.py's (random weights, the TorchScript exporter's
structure: unfused attention, RoPE, GQA Expand, RMSNorm as Pow/ReduceMean/Sqrt/Div), compiled
with `tp-compile --tp 1 --dtype f16`; PyTorch runs transformers' LlamaForCausalLM of the same
shape in f16 (attention "eager", the same unfused math, and "sdpa", PyTorch's default). tpc's
figures are tp-run's median run, which includes copying the f32 logits to the host, and its
compute (until the last kernel finished), also without the runtime fusion pass (--no-fuse)
and with --cuda-graph (every run after the second replays one recorded CUDA graph);
PyTorch is timed without and with that copy (`logits.float().cpu()`), and each is compared
with its like. Rounds
alternate tpc and PyTorch; figures are medians over rounds. (onnxruntime-gpu, the issue's
third baseline, is not installed on the lent GPU machine and cannot be: nothing can be
downloaded there.) Then the tp=N plans (--tp-sizes, default 2 and 4), N ranks as threads on
the one GPU: rank 0's compute against T1/N, and the bus bandwidth of their collectives at
the plan's sizes from tp-run --profile (calls and bytes per op type), through the
device-memory group of ranks as threads (NCCL refuses two ranks on one GPU). Needs torch
with CUDA; run by tools/gpu_check.sh on a GPU machine. Each stage logs a progress line
(stderr) and rewrites --out with the figures so far ("complete": false until the end), so
a run stopped by the lent machine's time limit still leaves its measurements. tp-run runs
with --no-verify: the bench times runs, not the plan's SHA-256 check.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


# The runtime's opt-in paths (docs/cuda.md), on until a GPU has run them: the tiled
# attention kernel and the GEMMs through cuBLASLt.
OPT_IN = {"flash": "TPC_FLASH_ATTENTION", "lt": "TPC_CUBLASLT"}


def tpc_median_ms(args, plan, fuse=True, graph=False, opt_in=()):
    env = dict(os.environ, **{OPT_IN[o]: "1" for o in opt_in}) if opt_in else None
    r = subprocess.run([args.tp_run, plan, "--backend", "cuda", "--ranks", "threads", "--quiet",
                        "--no-verify", "--repeat", str(args.iters), "--dim", f"batch={args.batch}",
                        "--dim", f"seq={args.seq}"] + ([] if fuse else ["--no-fuse"]) +
                       (["--cuda-graph"] if graph else []),
                       capture_output=True, text=True, env=env)
    text = r.stdout + r.stderr
    m = re.search(r"median ([0-9.]+) ms", text)
    c = re.search(r"compute on rank 0 .*: median ([0-9.]+) ms", text)
    if r.returncode != 0 or not m or not c:
        raise RuntimeError(f"tp-run failed ({r.returncode}): {text[-2000:]}")
    return float(m.group(1)), float(c.group(1))


def tpc_profile(args, plan):
    """{op type: (ms, calls, MiB)} of rank 0's last run with --profile, slowest first."""
    r = subprocess.run([args.tp_run, plan, "--backend", "cuda", "--ranks", "threads", "--quiet",
                        "--no-verify", "--repeat", "3", "--profile", "--dim", f"batch={args.batch}",
                        "--dim", f"seq={args.seq}"], capture_output=True, text=True)
    found = re.findall(r"^  (\S+)\s+([0-9.]+) ms\s+([0-9]+) calls\s+([0-9.]+) MiB$", r.stdout,
                       re.M)
    return {op: (float(ms), int(calls), float(mib)) for op, ms, calls, mib in found}


STARTED = time.time()


def progress(what):
    """One line per stage on stderr, with the seconds since the start: a run cut short by
    a time limit still says how far it got."""
    print(f"gpu_llama: {time.time() - STARTED:6.1f} s: {what}", file=sys.stderr, flush=True)


def torch_model(args, attn):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(hidden_size=args.hidden, intermediate_size=args.intermediate,
                      num_hidden_layers=args.layers, num_attention_heads=args.heads,
                      num_key_value_heads=args.kv_heads, vocab_size=args.vocab,
                      max_position_embeddings=args.seq, rms_norm_eps=1e-6,
                      tie_word_embeddings=False, attn_implementation=attn)
    torch.manual_seed(0)
    return LlamaForCausalLM(cfg).half().cuda().eval()


def torch_median_ms(model, ids, iters, copy):
    import torch
    times = []
    with torch.inference_mode():
        for _ in range(iters):
            torch.cuda.synchronize()
            t = time.perf_counter()
            logits = model(input_ids=ids, use_cache=False).logits
            if copy:
                logits.float().cpu()
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def llama_args(layers):
    """The arguments both GPU benchmarks take: the tools, the work folder, the JSON out,
    the Llama-1B shape (with `layers` layers) and the batch."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--tp-compile", required=True)
    ap.add_argument("--tp-run", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--out")
    ap.add_argument("--layers", type=int, default=layers)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--intermediate", type=int, default=8192)
    ap.add_argument("--vocab", type=int, default=128256)
    ap.add_argument("--batch", type=int, default=8)
    return ap


def main():
    ap = llama_args(16)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--tp-sizes", default="2,4",
                    help="also time the tp=N plans, N ranks as threads on the one GPU ('' for none)")
    args = ap.parse_args()
    import torch
    if not torch.cuda.is_available():
        print("skipped: no CUDA device for torch")
        return 77
    os.makedirs(args.work, exist_ok=True)
    model_path = os.path.join(args.work, "llama.onnx")
    plan = os.path.join(args.work, "plan_f16")
    summary = {
        "gpu": torch.cuda.get_device_name(0),
        "shape": {k: getattr(args, k) for k in ("layers", "hidden", "heads", "kv_heads",
                                                 "intermediate", "vocab", "batch", "seq")},
        "complete": False,
    }
    results = {"tpc": [], "tpc_compute": [], "tpc_unfused_compute": [], "tpc_graph_compute": [],
               "tpc_flash_compute": [], "tpc_lt_compute": [],
               "torch_eager": [], "torch_eager_copy": [], "torch_sdpa": [],
               "torch_sdpa_copy": []}

    def save():
        """Writes what is measured so far (--out), the ratios of the figures there are:
        a run stopped by a time limit leaves its stages' results."""
        med = {k: statistics.median(v) for k, v in results.items() if v}
        summary["median_ms"] = {k: round(v, 2) for k, v in med.items()}
        # tpc's time over PyTorch's: the whole run (logits to the host) against PyTorch
        # with the copy, tpc's compute against PyTorch without it. Above 1: tpc is slower.
        ratios = {"eager": ("tpc_compute", "torch_eager"), "sdpa": ("tpc_compute", "torch_sdpa"),
                  "eager_with_copy": ("tpc", "torch_eager_copy"),
                  "sdpa_with_copy": ("tpc", "torch_sdpa_copy")}
        summary["tpc_over_torch"] = {k: round(med[a] / med[b], 3)
                                     for k, (a, b) in ratios.items() if a in med and b in med}
        # The runtime fusion pass's gain (tpc's compute without it over with it) and CUDA
        # graphs' (replaying one over queuing kernel by kernel).
        for key, (a, b) in {"unfused_over_fused": ("tpc_unfused_compute", "tpc_compute"),
                            "graph_over_queued": ("tpc_graph_compute", "tpc_compute"),
                            "graph_over_torch_eager": ("tpc_graph_compute", "torch_eager"),
                            "flash_over_queued": ("tpc_flash_compute", "tpc_compute"),
                            "flash_over_torch_eager": ("tpc_flash_compute", "torch_eager"),
                            "flash_over_torch_sdpa": ("tpc_flash_compute", "torch_sdpa"),
                            "lt_over_queued": ("tpc_lt_compute", "tpc_compute"),
                            }.items():
            if a in med and b in med:
                summary[key] = round(med[a] / med[b], 3)
        summary["rounds"] = results
        if args.out:  # whole or not at all: a time limit may stop the run mid-write
            with open(args.out + ".tmp", "w") as f:
                json.dump(summary, f, indent=1)
            os.replace(args.out + ".tmp", args.out)
        return med

    def attempt(what, fn):
        """fn()'s result, or None with its error kept in the summary: one failing tp-run
        (a variant, a tp size) does not lose the stages after it."""
        try:
            return fn()
        except RuntimeError as e:
            summary.setdefault("errors", []).append(f"{what}: {str(e)[-1500:]}")
            progress(f"{what} failed")
            return None

    def keep(key, value):
        if value is not None:
            results[key].append(value)

    progress("generating the model")
    t = time.time()
    subprocess.run([sys.executable, os.path.join(ROOT, "tools", "make_llama_synthetic.py"),
                    "-o", model_path, "--layers", str(args.layers), "--hidden", str(args.hidden),
                    "--heads", str(args.heads), "--kv-heads", str(args.kv_heads),
                    "--intermediate", str(args.intermediate), "--vocab", str(args.vocab),
                    "--max-pos", str(args.seq)], check=True)
    summary["generate_s"] = round(time.time() - t, 1)
    progress("compiling tp=1")
    t = time.time()
    subprocess.run([args.tp_compile, model_path, "--tp", "1", "--dtype", "f16", "-o", plan,
                    "--quiet"], check=True)
    summary["compile_s"] = round(time.time() - t, 1)
    # "--tp-sizes=" for none ('' through a shell variable arrives as two quotes).
    sizes = [int(n) for n in args.tp_sizes.strip("'\"").split(",") if n.strip()]
    for n in sizes:
        progress(f"compiling tp={n}")
        subprocess.run([args.tp_compile, model_path, "--tp", str(n), "--dtype", "f16", "-o",
                        f"{plan}_tp{n}", "--quiet"], check=True)
    os.remove(model_path + ".data") if os.path.exists(model_path + ".data") else None
    save()
    ids = torch.randint(0, args.vocab, (args.batch, args.seq), device="cuda")
    progress("PyTorch eager: loading")
    eager = torch_model(args, "eager")
    torch_median_ms(eager, ids, 2, False)  # warm-up
    for r in range(args.rounds):
        progress(f"round {r + 1} of {args.rounds}: tpc, --no-fuse, --cuda-graph, flash, "
                 "cuBLASLt, eager")
        both = attempt("tpc", lambda: tpc_median_ms(args, plan))
        keep("tpc", both and both[0])
        keep("tpc_compute", both and both[1])
        unfused = attempt("tpc --no-fuse", lambda: tpc_median_ms(args, plan, fuse=False))
        keep("tpc_unfused_compute", unfused and unfused[1])
        # --cuda-graph: the median of runs that replay one recorded graph (all but two).
        graph = attempt("tpc --cuda-graph", lambda: tpc_median_ms(args, plan, graph=True))
        keep("tpc_graph_compute", graph and graph[1])
        # TPC_FLASH_ATTENTION=1: the attention cores by tiles of keys (opt-in, docs/cuda.md).
        flash = attempt("tpc flash", lambda: tpc_median_ms(args, plan, opt_in=["flash"]))
        keep("tpc_flash_compute", flash and flash[1])
        # TPC_CUBLASLT=1: every GEMM through cuBLASLt, FusedMatMul's epilogues in it.
        lt = attempt("tpc cuBLASLt", lambda: tpc_median_ms(args, plan, opt_in=["lt"]))
        keep("tpc_lt_compute", lt and lt[1])
        results["torch_eager"].append(torch_median_ms(eager, ids, args.iters, False))
        results["torch_eager_copy"].append(torch_median_ms(eager, ids, args.iters, True))
        save()
    del eager
    torch.cuda.empty_cache()
    progress("PyTorch SDPA: loading")
    sdpa = torch_model(args, "sdpa")
    torch_median_ms(sdpa, ids, 2, False)
    for r in range(args.rounds):
        progress(f"round {r + 1} of {args.rounds}: tpc, SDPA")
        both = attempt("tpc", lambda: tpc_median_ms(args, plan))
        keep("tpc", both and both[0])
        keep("tpc_compute", both and both[1])
        results["torch_sdpa"].append(torch_median_ms(sdpa, ids, args.iters, False))
        results["torch_sdpa_copy"].append(torch_median_ms(sdpa, ids, args.iters, True))
        save()
    del sdpa
    torch.cuda.empty_cache()
    # Where tpc's time goes: per operator type, each step synchronised (--profile).
    progress("tpc --profile")
    profile = attempt("tpc --profile", lambda: tpc_profile(args, plan)) or {}
    summary["tpc_profile_ms"] = {op: v[0] for op, v in list(profile.items())[:15]}
    med = save()
    # The tp=N plans, N ranks as threads sharing the one GPU: rank 0's compute against
    # T1/N (the GPU runs every rank's share, so it is about T1 plus the collectives, not
    # T1/N), and the collectives' bus bandwidth at the plan's sizes, NCCL's convention
    # (AllReduce 2(N-1)/N, AllGather and ReduceScatter (N-1)/N of the buffer over the
    # time of a call), through the device-memory group of ranks as threads (NCCL refuses
    # two ranks on one GPU). A lower bound: rank 0's time of a call includes waiting for
    # the other ranks to reach it.
    summary["tp_on_one_gpu"] = {}
    for n in sizes:
        progress(f"tp={n}: timing and --profile")
        timed = attempt(f"tp={n}", lambda: tpc_median_ms(args, f"{plan}_tp{n}"))
        if timed is None:
            continue
        compute_n = timed[1]
        coll = {}
        n_profile = attempt(f"tp={n} --profile", lambda: tpc_profile(args, f"{plan}_tp{n}")) or {}
        for op, (ms, calls, mib) in n_profile.items():
            factor = {"AllReduce": 2 * (n - 1) / n, "AllGather": (n - 1) / n,
                      "ReduceScatter": (n - 1) / n}.get(op)
            if factor is None or calls == 0 or ms == 0:
                continue
            per_call_s = ms / 1e3 / calls
            size = mib * 1048576 / calls
            coll[op] = {"calls": calls, "ms_per_call": round(ms / calls, 4),
                        "mib_per_call": round(mib / calls, 2),
                        "busbw_gb_s": round(factor * size / per_call_s / 1e9, 1)}
        entry = {"rank0_compute_ms": round(compute_n, 2), "collectives": coll}
        if "tpc_compute" in med:  # --rounds 0: no tp=1 figure to compare with
            entry["t1_over_n_ms"] = round(med["tpc_compute"] / n, 2)
            entry["over_t1"] = round(compute_n / med["tpc_compute"], 3)
        summary["tp_on_one_gpu"][n] = entry
        save()
    summary["complete"] = True
    save()
    progress("done")
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
