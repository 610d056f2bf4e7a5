# In-lab test (shape 4n): a VM whose guest RAM is in 2 MiB hugepages
# (preallocated), launched on node 1, which its caller then confines to
# node 2 with a cgroup v2 cpuset (as lab-split.sh does with ordinary
# memory). The kernel migrates its hugetlb pages to node 2's pool; the
# claim must follow them (robustness finding 51), so that node 1's pool
# counts its pages free again and node 2's counts them taken: a VM of the
# same size then fits on node 1. The VM becomes the caller's placement.
. "$QP_LAB_SRC/lib.sh"

expect_nodes 4
qp_require --mode=balanced
pool() { hugepage_pool "$@"; }
[ -e "$(pool 0 nr_hugepages)" ] || fail "the lab kernel has no 2 MiB hugepage pools per node"
for n in 1 2; do
  echo 40 >"$(pool "$n" nr_hugepages)"
  assert_eq "node $n's pool" 40 "$(cat "$(pool "$n" nr_hugepages)")"
done

write_fw_halt fw.bin
ram='{"qom-type":"memory-backend-memfd","id":"pc.ram","size":67108864,"hugetlb":true,"hugetlbsize":2097152,"prealloc":true}'
# shellcheck disable=SC2046
set -- "$QP_QEMU" $(vm_args hg fw.bin) -smp 1 -m 64 -object "$ram" -machine memory-backend=pc.ram
pid=$(qp_launch hg --mode=balanced --hostnodes=1 -- "$@") || fail "qemu-pin did not launch the hugepage VM: $pid"

# uncommitted NODE: the 2 MiB pages of NODE's pool that status offers.
uncommitted() {
  jq -r --argjson n "$1" '.nodes[] | select(.id == $n) | .hugepages[] | select(.["page-kib"] == 2048) | .uncommitted' "$(status_json)"
}
assert_eq "the claim: 32 hugepages on node 1" '[{"node":1,"page-kib":2048,"pages":32}]' "$(huge_of "$pid")"
assert_eq "before: the guest's hugepages on node 1" 32 "$(huge_on "$pid" 1)"

caller_cgroup lab-split-huge "$pid" 1-2
echo 2 >"$cg/cpuset.mems" || fail "cannot narrow the cgroup's mems to node 2"
all_on_2() { [ "$(huge_on "$pid" 2)" -eq 32 ]; }
wait_for 60 all_on_2 || fail "the kernel left the guest's hugepages off node 2: $(huge_on "$pid" 2) of 32 there"
log "the caller's cgroup moved the 32 hugepages to node 2; pools free: node 1 $(cat "$(pool 1 free_hugepages)"), node 2 $(cat "$(pool 2 free_hugepages)")"

# The keeper measures every 10 s.
claim_on_2() { [ "$(huge_of "$pid")" = '[{"node":2,"page-kib":2048,"pages":32}]' ]; }
wait_for 30 claim_on_2 || fail "the hugepage claim did not follow the pages to node 2: $(huge_of "$pid")"
log "ok: the claim followed the hugepages to node 2: $(huge_of "$pid")"
st=$(status_json) || fail "qemu-pin status failed"
assert_eq "caller-placed of the VM" true \
  "$(jq -r --argjson p "$pid" '.vms[] | select(.["qemu-pid"] == $p) | .["caller-placed"]' "$st")"
assert_eq "node 1's pool offered" 40 "$(uncommitted 1)"
assert_eq "node 2's pool offered" 8 "$(uncommitted 2)"
# shellcheck disable=SC2046
set -- "$QP_QEMU" $(vm_args hg2 fw.bin) -smp 1 -m 64 -object "$ram" -machine memory-backend=pc.ram
"$QP_BINARY" plan --mode=balanced --hostnodes=1 -- "$@" >plan.json 2>plan.err ||
  fail "a VM of 32 hugepages does not fit on node 1, whose pool has 40 free: $(cat plan.err)"
log "ok: a VM of 32 hugepages plans on node 1 again"

lab_cleanup
rmdir "$cg" 2>/dev/null
exit 0
