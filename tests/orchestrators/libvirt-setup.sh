#!/bin/sh
# Prepares this machine's libvirtd for the orchestrator tests and starts it:
# idempotent, as root. With the argument "restart", restarts libvirtd (the
# way this machine runs it: systemd, or a daemon of its own) and waits for
# it. Exit 0: `virsh -c qemu:///system` works. Exit 77: this
# machine cannot run the tests (not root, libvirt not installed), with the
# reason on stdout. Other exit: setup failed, with the reason on stderr.
#
# What it changes, and why each is harmless to other tests:
#  - groups kvm, libvirt-qemu and the system user libvirt-qemu (what the
#    Debian package creates anyway);
#  - /etc/libvirt/qemu.conf: QEMU runs as root with no security driver, no
#    namespaces, no cgroups and no chown of files, so that a guest started by
#    libvirtd inside a container can read test files under /tmp. The original
#    is kept once as qemu.conf.before-qemu-pin. Only libvirtd reads this file.
#  - starts virtlogd and libvirtd (through systemd where systemd runs the
#    machine, else daemonised) when they are not running, and restarts
#    libvirtd when it runs with another qemu.conf.
set -u

if [ "$(id -u)" -ne 0 ]; then
  echo "not root: the libvirt tests configure and start the system libvirtd"
  exit 77
fi
for b in libvirtd virtlogd virsh; do
  if ! command -v "$b" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$b" ]; then
    echo "$b is not installed (Debian: libvirt-daemon-system libvirt-clients)"
    exit 77
  fi
done
PATH="$PATH:/usr/sbin:/sbin"

getent group kvm >/dev/null || groupadd --system kvm || exit 1
getent group libvirt-qemu >/dev/null || groupadd --system libvirt-qemu || exit 1
getent passwd libvirt-qemu >/dev/null ||
  useradd --system --no-create-home --home-dir /var/lib/libvirt \
    --shell /usr/sbin/nologin -g libvirt-qemu -G kvm libvirt-qemu || exit 1

conf=/etc/libvirt/qemu.conf
marker="# Written by qemu-pin's tests/orchestrators/libvirt-setup.sh"
want="$marker
user = \"root\"
group = \"root\"
security_driver = \"none\"
namespaces = []
cgroup_controllers = []
dynamic_ownership = 0"
changed=0
if [ "$(cat "$conf" 2>/dev/null)" != "$want" ]; then
  if [ -f "$conf" ] && ! grep -qF "$marker" "$conf" &&
     [ ! -f "$conf.before-qemu-pin" ]; then
    cp -p "$conf" "$conf.before-qemu-pin" || exit 1
  fi
  mkdir -p /etc/libvirt || exit 1
  printf '%s\n' "$want" > "$conf.tmp" && chmod 600 "$conf.tmp" &&
    mv "$conf.tmp" "$conf" || exit 1
  changed=1
fi

alive() { # PIDFILE NAME: the daemon of PIDFILE runs
  [ -f "$1" ] || return 1
  pid=$(cat "$1" 2>/dev/null)
  [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ]
}

[ "${1:-}" = restart ] && changed=1

if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
  # A machine run by systemd: the units of the Debian package (socket
  # activation included) stay in charge.
  systemctl start virtlogd.socket virtlogd.service >/dev/null 2>&1 || true
  if [ "$changed" = 1 ]; then
    systemctl restart libvirtd.service ||
      { echo "systemctl restart libvirtd failed" >&2; exit 1; }
  else
    systemctl start libvirtd.service ||
      { echo "systemctl start libvirtd failed" >&2; exit 1; }
  fi
else
  if ! alive /run/virtlogd.pid virtlogd; then
    virtlogd -d || { echo "virtlogd -d failed" >&2; exit 1; }
  fi
  if alive /run/libvirtd.pid libvirtd && [ "$changed" = 1 ]; then
    # Running with another qemu.conf, or asked to: restart it (running
    # guests survive a libvirtd restart).
    pid=$(cat /run/libvirtd.pid)
    kill "$pid"
    i=0
    while [ -d "/proc/$pid" ] && [ $i -lt 300 ]; do
      sleep 0.1
      i=$((i + 1))
    done
    if [ -d "/proc/$pid" ]; then
      echo "libvirtd (pid $pid) did not stop within 30 s of SIGTERM" >&2
      exit 1
    fi
  fi
  if ! alive /run/libvirtd.pid libvirtd; then
    libvirtd -d || { echo "libvirtd -d failed" >&2; exit 1; }
  fi
fi

i=0
while [ $i -lt 300 ]; do
  if virsh -c qemu:///system version >/dev/null 2>&1; then
    exit 0
  fi
  sleep 0.1
  i=$((i + 1))
done
echo "libvirtd did not answer on qemu:///system within 30 s" >&2
virsh -c qemu:///system version >&2
exit 1
