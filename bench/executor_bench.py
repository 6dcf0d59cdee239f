#!/usr/bin/env python3
"""tpc's CPU executor against onnxruntime on the same model, inputs and thread count.

For each model: compile it with tp-compile (1 rank), draw inputs (token ids in [0, 32),
masks all ones, floats uniform in [-1, 1); batch and seq from the flags), save them as
.npy, then time `tp-run --repeat K --threads T` and an onnxruntime session
(intra_op_num_threads=T, inter_op_num_threads=1, all graph optimisations) for K runs
after one warm-up. Throughput ratio = tpc runs/s / ort runs/s.

Memory: tpc reports its planned arena (activations) plus the peak of unplanned buffers;
outputs and the mapped weights are not included. onnxruntime's activation memory is
measured as the growth of the process's resident memory (/proc/self/statm) from after
session creation to after the timed runs, in a fresh process per model: its arena (which
keeps what the runs allocated) plus anything else they allocate. Both exclude weights
(ORT has already mapped/loaded them at session creation); the ratio is tpc / ort.

    bench/executor_bench.py --build build [--threads 2] [--batch 1 --seq 128] [--repeat 10]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

ORT_CHILD = r"""
import json, os, sys, time
import numpy as np, onnxruntime as ort
model, threads, repeat = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
feeds = {k: np.load(v) for k, v in json.loads(sys.argv[4]).items()}
o = ort.SessionOptions(); o.intra_op_num_threads = threads; o.inter_op_num_threads = 1
s = ort.InferenceSession(model, o, providers=["CPUExecutionProvider"])
rss = lambda: int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
base = rss()
s.run(None, feeds)
times = []
for _ in range(repeat):
    t = time.perf_counter(); s.run(None, feeds); times.append(time.perf_counter() - t)
print(json.dumps({"mean_s": sum(times) / len(times), "mem_bytes": rss() - base}))
"""


def make_inputs(model_path, batch, seq, out_dir):
    import numpy as np
    import onnx
    m = onnx.load(model_path, load_external_data=False)
    rng = np.random.default_rng(0)
    inits = {i.name for i in m.graph.initializer}
    files = {}
    for k, inp in enumerate(x for x in m.graph.input if x.name not in inits):
        tt = inp.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else {"batch": batch, "seq": seq}.get(d.dim_param, 1)
                for d in tt.shape.dim]
        if tt.elem_type == onnx.TensorProto.INT64:
            a = np.ones(dims, np.int64) if "mask" in inp.name else rng.integers(0, 32, dims).astype(np.int64)
        else:
            a = rng.uniform(-1, 1, dims).astype(np.float32)
        files[inp.name] = os.path.join(out_dir, f"input_{k}.npy")
        np.save(files[inp.name], a)
    return files


def bench(build, model, args, work):
    name = os.path.basename(model)[:-5]
    plan = os.path.join(work, name + "_plan")
    subprocess.run([f"{build}/tp-compile", model, "-o", plan, "--force", "--quiet"], check=True)
    inputs = make_inputs(model, args.batch, args.seq, work)
    cmd = [f"{build}/tp-run", plan, "--repeat", str(args.repeat), "--threads", str(args.threads)]
    for k, f in inputs.items():
        cmd += ["--input", f"{k}={f}"]
    r = subprocess.run(cmd, capture_output=True, text=True, check=True)
    mean_ms = float(re.search(r"mean ([0-9.]+) ms", r.stdout).group(1))
    arena = float(re.search(r"arena ([0-9.]+) MiB", r.stderr).group(1))
    unplanned = float(re.search(r"unplanned peak ([0-9.]+) MiB", r.stderr).group(1))
    tpc_mem = (arena + unplanned) * 1048576
    o = subprocess.run([sys.executable, "-c", ORT_CHILD, model, str(args.threads), str(args.repeat), json.dumps(inputs)],
                       capture_output=True, text=True, check=True)
    ort = json.loads(o.stdout.strip().splitlines()[-1])
    return name, mean_ms, ort["mean_s"] * 1e3, tpc_mem, ort["mem_bytes"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("models", nargs="*")
    args = ap.parse_args()
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        print("onnxruntime is not installed (make deps); skipping the executor benchmark")
        return 0
    models = args.models or sorted(os.path.join("models", f) for f in os.listdir("models") if f.endswith(".onnx"))
    print(f"threads {args.threads}, batch {args.batch}, seq {args.seq}, {args.repeat} runs each")
    print(f"{'model':16} {'tpc ms':>9} {'ort ms':>9} {'throughput tpc/ort':>19} {'tpc MiB':>9} {'ort MiB':>9} {'memory tpc/ort':>15}")
    with tempfile.TemporaryDirectory() as work:
        for m in models:
            name, t, o, tm, om = bench(args.build, m, args, work)
            mem_ratio = f"{tm / om:15.2f}" if om > 0 else f"{'n/a':>15}"
            print(f"{name:16} {t:9.2f} {o:9.2f} {o / t:19.2f} {tm / 1048576:9.2f} {om / 1048576:9.2f} {mem_ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
