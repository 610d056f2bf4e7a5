#!/bin/sh
# qemu-pin-takeover on a scratch root (dpkg-divert --root), never on this
# machine's own binaries: a copy of the real QEMU at DIR/usr/bin, the built
# qemu-pin beside it. Install makes the QEMU path run qemu-pin, which runs the
# real QEMU it finds at NAME.distrib (a real VM is launched and placed through
# it); remove puts back the very same file (inode, bytes, mode) and leaves no
# diversion. Bad requests change nothing.
#
# Usage: check-takeover.sh TAKEOVER_SCRIPT
set -eu

[ $# -eq 1 ] || { echo "usage: check-takeover.sh TAKEOVER_SCRIPT" >&2; exit 2; }
takeover=$1
test_name=takeover
. "$QP_SOURCE_ROOT/tests/install/common.sh"

command -v dpkg-divert >/dev/null || skip "no dpkg-divert (not a Debian system)"
real=$(command -v "$QP_QEMU") || skip "no $QP_QEMU"

root=$work/root
mkdir -p "$root/var/lib/dpkg" "$root/usr/bin"
cp "$real" "$root/usr/bin/qemu-system-x86_64"
# QEMU loads its modules (accel-tcg) and data relative to its own path.
realdir=$(dirname "$(readlink -f "$real")")
for d in "$realdir"/../lib/*/qemu "$realdir"/../share/qemu; do
  [ -d "$d" ] || continue
  rel=${d#"$realdir"/../}
  mkdir -p "$root/usr/$(dirname "$rel")"
  ln -s "$(readlink -f "$d")" "$root/usr/$rel"
done
cp "$QP_BINARY" "$root/usr/bin/qemu-pin"
# The full program the launcher runs, beside it as in a build tree.
cp "$(dirname "$QP_BINARY")/qemu-pin-full" "$root/usr/bin/"
bin=/usr/bin/qemu-system-x86_64
tk() { sh "$takeover" --root "$root" --qemu-pin /usr/bin/qemu-pin "$@"; }
# INODE SHA256 MODE of a file of the scratch root
ident() { echo "$(stat -c '%i %a' "$root$1") $(sha256sum <"$root$1" | cut -d' ' -f1)"; }
diversions() { dpkg-divert --root "$root" --list | sort; }
before=$(ident $bin)

# Bad requests: one line, exit 2, nothing changed.
refuse() { # EXPECTED-TEXT ARGS...
  _want=$1
  shift
  _rc=0
  tk "$@" >"$work/out" 2>&1 || _rc=$?
  assert_eq "exit status of takeover $*" 2 "$_rc"
  assert_eq "lines printed by takeover $*" 1 "$(wc -l <"$work/out")"
  grep -q "$_want" "$work/out" || fail "takeover $*: expected '$_want', got: $(cat "$work/out")"
  assert_eq "$bin after takeover $*" "$before" "$(ident $bin)"
  assert_eq "diversions after takeover $*" "" "$(diversions)"
}
refuse "not an absolute path" install usr/bin/qemu-system-x86_64
refuse "not a QEMU binary's name" install /usr/bin/true
refuse "not taken over" remove $bin
refuse "unknown action" replace $bin

rc=0
tk status $bin >"$work/out" || rc=$?
assert_eq "status before install: exit" 1 "$rc"

tk install $bin
assert_eq "$bin after install" "qemu-pin" "$(readlink "$root$bin")"
assert_eq "$bin.distrib is the original file" "$before" "$(ident $bin.distrib)"
assert_eq "diversions after install" "local diversion of $bin to $bin.distrib" "$(diversions)"
tk status $bin >"$work/out" || fail "status after install: $(cat "$work/out")"
tk install $bin >"$work/out" || fail "a second install failed: $(cat "$work/out")"
grep -q "already" "$work/out" || fail "a second install did not say it was done already"
assert_eq "diversions after a second install" "local diversion of $bin to $bin.distrib" "$(diversions)"

# Through the taken-over path, with nothing else named qemu-system-x86_64 on
# PATH: qemu-pin runs the diverted binary, for help and for a real VM.
export QEMU_PIN_CONFIG=/dev/null QEMU_PIN_STATE_DIR=$work/state
assert_eq "-version through $bin" "$("$real" -version | head -n 1)" \
  "$(PATH=$root/usr/bin "$root$bin" -version | head -n 1)"
write_fw_halt "$work/halt.fw"
printf '#!/bin/sh\nPATH=%s exec %s "$@"\n' "$root/usr/bin" "$root$bin" >"$work/via-takeover"
chmod +x "$work/via-takeover"
pid=$(QP_BINARY=$work/via-takeover qp_launch vm $(vm_args qp-takeover "$work/halt.fw") -smp 1 -m 64) ||
  fail "a VM launched through $bin did not start"
QP_LAB_PIDS=$pid  # qp_launch ran in a subshell
assert_eq "program of the VM's process" "$root$bin.distrib" "$(readlink "/proc/$pid/exe")"
assert_eq "VMs in the ledger" 1 "$("$QP_BINARY" status --json | jq '.vms | length')"
kill "$pid"
wait_for 10 sh -c "! kill -0 $pid" || fail "QEMU $pid did not stop"

tk remove $bin
assert_eq "$bin after remove" "$before" "$(ident $bin)"
[ ! -e "$root$bin.distrib" ] || fail "$bin.distrib is still there after remove"
assert_eq "diversions after remove" "" "$(diversions)"
rc=0
tk status $bin >/dev/null || rc=$?
assert_eq "status after remove: exit" 1 "$rc"

# A path with no binary yet (Proxmox's /usr/bin/kvm here): the symlink and a
# diversion for a later package's file; remove leaves nothing.
tk install /usr/bin/kvm >/dev/null
assert_eq "/usr/bin/kvm after install" "qemu-pin" "$(readlink "$root/usr/bin/kvm")"
tk remove /usr/bin/kvm >/dev/null
[ ! -e "$root/usr/bin/kvm" ] && [ ! -L "$root/usr/bin/kvm" ] || fail "/usr/bin/kvm left after remove"
assert_eq "diversions after kvm's remove" "" "$(diversions)"

# A file put by hand where the symlink was is never removed.
tk install $bin >/dev/null
rm "$root$bin"
echo '#!/bin/sh' >"$root$bin"
rc=0
tk remove $bin >"$work/out" 2>&1 || rc=$?
assert_eq "remove over a file put by hand: exit" 2 "$rc"
assert_eq "the file put by hand after remove" '#!/bin/sh' "$(cat "$root$bin")"
rm "$root$bin"
tk remove $bin >/dev/null
assert_eq "$bin after the last remove" "$before" "$(ident $bin)"
log "PASS"
