#!/bin/sh
# lab-pin-latency: bench/pin-latency.sh inside the NUMA lab (tests/lab), for
# vCPU counts this host cannot place itself (it has fewer CPUs than vCPUs).
#
# Run on the host:
#   tests/lab/run-lab.sh --shape 4n --script bench/lab-pin-latency.sh \
#       --builddir BUILDDIR --timeout 900
# The lab is an emulated 4-node, 8-CPU host (QEMU TCG) and the guest QEMU
# inside it is emulated again, so every time is inflated by the emulation:
# the rows show how the keeper's work grows with vCPUs, not its speed.
# Table rows are printed with the prefix "LAB-ROW " on the console.
set -u
bench=$(cd "$QP_LAB_SRC/../../bench" && pwd)
tab=$QP_LAB_SCRATCH/latency.md
if ! bash "$bench/pin-latency.sh" --runs "${QP_BENCH_RUNS:-5}" \
    --vcpus "${QP_BENCH_VCPUS:-1 2 4 8}" --modes balanced \
    "$QP_BUILD_ROOT" > "$tab" 2>"$QP_LAB_SCRATCH/err"; then
  echo "lab-pin-latency: pin-latency.sh failed: $(head -n1 "$QP_LAB_SCRATCH/err")"
  exit 1
fi
sed 's/^/LAB-ROW /' "$tab"
