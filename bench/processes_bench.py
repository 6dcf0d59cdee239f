#!/usr/bin/env python3
"""GPT-2-small forward, tensor-parallel over N ranks: tp-run's rank processes (Gloo over
127.0.0.1) against its rank threads (the in-process communicator), with the unsharded
model (a 1-rank plan, run by the same tp-run) as the baseline, in the same run.

The model is tools/make_gpt2_synthetic.py's (12 layers, hidden 768, vocabulary 8192,
~370 MB of random weights; generated into BUILD/bench/ if absent, reused if present; if
it cannot be generated the benchmark says so and exits 0). It is compiled with tp-compile
to 1 and to N ranks (BUILD/bench/NAME_tp1, NAME_tpN), then each round runs, in an order
that rotates from round to round,

    tp-run PLAN_N --repeat K --dim seq=128 --quiet                   # processes
    tp-run PLAN_N --repeat K --dim seq=128 --quiet --ranks threads   # threads
    tp-run PLAN_1 --repeat K --dim seq=128 --quiet                   # unsharded

and takes the median run time tp-run prints (K timed runs after one untimed). The
figures are the medians over the rounds of those medians; the ratios are of the medians.
Every mode uses tp-run's default thread count (all cores: split between the ranks).
The wall time of each whole command (start, plan verification, load, K + 1 runs) is
reported too.

Memory: one more run of each, without --quiet and --repeat (one forward). For processes,
the peak resident memory (VmHWM) each rank process reports ("tp-run: rank r: ...,
peak resident X MiB"); for threads and unsharded, the peak resident memory of the one
process (ru_maxrss from wait4). For processes, wait4 on tp-run (the launcher) gives the
largest peak of it and its rank processes, printed for reference. Plans, the model and
the inputs are in the page cache for every timed run (one untimed run of each mode first);
the load average before and after is printed.

    python3 tools/make_gpt2_synthetic.py -o build/bench/gpt2_small.onnx
    python3 bench/processes_bench.py --build build [--tp 2] [--rounds 5] [--repeat 5]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def run(cmd):
    """Runs cmd; returns (stdout, stderr, wall seconds, peak RSS in MiB from wait4: the
    largest of the process and its waited-for descendants)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        o, e = out.read(), err.read()
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}):\n{o}{e}")
    return o, e, wall, usage.ru_maxrss / 1024.0  # KiB on Linux


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--model", help="default: BUILD/bench/gpt2_small.onnx (generated if absent)")
    ap.add_argument("--tp", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--seq", type=int, default=128)
    args = ap.parse_args()
    if args.tp < 2:
        sys.exit("--tp must be at least 2 (the baseline is the 1-rank plan)")
    out_dir = os.path.join(args.build, "bench")
    os.makedirs(out_dir, exist_ok=True)
    model = args.model or os.path.join(out_dir, "gpt2_small.onnx")
    if not os.path.exists(model):
        g = subprocess.run([sys.executable, "tools/make_gpt2_synthetic.py", "-o", model])
        if g.returncode != 0:
            print("processes benchmark skipped: could not generate the GPT-2-small model")
            return 0
    name = os.path.basename(model)[:-5]
    tp_compile, tp_run = os.path.join(args.build, "tp-compile"), os.path.join(args.build, "tp-run")
    plans = {}
    for n in (1, args.tp):
        plans[n] = os.path.join(out_dir, f"{name}_tp{n}")
        subprocess.run([tp_compile, model, "--tp", str(n), "-o", plans[n], "--force", "--quiet"], check=True)

    common = ["--dim", f"seq={args.seq}"]
    modes = {
        "processes": [tp_run, plans[args.tp]] + common,
        "threads": [tp_run, plans[args.tp], "--ranks", "threads"] + common,
        "unsharded": [tp_run, plans[1]] + common,
    }
    names = list(modes)
    # The page cache warm for every plan, and a first run of each mode untimed.
    for m in names:
        run(modes[m] + ["--quiet"])
    load_before = loadavg()
    medians = {m: [] for m in names}
    walls = {m: [] for m in names}
    for r in range(args.rounds):
        for j in range(len(names)):
            m = names[(j + r) % len(names)]
            out, _, wall, _ = run(modes[m] + ["--repeat", str(args.repeat), "--quiet"])
            medians[m].append(float(re.search(r"median ([0-9.]+) ms", out).group(1)))
            walls[m].append(wall)
    load_after = loadavg()

    # Memory: one forward each, with the per-rank report.
    mem = {}
    _, err, _, launcher_peak = run(modes["processes"])
    ranks = [float(x) for x in re.findall(r"rank \d+: .*peak resident ([0-9.]+) MiB", err)]
    if len(ranks) != args.tp:
        sys.exit(f"expected {args.tp} per-rank lines with the peak resident memory, got:\n{err}")
    for m in ("threads", "unsharded"):
        mem[m] = run(modes[m])[3]
    weights = {n: sum(os.path.getsize(os.path.join(plans[n], f)) for f in os.listdir(plans[n])
                      if "weights" in f or f.endswith(".bin")) / 1048576 for n in plans}

    print(f"\n{name}: batch 1, seq {args.seq}, N = {args.tp}; {os.cpu_count()} cores; "
          f"{args.rounds} interleaved rounds of tp-run --repeat {args.repeat}")
    print(f"loadavg before: {load_before}; after: {load_after}")
    med = {m: statistics.median(v) for m, v in medians.items()}
    wall = {m: statistics.median(v) for m, v in walls.items()}
    print(f"\n| mode | forward ms (median of medians) | range of medians | wall s per tp-run |")
    print("|---|---|---|---|")
    for m in names:
        print(f"| {m} | {med[m]:.1f} | {min(medians[m]):.1f}-{max(medians[m]):.1f} | {wall[m]:.2f} |")
    print(f"\nprocesses / threads: {med['processes'] / med['threads']:.2f}")
    print(f"threads / unsharded: {med['threads'] / med['unsharded']:.2f}")
    print(f"processes / unsharded: {med['processes'] / med['unsharded']:.2f}")
    print(f"wall per tp-run, processes / threads: {wall['processes'] / wall['threads']:.2f}")

    print(f"\n| mode | processes | peak resident per process MiB |")
    print("|---|---|---|")
    print(f"| processes | {args.tp} | " + ", ".join(f"{x:.0f}" for x in ranks) +
          f" (launcher + ranks max: {launcher_peak:.0f}) |")
    print(f"| threads | 1 | {mem['threads']:.0f} |")
    print(f"| unsharded | 1 | {mem['unsharded']:.0f} |")
    print(f"\nlargest rank process / threads process: {max(ranks) / mem['threads']:.2f}; "
          f"/ unsharded: {max(ranks) / mem['unsharded']:.2f}")
    if weights[1] > 0:
        print(f"weight files: {weights[1]:.0f} MiB unsharded, {weights[args.tp]:.0f} MiB in the "
              f"{args.tp}-rank plan ({weights[args.tp] / args.tp:.0f} MiB per rank on average)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
