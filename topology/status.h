/* `qemu-pin status`: what the ledger holds, per host node and per VM. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

#include "topology/claims.h"
#include "topology/host.h"
#include "topology/placement.h"

G_BEGIN_DECLS

/* Per node totals and the VMs holding CLAIMS, as JSON and as text (OPTS
 * gives the host reserve; NULL: none). */
JsonNode *qp_status_to_json(const QpHost *host, const QpClaims *claims,
                            const QpPlacementOptions *opts);
char *qp_status_to_text(const QpHost *host, const QpClaims *claims,
                        const QpPlacementOptions *opts);

G_END_DECLS
