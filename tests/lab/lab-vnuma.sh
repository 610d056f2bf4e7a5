# In-lab test (shape 2s2n: 2 sockets x 2 nodes x 2 CPUs, SLIT 10/12/32):
# --vnuma=auto. A one-to-one guest of 4 vCPUs without -numa needs two host
# nodes; qemu-pin gives it a guest topology that mirrors them: one guest node
# per host node, holding the vCPUs pinned there and memory bound there, and
# the host's distance between them. QEMU accepts that command line and runs
# the guest as planned.
. "$QP_LAB_SRC/lib.sh"

expect_nodes 4
qp_require --mode=one-to-one
write_fw_halt fw.bin

# shellcheck disable=SC2046
set -- "$QP_QEMU" $(vm_args vn fw.bin) -smp 4 -m 256
qp_plan --mode=one-to-one --vnuma=auto -- "$@" >plan.json || fail "qemu-pin plan failed: $(cat plan.json)"
assert_eq "plan mode" one-to-one "$(plan_mode plan.json)"
assert_eq "plan: guest nodes" 2 "$(jq '.vnuma.nodes | length' plan.json)"
h0=$(jq -r '.vnuma.nodes[0]["host-node"]' plan.json)
h1=$(jq -r '.vnuma.nodes[1]["host-node"]' plan.json)
[ "$h0" != "$h1" ] || fail "plan puts both guest nodes on host node $h0"
host_dist=$(awk -v k="$h1" '{ print $(k + 1) }' "/sys/devices/system/node/node$h0/distance")
assert_eq "plan: the two host nodes share a socket (distance 12)" 12 "$host_dist"
assert_eq "plan: guest distance 0-1 is the host's $h0-$h1" "$host_dist" \
  "$(jq -r '.vnuma.distances[0][1]' plan.json)"

pid=$(qp_launch vn --mode=one-to-one --vnuma=auto -- "$@") || fail "qemu-pin did not launch the VM: $pid"
check_vm_or_fail "one-to-one VM with --vnuma=auto" plan.json "$pid"
cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline")
for g in 0 1; do
  host=$(jq -r ".vnuma.nodes[$g][\"host-node\"]" plan.json)
  vcpus=$(jq -r ".vnuma.nodes[$g].vcpus" plan.json)
  size=$(jq -r ".vnuma.nodes[$g][\"size-mib\"]" plan.json)
  case "$cmd" in
    *"-numa node,nodeid=$g,cpus=$vcpus,memdev=qemu-pin-vnode$g "*) ;;
    *) fail "QEMU's command line has no '-numa node,nodeid=$g,cpus=$vcpus,memdev=qemu-pin-vnode$g': $cmd" ;;
  esac
  for v in $(list_expand "$vcpus"); do
    cpu=$(jq -r ".vcpus[$v].cpus" plan.json)
    assert_eq "vCPU $v of guest node $g: host node of its CPU $cpu" "$host" "$(cpu_node "$cpu")"
  done
  numa_maps_bind_nodes "$pid" | grep -qx "$size bind:$host" ||
    fail "guest node $g: no $size MiB mapping bound to node $host; numa_maps has: $(numa_maps_bind_nodes "$pid" | tr '\n' ';')"
  log "ok: guest node $g: vCPUs $vcpus on host node $host, $size MiB bound there"
done
case "$cmd" in
  *"-numa dist,src=0,dst=1,val=$host_dist "*) ;;
  *) fail "QEMU's command line has no '-numa dist,src=0,dst=1,val=$host_dist': $cmd" ;;
esac
log "ok: guest distance 0-1 is $host_dist, as between host nodes $h0 and $h1"
lab_cleanup

# Hot-pluggable vCPUs (maxcpus above cpus): the guest topology holds all 6
# possible vCPUs, or QEMU refuses it ("Invalid CPU topology").
# shellcheck disable=SC2046
set -- "$QP_QEMU" $(vm_args vh fw.bin) -smp 4,maxcpus=6 -m 256
qp_plan --mode=one-to-one --vnuma=auto -- "$@" >plan2.json || fail "qemu-pin plan failed: $(cat plan2.json)"
assert_eq "plan: sockets * cores * threads" 6 \
  "$(jq '.vnuma.sockets * .vnuma.cores * .vnuma.threads' plan2.json)"
assert_eq "plan: guest nodes" 2 "$(jq '.vnuma.nodes | length' plan2.json)"
all=$(list_canon "$(jq -r '[.vnuma.nodes[].vcpus] | join(",")' plan2.json)")
assert_eq "plan: the guest nodes hold every possible vCPU" 0-5 "$all"
pid=$(qp_launch vh --mode=one-to-one --vnuma=auto -- "$@") || fail "qemu-pin did not launch the VM with maxcpus=6: $pid"
cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline")
smp=$(jq -r '"cpus=4,maxcpus=6,sockets=\(.vnuma.sockets),dies=\(.vnuma.dies),cores=\(.vnuma.cores),threads=\(.vnuma.threads)"' plan2.json)
case "$cmd" in
  *"-smp $smp "*) ;;
  *) fail "QEMU's command line has no '-smp $smp': $cmd" ;;
esac
vcpu_threads "$pid" >vh.threads
assert_eq "vCPU threads at boot" 4 "$(wc -l <vh.threads)"
while read -r v tid; do
  assert_eq "boot vCPU $v: its CPUs" "$(jq -r ".vcpus[$v].cpus" plan2.json)" \
    "$(cpus_allowed_of "$tid")"
done <vh.threads
log "ok: QEMU runs with -smp $smp and guest nodes $(jq -c '[.vnuma.nodes[].vcpus]' plan2.json)"
lab_cleanup
exit 0
