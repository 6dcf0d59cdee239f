#!/usr/bin/env bash
# `make demo`: compile a bundled model for 4 ranks, run the ranks on the CPU, compare
# with the unsharded run, and print the report.
#   tools/demo.sh BUILD_DIR MODEL.onnx OUT_DIR [TP]
set -euo pipefail
build=$1
model=$2
out=$3
tp=${4:-4}
name=$(basename "$model" .onnx)
data=$(dirname "$model")/$name/test_data_set_0
plan=$out/plan
mkdir -p "$out"

echo "== tp-compile $model --tp $tp -o $plan"
"$build/tp-compile" "$model" --tp "$tp" -o "$plan" --force --dump-ir-after partition --dump-ir "$out/$name.tp$tp.ir"
echo
echo "== the plan ($plan)"
ls -l "$plan"
echo
echo "== report.json: collectives per forward (at the default --dim sizes, 512 each)"
python3 - "$plan/report.json" <<'PY' || true
import json, sys
r = json.load(open(sys.argv[1]))
for c in r["collectives_per_forward"]:
    print(f"  {c['count']:3d} x {c['kind']:<15} {c['bytes'] / 2**20:10.1f} MiB")
w = r["weights"]
print(f"  weights per rank {w['per_rank_bytes'] / 2**20:.2f} MiB of {w['total_bytes'] / 2**20:.2f} MiB "
      f"(total/N = {w['ideal_per_rank_bytes'] / 2**20:.2f} MiB)")
print(f"  ops that fell back to replicated: {len(r['fallback_ops'])}")
PY
echo
echo "== the partitioned IR of rank r (first tpc:: collectives; whole text in $out/$name.tp$tp.ir)"
grep -m 6 "tpc::" "$out/$name.tp$tp.ir" | cut -c1-160 || true
echo
echo "== tp-run $plan --backend cpu --check-against $model ($tp ranks, a process each)"
"$build/tp-run" "$plan" --backend cpu --input-dir "$data" --check-against "$model" --rtol 1e-5 --atol 1e-5
