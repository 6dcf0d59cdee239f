#!/usr/bin/env python3
"""Check that an ONNX model produced by tpc computes the same as the original.

usage: check_ort_equivalence.py ORIGINAL.onnx EXPORTED.onnx TEST_DATA_DIR
                                [--rtol 1e-4] [--atol 1e-5]

Loads TEST_DATA_DIR/input_K.pb (onnx.TensorProto; the tensor name selects the
graph input, an unnamed tensor goes to input K by position), runs both models
with onnxruntime on CPU, compares every output by position, and compares the
original model's outputs with TEST_DATA_DIR/output_K.pb when present.

Exit status: 0 all match, 1 mismatch (or error), 77 onnxruntime (or onnx /
numpy) is not importable, so a test harness can mark the test skipped.
Does not import torch.
"""
import argparse
import glob
import os
import re
import sys

SKIP = 77


def _load_tensors(d, prefix):
    files = glob.glob(os.path.join(d, f"{prefix}_*.pb"))
    files.sort(key=lambda p: int(re.search(r"_(\d+)\.pb$", p).group(1)))
    out = []
    for p in files:
        t = onnx.TensorProto()
        with open(p, "rb") as f:
            t.ParseFromString(f.read())
        out.append((t.name, onnx.numpy_helper.to_array(t), os.path.basename(p)))
    return out


def _session(path):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def _feeds(sess, tensors):
    names = [i.name for i in sess.get_inputs()]
    feeds = {}
    for k, (tname, arr, fname) in enumerate(tensors):
        if tname:
            if tname not in names:
                raise ValueError(f"{fname}: tensor name '{tname}' is not a graph input "
                                 f"(inputs: {names})")
            feeds[tname] = arr
        else:
            if k >= len(names):
                raise ValueError(f"{fname}: no graph input #{k} (inputs: {names})")
            feeds[names[k]] = arr
    missing = [n for n in names if n not in feeds]
    if missing:
        raise ValueError(f"no test data for graph inputs {missing}")
    return feeds


def _errors(a, b):
    a64 = np.asarray(a).astype(np.float64)
    b64 = np.asarray(b).astype(np.float64)
    if a64.size == 0:
        return 0.0, 0.0
    diff = np.abs(a64 - b64)
    rel = diff / np.maximum(np.abs(b64), np.finfo(np.float64).tiny)
    return float(np.nanmax(diff)), float(np.nanmax(rel))


def _compare(label, got, want, rtol, atol):
    got = np.asarray(got)
    want = np.asarray(want)
    if got.shape != want.shape:
        print(f"FAIL {label}: shape {got.shape} != {want.shape}")
        return False
    if got.dtype != want.dtype:
        print(f"FAIL {label}: dtype {got.dtype} != {want.dtype}")
        return False
    if got.dtype.kind in "biu":
        ok = bool(np.array_equal(got, want))
    else:
        ok = bool(np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True))
    abs_e, rel_e = _errors(got, want)
    print(f"{'ok  ' if ok else 'FAIL'} {label}: shape {list(got.shape)} {got.dtype} "
          f"max_abs_err {abs_e:.3g} max_rel_err {rel_e:.3g}")
    return ok


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("original")
    ap.add_argument("exported")
    ap.add_argument("test_data_dir")
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--atol", type=float, default=1e-5)
    ap.add_argument("--tpc-outputs", metavar="DIR",
                    help="also compare DIR/output_K.pb (written by tp-run) with the "
                         "original's onnxruntime outputs")
    a = ap.parse_args(argv)

    global np, onnx, ort
    try:
        import numpy as np
        import onnx
        import onnx.numpy_helper
        import onnxruntime as ort
    except Exception as e:  # ImportError, or a broken install
        print(f"SKIP: cannot import onnxruntime/onnx/numpy: {type(e).__name__}: {e}")
        return SKIP

    try:
        inputs = _load_tensors(a.test_data_dir, "input")
        if not inputs:
            raise ValueError(f"no input_*.pb in {a.test_data_dir}")
        expected = _load_tensors(a.test_data_dir, "output")
        s_orig = _session(a.original)
        s_exp = _session(a.exported)
        out_orig = s_orig.run(None, _feeds(s_orig, inputs))
        out_exp = s_exp.run(None, _feeds(s_exp, inputs))
    except Exception as e:
        print(f"FAIL: {type(e).__name__}: {e}")
        return 1

    ok = True
    if len(out_orig) != len(out_exp):
        print(f"FAIL: original has {len(out_orig)} outputs, exported has {len(out_exp)}")
        ok = False
    onames = [o.name for o in s_orig.get_outputs()]
    for k, (g, w) in enumerate(zip(out_exp, out_orig)):
        ok &= _compare(f"output {k} ({onames[k]}) exported vs original", g, w, a.rtol, a.atol)
    if expected and len(expected) != len(out_orig):
        print(f"FAIL: {len(expected)} output_K.pb files but the original has "
              f"{len(out_orig)} outputs")
        ok = False
    for k, (g, (_, w, fname)) in enumerate(zip(out_orig, expected)):
        ok &= _compare(f"output {k} ({onames[k]}) original vs {fname}", g, w, a.rtol, a.atol)
    if a.tpc_outputs:
        got = _load_tensors(a.tpc_outputs, "output")
        if len(got) != len(out_orig):
            print(f"FAIL: {len(got)} tp-run outputs, the original has {len(out_orig)}")
            ok = False
        for k, ((_, g, fname), w) in enumerate(zip(got, out_orig)):
            ok &= _compare(f"output {k} ({onames[k]}) tp-run vs onnxruntime", g, w, a.rtol, a.atol)
    print("PASS" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
