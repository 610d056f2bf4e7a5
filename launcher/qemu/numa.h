/* -numa node, cpu and dist: the guest's NUMA nodes, their vCPUs, memory and
 * distances, as QEMU 7.2's numa.c reads and completes them. */
#pragma once

#include "launcher/qemu/args.h"

G_BEGIN_DECLS

/* Reads every -numa of OPTS (of QpOpt) into A->req's guest nodes, after
 * -smp, -m and the memory backends are read. */
gboolean qp_numa_read(QpQemuArgs *a, GArray *opts, GError **error);

G_END_DECLS
