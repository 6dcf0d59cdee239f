#!/usr/bin/env python3
"""ctest entry: a grouped-query KV-cache decoder keeps its cache on groups of ranks.

usage: check_gqa_cache.py --tp-compile PATH --tp-run PATH --work DIR

Generates Llama-shaped decoders with a KV cache (tools/make_llama_synthetic.py --past:
Optimum's `past_key_values.{i}.key|value` inputs and `present.{i}.key|value` outputs)
with fewer K/V heads than ranks, compiles them with the default objective and no flags,
and checks that
  - every cache input and output is placed S(1@KV) in plan.json (each K/V head's cache
    on its group of N/KV ranks, never gathered), and at N = 4 and 8 every K/V projection
    weight too;
  - `tp-run --check-against` the unsharded model passes, on a decoding step (past 5,
    seq 3) and a prefill (past 0, seq 8), with the processes launched by tp-run itself
    (threads at N = 12), `tp-run --generate 16` gives the unsharded model's token ids,
    and so do the plans of the memory and time objectives; and a
    plan given the past S(1@KV) by --input-placement, its present left R (gathered).
And on a decoder of realistic proportions (hidden 512, 8 query heads, 2 K/V heads, no
cache) at N = 4, sized for a 2048-token prefill: the default objective gives Megatron's
layout with sequence parallelism, each K/V head on its group of 2 ranks: per layer 2
reduce-scatters (after o_proj and down_proj) and 2 all-gathers (before the attention and
the MLP), no collective on a K/V value, and the same outputs as the unsharded run.

Exit status: 0 all pass, 1 something failed, 77 onnx or numpy is not importable.
"""
import argparse
import json
import os
import shutil
import sys

from decoder_checks import check_generate, run

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
GENERATOR = os.path.join(HERE, "..", "..", "tools", "make_llama_synthetic.py")

# (ranks, query heads, K/V heads, hidden): K/V heads < ranks, each dividing the ranks.
# At N = 6 and 12 the head dim (16) does not split N ways: a group's part can then only
# be gathered as a whole (the RoPE tables take S(1@KV) and are gathered).
CASES = [(4, 4, 2, 64), (8, 8, 2, 64), (8, 8, 4, 64), (6, 6, 2, 96), (12, 12, 4, 192)]


def check_case(args, n, heads, kv, hidden):
    label = f"N={n} heads={heads} kv={kv}"
    work = os.path.join(args.work, f"tp{n}_h{heads}_kv{kv}")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    model = os.path.join(work, "model.onnx")
    code, out = run([sys.executable, GENERATOR, "--past", "--layers", "2", "--hidden",
                     str(hidden), "--heads", str(heads), "--kv-heads", str(kv), "-o", model])
    if code != 0:
        return [f"{label}: generator failed: {out}"]
    plan = os.path.join(work, "plan")
    code, out = run([args.tp_compile, model, "--tp", str(n), "-o", plan, "--quiet"])
    if code != 0:
        return [f"{label}: tp-compile failed: {out}"]
    errors = []
    with open(os.path.join(plan, "plan.json")) as f:
        manifest = json.load(f)
    want = {"kind": "SHARD", "dim": "1", "groups": str(kv)}
    cache = [v for v in manifest["inputs"] + manifest["outputs"]
             if v["value"].startswith(("past_key_values.", "present."))]
    if len(cache) != 8:
        errors.append(f"{label}: {len(cache)} cache inputs/outputs in plan.json, expected 8")
    for v in cache:
        p = v["placements"][0]
        if {k: p.get(k) for k in want} != want:
            errors.append(f"{label}: {v['value']} placed {p}, expected S(1@{kv})")
    code, ir = run([args.tp_compile, model, "--tp", str(n), "-o", plan + ".ir", "--quiet",
                    "--dump-ir", "-"])
    kv_weights = [line for line in ir.splitlines()
                  if ("k_proj.weight:" in line or "v_proj.weight:" in line) and "constant" in line]
    # (At N = 6 and 12 these tiny layers (MLP 64 wide) find row-split K/V cheaper.)
    if n in (4, 8) and (len(kv_weights) != 4 or
                        not all(f"sharding(S(1@{kv}))" in line for line in kv_weights)):
        errors.append(f"{label}: K/V weights not on head groups: {kv_weights}")
    ranks = ["--ranks", "threads"] if n > 8 else []
    for past, seq in ((5, 3), (0, 8)):
        code, out = run([args.tp_run, plan, "--check-against", model, "--dim", "batch=2",
                         "--dim", f"seq={seq}", "--dim", f"past={past}"] + ranks)
        if code != 0 or "PASS" not in out:
            errors.append(f"{label} past={past} seq={seq}: tp-run --check-against: {out}")
    errors += check_generate(args.tp_run, plan, model, label, ranks)
    for extra in (["--objective", "memory"], ["--objective", "time"],
                  ["--input-placement", f"past_key_values.*=S(1@{kv})"]):
        other = plan + "." + extra[1].split("=")[0].strip("*.")
        code, out = run([args.tp_compile, model, "--tp", str(n), "-o", other, "--quiet"] + extra)
        if code != 0:
            errors.append(f"{label} {' '.join(extra)}: tp-compile failed: {out}")
            continue
        code, out = run([args.tp_run, other, "--check-against", model, "--dim", "batch=2",
                         "--dim", "seq=3", "--dim", "past=5"] + ranks)
        if code != 0 or "PASS" not in out:
            errors.append(f"{label} {' '.join(extra)}: tp-run --check-against: {out}")
    return errors


def check_megatron_sp(args):
    label = "hidden 512, 2 K/V heads, N=4"
    work = os.path.join(args.work, "megatron_sp")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    model = os.path.join(work, "model.onnx")
    code, out = run([sys.executable, GENERATOR, "--layers", "2", "--hidden", "512", "--heads",
                     "8", "--kv-heads", "2", "--intermediate", "1408", "--vocab", "1024",
                     "-o", model])
    if code != 0:
        return [f"{label}: generator failed: {out}"]
    plan = os.path.join(work, "plan")
    code, ir = run([args.tp_compile, model, "--tp", "4", "-o", plan, "--quiet", "--dim",
                    "batch=1", "--dim", "seq=2048", "--dump-ir", "-"])
    if code != 0:
        return [f"{label}: tp-compile failed: {ir}"]
    errors = []
    for line in ir.splitlines():
        if "proj.weight:" not in line or "constant" not in line:
            continue
        want = "S(1@2)" if ("k_proj" in line or "v_proj" in line) else None
        if want and f"sharding({want})" not in line:
            errors.append(f"{label}: {line.strip()[:120]}: expected {want}")
    import onnx
    rank0 = onnx.load(os.path.join(plan, "rank0.onnx"), load_external_data=False)
    per_layer = {}
    for node in rank0.graph.node:
        if node.domain != "tpc" or node.op_type not in ("AllGather", "ReduceScatter", "AllReduce",
                                                         "AllToAll"):
            continue
        source = node.input[0]
        if "k_proj" in source or "v_proj" in source:
            errors.append(f"{label}: {node.op_type} of the K/V value {source}")
        for layer in (0, 1):
            if f"/layers.{layer}/" in source:
                per_layer.setdefault(layer, []).append(node.op_type)
    for layer in (0, 1):
        kinds = sorted(per_layer.get(layer, []))
        # Layer 0's input is gathered with the embedding's output, outside the layer.
        want = sorted(["ReduceScatter", "ReduceScatter", "AllGather"] +
                      (["AllGather"] if layer == 1 else []))
        if kinds != want:
            errors.append(f"{label}: layer {layer} collectives {kinds}, expected {want}")
    code, out = run([args.tp_run, plan, "--check-against", model, "--dim", "batch=2",
                     "--dim", "seq=8"])
    if code != 0 or "PASS" not in out:
        errors.append(f"{label}: tp-run --check-against: {out}")
    return errors


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tp-compile", required=True)
    ap.add_argument("--tp-run", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    try:
        import numpy  # noqa: F401
        import onnx  # noqa: F401
    except ImportError as e:
        print(f"skipped: {e}")
        return SKIP
    os.makedirs(args.work, exist_ok=True)
    errors = []
    for case in CASES:
        errors += check_case(args, *case)
    errors += check_megatron_sp(args)
    for e in errors:
        print("FAIL:", e)
    print(f"{len(CASES) + 1} cases, {len(errors)} failures")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
