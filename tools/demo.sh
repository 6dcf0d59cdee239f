#!/usr/bin/env bash
# `make demo`: compile a bundled model and check the result against onnxruntime.
#   tools/demo.sh BUILD_DIR MODEL.onnx OUT_DIR
#
# Today tp-compile imports, verifies and re-exports the model as a 1-rank plan; the
# sharding, partition and runtime stages (4 ranks on the CPU) come next.
set -euo pipefail
build=$1
model=$2
out=$3
name=$(basename "$model" .onnx)
data=$(dirname "$model")/$name/test_data_set_0

echo "== tp-compile $model -o $out/plan --tp 1"
"$build/tp-compile" "$model" -o "$out/plan" --force --dump-ir "$out/$name.ir"
echo
echo "== the IR (first 25 lines of $out/$name.ir)"
head -n 25 "$out/$name.ir"
echo "   ... ($(wc -l < "$out/$name.ir") lines)"
echo
echo "== $out/plan"
ls -l "$out/plan"
echo
if python3 -c "import onnx, onnxruntime, numpy" 2>/dev/null; then
  echo "== onnxruntime: original vs rank0.onnx on $data"
  python3 tests/python/check_ort_equivalence.py "$model" "$out/plan/rank0.onnx" "$data"
else
  echo "== onnxruntime is not installed (make deps installs it); skipping the comparison"
fi
