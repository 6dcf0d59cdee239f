#!/usr/bin/env python3
"""tpc's CPU executor against onnxruntime on the same model, inputs and thread count.

For each model: compile it with tp-compile (1 rank), draw inputs (token ids in [0, 32),
masks all ones, floats uniform in [-1, 1); batch and seq from the flags), save them as
.npy, then time `tp-run --repeat K --threads T` and an onnxruntime session
(intra_op_num_threads=T, inter_op_num_threads=1, all graph optimisations) for K runs
after one warm-up. Throughput ratio = tpc runs/s / ort runs/s.

Memory: tpc reports its planned arena (activations) plus the peak of unplanned buffers
(the outputs among them); the mapped weights are not included. onnxruntime's activation
memory is the peak of the process's resident memory during the runs (VmHWM, reset with
/proc/self/clear_refs after session creation) less its resident memory at that point, in a
fresh process per model: its arena, the outputs and anything else the runs allocate, even
if freed again. Both exclude weights (ORT has already mapped/loaded them at session
creation); the ratio is tpc / ort.

    bench/executor_bench.py --build build [--threads 1,2] [--shapes 1x128,4x512] [--rounds 3]
        [--repeat 10] [--unfused] [--profile] [--dim NAME=SIZE ...] MODEL.onnx...

`--dim` sizes other symbolic dims (unnamed ones are 1; `batch` and `seq` come from
--shapes): an onnxruntime-genai export's prompt is
    --shapes 1x32 --dim batch_size=1 --dim sequence_length=32 --dim past_sequence_length=0
        --dim total_sequence_length=32 --dim kv_cache_dim=HEAD_SIZE
(its caches empty, its convolution and recurrent states drawn like any float input).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

ORT_CHILD = r"""
import collections, ctypes, json, os, sys, time
import numpy as np, onnxruntime as ort
model, threads, repeat, profile = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[5] == "1"
feeds = {k: np.load(v) for k, v in json.loads(sys.argv[4]).items()}
o = ort.SessionOptions(); o.intra_op_num_threads = threads; o.inter_op_num_threads = 1
o.enable_profiling = profile
s = ort.InferenceSession(model, o, providers=["CPUExecutionProvider"])
rss = lambda: int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
# Heap memory that session creation freed (prepacking's buffers) would hide the runs'
# allocations from the resident size: give it back first.
ctypes.CDLL("libc.so.6").malloc_trim(0)
base = rss()
# The peak from here on: writing 5 to clear_refs sets the process's peak resident size
# (VmHWM) to its current one, so buffers the runs free again still count.
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
s.run(None, feeds)
times = []
for _ in range(repeat):
    t = time.perf_counter(); s.run(None, feeds); times.append(time.perf_counter() - t)
ops = {}
if profile:
    path = s.end_profiling()
    for e in json.load(open(path)):
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            ops[e["args"]["op_name"]] = ops.get(e["args"]["op_name"], 0) + e["dur"] / 1e3 / (repeat + 1)
    os.remove(path)
hwm = next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith("VmHWM:"))
print(json.dumps({"median_s": sorted(times)[len(times) // 2], "mem_bytes": hwm - base, "ops": ops}))
"""


def make_inputs(model_path, batch, seq, out_dir, sizes=None):
    import numpy as np
    import onnx
    m = onnx.load(model_path, load_external_data=False)
    rng = np.random.default_rng(0)
    inits = {i.name for i in m.graph.initializer}
    files = {}
    for k, inp in enumerate(x for x in m.graph.input if x.name not in inits):
        tt = inp.type.tensor_type
        named = {"batch": batch, "seq": seq, **(sizes or {})}
        dims = [d.dim_value if d.HasField("dim_value") else named.get(d.dim_param, 1) for d in tt.shape.dim]
        if tt.elem_type == onnx.TensorProto.INT64:
            a = np.ones(dims, np.int64) if "mask" in inp.name else rng.integers(0, 32, dims).astype(np.int64)
        else:
            a = rng.uniform(-1, 1, dims).astype(np.float32)
        files[inp.name] = os.path.join(out_dir, f"input_{k}.npy")
        np.save(files[inp.name], a)
    return files


def run_tpc(build, plan, inputs, threads, repeat, fuse=True, profile=False):
    cmd = [f"{build}/tp-run", plan, "--repeat", str(repeat), "--threads", str(threads)]
    for k, f in inputs.items():
        cmd += ["--input", f"{k}={f}"]
    if not fuse:
        cmd.append("--no-fuse")
    if profile:
        cmd.append("--profile")
    r = subprocess.run(cmd, capture_output=True, text=True, check=True)
    median_ms = float(re.search(r"median ([0-9.]+) ms", r.stdout + r.stderr).group(1))
    arena = float(re.search(r"arena ([0-9.]+) MiB", r.stderr).group(1))
    unplanned = float(re.search(r"unplanned peak ([0-9.]+) MiB", r.stderr).group(1))
    ops = {}
    if profile:
        for m in re.finditer(r"^  (\S+)\s+([0-9.]+) ms", r.stdout + r.stderr, re.M):
            ops[m.group(1)] = float(m.group(2))
    return median_ms, (arena + unplanned) * 1048576, ops


def run_ort(model, inputs, threads, repeat, profile=False):
    o = subprocess.run([sys.executable, "-c", ORT_CHILD, model, str(threads), str(repeat), json.dumps(inputs),
                        "1" if profile else "0"], capture_output=True, text=True, check=True)
    r = json.loads(o.stdout.strip().splitlines()[-1])
    return r["median_s"] * 1e3, r["mem_bytes"], r["ops"]


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--threads", default="1,2", help="thread counts, comma-separated")
    ap.add_argument("--shapes", default="1x128", help="batch x seq, comma-separated (1x128,4x512)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (a fresh process each)")
    ap.add_argument("--repeat", type=int, default=10, help="timed runs per process (the median is kept)")
    ap.add_argument("--unfused", action="store_true", help="also time tp-run --no-fuse")
    ap.add_argument("--profile", action="store_true", help="per-op-type profiles side by side")
    ap.add_argument("--dim", action="append", default=[], metavar="NAME=SIZE",
                    help="the size of a symbolic dim of the inputs (repeatable)")
    ap.add_argument("models", nargs="*")
    args = ap.parse_args()
    sizes = {}
    for d in args.dim:
        name, _, size = d.partition("=")
        if not size.isdigit():
            ap.error(f"--dim {d}: expected NAME=SIZE")
        sizes[name] = int(size)
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        print("onnxruntime is not installed (make deps); skipping the executor benchmark")
        return 0
    models = args.models or sorted(os.path.join("models", f) for f in os.listdir("models") if f.endswith(".onnx"))
    threads = [int(t) for t in args.threads.split(",")]
    shapes = [tuple(int(x) for x in sh.split("x")) for sh in args.shapes.split(",")]
    print(f"load average before: {os.getloadavg()[0]:.2f}; {args.rounds} interleaved rounds x {args.repeat} runs, medians")
    head = f"{'model':14} {'shape':>6} {'thr':>3} {'tpc ms':>9} {'ort ms':>9} {'tpc/ort':>8}"
    if args.unfused:
        head += f" {'unfused ms':>10} {'fused gain':>10}"
    print(head + f" {'tpc MiB':>8} {'ort MiB':>8} {'mem tpc/ort':>11}")
    profiles = []
    with tempfile.TemporaryDirectory() as work:
        for m in models:
            name = os.path.basename(m)[:-5]
            plan = os.path.join(work, name + "_plan")
            subprocess.run([f"{args.build}/tp-compile", m, "-o", plan, "--force", "--quiet"], check=True)
            for batch, seq in shapes:
                shape_dir = os.path.join(work, f"{name}_{batch}x{seq}")
                os.makedirs(shape_dir)
                inputs = make_inputs(m, batch, seq, shape_dir, sizes)
                for t in threads:
                    runs = {"tpc": [], "ort": [], "unfused": []}
                    tm = om = 0
                    for r in range(args.rounds):
                        order = ["tpc", "ort"] + (["unfused"] if args.unfused else [])
                        order = order[r % len(order):] + order[:r % len(order)]
                        for who in order:
                            if who == "ort":
                                ms, om, _ = run_ort(m, inputs, t, args.repeat)
                            else:
                                ms, mem, _ = run_tpc(args.build, plan, inputs, t, args.repeat, fuse=who == "tpc")
                                if who == "tpc":
                                    tm = mem
                            runs[who].append(ms)
                    tpc, ort = median(runs["tpc"]), median(runs["ort"])
                    line = f"{name:14} {f'{batch}x{seq}':>6} {t:3} {tpc:9.2f} {ort:9.2f} {ort / tpc:8.2f}"
                    if args.unfused:
                        unf = median(runs["unfused"])
                        line += f" {unf:10.2f} {unf / tpc:10.2f}"
                    mem_ratio = f"{tm / om:11.2f}" if om > 0 else f"{'n/a':>11}"
                    print(line + f" {tm / 1048576:8.2f} {om / 1048576:8.2f} {mem_ratio}", flush=True)
                    if args.profile:
                        _, _, tops = run_tpc(args.build, plan, inputs, t, args.repeat, profile=True)
                        _, _, oops = run_ort(m, inputs, t, args.repeat, profile=True)
                        profiles.append((f"{name} {batch}x{seq} {t} thread(s)", tops, oops))
    for title, tops, oops in profiles:
        print(f"\nper op type, ms per run: {title} (tpc: rank 0's last run; ort: mean)")
        print(f"  {'tpc op':22} {'ms':>8}    {'ort op':22} {'ms':>8}")
        a = sorted(tops.items(), key=lambda kv: -kv[1])[:12]
        b = sorted(oops.items(), key=lambda kv: -kv[1])[:12]
        for i in range(max(len(a), len(b))):
            left = f"{a[i][0]:22} {a[i][1]:8.2f}" if i < len(a) else " " * 31
            right = f"{b[i][0]:22} {b[i][1]:8.2f}" if i < len(b) else ""
            print(f"  {left}    {right}")
        print(f"  {'total':22} {sum(tops.values()):8.2f}    {'total':22} {sum(oops.values()):8.2f}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
