#!/bin/sh
# Installs the build with `meson install --destdir` into a scratch directory
# and checks that every file lands where it should, and nothing else: the
# binary and the full program it runs (QP_MODULE_DIR), the man pages, the tmpfiles.d entry of the ledger, the example
# configuration, the AppArmor abstraction, the takeover script and qemu-pin
# under QEMU's name for libvirt. Then uses them: the installed binary runs,
# the example configuration is accepted (its commented-out settings too), and
# the ledger directory systemd-tmpfiles makes from the entry (as root) is one
# qemu-pin launches VMs with.
#
# Usage: check-install.sh MESON BUILDDIR PREFIX BINDIR SBINDIR LIBEXECDIR
#                         DATADIR MANDIR APPARMORDIR LEDGER_GROUP
# (directories as meson's options give them: relative to PREFIX or absolute)
set -eu

[ $# -eq 10 ] || { echo "usage: check-install.sh MESON BUILDDIR PREFIX BINDIR SBINDIR LIBEXECDIR DATADIR MANDIR APPARMORDIR LEDGER_GROUP" >&2; exit 2; }
meson=$1 build=$2 prefix=$3 group=${10}
abs() { case $1 in /*) echo "$1" ;; *) echo "$prefix/$1" ;; esac; }
bindir=$(abs "$4") sbindir=$(abs "$5") libexecdir=$(abs "$6") datadir=$(abs "$7")
mandir=$(abs "$8") apparmordir=$9

test_name=install
. "$QP_SOURCE_ROOT/tests/install/common.sh"
dest=$work/dest

echo "# meson install --destdir $dest"
"$meson" install -C "$build" --destdir "$dest" --no-rebuild --quiet >"$work/install.log" 2>&1 ||
  { cat "$work/install.log"; fail "meson install failed"; }

# Every file and symlink, with its mode, as installed.
expected="-rwxr-xr-x $bindir/qemu-pin
-rwxr-xr-x $(abs "$QP_MODULE_DIR")/qemu-pin-full
-rwxr-xr-x $sbindir/qemu-pin-takeover
lrwxrwxrwx $libexecdir/qemu-pin/qemu-system-x86_64
-rw-r--r-- $mandir/man1/qemu-pin.1
-rw-r--r-- $mandir/man5/qemu-pin.conf.5
-rw-r--r-- $mandir/man8/qemu-pin-takeover.8
-rw-r--r-- $prefix/lib/tmpfiles.d/qemu-pin.conf
-rw-r--r-- $prefix/lib/systemd/system/qemu-pin-metrics.service
-rw-r--r-- $prefix/lib/systemd/system/qemu-pin-metrics.timer
-rw-r--r-- $prefix/lib/systemd/system/qemu-pin-rebalance.service
-rw-r--r-- $prefix/lib/systemd/system/qemu-pin-rebalance.timer
-rw-r--r-- $datadir/doc/qemu-pin/examples/qemu-pin.conf
-rw-r--r-- $datadir/doc/qemu-pin/README.md
-rw-r--r-- $datadir/doc/qemu-pin/docs/benchmarks.md
-rw-r--r-- $datadir/doc/qemu-pin/docs/design.md
-rw-r--r-- $datadir/doc/qemu-pin/docs/lab.md
-rw-r--r-- $datadir/doc/qemu-pin/docs/ledger.md
-rw-r--r-- $datadir/doc/qemu-pin/docs/plan-schema.md
-rw-r--r-- $datadir/doc/qemu-pin/docs/robustness.md
-rw-r--r-- $datadir/doc/qemu-pin/docs/status.png
-rw-r--r-- $datadir/doc/qemu-pin/docs/orchestrators/libvirt.md
-rw-r--r-- $datadir/doc/qemu-pin/docs/orchestrators/proxmox.md
-rw-r--r-- $datadir/doc/qemu-pin/docs/orchestrators/systemd-and-by-hand.md
-rw-r--r-- $apparmordir/abstractions/qemu-pin"
actual=$(cd "$dest" && find . ! -type d -printf '%M /%P\n' | sort)
assert_eq "installed files" "$(echo "$expected" | sort)" "$actual"

# The binary runs, and the drop-in name for libvirt leads to it.
assert_eq "installed qemu-pin --version" "qemu-pin $(sed -n "s/^ *version : '\(.*\)',$/\1/p" "$QP_SOURCE_ROOT/meson.build")" \
  "$("$dest$bindir/qemu-pin" --version)"
assert_eq "$libexecdir/qemu-pin/qemu-system-x86_64 points to" "$bindir/qemu-pin" \
  "$(readlink "$dest$libexecdir/qemu-pin/qemu-system-x86_64")"
"$dest$sbindir/qemu-pin-takeover" --help | grep -q "install BINARY" ||
  fail "qemu-pin-takeover --help does not describe install"

# The tmpfiles.d entry: /run/qemu-pin, shared by the group when there is one.
if [ -n "$group" ]; then
  want="d /run/qemu-pin 3770 root $group -
f /run/qemu-pin/lock 0660 root $group -"
else
  want="d /run/qemu-pin 0700 root root -
f /run/qemu-pin/lock 0600 root root -"
fi
assert_eq "tmpfiles.d entry" "$want" \
  "$(grep -v '^#' "$dest$prefix/lib/tmpfiles.d/qemu-pin.conf" | grep . | tr -s ' \t' '  ')"

# The metrics service's command, run as the unit has it (its directory and
# ledger scratch ones): the collector's file appears whole, no temporary
# file is left, and the timer starts the service.
unit=$dest$prefix/lib/systemd/system/qemu-pin-metrics.service
grep -q "^ExecStart=/bin/sh -ec '$bindir/qemu-pin status --metrics >" "$unit" ||
  fail "the metrics service does not run the installed qemu-pin"
mkdir -p "$work/textfile"
cmd=$(sed -n "s/^ExecStart=\/bin\/sh -ec '\(.*\)'$/\1/p" "$unit" |
  sed -e "s|/var/lib/prometheus/node-exporter|$work/textfile|g" -e "s|$bindir/qemu-pin|$dest$bindir/qemu-pin|")
QEMU_PIN_STATE_DIR=$work/metrics-state sh -ec "$cmd" || fail "the metrics service's command failed: $cmd"
assert_eq "files the metrics service leaves" "qemu-pin.prom" "$(ls "$work/textfile")"
grep -q '^qemu_pin_ledger_records{state="live"} 0$' "$work/textfile/qemu-pin.prom" ||
  fail "qemu-pin.prom lacks the ledger's record count"
grep -qx 'WantedBy=timers.target' "$dest$prefix/lib/systemd/system/qemu-pin-metrics.timer" ||
  fail "the metrics timer is not wanted by timers.target"
if command -v systemd-analyze >/dev/null; then
  systemd-analyze verify --man=no "$unit" "${unit%.service}.timer" >"$work/verify.log" 2>&1 ||
    { cat "$work/verify.log"; fail "systemd-analyze verify rejects the metrics units"; }
  log "ok: systemd-analyze verify accepts the metrics units"
fi

# The rebalance service's command, run as the unit has it on an empty
# ledger: nothing to move; its timer is wanted by timers.target, and
# installing enabled neither.
unit=$dest$prefix/lib/systemd/system/qemu-pin-rebalance.service
cmd=$(sed -n 's/^ExecStart=//p' "$unit")
case $cmd in
"$bindir/qemu-pin rebalance "*"--cooldown="*"--rebalance-min-mib="*) ;;
*) fail "the rebalance service does not run the installed qemu-pin rebalance with its brakes: $cmd" ;;
esac
out=$(QEMU_PIN_STATE_DIR=$work/rebalance-state "$dest$bindir/qemu-pin" ${cmd#"$bindir/qemu-pin "} 2>&1) ||
  fail "the rebalance service's command failed: $cmd: $out"
assert_eq "the rebalance service's command on an empty ledger" "qemu-pin: rebalance: no VM to move" "$out"
grep -qx 'WantedBy=timers.target' "${unit%.service}.timer" ||
  fail "the rebalance timer is not wanted by timers.target"
[ -z "$(cd "$dest" && find . -path '*timers.target.wants*')" ] || fail "installing enabled a timer"
if command -v systemd-analyze >/dev/null; then
  # verify checks that ExecStart's binary exists: the staged one.
  mkdir -p "$work/units"
  sed "s|$bindir/qemu-pin|$dest$bindir/qemu-pin|" "$unit" >"$work/units/qemu-pin-rebalance.service"
  cp "${unit%.service}.timer" "$work/units/"
  systemd-analyze verify --man=no "$work/units/qemu-pin-rebalance.service" \
    "$work/units/qemu-pin-rebalance.timer" >"$work/verify.log" 2>&1 ||
    { cat "$work/verify.log"; fail "systemd-analyze verify rejects the rebalance units"; }
  log "ok: systemd-analyze verify accepts the rebalance units"
fi

# The AppArmor abstraction names the installed binary.
grep -q "^  $bindir/qemu-pin rmix,$" "$dest$apparmordir/abstractions/qemu-pin" ||
  fail "the AppArmor abstraction does not allow $bindir/qemu-pin"

# The example configuration is valid as shipped and with every commented-out
# setting and group enabled, planned on a recorded 32-CPU host (its CPU and
# node lists name more than this machine may have).
example=$dest$datadir/doc/qemu-pin/examples/qemu-pin.conf
sed -e 's/^#\(\[[a-z]*:[^]]*\]\)$/\1/' -e 's/^#\([a-z-]* = \)/\1/' "$example" >"$work/all.conf"
[ "$(grep -c '^#[a-z[]' "$work/all.conf" || true)" = 0 ] || fail "the example has settings the check cannot enable"
for conf in "$example" "$work/all.conf"; do
  QEMU_PIN_CONFIG=$conf "$dest$bindir/qemu-pin" plan --state-dir="$work/state" \
    --topology="$QP_TOPOLOGIES/epyc-7351p.xml" -- \
    qemu-system-x86_64 -accel tcg -m 64 -name db1 >"$work/plan.json" 2>"$work/plan.err" ||
    fail "qemu-pin rejects $conf: $(cat "$work/plan.err")"
  log "ok: qemu-pin accepts ${conf##*/}"
done

# The directory systemd-tmpfiles makes from the entry, and a VM launched with
# it as the ledger (root only: the entry names owner and group).
if [ "$(id -u)" -ne 0 ]; then
  log "not root: systemd-tmpfiles cannot create the ledger directory with its owner"
elif ! command -v systemd-tmpfiles >/dev/null; then
  log "no systemd-tmpfiles: the ledger directory is not made"
elif [ -n "$group" ] && ! getent group "$group" >/dev/null; then
  log "no group $group on this machine: the ledger directory is not made"
else
  # tmpfiles --root resolves users and groups in the root's /etc.
  sysroot=$work/sysroot
  mkdir -p "$sysroot/run" "$sysroot/etc"
  cp /etc/passwd /etc/group "$sysroot/etc/"
  systemd-tmpfiles --root="$sysroot" --create "$dest$prefix/lib/tmpfiles.d/qemu-pin.conf" ||
    fail "systemd-tmpfiles --create failed on the entry"
  if [ -n "$group" ]; then want="drwxrws--T root $group"; else want="drwx------ root root"; fi
  assert_eq "ledger directory made by systemd-tmpfiles" "$want" \
    "$(stat -c '%A %U %G' "$sysroot/run/qemu-pin")"
  if [ -n "$group" ]; then want="-rw-rw---- root $group"; else want="-rw------- root root"; fi
  assert_eq "ledger lock made by systemd-tmpfiles" "$want" \
    "$(stat -c '%A %U %G' "$sysroot/run/qemu-pin/lock")"
  write_fw_halt "$work/halt.fw"
  pid=$(QEMU_PIN_CONFIG=/dev/null QP_BINARY="$dest$bindir/qemu-pin" \
    qp_launch vm --state-dir="$sysroot/run/qemu-pin" -- "$QP_QEMU" \
      $(vm_args qp-install "$work/halt.fw") -smp 1 -m 64) ||
    fail "qemu-pin cannot launch a VM with the ledger systemd-tmpfiles made"
  QP_LAB_PIDS=$pid
  "$dest$bindir/qemu-pin" status --json --state-dir="$sysroot/run/qemu-pin" >"$work/status.json"
  assert_eq "VMs in the ledger" 1 "$(jq '.vms | length' "$work/status.json")"
fi
log "PASS"
