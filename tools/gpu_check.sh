#!/usr/bin/env bash
# tools/gpu_check.sh — every GPU test and benchmark of tpc in one call, on a machine with
# an NVIDIA GPU. Builds nothing: it runs the executables it is given.
#
#   tools/gpu_check.sh [BIN_DIR] [OUT_DIR]
#
# BIN_DIR holds tp-compile, tp-run and tpc_tests (default: build, with build/tests);
# OUT_DIR gets gpu_check.log and kernels.txt (default: $OUT or /tmp/gpu_check). The models
# are the checkout's models/*.onnx; TPC_SOURCE_ROOT (default: this checkout) is where the
# tests find .cache/ (the ONNX node tests). GPU_CHECK_SECTIONS (default: all) picks
# sections for a short rerun, a comma-separated list of: kernels, tests, models, half,
# real, nccl, processes, throughput, bench, decode (nccl and processes use the plans that
# models makes). GPU_LLAMA_ARGS adds arguments to bench/gpu_llama.py ("--rounds 2 --iters
# 5", "--layers 4 --tp-sizes="); GPU_LLAMA_TIMEOUT (default 400) bounds it in seconds;
# GPU_DECODE_ARGS and GPU_DECODE_TIMEOUT (default 360) do the same for bench/gpu_decode.py.
# Each section's start is logged with the seconds since the script began. Exit
# status: 0 when every check passed, 1 when one failed, 77 when there is no GPU (nothing
# checked). ../shared/GPU.md says how to carry a build to the lent GPU machine.
#
# GPU_CHECK_EMULATED=1 runs the checks without a GPU: tp-run and tpc_tests are BIN_DIR's
# tp_run_cuda_host and tpc_tests_cuda_host, the CUDA backend with its kernels' own text on
# the host and the CUDA runtime, cuBLAS and NCCL emulated (tests/cuda_host); sections
# default to kernels, tests, models, half, real, nccl and processes (the timings of the
# others mean nothing there). make test runs it (ctest tools.gpu_check_emulated).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$root/build}
out=${2:-${OUT:-/tmp/gpu_check}}
mkdir -p "$out"
log=$out/gpu_check.log
plans=$(mktemp -d)
trap 'rm -rf "$plans"' EXIT
: >"$log"
export TPC_SOURCE_ROOT=${TPC_SOURCE_ROOT:-$root}

find_bin() {
  for c in "$bin/$1" "$bin/tests/$1" "$bin/bin/$1"; do
    [ -x "$c" ] && { echo "$c"; return; }
  done
  echo ""
}
emulated=${GPU_CHECK_EMULATED:-0}
compile=$(find_bin tp-compile)
run=$(find_bin tp-run)
[ "$emulated" = 1 ] && run=$(find_bin tp_run_cuda_host)
tests=$(find_bin tpc_tests)
[ "$emulated" = 1 ] && tests=$(find_bin tpc_tests_cuda_host)
say() { echo "$*" | tee -a "$log"; }
sections=${GPU_CHECK_SECTIONS:-all}
[ "$emulated" = 1 ] && sections=${GPU_CHECK_SECTIONS:-kernels,tests,models,half,real,nccl,processes}
# The cuBLASLt runs (TPC_CUBLASLT=1) repeat the others when emulated: cuda_host's cuBLASLt
# offers no algorithm, so they take cuBLAS.
lt=1
[ "$emulated" = 1 ] && lt=0
# The GPUs here (those CUDA_VISIBLE_DEVICES shows), for the checks of NCCL across ranks;
# `one` runs a command as on a machine with only the first. Emulated: 4 (each process of
# a run takes its own, as on a machine with 4 GPUs), and `one` sets CUDA_HOST_DEVICES=1.
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
first=0
if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then  # what the processes will see
  gpus=$(tr ',' '\n' <<<"$CUDA_VISIBLE_DEVICES" | grep -c .)
  first=${CUDA_VISIBLE_DEVICES%%,*}
fi
one=(env CUDA_VISIBLE_DEVICES="$first")
if [ "$emulated" = 1 ]; then
  export CUDA_HOST_DEVICES=4
  gpus=4
  one=(env CUDA_HOST_DEVICES=1)
fi
started=$(date +%s)
want() {  # want SECTION: whether it runs; logs its start
  case ",$sections," in
    *",all,"* | *",$1,"*) say "==== $1 ($(($(date +%s) - started)) s)"; return 0 ;;
  esac
  return 1
}
pass=0
fail=0
failed=()
check() {  # check NAME COMMAND...: runs it, logs its output, counts it
  local name=$1
  shift
  say "---- $name"
  local rc=0
  "$@" >"$plans/check.out" 2>&1 || rc=$?
  cat "$plans/check.out" >>"$log"
  if [ "$rc" -eq 0 ]; then
    pass=$((pass + 1))
    say "PASS $name"
  else
    fail=$((fail + 1))
    failed+=("$name")
    tail -n 15 "$plans/check.out"  # the reason, where the log is not at hand (ctest)
    say "FAIL $name (exit $rc)"
  fi
}

say "gpu_check: $(date -u +%FT%TZ) on $(hostname)"
if [ "$emulated" = 1 ]; then
  say "gpu_check: emulated (no GPU): $run, sections $sections"
elif ! command -v nvidia-smi >/dev/null || ! nvidia-smi >>"$log" 2>&1; then
  say "gpu_check: no GPU here (nvidia-smi failed): nothing checked"
  exit 77
fi
for b in "$compile" "$run" "$tests"; do
  [ -n "$b" ] || { say "gpu_check: tp-compile, tp-run or tpc_tests missing under $bin"; exit 2; }
done

# 1. The kernel lists: the CUDA list covers every operator of the CPU list.
if want kernels; then
  "$run" --list-kernels >"$out/kernels.txt"
  cpu_ops=$(grep -c '^cpu ' "$out/kernels.txt")
  cuda_ops=$(grep -c '^cuda ' "$out/kernels.txt")
  native=$(grep '^cuda ' "$out/kernels.txt" | grep -vc ' host$')
  say "kernels: cpu $cpu_ops, cuda $cuda_ops ($native with a device kernel, the rest on the host)"
  check "cuda lists every cpu operator" test "$cpu_ops" -eq "$cuda_ops"
fi

# 2. The GPU unit tests: the ONNX node tests through the CUDA backend, kernel tests.
if want tests; then
  check "tpc_tests [cuda]" "$tests" "[cuda]" --durations yes
  # The tiled attention kernel (opt-in until it has run here): every fusion pattern again,
  # the attention cores in f16 and bf16 through it.
  check "tpc_tests fusion on the GPU, TPC_FLASH_ATTENTION=1" \
    env TPC_FLASH_ATTENTION=1 "$tests" "fusion on the GPU*"
  # Every float GEMM through cuBLASLt, FusedMatMul's bias and GELU in its epilogue
  # (opt-in until it has run here): the node tests (MatMul, Gemm, the convolutions,
  # attention, recurrent ops...) and the GEMM-epilogue fusion cases in f32, f16 and bf16.
  [ "$lt" = 1 ] && check "tpc_tests [cuda], TPC_CUBLASLT=1" env TPC_CUBLASLT=1 "$tests" "[cuda]"
  # Without a GPU the [cuda] tests skip, passing: emulated, none may (a backend bound to
  # the real CUDA runtime instead of cuda_host's would find no GPU and skip them all).
  [ "$emulated" = 1 ] && check "emulated: no [cuda] test skipped" \
    bash -c "! grep -E 'skipped: (no GPU here|this build has no CUDA backend|[0-9]+ NCCL ranks need)' '$log'"
fi

# 3. Every committed model x N in {1, 2, 4}, ranks as threads on this GPU, against the
#    unsharded CPU run (f32: rtol 1e-4, atol 1e-5 as on the CPU).
if want models; then
  for model in "$root"/models/*.onnx; do
    name=$(basename "$model" .onnx)
    for n in 1 2 4; do
      plan=$plans/${name}_$n
      if ! "$compile" "$model" --tp "$n" -o "$plan" >>"$log" 2>&1; then
        say "skip $name N=$n: tp-compile refused it (see the log)"
        continue
      fi
      inputs=()  # the model's own test inputs where it has them (KV-cache models need them)
      [ -d "$root/models/$name/test_data_set_0" ] && inputs=(--input-dir "$root/models/$name/test_data_set_0")
      check "$name N=$n cuda threads == cpu unsharded" \
        "$run" "$plan" --backend cuda --ranks threads --check-against "$model" --quiet "${inputs[@]}"
      # With the arena's guards: no kernel writes outside its value.
      [ "$n" = 2 ] && check "$name N=2 cuda threads, TPC_ARENA_GUARDS=256 == cpu unsharded" \
        env TPC_ARENA_GUARDS=256 "$run" "$plan" --backend cuda --ranks threads \
        --check-against "$model" --quiet "${inputs[@]}"
      # The f32 GEMMs through cuBLASLt (opt-in until it has run here).
      [ "$n" = 1 ] && [ "$lt" = 1 ] && check "$name N=1 cuda, TPC_CUBLASLT=1 == cpu unsharded" \
        env TPC_CUBLASLT=1 "$run" "$plan" --backend cuda --ranks threads \
        --check-against "$model" --quiet "${inputs[@]}"
    done
  done
  # 3a. Device memory: a plan that does not fit (--gpu-memory 64 KiB, below its largest
  #     weights of 128 KiB) fails with exit 1, naming the GPU's free memory (the allocator's out-of-memory path: its cached
  #     blocks given back, then the error); within a limit it fits, it runs equal to the CPU.
  if [ -d "$plans/llama_1" ]; then
    llama_inputs=()
    [ -d "$root/models/llama/test_data_set_0" ] && llama_inputs=(--input-dir "$root/models/llama/test_data_set_0")
    check "llama N=1 cuda --gpu-memory 64KiB fails naming the GPU's memory" bash -c \
      "'$run' '$plans/llama_1' --backend cuda --ranks threads --gpu-memory 64KiB ${llama_inputs[*]} \
         >'$plans/oom.txt' 2>&1; rc=\$?; cat '$plans/oom.txt'; [ \$rc -ne 0 ] && grep -q 'free of' '$plans/oom.txt'"
    check "llama N=1 cuda --gpu-memory 2GiB == cpu unsharded" \
      "$run" "$plans/llama_1" --backend cuda --ranks threads --gpu-memory 2GiB \
      --check-against "$root/models/llama.onnx" --quiet "${llama_inputs[@]}"
  fi
fi

# 3b. Half-precision plans (tp-compile --dtype) on the GPU against the unsharded f32 CPU
#     run, within the tolerances documented in docs/cuda.md (f16 1e-2, bf16 5e-2).
if want half; then
  for model in "$root"/models/*.onnx; do
    name=$(basename "$model" .onnx)
    inputs=()
    [ -d "$root/models/$name/test_data_set_0" ] && inputs=(--input-dir "$root/models/$name/test_data_set_0")
    for dtype in f16 bf16; do
      tol=1e-2
      [ "$dtype" = bf16 ] && tol=5e-2
      for n in 1 4; do
        plan=$plans/${name}_${n}_$dtype
        "$compile" "$model" --tp "$n" --dtype "$dtype" -o "$plan" >>"$log" 2>&1 || continue
        check "$name N=$n $dtype cuda threads ~ cpu f32" \
          "$run" "$plan" --backend cuda --ranks threads --check-against "$model" --quiet \
          --rtol "$tol" --atol "$tol" "${inputs[@]}"
        # The same through the tiled attention kernel (opt-in until it has run here).
        check "$name N=$n $dtype cuda threads, TPC_FLASH_ATTENTION=1 ~ cpu f32" \
          env TPC_FLASH_ATTENTION=1 "$run" "$plan" --backend cuda --ranks threads \
          --check-against "$model" --quiet --rtol "$tol" --atol "$tol" "${inputs[@]}"
        # And the GEMMs through cuBLASLt (opt-in until it has run here).
        [ "$n" = 1 ] && [ "$lt" = 1 ] && check "$name N=1 $dtype cuda, TPC_CUBLASLT=1 ~ cpu f32" \
          env TPC_CUBLASLT=1 "$run" "$plan" --backend cuda --ranks threads \
          --check-against "$model" --quiet --rtol "$tol" --atol "$tol" "${inputs[@]}"
      done
    done
  done
fi

# 3c. Real exports (models/genai, models/optimum: KV-cache decoders, int4): onnxruntime's
#     outputs on the test inputs (int4 within 1e-2, as python.real_exports), and
#     --generate 16 giving the unsharded CPU run's token ids (two prompts of different
#     lengths: the shorter one padded, at its start or end as the model takes it).
if want real; then
  for model in "$root"/models/genai/*/model.onnx "$root"/models/optimum/*/model.onnx; do
    [ -f "$model" ] || continue
    name=$(basename "$(dirname "$(dirname "$model")")")/$(basename "$(dirname "$model")")
    # Prompts of two lengths (a model with a convolution state, LFM2's past.N.conv, runs
    # them one row at a time).
    prompt="5 6 7 8; 9 10"
    # int4 exports (accuracy_level 4): activations rounded to int8 per block, where a last
    # bit of difference upstream may take the next code (python.real_exports' tolerance).
    gen_tol=()
    case "$name" in *int4*) gen_tol=(--rtol 1e-2 --atol 5e-3) ;; esac
    for n in 1 2; do
      plan=$plans/real_${name//\//_}_$n
      "$compile" "$model" --tp "$n" -o "$plan" >>"$log" 2>&1 || continue
      check "$name N=$n cuda == onnxruntime" "$run" "$plan" --backend cuda --ranks threads --quiet \
        --input-dir "$(dirname "$model")/test_data_set_0" --rtol 2e-2 --atol 1e-2
      check "$name N=$n cuda --generate 16 == cpu unsharded" "$run" "$plan" --backend cuda \
        --ranks threads --generate 16 --prompt "$prompt" --check-against "$model" "${gen_tol[@]}"
      # CUDA graphs on real exports (one rank: collectives are never recorded): the third
      # of three runs on the same inputs replays the second's record; with --cuda-graph a
      # decode loop feeds its cache through the host (a record reads its own buffers),
      # and one whose KV buffers keep their shape (onnxruntime-genai's) replays.
      if [ "$n" = 1 ]; then
        check "$name N=1 cuda --cuda-graph --repeat 3 == onnxruntime" "$run" "$plan" \
          --backend cuda --ranks threads --quiet --cuda-graph --repeat 3 \
          --input-dir "$(dirname "$model")/test_data_set_0" --rtol 2e-2 --atol 1e-2
        check "$name N=1 cuda --cuda-graph --generate 16 == cpu unsharded" "$run" "$plan" \
          --backend cuda --ranks threads --cuda-graph --generate 16 \
          --prompt "$prompt" --check-against "$model" "${gen_tol[@]}"
      fi
    done
  done
fi

# killed_rank NAME COMMAND...: COMMAND is tp-run's launcher of $plan (4 ranks, repeating
# runs); the worker of rank 2 is killed after 3 s: the others must stop within 15 s, with
# a non-zero exit and no process left.
killed_rank() {
  local name=$1
  shift
  say "---- $name"
  "$@" >"$plans/kill.log" 2>&1 &
  local launcher=$! victim="" p
  for _ in $(seq 1 200); do  # the worker of rank 2: TPC_RANK=2 in its environment
    for p in $(pgrep -f "$plan"); do
      if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx 'TPC_RANK=2'; then victim=$p; fi
    done
    [ -n "$victim" ] && break
    sleep 0.05
  done
  sleep 3
  [ -n "$victim" ] && kill -9 "$victim"
  [ -z "$victim" ] && kill "$launcher" 2>/dev/null  # no worker found: stop the launcher
  local start code took left
  start=$(date +%s)
  for _ in $(seq 1 600); do  # at most 60 s, then it is killed
    kill -0 "$launcher" 2>/dev/null || break
    sleep 0.1
  done
  kill -9 "$launcher" 2>/dev/null
  wait "$launcher"
  code=$?
  took=$(($(date +%s) - start))
  cat "$plans/kill.log" >>"$log"
  left=$(pgrep -fc "$plan" || true)
  check "$name: the others stop (exit $code in ${took}s, $left left)" \
    test -n "$victim" -a "$code" -ne 0 -a "$took" -lt 15 -a "$left" -eq 0
}

# killed_cluster_rank NAME WANT [VAR=VALUE...]: the 4 ranks of $plan started as a cluster
# launcher starts them (RANK, WORLD_SIZE, ... in their environment, VAR=VALUE added;
# repeating runs), rank 2 killed after 3 s: with no launcher of tpc's to tell them, the
# others must stop by themselves within 15 s, with non-zero exits, and one of them must
# say WANT (an extended regular expression: how it learnt of the failure).
killed_cluster_rank() {
  local name=$1 want=$2
  shift 2
  say "---- $name"
  local pids=() r port=$((29600 + RANDOM % 1000))
  for r in 0 1 2 3; do
    env "$@" RANK=$r WORLD_SIZE=4 LOCAL_RANK=$r LOCAL_WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 \
      MASTER_PORT=$port "$run" "$plan" --backend cuda --quiet --repeat 1000000 --timeout 5 \
      >"$plans/kill_$r.log" 2>&1 &
    pids+=($!)
  done
  sleep 3
  kill -9 "${pids[2]}"
  local start took codes=() ok=1 p
  start=$(date +%s)
  for _ in $(seq 1 600); do  # at most 60 s, then they are killed
    local alive=0
    for r in 0 1 3; do kill -0 "${pids[$r]}" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.1
  done
  took=$(($(date +%s) - start))
  for r in 0 1 2 3; do
    kill -9 "${pids[$r]}" 2>/dev/null
    { wait "${pids[$r]}"; } 2>/dev/null  # without bash's "Killed" notice
    codes+=($?)
    [ "$r" != 2 ] && [ "${codes[$r]}" -eq 0 ] && ok=0
    cat "$plans/kill_$r.log" >>"$log"
  done
  [ "$took" -lt 15 ] || ok=0
  cat "$plans"/kill_[013].log | grep -qE "$want" || ok=0
  check "$name: the others stop (exits ${codes[*]} in ${took}s, saying '$want')" test "$ok" = 1
}

# through_nccl COMMAND...: COMMAND (a tp-run of ranks as processes) passes, and its
# collectives went through NCCL (its summary says so), not through the host.
through_nccl() {
  local out rc=0
  out=$("$@" 2>&1) || rc=$?
  echo "$out"
  [ "$rc" -eq 0 ] && grep -q "collectives through NCCL" <<<"$out"
}

# 4. NCCL: one rank as a process of a cluster launcher (LOCAL_RANK picks the GPU; a world
#    of 1), then, on a machine with a GPU per rank, 2 and 4 ranks as processes of tp-run's
#    launcher with the plan's collectives through NCCL, and a killed rank. Emulated, the
#    machine has 4 GPUs (CUDA_HOST_DEVICES=4) and NCCL's transport is shared memory; a
#    second killed rank there goes unreported by NCCL (CUDA_HOST_NCCL_SILENT=1), so that only
#    --timeout stops the others, as when NCCL does not notice.
if want nccl; then
  plan=$plans/gpt2_1
  if [ -d "$plan" ]; then
    check "gpt2 N=1 cuda process, NCCL (RANK/WORLD_SIZE)" \
      env RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 \
      MASTER_PORT=29577 "$run" "$plan" --backend cuda --check-against "$root/models/gpt2.onnx" --quiet
  fi
  for n in 2 4; do
    if [ "$gpus" -lt "$n" ]; then
      say "skip N=$n through NCCL: it needs $n GPUs, this machine has $gpus"
      continue
    fi
    for name in llama gpt2; do
      plan=$plans/${name}_$n
      [ -d "$plan" ] || continue
      inputs=()
      [ -d "$root/models/$name/test_data_set_0" ] && inputs=(--input-dir "$root/models/$name/test_data_set_0")
      check "$name N=$n cuda processes, NCCL == cpu unsharded" through_nccl \
        "$run" "$plan" --backend cuda --check-against "$root/models/$name.onnx" "${inputs[@]}"
    done
    [ "$n" = 4 ] || continue
    plan=$plans/llama_4_f16  # (the half section makes N = 1 and 4)
    [ -d "$plan" ] && check "llama N=4 f16 cuda processes, NCCL ~ cpu f32" through_nccl \
      "$run" "$plan" --backend cuda --check-against "$root/models/llama.onnx" \
      --rtol 1e-2 --atol 1e-2
    if [ -d "$plans/llama_4" ]; then
      plan=$plans/llama_4
      killed_rank "llama N=4 cuda processes, NCCL, rank 2 killed" "$run" "$plan" \
        --backend cuda --quiet --repeat 1000000 --timeout 5
      # NCCL's asynchronous error, or, where NCCL does not notice (often, on one machine),
      # the wait's timeout; emulated, the error (CUDA_HOST_NCCL_SILENT=1 below: the timeout).
      how='NCCL|did not finish within'
      [ "$emulated" = 1 ] && how='NCCL'
      killed_cluster_rank "llama N=4 cuda, a cluster launcher's processes, NCCL, rank 2 killed" \
        "$how"
      [ "$emulated" = 1 ] && killed_cluster_rank \
        "llama N=4 cuda, a cluster launcher's processes, NCCL not noticing, rank 2 killed" \
        "did not finish within" CUDA_HOST_NCCL_SILENT=1
    fi
  done
fi

# 5. Ranks as processes sharing one GPU (tp-run's launcher; the collectives go through
#    the host), and a rank killed mid-run: the others stop within --timeout.
if want processes; then
  plan=$plans/llama_4
  if [ -d "$plan" ]; then
    check "llama N=4 cuda processes == cpu unsharded" "${one[@]}" \
      "$run" "$plan" --backend cuda --check-against "$root/models/llama.onnx" --quiet
    killed_rank "llama N=4 cuda processes, rank 2 killed" "${one[@]}" \
      "$run" "$plan" --backend cuda --quiet --repeat 1000000 --timeout 5
  fi
fi

# 6. Throughput, cpu against cuda, same plan and inputs (absolute numbers mean little
#    across machines; the ratio is the figure).
if want throughput; then
  for name in gpt2 llama; do
    plan=$plans/${name}_1
    [ -d "$plan" ] || continue
    for backend in cpu cuda; do
      say "---- bench $name N=1 $backend"
      "$run" "$plan" --backend "$backend" --ranks threads --repeat 20 --dim batch=4 --dim seq=128 \
        >"$plans/bench.txt" 2>&1
      tail -5 "$plans/bench.txt" | tee -a "$log"
    done
    # Steady runs take their device memory from the backend's cache (no cudaMalloc).
    check "$name N=1 cuda: no device allocation in a steady run" \
      grep -q "obtained during its last run: 0 blocks" "$plans/bench.txt"
    say "---- bench $name N=1 cuda --cuda-graph"
    "$run" "$plan" --backend cuda --ranks threads --repeat 20 --dim batch=4 --dim seq=128 \
      --cuda-graph >"$plans/bench_graph.txt" 2>&1
    tail -7 "$plans/bench_graph.txt" | tee -a "$log"
    if grep -q "waits for the device inside rank 0's last run.*: 0$" "$plans/bench.txt"; then
      check "$name N=1 cuda --cuda-graph: the last run replayed a CUDA graph" \
        grep -q "as a CUDA graph: replayed" "$plans/bench_graph.txt"
    fi
  done
fi

# 7. The f16 Llama-1B-shaped forward, tpc against PyTorch eager (bench/gpu_llama.py).
if want bench; then
  if python3 -c "import torch, transformers; assert torch.cuda.is_available()" 2>/dev/null; then
    say "---- bench gpu_llama (f16, Llama-1B shape, 8 x 512)"
    # Streamed, not buffered: a run cut short still logs its stages, and gpu_llama.json
    # holds the figures measured so far ("complete": false).
    timeout "${GPU_LLAMA_TIMEOUT:-400}" python3 "$root/bench/gpu_llama.py" --tp-compile "$compile" \
      --tp-run "$run" --work "$plans/gpu_llama" --out "$out/gpu_llama.json" ${GPU_LLAMA_ARGS:-} \
      2>&1 | tee -a "$log"
    say "bench gpu_llama: exit ${PIPESTATUS[0]} (124: stopped after ${GPU_LLAMA_TIMEOUT:-400} s)"
  else
    say "skip bench gpu_llama: python3 has no torch with CUDA"
  fi
fi

# 8. Greedy decoding with the KV cache kept on the GPU, tpc against PyTorch's generate
#    (bench/gpu_decode.py; 4 layers of the Llama-1B shape, 8 rows, 128 + 64 tokens), and
#    tpc on the same model in int4 (MatMulNBits: the decoding GEMV).
if want decode; then
  if python3 -c "import torch, transformers; assert torch.cuda.is_available()" 2>/dev/null; then
    say "---- bench gpu_decode (f16 and int4, 4 layers of the Llama-1B shape, 8 x (128 + 64))"
    timeout "${GPU_DECODE_TIMEOUT:-360}" python3 "$root/bench/gpu_decode.py" --tp-compile \
      "$compile" --tp-run "$run" --work "$plans/gpu_decode" --out "$out/gpu_decode.json" \
      --int4 32 ${GPU_DECODE_ARGS:-} 2>&1 | tee -a "$log"
    say "bench gpu_decode: exit ${PIPESTATUS[0]} (124: stopped after ${GPU_DECODE_TIMEOUT:-360} s)"
  else
    say "skip bench gpu_decode: python3 has no torch with CUDA"
  fi
fi

say "gpu_check: $pass passed, $fail failed"
for f in "${failed[@]}"; do say "  failed: $f"; done
[ "$fail" -eq 0 ]
