#!/bin/sh
# Runs inside the Linux guest of tests/check-vnuma-dies-linux.sh: prints, per
# CPU, its die and the CPUs it shares its L3 with, as the guest kernel sees
# them. The guest powers off when it returns.
echo "== inside the guest: L3 sharing (from /sys/devices/system/cpu)"
for d in /sys/devices/system/cpu/cpu[0-9]*; do
  c=${d##*/cpu}
  l3=
  for i in "$d"/cache/index*; do
    [ "$(cat "$i/level" 2>/dev/null)" = 3 ] && l3=$(cat "$i/shared_cpu_list")
  done
  echo "guest cpu $c: die $(cat "$d/topology/die_id" 2>/dev/null || echo -), L3 shared with ${l3:-none}"
done
