# Shared helpers for scripts that run inside the NUMA lab (sourced, POSIX sh).
# The lab's init runs the script in this machine's userland (read-only), with
# a writable scratch directory as the working directory ($QP_LAB_SCRATCH).
#
#   . "$QP_LAB_SRC/lib.sh"
#
# A failing helper calls fail, which records the reason (the lab's verdict
# line shows it) and exits 1. skip exits 77 with a reason (verdict SKIP).

QP_LAB_SCRATCH=${QP_LAB_SCRATCH:-$(pwd)}
QP_LAB_REASON=${QP_LAB_REASON:-$QP_LAB_SCRATCH/.reason}
QP_QEMU=${QP_QEMU:-qemu-system-x86_64}
QP_LAB_PIDS=   # QEMU processes started by qp_launch, killed by lab_cleanup
# qemu-pin runs with these scripts' settings only: not the host's
# /etc/qemu-pin/qemu-pin.conf (which the lab sees over 9p), not the
# caller's QEMU_PIN_*. (This folder is QP_LAB_SRC inside the lab; the
# install tests have QP_SOURCE_ROOT; tests/demo.sh runs in the source tree.)
. "${QP_LAB_SRC:-${QP_SOURCE_ROOT:-.}/tests/lab}/../common/hermetic.sh"
# Nested TCG is ~20 times slower than a real host, and a lab test may start 8
# QEMUs at once: qemu-pin's default 30 s QMP wait is too short there.
export QEMU_PIN_QMP_TIMEOUT=60000

log() { echo "lab: [$(cut -d" " -f1 /proc/uptime)] $*"; }

fail() {
  echo "$*" >"$QP_LAB_REASON"
  echo "lab: FAIL: $*"
  lab_cleanup
  exit 1
}

skip() {
  echo "SKIP $*" >"$QP_LAB_REASON"
  echo "lab: SKIP: $*"
  lab_cleanup
  exit 77
}

# assert_eq WHAT EXPECTED ACTUAL
assert_eq() {
  if [ "$2" != "$3" ]; then
    fail "$1: expected '$2', got '$3'"
  fi
  log "ok: $1 = '$3'"
}

# wait_for SECONDS COMMAND...: runs COMMAND every 0.2 s until it succeeds;
# returns 1 if it never did within SECONDS.
wait_for() {
  _wf_limit=$1
  shift
  _wf_end=$(($(date +%s) + _wf_limit))
  while ! "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$_wf_end" ] || return 1
    sleep 0.2
  done
  return 0
}

# ---- CPU and node lists ----------------------------------------------------

# list_expand LIST: "0-2,5" (or "0,1,2,5", or "0 1 2 5") -> "0 1 2 5", sorted.
list_expand() {
  echo "$1" | tr ', ' '\n\n' | awk -F- '
    /^[0-9]+(-[0-9]+)?$/ { hi = ($2 == "") ? $1 : $2; for (i = $1; i <= hi; i++) print i }' \
    | sort -n | uniq | tr '\n' ' ' | sed 's/ $//'
}

# list_canon LIST: the canonical list form, "0-2,5".
list_canon() {
  list_expand "$1" | tr ' ' '\n' | awk '
    NF { if (start == "") { start = $1; prev = $1; next }
         if ($1 == prev + 1) { prev = $1; next }
         out = out sep (start == prev ? start : start "-" prev); sep = ","; start = $1; prev = $1 }
    END { if (start != "") out = out sep (start == prev ? start : start "-" prev); print out }'
}

# list_outside A B: the first member of B that is not in A (empty if none).
list_outside() {
  awk -v a="$1" -v b="$2" '
    function expand(l, set,   n, x, i, j, r) {
      n = split(l, x, ",")
      for (i = 1; i <= n; i++) {
        if (split(x[i], r, "-") == 2) { for (j = r[1] + 0; j <= r[2] + 0; j++) set[j] = 1 }
        else if (x[i] != "") set[x[i] + 0] = 1
      }
    }
    BEGIN {
      expand(a, A); expand(b, B)
      for (k = 0; k <= 4096; k++) if ((k in B) && !(k in A)) { print k; exit }
    }'
}

# node_cpus N: the CPUs of host node N ("0-1").
# (A binary sysfs attribute: dash's byte-wise `read` gets nothing from it.)
node_cpus() { cat "/sys/devices/system/node/node$1/cpulist"; }

# cpu_node CPU: the node of CPU.
cpu_node() {
  for _d in /sys/devices/system/cpu/cpu"$1"/node*; do
    [ -e "$_d" ] && { _n=${_d##*/node}; echo "$_n"; return 0; }
  done
  return 1
}

# cpu_siblings CPU: CPU's SMT siblings ("0-1"), itself included.
cpu_siblings() { cat "/sys/devices/system/cpu/cpu$1/topology/thread_siblings_list"; }

# ---- Threads and memory of a running QEMU -----------------------------------

# Process creation is slow under TCG (0.1-1 s each), so the helpers below
# read /proc with shell builtins and do their sums in one awk each.

# cpus_allowed_of TID: Cpus_allowed_list of thread TID (the kernel's
# canonical form, "0-1,4").
cpus_allowed_of() {
  while read -r _k _v; do
    [ "$_k" = "Cpus_allowed_list:" ] && { echo "$_v"; return 0; }
  done <"/proc/$1/status"
  return 1
}

# vcpu_threads PID: "INDEX TID" per vCPU thread of QEMU PID, in /proc order.
# Needs -name NAME,debug-threads=on (threads named "CPU N/TCG" or "CPU N/KVM").
vcpu_threads() {
  for _t in /proc/"$1"/task/*; do
    read -r _c <"$_t/comm" 2>/dev/null || continue
    case $_c in
      "CPU "*/*) _i=${_c#CPU }; echo "${_i%%/*} ${_t##*/}" ;;
    esac
  done
}

# numa_maps_bind_nodes PID: "SIZE_MIB POLICY" for each mapping of PID that has
# a memory policy of its own (bind:0, bind:0-1, prefer:2, interleave:0-3, ...),
# mappings of at least 1 MiB only. The size comes from /proc/PID/maps.
numa_maps_bind_nodes() {
  awk '
    function hex(s,   i, v) {
      v = 0
      for (i = 1; i <= length(s); i++) v = v * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1
      return v
    }
    FILENAME ~ /\/maps$/ {
      split($1, r, "-")
      size[r[1]] = (hex(r[2]) - hex(r[1])) / 1048576
      next
    }
    $2 != "default" && ($1 in size) && size[$1] >= 1 { printf "%d %s\n", size[$1], $2 }
  ' "/proc/$1/maps" "/proc/$1/numa_maps" 2>/dev/null
}

# ---- Firmware for nested guests ---------------------------------------------

_write_fw() { # FILE OCTAL_BYTES
  head -c 65536 /dev/zero >"$1"
  printf "$2" | dd of="$1" bs=1 seek=65520 conv=notrunc status=none
}
# A guest that halts forever (cli; hlt; jmp back).
write_fw_halt() { _write_fw "$1" '\372\364\353\375'; }
# A guest that exits at once (QEMU exit status 1) with
# -device isa-debug-exit,iobase=0xf4,iosize=4.
write_fw_exit() { _write_fw "$1" '\260\000\346\364\364'; }

# ---- qemu-pin ---------------------------------------------------------------

# qp_require [QEMU-PIN OPTIONS]: fails the test unless qemu-pin prints a
# JSON plan for a small VM (a qemu-pin that cannot plan is a failure, never
# a skip).
qp_require() {
  [ -x "${QP_BINARY:-}" ] || fail "QP_BINARY '${QP_BINARY:-}' is not an executable"
  if ! qp_plan "$@" -- "$QP_QEMU" -accel tcg -m 64 -display none >/dev/null 2>"$QP_LAB_SCRATCH/probe.err"; then
    fail "qemu-pin plan printed no JSON plan for a 64 MiB VM: $(head -n 1 "$QP_LAB_SCRATCH/probe.err")"
  fi
}

# qp_plan [QEMU-PIN OPTIONS] -- QEMU ARGV...: the plan as JSON on stdout.
qp_plan() {
  _out=$QP_LAB_SCRATCH/plan.$$.json
  "$QP_BINARY" plan "$@" >"$_out" 2>"$_out.err" || { cat "$_out.err" >&2; return 1; }
  jq -e 'type == "object"' "$_out" >/dev/null 2>&1 || { echo "not JSON: $(head -c 200 "$_out")" >&2; return 1; }
  cat "$_out"
}

# vm_args NAME FIRMWARE: the QEMU arguments every lab VM shares.
vm_args() {
  echo "-name $1,debug-threads=on -machine q35 -accel tcg -display none -nodefaults -bios $2"
}

# qp_launch NAME [QEMU-PIN OPTIONS] -- QEMU ARGS...: launches a daemonized VM
# through qemu-pin (which returns once vCPUs are pinned); prints its PID. A
# launch that succeeds prints nothing on stderr but what QEMU itself says;
# with QP_LAB_WARNING set, exactly one qemu-pin warning line containing it.
qp_launch() {
  _name=$1
  shift
  rm -f "$QP_LAB_SCRATCH/$_name.pid"
  "$QP_BINARY" "$@" -daemonize -pidfile "$QP_LAB_SCRATCH/$_name.pid" \
    >"$QP_LAB_SCRATCH/$_name.out" 2>&1 || {
    cat "$QP_LAB_SCRATCH/$_name.out"
    return 1
  }
  _pid=$(cat "$QP_LAB_SCRATCH/$_name.pid" 2>/dev/null)
  [ -n "$_pid" ] || return 1
  # QEMU's own messages (a "qemu-system-*:" line and the lines that go on
  # from it) are the caller's command line speaking, not qemu-pin.
  awk '/^qemu-system-/ { q = 1; next } /^qemu-pin/ { q = 0 } !q' \
    "$QP_LAB_SCRATCH/$_name.out" >"$QP_LAB_SCRATCH/$_name.ours"
  _said=$(tr '\n' '|' <"$QP_LAB_SCRATCH/$_name.ours")
  if [ -n "${QP_LAB_WARNING:-}" ]; then
    case $_said in
      "qemu-pin: warning: "*"$QP_LAB_WARNING"*) [ "$(wc -l <"$QP_LAB_SCRATCH/$_name.ours")" -eq 1 ] ||
        { echo "more than one line on a launch with a warning: $_said"; kill "$_pid"; return 1; } ;;
      *) echo "no one-line warning about '$QP_LAB_WARNING': $_said"; kill "$_pid"; return 1 ;;
    esac
  elif [ -n "$_said" ]; then
    echo "a successful launch printed: $_said"
    kill "$_pid"
    return 1
  fi
  # Called as $(qp_launch ...), a subshell: the pid goes to a file that
  # lab_cleanup reads (a variable set here would be lost).
  echo "$_pid" >>"$QP_LAB_SCRATCH/launched.pids"
  echo "$_pid"
}

# qemu_pids: PIDs of every running qemu-system-* process.
qemu_pids() {
  for _p in /proc/[0-9]*; do
    read -r _c <"$_p/comm" 2>/dev/null || continue
    case $_c in qemu-system-*) echo "${_p#/proc/}" ;; esac
  done
}

lab_cleanup() {
  # qp_launch runs in $(...), a subshell: its VMs are in the pid file.
  for _p in $QP_LAB_PIDS $(cat "$QP_LAB_SCRATCH/launched.pids" 2>/dev/null); do
    kill "$_p" 2>/dev/null
  done
  QP_LAB_PIDS=
  rm -f "$QP_LAB_SCRATCH/launched.pids"
  qp_wait_gone "$QP_LAB_SCRATCH"
}

# ---- The plan, read with jq ---------------------------------------------------
# docs/plan-schema.md is the reference; these accept the documented names and
# a few obvious spellings so that the lab keeps its checks in one place.

_JQ_LIST='def cl: if type == "array" then map(tostring) | join(",")
                  elif type == "object" then (.cpus // ."host-cpus" // .cpuset // ."host-nodes" // .nodes) | cl
                  elif . == null then "" else tostring end;'

# plan_mode PLAN_FILE
plan_mode() { jq -r '.mode' "$1"; }

# plan_process_cpus PLAN_FILE
plan_process_cpus() {
  jq -r "$_JQ_LIST"'(.["process-cpus"] // .process_cpus) | cl' "$1"
}

# plan_flat PLAN_FILE: the plan as lines "vcpu INDEX CPULIST" and
# "mem GNODE SIZE_MIB POLICY NODELIST" for the RAM it binds (one jq run;
# memory devices, whose mappings are their backends' size, and memory not
# bound are left out).
plan_flat() {
  jq -r "$_JQ_LIST"'
    def bound: (.memory // .mem // [])
      | map(select((.kind // "ram") == "ram"
                   and (.["host-nodes"] // .host_nodes // .nodes) != null));
    ((.vcpus // ."vcpu-cpus" // .vcpu_cpus // []) | to_entries[]
     | (if (.value | type) == "object"
        then (.value.index // .value.vcpu // .value["cpu-index"] // .key) else .key end) as $i
     | "vcpu \($i) \(.value | cl)"),
    "memcount \(bound | length)",
    (bound | .[]
     | "mem \(.["guest-node"] // .gnode // .guest_node // -1)"
       + " \(.["size-mib"] // .mib // .["mem-mib"] // .mem_mib // .size)"
       + " \(.policy // "bind") \(.["host-nodes"] // .host_nodes // .nodes | cl)")' "$1"
}

# vm_flat PID: what PID really has, as lines "vcpu INDEX CPULIST" and
# "map SIZE_MIB POLICY".
vm_flat() {
  vcpu_threads "$1" | while read -r _i _tid; do
    echo "vcpu $_i $(cpus_allowed_of "$_tid")"
  done
  numa_maps_bind_nodes "$1" | sed 's/^/map /'
}

# check_vm PLAN_FILE PID: every vCPU thread of PID has exactly the plan's CPUs,
# and every memory binding of the plan is a mapping of that size with that
# policy and those nodes in /proc/PID/numa_maps. Returns 1 with the first
# difference on stderr.
check_vm() {
  plan_flat "$1" >"$QP_LAB_SCRATCH/plan.flat" || { echo "cannot read plan $1" >&2; return 1; }
  vm_flat "$2" >"$QP_LAB_SCRATCH/vm.flat"
  awk -v pid="$2" '
    function canon(l,   n, a, i, j, r, lo, hi, seen, out, k, prev, start) {
      gsub(/ /, ",", l); n = split(l, a, ",")
      for (i = 1; i <= n; i++) {
        if (a[i] == "") continue
        if (split(a[i], r, "-") == 2) { lo = r[1] + 0; hi = r[2] + 0 } else { lo = hi = a[i] + 0 }
        for (j = lo; j <= hi; j++) seen[j] = 1
      }
      out = ""; start = -1
      for (k = 0; k <= 4096; k++) {
        if ((k in seen) && start < 0) start = k
        if (!(k in seen) && start >= 0) {
          out = out (out == "" ? "" : ",") (start == k - 1 ? start : start "-" (k - 1)); start = -1
        }
      }
      return out
    }
    FILENAME ~ /plan.flat$/ && $1 == "memcount" { memcount = $2; next }
    FILENAME ~ /plan.flat$/ && $1 == "vcpu" { want[$2] = canon($3); nplan++; next }
    FILENAME ~ /plan.flat$/ && $1 == "mem" {
      pol = $4; if (pol == "preferred") pol = "prefer"
      mem[++nmem] = $3 " " pol ":" canon($5); gn[nmem] = $2; next
    }
    $1 == "vcpu" { got[$2] = canon($3); nvm++; next }
    $1 == "map" { maps[$2 " " $3]++; all = all $2 " MiB " $3 "; "; next }
    END {
      if (nvm == 0 || nvm != nplan) { printf "QEMU %s has %d vCPU threads, the plan has %d vCPUs\n", pid, nvm, nplan; exit 1 }
      for (i in want) {
        if (!(i in got)) { printf "QEMU %s has no thread for vCPU %s\n", pid, i; exit 1 }
        if (got[i] != want[i]) { printf "vCPU %s may run on CPUs %s, the plan says %s\n", i, got[i], want[i]; exit 1 }
      }
      if (nmem != memcount) { print "cannot read the memory bindings of the plan"; exit 1 }
      for (m = 1; m <= nmem; m++) {
        split(mem[m], w, " ")
        if (!(mem[m] in maps)) {
          printf "guest node %s: no %s MiB mapping with policy %s; numa_maps has: %s\n", gn[m], w[1], w[2], all
          exit 1
        }
      }
    }' "$QP_LAB_SCRATCH/plan.flat" "$QP_LAB_SCRATCH/vm.flat" >&2
}

# check_vm_or_fail WHAT PLAN_FILE PID
check_vm_or_fail() {
  check_vm "$2" "$3" 2>"$QP_LAB_SCRATCH/check.err" || fail "$1: $(cat "$QP_LAB_SCRATCH/check.err")"
  log "ok: $1: vCPUs and memory are where the plan says:" \
    "$(awk '$1 == "vcpu" { printf "vCPU %s on CPUs %s; ", $2, $3 }
            $1 == "map" && $2 >= 100 { printf "%s MiB %s; ", $2, $3 }' "$QP_LAB_SCRATCH/vm.flat")"
}

# check_detects_breakage PLAN_FILE PID: proves that check_vm can fail: moves
# vCPU 0 off its planned CPUs, expects check_vm to object, moves it back; and
# expects check_vm to object to a plan whose first memory binding names
# another node.
check_detects_breakage() {
  _tid=$(vcpu_threads "$2" | awk '$1 == 0 { print $2 }')
  _orig=$(cpus_allowed_of "$_tid")
  read -r _online </sys/devices/system/cpu/online
  _other=$(list_outside "$_orig" "$_online")
  if [ -n "$_other" ]; then
    taskset -pc "$_other" "$_tid" >/dev/null || fail "taskset on vCPU 0 thread $_tid failed"
    if check_vm "$1" "$2" 2>/dev/null; then
      taskset -pc "$_orig" "$_tid" >/dev/null
      fail "check_vm did not notice vCPU 0 moved to CPU $_other"
    fi
    taskset -pc "$_orig" "$_tid" >/dev/null
    log "ok: moving vCPU 0 to CPU $_other, off the plan, is detected"
  fi
  plan_flat "$1" >"$QP_LAB_SCRATCH/plan.flat"
  _n0=$(awk '$1 == "mem" { print $5; exit }' "$QP_LAB_SCRATCH/plan.flat")
  [ -n "$_n0" ] || return 0
  read -r _nodes </sys/devices/system/node/online
  _x=$(list_outside "$_n0" "$_nodes")
  [ -n "$_x" ] || return 0
  jq --argjson x "$_x" --arg xs "$_x" '
    def re: if type == "array" then [$x] elif type == "number" then $x else $xs end;
    if has("memory") then .memory[0] |= (if has("host-nodes") then .["host-nodes"] |= re
                                         else .host_nodes |= re end)
    else .mem[0] |= (.host_nodes |= re) end' "$1" >"$QP_LAB_SCRATCH/broken-plan.json"
  if check_vm "$QP_LAB_SCRATCH/broken-plan.json" "$2" 2>/dev/null; then
    fail "check_vm accepted memory on node $_x where the plan says $_n0"
  fi
  log "ok: a plan binding the first memory to node $_x instead of $_n0 is detected"
}

# ---- The lab's own shape ----------------------------------------------------

# expect_nodes N: the lab host has N NUMA nodes.
expect_nodes() {
  _nn=0
  for _d in /sys/devices/system/node/node[0-9]*; do _nn=$((_nn + 1)); done
  assert_eq "NUMA nodes of the lab host" "$1" "$_nn"
}

# status_json: `qemu-pin status --json` into a file; prints its path.
# on_node PID NODE SIZE_MIB: permille of the pages of PID's mappings of
# SIZE_MIB (its guest RAM, say) that are on NODE; -1 when they have none.
on_node() {
  awk -v node="N$2=" -v want="$3" '
    function hex(s,   i, v) {
      v = 0
      for (i = 1; i <= length(s); i++) v = v * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1
      return v
    }
    FILENAME ~ /\/maps$/ { split($1, r, "-"); size[r[1]] = (hex(r[2]) - hex(r[1])) / 1048576; next }
    ($1 in size) && size[$1] == want {
      for (i = 3; i <= NF; i++) if ($i ~ /^N[0-9]+=/) {
        split($i, kv, "="); all += kv[2]; if (kv[1] "=" == node) on += kv[2]
      }
    }
    END { printf "%d\n", all ? on * 1000 / all : -1 }
  ' "/proc/$1/maps" "/proc/$1/numa_maps"
}

# assert_on_node WHAT PID NODE SIZE_MIB: at least 95% of PID's mapping of
# SIZE_MIB (its guest RAM) is on NODE, and every thread of PID runs on
# NODE's CPUs; WHAT names the moment in the failure.
assert_on_node() {
  _got=$(on_node "$2" "$3" "$4")
  [ "$_got" -ge 950 ] || fail "$1: only $_got permille of the VM's RAM is on node $3"
  assert_threads_on_node "$1" "$2" "$3"
}

# assert_threads_on_node WHAT PID NODE: every thread of PID may run on
# exactly NODE's CPUs.
assert_threads_on_node() {
  _want=$(node_cpus "$3")
  for _t in /proc/"$2"/task/*; do
    assert_eq "$1: thread ${_t##*/} on node $3's CPUs" "$_want" "$(cpus_allowed_of "${_t##*/}")"
  done
}

# claim_of PID: the memory-mib of the record of QEMU PID, from status --json.
claim_of() {
  _sf=$(status_json) || fail "qemu-pin status --json failed"
  jq -c --argjson p "$1" '.vms[] | select(.["qemu-pid"] == $p) | .["memory-mib"]' "$_sf"
}

status_json() {
  _sf=$QP_LAB_SCRATCH/status.$$.json
  "$QP_BINARY" status --json >"$_sf" 2>"$_sf.err" || return 1
  echo "$_sf"
}

# hugepage_pool NODE FILE: the file of NODE's 2 MiB hugepage pool
# (nr_hugepages, free_hugepages).
hugepage_pool() { echo "/sys/devices/system/node/node$1/hugepages/hugepages-2048kB/$2"; }

# huge_of PID: the hugepages the ledger claims for the VM of QEMU PID, as
# status --json gives them ([{"node":N,"page-kib":K,"pages":P}, ...]).
huge_of() {
  _sf=$(status_json) || fail "qemu-pin status --json failed"
  jq -c --argjson p "$1" '.vms[] | select(.["qemu-pid"] == $p) | .hugepages' "$_sf"
}

# huge_on PID NODE: the 2 MiB pages of PID's hugetlb mappings on NODE.
huge_on() {
  awk -v node="N$2=" '/ huge / { for (i = 3; i <= NF; i++) if (index($i, node) == 1) { split($i, kv, "="); n += kv[2] } }
    END { print n + 0 }' "/proc/$1/numa_maps"
}

# caller_cgroup NAME PID MEMS: moves PID into a new cgroup v2 cpuset NAME
# with every CPU and the memory nodes MEMS, as an orchestrator confines a
# VM (libvirt's numatune); sets cg to the cgroup's path. Every CPU: joining
# the cgroup resets each thread to all of them, which the keeper takes for
# a reset (the plan goes back), not for the caller's pinning; only the
# memory is the caller's.
caller_cgroup() {
  cg=/sys/fs/cgroup/$1
  grep -qw cpuset /sys/fs/cgroup/cgroup.controllers || fail "the lab kernel has no cgroup v2 cpuset controller"
  echo +cpuset >/sys/fs/cgroup/cgroup.subtree_control || fail "cannot enable the cpuset controller"
  mkdir -p "$cg" || fail "cannot make cgroup $cg"
  cat /sys/devices/system/cpu/online >"$cg/cpuset.cpus" || fail "cannot set the cgroup's CPUs"
  echo "$3" >"$cg/cpuset.mems" || fail "cannot set the cgroup's mems to $3"
  echo "$2" >"$cg/cgroup.procs" || fail "cannot move QEMU $2 into $cg"
}
