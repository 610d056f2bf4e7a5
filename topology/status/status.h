/* The views: what `qemu-pin topology`, `qemu-pin plan` and `qemu-pin
 * status` print, one file per output (lstopo's way): human.c for people,
 * json.c for machines, metrics.c for Prometheus, picture.c drawn by lstopo.
 * Pure functions of what the caller read (the host, the ledger's claims, a
 * plan), except the picture, which runs lstopo. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

#include "topology/host/host.h"
#include "topology/ledger/claims.h"
#include "topology/plan/placement.h"
#include "topology/plan/plan.h"
#include "topology/plan/rebalance.h"

G_BEGIN_DECLS

/* `qemu-pin topology`: the host model. */
JsonNode *qp_host_to_json(const QpHost *host);
char *qp_host_to_text(const QpHost *host);

/* `qemu-pin plan`: the plan (docs/plan-schema.md), and with --human a
 * table of it (HOST names the nodes it claims on). */
JsonNode *qp_plan_to_json(const QpPlan *plan);
char *qp_plan_to_human(const QpPlan *plan, const QpHost *host);

/* `qemu-pin status`: per node totals and the VMs holding CLAIMS, as JSON
 * and as text (OPTS gives the host reserve; NULL: none). */
JsonNode *qp_status_to_json(const QpHost *host, const QpClaims *claims,
                            const QpPlacementOptions *opts);
char *qp_status_to_text(const QpHost *host, const QpClaims *claims,
                        const QpPlacementOptions *opts);

/* The moves a rebalance would make (MOVES, of QpMove*; NULL: none), as
 * `rebalance --json` and `status --json` give them: an array of {vm, from,
 * to, mib}. */
JsonNode *qp_moves_to_json(const GPtrArray *moves);

/* `status`: adds {"moves": [...]} as STATUS's member "rebalance". */
void qp_status_json_add_moves(JsonNode *status, const GPtrArray *moves);

/* `status`: a section listing MOVES (VM names from CLAIMS), or "" when
 * there are none. */
char *qp_status_moves_to_text(const GPtrArray *moves, const QpClaims *claims);

/* `status --metrics`: per host node memory, hugepages and CPUs, per VM
 * claim, and the ledger's record counts in Prometheus's text exposition
 * format (what node_exporter's textfile collector reads), from the same
 * counts as qp_status_to_json(). */
char *qp_status_to_metrics(const QpHost *host, const QpClaims *claims,
                           const QpPlacementOptions *opts);

/* `status --picture`: the host (live, or the recorded XML_PATH) drawn by
 * hwloc's own renderer (lstopo), each VM of CLAIMS in its own colour (its
 * dedicated CPUs and the nodes holding its memory) with a legend, to OUT;
 * the format follows OUT's extension (.png or .svg). */
gboolean qp_status_picture(const char *xml_path, const QpClaims *claims,
                           const char *out, GError **error);

/* Whether qp_status_picture() draws OUT's format; else ERROR (its domain
 * QP_TOPOLOGY_ERROR) names OUT and the formats it draws. */
gboolean qp_status_picture_format_known(const char *out, GError **error);

G_END_DECLS
