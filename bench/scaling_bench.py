#!/usr/bin/env python3
"""Scaling of tensor parallelism on CPU cores: the tp=2 plan run as 2 rank processes, each
pinned to a core of its own (`tp-run PLAN2 --cpus 0,1`), against the tp=1 plan on one core
(`--cpus 0`) and on both (`--cpus 0,1`, 2 threads). The processes' collectives go through
shared memory (`--transport shm`, what auto picks on one machine) and, for comparison,
Gloo over TCP (`--transport gloo`); beside them the tp=2 plan as 2 processes left to the
scheduler, and as 2 threads of one process (the in-process communicator).

Each round runs every case once, in an order that rotates with the round (a fresh tp-run
each: load, one warm-up, --repeat timed runs; the median run is kept); the figures are
medians over the rounds. Speedup = tp=1 on one core / the other.

    bench/scaling_bench.py --build build [--rounds 5] [--repeat 5] [--seq 128] MODEL.onnx
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

import numpy as np


def run(build, plan, flags, ids, repeat):
    r = subprocess.run([f"{build}/tp-run", plan, *flags, "--repeat", str(repeat), "--input",
                        f"input_ids={ids}", "--quiet"], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"tp-run {plan} {' '.join(flags)} failed:\n{r.stderr}")
    return float(re.search(r"median ([0-9.]+) ms", r.stdout + r.stderr).group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("model")
    args = ap.parse_args()
    if len(os.sched_getaffinity(0)) < 2:
        print("needs 2 CPUs; skipping")
        return 0
    cpus = sorted(os.sched_getaffinity(0))[:2]
    one, two = ["--cpus", str(cpus[0])], ["--cpus", f"{cpus[0]},{cpus[1]}"]
    with tempfile.TemporaryDirectory() as work:
        plans = {}
        for tp in (1, 2):
            plans[tp] = os.path.join(work, f"tp{tp}")
            subprocess.run([f"{args.build}/tp-compile", args.model, "--tp", str(tp), "-o", plans[tp], "--quiet"],
                           check=True)
        ids = os.path.join(work, "ids.npy")
        np.save(ids, np.random.default_rng(0).integers(0, 32, (args.batch, args.seq)).astype(np.int64))
        shm, gloo = ["--transport", "shm"], ["--transport", "gloo"]
        cases = [("tp=1, 1 core", plans[1], one), ("tp=1, 2 cores (2 threads)", plans[1], two),
                 ("tp=2, 2 pinned procs, shm", plans[2], two + shm),
                 ("tp=2, 2 pinned procs, Gloo", plans[2], two + gloo),
                 ("tp=2, 2 procs unpinned, shm", plans[2], ["--threads", "2"] + shm),
                 ("tp=2, 2 procs unpinned, Gloo", plans[2], ["--threads", "2"] + gloo),
                 ("tp=2, 2 threads, 1 process", plans[2], ["--ranks", "threads", "--threads", "2"])]
        times = {c[0]: [] for c in cases}
        print(f"load average before: {os.getloadavg()[0]:.2f}; {args.rounds} rounds x {args.repeat} runs")
        for r in range(args.rounds):
            order = cases[r % len(cases):] + cases[:r % len(cases)]
            for name, plan, flags in order:
                times[name].append(run(args.build, plan, flags, ids, args.repeat))
        base = sorted(times[cases[0][0]])[args.rounds // 2]
        print(f"{'mode':30} {'median ms':>10} {'range ms':>17} {'speedup':>8}")
        for name, _, _ in cases:
            t = sorted(times[name])
            med = t[len(t) // 2]
            print(f"{name:30} {med:10.1f} {f'{t[0]:.1f}-{t[-1]:.1f}':>17} {base / med:8.2f}")
        print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
