#!/usr/bin/env bash
# Installs what tpc needs and is missing: Debian packages (as root, or through sudo)
# and, for the Python cross-checks only, onnx/onnxruntime/numpy from PyPI.
# Idempotent and quiet when everything is there. Never installs torch.
set -euo pipefail

debs=(cmake ninja-build g++ ccache libonnx-dev libprotobuf-dev protobuf-compiler libabsl-dev
      catch2 libopenblas-dev libbenchmark-dev libssl-dev libgloo-dev
      openmpi-bin iproute2)  # the last two: only the multi-process tests use them
# --fuzz (make fuzz): clang and libclang-rt-14-dev, libFuzzer and its sanitizer runtimes.
[ "${1:-}" = --fuzz ] && debs+=(clang libclang-rt-14-dev)
# python3 may come from elsewhere (pyenv); only ask apt when there is none at all.
command -v python3 >/dev/null || debs+=(python3 python3-pip)
missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing Debian packages: ${missing[*]}"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "deps: need root (or sudo) to install ${missing[*]}" >&2; exit 1; }
    sudo=sudo
  fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Python tools for the cross-checks (optional: the tests skip without them).
if command -v python3 >/dev/null; then
  if ! python3 -c "import onnx, onnxruntime, numpy" 2>/dev/null; then
    echo "deps: installing onnx, onnxruntime, numpy from PyPI"
    python3 -m pip install -q onnx onnxruntime numpy 2>&1 | grep -v -i "warning" ||
      echo "deps: pip install failed; the onnxruntime cross-checks will be skipped" >&2
  fi
fi
# ONNX backend node tests (model + inputs + expected outputs per operator) for the
# runtime's conformance test. onnx 1.23 no longer ships them; onnx 1.17.0's wheel
# does. Only that folder is extracted into .cache/ (git-ignored); the installed onnx
# is left alone. Offline: skipped, and the conformance test skips itself.
root=$(cd "$(dirname "$0")/.." && pwd)
node_tests=$root/.cache/onnx-node-tests
if [ ! -d "$node_tests/node" ] && command -v python3 >/dev/null; then
  whl_dir=$root/.cache/wheels
  mkdir -p "$whl_dir"
  if python3 -m pip download -q --no-deps onnx==1.17.0 -d "$whl_dir" >/dev/null 2>&1; then
    python3 - "$whl_dir" "$node_tests" <<'PY' || echo "deps: could not extract the ONNX node tests" >&2
import glob, os, sys, zipfile
whl = sorted(glob.glob(os.path.join(sys.argv[1], "onnx-1.17.0-*.whl")))[-1]
prefix = "onnx/backend/test/data/node/"
tmp = sys.argv[2] + ".tmp"
with zipfile.ZipFile(whl) as z:
    for name in z.namelist():
        if name.startswith(prefix) and not name.endswith("/"):
            dest = os.path.join(tmp, "node", name[len(prefix):])
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with z.open(name) as src, open(dest, "wb") as out:
                out.write(src.read())
os.replace(tmp, sys.argv[2])
PY
  else
    echo "deps: could not download onnx==1.17.0 (offline?); the ONNX node conformance test will skip" >&2
  fi
fi
exit 0
