#!/bin/sh
# Runs inside the Linux guest of `tests/demo.sh --linux` (the NUMA lab's boot
# image: this machine's userland over 9p, read-only): prints the guest's own
# NUMA layout as its kernel sees it. The guest powers off when it returns.
echo "== inside the guest: its NUMA nodes (from /sys/devices/system/node)"
for d in /sys/devices/system/node/node*; do
  n=${d##*/node}
  kib=$(sed -n 's/^Node [0-9]* MemTotal: *\([0-9]*\) kB$/\1/p' "$d/meminfo")
  echo "guest node $n: CPUs $(cat "$d/cpulist"), $((kib / 1024)) MiB"
done
if command -v numactl >/dev/null; then
  echo
  echo "== inside the guest: numactl -H"
  numactl -H
fi
echo
echo "== inside the guest: its virtio block devices (from /sys/bus/pci/devices)"
for d in /sys/bus/pci/devices/*; do
  [ "$(cat "$d/vendor")" = 0x1af4 ] || continue
  case $(cat "$d/class") in 0x0100*) ;; *) continue ;; esac
  echo "guest disk ${d##*/} on guest node $(cat "$d/numa_node")"
done
