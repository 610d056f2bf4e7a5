# In-lab test (shape ccx: node 0 has cores 0-3). A one-to-one VM with a
# hot-pluggable vCPU (-smp 1,maxcpus=2): its emulator thread and QEMU's
# other threads run on the node's CPUs off the boot vCPU's core; a vCPU
# plugged by the caller takes a free core, which is then the VM's own as the
# boot vCPU's is: those threads leave it, and have it back once the vCPU is
# unplugged (the firmware ejects a CPU QEMU marks for removal, as a guest's
# ACPI code does: tests/orchestrators/test-hotplug.c). Moved to the other
# node with the plugged vCPU, each vCPU has a core of its own there, claimed
# (the node it left holds none), QEMU's other threads off both; the plugged
# core is given back once the vCPU is unplugged.
. "$QP_LAB_SRC/lib.sh"

expect_nodes 2
qp_require --mode=one-to-one
python3 - "$QP_LAB_SCRATCH/fw.bin" <<'PY'
import sys
code = bytes([0xFA, 0xBA, 0xD8, 0x0C, 0x30, 0xC0, 0xEE, 0xB9, 0x01, 0x00, 0xBA,
              0xD8, 0x0C, 0x66, 0x31, 0xC0, 0x89, 0xC8, 0x66, 0xEF, 0xBA, 0xDC,
              0x0C, 0xEC, 0xA8, 0x04, 0x74, 0x03, 0xB0, 0x08, 0xEE, 0x41, 0x83,
              0xF9, 0x04, 0x72, 0xE5, 0xF3, 0x90, 0xEB, 0xDE])
image = bytearray(65536)
image[0xE000:0xE000 + len(code)] = code
image[0xFFF0:0xFFF5] = bytes([0xEA, 0x00, 0xE0, 0x00, 0xF0])
open(sys.argv[1], "wb").write(image)
PY

# qmp SOCKET plug|unplug: a vCPU plugged into the free slot, or vCPU 1
# unplugged, on the caller's own monitor.
qmp() {
  python3 - "$@" <<'PY'
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(30)
s.connect(sys.argv[1])
f = s.makefile("rw")
f.readline()
def cmd(c):
    f.write(json.dumps(c) + "\n")
    f.flush()
    while True:
        r = json.loads(f.readline())
        if "event" not in r:
            if "error" in r:
                sys.exit("%s: %s" % (c["execute"], r["error"]["desc"]))
            return r["return"]
cmd({"execute": "qmp_capabilities"})
if sys.argv[2] == "plug":
    free = [x for x in cmd({"execute": "query-hotpluggable-cpus"})
            if "qom-path" not in x][0]
    args = dict(free["props"], driver=free["type"], id="cpu1")
    cmd({"execute": "device_add", "arguments": args})
else:
    cmd({"execute": "device_del", "arguments": {"id": "cpu1"}})
PY
}

# others PID: the CPU lists of QEMU's threads other than its vCPUs, one
# line each, sorted and unique.
others() {
  for _t in /proc/"$1"/task/*; do
    read -r _c <"$_t/comm" 2>/dev/null || continue
    case $_c in "CPU "*/*) continue ;; esac
    cpus_allowed_of "${_t##*/}"
  done | sort -u
}

sock=$QP_LAB_SCRATCH/qmp.sock
# shellcheck disable=SC2046
pid=$(qp_launch hp --mode=one-to-one -- "$QP_QEMU" $(vm_args hp "$QP_LAB_SCRATCH/fw.bin") \
  -smp 1,maxcpus=2 -m 64 -qmp "unix:$sock,server=on,wait=off") ||
  fail "qemu-pin did not launch the VM: $pid"
c0=$(vcpu_threads "$pid" | while read -r _i _tid; do cpus_allowed_of "$_tid"; done)
assert_eq "boot vCPU on one CPU" 1 "$(list_expand "$c0" | wc -w)"
before=$(others "$pid")
assert_eq "QEMU's other threads on one set" 1 "$(echo "$before" | wc -l)"
case ",$(list_expand "$before" | tr ' ' ',')," in
  *",$c0,"*) fail "QEMU's other threads ($before) share the boot vCPU's CPU $c0" ;;
esac
log "ok: vCPU 0 on CPU $c0, QEMU's other threads on $before"

qmp "$sock" plug || fail "device_add of a vCPU failed"
one_cpu() {
  c1=$(vcpu_threads "$pid" | while read -r _i _tid; do
    [ "$_i" = 1 ] && cpus_allowed_of "$_tid"; done)
  [ -n "$c1" ] && [ "$(list_expand "$c1" | wc -w)" = 1 ]
}
wait_for 30 one_cpu || fail "plugged vCPU 1 is not on one CPU: '$c1'"
core=$(cpu_siblings "$c1")
want=$(for c in $(list_expand "$before"); do
  case " $(list_expand "$core") " in *" $c "*) ;; *) echo "$c" ;; esac
done)
want=$(list_canon "$want")
off_core() { [ "$(others "$pid")" = "$want" ]; }
wait_for 30 off_core ||
  fail "vCPU 1 got core $core, but QEMU's other threads are on $(others "$pid" | tr '\n' ' '), not $want"
log "ok: vCPU 1 on CPU $c1: QEMU's other threads left its core, now on $want"
placed=$(jq -r '.vms[0]["caller-placed"]' "$(status_json)")
assert_eq "VM placed by its caller" false "$placed"

# Moved to the other node with its plugged vCPU: each vCPU gets a core of
# its own there, the claim holds both cores (and no core of the node it
# left), and QEMU's other threads run on that node off both.
from=$(cpu_node "$c0")
to=$((1 - from))
"$QP_BINARY" move hp --to-nodes="$to" >move.out 2>move.err ||
  fail "the move of the VM with a plugged vCPU failed: $(cat move.err)"
[ -s move.err ] && fail "a successful move printed on stderr: $(cat move.err)"
vcpu_cpus() { vcpu_threads "$pid" | while read -r _i _tid; do echo "$_i $(cpus_allowed_of "$_tid")"; done | sort -n; }
moved() {
  _v=$(vcpu_cpus)
  m0=$(echo "$_v" | awk '$1 == 0 { print $2 }') m1=$(echo "$_v" | awk '$1 == 1 { print $2 }')
  [ "$(list_expand "$m0" | wc -w)" = 1 ] && [ "$(list_expand "$m1" | wc -w)" = 1 ] &&
    [ "$(cpu_node "$m0")" = "$to" ] && [ "$(cpu_node "$m1")" = "$to" ]
}
wait_for 30 moved || fail "after the move the vCPUs are on '$(vcpu_cpus | tr '\n' ' ')', not one CPU each of node $to"
k0=$(cpu_siblings "$m0") k1=$(cpu_siblings "$m1")
[ "$k0" != "$k1" ] || fail "after the move vCPUs 0 and 1 share core $k0"
assert_eq "after the move: the claim holds both vCPUs' cores" "$(list_canon "$k0 $k1")" \
  "$(jq -r '.vms[0]["dedicated-cpus"]' "$(status_json)")"
moved_off=$(for c in $(list_expand "$(node_cpus "$to")"); do
  case " $(list_expand "$k0") $(list_expand "$k1") " in *" $c "*) ;; *) echo "$c" ;; esac
done)
moved_off=$(list_canon "$moved_off")
off_both() { [ "$(others "$pid")" = "$moved_off" ]; }
wait_for 30 off_both ||
  fail "after the move QEMU's other threads are on $(others "$pid" | tr '\n' ' '), not $moved_off"
log "ok: moved to node $to: vCPU 0 on CPU $m0, vCPU 1 on CPU $m1, QEMU's other threads on $moved_off"
before=$(for c in $(list_expand "$(node_cpus "$to")"); do
  case " $(list_expand "$k0") " in *" $c "*) ;; *) echo "$c" ;; esac
done)
before=$(list_canon "$before")

qmp "$sock" unplug || fail "device_del of vCPU 1 failed"
back() { [ "$(others "$pid")" = "$before" ]; }
wait_for 60 back ||
  fail "vCPU 1 unplugged, but QEMU's other threads are on $(others "$pid" | tr '\n' ' '), not $before"
log "ok: vCPU 1 unplugged: QEMU's other threads on $before"
released() { [ "$(jq -r '.vms[0]["dedicated-cpus"]' "$(status_json)")" = "$k0" ]; }
wait_for 30 released || fail "vCPU 1 unplugged, but the claim holds $(jq -r '.vms[0]["dedicated-cpus"]' "$(status_json)"), not $k0"
placed=$(jq -r '.vms[0]["caller-placed"]' "$(status_json)")
assert_eq "VM placed by its caller" false "$placed"
lab_cleanup
exit 0
