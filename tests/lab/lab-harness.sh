# In-lab test (shape 4n): the lab's own checks work on a real multi-node host,
# without qemu-pin. A plain QEMU gets two guest nodes bound by hand to host
# nodes 1 and 3 and its vCPUs pinned with taskset; check_vm must accept a plan
# that says so and object when a vCPU or a memory binding is elsewhere.
. "$QP_LAB_SRC/lib.sh"

expect_nodes 4
write_fw_halt fw-halt.bin
write_fw_exit fw-exit.bin
assert_eq "firmware size" 65536 "$(wc -c <fw-halt.bin)"
assert_eq "halt firmware reset vector" "fa f4 eb fd" \
  "$(od -An -tx1 -j 65520 -N 4 fw-halt.bin | tr -s ' ' | sed 's/^ //')"

# The exit firmware: QEMU exits at once with status 1.
rc=0
timeout 120 "$QP_QEMU" -machine q35 -accel tcg -display none -nodefaults -bios fw-exit.bin \
  -device isa-debug-exit,iobase=0xf4,iosize=4 || rc=$?
assert_eq "exit status of a guest running the exit firmware" 1 "$rc"

# shellcheck disable=SC2046
"$QP_QEMU" $(vm_args harness fw-halt.bin) -smp 4 -m 320 \
  -object memory-backend-ram,id=g0,size=128M,host-nodes=1,policy=bind \
  -object memory-backend-ram,id=g1,size=192M,host-nodes=3,policy=bind \
  -numa node,nodeid=0,cpus=0-1,memdev=g0 -numa node,nodeid=1,cpus=2-3,memdev=g1 \
  -daemonize -pidfile harness.pid || fail "plain QEMU did not start"
pid=$(cat harness.pid)
QP_LAB_PIDS=$pid
wait_for 60 sh -c "[ \$(ls /proc/$pid/task | wc -l) -ge 5 ]" || fail "QEMU $pid shows no vCPU threads"
assert_eq "vCPU threads" 4 "$(vcpu_threads "$pid" | wc -l)"
vcpu_threads "$pid" | while read -r i tid; do
  if [ "$i" -lt 2 ]; then cpus=$(node_cpus 1); else cpus=$(node_cpus 3); fi
  taskset -pc "$cpus" "$tid" >/dev/null
done
numa_maps_bind_nodes "$pid" | sed 's/^/lab: numa_maps: /'

cat >plan.json <<EOF
{ "mode": "numa",
  "vcpus": ["$(node_cpus 1)", "$(node_cpus 1)", "$(node_cpus 3)", "$(node_cpus 3)"],
  "memory": [ { "guest-node": 0, "host-nodes": "1", "policy": "bind", "size-mib": 128 },
              { "guest-node": 1, "host-nodes": "3", "policy": "bind", "size-mib": 192 } ] }
EOF
check_vm_or_fail "hand-pinned QEMU against a matching plan" plan.json "$pid"
check_detects_breakage plan.json "$pid"
lab_cleanup
wait_for 30 sh -c "! kill -0 $pid" || fail "QEMU $pid did not exit on SIGTERM"
exit 0
