#!/usr/bin/env python3
"""ctest entry: half-precision plans (`tp-compile --dtype f16|bf16`) of every committed model.

usage: check_half_plans.py --tp-compile PATH --tp-run PATH --models DIR --work DIR

For each models/NAME.onnx, dtype in f16, bf16 and N in 1, 2, 4: compiles the plan and
  - runs it on the CPU (ranks as threads) on the model's test inputs against the unsharded
    f32 run, within the documented tolerances (docs/cuda.md): |got - want| <= atol +
    rtol * |want| with f16: rtol = atol = 1e-2, bf16: rtol = atol = 5e-2;
  - checks every rank file: its float initializers are of the dtype (none f32 is left but
    a Resize/Upsample scale), its graph inputs and outputs keep the original's declared
    types, and onnx.checker.check_model(full_check=True) passes;
  - checks that the plan's weights are half those of the f32 plan of the same N (+1%).

Exit status: 0 all pass, 1 something failed, 77 onnx is not importable.
"""
import argparse
import glob
import os
import shutil
import subprocess
import sys

SKIP = 77
TOLERANCE = {"f16": 1e-2, "bf16": 5e-2}
ONNX_TYPE = {"f16": 10, "bf16": 16}


def weight_bytes(plan):
    return sum(os.path.getsize(p) for p in glob.glob(os.path.join(plan, "rank*.weights")))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tp-compile", required=True)
    ap.add_argument("--tp-run", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    try:
        import onnx
    except ImportError:
        print("skipped: onnx is not importable")
        return SKIP
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    failures = []
    runs = 0
    for model in sorted(glob.glob(os.path.join(args.models, "*.onnx"))):
        name = os.path.basename(model)[:-5]
        data = os.path.join(args.models, name, "test_data_set_0")
        original = onnx.load(model, load_external_data=False)
        io_types = {v.name: v.type.tensor_type.elem_type
                    for v in list(original.graph.input) + list(original.graph.output)}
        for n in (1, 2, 4):
            f32_plan = os.path.join(args.work, f"{name}.tp{n}.f32")
            r = subprocess.run([args.tp_compile, model, "--tp", str(n), "-o", f32_plan, "--quiet"],
                               capture_output=True, text=True)
            if r.returncode != 0:
                continue  # this N does not fit the model (check_plans.py covers refusals)
            for dtype in ("f16", "bf16"):
                what = f"{name} N={n} {dtype}"
                plan = os.path.join(args.work, f"{name}.tp{n}.{dtype}")
                r = subprocess.run([args.tp_compile, model, "--tp", str(n), "--dtype", dtype,
                                    "-o", plan, "--quiet"], capture_output=True, text=True)
                if r.returncode != 0:
                    failures.append(f"{what}: tp-compile failed: {r.stderr.strip()}")
                    continue
                # tp-run's defaults for a half plan are these tolerances (it says so).
                tol = f"{TOLERANCE[dtype]:g}"
                cmd = [args.tp_run, plan, "--ranks", "threads", "--quiet", "--check-against", model]
                if os.path.isdir(data):
                    cmd += ["--input-dir", data]
                r = subprocess.run(cmd, capture_output=True, text=True)
                runs += 1
                if r.returncode != 0:
                    failures.append(f"{what}: tp-run: {(r.stdout + r.stderr).strip()[-800:]}")
                elif (f"rtol {tol}, atol {tol}, the defaults of "
                      f"{'an' if dtype == 'f16' else 'a'} {dtype} plan") not in r.stdout:
                    failures.append(f"{what}: tp-run did not compare with rtol = atol = {tol}: "
                                    f"{r.stdout.strip()[-400:]}")
                got, want = weight_bytes(plan), weight_bytes(f32_plan)
                if not want / 2 * 0.99 <= got <= want / 2 * 1.01 + 4096 * n:
                    failures.append(f"{what}: weights {got} bytes, the f32 plan's {want}")
                for rank_file in sorted(glob.glob(os.path.join(plan, "rank*.onnx"))):
                    m = onnx.load(rank_file, load_external_data=False)
                    for init in m.graph.initializer:
                        if init.data_type == 1 and "scale" not in init.name.lower():
                            failures.append(f"{what}: {os.path.basename(rank_file)}: initializer "
                                            f"'{init.name}' is still f32")
                            break
                    for v in list(m.graph.input) + list(m.graph.output):
                        if v.name in io_types and v.type.tensor_type.elem_type != io_types[v.name]:
                            failures.append(f"{what}: {os.path.basename(rank_file)}: '{v.name}' "
                                            "changed its declared type")
                    try:
                        onnx.checker.check_model(rank_file, full_check=True)
                    except Exception as e:  # noqa: BLE001 - the checker's own error types vary
                        failures.append(f"{what}: {os.path.basename(rank_file)}: checker: {e}")
    print(f"half-precision plans: {runs} run, {len(failures)} failure(s)")
    for f in failures:
        print("FAIL", f)
    return 1 if failures or runs == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
