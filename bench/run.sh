#!/usr/bin/env bash
# Generates the synthetic Llama-shaped models and runs the import benchmark, then
# prints each import time as a ratio of the bare protobuf parse of the same file.
#   bench/run.sh [BUILD_DIR]
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

# Executor: tpc's CPU runtime vs onnxruntime (same inputs, same thread count) on a
# GPT-2-small shaped model (generated, ~370 MB of random weights, never committed) and
# the committed models.
g=$out/gpt2_small.onnx
[ -f "$g" ] || python3 tools/make_gpt2_synthetic.py -o "$g"
python3 bench/executor_bench.py --build "$build" --threads "$(nproc)" --batch 1 --seq 128 --repeat 10 \
  "$g" models/*.onnx
