#!/usr/bin/env bash
# tp-run across two "machines" on one box: two network namespaces joined by a veth pair,
# ranks 0-1 in one and 2-3 in the other, as torchrun, mpirun -H or srun would start them
# on two hosts. Each namespace has its own loopback, so the ranks can only meet over the
# veth addresses: rank 0 hosts the store at 10.231.0.1, and Gloo binds to the address each
# rank reaches it from. Machine b also gets its own /dev/shm (a mount namespace), so its
# ranks cannot map rank 0's shared-memory segment and --transport auto must fall back to
# Gloo on every rank. The outputs must equal the in-process run's, byte for byte.
#
#   tests/tools/two_machines_test.sh TP_COMPILE TP_RUN MODEL.onnx WORK_DIR
#
# Exit 77 (ctest: skipped), saying why, where namespaces cannot be made (not root, no
# iproute2, a container without CAP_NET_ADMIN).
set -u
tp_compile=$1 tp_run=$2 model=$3 work=$4

skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "network namespaces need root"
command -v ip >/dev/null || skip "iproute2 (ip) is not installed (tools/install_deps.sh installs it)"

a=tpc_a_$$ b=tpc_b_$$ va=tpca$$ vb=tpcb$$
cleanup() {
  # Every rank that is still running (a failed run) dies with its namespace's processes.
  for ns in $a $b; do
    for pid in $(ip netns pids $ns 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
    ip netns del $ns 2>/dev/null
  done
}
trap cleanup EXIT
ip netns add $a 2>/dev/null && ip netns add $b 2>/dev/null ||
  skip "cannot create network namespaces here (ip netns add failed)"
ip link add $va type veth peer name $vb || skip "cannot create a veth pair"
ip link set $va netns $a && ip link set $vb netns $b &&
  ip -n $a addr add 10.231.0.1/24 dev $va && ip -n $b addr add 10.231.0.2/24 dev $vb &&
  ip -n $a link set $va up && ip -n $b link set $vb up &&
  ip -n $a link set lo up && ip -n $b link set lo up || { echo "FAIL: setting up the veth pair"; exit 1; }

rm -rf "$work" && mkdir -p "$work"
"$tp_compile" "$model" --tp 4 --sequence-parallel --quiet -o "$work/plan" || { echo "FAIL: tp-compile"; exit 1; }
"$tp_run" "$work/plan" --ranks threads --quiet --output-dir "$work/threads" || { echo "FAIL: threads run"; exit 1; }

port=29531
pids=()
command -v unshare >/dev/null || skip "unshare (util-linux) is not installed"
# Machine b's own /dev/shm: a private mount namespace with a fresh tmpfs there.
own_shm='mount --make-rprivate / && mount -t tmpfs -o size=64m tpc_shm /dev/shm && exec "$@"'
for r in 0 1 2 3; do
  ns=$a wrap=(); [ $r -ge 2 ] && ns=$b wrap=(unshare --mount sh -c "$own_shm" sh)
  ip netns exec $ns env RANK=$r WORLD_SIZE=4 LOCAL_RANK=$((r % 2)) LOCAL_WORLD_SIZE=2 \
    MASTER_ADDR=10.231.0.1 MASTER_PORT=$port "${wrap[@]}" \
    "$tp_run" "$work/plan" --timeout 20 --output-dir "$work/two" >"$work/rank$r.log" 2>&1 &
  pids+=($!)
done
status=0
for r in 0 1 2 3; do
  if ! wait "${pids[$r]}"; then
    echo "FAIL: rank $r exited non-zero:"; cat "$work/rank$r.log"; status=1
  fi
done
[ $status = 0 ] || exit 1
if ! cmp -s "$work/threads/output_0.pb" "$work/two/output_0.pb"; then
  echo "FAIL: the two-namespace run's output differs from the in-process run's"; exit 1
fi
if ! grep -q "collectives through Gloo" "$work/rank0.log"; then
  echo "FAIL: --transport auto did not fall back to Gloo across the machines:"; cat "$work/rank0.log"
  exit 1
fi
# Rank 2 could not have reached 127.0.0.1 of the other namespace: it went over the veth.
echo "PASS: 4 ranks over 2 network namespaces (10.231.0.1, 10.231.0.2) equal the in-process run," \
  "through Gloo (auto: machine b cannot map machine a's shared memory)"
