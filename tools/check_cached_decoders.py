#!/usr/bin/env python3
"""KV-cache decoders of many architectures, as onnxruntime-genai's builder and Hugging Face
Optimum export them, checked as python.real_exports checks the committed ones.

    python3 tools/check_cached_decoders.py --bin build \\
        --genai-python /tmp/tv/bin/python --optimum-python /tmp/vopt/bin/python

Makes small random-weight exports (tools/make_genai_exports.py: its architectures, fp32
and int4; tools/make_optimum_exports.py: the decoders of tools/check_architectures.py)
under --work, then runs tests/python/check_real_exports.py --no-layout on them: at
N = 1 onnxruntime's outputs, at N = 2 and 4 the unsharded run's, `--generate 16` the
unsharded ids and (N = 2, fp32) onnxruntime's greedy decoding's. The layout checks
(Llama's: two all-reduces a layer, the cache split) are printed as notes: other
architectures differ for good reasons (one all-reduce a layer with a parallel residual, a
replicated cache with one K/V head).

--genai-python: a Python with torch, transformers >= 5 and onnxruntime-genai;
--optimum-python: one with optimum-onnx (which pins transformers 4.57; a venv of its own,
../shared/EXPORTS.md). "none" skips that exporter. An architecture an exporter refuses is
listed, not a failure. Not in make test (it needs torch). Exit status: 0 every check
passed, 1 a check failed.
"""
import argparse
import os
import subprocess
import sys
import tempfile

TOOLS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(TOOLS)
GENAI = ("llama,gemma,gemma2,gemma3,mistral,qwen2,qwen3,phi,phi3,granite,olmo,nemotron,"
         "smollm3,ernie,hunyuan,gptoss,lfm2moe,lfm2")
OPTIMUM = ("qwen2,qwen3,gemma2,gemma3,falcon,falcon_new,gpt_neox,gptj,opt,stablelm,starcoder2,"
           "olmo2,granite,phi,codegen,mpt,cohere,gpt_bigcode")


def export(python, script, out, archs, extra=()):
    """Runs `script` once per architecture (one refusing does not stop the others)."""
    refused = []
    for arch in archs.split(","):
        p = subprocess.run([python, os.path.join(TOOLS, script), "--out", out, "--archs", arch,
                            *extra], capture_output=True, text=True)
        if p.returncode != 0:
            last = (p.stdout + p.stderr).strip().splitlines()
            refused.append(f"{script} {arch}: {last[-1][:200] if last else p.returncode}")
            print(f"{arch}: not exported", flush=True)
        else:
            print(p.stdout.strip(), flush=True)
    return refused


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default="build", help="where tp-compile and tp-run are")
    ap.add_argument("--genai-python", default=sys.executable)
    ap.add_argument("--optimum-python", default="none")
    ap.add_argument("--genai-archs", default=GENAI)
    ap.add_argument("--optimum-archs", default=OPTIMUM)
    ap.add_argument("--precisions", default="fp32",
                    help="of the genai exports (int4: onnxruntime quantizes activations to 8 "
                    "bits, which Q/K norms amplify past the checks' tolerance)")
    ap.add_argument("--ep", default="cpu",
                    help="the genai builder's execution provider (cuda: its GPU exports, e.g. "
                    "with --precisions fp16; their fused operators are those a GPU user runs)")
    ap.add_argument("--work", help="where exports and plans go (default: a temporary folder)")
    args = ap.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="tpc_cached_decoders_")
    models = os.path.join(work, "models")
    refused = []
    if args.genai_python != "none":
        refused += export(args.genai_python, "make_genai_exports.py",
                          os.path.join(models, "genai"), args.genai_archs,
                          ["--precisions", args.precisions, "--ep", args.ep])
    if args.optimum_python != "none":
        refused += export(args.optimum_python, "make_optimum_exports.py",
                          os.path.join(models, "optimum"), args.optimum_archs)
    code = subprocess.run([sys.executable, os.path.join(ROOT, "tests/python/check_real_exports.py"),
                           "--tp-compile", os.path.join(args.bin, "tp-compile"),
                           "--tp-run", os.path.join(args.bin, "tp-run"), "--models", models,
                           "--work", os.path.join(work, "plans"), "--min-models", "1",
                           "--no-layout"]).returncode
    for r in refused:
        print("not exported:", r)
    print(f"work in {work}")
    return 1 if code != 0 else 0


if __name__ == "__main__":
    sys.exit(main())
