#!/bin/sh
# .ci/setup keeps an admin's changed conffiles: the dpkg options it gives
# apt-get make dpkg keep the admin's file (the package's new one goes beside
# it as .dpkg-dist) instead of stopping at its conffile prompt, which with no
# terminal fails the install. Checked with a throw-away package of two
# versions, installed with dpkg into a private root (--root): nothing of the
# machine's own package database is touched.
# Usage: test-setup-conffiles.sh SETUP_SCRIPT
set -eu
setup=$1
if ! command -v dpkg >/dev/null || ! command -v dpkg-deb >/dev/null; then
  echo "SKIP: dpkg and dpkg-deb are needed"
  exit 77
fi
[ "$(id -u)" -eq 0 ] || { echo "SKIP: dpkg --root needs root here"; exit 77; }

# The Dpkg::Options of .ci/setup, as dpkg's own flags.
options=$(grep -o 'Dpkg::Options::=--force-[a-z]*' "$setup" | sed 's/^Dpkg::Options::=//' | sort -u | tr '\n' ' ')
echo "dpkg options from $setup: ${options:-none}"

t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
for v in 1 2; do
  mkdir -p "$t/pkg$v/DEBIAN" "$t/pkg$v/etc/qp-test"
  printf 'Package: qp-conffile-test\nVersion: %s\nArchitecture: all\nMaintainer: qemu-pin tests <root@localhost>\nDescription: conffile test\n' "$v" >"$t/pkg$v/DEBIAN/control"
  echo /etc/qp-test/test.conf >"$t/pkg$v/DEBIAN/conffiles"
  echo "setting = v$v" >"$t/pkg$v/etc/qp-test/test.conf"
  dpkg-deb -b "$t/pkg$v" "$t/v$v.deb" >/dev/null
done
root=$t/root
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates"
: >"$root/var/lib/dpkg/status"
: >"$root/var/lib/dpkg/available"
dpkg --root="$root" --force-script-chrootless -i "$t/v1.deb" </dev/null >"$t/log1" 2>&1 ||
  { cat "$t/log1"; echo "FAIL: version 1 did not install"; exit 1; }
echo "setting = the admin's" >"$root/etc/qp-test/test.conf"

# shellcheck disable=SC2086
if ! dpkg --root="$root" --force-script-chrootless $options -i "$t/v2.deb" </dev/null >"$t/log2" 2>&1; then
  tail -n 3 "$t/log2"
  echo "FAIL: the upgrade stopped at dpkg's conffile prompt"
  exit 1
fi
kept=$(cat "$root/etc/qp-test/test.conf")
[ "$kept" = "setting = the admin's" ] || { echo "FAIL: the admin's conffile was replaced: $kept"; exit 1; }
[ -f "$root/etc/qp-test/test.conf.dpkg-dist" ] || { echo "FAIL: the new conffile is not beside it"; exit 1; }
echo "ok: the admin's conffile was kept, the package's new one is test.conf.dpkg-dist"
