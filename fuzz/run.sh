#!/usr/bin/env bash
# fuzz/run.sh BUILD_DIR SECONDS — runs each fuzzer of a TPC_FUZZ build (`make fuzz`
# builds it) for SECONDS, one after the other. Builds nothing.
#
#   corpus     BUILD_DIR/fuzz-corpus/<name>/     (grows across runs; seeds are read from
#              BUILD_DIR/fuzz-seeds/<name>/, regenerated each run by fuzz/seed_corpus.py)
#   crashes    BUILD_DIR/fuzz-artifacts/<name>/  (crash-*, leak-*, timeout-*, oom-*)
#   logs       BUILD_DIR/fuzz-logs/<name>.log
#
# Prints execs/s and corpus size per harness; exits 1 when any harness crashed, naming
# the input. FUZZ_KEEP_GOING=1 keeps fuzzing past crashes (libFuzzer's -fork mode), to
# collect more than the first one.
set -uo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 BUILD_DIR SECONDS" >&2
  exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$1" && pwd) || exit 2
seconds=$2
# FUZZ_HARNESSES="a b" runs only those (e.g. two run.sh at once, one per core).
read -r -a harnesses <<<"${FUZZ_HARNESSES:-import_model external_data ir_parser plan_loader}"

for h in "${harnesses[@]}"; do
  if [ ! -x "$build/${h}_fuzzer" ]; then
    echo "fuzz: $build/${h}_fuzzer is missing; build with -DTPC_FUZZ=ON (make fuzz)" >&2
    exit 2
  fi
done

python3 "$root/fuzz/seed_corpus.py" --build "$build" --out "$build/fuzz-seeds" || {
  echo "fuzz: could not write the seed corpora" >&2
  exit 2
}

# Symbolized stacks; leaks are errors too. ASan's defaults otherwise.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

mode=()
if [ "${FUZZ_KEEP_GOING:-0}" = 1 ]; then
  mode=(-fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1)
fi

failed=()
summary=()
for h in "${harnesses[@]}"; do
  corpus=$build/fuzz-corpus/$h
  artifacts=$build/fuzz-artifacts/$h
  log=$build/fuzz-logs/$h.log
  # The harnesses write their files under $TMPDIR; a crash mid-input leaves them here,
  # in the build folder, rather than in /tmp.
  tmp=$build/fuzz-tmp/$h
  mkdir -p "$corpus" "$artifacts" "$(dirname "$log")" "$tmp"
  before=$(find "$artifacts" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' \
           -o -name 'oom-*' \) | wc -l)
  echo "fuzz: $h for ${seconds}s (log: $log)"
  TMPDIR=$tmp "$build/${h}_fuzzer" "$corpus" "$build/fuzz-seeds/$h" \
    -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$artifacts/" "${mode[@]}" >"$log" 2>&1
  rc=$?
  rm -rf "$tmp"

  execs=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  # -fork mode prints no final stats; its status lines do: `#N: cov: C ... exec/s E`.
  [ -z "$execs" ] && execs=$(grep -o -E 'exec/s:? [0-9]+' "$log" | tail -1 | sed -E 's/.* //')
  [ -z "$runs" ] && runs=$(grep -o -E '^#[0-9]+' "$log" | tail -1 | tr -d '#')
  # The last status line: `#N DONE cov: C ft: F corp: UNITS/SIZE ...` (-fork: `corp: UNITS`).
  corp=$(grep -o -E 'corp: [0-9]+(/[0-9]+[A-Za-z]*)?' "$log" | tail -1 | sed 's/corp: //')
  cov=$(grep -o -E 'cov: [0-9]+' "$log" | tail -1 | sed 's/cov: //')
  files=$(find "$corpus" -type f | wc -l)
  line=$(printf '%-14s %8s execs/s  %10s runs  cov %6s  corpus %s units (%s files in %s)' \
         "$h" "${execs:-?}" "${runs:-?}" "${cov:-?}" "${corp:-?}" "$files" \
         "${corpus#"$root"/}")
  roundtrip=$(grep -c '^tpc-fuzz: round-trip' "$log")
  [ "$roundtrip" -gt 0 ] && line+="  ROUND-TRIP FAILURES reported: $roundtrip (see the log)"

  new=$(find "$artifacts" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' \
        -o -name 'oom-*' \) | wc -l)
  if [ "$rc" -ne 0 ] || [ "$new" -gt "$before" ]; then
    failed+=("$h")
    line+="  CRASHED (exit $rc)"
    echo "fuzz: $h crashed (exit $rc). The error and the top of its stack:"
    grep -m2 -E 'ERROR: |runtime error:|terminate called|what\(\): |out-of-memory|timeout after' "$log" |
      sed 's/^/    /'
    # The first frames in tpc's own code (libFuzzer's, libc's and the sanitizers' left out).
    grep -E '^ *#[0-9]+ 0x' "$log" |
      grep -v -E ' in (fuzzer::|__sanitizer|__asan|__ubsan|__interceptor|__cxa|__gnu_cxx|abort|raise|__pthread|__libc|_start|main )| \(/lib/' |
      head -8 | sed 's/^/    /'
    echo "fuzz: the input that crashed it:"
    grep -E '^artifact_prefix=|Test unit written to' "$log" | sed 's/^/    /'
    echo "fuzz: replay with: $build/${h}_fuzzer INPUT; keep it: copy it to fuzz/regressions/$h/"
  fi
  summary+=("$line")
done

echo
echo "fuzz: ${seconds}s per harness"
printf '  %s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: crashed: ${failed[*]} (inputs under $build/fuzz-artifacts/)" >&2
  exit 1
fi
echo "fuzz: no crashes"
