/* The words of the planner's reasons and refusals (topology/plan/). */
#pragma once

#include "topology/plan/internal.h"

G_BEGIN_DECLS

/* "8192 MiB" or "8192 MiB of 2048 KiB hugepages (4096 pages)" */
char *qp_plan_mem_phrase(const Ctx *ctx, guint c, guint64 units);
/* What NEED (units per class) holds: "1024 MiB and 2048 MiB of 2048 KiB
 * hugepages (1024 pages)". */
char *qp_plan_need_phrase(const Ctx *ctx, const guint64 *need);
/* "16384 MiB uncommitted, 2048 MiB uncommitted in 2048 KiB hugepages":
 * node index I in AVAIL, over the classes the guest uses. */
char *qp_plan_avail_phrase(const Ctx *ctx, const guint64 *avail, guint i);
/* "(16124 MiB total, 12028 MiB claimed, 512 MiB reserved)": class C of
 * node index I. */
char *qp_plan_node_mem_detail(const Ctx *ctx, guint c, guint i);
/* "usable CPUs", "free cores", ... ("usable CPU" ... for N of 1). */
const char *qp_plan_cap_unit_name(CapKind cap, guint n);
/* "guest", or "guest node 1" */
char *qp_plan_gnode_name(const Ctx *ctx, int gi);
/* "guest node 1", or "pc-dimm dimm0 of guest node 1" for a device. */
char *qp_plan_piece_name(const Ctx *ctx, const Piece *p);
/* " in affinity 0-7 on host nodes 0-1 of CPU kind 1 (4 CPUs dedicated to
 * other VMs)": where a refusal looked, CAND the candidate nodes. */
char *qp_plan_scope_phrase(const Ctx *ctx, const Attempt *a,
                           const gboolean *cand);

/* "WHO needs NEED but the best node N has only M MiB uncommitted (...)":
 * node index I, the best there was, holds less than NEED units of class C
 * in AVAIL. */
/* Whether ERROR (a refusal) is for memory: every memory shortfall says
 * the MiB uncommitted where it fell short. CPU-side notes (--smt=strict,
 * CPU kinds) are not for those. */
gboolean qp_plan_error_is_memory(const GError *error);

void qp_plan_set_node_short_error(const Ctx *ctx, const guint64 *avail, guint i,
                                  guint c, guint64 need, const char *who,
                                  GError **error);
/* --device-locality=required, and no guest node on node index I, which
 * holds a vfio device of the guest. */
void qp_plan_set_device_node_error(const Ctx *ctx, guint i, GError **error);

G_END_DECLS
