# In-lab test (shape 4n, 512 MiB per node): `qemu-pin move` of a VM whose
# guest RAM is in 2 MiB hugepages (preallocated). Nodes 0-2 get a pool of
# 40 pages (80 MiB), node 3 none. Moved, the VM's hugepages are all on the
# new node (numa_maps), taken from that node's pool (free_hugepages) and
# given back to the old one's, its threads run on the new node's CPUs, and
# its claim names the new node's pool only. A move onto node 3, whose pool
# is empty, is refused in one line and changes nothing.
. "$QP_LAB_SRC/lib.sh"

expect_nodes 4
qp_require --mode=balanced
pool() { echo "/sys/devices/system/node/node$1/hugepages/hugepages-2048kB/$2"; }
[ -e "$(pool 0 nr_hugepages)" ] || fail "the lab kernel has no 2 MiB hugepage pools per node"
for n in 0 1 2; do echo 40 >"$(pool "$n" nr_hugepages)"; done
echo 0 >"$(pool 3 nr_hugepages)"
for n in 0 1 2; do
  assert_eq "node $n's pool" 40 "$(cat "$(pool "$n" nr_hugepages)")"
done

write_fw_halt fw.bin
ram='{"qom-type":"memory-backend-memfd","id":"pc.ram","size":67108864,"hugetlb":true,"hugetlbsize":2097152,"prealloc":true}'
# shellcheck disable=SC2046
set -- "$QP_QEMU" $(vm_args hg fw.bin) -smp 1 -m 64 -object "$ram" -machine memory-backend=pc.ram
pid=$(qp_launch hg --mode=balanced -- "$@") || fail "qemu-pin did not launch the hugepage VM: $pid"

huge_of() {
  _sf=$(status_json) || fail "qemu-pin status --json failed"
  jq -c --argjson p "$1" '.vms[] | select(.["qemu-pid"] == $p) | .hugepages' "$_sf"
}
# huge_on PID NODE: the 2 MiB pages of PID's hugetlb mappings on NODE.
huge_on() {
  awk -v node="N$2=" '/ huge / { for (i = 3; i <= NF; i++) if (index($i, node) == 1) { split($i, kv, "="); n += kv[2] } }
    END { print n + 0 }' "/proc/$1/numa_maps"
}
from=$(huge_of "$pid" | jq -r '.[0].node')
assert_eq "the claim: 32 hugepages on one node" "[{\"node\":$from,\"page-kib\":2048,\"pages\":32}]" "$(huge_of "$pid")"
assert_eq "before: the guest's hugepages on node $from" 32 "$(huge_on "$pid" "$from")"
to=$(((from + 1) % 3))
free_from=$(cat "$(pool "$from" free_hugepages)") free_to=$(cat "$(pool "$to" free_hugepages)")

"$QP_BINARY" move hg --to-nodes="$to" >move.out 2>move.err || fail "the move of the hugepage VM failed: $(cat move.err)"
[ -s move.err ] && fail "a successful move printed on stderr: $(cat move.err)"
log "$(cat move.out)"
assert_eq "after the move: the guest's hugepages on node $to" 32 "$(huge_on "$pid" "$to")"
assert_eq "after the move: none left on node $from" 0 "$(huge_on "$pid" "$from")"
assert_eq "node $to's pool gave 32 pages" $((free_to - 32)) "$(cat "$(pool "$to" free_hugepages)")"
assert_eq "node $from's pool has its 32 pages back" $((free_from + 32)) "$(cat "$(pool "$from" free_hugepages)")"
assert_eq "after the move: the claim names node $to's pool only" "[{\"node\":$to,\"page-kib\":2048,\"pages\":32}]" "$(huge_of "$pid")"
want=$(node_cpus "$to")
for t in /proc/"$pid"/task/*; do
  assert_eq "thread ${t##*/} on node $to's CPUs" "$want" "$(cpus_allowed_of "${t##*/}")"
done

# Node 3 has no pool: refused in one line, nothing changed.
if "$QP_BINARY" move hg --to-nodes=3 >nofit.out 2>nofit.err; then
  fail "a move onto node 3, which has no hugepages, succeeded: $(cat nofit.out)"
fi
assert_eq "the refusal is one line" 1 "$(wc -l <nofit.err)"
log "refused: $(cat nofit.err)"
assert_eq "after the refusal: the claim stays on node $to" "[{\"node\":$to,\"page-kib\":2048,\"pages\":32}]" "$(huge_of "$pid")"
assert_eq "after the refusal: the guest's hugepages stay on node $to" 32 "$(huge_on "$pid" "$to")"
lab_cleanup
exit 0
