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


def save_other(name, folder):
    """A decoder of tools/check_architectures.py's configurations (not committed; for
    tools/check_cached_decoders.py)."""
    import torch
    import transformers
    import check_architectures
    kind, cls, config = check_architectures.ARCHITECTURES[name]
    if kind != "causal":
        raise SystemExit(f"{name} is not a decoder")
    torch.manual_seed(0)
    conf = getattr(transformers, cls)(**config)
    transformers.AutoModelForCausalLM.from_config(conf).eval().save_pretrained(folder)


def write_other_test_data(model_path, out_dir):
    """test_data_set_0/ of any Optimum decoder: a prefill of 4 tokens after a cache of 3,
    batch 1, the cache's other dims as the export declares them."""
    import numpy as np
    import onnxruntime as ort
    from onnx import numpy_helper
    sess = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    batch, seq, past = 1, 4, 3
    feeds = {}
    for i in sess.get_inputs():
        if i.name == "input_ids":
            feeds[i.name] = rng.integers(0, 256, (batch, seq), dtype=np.int64)
        elif i.name == "attention_mask":
            feeds[i.name] = np.ones((batch, past + seq), np.int64)
        elif i.name == "position_ids":
            feeds[i.name] = np.tile(np.arange(past, past + seq, dtype=np.int64), (batch, 1))
        elif i.name.startswith("past_key_values"):
            dims = [d if isinstance(d, int) else past if "past" in d else batch for d in i.shape]
            feeds[i.name] = rng.standard_normal(dims).astype(np.float32)
        else:
            raise SystemExit(f"unexpected input {i.name}")
    data = os.path.join(out_dir, "test_data_set_0")
    os.makedirs(data, exist_ok=True)
    for k, i in enumerate(sess.get_inputs()):
        with open(os.path.join(data, f"input_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(feeds[i.name], i.name).SerializeToString())
    for k, (o, v) in enumerate(zip(sess.get_outputs(), sess.run(None, feeds))):
        with open(os.path.join(data, f"output_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(v, o.name).SerializeToString())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--archs", default="llama,gemma,qwen3_moe",
                    help="llama, gemma, qwen3_moe (committed) or a decoder of "
                    "tools/check_architectures.py")
    args = ap.parse_args()
    cli = os.path.join(os.path.dirname(sys.executable), "optimum-cli")
    for arch in args.archs.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            hf = os.path.join(tmp, "hf")
            committed = arch in ("llama", "gemma")
            if committed:
                genai.save_hf(arch, hf)
            else:
                save_other(arch, hf)
            built = os.path.join(tmp, "onnx")
            subprocess.run([cli, "export", "onnx", "--model", hf, "--task",
                            "text-generation-with-past", built], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            dst = os.path.join(args.out, arch)
            shutil.rmtree(dst, ignore_errors=True)
            os.makedirs(dst)
            for f in ("model.onnx", "model.onnx_data"):
                if os.path.exists(os.path.join(built, f)):
                    shutil.copy(os.path.join(built, f), dst)
            if committed:
                genai.write_test_data(os.path.join(dst, "model.onnx"), dst)
            else:
                write_other_test_data(os.path.join(dst, "model.onnx"), dst)
            size = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(dst) for f in fs)
            print(f"wrote {dst} ({size} bytes)")


if __name__ == "__main__":
    sys.exit(main())
