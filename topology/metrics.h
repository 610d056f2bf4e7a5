/* `qemu-pin status --metrics`: the ledger in Prometheus's text exposition
 * format, what node_exporter's textfile collector reads. */
#pragma once

#include <glib.h>

#include "topology/claims.h"
#include "topology/host.h"
#include "topology/placement.h"

G_BEGIN_DECLS

/* Per host node memory, hugepages and CPUs, per VM claim, and the
 * ledger's record counts, from the same counts as qp_status_to_json()
 * (OPTS gives the host reserve; NULL: none). */
char *qp_status_to_metrics(const QpHost *host, const QpClaims *claims,
                           const QpPlacementOptions *opts);

G_END_DECLS
