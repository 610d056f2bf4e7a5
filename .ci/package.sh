#!/usr/bin/env bash
# Builds the Debian package from this tree (dpkg-buildpackage -b -us -uc
# with Debian's build flags and -Werror, in a copy under a scratch
# directory, so that nothing lands beside the tree), then checks it: that
# what the build leaves in the tree is git-ignored, its file list, the
# maintainer script that creates the ledger's directory, lintian (no error
# or warning that is not overridden with a reason in debian/), and the
# package extracted into a scratch root (dpkg -x; never installed on this
# machine) runs: --version, topology, plan, status, the takeover script's
# --help, postrm's removal of the ledger's directory, with a real VM
# holding a claim and without, and prerm's undoing of the package's
# takeovers on a scratch dpkg root.
#
# Usage: .ci/package.sh [OUTDIR]   (OUTDIR keeps the .deb; default: removed)
# Needs dpkg-dev, debhelper, lintian, the build dependencies of
# debian/control and qemu-system-x86 (.ci/setup and .ci/run install them).
set -euo pipefail
# The package's qemu-pin runs with the settings given below only, not this
# host's /etc/qemu-pin/qemu-pin.conf or the caller's QEMU_PIN_*.
. "$(dirname "$0")/../tests/common/hermetic.sh"
cd "$(dirname "$0")/.."
src=$PWD
work=$(mktemp -d /tmp/qemu-pin-deb.XXXXXX)
started=() # processes to kill on the way out (the postrm check's VM)
trap '[ ${#started[@]} -eq 0 ] || kill -KILL "${started[@]}" 2>/dev/null; rm -rf "$work"' EXIT
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

# Debian's build flags (dpkg-buildflags: hardening, fortify) with -Werror
# appended: any warning a Debian build of this tree gives fails CI here.
# debian/rules itself leaves -Werror out, for builders with newer compilers.
echo "package: dpkg-buildpackage -b -us -uc, DEB_CFLAGS_APPEND=-Werror (log: $work/build.log)"
if ! (cd "$tree" && DEB_CFLAGS_APPEND=-Werror dpkg-buildpackage -b -us -uc) >"$work/build.log" 2>&1; then
  # ninja -v's command lines are long: the diagnostics, then the end.
  grep -E -A3 '(error|warning):' "$work/build.log" | head -n 40 || true
  tail -n 8 "$work/build.log" | cut -c1-300
  fail "dpkg-buildpackage failed"
fi
build_s=$(( $(date +%s) - start ))
# Every compiler command of the build (debhelper runs ninja -v) had them.
compiles=$(grep -E '^(\[[0-9]+/[0-9]+\] )?[^ ]*(cc|gcc|clang)[^ ]* .* -c [^ ]+\.c$' "$work/build.log" || true)
[ -n "$compiles" ] || fail "no compiler command in the build log"
unflagged=$( (echo "$compiles" | grep -vE -- ' -Werror( |$)'
              echo "$compiles" | grep -vE -- ' -D_FORTIFY_SOURCE=[0-9]') || true)
[ -z "$unflagged" ] ||
  fail "compiled without -Werror or -D_FORTIFY_SOURCE: $(echo "$unflagged" | head -n 1)"
echo "package: $(echo "$compiles" | wc -l) compiler commands, each with Debian's flags and -Werror"
deb=$(ls "$work"/qemu-pin_"$version"_*.deb)
# What the build leaves in the tree is in .gitignore: after
# dpkg-buildpackage in a checkout, git status shows nothing new.
if git rev-parse --git-dir >/dev/null 2>&1; then
  left=$(GIT_DIR=$(git rev-parse --absolute-git-dir) GIT_WORK_TREE=$tree \
    git ls-files --others --exclude-standard)
  [ -z "$left" ] || fail "the build leaves files .gitignore does not name: $(echo $left)"
  echo "package: what the build leaves in the tree is ignored by .gitignore: ok"
fi
tests=$(grep -E '^(Ok|Fail|Skipped):' "$work/build.log" | tr -s ' ' | paste -sd' ' || true)
echo "package: unit tests in the build: ${tests:-none}"

# The file list: every file the package ships, with its mode.
actual=$(dpkg-deb -c "$deb" | awk '$1 !~ /^d/ { sub(/^\./, "", $6); print $1, $6 }' | sort)
expected=$( (cat <<'EOF'
-rwxr-xr-x /usr/bin/qemu-pin
-rwxr-xr-x /usr/lib/x86_64-linux-gnu/qemu-pin/qemu-pin-full
-rwxr-xr-x /usr/sbin/qemu-pin-takeover
lrwxrwxrwx /usr/libexec/qemu-pin/qemu-system-x86_64
-rw-r--r-- /usr/lib/tmpfiles.d/qemu-pin.conf
-rw-r--r-- /usr/lib/systemd/system/qemu-pin-metrics.service
-rw-r--r-- /usr/lib/systemd/system/qemu-pin-metrics.timer
-rw-r--r-- /usr/lib/systemd/system/qemu-pin-rebalance.service
-rw-r--r-- /usr/lib/systemd/system/qemu-pin-rebalance.timer
-rw-r--r-- /etc/apparmor.d/abstractions/qemu-pin
-rw-r--r-- /usr/share/doc/qemu-pin/examples/qemu-pin.conf
-rw-r--r-- /usr/share/doc/qemu-pin/README.md
-rw-r--r-- /usr/share/doc/qemu-pin/docs/benchmarks.md
-rw-r--r-- /usr/share/doc/qemu-pin/docs/design.md
-rw-r--r-- /usr/share/doc/qemu-pin/docs/lab.md
-rw-r--r-- /usr/share/doc/qemu-pin/docs/ledger.md
-rw-r--r-- /usr/share/doc/qemu-pin/docs/plan-schema.md
-rw-r--r-- /usr/share/doc/qemu-pin/docs/robustness.md
-rw-r--r-- /usr/share/doc/qemu-pin/docs/status.png
-rw-r--r-- /usr/share/doc/qemu-pin/docs/orchestrators/libvirt.md
-rw-r--r-- /usr/share/doc/qemu-pin/docs/orchestrators/proxmox.md
-rw-r--r-- /usr/share/doc/qemu-pin/docs/orchestrators/systemd-and-by-hand.md
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
# Every guide the man pages and the AppArmor abstraction name is in the
# package (uncompressed, as named); none is named by its path in the tree.
man_refs=$(dpkg-deb --fsys-tarfile "$deb" | tar -xOf - --wildcards './usr/share/man/*.gz' | zcat |
  cat - <(dpkg-deb --fsys-tarfile "$deb" | tar -xOf - ./etc/apparmor.d/abstractions/qemu-pin) | sed 's/\\-/-/g')
for doc in $(echo "$man_refs" | grep -o '/usr/share/doc/qemu-pin/[A-Za-z0-9/._-]*[A-Za-z0-9]' | sort -u); do
  echo "$actual" | grep -q " $doc\$" || fail "a man page or the AppArmor abstraction names $doc, which the package does not ship"
done
! echo "$man_refs" | grep -E '(^|[ (])docs/[a-z]' ||
  fail "a man page or the AppArmor abstraction names a file by its path in the source tree (above)"
[ "$(dpkg-deb -c "$deb" | awk '$6 == "./usr/libexec/qemu-pin/qemu-system-x86_64" { print $8 }')" = ../../bin/qemu-pin ] ||
  fail "/usr/libexec/qemu-pin/qemu-system-x86_64 is not a relative symlink to ../../bin/qemu-pin"

# The ledger's directory is made when the package is configured, and the
# AppArmor abstraction is a conffile an admin may change.
dpkg-deb -e "$deb" "$work/control"
grep -q 'systemd-tmpfiles .*--create qemu-pin.conf' "$work/control/postinst" ||
  fail "postinst does not run systemd-tmpfiles --create qemu-pin.conf"
grep -qx /etc/apparmor.d/abstractions/qemu-pin "$work/control/conffiles" ||
  fail "/etc/apparmor.d/abstractions/qemu-pin is not a conffile"
# The units' debhelper snippets: purge forgets an enabled timer's links
# (deb-systemd-helper purge), remove reloads systemd, install enables none.
units="'qemu-pin-metrics.timer' 'qemu-pin-rebalance.timer'"
grep -q "deb-systemd-helper purge $units" "$work/control/postrm" ||
  fail "postrm does not purge the timers' state (deb-systemd-helper purge $units): dh_installsystemd saw no unit"
grep -q 'systemctl --system daemon-reload' "$work/control/postrm" ||
  fail "postrm does not reload systemd on remove"
for u in qemu-pin-metrics.timer qemu-pin-rebalance.timer; do
  grep -q "deb-systemd-helper update-state '$u'" "$work/control/postinst" ||
    fail "postinst does not record $u's state (deb-systemd-helper update-state)"
done
! grep -q 'deb-systemd-invoke start' "$work/control/postinst" || fail "postinst starts a unit"
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
# A launcher linked statically (no interpreter) carries code of these
# sources, which Built-Using must name; one linked with the shared
# libraries carries none.
built_using=$(dpkg-deb -f "$deb" Built-Using)
if ! readelf -l "$qp" | grep -q INTERP; then
  for src in glibc glib2.0 pcre2 hwloc; do
    echo "$built_using" | grep -q "\(^\|, \)$src (= " ||
      fail "the launcher is static but Built-Using does not name $src: '$built_using'"
  done
  echo "package: static launcher, Built-Using: $built_using"
else
  [ -z "$built_using" ] || fail "a dynamic launcher with Built-Using: $built_using"
fi
[ "$("$qp" --version)" = "qemu-pin $version" ] || fail "qemu-pin --version: $("$qp" --version 2>&1)"
"$qp" topology >"$work/topology.txt" || fail "qemu-pin topology failed"
grep -q '^node' "$work/topology.txt" || fail "qemu-pin topology shows no node: $(head -n 3 "$work/topology.txt")"
QEMU_PIN_CONFIG=$root/usr/share/doc/qemu-pin/examples/qemu-pin.conf \
  "$qp" plan --state-dir="$work/state" -- qemu-system-x86_64 -m 64 >/dev/null ||
  fail "qemu-pin plan with the example configuration failed"
"$qp" status --state-dir="$work/state" >/dev/null || fail "qemu-pin status failed"
"$root/usr/sbin/qemu-pin-takeover" --help | grep -q 'install BINARY' || fail "qemu-pin-takeover --help"
echo "package: dpkg -x into a scratch root: qemu-pin --version, topology, plan, status: ok"

# postrm on remove (and purge): the ledger's directory goes with the
# package unless a VM may still hold a claim in it. Run with DPKG_ROOT on a
# scratch /run, against the record of a real VM (TCG, paused by its -S)
# launched through the package's qemu-pin, then against that record once its
# QEMU and keeper are killed (stale), an unreadable record, a lock held by
# someone else (postrm waits 5 s for it) and a symlink.
prm=$work/prm
ledger=$prm/run/qemu-pin
mkdir -p "$prm/run"
# postrm WANT: runs postrm remove, fails unless the ledger is then WANT
# (kept or gone) and postrm said what matches the rest (nothing if none).
postrm() {
  local want=$1 said got=gone
  shift
  said=$(DPKG_ROOT=$prm sh "$work/control/postrm" remove 2>&1) || fail "postrm remove: exit $?: $said"
  [ ! -e "$ledger" ] || got=kept
  if [ "$got" != "$want" ] || { [ $# -eq 0 ] && [ -n "$said" ]; } ||
    { [ $# -gt 0 ] && ! echo "$said" | grep -q -- "$*"; }; then
    fail "postrm remove: $ledger $got (expected $want), said: ${said:-nothing}"
  fi
  # The package's qemu-pin is gone by then: no line may send the reader to it.
  ! echo "$said" | grep -q 'qemu-pin status' ||
    fail "postrm remove names 'qemu-pin status', removed with the package: $said"
}
record_pid() { sed -n "s/^ *\"$1\" *: *\([0-9]*\).*/\1/p" "$ledger"/*.json; }
command -v qemu-system-x86_64 >/dev/null || fail "no qemu-system-x86_64 on PATH for the postrm check"
postrm gone
: >"$work/empty.conf"
QEMU_PIN_CONFIG=$work/empty.conf "$qp" --state-dir="$ledger" -- qemu-system-x86_64 \
  -accel tcg -m 64 -S -display none -nodefaults -monitor none >"$work/vm.log" 2>&1 &
vm=$!
started+=("$vm")
for _ in $(seq 100); do
  ls "$ledger"/*.json >/dev/null 2>&1 && [ -n "$(record_pid keeper-pid)" ] && break
  sleep 0.1
done
keeper=$(record_pid keeper-pid)
started+=("$keeper")
[ "$(record_pid qemu-pid)" = "$vm" ] && [ -n "$keeper" ] ||
  fail "no record of the VM in $ledger: $(cat "$work/vm.log")"
postrm kept "$ledger kept, until reboot: .* the claim of running QEMU $vm"
kill -KILL "$keeper" "$vm"
wait "$vm" 2>/dev/null || true
started=()
ls "$ledger"/*.json >/dev/null 2>&1 || fail "killing the keeper first left no stale record"
postrm gone
mkdir "$ledger" && : >"$ledger/lock" && echo '{"version": 1, "id": "cut' >"$ledger/cut.json.corrupt"
postrm kept "cut.json.corrupt names no process"
rm "$ledger/cut.json.corrupt"
(exec 8<"$ledger/lock" && flock 8 && exec sleep 30) &
holder=$!
started+=("$holder")
sleep 0.5
postrm kept "$ledger kept, until reboot: its lock is held"
kill "$holder"
wait "$holder" 2>/dev/null || true
started=()
postrm gone
mkdir "$work/elsewhere" && : >"$work/elsewhere/keep" && ln -s "$work/elsewhere" "$ledger"
postrm kept
[ -f "$work/elsewhere/keep" ] || fail "postrm remove followed the symlink $ledger"
echo "package: postrm remove: ledger kept for a running VM, removed once it is gone: ok"

# prerm on remove gives back each QEMU binary the package's
# qemu-pin-takeover took over (else its path would name a qemu-pin that is
# gone, and every VM started by it fail), the very same file, and leaves a
# takeover to another qemu-pin alone; on upgrade it changes nothing. On a
# scratch root with its own dpkg database (dpkg-divert --root, DPKG_ROOT).
tko=$work/takeover-root
mkdir -p "$tko/var/lib/dpkg" "$tko/usr/local/bin"
dpkg -x "$deb" "$tko"
printf 'the real QEMU\n' >"$tko/usr/bin/qemu-system-x86_64"
printf 'pve-qemu-kvm\n' >"$tko/usr/bin/kvm"
cp "$tko/usr/bin/qemu-pin" "$tko/usr/local/bin/qemu-pin"
ident() { echo "$(stat -c '%i %a' "$tko$1") $(sha256sum <"$tko$1" | cut -d' ' -f1)"; }
qemu_before=$(ident /usr/bin/qemu-system-x86_64)
kvm_before=$(ident /usr/bin/kvm)
sh "$tko/usr/sbin/qemu-pin-takeover" --root "$tko" install /usr/bin/qemu-system-x86_64 >/dev/null
sh "$tko/usr/sbin/qemu-pin-takeover" --root "$tko" --qemu-pin /usr/local/bin/qemu-pin \
  install /usr/bin/kvm >/dev/null
diversions() { dpkg-divert --root "$tko" --list | sort | paste -sd';'; }
both="local diversion of /usr/bin/kvm to /usr/bin/kvm.distrib;local diversion of /usr/bin/qemu-system-x86_64 to /usr/bin/qemu-system-x86_64.distrib"
[ "$(diversions)" = "$both" ] || fail "qemu-pin-takeover install on a scratch root: diversions: $(diversions)"
[ -f "$work/control/prerm" ] ||
  fail "the package has no prerm: removing it leaves /usr/bin/qemu-system-x86_64 a symlink to the removed qemu-pin"
said=$(DPKG_ROOT=$tko sh "$work/control/prerm" upgrade "$version" 2>&1) || fail "prerm upgrade: $said"
[ "$(diversions)" = "$both" ] && [ "$(readlink "$tko/usr/bin/qemu-system-x86_64")" = qemu-pin ] ||
  fail "prerm upgrade undid a takeover: $(diversions)"
said=$(DPKG_ROOT=$tko sh "$work/control/prerm" remove 2>&1) || fail "prerm remove: $said"
[ ! -L "$tko/usr/bin/qemu-system-x86_64" ] && [ "$(ident /usr/bin/qemu-system-x86_64)" = "$qemu_before" ] ||
  fail "prerm remove did not put the original /usr/bin/qemu-system-x86_64 back (said: $said)"
[ "$(diversions)" = "local diversion of /usr/bin/kvm to /usr/bin/kvm.distrib" ] ||
  fail "prerm remove: diversions left: $(diversions) (expected only the takeover to /usr/local/bin/qemu-pin)"
[ "$(readlink "$tko/usr/bin/kvm")" = /usr/local/bin/qemu-pin ] && [ "$(ident /usr/bin/kvm.distrib)" = "$kvm_before" ] ||
  fail "prerm remove touched the takeover of /usr/bin/kvm by another qemu-pin"
echo "$said" | grep -q '/usr/bin/qemu-system-x86_64 is the real QEMU again' ||
  fail "prerm remove did not say what it gave back: $said"
echo "package: prerm remove: the package's takeover undone, the original file back, another qemu-pin's kept: ok"

if [ -n "$out" ]; then
  mkdir -p "$out"
  cp "$deb" "$out/"
  echo "package: $(basename "$deb") kept in $out"
fi
echo "package: ok: $(basename "$deb") ($(du -k "$deb" | cut -f1) KiB), built in ${build_s} s, checked in $(( $(date +%s) - start - build_s )) s"
