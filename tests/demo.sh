#!/usr/bin/env bash
# Runs a real VM through the built qemu-pin and shows what it did: the plan,
# each vCPU thread's CPU affinity, the guest RAM's memory policy, and the
# ledger while the VM runs and after it stops.
#
# The guest is a 64 KiB firmware that halts its CPU (no disk image needed);
# QEMU runs it under TCG, one thread per vCPU, as it would a real OS.
set -euo pipefail
cd "$(dirname "$0")/.."
QEMU=${QEMU:-qemu-system-x86_64}
MODE=${MODE:-one-to-one}
work=$(mktemp -d /tmp/qemu-pin-demo.XXXXXX)
trap 'rm -rf "$work"' EXIT

# cli; hlt; jmp $-3 at the reset vector.
head -c 65536 /dev/zero > "$work/halt.fw"
printf '\xfa\xf4\xeb\xfd' | dd of="$work/halt.fw" bs=1 seek=$((0xfff0)) conv=notrunc status=none

vm=(-accel tcg -machine q35 -nodefaults -display none -smp 2 -m 256
    -bios "$work/halt.fw" -name demo,debug-threads=on
    -daemonize -pidfile "$work/vm.pid")

echo "== qemu-pin plan --human --mode=$MODE -- $QEMU ${vm[*]}"
build/qemu-pin plan --human --state-dir="$work/state" --mode="$MODE" -- "$QEMU" "${vm[@]}"

echo
echo "== qemu-pin -v --mode=$MODE -- $QEMU ... -daemonize"
build/qemu-pin -v --state-dir="$work/state" --mode="$MODE" -- "$QEMU" "${vm[@]}"
pid=$(cat "$work/vm.pid")
echo "QEMU runs as pid $pid"

echo
echo "== vCPU threads and their CPUs (from /proc/$pid/task/*/status)"
for t in /proc/"$pid"/task/*; do
  comm=$(cat "$t/comm")
  case "$comm" in CPU*) printf '  %-10s %s\n' "$comm" "$(grep Cpus_allowed_list "$t/status")";; esac
done

echo
echo "== guest RAM policy (from /proc/$pid/numa_maps)"
grep -E 'bind|prefer|interleave' /proc/"$pid"/numa_maps | sed 's/^/  /' || echo "  (no binding: one-to-one without -numa pins CPUs only)"

echo
echo "== qemu-pin status"
build/qemu-pin status --state-dir="$work/state"

kill "$pid"
for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
sleep 0.5
echo
echo "== after the VM stopped: the claim is released"
build/qemu-pin status --state-dir="$work/state"
