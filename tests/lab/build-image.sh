#!/bin/sh
# Builds the NUMA lab's boot image in BUILDDIR/lab/: Debian's current
# linux-image-amd64 kernel (downloaded, extracted with dpkg -x, never
# installed) and an initramfs with busybox-static, the virtio/9p modules and an
# /init that mounts this machine's root read-only over 9p, chroots into it and
# runs the script named on the kernel command line (qp_script=PATH).
#
# Usage: tests/lab/build-image.sh BUILDDIR
# Cached: does nothing when BUILDDIR/lab/initramfs.gz exists and is newer than
# this script. Set QP_LAB_REBUILD=1 to force a rebuild.
set -eu

die() { echo "build-image: $*" >&2; exit 1; }

[ $# -eq 1 ] || die "usage: build-image.sh BUILDDIR"
builddir=$1
[ -d "$builddir" ] || die "build directory '$builddir' does not exist"
lab=$(cd "$builddir" && pwd)/lab
self=$0

if [ -z "${QP_LAB_REBUILD:-}" ] && [ -s "$lab/initramfs.gz" ] && [ -s "$lab/vmlinuz" ] \
   && [ "$lab/initramfs.gz" -nt "$self" ]; then
  exit 0
fi

start=$(date +%s)
mkdir -p "$lab/debs"

# apt-get download needs package lists; on a fresh machine there are none yet.
updated=
apt_update_once() {
  [ -z "$updated" ] || return 1
  updated=1
  echo "build-image: running apt-get update" >&2
  apt-get update >"$lab/apt-update.log" 2>&1 || die "apt-get update failed, see $lab/apt-update.log"
}

# The kernel package that linux-image-amd64 currently depends on.
kernel_pkg() {
  apt-cache depends linux-image-amd64 2>/dev/null \
    | sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*\)$/\1/p' | head -n 1
}

download() { # PKG: downloads PKG's .deb into $lab/debs, prints its path
  ( cd "$lab/debs" && rm -f "$1"_*.deb \
    && apt-get download "$1" >"$lab/apt-download.log" 2>&1 ) \
    || { apt_update_once && ( cd "$lab/debs" && apt-get download "$1" >"$lab/apt-download.log" 2>&1 ); } \
    || die "apt-get download $1 failed, see $lab/apt-download.log"
  ls "$lab/debs/$1"_*.deb | head -n 1
}

kpkg=$(kernel_pkg)
if [ -z "$kpkg" ]; then
  apt_update_once || true
  kpkg=$(kernel_pkg)
fi
[ -n "$kpkg" ] || die "apt-cache finds no kernel package behind linux-image-amd64"
kdeb=$(download "$kpkg")

rm -rf "$lab/kernel" "$lab/root"
mkdir -p "$lab/kernel"
dpkg -x "$kdeb" "$lab/kernel"
# Debian 12's kernel packages ship their modules in lib/modules, Debian 13's
# (merged /usr) in usr/lib/modules.
kmods=$lab/kernel/lib/modules
[ -d "$kmods" ] || kmods=$lab/kernel/usr/lib/modules
kver=$(ls "$kmods" 2>/dev/null | head -n 1)
[ -n "$kver" ] || die "$kdeb has no lib/modules/<version> nor usr/lib/modules/<version>"
cp "$lab/kernel/boot/vmlinuz-$kver" "$lab/vmlinuz.new"

# The uncompressed ELF kernel boots through PVH (QEMU loads it directly: no
# real-mode setup, no decompression under TCG), 10-12 s sooner than the
# bzImage. Only with CONFIG_PVH; run-lab.sh falls back to vmlinuz without it.
rm -f "$lab/vmlinux"
if grep -q '^CONFIG_PVH=y' "$lab/kernel/boot/config-$kver" 2>/dev/null; then
  for fmt in xz zstd gzip; do
    case $fmt in
      xz) magic=$(printf '\3757zXZ') ;;
      zstd) magic=$(printf '\050\265\057\375') ;;
      gzip) magic=$(printf '\037\213\010') ;;
    esac
    for off in $(LC_ALL=C grep -abo "$magic" "$lab/vmlinuz.new" | cut -d: -f1 | head -n 3); do
      tail -c +$((off + 1)) "$lab/vmlinuz.new" | $fmt -dc >"$lab/vmlinux.new" 2>/dev/null || true
      if [ "$(head -c 4 "$lab/vmlinux.new" | od -An -c | tr -d ' ')" = '177ELF' ]; then
        mv "$lab/vmlinux.new" "$lab/vmlinux"
        break 2
      fi
    done
  done
  rm -f "$lab/vmlinux.new"
fi

# busybox: the installed static one, else extracted from busybox-static.
busybox=
if dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'ok installed'; then
  busybox=/bin/busybox
else
  bdeb=$(download busybox-static)
  mkdir -p "$lab/busybox"
  dpkg -x "$bdeb" "$lab/busybox"
  busybox=$lab/busybox/bin/busybox
fi
[ -x "$busybox" ] || die "no busybox-static binary at $busybox"

# Modules in dependency order. Each is looked up in this kernel's tree; one
# that is built in (modules.builtin) is skipped; dependencies named in a
# module's .modinfo are loaded first.
mods=$kmods/$kver
modfile() { find "$mods/kernel" -name "$1.ko" -o -name "$1.ko.xz" -o -name "$1.ko.zst" | head -n 1; }
builtin() { grep -q "/$1\.ko\$" "$mods/modules.builtin" 2>/dev/null; }
moddeps() { # FILE: the modules FILE depends on
  case $1 in
    *.xz) xz -dc "$1" ;;
    *.zst) zstd -dc "$1" ;;
    *) cat "$1" ;;
  esac | tr '\0' '\n' | sed -n 's/^depends=//p' | tr ',' ' '
}
order=
add_module() {
  local name f d
  name=$(echo "$1" | tr - _)
  case " $order " in *" $name "*) return 0 ;; esac
  if builtin "$name" || builtin "$(echo "$1" | tr _ -)"; then return 0; fi
  f=$(modfile "$name")
  [ -n "$f" ] || f=$(modfile "$(echo "$1" | tr _ -)")
  [ -n "$f" ] || die "module $1 is neither in $mods nor built in"
  for d in $(moddeps "$f"); do add_module "$d"; done
  order="$order $name"
}
for m in virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci \
         netfs fscache 9pnet 9pnet_virtio 9p virtio_blk; do
  add_module "$m"
done

root=$lab/root
mkdir -p "$root/bin" "$root/dev" "$root/proc" "$root/sys" "$root/newroot" "$root/modules"
cp "$busybox" "$root/bin/busybox"
: >"$root/modules/order"
for m in $order; do
  f=$(modfile "$m")
  case $f in
    *.xz) xz -dc "$f" >"$root/modules/$m.ko" ;;
    *.zst) zstd -dc "$f" >"$root/modules/$m.ko" ;;
    *) cp "$f" "$root/modules/$m.ko" ;;
  esac
  echo "$m" >>"$root/modules/order"
done

cat >"$root/init" <<'EOF'
#!/bin/busybox sh
# NUMA lab init: host root over 9p (read-only), chroot, run qp_script, verdict.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
exec </dev/console >/dev/console 2>&1
# Where a boot that never reaches its script got stuck: before this line
# (the kernel) or after it (modules, 9p mounts).
echo "QP-LAB-INIT: /init runs at $(cut -d' ' -f1 /proc/uptime) s of uptime"

verdict() { # PASS | FAIL REASON | SKIP REASON
  if [ "$1" = PASS ]; then echo "QP-LAB-VERDICT: PASS"; else echo "QP-LAB-VERDICT: $1 $2"; fi
  sync
  poweroff -f
  echo o >/proc/sysrq-trigger
  sleep 30
}

script=
for arg in $(cat /proc/cmdline); do
  case $arg in qp_script=*) script=${arg#qp_script=} ;; esac
done
[ -n "$script" ] || verdict FAIL "no qp_script= on the kernel command line"

for m in $(cat /modules/order); do
  insmod /modules/$m.ko || verdict FAIL "insmod $m failed"
done

mount -t 9p -o ro,trans=virtio,version=9p2000.L,msize=262144,cache=loose hostroot /newroot \
  || verdict FAIL "cannot mount the host root over 9p (tag hostroot)"
mount -t proc proc /newroot/proc
mount -t sysfs sysfs /newroot/sys
mount -t devtmpfs devtmpfs /newroot/dev
mount -t tmpfs -o mode=1777 tmpfs /newroot/tmp
mount -t tmpfs -o mode=0755 tmpfs /newroot/run
mkdir -p /newroot/dev/shm /newroot/dev/pts
mount -t tmpfs -o mode=1777 tmpfs /newroot/dev/shm
mount -t devpts devpts /newroot/dev/pts 2>/dev/null
mount -t cgroup2 cgroup2 /newroot/sys/fs/cgroup 2>/dev/null
# Folders of the host under /tmp or /run (a build tree there) are hidden by
# the tmpfs above: run-lab.sh shares each one again (qp_mount=TAG:PATH).
for arg in $(cat /proc/cmdline); do
  case $arg in
    qp_mount=*)
      spec=${arg#qp_mount=}
      mkdir -p "/newroot${spec#*:}"
      mount -t 9p -o ro,trans=virtio,version=9p2000.L,msize=262144,cache=loose \
        "${spec%%:*}" "/newroot${spec#*:}" || verdict FAIL "cannot mount ${spec#*:} over 9p"
      ;;
  esac
done
[ -f "/newroot$script" ] || verdict FAIL "script $script not found in the host root"

# The script runs in the host's userland with a writable scratch directory.
# The line below tells run-lab.sh that the boot is done: a boot that never
# prints it within --boot-timeout is stopped and booted again.
mkdir -p /newroot/tmp/lab
echo "QP-LAB-SCRIPT: $script starts at $(cut -d' ' -f1 /proc/uptime) s of uptime"
chroot /newroot /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  HOME=/tmp/lab TMPDIR=/tmp QP_LAB_SCRATCH=/tmp/lab QP_LAB_REASON=/tmp/lab/.reason \
  /bin/sh -c 'cd /tmp/lab && exec /bin/sh "$0"' "$script"
rc=$?
if [ $rc -eq 0 ]; then
  verdict PASS
elif [ $rc -eq 77 ]; then
  reason=$(tail -n 1 /newroot/tmp/lab/.reason 2>/dev/null)
  verdict SKIP "${reason#SKIP }"
else
  reason=$(tail -n 1 /newroot/tmp/lab/.reason 2>/dev/null)
  verdict FAIL "${reason:-script exited with status $rc}"
fi
EOF
chmod 755 "$root/init"

( cd "$root" && find . | "$busybox" cpio -o -H newc 2>/dev/null ) | gzip -1 >"$lab/initramfs.gz.new"
mv "$lab/vmlinuz.new" "$lab/vmlinuz"
mv "$lab/initramfs.gz.new" "$lab/initramfs.gz"
echo "$kver" >"$lab/kernel-version"
rm -rf "$lab/kernel" "$lab/debs"  # 400 MB of modules we no longer need
echo "build-image: kernel $kver$([ -s "$lab/vmlinux" ] && echo ' (PVH vmlinux)'), modules:$order ($(( $(date +%s) - start )) s)" >&2
