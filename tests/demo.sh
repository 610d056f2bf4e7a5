#!/usr/bin/env bash
# Runs a real VM through the built qemu-pin and shows what it did: the plan,
# each vCPU thread's CPU affinity, the guest RAM's memory policy, and the
# ledger while the VM runs and after it stops.
#
# The guest is a 64 KiB firmware that halts its CPU (no disk image needed);
# QEMU runs it under TCG, one thread per vCPU, as it would a real OS.
#
# tests/demo.sh --linux boots Debian's kernel instead (the NUMA lab's image:
# tests/lab/build-image.sh fetches linux-image-amd64 with apt-get download)
# with two guest NUMA nodes, and prints, from inside the guest, the NUMA
# layout the guest sees next to where qemu-pin put each guest node on this
# host, and the guest node of its disk (a virtio-blk on a file here, which
# qemu-pin puts on the guest node of the file's host node). The guest powers
# off by itself (about a minute under TCG).
set -euo pipefail
cd "$(dirname "$0")/.."
# qemu-pin's own defaults and the options below, whatever this host's
# /etc/qemu-pin/qemu-pin.conf or the caller's QEMU_PIN_* say.
. tests/common/hermetic.sh
QEMU=${QEMU:-qemu-system-x86_64}
MODE=${MODE:-one-to-one}
BUILD=${QP_BUILD_ROOT:-build}
QP=${QP_BINARY:-$BUILD/qemu-pin}
case ${1:-} in
  '') ;;
  --linux) MODE=${MODE_LINUX:-auto} ;;
  *) echo "demo.sh: unknown argument '$1' (expected nothing or --linux)" >&2; exit 2 ;;
esac
work=$(mktemp -d /tmp/qemu-pin-demo.XXXXXX)
trap 'rm -rf "$work"' EXIT

# The Linux guest: two guest NUMA nodes (vCPU 0 and 256 MiB, vCPU 1 and
# 192 MiB), its console in a file, the guest's report printed at the end.
linux_demo() {
  if ! tests/lab/build-image.sh "$BUILD" 2>"$work/image.err"; then
    cat "$work/image.err" >&2
    echo "demo.sh: skipped: no Linux kernel (Debian's linux-image-amd64 could not be fetched)" >&2
    return 77
  fi
  local lab kernel script share='' append=''
  lab=$(cd "$BUILD" && pwd)/lab
  kernel=$lab/vmlinux   # PVH boot, else the bzImage (see build-image.sh)
  [ -s "$kernel" ] || kernel=$lab/vmlinuz
  script=$(pwd)/tests/demo-guest.sh
  # The image's init mounts its own tmpfs on /tmp and /run: a tree there is
  # shared again on a tag of its own (qp_mount=TAG:PATH, as run-lab.sh does).
  case $(pwd -P) in
    /tmp/*|/run/*)
      share="-virtfs local,path=$(pwd -P)/tests,mount_tag=qpdemo,security_model=none,readonly=on,multidevs=remap"
      append=" qp_mount=qpdemo:$(pwd -P)/tests"
      script=$(pwd -P)/tests/demo-guest.sh ;;
  esac
  truncate -s 16M "$work/disk.img"
  # shellcheck disable=SC2206
  local vm=(-accel tcg -machine q35 -cpu max -nodefaults -display none -smp 2 -m 448
    -object memory-backend-ram,id=m0,size=256M -object memory-backend-ram,id=m1,size=192M
    -numa node,nodeid=0,cpus=0,memdev=m0 -numa node,nodeid=1,cpus=1,memdev=m1
    -name demo-linux,debug-threads=on
    -drive "file=$work/disk.img,if=none,id=disk,format=raw"
    -device virtio-blk-pci,drive=disk,id=disk0,serial=qp-demo-disk
    -kernel "$kernel" -initrd "$lab/initramfs.gz"
    -append "$(sed '/^#/d' tests/lab/kernel-cmdline | tr '\n' ' ')qp_script=$script$append"
    -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap
    $share -serial "file:$work/console.log" -no-reboot
    -daemonize -pidfile "$work/vm.pid")

  echo "== qemu-pin plan --human --mode=$MODE -- $QEMU (2 guest nodes, Linux $(cat "$lab/kernel-version"))"
  "$QP" plan --human --state-dir="$work/state" --mode="$MODE" -- "$QEMU" "${vm[@]}" || return 1
  # The disk's host node, and the guest node on it: the guest's first
  # node whose RAM qemu-pin bound to that host node alone.
  "$QP" plan --state-dir="$work/state" --mode="$MODE" -- "$QEMU" "${vm[@]}" >"$work/plan.json" || return 1
  jq -r '(.devices[0]["host-node"]) as $h
    | ([.memory[] | select(.kind == "ram" and .["host-nodes"] == ($h | tostring)) | .["guest-node"]] | first) as $g
    | "the disk: host node \($h), expected on guest node \($g)"' "$work/plan.json"
  echo
  echo "== qemu-pin --mode=$MODE -- $QEMU ... -daemonize"
  "$QP" --state-dir="$work/state" --mode="$MODE" -- "$QEMU" "${vm[@]}" || return 1
  pid=$(cat "$work/vm.pid")
  trap 'kill "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
  echo "QEMU runs as pid $pid; the guest boots"

  # Host side, while the guest boots: each guest node's vCPU thread and
  # memory, read from /proc (helpers of the NUMA lab).
  QP_LAB_SCRATCH=$work QP_LAB_REASON=$work/reason . tests/lab/lib.sh
  echo
  echo "== on the host: where qemu-pin put each guest node (from /proc/$pid)"
  local node_mib=(256 192) n tid cpus nodes mem c
  for n in 0 1; do
    tid=$(vcpu_threads "$pid" | awk -v i="$n" '$1 == i { print $2 }')
    cpus=$(cpus_allowed_of "$tid")
    nodes=$(for c in $(list_expand "$cpus"); do cpu_node "$c"; done | sort -un | paste -sd,)
    mem=$(numa_maps_bind_nodes "$pid" | awk -v m="${node_mib[$n]}" '$1 == m { print $2 }' | paste -sd' ')
    echo "guest node $n: vCPU $n (thread $tid) on host CPUs $cpus (host node $nodes); ${node_mib[$n]} MiB ${mem:-with no policy of its own}"
  done
  echo
  echo "== qemu-pin status"
  "$QP" status --state-dir="$work/state" || return 1

  # The guest powers off when its script is done.
  local waited=0
  while kill -0 "$pid" 2>/dev/null; do
    if [ "$waited" -ge "${DEMO_TIMEOUT:-300}" ]; then
      echo "demo.sh: the guest did not power off within ${DEMO_TIMEOUT:-300} s; its console:" >&2
      tail -n 20 "$work/console.log" >&2
      return 1
    fi
    sleep 1
    waited=$((waited + 1))
  done
  echo
  sed -n '/^== inside the guest/,/^QP-LAB-VERDICT/p' "$work/console.log" | grep -v '^QP-LAB-VERDICT' | tr -d '\r'
  grep -q '^QP-LAB-VERDICT: PASS' "$work/console.log" || {
    echo "demo.sh: the guest's script failed; its console:" >&2
    tail -n 20 "$work/console.log" >&2
    return 1
  }
  echo
  echo "== after the guest powered off: the claim is released"
  sleep 0.5
  "$QP" status --state-dir="$work/state" || return 1
}

if [ "${1:-}" = --linux ]; then
  # (set -e does not hold inside a function called with ||: each command
  # that must succeed says || return 1.)
  rc=0
  linux_demo || rc=$?
  exit "$rc"
fi

# cli; hlt; jmp $-3 at the reset vector.
head -c 65536 /dev/zero > "$work/halt.fw"
printf '\xfa\xf4\xeb\xfd' | dd of="$work/halt.fw" bs=1 seek=$((0xfff0)) conv=notrunc status=none

vm=(-accel tcg -machine q35 -nodefaults -display none -smp 2 -m 256
    -bios "$work/halt.fw" -name demo,debug-threads=on
    -daemonize -pidfile "$work/vm.pid")

echo "== qemu-pin plan --human --mode=$MODE -- $QEMU ${vm[*]}"
"$QP" plan --human --state-dir="$work/state" --mode="$MODE" -- "$QEMU" "${vm[@]}"

echo
echo "== qemu-pin -v --mode=$MODE -- $QEMU ... -daemonize"
"$QP" -v --state-dir="$work/state" --mode="$MODE" -- "$QEMU" "${vm[@]}"
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
"$QP" status --state-dir="$work/state"

kill "$pid"
for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
sleep 0.5
echo
echo "== after the VM stopped: the claim is released"
"$QP" status --state-dir="$work/state"
