#!/usr/bin/env python3
"""ctest entry: every committed model through `tp-compile --tp N`, then onnx.checker.

usage: check_plans.py --tp-compile PATH --models DIR --work DIR

For each models/NAME.onnx and N in 1, 2, 4 (N > 1 also with --sequence-parallel):
compiles it to WORK/NAME.tpN[.sp]/ and checks that
  - every rank{i}.onnx passes onnx.checker.check_model(full_check=True) (the
    tpc-domain collectives are custom ops: the checker accepts them when the model
    imports the "tpc" domain, and shape inference skips them);
  - the tpc-domain ops are the documented ones, with group_size = N;
  - plan.json lists N ranks whose sha256 fields match the files;
  - every rank declares the same inputs and outputs as the original;
  - node names are unique and not empty (onnxruntime refuses duplicates), and each rank
    file carries metadata_props tpc.rank / tpc.tp / tpc.source_sha256 / tpc.version and
    producer tpc with plan.json's version;
and for N = 1 runs check_ort_equivalence.py (onnxruntime: the original vs rank0.onnx on
models/NAME/test_data_set_0).

Exit status: 0 all pass, 1 something failed, 77 onnx is not importable (ctest reports
the test as skipped). Without onnxruntime/numpy the N = 1 comparison is skipped.
"""
import argparse
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
TPC_OPS = {"AllReduce", "AllGather", "ReduceScatter", "AllToAll", "Shard", "Rank", "CheckIndices"}
# Not collectives: no group_size.
LOCAL_TPC_OPS = {"Rank", "CheckIndices"}


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def io_names(model):
    inits = {t.name for t in model.graph.initializer}
    return ([i.name for i in model.graph.input if i.name not in inits],
            [o.name for o in model.graph.output])


def check_plan(onnx, original, out, n):
    """Problems found in the plan folder `out` (an empty list when it is fine)."""
    problems = []
    try:
        with open(os.path.join(out, "plan.json")) as f:
            plan = json.load(f)
    except (OSError, ValueError) as e:
        return [f"plan.json: {e}"]
    ranks = plan.get("ranks", [])
    if len(ranks) != n:
        problems.append(f"plan.json lists {len(ranks)} ranks, expected {n}")
    want_io = io_names(original)
    for i, rank in enumerate(ranks):
        model_path = os.path.join(out, rank.get("model", f"rank{i}.onnx"))
        weights_path = os.path.join(out, rank.get("weights", f"rank{i}.weights"))
        if rank.get("sha256") != sha256(model_path):
            problems.append(f"rank {i}: plan.json sha256 does not match {model_path}")
        if os.path.exists(weights_path) and rank.get("weights_sha256") != sha256(weights_path):
            problems.append(f"rank {i}: plan.json weights_sha256 does not match {weights_path}")
        try:
            # A path: the checker reads the external data itself, from beside the model.
            onnx.checker.check_model(model_path, full_check=True)
        except Exception as e:  # the checker raises several exception types
            problems.append(f"rank {i}: onnx.checker rejects {model_path}: {e}")
            continue
        model = onnx.load(model_path, load_external_data=False)
        domains = {o.domain: o.version for o in model.opset_import}
        tpc_nodes = [node for node in model.graph.node if node.domain == "tpc"]
        if n == 1 and tpc_nodes:
            problems.append(f"rank {i}: {len(tpc_nodes)} tpc ops in a single-rank plan")
        if tpc_nodes and domains.get("tpc") != 1:
            problems.append(f"rank {i}: tpc ops but opset import tpc={domains.get('tpc')}")
        for node in tpc_nodes:
            if node.op_type not in TPC_OPS:
                problems.append(f"rank {i}: unknown tpc op {node.op_type} ({node.name})")
            attrs = {a.name: a for a in node.attribute}
            if node.op_type not in LOCAL_TPC_OPS and ("group_size" not in attrs or attrs["group_size"].i != n):
                problems.append(f"rank {i}: {node.name} group_size is not {n}")
        # onnxruntime refuses a model with two nodes of one name.
        names = [node.name for node in model.graph.node]
        dup = sorted({x for x in names if names.count(x) > 1 or not x})
        if dup:
            problems.append(f"rank {i}: node names not unique or empty: {dup[:5]}")
        meta = {p.key: p.value for p in model.metadata_props}
        want_meta = {"tpc.rank": str(i), "tpc.tp": str(n),
                     "tpc.source_sha256": plan.get("source_sha256"),
                     "tpc.version": plan.get("tpc_version")}
        if {k: meta.get(k) for k in want_meta} != want_meta:
            problems.append(f"rank {i}: metadata_props {meta}, expected {want_meta}")
        if model.producer_name != "tpc" or model.producer_version != plan.get("tpc_version"):
            problems.append(f"rank {i}: producer {model.producer_name} {model.producer_version}")
        if io_names(model) != want_io:
            problems.append(f"rank {i}: inputs/outputs {io_names(model)}, original {want_io}")
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tp-compile", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    try:
        import onnx
        import onnx.checker  # noqa: F401
    except ImportError as e:
        print(f"SKIP: {e} (run `make deps` to install onnx)")
        return SKIP
    try:
        import numpy  # noqa: F401
        import onnxruntime  # noqa: F401
        have_ort = True
    except ImportError as e:
        print(f"note: {e}: the --tp 1 onnxruntime comparison is skipped")
        have_ort = False

    models = sorted(glob.glob(os.path.join(args.models, "*.onnx")))
    if not models:
        print(f"no models in {args.models}")
        return 1
    os.makedirs(args.work, exist_ok=True)
    failed = []
    runs = 0
    for model_path in models:
        name = os.path.splitext(os.path.basename(model_path))[0]
        original = onnx.load(model_path)
        # Sequence parallelism needs a symbolic `seq` input dim (a ViT's tokens are static).
        has_seq = any(d.dim_param == "seq" for i in original.graph.input
                      for d in i.type.tensor_type.shape.dim)
        for n in (1, 2, 4):
            for sp in ((False,) if n == 1 or not has_seq else (False, True)):
                label = f"{name} --tp {n}" + (" --sequence-parallel" if sp else "")
                out = os.path.join(args.work, f"{name}.tp{n}" + (".sp" if sp else ""))
                shutil.rmtree(out, ignore_errors=True)
                cmd = [args.tp_compile, model_path, "-o", out, "--tp", str(n), "--quiet"]
                if sp:
                    cmd.append("--sequence-parallel")
                runs += 1
                r = subprocess.run(cmd, capture_output=True, text=True)
                if r.returncode != 0:
                    print(f"FAIL {label}: tp-compile exited {r.returncode}: {r.stderr.strip()}")
                    failed.append(label)
                    continue
                problems = check_plan(onnx, original, out, n)
                if not problems and n == 1 and have_ort:
                    data = os.path.join(args.models, name, "test_data_set_0")
                    r = subprocess.run([sys.executable, os.path.join(HERE, "check_ort_equivalence.py"),
                                        model_path, os.path.join(out, "rank0.onnx"), data],
                                       capture_output=True, text=True)
                    if r.returncode != 0:
                        problems.append(f"onnxruntime: {r.stdout.strip()} {r.stderr.strip()}")
                if problems:
                    for p in problems:
                        print(f"FAIL {label}: {p}")
                    failed.append(label)
                else:
                    print(f"ok   {label}")
    print(f"{runs - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
