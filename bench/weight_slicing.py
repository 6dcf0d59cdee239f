#!/usr/bin/env python3
"""Weight slicing throughput: `tp-compile MODEL --tp N` against `cp` of the same
external-data files, in the same run (bench/run.sh with BENCH_BIG=1).

    python3 bench/weight_slicing.py --build build --tp 4 --runs 2 build/bench/big/llama_big.onnx

The source files are read once first (page cache warm for both commands). Each run
syncs before every command, then times `cp MODEL MODEL.weights DIR/` and
`tp-compile MODEL --tp N -o DIR --force --quiet`, each followed by a timed `sync` (the
write-back of what it wrote). The figures are those of the last run. Needs free disk
for two copies of the weights.
"""
import argparse
import glob
import os
import shutil
import subprocess
import sys
import time


def timed(cmd):
    t = time.perf_counter()
    subprocess.run(cmd, check=True)
    run_s = time.perf_counter() - t
    t = time.perf_counter()
    subprocess.run(["sync"], check=True)
    return run_s, time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--build", default="build")
    ap.add_argument("--tp", type=int, default=4)
    ap.add_argument("--runs", type=int, default=2)
    a = ap.parse_args()

    sources = [a.model] + sorted(glob.glob(a.model + ".weights"))
    src_bytes = sum(os.path.getsize(f) for f in sources)
    work = os.path.dirname(os.path.abspath(a.model))
    free = shutil.disk_usage(work).free
    if free < 2.2 * src_bytes:
        sys.exit(f"weight_slicing: {free / 1e9:.1f} GB free in {work}, need "
                 f"{2.2 * src_bytes / 1e9:.1f} GB (two copies of the weights)")
    for f in sources:  # warm the page cache for the reads of both commands
        with open(f, "rb") as fh:
            while fh.read(64 << 20):
                pass
    cp_dir = os.path.join(work, "cp_out")
    plan_dir = os.path.join(work, f"plan_tp{a.tp}")
    tpc = os.path.join(a.build, "tp-compile")
    rows = []
    for run in range(a.runs):
        for d in (cp_dir, plan_dir):
            shutil.rmtree(d, ignore_errors=True)
        subprocess.run(["sync"], check=True)
        os.makedirs(cp_dir)
        cp = timed(["cp"] + sources + [cp_dir + "/"])
        shutil.rmtree(cp_dir)
        subprocess.run(["sync"], check=True)
        tc = timed([tpc, a.model, "--tp", str(a.tp), "-o", plan_dir, "--force", "--quiet"])
        written = sum(os.path.getsize(f) for f in glob.glob(os.path.join(plan_dir, "*")))
        rows.append((cp, tc, written))
        print(f"run {run + 1}: cp {cp[0]:.2f} s (+ sync {cp[1]:.2f} s), tp-compile --tp {a.tp} "
              f"{tc[0]:.2f} s (+ sync {tc[1]:.2f} s)")
    shutil.rmtree(plan_dir, ignore_errors=True)
    (cp_s, cp_sync), (tc_s, tc_sync), written = rows[-1]
    gb = src_bytes / 1e9
    print(f"\nsource {gb:.2f} GB (model + weights); tp-compile wrote {written / 1e9:.2f} GB "
          f"over {a.tp} ranks")
    print(f"{'':22} {'cp':>9} {'tp-compile':>11} {'tp-compile/cp':>14}")
    print(f"{'seconds':22} {cp_s:9.2f} {tc_s:11.2f} {tc_s / cp_s:14.2f}")
    print(f"{'GB/s (source bytes)':22} {gb / cp_s:9.2f} {gb / tc_s:11.2f} {cp_s / tc_s:14.2f}")
    print(f"{'seconds incl. sync':22} {cp_s + cp_sync:9.2f} {tc_s + tc_sync:11.2f} "
          f"{(tc_s + tc_sync) / (cp_s + cp_sync):14.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
