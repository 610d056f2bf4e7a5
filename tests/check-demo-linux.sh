#!/bin/sh
# Runs `tests/demo.sh --linux` and checks what the Linux guest said about its
# own NUMA layout: two nodes, vCPU 0 on node 0 and vCPU 1 on node 1, each with
# at most the memory its backend has (256 and 192 MiB) and most of it; and
# that the host side showed each guest node's vCPU thread and bound memory.
# Skips (77) when demo.sh could not fetch Debian's kernel.
set -u
. "$QP_SOURCE_ROOT/tests/common/hermetic.sh"
out=$(mktemp /tmp/qp-demo-linux.XXXXXX)
trap 'rm -f "$out"' EXIT
rc=0
DEMO_TIMEOUT=120 "$QP_SOURCE_ROOT/tests/demo.sh" --linux >"$out" 2>&1 || rc=$?
cat "$out"
[ "$rc" -ne 77 ] || exit 77
[ "$rc" -eq 0 ] || { echo "FAIL: demo.sh --linux exited $rc"; exit 1; }

guest=$(sed -n '/^== inside the guest: its NUMA nodes/,/^$/p' "$out" | grep '^guest node')
[ "$(echo "$guest" | wc -l)" -eq 2 ] || { echo "FAIL: the guest reported not 2 nodes: $guest"; exit 1; }
check() { # NODE CPUS MAX_MIB
  line=$(echo "$guest" | grep "^guest node $1: ") || { echo "FAIL: the guest has no node $1"; exit 1; }
  cpus=$(echo "$line" | sed -n 's/^guest node [0-9]*: CPUs \([0-9,-]*\), [0-9]* MiB$/\1/p')
  mib=$(echo "$line" | sed -n 's/^.*, \([0-9]*\) MiB$/\1/p')
  [ "$cpus" = "$2" ] || { echo "FAIL: guest node $1 has CPUs '$cpus', expected '$2'"; exit 1; }
  [ -n "$mib" ] && [ "$mib" -le "$3" ] && [ "$mib" -ge $(($3 / 2)) ] ||
    { echo "FAIL: guest node $1 has '$mib' MiB, expected $(($3 / 2))-$3"; exit 1; }
  grep -q "^guest node $1: vCPU $1 (thread [0-9]*) on host CPUs [0-9,-]* (host node [0-9,]*); $3 MiB bind:[0-9,-]*$" "$out" ||
    { echo "FAIL: no host-side line for guest node $1 with its vCPU thread and $3 MiB bound"; exit 1; }
  echo "ok: guest node $1: CPUs $cpus, $mib MiB of $3; host side shown"
}
check 0 0 256
check 1 1 192

# The disk: on the guest node qemu-pin mapped to its host node.
want=$(sed -n 's/^the disk: host node [0-9]*, expected on guest node \([0-9]*\)$/\1/p' "$out")
[ -n "$want" ] || { echo "FAIL: demo.sh did not say the disk's expected guest node"; exit 1; }
got=$(sed -n 's/^guest disk [0-9a-f:.]* on guest node \(-\{0,1\}[0-9]*\)$/\1/p' "$out" | tr -d '\r')
[ "$got" = "$want" ] || { echo "FAIL: the guest sees its disk on guest node '$got', expected $want"; exit 1; }
echo "ok: the guest sees its disk on guest node $got"
echo "PASS"
