#!/bin/sh
# `qemu-pin move` on this host, with real QEMU (paused guests, -S, that stay
# up): what it refuses, each in one line with nothing changed (an unknown
# VM, nodes the host does not have, a VM whose vCPU, emulator thread or
# iothread the caller pinned, a destination without room), the record's
# "caller-placed" its keeper writes while the caller pins one of them and
# the refusal's code, and a move that succeeds (to the node the VM is on:
# the only one here), which prints on stdout only and stamps the record's
# "moved-at". Moves between nodes: tests/lab/lab-move.sh.
set -u
. "$QP_SOURCE_ROOT/tests/common/tap-vm.sh"

# launch NAME [QEMU-PIN OPTIONS] -- QEMU ARGS: a daemonized VM; its pid
# (called in $(...), a subshell: cleanup kills every VM by its pid file).
launch() {
  name=$1
  shift
  "$QP_BINARY" --state-dir="$SD" "$@" -daemonize -pidfile "$T/$name.pid" \
    >"$T/$name.out" 2>&1 || { cat "$T/$name.out" >&2; return 1; }
  cat "$T/$name.pid"
}
vm() { echo "-name $1,debug-threads=on -machine q35 -accel tcg -display none -nodefaults -S -smp 2"; }
record() { cat "$SD"/*.json | jq -c --argjson p "$1" 'select(.["qemu-pid"] == $p)'; }
# What a move changes of a record: its memory and when it last moved.
placed() { record "$1" | jq -c '[.["memory-mib"], .["moved-at"]]'; }
move() { "$QP_BINARY" move --state-dir="$SD" "$@" >"$T/move.out" 2>"$T/move.err"; }

# One line on stderr, exit status WANT, record of PID unchanged (BEFORE).
refused() { # NAME WANT_RC RC PID BEFORE
  check "$1: exit status" "$2" "$3"
  check "$1: one line on stderr" 1 "$(wc -l <"$T/move.err")"
  check "$1: nothing on stdout" 0 "$(wc -c <"$T/move.out")"
  check "$1: the record's memory and moved-at are unchanged" "$5" "$(placed "$4")"
}

# shellcheck disable=SC2046
a=$(launch a --mode=balanced -- "$QEMU" $(vm a) -m 64 -object iothread,id=io0) || { echo "Bail out! cannot launch VM a"; exit 1; }
before=$(placed "$a")

move nosuch --to-nodes=0
refused "unknown VM" 2 $? "$a" "$before"
grep -q "no VM 'nosuch' in the ledger" "$T/move.err" && ok "unknown VM: named" || not_ok "unknown VM: $(cat "$T/move.err")"

move a --to-nodes=7
refused "node the host lacks" 2 $? "$a" "$before"
grep -q "to-nodes=7 names nodes this host does not have" "$T/move.err" && ok "node the host lacks: named" || not_ok "node: $(cat "$T/move.err")"

move a --to-nodes=x
refused "a nodelist that is none" 2 $? "$a" "$before"

# An option without its value is said so, not called unknown; -vv is
# -v twice, as for the other commands; options before the command are
# refused as such, before anything is planned (outside check, stop 43).
move a --to-nodes=0 --rate
refused "--rate without a value" 2 $? "$a" "$before"
grep -q "move: option '--rate' needs a value: MiB per second" "$T/move.err" && ok "--rate without a value: named" || not_ok "--rate: $(cat "$T/move.err")"
"$QP_BINARY" --state-dir="$SD" -v move a --to-nodes=0 >"$T/move.out" 2>"$T/move.err"
refused "options before the command" 2 $? "$a" "$before"
grep -q "'move' is a command of qemu-pin's, given after options: expected qemu-pin move \[OPTIONS\]" "$T/move.err" && ok "options before the command: named" || not_ok "options first: $(cat "$T/move.err")"

# A move that fits: to where the VM is, by pid (with -vv).
move "$a" --to-nodes=0 -vv
check "move: exit status" 0 $?
check "move: nothing on stderr" "" "$(cat "$T/move.err")"
grep -q "^qemu-pin: moved VM a " "$T/move.out" && ok "move: said on stdout" || not_ok "move: stdout '$(cat "$T/move.out")'"
# Onto the nodes it was on: no word of a binding left on "old nodes".
grep -q "from nodes 0 to 0: .*; the binding stays, on the same nodes$" "$T/move.out" &&
  ok "move onto its own node: the binding said to stay" || not_ok "move: stdout '$(cat "$T/move.out")'"
check "move: the record claims node 0" '{"0":64}' "$(record "$a" | jq -c '.["memory-mib"]')"
# Placed again where it was is no move: no moved-at, so no cooldown keeps
# the VM out of a rebalance (outside check, stop 43: it was stamped).
check "move onto its own node: moved-at not stamped" 0 "$(record "$a" | jq '.["moved-at"] // 0')"
before=$(placed "$a")

# The caller pins vCPU 0 itself (as virsh vcpupin does): never moved. Its
# keeper sees it at its next look (every 5 s) and marks its record
# "caller-placed", which rebalance reads; the mark goes when the caller's
# pinning does.
flag() { record "$1" | jq -c '.["caller-placed"] // false'; }
# wait_flag PID WANT: up to 12 s for the record's flag to be WANT.
wait_flag() {
  i=0
  while [ "$(flag "$1")" != "$2" ] && [ $i -lt 24 ]; do sleep 0.5; i=$((i + 1)); done
  flag "$1"
}
check "not pinned: the record is not caller-placed" false "$(flag "$a")"
tid=$(grep -l "^CPU 0/" /proc/"$a"/task/*/comm | head -n 1 | cut -d/ -f5)
planned=$(grep Cpus_allowed_list /proc/"$tid"/status | awk '{print $2}')
taskset -pc 0 "$tid" >/dev/null || not_ok "taskset"
check "caller-pinned: the keeper marks its record caller-placed" true "$(wait_flag "$a" true)"
move a --to-nodes=0
refused "caller-pinned" 1 $? "$a" "$before"
grep -q "the caller pinned vCPU 0 itself" "$T/move.err" && ok "caller-pinned: named" || not_ok "caller-pinned: $(cat "$T/move.err")"
check "caller-pinned: vCPU 0 stays where the caller put it" 0 "$(grep Cpus_allowed_list /proc/"$tid"/status | awk '{print $2}')"
# The keeper's answer carries the refusal's stable code, not only words.
answer=$(printf '{"to-nodes": "0", "rate-mib": 0}\n' |
  python3 -c 'import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect("\0qemu-pin-keeper/" + sys.argv[1])
s.sendall(sys.stdin.buffer.read()); s.shutdown(socket.SHUT_WR)
print(s.makefile().read().strip())' "$(record "$a" | jq '.["keeper-pid"]')")
check "caller-pinned: the keeper's answer has code caller-placed" '"caller-placed"' "$(echo "$answer" | jq -c '.code')"
# rebalance reads the mark: it lists the VM as kept, the caller's.
"$QP_BINARY" rebalance --dry-run --json --state-dir="$SD" >"$T/rb.json" 2>"$T/rb.err"
check "caller-pinned: rebalance keeps it as the caller's" \
  "$(record "$a" | jq -r '.id'): its placement is the caller's own" \
  "$(jq -r --arg id "$(record "$a" | jq -r '.id')" '.kept[] | select(startswith($id))' "$T/rb.json")"
# The caller gives vCPU 0 back to the plan's CPUs: the mark goes.
taskset -pc "$planned" "$tid" >/dev/null || not_ok "taskset back"
check "unpinned: the record is no longer caller-placed" false "$(wait_flag "$a" false)"
# The same for the emulator (QEMU's main thread; libvirt's <emulatorpin>)
# and an iothread (<iothreadpin>): the caller placed the VM, which is then
# never moved either.
# pinned_thread LABEL TID NAME: the caller pins thread TID of VM a to CPU 0,
# then gives it back its CPUs; a move in between is refused naming NAME.
pinned_thread() {
  had=$(grep Cpus_allowed_list /proc/"$2"/status | awk '{print $2}')
  taskset -pc 0 "$2" >/dev/null || not_ok "taskset $1"
  check "$1 pinned: the keeper marks its record caller-placed" true "$(wait_flag "$a" true)"
  move a --to-nodes=0
  refused "$1 pinned" 1 $? "$a" "$before"
  grep -q "the caller pinned $3 itself" "$T/move.err" && ok "$1 pinned: named" ||
    not_ok "$1 pinned: $(cat "$T/move.err")"
  taskset -pc "$had" "$2" >/dev/null || not_ok "taskset $1 back"
  check "$1 unpinned: the record is no longer caller-placed" false "$(wait_flag "$a" false)"
}
pinned_thread emulator "$a" "the emulator thread"
pinned_thread iothread "$(grep -l "^IO io0" /proc/"$a"/task/*/comm | head -n 1 | cut -d/ -f5)" "iothread io0"

# No room: VM b was started with a host reserve that leaves 576 MiB beside
# it; VM c then claims 1536 MiB (not resident: -S, no prealloc). Moving b
# needs its 64 MiB again on node 0 with c's claim counted: refused.
# The reserve works on the node's total less its claims (what the kernel
# can give now only makes the room smaller), so it is sized from that rule.
room=$("$QP_BINARY" status --json --state-dir="$SD" | jq '.nodes[0]["memory-mib"] | .total - .["hugepage-pools"] - .claimed')
reserve=$((room - 64 - 576))
# shellcheck disable=SC2046
b=$(launch b --mode=balanced --reserve-mib="$reserve" -- "$QEMU" $(vm b) -m 64) || not_ok "launch b"
# shellcheck disable=SC2046
c=$(launch c --mode=balanced -- "$QEMU" $(vm c) -m 1536) || not_ok "launch c"
before=$(placed "$b")
move b --to-nodes=0
refused "no room" 1 $? "$b" "$before"
grep -q "move refused" "$T/move.err" && ok "no room: named" || not_ok "no room: $(cat "$T/move.err")"
check "no room: c's claim is unchanged" '{"0":1536}' "$(record "$c" | jq -c '.["memory-mib"]')"
# The reserve b was started with is in its record, for `rebalance` to plan
# no move that its keeper refuses for want of room under it.
check "a VM started with --reserve-mib: its record's started-reserve-mib" "{\"0\":$reserve}" \
  "$(record "$b" | jq -c '.["started-reserve-mib"]')"

# The caller pins a vCPU while the pages move (a copy at --rate takes its
# time; here the keeper waits 3 s at that point): the move stops, the
# caller's pinning stays, and the record claims where the pages are
# (check-move-stops.sh checks that on a two-node host)
# (outside check, stop 43: the new plan undid the caller's pinning).
# shellcheck disable=SC2046
z=$(QEMU_PIN_TEST_MOVE_PAUSE_MS=3000 launch z --mode=balanced -- "$QEMU" $(vm z) -m 64) || not_ok "launch z"
"$QP_BINARY" move --state-dir="$SD" "$z" --to-nodes=0 >"$T/mz.out" 2>"$T/mz.err" &
mover=$!
sleep 1
ztid=$(grep -l "^CPU 0/" /proc/"$z"/task/*/comm | head -n 1 | cut -d/ -f5)
taskset -pc 0 "$ztid" >/dev/null || not_ok "taskset z"
wait "$mover"
check "pinned while moving: exit status" 1 $?
grep -q "move stopped: the caller pinned vCPU 0 itself while the pages moved to nodes 0" "$T/mz.err" &&
  ok "pinned while moving: said" || not_ok "pinned while moving: $(cat "$T/mz.err")"
sleep 6 # the keeper's next looks
check "pinned while moving: vCPU 0 stays on the caller's CPU" 0 "$(grep Cpus_allowed_list /proc/"$ztid"/status | awk '{print $2}')"
check "pinned while moving: no moved-at" 0 "$(record "$z" | jq '.["moved-at"] // 0')"

# A word that names two VMs (here VM x's -name is VM a's pid): refused,
# naming both, nothing moved (outside check, stop 43: the first record
# that matched was moved, here the wrong VM).
before=$(placed "$a")
# shellcheck disable=SC2046
x=$(launch x --mode=balanced -- "$QEMU" $(vm "$a") -m 64) || not_ok "launch x"
xid=$(record "$x" | jq -r '.id')
move "$a" --to-nodes=0
refused "a pid that is another VM's name" 2 $? "$a" "$before"
grep -q "move: '$a' names 2 VMs: .*(its QEMU pid).*$xid (its -name)\|move: '$a' names 2 VMs: $xid (its -name).*(its QEMU pid)" "$T/move.err" &&
  ok "two VMs: both named" || not_ok "two VMs: $(cat "$T/move.err")"
check "two VMs: x's record unchanged" 0 "$(record "$x" | jq '.["moved-at"] // 0')"
move "$xid" --to-nodes=0
check "two VMs: by record id, x moves" 0 $?

# VM x's keeper is gone and another process holds its control socket's
# name (anyone may bind it then): its answer is not taken for the
# keeper's (outside check, stop 43: a forged "moved" was printed).
xk=$(record "$x" | jq '.["keeper-pid"]')
kill -9 "$xk"
i=0
while [ -d /proc/"$xk" ] && [ "$(cut -d' ' -f3 /proc/"$xk"/stat 2>/dev/null)" != Z ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
python3 -c 'import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\0qemu-pin-keeper/" + sys.argv[1]); s.listen(1)
sys.stdout.write("bound\n"); sys.stdout.flush()
c, _ = s.accept()
c.sendall(b"{\"vm\": \"forged\", \"from\": \"0\", \"to\": \"0\"}\n")
c.close()' "$xk" >"$T/fake.out" 2>&1 &
fake=$!
i=0
while [ "$(cat "$T/fake.out")" != bound ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
before=$(placed "$x")
move "$xid" --to-nodes=0
refused "a socket held by another process" 1 $? "$x" "$before"
grep -q "the VM's keeper (pid $xk) is not running, and pid $fake holds its control socket" "$T/move.err" &&
  ok "impostor: named" || not_ok "impostor: $(cat "$T/move.err")"
kill "$fake" 2>/dev/null

# rebalance keeps what no keeper would move: a VM whose keeper is gone, and
# one whose memory can be plugged (outside check, stop 43: it planned
# their moves, the keepers refused, and the rebalance failed whole).
# shellcheck disable=SC2046
y=$(launch y --mode=balanced -- "$QEMU" $(vm y) -m 64,slots=1,maxmem=512M) || not_ok "launch y"
"$QP_BINARY" rebalance --dry-run --json --state-dir="$SD" >"$T/rb.json" 2>"$T/rb.err"
check "rebalance: exit status" 0 $?
check "rebalance: keeps the VM without a keeper" "$xid: its keeper is not running" \
  "$(jq -r --arg id "$xid" '.kept[] | select(startswith($id))' "$T/rb.json")"
# refused_saying LABEL NAME PID PATTERN: a move of VM NAME (PID) refused
# (exit 1), changing nothing, with a line matching PATTERN.
refused_saying() {
  _before=$(placed "$3")
  move "$2" --to-nodes=0
  refused "$1" 1 $? "$3" "$_before"
  grep -q "$4" "$T/move.err" && ok "$1: the refusal says why" || not_ok "$1: $(cat "$T/move.err")"
}
# kept_unless_binding_moves WHAT NAME PID KEPT REFUSAL: a VM whose memory
# can change later (WHAT: "maxmem", "virtio-mem") moves only where its
# binding moves with its pages (a cgroup v2 cpuset qemu-pin may make: root,
# QEMU in the root cgroup), so that what it gets later lands on its new
# nodes (tests/lab/lab-move.sh moves both kinds); elsewhere rebalance keeps
# it saying KEPT, and a move of it is refused saying REFUSAL (a pattern).
kept_unless_binding_moves() {
  "$QP_BINARY" rebalance --dry-run --json --state-dir="$SD" >"$T/rb.json" 2>"$T/rb.err"
  _id=$(record "$3" | jq -r '.id')
  _kept=$(jq -r --arg id "$_id" '.kept[] | select(startswith($id))' "$T/rb.json")
  if [ "$(id -u)" = 0 ] && grep -qw cpuset /sys/fs/cgroup/cgroup.controllers 2>/dev/null &&
    grep -qx '0::/' /proc/"$3"/cgroup; then
    check "rebalance: a VM with $1 whose binding can move is not kept" "" "$_kept"
  else
    check "rebalance: keeps the VM with $1 whose binding cannot move" "$_id: $4" "$_kept"
    refused_saying "$1, binding that cannot move" "$2" "$3" "$5"
  fi
}
kept_unless_binding_moves maxmem y "$y" \
  "its memory can be plugged (-m maxmem) and only its pages could move" \
  "move refused: the VM's memory can be plugged (-m maxmem) and only its pages could move (.*): memory plugged later would land on the nodes it leaves"
# A virtio-mem device, whose size changes, likewise.
# shellcheck disable=SC2046
v=$(launch v --mode=balanced -- "$QEMU" $(vm v) -m 64,maxmem=1G -object memory-backend-ram,id=vm0,size=128M -device virtio-mem-pci,id=vmem0,memdev=vm0) || not_ok "launch v"
kept_unless_binding_moves virtio-mem v "$v" \
  "its memory can be resized (virtio-mem) and only its pages could move" \
  "move refused: the VM's memory can be resized (virtio-mem device vmem0) and only its pages could move (.*): what it grows by later would land on the nodes it leaves"
# Memory given after the start (object-add on the caller's monitor) moves
# with the VM: the move plans it with the rest, and the record, cut to the
# destination, still holds it (here the node the VM is on). A backend the
# caller bound to host nodes of its own choosing is the caller's placement:
# never moved.
. "$QP_SOURCE_ROOT/tests/common/qmp-cmd.sh"
# wait_memory PID WANT: up to 15 s for the record's memory to be WANT (the
# keeper looks at memory every 10 s).
wait_memory() {
  _i=0
  while [ "$(record "$1" | jq -c '.["memory-mib"]')" != "$2" ] && [ $_i -lt 75 ]; do
    sleep 0.2
    _i=$((_i + 1))
  done
}
# shellcheck disable=SC2046
g=$(launch g --mode=balanced -- "$QEMU" $(vm g) -m 64 -qmp "unix:$T/g.qmp,server=on,wait=off") || not_ok "launch g"
qmp_cmd "$T/g.qmp" object-add '{"qom-type": "memory-backend-ram", "id": "ext0", "size": 33554432, "prealloc": true}' ||
  not_ok "object-add on VM g"
wait_memory "$g" '{"0":96}'
check "the backend added is claimed" '{"0":96}' "$(record "$g" | jq -c '.["memory-mib"]')"
move g --to-nodes=0
check "a VM given memory after its start: moved" 0 $?
check "a VM given memory after its start: nothing on stderr" 0 "$(wc -c <"$T/move.err")"
check "a VM given memory after its start: the record still holds it" '{"0":96}' "$(record "$g" | jq -c '.["memory-mib"]')"
qmp_cmd "$T/g.qmp" object-add '{"qom-type": "memory-backend-ram", "id": "ext1", "size": 16777216, "prealloc": true, "host-nodes": [0], "policy": "bind"}' ||
  not_ok "object-add of a bound backend on VM g"
wait_memory "$g" '{"0":112}'
check "the bound backend added is claimed" '{"0":112}' "$(record "$g" | jq -c '.["memory-mib"]')"
_before=$(placed "$g")
move g --to-nodes=0
refused "a backend bound by the caller" 1 $? "$g" "$_before"
grep -q "move refused: the caller chose the host nodes of memory backend ext1; qemu-pin never moves what the caller placed" "$T/move.err" &&
  ok "a backend bound by the caller: the refusal says why" || not_ok "bound backend: $(cat "$T/move.err")"

# Where a VM was started inside is in its record, for `rebalance` to plan
# no move out of it (its keeper refuses one): none for a VM started
# anywhere, the CPUs a caller's taskset left it.
check "a VM started anywhere, without a reserve: no started-nodes, started-cpus or started-reserve-mib" '[null,null,null]' \
  "$(record "$a" | jq -c '[.["started-nodes"], .["started-cpus"], .["started-reserve-mib"]]')"
h=$(taskset -c 0 "$QP_BINARY" --state-dir="$SD" --mode=balanced -- "$QEMU" -name h,debug-threads=on \
  -machine q35 -accel tcg -display none -nodefaults -S -smp 1 -m 64 \
  -daemonize -pidfile "$T/h.pid" >"$T/h.out" 2>&1 && cat "$T/h.pid") || not_ok "launch h under taskset -c 0: $(cat "$T/h.out")"
check "a VM started under taskset -c 0: its record's started-cpus" '"0"' \
  "$(record "$h" | jq -c '.["started-cpus"]')"
echo "1..$n"
exit $failed
