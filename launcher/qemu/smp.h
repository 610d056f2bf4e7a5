/* -smp (and -machine smp.*): the guest's vCPU topology, as QEMU 7.2's
 * machine_parse_smp_config() computes it. */
#pragma once

#include "launcher/qemu/args.h"

G_BEGIN_DECLS

/* Reads the -smp items KV (of QpKvPair) into A->req, for the machine type
 * A->machine_info. */
gboolean qp_smp_read(QpQemuArgs *a, GArray *kv, GError **error);

/* Topology ids of a vCPU: socket-major, then die, cluster, core, thread. */
typedef struct {
  guint64 socket, die, module, cluster, core, thread;
} QpTopoIds;

/* The ids of vCPU INDEX in R's topology (x86_topo_ids_from_idx). */
QpTopoIds qp_smp_topo_ids(const QpRequest *r, guint index);

G_END_DECLS
