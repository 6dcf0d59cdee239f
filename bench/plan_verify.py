#!/usr/bin/env python3
"""What tp-run's check of a plan's files against plan.json costs (SHA-256 of every rank
file and weight shard): `tp-run PLAN` against `tp-run PLAN --no-verify` in the same run,
interleaved, with `cat PLAN/* > /dev/null` (reading the same bytes) as the baseline.

    python3 tools/make_big_model.py -o build/bench/big/llama_big.onnx
    build/tp-compile build/bench/big/llama_big.onnx --tp 4 -o build/bench/big/plan4 --quiet
    python3 bench/plan_verify.py --build build --runs 5 build/bench/big/plan4

The page cache is warm for every command (the plan is read once first). Prints the
medians, the verification's cost (verify − no-verify) and its throughput over the
plan's bytes.
"""
import argparse
import glob
import os
import statistics
import subprocess
import sys
import time


def timed(cmd, **kw):
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, **kw)
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("plan")
    ap.add_argument("--build", default="build")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--threads", default="2")
    args = ap.parse_args()
    files = sorted(glob.glob(os.path.join(args.plan, "rank*")))
    if not files:
        sys.exit(f"{args.plan}: no rank files")
    total = sum(os.path.getsize(f) for f in files)
    tp_run = os.path.join(args.build, "tp-run")
    base = [tp_run, args.plan, "--quiet", "--threads", args.threads]
    cat = "cat " + " ".join(files) + " > /dev/null"
    subprocess.run(cat, shell=True, check=True)  # warm the page cache
    rows = {"cat": [], "no-verify": [], "verify": []}
    for _ in range(args.runs):
        rows["cat"].append(timed(cat, shell=True))
        rows["no-verify"].append(timed(base + ["--no-verify"]))
        rows["verify"].append(timed(base))
    med = {k: statistics.median(v) for k, v in rows.items()}
    print(f"plan: {args.plan}, {len(files)} files, {total / 1e9:.3f} GB; {args.runs} interleaved runs, medians")
    for k in ("cat", "no-verify", "verify"):
        print(f"  {k:10} {med[k]:8.3f} s")
    cost = med["verify"] - med["no-verify"]
    print(f"  verification: {cost:.3f} s = {total / 1e9 / max(cost, 1e-9):.2f} GB/s "
          f"({cost / med['no-verify'] * 100:.0f}% of a run with one forward; cat reads at "
          f"{total / 1e9 / med['cat']:.2f} GB/s)")


if __name__ == "__main__":
    main()
