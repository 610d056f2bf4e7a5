# In-lab test (shape 4n-disk): device locality. The lab host's disk
# (/dev/vda) hangs off host node 2 (a pxb-pcie with numa_node=2 in
# run-lab.sh). A guest whose virtio-blk uses that disk with iothread io0:
# - balanced: the VM goes to the disk's node (node 0 fits as well), and
#   io0 runs on node 2's CPUs;
# - numa: with node 2's memory taken by another VM, the guest goes
#   elsewhere, yet io0 runs on node 2's CPUs and the main thread (the
#   emulator) stays with the VM; `qemu-pin status` names the disk, its node
#   and its iothread's CPUs.
# - numa with two guest nodes: the disk in the guest on the guest node whose
#   RAM is on host node 2 (QEMU's command line: qemu-pin's expander bus).
# Each check reads Cpus_allowed_list of the running QEMU's threads.
. "$QP_LAB_SRC/lib.sh"

expect_nodes 4
qp_require --mode=balanced
[ -b /dev/vda ] || fail "the lab host has no disk /dev/vda (shape 4n-disk?)"
disk_dev=$(readlink -f /sys/block/vda/device)
disk_pci=$(basename "$(dirname "$disk_dev")")
assert_eq "the lab disk's PCI node" 2 "$(cat "/sys/bus/pci/devices/$disk_pci/numa_node")"

# iothread_tid PID ID: the thread of iothread ID (debug-threads=on).
iothread_tid() {
  for _t in /proc/"$1"/task/*; do
    read -r _c <"$_t/comm" 2>/dev/null || continue
    [ "$_c" = "IO $2" ] && { echo "${_t##*/}"; return 0; }
  done
  return 1
}

# vcpu_cpus PID: Cpus_allowed_list of vCPU 0.
vcpu_cpus() {
  vcpu_threads "$1" | while read -r _i _tid; do
    [ "$_i" = 0 ] && cpus_allowed_of "$_tid"
  done
}

write_fw_halt fw.bin
disk_args() { # NAME MEM_MIB
  # shellcheck disable=SC2046
  echo "$QP_QEMU $(vm_args "$1" fw.bin) -smp 2 -m $2 -object iothread,id=io0" \
    "-drive file=/dev/vda,if=none,id=d0,format=raw,readonly=on" \
    "-device virtio-blk-pci,drive=d0,iothread=io0,id=disk0"
}

# ---- guest side: numa, two guest nodes ---------------------------------------
# Guest node 0's RAM bound by the caller to host node 0; the disk goes, in
# the guest, on the guest node whose RAM qemu-pin put on host node 2 (a
# pxb-pcie with that numa_node, a root port, the disk on it), and QEMU runs
# with it.
# shellcheck disable=SC2046
set -- "$QP_QEMU" $(vm_args vn fw.bin) -smp 2 -m 256 \
  -object memory-backend-ram,id=r0,size=128M,host-nodes=0,policy=bind \
  -object memory-backend-ram,id=r1,size=128M \
  -numa node,nodeid=0,cpus=0,memdev=r0 -numa node,nodeid=1,cpus=1,memdev=r1 \
  -object iothread,id=io0 -drive file=/dev/vda,if=none,id=d0,format=raw,readonly=on \
  -device virtio-blk-pci,drive=d0,iothread=io0,id=disk0
qp_plan --mode=numa -- "$@" >vplan.json || fail "qemu-pin plan failed: $(cat vplan.json)"
g=$(jq '[.memory[] | select(.kind == "ram" and .["host-nodes"] == "2") | .["guest-node"]] | first' vplan.json)
[ "$g" != null ] || fail "numa plan: no guest node on the disk's host node 2: $(jq -c .memory vplan.json)"
log "numa plan: guest node $g is on the disk's host node 2"
pid=$(qp_launch vn --mode=numa -- "$@") || fail "qemu-pin did not launch the VM: $pid"
cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline")
case $cmdline in
  *" pxb-pcie,id=qemu-pin-pxb$g,bus_nr=240,numa_node=$g,bus=pcie.0 "*" virtio-blk-pci,drive=d0,iothread=io0,id=disk0,bus=qemu-pin-rp0 "*)
    log "ok: QEMU runs with the disk on guest node $g's expander bus" ;;
  *) fail "guest side: QEMU's command line has no expander of guest node $g with the disk: $cmdline" ;;
esac
tid=$(iothread_tid "$pid" io0) || fail "QEMU $pid has no thread 'IO io0'"
assert_eq "numa, two guest nodes: iothread io0 on node 2's CPUs" "$(node_cpus 2)" "$(cpus_allowed_of "$tid")"
lab_cleanup

# ---- balanced ----------------------------------------------------------------
# shellcheck disable=SC2046
set -- $(disk_args bal 128)
qp_plan --mode=balanced -- "$@" >plan.json || fail "qemu-pin plan failed: $(cat plan.json)"
assert_eq "plan: the disk's host node" 2 "$(jq -r '.devices[0]["host-node"]' plan.json)"
assert_eq "plan: the disk's PCI device" "$disk_pci" "$(jq -r '.devices[0].pci' plan.json)"
assert_eq "balanced plan: the VM on the disk's node" 2 "$(jq -r '.["host-nodes"]' plan.json)"
pid=$(qp_launch bal --mode=balanced -- "$@") || fail "qemu-pin did not launch the VM: $pid"
tid=$(iothread_tid "$pid" io0) || fail "QEMU $pid has no thread 'IO io0'"
assert_eq "balanced: iothread io0 on node 2's CPUs" "$(node_cpus 2)" "$(cpus_allowed_of "$tid")"
assert_eq "balanced: vCPU 0 on node 2's CPUs" "$(node_cpus 2)" "$(vcpu_cpus "$pid")"
lab_cleanup

# ---- numa, the disk's node full ----------------------------------------------
# What a claim may take on node 2 once the VMs above are gone: their
# keepers release the claims when QEMU has exited, a moment after the kill.
no_vms() { [ "$(jq '.vms | length' "$(status_json)")" = 0 ]; }
wait_for 60 no_vms || fail "the stopped VMs' claims remain 60 s after their QEMUs were killed"
sf=$(status_json) || fail "qemu-pin status --json failed"
log "node 2: $(jq -c '.nodes[] | select(.id == 2) | .["memory-mib"]' "$sf"); VMs: $(jq -c '[.vms[] | .name]' "$sf")"
free2=$(jq '.nodes[] | select(.id == 2) | .["memory-mib"] | (.available // .uncommitted)' "$sf")
fill=$((free2 - 96))
# The lab gives node 2 512 MiB: with the VMs above stopped, a filler of at
# least 128 MiB fits.
[ "$fill" -ge 128 ] || fail "node 2 of 512 MiB has only $free2 MiB available once the VMs above stopped"
# shellcheck disable=SC2046
fill_pid=$(qp_launch fill --mode=numa --hostnodes=2 -- "$QP_QEMU" $(vm_args fill fw.bin) -smp 1 -m "$fill") ||
  fail "qemu-pin did not launch the filler VM: $fill_pid"
# shellcheck disable=SC2046
set -- $(disk_args num 256)
pid=$(qp_launch num --mode=numa -- "$@") || fail "qemu-pin did not launch the VM: $pid"
vcpus=$(vcpu_cpus "$pid")
vnode=$(cpu_node "$(list_expand "$vcpus" | cut -d" " -f1)")
[ "$vnode" != 2 ] || fail "numa: the VM is on node 2, which has no room for it"
log "numa: the VM is on node $vnode (vCPU 0 on $vcpus)"
tid=$(iothread_tid "$pid" io0) || fail "QEMU $pid has no thread 'IO io0'"
assert_eq "numa: iothread io0 on the disk's node 2" "$(node_cpus 2)" "$(cpus_allowed_of "$tid")"
assert_eq "numa: the main thread stays with the VM (node $vnode)" "$(node_cpus "$vnode")" "$(cpus_allowed_of "$pid")"
# status names the disk, its node and where its iothread runs.
sf=$(status_json) || fail "qemu-pin status --json failed"
line=$(jq -r '.vms[] | select(.name == "num") | .devices[0]' "$sf")
case $line in
  *"PCI $disk_pci, host node 2, iothread io0 on CPUs $(node_cpus 2)") log "ok: status: $line" ;;
  *) fail "status: the disk's line is '$line'" ;;
esac
lab_cleanup
exit 0
