# In-lab test, every shape: the lab host is the shape run-lab.sh promises
# (numactl, sysfs), and `qemu-pin topology --json` reads the same nodes, CPU
# lists, distances and SMT siblings from it.
. "$QP_LAB_SRC/lib.sh"

# Expected, per shape: node CPU lists, the distance row of node 0, CPUs per core.
case $QP_LAB_SHAPE in
  4n) nodes="0-1 2-3 4-5 6-7" row0="10 20 20 20" smt=1 ;;
  2s2n) nodes="0-1 2-3 4-5 6-7" row0="10 12 32 32" smt=1 ;;
  smt) nodes="0-3 4-7" row0="10 20" smt=2 ;;
  cpuless) nodes="0-1 2-3 -" row0="10 20 17" smt=1 ;;
  *) fail "no expectations for shape '$QP_LAB_SHAPE'" ;;
esac
n=$(echo "$nodes" | wc -w)

numactl -H >numactl.txt || fail "numactl -H failed"
sed 's/^/lab: numactl: /' numactl.txt
assert_eq "numactl: available nodes" "available: $n nodes (0-$((n - 1)))" "$(head -n 1 numactl.txt)"
i=0
for c in $nodes; do
  want=$(list_expand "$( [ "$c" = - ] || echo "$c")")
  assert_eq "numactl: node $i cpus" "node $i cpus:${want:+ $want}" \
    "$(grep "^node $i cpus:" numactl.txt | sed 's/ *$//')"
  i=$((i + 1))
done
assert_eq "numactl: distances from node 0" "0: $row0" \
  "$(grep '^ *0:' numactl.txt | tr -s ' ' | sed 's/^ //; s/ $//')"
assert_eq "SMT siblings of CPU 0" "$smt" "$(list_expand "$(cpu_siblings 0)" | wc -w)"

[ -x "${QP_BINARY:-}" ] || fail "QP_BINARY '${QP_BINARY:-}' is not an executable"
"$QP_BINARY" topology --json >topology.json 2>topology.err \
  || fail "qemu-pin topology --json failed: $(head -n 1 topology.err)"
jq -e 'type == "object"' topology.json >/dev/null 2>&1 \
  || fail "qemu-pin topology --json printed no JSON object: $(head -c 200 topology.json)"
jq -r '
  "nodes \(.nodes | length)",
  (.nodes[] | "node \(.id) \(if .cpus == "" then "-" else .cpus end) \(.distances | map(tostring) | join(" "))"),
  "maxsmt \([.cores[] | .cpus | split(",") | map(if test("-") then (split("-") | (.[1]|tonumber) - (.[0]|tonumber) + 1) else 1 end) | add] | max)"
' topology.json >topology.flat || fail "qemu-pin topology --json: unexpected layout"
sed 's/^/lab: qemu-pin topology: /' topology.flat
assert_eq "qemu-pin topology: nodes" "nodes $n" "$(grep '^nodes ' topology.flat)"
i=0
for c in $nodes; do
  got=$(awk -v i="$i" '$1 == "node" && $2 == i { print $3 }' topology.flat)
  assert_eq "qemu-pin topology: CPUs of node $i" "$c" "$got"
  i=$((i + 1))
done
assert_eq "qemu-pin topology: distances from node 0" "$row0" \
  "$(awk '$1 == "node" && $2 == 0 { $1 = $2 = $3 = ""; print }' topology.flat | sed 's/^ *//')"
assert_eq "qemu-pin topology: CPUs per core" "maxsmt $smt" "$(grep '^maxsmt ' topology.flat)"
exit 0
