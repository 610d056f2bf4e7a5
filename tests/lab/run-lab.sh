#!/bin/sh
# Boots an emulated NUMA host (QEMU, TCG) whose root is this machine's root
# over 9p (read-only), runs SCRIPT inside it and returns its verdict.
#
# Usage: tests/lab/run-lab.sh --shape SHAPE --script FILE [--timeout S]
#                             [--boot-timeout S] [--builddir DIR] [--log FILE]
# The build directory defaults to $QP_BUILD_ROOT, else ./build of the source
# tree; the lab image is cached in BUILDDIR/lab/.
# Shapes: 4n, 2s2n, smt, cpuless, ccx, 4n-disk, 4n-movable (see docs/lab.md).
# --timeout (default 600): the longest a boot and its script may take.
# --boot-timeout (default 90): a boot whose script has not started by then
# made no progress: it is stopped and booted once more.
# Exit: 0 PASS, 1 FAIL, 77 SKIP (the script exited 77), 2 timeout or boot
# failure.
#
# Variables QP_* and G_* of the caller's environment are passed to the script,
# as are QP_LAB_SHAPE and QP_LAB_SRC (this folder). The script runs as root in
# the host's userland, in a writable scratch directory ($QP_LAB_SCRATCH);
# /tmp and /run are tmpfs, everything else is read-only.
set -eu

die() { echo "run-lab: $*" >&2; exit 2; }

here=$(cd "$(dirname "$0")" && pwd)
shape= script= timeout=600 boot_timeout=90 builddir=${QP_BUILD_ROOT:-} log=
while [ $# -gt 0 ]; do
  case $1 in
    --shape) shape=$2; shift 2 ;;
    --shape=*) shape=${1#*=}; shift ;;
    --script) script=$2; shift 2 ;;
    --script=*) script=${1#*=}; shift ;;
    --timeout) timeout=$2; shift 2 ;;
    --timeout=*) timeout=${1#*=}; shift ;;
    --boot-timeout) boot_timeout=$2; shift 2 ;;
    --boot-timeout=*) boot_timeout=${1#*=}; shift ;;
    --builddir) builddir=$2; shift 2 ;;
    --builddir=*) builddir=${1#*=}; shift ;;
    --log) log=$2; shift 2 ;;
    --log=*) log=${1#*=}; shift ;;
    -h|--help) sed -n '2,20s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (expected --shape, --script, --timeout, --boot-timeout, --builddir, --log)" ;;
  esac
done
[ -n "$shape" ] || die "--shape is required (4n, 2s2n, smt, cpuless, ccx, 4n-disk or 4n-movable)"
[ -n "$script" ] || die "--script is required"
[ -f "$script" ] || die "script '$script' does not exist"
case $timeout in ''|*[!0-9]*) die "--timeout '$timeout' is not a number of seconds" ;; esac
case $boot_timeout in ''|*[!0-9]*) die "--boot-timeout '$boot_timeout' is not a number of seconds" ;; esac
[ -n "$builddir" ] || builddir=$here/../../build
[ -d "$builddir" ] || die "build directory '$builddir' does not exist (give --builddir DIR)"
builddir=$(cd "$builddir" && pwd)
script=$(cd "$(dirname "$script")" && pwd)/$(basename "$script")
command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 is not installed"

"$here/build-image.sh" "$builddir" || die "building the lab image failed"
lab=$builddir/lab

# Per-shape machine. Every shape has 2 GiB of guest RAM.
mem() { # ID SIZE_MIB
  echo "-object memory-backend-ram,id=m$1,size=$2M"
}
node() { # ID CPUS (empty: memory only)
  if [ -n "$2" ]; then
    echo "-numa node,nodeid=$1,cpus=$2,memdev=m$1"
  else
    echo "-numa node,nodeid=$1,memdev=m$1"
  fi
}
dists() { # N FUNC: -numa dist for each pair i<j, value from FUNC i j
  i=0
  while [ "$i" -lt "$1" ]; do
    j=$((i + 1))
    while [ "$j" -lt "$1" ]; do
      echo "-numa dist,src=$i,dst=$j,val=$($2 $i $j)"
      j=$((j + 1))
    done
    i=$((i + 1))
  done
}
uniform() { echo 20; }
socketed() { if [ $(($1 / 2)) -eq $(($2 / 2)) ]; then echo 12; else echo 32; fi; }

cpu=max ram=2048 devices=
kargs=
case $shape in
  4n) # 4 nodes x 2 CPUs, 512 MiB each, distances 10/20
    smp="8,sockets=4,cores=2,threads=1"
    machine="$(mem 0 512) $(mem 1 512) $(mem 2 512) $(mem 3 512)
      $(node 0 0-1) $(node 1 2-3) $(node 2 4-5) $(node 3 6-7) $(dists 4 uniform)" ;;
  2s2n) # 2 sockets x 2 nodes x 2 CPUs; 10 local, 12 same socket, 32 other
    smp="8,sockets=2,cores=4,threads=1"
    machine="$(mem 0 512) $(mem 1 512) $(mem 2 512) $(mem 3 512)
      $(node 0 0-1) $(node 1 2-3) $(node 2 4-5) $(node 3 6-7) $(dists 4 socketed)" ;;
  smt) # 2 sockets x 2 cores x 2 threads, one node per socket. TCG has no
    # topoext, so an AMD-vendor CPU shows no siblings; an Intel vendor makes
    # the kernel read them from CPUID leaf 0xB, which QEMU fills from -smp.
    cpu=max,vendor=GenuineIntel
    smp="8,sockets=2,cores=2,threads=2"
    machine="$(mem 0 1024) $(mem 1 1024) $(node 0 0-3) $(node 1 4-7) $(dists 2 uniform)" ;;
  cpuless) # nodes 0 and 1 with 2 CPUs each, node 2 memory only
    smp="4,sockets=2,cores=2,threads=1"
    machine="$(mem 0 768) $(mem 1 768) $(mem 2 512) $(node 0 0-1) $(node 1 2-3) $(node 2 '')
      -numa dist,src=0,dst=1,val=20 -numa dist,src=0,dst=2,val=17 -numa dist,src=1,dst=2,val=28" ;;
  ccx) # 2 sockets, a node each, 2 dies of 2 cores per socket; an Intel
    # vendor makes the kernel read an L3 per die from CPUID leaf 4: two L3
    # cache domains per node (CPUs 0-1, 2-3 on node 0; 4-5, 6-7 on node 1).
    cpu=max,vendor=GenuineIntel
    smp="8,sockets=2,dies=2,cores=2,threads=1"
    machine="$(mem 0 1024) $(mem 1 1024) $(node 0 0-3) $(node 1 4-7) $(dists 2 uniform)" ;;
  4n-disk) # 4n, and a disk on host node 2: a virtio-blk behind a NUMA-aware
    # expander bus (pxb-pcie numa_node=2), so that its PCI device's
    # numa_node in the lab's sysfs is 2 (/dev/vda inside the lab)
    smp="8,sockets=4,cores=2,threads=1"
    machine="$(mem 0 512) $(mem 1 512) $(mem 2 512) $(mem 3 512)
      $(node 0 0-1) $(node 1 2-3) $(node 2 4-5) $(node 3 6-7) $(dists 4 uniform)"
    # After -virtfs: a device without bus= goes on the last bus made.
    devices="-device pxb-pcie,id=qp-pxb2,bus_nr=32,numa_node=2,bus=pcie.0
      -device pcie-root-port,id=qp-rp2,bus=qp-pxb2,chassis=2
      -drive file=@RUN@/disk.img,if=none,id=qp-disk,format=raw
      -device virtio-blk-pci,drive=qp-disk,bus=qp-rp2,serial=qp-lab-disk" ;;
  4n-movable) # 4n, but node 3's 512 MiB is a DIMM present at boot that the
    # kernel onlines into ZONE_MOVABLE (memhp_default_state=online_movable):
    # it holds no kernel allocation, so all of it can go offline, and node 3
    # then leaves every cpuset's effective mems (robustness finding 73).
    smp="8,sockets=4,cores=2,threads=1" ram=1536,slots=1,maxmem=2048M
    kargs=memhp_default_state=online_movable
    machine="$(mem 0 512) $(mem 1 512) $(mem 2 512) $(mem 3 512)
      $(node 0 0-1) $(node 1 2-3) $(node 2 4-5) -numa node,nodeid=3,cpus=6-7
      -device pc-dimm,id=qp-dimm3,memdev=m3,node=3 $(dists 4 uniform)" ;;
  *) die "unknown shape '$shape' (expected 4n, 2s2n, smt, cpuless, ccx, 4n-disk or 4n-movable)" ;;
esac
cpu=${QP_LAB_CPU:-$cpu} # to try another CPU model by hand

runs=$lab/runs
mkdir -p "$runs"
# Keep the 20 most recent runs.
ls -1dt "$runs"/*.* 2>/dev/null | tail -n +20 | while read -r old; do rm -rf "$old"; done
run=$(mktemp -d "$runs/$shape.XXXXXX")
case $devices in
  *@RUN@*)
    truncate -s 64M "$run/disk.img"
    devices=$(echo "$devices" | sed "s|@RUN@|$run|g") ;;
esac
console=$run/console.log
# The wrapper the lab's init runs: the caller's QP_*/G_* variables, then SCRIPT.
{
  echo "# generated by run-lab.sh"
  env | grep -E '^(QP|G)_[A-Za-z0-9_]*=' | grep -v '^QP_LAB_SCRATCH=\|^QP_LAB_REASON=' | while IFS= read -r kv; do
    k=${kv%%=*} v=${kv#*=}
    printf "export %s='%s'\n" "$k" "$(printf %s "$v" | sed "s/'/'\\\\''/g")"
  done
  echo "export QP_LAB_SHAPE='$shape'"
  echo "export QP_LAB_SRC='$here'"
  echo "export QP_BUILD_ROOT='${QP_BUILD_ROOT:-$builddir}'"
  echo "exec /bin/sh '$script'"
} >"$run/run.sh"

# The lab mounts its own tmpfs on /tmp and /run: a source or build tree
# there (a CI clone in /tmp) is shared again on its own 9p tag.
extra_shares= extra_append= shared= n=0
for d in "$here/../.." "${QP_BUILD_ROOT:-$builddir}" "$run"; do
  d=$(cd "$d" && pwd -P)
  case $d in /tmp/*|/run/*) ;; *) continue ;; esac
  inside=
  for s in $shared; do case $d/ in "$s"/*) inside=1 ;; esac; done
  [ -z "$inside" ] || continue
  shared="$shared $d"
  extra_shares="$extra_shares -virtfs local,path=$d,mount_tag=qpdir$n,security_model=none,readonly=on,multidevs=remap"
  extra_append="$extra_append qp_mount=qpdir$n:$d"
  n=$((n + 1))
done

kernel=$lab/vmlinux   # PVH boot (build-image.sh), else the bzImage
[ -s "$kernel" ] || kernel=$lab/vmlinuz

# The lab kernel's command line (tests/lab/kernel-cmdline), then ours.
append="$(sed '/^#/d' "$here/kernel-cmdline" | tr '\n' ' ')${kargs:+$kargs }qp_script=$run/run.sh$extra_append"

# The emulated host itself can fail to boot, which says nothing of qemu-pin,
# and such a boot is tried once more (the second attempt's verdict stands):
#  - QEMU gone within a minute with no verdict and no timeout: QEMU 7.2
#    under TCG was seen once to abort on an assertion in its MSI-X emulation
#    while the lab's kernel started;
#  - no progress: the image's /init prints "QP-LAB-SCRIPT: ..." just before
#    it starts the script; a boot that has not got there within
#    --boot-timeout is stopped (the guest kernel was seen stuck in its crypto
#    self-tests under TCG; kernel-cmdline now skips those).
# A script that started is never stopped before --timeout, and a verdict
# (PASS, FAIL or SKIP) or a timeout is never retried.
for attempt in 1 2; do
  start=$(date +%s)
  # shellcheck disable=SC2086
  qemu-system-x86_64 -machine q35 -accel "${QP_LAB_ACCEL:-tcg}" -cpu "$cpu" -m "$ram" -smp "$smp" $machine \
    -kernel "$kernel" -initrd "$lab/initramfs.gz" -append "$append" \
    -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
    $extra_shares $devices \
    -nodefaults -display none -serial "file:$console" -no-reboot \
    -monitor "unix:$run/hmp.sock,server=on,wait=off" -name lab,debug-threads=on \
    >"$run/qemu.log" 2>&1 </dev/null &
  qpid=$!
  trap 'kill $qpid 2>/dev/null || true' EXIT INT TERM

  timed_out= stuck= booted=
  while kill -0 "$qpid" 2>/dev/null; do
    now=$(($(date +%s) - start))
    if [ -z "$booted" ]; then
      if grep -aq '^QP-LAB-SCRIPT:' "$console" 2>/dev/null; then
        booted=$now
      elif [ "$now" -ge "$boot_timeout" ]; then
        stuck=1
        # What it was doing, for the log: the host's load, the CPU time
        # of its threads, where its vCPUs were (tests/lab/stuck-report.py).
        python3 "$here/stuck-report.py" "$run/hmp.sock" "$qpid" "$lab/System.map" 2>&1 |
          sed "s/^/run-lab: $shape: stuck boot: /" >"$run/stuck-report" || true
        kill "$qpid" 2>/dev/null || true
        break
      fi
    fi
    if [ "$now" -ge "$timeout" ]; then
      timed_out=1
      kill "$qpid" 2>/dev/null || true
      break
    fi
    sleep 1
  done
  qemu_rc=0
  wait "$qpid" 2>/dev/null || qemu_rc=$?
  trap - EXIT INT TERM
  elapsed=$(($(date +%s) - start))
  # The script and its verdict can come within one poll.
  [ -n "$booted" ] || ! grep -aq '^QP-LAB-SCRIPT:' "$console" 2>/dev/null || booted="<$elapsed"

  [ -z "$log" ] || cp "$console" "$log"
  verdict=$(grep -a '^QP-LAB-VERDICT:' "$console" 2>/dev/null | tail -n 1 | tr -d '\r' || true)
  [ "$attempt" -eq 1 ] || break
  if [ -n "$stuck" ]; then
    where="in the kernel, before /init"
    grep -aq '^QP-LAB-INIT:' "$console" 2>/dev/null && where="in /init, before the script"
    echo "run-lab: $shape: boot made no progress in ${boot_timeout} s (no QP-LAB-SCRIPT line on the console; stuck $where), retrying once"
    cat "$run/stuck-report" 2>/dev/null || true
    if [ -s "$console" ]; then
      echo "run-lab: $shape: the stuck boot's last console lines:"
      tail -n 5 "$console" | tr -d '\r'
    fi
    mv "$console" "$console.no-progress" 2>/dev/null || true
    continue
  fi
  if [ -z "$verdict" ] && [ -z "$timed_out" ] && [ "$elapsed" -lt 60 ]; then
    echo "run-lab: $shape: QEMU exited (status $qemu_rc) after ${elapsed} s without a verdict, retrying once; its output:"
    tail -n 5 "$run/qemu.log" || true
    mv "$console" "$console.boot-failure" 2>/dev/null || true
    continue
  fi
  break
done
boot="boot ${booted:-?} s, attempt $attempt"

verdict=$(grep -a '^QP-LAB-VERDICT:' "$console" 2>/dev/null | tail -n 1 | tr -d '\r' || true)
case $verdict in
  "QP-LAB-VERDICT: PASS")
    cat "$console"
    echo "run-lab: $shape: PASS in ${elapsed} s ($boot; console: $console)"
    exit 0 ;;
  "QP-LAB-VERDICT: SKIP"*)
    cat "$console"
    echo "run-lab: $shape: SKIP in ${elapsed} s: ${verdict#QP-LAB-VERDICT: SKIP } ($boot; console: $console)"
    exit 77 ;;
  "QP-LAB-VERDICT: FAIL"*)
    cat "$console"
    echo "run-lab: $shape: FAIL in ${elapsed} s: ${verdict#QP-LAB-VERDICT: FAIL } ($boot; console: $console)"
    exit 1 ;;
esac
echo "run-lab: --- last lines of the console ($console) ---"
tail -n 40 "$console" 2>/dev/null || true
echo "run-lab: --- QEMU's output ---"
tail -n 20 "$run/qemu.log" || true
if [ -n "$stuck" ]; then
  echo "run-lab: $shape: boot made no progress in ${boot_timeout} s, on the second attempt too (boot failure)"
elif [ -n "$timed_out" ]; then
  echo "run-lab: $shape: no verdict within ${timeout} s ($boot; timeout)"
else
  echo "run-lab: $shape: QEMU exited (status $qemu_rc) after ${elapsed} s without a verdict (boot failure)"
fi
exit 2
