#!/bin/bash
# --vnuma=auto gives the guest its host L3 layout as dies: plans a 4-vCPU
# one-to-one VM on the recorded EPYC 7351P (2 L3s of 2 cores per node), boots
# the lab's Linux image with the -smp the plan suggests, and checks from
# inside the guest that two vCPUs share an L3 exactly when their host CPUs
# do. The guest CPU model is Intel's (QEMU 7.2 shares the L3 per die in
# CPUID leaf 4); with AMD models under TCG (no topoext) Linux shares the L3
# over the whole socket whatever the dies. Skips (77) without the image.
set -u
src=${QP_SOURCE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
. "$src/tests/common/hermetic.sh"
build=${QP_BUILD_ROOT:-$src/build}
qp=${QP_BINARY:-$build/qemu-pin}
qemu=${QP_QEMU:-qemu-system-x86_64}
xml=$src/tests/data/topologies/epyc-7351p.xml
work=$(mktemp -d /var/tmp/qp-dies.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$src/tests/lab/build-image.sh" "$build" 2>"$work/image.err" ||
  { cat "$work/image.err"; echo "SKIP: no Linux kernel"; exit 77; }
kernel=$build/lab/vmlinux
[ -s "$kernel" ] || kernel=$build/lab/vmlinuz

"$qp" plan --topology="$xml" --mode=one-to-one --vnuma=auto \
  --state-dir="$work/state" -- "$qemu" -smp 4 -m 512 >"$work/plan.json" ||
  fail "qemu-pin plan failed"
smp=$(jq -r '.vnuma | "cpus=4,sockets=\(.sockets),dies=\(.dies),cores=\(.cores),threads=\(.threads)"' "$work/plan.json")
echo "plan: -smp $smp"
case $smp in *dies=2,*) ;; *) fail "expected dies=2 in '$smp'" ;; esac

# Host L3 of each vCPU, by the plan's CPU and the host's cache domains.
"$qp" topology --json --topology="$xml" >"$work/host.json"
expand() { # LIST -> " 0 1 16 17 "
  local out=' ' r
  for r in ${1//,/ }; do out+="$(seq -s ' ' "${r%-*}" "${r#*-}") "; done
  echo "$out"
}
host_l3() { # VCPU: the host L3 (its CPU list) the plan puts it in
  local cpu l3
  cpu=$(jq -r --argjson v "$1" '.vcpus[] | select(.index == $v) | .cpus' "$work/plan.json")
  for l3 in $(jq -r '.nodes[].cache_domains[] | select(.level == "L3") | .cpus' "$work/host.json"); do
    case $(expand "$l3") in *" $cpu "*) echo "$l3"; return ;; esac
  done
}

# The image's init mounts its own tmpfs on /tmp and /run: a source tree there
# is shared again on a tag of its own (qp_mount=TAG:PATH, as run-lab.sh does).
tests=$(cd "$src/tests" && pwd -P)
share=() append=
case $tests in
  /tmp/* | /run/*)
    share=(-virtfs "local,path=$tests,mount_tag=qpdies,security_model=none,readonly=on,multidevs=remap")
    append=" qp_mount=qpdies:$tests" ;;
esac
timeout 120 "$qemu" -accel tcg -machine q35 -cpu max,vendor=GenuineIntel \
  -nodefaults -display none -smp "$smp" -m 512 \
  -kernel "$kernel" -initrd "$build/lab/initramfs.gz" \
  -append "$(sed '/^#/d' "$src/tests/lab/kernel-cmdline" | tr '\n' ' ')qp_script=$tests/vnuma-dies-guest.sh$append" \
  -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
  "${share[@]}" \
  -serial "file:$work/console.log" -no-reboot || fail "the guest did not run"
tr -d '\r' <"$work/console.log" | grep -E '^(guest cpu|==)' | tee "$work/guest.txt"
grep -q '^QP-LAB-VERDICT: PASS' <(tr -d '\r' <"$work/console.log") || fail "the guest script failed"

guest_l3() { sed -n "s/^guest cpu $1: die [0-9-]*, L3 shared with \(.*\)$/\1/p" "$work/guest.txt"; }
for v in 0 1 2 3; do
  for w in 0 1 2 3; do
    [ "$v" -lt "$w" ] || continue
    host_same=no; [ "$(host_l3 $v)" = "$(host_l3 $w)" ] && host_same=yes
    guest_same=no; [ "$(guest_l3 $v)" = "$(guest_l3 $w)" ] && guest_same=yes
    [ -n "$(guest_l3 $v)" ] || fail "the guest shows no L3 for CPU $v"
    [ "$host_same" = "$guest_same" ] ||
      fail "vCPUs $v and $w: host L3 shared $host_same, guest L3 shared $guest_same"
    echo "ok: vCPUs $v and $w share an L3 on the host: $host_same, in the guest: $guest_same"
  done
done
echo PASS
