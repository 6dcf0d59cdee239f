#!/usr/bin/env python3
"""ctest entry: real exports split with no annotation: onnxruntime-genai's (models/genai/,
tools/make_genai_exports.py: Llama and Gemma, fp32 and int4) and Hugging Face Optimum's
(models/optimum/, tools/make_optimum_exports.py: Llama and Gemma, KV cache).

usage: check_real_exports.py --tp-compile PATH --tp-run PATH --models DIR --work DIR

For each models/genai/*/model.onnx and models/optimum/*/model.onnx:
  - N = 1: tpc's unsharded run equals onnxruntime's outputs (test_data_set_0; fp32 rtol
    1e-3 atol 1e-4; int4 rtol 2e-2 atol 1e-2, as onnxruntime's MatMulNBits with the
    builder's accuracy_level 4 quantizes activations to int8 and tpc computes in f32);
  - N = 2 (`--objective memory`) and 4 (the default objective): the plan has no fallback
    (every op of the rank files is the original's kind or a tpc collective), the KV cache
    inputs and presents are split (plan.json; at N = 4, fewer K/V heads than ranks, each
    head on its group of ranks, S(1@2)), and at N = 2 the Megatron collectives: one all-reduce after each attention and each MLP (2
    per layer), no other collective but the embedding's and the logits' all-gathers; the
    sharded prefill equals the unsharded one (--check-against, random inputs, past 3 +
    4 tokens, batch 2) and onnxruntime's outputs as at N = 1;
  - `tp-run --generate 16` at N = 2 and 4 gives the unsharded run's token ids.

Exit status: 0 all pass, 1 something failed, 77 onnx is not importable.
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys

SKIP = 77
# The dims of runs on random inputs, by exporter: batch 2, a cache of 3, 4 new tokens
# (genai's exports name the cache's head size `kv_cache_dim`; Optimum's dims include
# expressions of these symbols).
DIMS = {
    "genai": ["--dim", "batch_size=2", "--dim", "sequence_length=4", "--dim",
              "past_sequence_length=3", "--dim", "total_sequence_length=7", "--dim",
              "kv_cache_dim=16"],
    "optimum": ["--dim", "batch_size=2", "--dim", "sequence_length=4", "--dim",
                "past_sequence_length=3"],
}


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


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
    models = [m for family in DIMS
              for m in sorted(glob.glob(os.path.join(args.models, family, "*", "model.onnx")))]
    if len(models) < 6:
        print("expected the 4 genai and 2 Optimum exports under", args.models)
        return 1
    for model in models:
        folder = os.path.dirname(model)
        family = os.path.basename(os.path.dirname(folder))
        name = f"{family}/{os.path.basename(folder)}"
        data = os.path.join(folder, "test_data_set_0")
        tol = ["--rtol", "2e-2", "--atol", "1e-2"] if "int4" in name else ["--rtol", "1e-3",
                                                                           "--atol", "1e-4"]
        original = onnx.load(model, load_external_data=False)
        layers = sum(1 for i in original.graph.input if i.name.endswith(".key"))
        kinds = {(n.domain, n.op_type) for n in original.graph.node}
        for n in (1, 2, 4):
            what = f"{name} N={n}"
            plan = os.path.join(args.work, f"{name.replace('/', '_')}.tp{n}")
            # N = 2: the memory objective, Megatron's layout; N = 4 (more ranks than the 2
            # K/V heads): the default objective, which gives each K/V head its group of ranks.
            objective = ["--objective", "memory"] if n < 4 else []
            code, out = run([args.tp_compile, model, "--tp", str(n), "-o", plan, "--quiet"] +
                            objective)
            if code != 0:
                failures.append(f"{what}: tp-compile: {out.strip()[-600:]}")
                continue
            code, out = run([args.tp_run, plan, "--ranks", "threads", "--quiet",
                             "--input-dir", data] + tol)
            if code != 0:
                failures.append(f"{what}: not onnxruntime's outputs: {out.strip()[-800:]}")
            if n == 1:
                continue
            code, out = run([args.tp_run, plan, "--ranks", "threads", "--quiet",
                             "--check-against", model, "--rtol", "1e-4", "--atol", "1e-5"] +
                            DIMS[family])
            if code != 0:
                failures.append(f"{what}: sharded != unsharded: {out.strip()[-800:]}")
            rank = onnx.load(os.path.join(plan, "rank0.onnx"), load_external_data=False)
            counts = {}
            for node in rank.graph.node:
                if node.domain == "tpc":
                    counts[node.op_type] = counts.get(node.op_type, 0) + 1
                elif (node.domain, node.op_type) not in kinds and node.op_type != "Constant":
                    failures.append(f"{what}: rank0 has an operator the model has not: "
                                    f"{node.domain}::{node.op_type}")
            manifest = json.load(open(os.path.join(plan, "plan.json")))
            # The K/V heads (2) split N ways, or at N = 4 each on its group of 2 ranks.
            for side in ("inputs", "outputs"):
                for io in manifest[side]:
                    cache = io["value"].startswith(("past_key_values.", "present."))
                    if cache and io["placements"][0]["kind"] != "SHARD":
                        failures.append(f"{what}: the cache {io['value']} is not split "
                                        f"({io['placements'][0]})")
            if n == 2:
                want_reduce = 2 * layers
                # Besides: the embedding's and the logits' all-gathers (and Optimum's rotary
                # frequencies, gathered once per forward).
                gathers = 2 if family == "genai" else 3
                if counts.get("AllReduce", 0) != want_reduce or \
                        counts.get("AllGather", 0) > gathers or counts.get("ReduceScatter", 0):
                    failures.append(f"{what}: collectives {counts}, expected {want_reduce} "
                                    f"AllReduce (2 per layer) and at most {gathers} AllGather")
            code, out = run([args.tp_run, plan, "--generate", "16", "--prompt",
                             "5 6 7 8; 9 10 11 12", "--check-against", model, "--ranks", "threads"])
            if code != 0 or "token ids equal" not in out:
                failures.append(f"{what}: --generate 16: {out.strip()[-800:]}")
        print(f"{name}: checked at N = 1, 2, 4")
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
