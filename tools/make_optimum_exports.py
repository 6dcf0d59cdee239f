#!/usr/bin/env python3
"""Real Hugging Face Optimum exports of small random-weight decoders, for tests.

    /work/venvs/optimum/bin/python tools/make_optimum_exports.py --out models/optimum

Optimum (`pip install optimum-onnx`) pins transformers 4.57: run this with the Python of
a virtual environment of its own (`python3 -m venv --system-site-packages DIR && DIR/bin/pip
install optimum-onnx`; torch and onnxruntime come from the system). For Llama and Gemma of
the same shapes as tools/make_genai_exports.py (seed 0), this runs `optimum-cli export onnx
--task text-generation-with-past` (the TorchScript exporter, opset 18: a decoder with
`past_key_values.{i}.key|value` inputs, `present.{i}.key|value` outputs, `position_ids`, and
dims that are expressions such as `past_sequence_length + sequence_length`) and keeps
model.onnx (weights inline, ~0.5 MB) and test_data_set_0/ (onnxruntime's outputs for a
prefill of 4 tokens after a cache of 3) in OUT/<arch>/.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_genai_exports as genai  # noqa: E402 - the shapes, the model and the test data


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--archs", default="llama,gemma")
    args = ap.parse_args()
    cli = os.path.join(os.path.dirname(sys.executable), "optimum-cli")
    for arch in args.archs.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            hf = os.path.join(tmp, "hf")
            genai.save_hf(arch, hf)
            built = os.path.join(tmp, "onnx")
            subprocess.run([cli, "export", "onnx", "--model", hf, "--task",
                            "text-generation-with-past", built], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            dst = os.path.join(args.out, arch)
            shutil.rmtree(dst, ignore_errors=True)
            os.makedirs(dst)
            shutil.copy(os.path.join(built, "model.onnx"), dst)
            genai.write_test_data(os.path.join(dst, "model.onnx"), dst)
            size = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(dst) for f in fs)
            print(f"wrote {dst} ({size} bytes)")


if __name__ == "__main__":
    sys.exit(main())
