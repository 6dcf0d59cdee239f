#!/usr/bin/env bash
# Generates the synthetic Llama-shaped models and runs the import and compile-time
# benchmarks (each time as a ratio of the bare protobuf parse of the same file), the
# executor benchmark against onnxruntime, the communicators (Gloo, in-process, memcpy),
# MatMulNBits' int4 decode paths (bench_nbits),
# tp-run's rank processes against its rank threads on GPT-2-small, and, with BENCH_BIG=1,
# the weight-slicing throughput of tp-compile against cp on a generated ~2.3 GB model
# (needs ~5 GB of disk: the model and two copies of its weights, under BUILD_DIR/bench/big/).
#   bench/run.sh [BUILD_DIR]
#   BENCH_BIG=1 bench/run.sh [BUILD_DIR]
set -euo pipefail
build=${1:-build}
out=$build/bench
mkdir -p "$out"
for layers in 32 80; do
  f=$out/llama_synthetic_${layers}.onnx
  [ -f "$f" ] || python3 tools/make_llama_synthetic.py --layers "$layers" -o "$f"
done
"$build/bench/bench_import" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
  --benchmark_out="$out/import.json" --benchmark_out_format=json \
  "$out/llama_synthetic_32.onnx" "$out/llama_synthetic_80.onnx"
python3 - "$out/import.json" <<'PY'
import json, sys
rows = {}
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    if b.get("aggregate_name") != "median":
        continue
    kind, model = b["run_name"].split("/", 1)
    rows.setdefault(model, {})[kind] = b["real_time"]
print(f"\n{'model':28} {'protobuf ms':>12} {'read ms':>9} {'import ms':>10} {'import/protobuf':>16}")
for model, r in sorted(rows.items()):
    print(f"{model:28} {r['ProtobufParse']:12.2f} {r['ReadModelFile']:9.2f} {r['Import']:10.2f} "
          f"{r['Import'] / r['ProtobufParse']:16.2f}")
PY

# Compile time (tp-compile's stages for N = 4) on the same models, and the shard stage
# alone on graphs of ~12k to ~100k nodes (105 to 840 layers, hidden 32).
tiny=()
for layers in 105 210 420 840; do
  f=$out/llama_synthetic_${layers}_tiny.onnx
  [ -f "$f" ] || python3 tools/make_llama_synthetic.py --layers "$layers" --hidden 32 --heads 4 \
    --kv-heads 2 --intermediate 64 --vocab 128 --max-pos 32 -o "$f"
  tiny+=("--shard-only=$f")
done
"$build/bench/bench_compile" --tp=4 --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
  --benchmark_out="$out/compile.json" --benchmark_out_format=json \
  "$out/llama_synthetic_32.onnx" "$out/llama_synthetic_80.onnx" "${tiny[@]}"
python3 - "$out/compile.json" <<'PY'
import json, sys
rows, nodes = {}, {}
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    if b.get("aggregate_name") != "median":
        continue
    kind, model = b["run_name"].split("/")[:2]  # drops "/iterations:N"
    rows.setdefault(model, {})[kind] = b["real_time"]
    if "ir_nodes" in b:
        nodes[model] = max(nodes.get(model, 0), b["ir_nodes"])
stages = ["ProtobufParse", "Import", "Shard", "Partition", "Export", "Pipeline", "WriteRankFiles"]
print(f"\ncompile time, N = 4 (ms, medians; Export = every rank's graph, weights excluded)")
print(f"{'model':32} {'nodes':>7} " + " ".join(f"{s:>9.9}" for s in stages) + f" {'pipe/parse':>10}")
for model, r in sorted(rows.items(), key=lambda kv: nodes.get(kv[0], 0)):
    cells = " ".join(f"{r[s]:9.1f}" if s in r else f"{'-':>9}" for s in stages)
    ratio = f"{r['Pipeline'] / r['ProtobufParse']:10.2f}" if "Pipeline" in r else f"{'-':>10}"
    print(f"{model:32} {nodes.get(model, 0):7.0f} {cells} {ratio}")
print(f"\nshard stage per node")
for model, r in sorted(rows.items(), key=lambda kv: nodes.get(kv[0], 0)):
    n = nodes.get(model, 0)
    if n and "Shard" in r:
        print(f"{model:32} {n:7.0f} nodes  shard {r['Shard']:9.1f} ms  {1e3 * r['Shard'] / n:6.2f} us/node"
              f"  shard/parse {r['Shard'] / r['ProtobufParse']:5.2f}")
PY

# Executor: tpc's CPU runtime vs onnxruntime (same inputs, same thread count) on a
# GPT-2-small shaped model (generated, ~370 MB of random weights, never committed) and
# the committed models.
g=$out/gpt2_small.onnx
[ -f "$g" ] || python3 tools/make_gpt2_synthetic.py -o "$g"
python3 bench/executor_bench.py --build "$build" --threads "$(nproc)" --batch 1 --seq 128 --repeat 10 \
  "$g" models/*.onnx

# Communicators: AllReduce and AllGather bus bandwidth of the Gloo communicator (ranks as
# threads over 127.0.0.1) against the in-process one and memcpy, at GPT-2-small's sizes.
"$build/bench/bench_comm" --ranks=2,4 --rounds=7 --target-ms=50

# MatMulNBits' decode paths on one thread (f32 against accuracy_level 4's int8): one weight
# that stays in cache, 48 read from memory on 2 MiB pages as tp-run keeps them.
"$build/bench/bench_nbits"
"$build/bench/bench_nbits" --copies=48 --calls=96 --huge

# Rank processes (tp-run) vs rank threads (tp-run --ranks threads) vs the unsharded model on
# GPT-2-small, N = 2, and each process's peak resident memory (skipped, with a line saying
# so, when the model cannot be generated).
python3 bench/processes_bench.py --build "$build" --model "$g" --tp 2 --rounds 5 --repeat 5

# Weight slicing: tp-compile --tp 4 against cp of the same files (BENCH_BIG=1 only).
if [ "${BENCH_BIG:-0}" = 1 ]; then
  big=$out/big/llama_big.onnx
  [ -f "$big" ] || python3 tools/make_big_model.py -o "$big"
  python3 bench/weight_slicing.py --build "$build" --tp 4 --runs 2 "$big"
fi
