#!/usr/bin/env bash
# The clean build's wall time of two commits, one after the other on this machine: each
# cloned into a temporary folder, configured with that commit's Makefile flags
# (CMAKE_FLAGS) and built with `JOBS` jobs, ccache off. Prints one line per commit.
#   bench/build_time.sh BASE [HEAD] [JOBS]      (HEAD: HEAD; JOBS: nproc)
# Also the tree under ASan+UBSan when BUILD_TIME_ASAN=1 (the Makefile's test-sanitize
# configuration).
set -euo pipefail
if [ $# -lt 1 ]; then
  sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
base=$1
head=${2:-HEAD}
jobs=${3:-$(nproc)}
repo=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
work=$(mktemp -d /tmp/tpc_build_time.XXXXXX)
trap 'rm -rf "$work"' EXIT

seconds() { date +%s.%N; }
for rev in "$base" "$head"; do
  sha=$(git -C "$repo" rev-parse --short "$rev")
  dir=$work/$sha
  git clone -q "$repo" "$dir"
  git -C "$dir" checkout -q "$sha"
  flags=$(make -C "$dir" -s -p -n build 2>/dev/null | sed -n 's/^CMAKE_FLAGS = //p' | head -1)
  start=$(seconds)
  (cd "$dir" && eval cmake -S . -B build -G Ninja "$flags" > build.log 2>&1 &&
     CCACHE_DISABLE=1 cmake --build build -j "$jobs" >> build.log 2>&1) ||
    { echo "$sha: the build failed (see $dir/build.log)"; trap - EXIT; exit 1; }
  echo "$sha: $(echo "$(seconds) - $start" | bc) s, normal tree, -j $jobs ($flags)"
  if [ "${BUILD_TIME_ASAN:-0}" = 1 ]; then
    start=$(seconds)
    (cd "$dir" && cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Release \
       -DCMAKE_CXX_FLAGS_RELEASE="-O1 -g1" -DTPC_SANITIZE=ON > asan.log 2>&1 &&
       CCACHE_DISABLE=1 cmake --build build-asan -j "$jobs" >> asan.log 2>&1) ||
      { echo "$sha: the ASan build failed (see $dir/asan.log)"; trap - EXIT; exit 1; }
    echo "$sha: $(echo "$(seconds) - $start" | bc) s, ASan+UBSan tree, -j $jobs"
  fi
  rm -rf "$dir"
done
