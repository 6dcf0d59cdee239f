#!/usr/bin/env bash
# tools/gpu_bundle.sh — packs this checkout's build for the lent GPU machine
# (../shared/GPU.md): tp-compile, tp-run and tpc_tests, stripped, with the libraries that
# machine lacks (../shared/tools/gpu-bundle.sh), xz-compressed to fit the device tool's
# 64 MiB, and the ONNX node tests the GPU tests read. Builds nothing.
#
#   tools/gpu_bundle.sh [BUILD_DIR]      (default: build)
#
# Writes .gpu/tpc.tar.xz and .gpu/nodetests.tar.xz (.gpu/ is git-ignored through
# .git/info/exclude) and prints the command to give the device tool, with carry [".gpu"]:
# it unpacks both and runs tools/gpu_check.sh, by default every section but the two
# benchmarks (about 5 minutes). For a second call while the machine is warm, put
# `export GPU_CHECK_SECTIONS=bench,decode;` (or one of them) before the command: `bench`
# takes 5-7 minutes for the 16-layer model (GPU_LLAMA_ARGS="--layers 8 ..." halves it),
# `decode` about 2 (GPU_DECODE_ARGS). Those variables pass through the same way.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
bundler=$root/../shared/tools/gpu-bundle.sh
for f in "$build/tp-compile" "$build/tp-run" "$build/tests/tpc_tests" "$bundler"; do
  [ -x "$f" ] || { echo "gpu_bundle: missing $f (build first: ninja -C $build)" >&2; exit 2; }
done
cd "$root"
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo /.gpu/ >>.git/info/exclude
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin/tests" .gpu
cp "$build/tp-compile" "$build/tp-run" "$stage/bin/"
cp "$build/tests/tpc_tests" "$stage/bin/tests/"
strip "$stage/bin/tp-compile" "$stage/bin/tp-run" "$stage/bin/tests/tpc_tests"
"$bundler" "$stage/bin" "$stage/tpc.tar.gz" "$stage/bin/tests/tpc_tests" >&2
gunzip -c "$stage/tpc.tar.gz" | xz -T2 -6 >.gpu/tpc.tar.xz.tmp
mv .gpu/tpc.tar.xz.tmp .gpu/tpc.tar.xz
node_tests=()
for d in .cache/onnx-node-tests .cache/onnx-node-tests-23 .cache/ort-contrib-node-tests; do
  [ -d "$d" ] && node_tests+=("$d")
done
[ ${#node_tests[@]} -gt 0 ] || { echo "gpu_bundle: no .cache/*node-tests (make test fetches them)" >&2; exit 2; }
tar -cJf .gpu/nodetests.tar.xz.tmp "${node_tests[@]}"
mv .gpu/nodetests.tar.xz.tmp .gpu/nodetests.tar.xz
du -ch .gpu/tpc.tar.xz .gpu/nodetests.tar.xz | tail -1 >&2
cat <<'EOF'
set -o pipefail; export GPU_CHECK_SECTIONS="${GPU_CHECK_SECTIONS:-kernels,tests,models,half,real,nccl,processes,throughput}"; mkdir -p /tmp/tpc && tar -xJf .gpu/tpc.tar.xz -C /tmp/tpc && tar -xJf .gpu/nodetests.tar.xz -C . && export LD_LIBRARY_PATH=/tmp/tpc/lib:/usr/local/cuda/lib64:$(python3 -c "import nvidia.nccl;print(nvidia.nccl.__path__[0])")/lib && export GPU_LLAMA_ARGS="${GPU_LLAMA_ARGS:---rounds 2 --iters 5}" && timeout 560 tools/gpu_check.sh /tmp/tpc/bin $OUT 2>&1 | grep -v "^PASS" | tail -60
EOF
