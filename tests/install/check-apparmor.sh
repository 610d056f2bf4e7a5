#!/bin/sh
# The AppArmor abstraction, parsed by apparmor_parser inside a profile shaped
# like the one libvirt generates per domain (abstractions/libvirt-qemu, when
# libvirt's AppArmor files are installed, then ours). Parse only: nothing is
# loaded into the kernel or written to the cache. A copy with a broken rule
# must be rejected, so that a parser that accepts anything fails the test,
# and the profile must still parse once the abstraction is gone.
#
# Usage: check-apparmor.sh ABSTRACTION
set -eu

[ $# -eq 1 ] || { echo "usage: check-apparmor.sh ABSTRACTION" >&2; exit 2; }
abstraction=$1
test_name=apparmor
. "$QP_SOURCE_ROOT/tests/install/common.sh"

command -v apparmor_parser >/dev/null || skip "no apparmor_parser (Debian package apparmor)"
[ -f /etc/apparmor.d/tunables/global ] || skip "no /etc/apparmor.d/tunables/global"

mkdir -p "$work/inc/abstractions"
cp "$abstraction" "$work/inc/abstractions/qemu-pin"
libvirt=
[ -f /etc/apparmor.d/abstractions/libvirt-qemu ] && libvirt='  #include <abstractions/libvirt-qemu>'
cat >"$work/profile" <<PROFILE
#include <tunables/global>

profile libvirt-00000000-0000-0000-0000-000000000000 flags=(attach_disconnected) {
$libvirt
  include if exists <abstractions/qemu-pin>
}
PROFILE
# -Q: no kernel load; -K, -T: no cache write or read.
parse() { apparmor_parser -Q -K -T -I "$work/inc" -I /etc/apparmor.d "$@" 2>"$work/err"; }

parse "$work/profile" || fail "apparmor_parser rejects the profile: $(grep -v '^Cache' "$work/err" | head -n 3)"
log "ok: parsed${libvirt:+ with abstractions/libvirt-qemu}"
# The parser read our file: its rules are in the expanded profile.
parse -p "$work/profile" >"$work/expanded" || fail "apparmor_parser -p failed"
grep -q '/etc/qemu-pin/\*\* r,' "$work/expanded" || fail "the expanded profile lacks the abstraction's rules"

sed 's|/etc/qemu-pin/\*\* r,|/etc/qemu-pin/** rq,|' "$abstraction" >"$work/inc/abstractions/qemu-pin"
if parse "$work/profile"; then fail "apparmor_parser accepted a broken rule"; fi
log "ok: a broken rule is rejected"
# `include if exists`, the line docs/orchestrators/libvirt.md adds: once
# qemu-pin is purged and its abstraction gone, the profile still loads.
if [ ! -e /etc/apparmor.d/abstractions/qemu-pin ]; then
  rm "$work/inc/abstractions/qemu-pin"
  parse "$work/profile" || fail "without the abstraction the profile fails: $(grep -v '^Cache' "$work/err" | head -n 3)"
  log "ok: parsed without the abstraction (qemu-pin purged)"
fi
log "PASS"
