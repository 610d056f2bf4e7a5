#!/usr/bin/env bash
# Regenerates docs/status.png: this host with two VMs holding claims, drawn
# by `qemu-pin status --picture` (hwloc's lstopo with per-object styles).
# Usage: docs/picture.sh [OUT.png|OUT.svg]   (after .ci/setup)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-docs/status.png}
work=$(mktemp -d /tmp/qemu-pin-picture.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
head -c 65536 /dev/zero > "$work/halt.fw"
printf '\xfa\xf4\xeb\xfd' | dd of="$work/halt.fw" bs=1 seek=$((0xfff0)) conv=notrunc status=none

launch() { # NAME MODE SMP MEM
  build/qemu-pin --state-dir="$work/state" --mode="$2" -- qemu-system-x86_64 \
    -accel tcg -machine q35 -nodefaults -display none -bios "$work/halt.fw" \
    -name "$1" -smp "$3" -m "$4" -daemonize -pidfile "$work/$1.pid"
  pids+=("$(cat "$work/$1.pid")")
}
launch web one-to-one 1 256
launch db balanced 1 512
build/qemu-pin status --state-dir="$work/state"
build/qemu-pin status --state-dir="$work/state" --picture="$out"
