#!/usr/bin/env bash
# Installs what tpc needs and is missing: Debian packages (as root, or through sudo)
# and, for the Python cross-checks only, onnx/onnxruntime/numpy from PyPI.
# Idempotent and quiet when everything is there. Never installs torch.
set -euo pipefail

debs=(cmake ninja-build g++ ccache libonnx-dev libprotobuf-dev protobuf-compiler libabsl-dev
      catch2 libopenblas-dev libbenchmark-dev)
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
exit 0
