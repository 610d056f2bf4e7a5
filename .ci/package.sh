#!/usr/bin/env bash
# Builds the Debian package from this tree (dpkg-buildpackage -b -us -uc, in
# a copy under a scratch directory, so that nothing lands beside the tree),
# then checks it: its file list, the maintainer script that creates the
# ledger's directory, lintian (no error or warning that is not overridden
# with a reason in debian/), and the package extracted into a scratch root
# (dpkg -x; never installed on this machine) runs: --version, topology,
# plan, status, and the takeover script's --help.
#
# Usage: .ci/package.sh [OUTDIR]   (OUTDIR keeps the .deb; default: removed)
# Needs dpkg-dev, debhelper, lintian and the build dependencies of
# debian/control (.ci/run installs them).
set -euo pipefail
# The package's qemu-pin runs with the settings given below only, not this
# host's /etc/qemu-pin/qemu-pin.conf or the caller's QEMU_PIN_*.
. "$(dirname "$0")/../tests/common/hermetic.sh"
cd "$(dirname "$0")/.."
src=$PWD
work=$(mktemp -d /tmp/qemu-pin-deb.XXXXXX)
trap 'rm -rf "$work"' EXIT
out=${1:-}
fail() { echo "package: FAIL: $*"; exit 1; }
start=$(date +%s)

version=$(dpkg-parsechangelog -l debian/changelog -S Version)
tree=$work/qemu-pin-$version
mkdir -p "$tree"
# The tracked files as they are in the working tree (a CI clone: the commit).
if git rev-parse --git-dir >/dev/null 2>&1; then
  git ls-files -z | tar --null -T - -cf - | tar -xf - -C "$tree"
else
  tar --exclude='./build*' -cf - . | tar -xf - -C "$tree"
fi

echo "package: dpkg-buildpackage -b -us -uc (log: $work/build.log)"
if ! (cd "$tree" && dpkg-buildpackage -b -us -uc) >"$work/build.log" 2>&1; then
  tail -n 40 "$work/build.log"
  fail "dpkg-buildpackage failed"
fi
build_s=$(( $(date +%s) - start ))
deb=$(ls "$work"/qemu-pin_"$version"_*.deb)
grep -E '^(Ok|Fail|Skipped):' "$work/build.log" | tr -s ' ' | paste -sd' ' | sed 's/^/package: unit tests in the build: /'

# The file list: every file the package ships, with its mode.
actual=$(dpkg-deb -c "$deb" | awk '$1 !~ /^d/ { sub(/^\./, "", $6); print $1, $6 }' | sort)
expected=$( (cat <<'EOF'
-rwxr-xr-x /usr/bin/qemu-pin
-rwxr-xr-x /usr/sbin/qemu-pin-takeover
lrwxrwxrwx /usr/libexec/qemu-pin/qemu-system-x86_64
-rw-r--r-- /usr/lib/tmpfiles.d/qemu-pin.conf
-rw-r--r-- /usr/lib/systemd/system/qemu-pin-metrics.service
-rw-r--r-- /usr/lib/systemd/system/qemu-pin-metrics.timer
-rw-r--r-- /etc/apparmor.d/abstractions/qemu-pin
-rw-r--r-- /usr/share/doc/qemu-pin/examples/qemu-pin.conf
-rw-r--r-- /usr/share/doc/qemu-pin/changelog.gz
-rw-r--r-- /usr/share/doc/qemu-pin/copyright
-rw-r--r-- /usr/share/man/man1/qemu-pin.1.gz
-rw-r--r-- /usr/share/man/man5/qemu-pin.conf.5.gz
-rw-r--r-- /usr/share/man/man8/qemu-pin-takeover.8.gz
EOF
[ ! -f debian/qemu-pin.lintian-overrides ] || echo "-rw-r--r-- /usr/share/lintian/overrides/qemu-pin"
) | sort)
if [ "$actual" != "$expected" ]; then
  diff <(echo "$expected") <(echo "$actual") || true
  fail "the package's files differ from the expected list (< expected, > in the package)"
fi
echo "package: files: ok ($(echo "$actual" | wc -l) files)"
[ "$(dpkg-deb -c "$deb" | awk '$6 == "./usr/libexec/qemu-pin/qemu-system-x86_64" { print $8 }')" = ../../bin/qemu-pin ] ||
  fail "/usr/libexec/qemu-pin/qemu-system-x86_64 is not a relative symlink to ../../bin/qemu-pin"

# The ledger's directory is made when the package is configured, and the
# AppArmor abstraction is a conffile an admin may change.
dpkg-deb -e "$deb" "$work/control"
grep -q 'systemd-tmpfiles .*--create qemu-pin.conf' "$work/control/postinst" ||
  fail "postinst does not run systemd-tmpfiles --create qemu-pin.conf"
grep -qx /etc/apparmor.d/abstractions/qemu-pin "$work/control/conffiles" ||
  fail "/etc/apparmor.d/abstractions/qemu-pin is not a conffile"
dpkg-deb -f "$deb" Depends Recommends | sed 's/^/package: /'
echo "package: postinst, conffiles: ok"

# lintian: every finding is fixed or overridden with its reason in debian/.
lintian --fail-on error,warning "$deb" >"$work/lintian.log" 2>&1 ||
  { cat "$work/lintian.log"; fail "lintian"; }
echo "package: lintian: ok$( [ -s "$work/lintian.log" ] && echo " ($(wc -l <"$work/lintian.log") notes: $(cut -d: -f2- "$work/lintian.log" | paste -sd';'))")"

# Extracted into a scratch root, it runs.
root=$work/root
dpkg -x "$deb" "$root"
qp=$root/usr/bin/qemu-pin
[ "$("$qp" --version)" = "qemu-pin $version" ] || fail "qemu-pin --version: $("$qp" --version 2>&1)"
"$qp" topology >"$work/topology.txt" || fail "qemu-pin topology failed"
grep -q '^node' "$work/topology.txt" || fail "qemu-pin topology shows no node: $(head -n 3 "$work/topology.txt")"
QEMU_PIN_CONFIG=$root/usr/share/doc/qemu-pin/examples/qemu-pin.conf \
  "$qp" plan --state-dir="$work/state" -- qemu-system-x86_64 -m 64 >/dev/null ||
  fail "qemu-pin plan with the example configuration failed"
"$qp" status --state-dir="$work/state" >/dev/null || fail "qemu-pin status failed"
"$root/usr/sbin/qemu-pin-takeover" --help | grep -q 'install BINARY' || fail "qemu-pin-takeover --help"
echo "package: dpkg -x into a scratch root: qemu-pin --version, topology, plan, status: ok"

if [ -n "$out" ]; then
  mkdir -p "$out"
  cp "$deb" "$out/"
  echo "package: $(basename "$deb") kept in $out"
fi
echo "package: ok: $(basename "$deb") ($(du -k "$deb" | cut -f1) KiB), built in ${build_s} s, checked in $(( $(date +%s) - start - build_s )) s"
