#!/usr/bin/env python3
"""ctest entry: every committed model through `tp-compile --tp 1`, then onnxruntime.

For each models/NAME.onnx: compiles it to WORK/NAME/, checks WORK/NAME/rank0.onnx with
onnx.checker, and runs check_ort_equivalence.py (original vs rank0.onnx on
models/NAME/test_data_set_0, the original vs the torch outputs stored there, and with
--tp-run the unsharded tp-run outputs vs onnxruntime).

Exit status: 0 all pass, 1 a model failed, 77 onnx/onnxruntime/numpy not importable
(ctest reports the test as skipped).
"""
import argparse
import glob
import os
import shutil
import subprocess
import sys

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tp-compile", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--tp-run", help="also run the plan with tp-run and compare its outputs")
    args = ap.parse_args()
    try:
        import numpy  # noqa: F401
        import onnx
        import onnxruntime  # noqa: F401
    except ImportError as e:
        print(f"SKIP: {e} (run `make deps` to install onnx, onnxruntime, numpy)")
        return SKIP

    models = sorted(glob.glob(os.path.join(args.models, "*.onnx")))
    if not models:
        print(f"no models in {args.models}")
        return 1
    failed = []
    for model in models:
        name = os.path.splitext(os.path.basename(model))[0]
        out = os.path.join(args.work, name)
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(args.work, exist_ok=True)
        r = subprocess.run([args.tp_compile, model, "-o", out, "--quiet"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            print(f"FAIL {name}: tp-compile exited {r.returncode}: {r.stderr.strip()}")
            failed.append(name)
            continue
        rank0 = os.path.join(out, "rank0.onnx")
        try:
            onnx.checker.check_model(rank0, full_check=True)
        except Exception as e:  # the checker raises several exception types
            print(f"FAIL {name}: onnx.checker rejects rank0.onnx: {e}")
            failed.append(name)
            continue
        data = os.path.join(args.models, name, "test_data_set_0")
        extra = []
        if args.tp_run:
            outputs = os.path.join(args.work, name + ".outputs")
            shutil.rmtree(outputs, ignore_errors=True)
            r = subprocess.run([args.tp_run, out, "--input-dir", data, "--output-dir", outputs,
                                "--quiet"], capture_output=True, text=True)
            if r.returncode != 0:
                print(f"FAIL {name}: tp-run exited {r.returncode}: {r.stderr.strip()}")
                failed.append(name)
                continue
            extra = ["--tpc-outputs", outputs]
        r = subprocess.run([sys.executable, os.path.join(HERE, "check_ort_equivalence.py"),
                            model, rank0, data] + extra, capture_output=True, text=True)
        print(r.stdout.rstrip())
        if r.returncode != 0:
            print(f"FAIL {name}: {r.stderr.strip()}")
            failed.append(name)
        else:
            print(f"ok   {name}")
    passed = len(models) - len(failed)
    print(f"{passed} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
