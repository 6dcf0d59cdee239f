#!/usr/bin/env python3
"""ctest entry: real exports split with no annotation: onnxruntime-genai's (models/genai/,
tools/make_genai_exports.py: Llama and Gemma, fp32 and int4, Gemma 2 in fp32, whose
local layers keep a windowed cache, and Llama and Qwen 3 as the builder writes them for
CUDA, in f16, Qwen 3's Q/K norms fused into GroupQueryAttention, and gpt-oss: MoE, attention
sinks, a windowed cache on every other layer; LFM2-MoE: MoE, a short convolution and its
carried state; Gemma 4: a dense MLP beside GeGLU experts) and Hugging Face
Optimum's (models/optimum/, tools/make_optimum_exports.py: Llama and Gemma, KV cache).
onnxruntime's CPU refuses the fused Q/K norms and GeGLU experts: its side (the test data,
the greedy decoding) runs the unfused graph (tools/unfuse_gqa_norms.py,
tools/unfuse_geglu_moe.py).

usage: check_real_exports.py --tp-compile PATH --tp-run PATH --models DIR --work DIR
                             [--min-models K] [--no-layout]

--no-layout leaves out the checks of the layout (no new operator, the cache split, the
collective counts), which are Llama's and Gemma's: tools/check_cached_decoders.py checks
other architectures' correctness with it, and prints their layouts' differences as notes.

For each models/genai/*/model.onnx and models/optimum/*/model.onnx:
  - N = 1: tpc's unsharded run equals onnxruntime's outputs (test_data_set_0; fp32 rtol
    1e-3 atol 1e-4; int4 rtol 1e-2 atol 5e-3, here and below: the builder's accuracy_level
    4 rounds MatMulNBits' activations to int8 per block, in tpc as in onnxruntime, and an
    activation a last bit apart may take the next code; f16 tp-run's default for f16
    outputs, rtol 1e-2 atol 1e-2, here and below);
  - N = 2 (`--objective memory`) and 4 (the default objective): the plan has no fallback
    (every op of the rank files is the original's kind or a tpc collective), the KV cache
    inputs and presents are split (plan.json; at N = 4, fewer K/V heads than ranks, each
    head on its group of ranks, S(1@2)), and at N = 2 the Megatron collectives: one all-reduce after each attention and each MLP (2
    per layer; 3 where a layer's dense MLP and experts each have their own norm, Gemma 4's),
    no other collective but the embedding's and the logits' all-gathers (or, for a
    vocab-parallel embedding, its all-reduce in place of its all-gather); the
    sharded prefill equals the unsharded one (--check-against, random inputs, past 3 +
    4 tokens, batch 2, a windowed cache of 4 rows) and onnxruntime's outputs as at N = 1;
  - `tp-run --generate 16` at N = 2 and 4 gives the unsharded run's token ids, and at
    N = 2 (fp32, f16) onnxruntime's greedy decoding's.

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


# The ops of tpc's masked lookup (a vocab-parallel embedding's lowering, shard/rules/
# lowering.cc: each rank's ids localized, looked up, the other ranks' rows zeroed).
LOOKUP_OPS = ("Sub", "GreaterOrEqual", "Less", "And", "Where", "Unsqueeze", "Gather",
              "GatherBlockQuantized")


def ort_greedy(model, prompt, steps):
    """onnxruntime's greedy decoding of `prompt` (rows of one length): the token ids of
    each row. The cache starts empty, or at a windowed cache's capacity (genai_config.json's
    window: onnxruntime wants at least that), zeros; each step's presents are the next
    step's pasts."""
    import numpy as np
    import onnxruntime as ort
    folder = os.path.dirname(model)
    config = os.path.join(folder, "genai_config.json")
    decoder = json.load(open(config))["model"]["decoder"] if os.path.exists(config) else {}
    sizes = {"kv_cache_dim": decoder.get("head_size", 0),
             "past_sliding_length": decoder.get("sliding_window", {}).get("window_size", 0)}
    # (GroupQueryAttention's fused Q/K norms, which onnxruntime's CPU refuses, unfused.)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "tools"))
    import unfuse_gqa_norms
    session = unfuse_gqa_norms.cpu_session(model)
    ids = np.array(prompt, np.int64)
    batch, total = ids.shape[0], ids.shape[1]
    feeds = {}
    for i in session.get_inputs():
        if i.name.startswith(("past_key_values", "past.")):  # KV caches, convolution states
            shape = [batch if d == "batch_size" else sizes.get(d, 0) if isinstance(d, str) else d
                     for d in i.shape]
            feeds[i.name] = np.zeros(
                shape, np.float16 if i.type == "tensor(float16)" else np.float32)
    names = [o.name for o in session.get_outputs()]
    tokens = [[] for _ in range(batch)]
    for _ in range(steps):
        feeds["input_ids"] = ids
        feeds["attention_mask"] = np.ones((batch, total), np.int64)
        if any(i.name == "position_ids" for i in session.get_inputs()):
            pos = np.tile(np.arange(total - ids.shape[1], total), (batch, 1))
            rank = len(next(i for i in session.get_inputs() if i.name == "position_ids").shape)
            feeds["position_ids"] = np.stack([pos] * 3) if rank == 3 else pos  # M-RoPE's
        out = dict(zip(names, session.run(None, feeds)))
        last = out["logits"][:, -1].argmax(-1)
        for b in range(batch):
            tokens[b].append(int(last[b]))
        for name in list(feeds):
            if name.startswith("past_key_values"):
                feeds[name] = out["present" + name[len("past_key_values"):]]
            elif name.startswith("past."):
                feeds[name] = out["present." + name[len("past."):]]
        ids = last[:, None].astype(np.int64)
        total += 1
    return tokens


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tp-compile", required=True)
    ap.add_argument("--tp-run", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--min-models", type=int, default=21,
                    help="fewer exports under --models is a failure (default: the committed 21)")
    ap.add_argument("--no-layout", action="store_true",
                    help="report the layout checks as notes, not failures")
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
    if len(models) < args.min_models:
        print(f"expected {args.min_models} exports under", args.models)
        return 1
    notes = []
    layout = notes if args.no_layout else failures  # where the layout's checks report
    for model in models:
        folder = os.path.dirname(model)
        family = os.path.basename(os.path.dirname(folder))
        name = f"{family}/{os.path.basename(folder)}"
        data = os.path.join(folder, "test_data_set_0")
        original = onnx.load(model, load_external_data=False)
        # (An export of f16 or bf16 outputs, the builder's CUDA fp16 and int4 ones: tp-run's
        # defaults for those, rtol 1e-2 atol 1e-2.)
        half = any(o.type.tensor_type.elem_type in (onnx.TensorProto.FLOAT16,
                                                    onnx.TensorProto.BFLOAT16)
                   for o in original.graph.output)
        # The int4 exports' MatMulNBits (the builder's accuracy_level 4) round activations to
        # int8 per block, in tpc as in onnxruntime: where an activation upstream differs in
        # its last bit (another order of a sum: another ISA, another split), its block may
        # take the next code, 1/127 of the block's largest value; the logits show that at
        # about 1e-3. Those exports are compared at rtol 1e-2 atol 5e-3, here and below.
        int8 = ["--rtol", "1e-2", "--atol", "5e-3"] if "int4" in name else []
        tol = int8 or ([] if half else ["--rtol", "1e-3", "--atol", "1e-4"])
        # Layers: those with a KV cache, and LFM2's with a convolution state (Qwen 3.5's
        # linear attention layers carry two states, past.{i}.conv and past.{i}.recurrent).
        layers = len({i.name.split(".")[1] for i in original.graph.input
                      if i.name.endswith(".key") or i.name.startswith("past.")})
        kinds = {(n.domain, n.op_type) for n in original.graph.node}
        dims = list(DIMS[family])
        config = os.path.join(folder, "genai_config.json")
        if os.path.exists(config):  # the cache's head size
            head = json.load(open(config))["model"]["decoder"]["head_size"]
            dims = [f"kv_cache_dim={head}" if d.startswith("kv_cache_dim=") else d for d in dims]
        # Only the dims the model names (Gemma 4's caches have their head sizes written out).
        symbols = {d.dim_param for i in original.graph.input
                   for d in i.type.tensor_type.shape.dim if d.dim_param}
        dims = [x for pair in zip(dims[0::2], dims[1::2]) if pair[1].split("=")[0] in symbols
                for x in pair]
        # A windowed cache's rows (its capacity; onnxruntime wants the window's at least).
        if any(d.dim_param == "past_sliding_length" for i in original.graph.input
               for d in i.type.tensor_type.shape.dim):
            dims = dims + ["--dim", "past_sliding_length=4"]
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
                             "--check-against", model] +
                            (int8 or ([] if half else ["--rtol", "1e-4", "--atol", "1e-5"])) +
                            dims)
            if code != 0:
                failures.append(f"{what}: sharded != unsharded: {out.strip()[-800:]}")
            rank = onnx.load(os.path.join(plan, "rank0.onnx"), load_external_data=False)
            counts = {}
            # A mixture of experts (gpt-oss's MoE operator, or Optimum's loop over experts)
            # splits every expert's inner dim: FC2's bias arrives partial, masked to rank 0
            # by a Mul; its router's logits may be split by experts and gathered (the
            # memory objective saves their bias, or their weight's rows, so).
            moe = ("com.microsoft", "MoE") in kinds or ("com.microsoft", "QMoE") in kinds or \
                any("/experts." in node.name for node in original.graph.node)
            # A vocab-parallel embedding (Megatron's: the table split by vocab, each rank's
            # lookup masked to its rows, LOOKUP_OPS named "tp/..." after CheckIndices, then
            # one all-reduce) in place of the embedding's all-gather.
            vocab_parallel = any(node.op_type == "CheckIndices" and "input_ids" in node.input
                                 for node in rank.graph.node)
            for node in rank.graph.node:
                if node.domain == "tpc":
                    counts[node.op_type] = counts.get(node.op_type, 0) + 1
                elif moe and node.op_type == "Mul" and node.input[1].startswith("tp/rank0_mask"):
                    continue
                elif vocab_parallel and node.name.startswith("tp/") and \
                        node.op_type in LOOKUP_OPS:
                    continue
                elif (node.domain, node.op_type) not in kinds and node.op_type != "Constant":
                    layout.append(f"{what}: rank0 has an operator the model has not: "
                                    f"{node.domain}::{node.op_type}")
            manifest = json.load(open(os.path.join(plan, "plan.json")))
            # The K/V heads (2) split N ways, or at N = 4 each on its group of 2 ranks.
            for side in ("inputs", "outputs"):
                for io in manifest[side]:
                    cache = io["value"].startswith(("past_key_values.", "past.", "present."))
                    if cache and io["placements"][0]["kind"] != "SHARD":
                        layout.append(f"{what}: the cache {io['value']} is not split "
                                        f"({io['placements'][0]})")
            if n == 2:
                # Gemma 4's layers run a dense MLP and the experts side by side, each through
                # its own norm before their sum: one all-reduce each (3 a layer).
                both = bool({("com.microsoft", "MoE"), ("com.microsoft", "QMoE")} & kinds) and \
                    any(node.op_type in ("MatMul", "MatMulNBits") and "/mlp/" in node.name
                        for node in original.graph.node)
                want_reduce = (3 if both else 2) * layers + (1 if vocab_parallel else 0)
                # Besides: the embedding's and the logits' all-gathers (and Optimum's rotary
                # frequencies, gathered once per forward).
                # (Qwen 3.5's Gated DeltaNet layers run their fused Q/K/V projection through
                # a convolution before the Split: split in unequal blocks, S(d/1:1:2), from
                # the weight's columns through the convolution and its state, no gather.)
                gathers = (2 if family == "genai" else 3) + (layers if moe else 0) - \
                    (1 if vocab_parallel else 0)
                if counts.get("AllReduce", 0) != want_reduce or \
                        counts.get("AllGather", 0) > gathers or counts.get("ReduceScatter", 0):
                    layout.append(f"{what}: collectives {counts}, expected {want_reduce} "
                                    f"AllReduce ({3 if both else 2} per layer"
                                    f"{', 1 for the embedding' if vocab_parallel else ''}) and "
                                    f"at most {gathers} AllGather")
            if any(i.name.startswith("past.") for i in original.graph.input):
                # A convolution state holds each row's last positions, padding included:
                # rows of different lengths generate one at a time, each as onnxruntime's
                # greedy decoding of that row alone.
                code, out = run([args.tp_run, plan, "--generate", "6", "--prompt",
                                 "5 6 7 8; 9 10", "--ranks", "threads"])
                got = [[int(t) for t in line.split(":")[1].split()]
                       for line in out.splitlines() if line.startswith("tokens (row")]
                want = [ort_greedy(model, [row], 6)[0] for row in ([5, 6, 7, 8], [9, 10])]
                if code != 0 or got != want:
                    failures.append(f"{what}: padded prompts with a convolution state: exit "
                                    f"{code}, {got} against onnxruntime's rows alone {want}: "
                                    f"{out.strip()[-300:]}")
            code, out = run([args.tp_run, plan, "--generate", "16", "--prompt",
                             "5 6 7 8; 9 10 11 12", "--check-against", model, "--ranks",
                             "threads"] + int8)
            if code != 0 or "token ids equal" not in out:
                failures.append(f"{what}: --generate 16: {out.strip()[-800:]}")
            elif n == 2 and "int4" not in name:  # (onnxruntime's int4 quantizes activations)
                want = ort_greedy(model, [[5, 6, 7, 8], [9, 10, 11, 12]], 16)
                got = [[int(t) for t in line.split(":")[1].split()]
                       for line in out.splitlines() if line.startswith("tokens (row")]
                if got != want:
                    failures.append(f"{what}: --generate 16 gave {got}, onnxruntime's greedy "
                                    f"decoding {want}")
        print(f"{name}: checked at N = 1, 2, 4")
    for note in notes:
        print("note:", note)
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
