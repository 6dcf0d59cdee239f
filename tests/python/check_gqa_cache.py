#!/usr/bin/env python3
"""ctest entry: a grouped-query KV-cache decoder keeps its cache on groups of ranks.

usage: check_gqa_cache.py --tp-compile PATH --tp-run PATH --work DIR

Generates Llama-shaped decoders with a KV cache (tools/make_llama_synthetic.py --past:
Optimum's `past_key_values.{i}.key|value` inputs and `present.{i}.key|value` outputs)
with fewer K/V heads than ranks, compiles them with the default objective and no flags,
and checks that
  - every cache input and output is placed S(1@KV) in plan.json (each K/V head's cache
    on its group of N/KV ranks, never gathered), and every K/V projection weight too;
  - `tp-run --check-against` the unsharded model passes, on a decoding step (past 5,
    seq 3) and a prefill (past 0, seq 8), with the processes launched by tp-run itself.

Exit status: 0 all pass, 1 something failed, 77 onnx or numpy is not importable.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
GENERATOR = os.path.join(HERE, "..", "..", "tools", "make_llama_synthetic.py")

# (ranks, query heads, K/V heads, hidden): K/V heads < ranks, each dividing the ranks.
CASES = [(4, 4, 2, 64), (8, 8, 2, 64), (8, 8, 4, 64)]


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


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
    if len(kv_weights) != 4 or not all(f"sharding(S(1@{kv}))" in line for line in kv_weights):
        errors.append(f"{label}: K/V weights not on head groups: {kv_weights}")
    for past, seq in ((5, 3), (0, 8)):
        code, out = run([args.tp_run, plan, "--check-against", model, "--dim", "batch=2",
                         "--dim", f"seq={seq}", "--dim", f"past={past}"])
        if code != 0 or "PASS" not in out:
            errors.append(f"{label} past={past} seq={seq}: tp-run --check-against: {out}")
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
    for e in errors:
        print("FAIL:", e)
    print(f"{len(CASES)} cases, {len(errors)} failures")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
