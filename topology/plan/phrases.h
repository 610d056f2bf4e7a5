/* The words of the planner's reasons and refusals (topology/plan/). */
#pragma once

#include "topology/plan/context.h"

G_BEGIN_DECLS

/* "8192 MiB" or "8192 MiB of 2048 KiB hugepages (4096 pages)" */
char *mem_phrase(const Ctx *ctx, guint c, guint64 units);
/* What NEED (units per class) holds: "1024 MiB and 2048 MiB of 2048 KiB
 * hugepages (1024 pages)". */
char *need_phrase(const Ctx *ctx, const guint64 *need);
/* "16384 MiB uncommitted, 2048 MiB uncommitted in 2048 KiB hugepages":
 * node index I in AVAIL, over the classes the guest uses. */
char *avail_phrase(const Ctx *ctx, const guint64 *avail, guint i);
/* "(16124 MiB total, 12028 MiB claimed, 512 MiB reserved)": class C of
 * node index I. */
char *node_mem_detail(const Ctx *ctx, guint c, guint i);
/* "usable CPUs", "free cores", ... */
const char *cap_unit_name(CapKind cap);
/* "guest", or "guest node 1" */
char *gnode_name(const Ctx *ctx, int gi);
/* "guest node 1", or "pc-dimm dimm0 of guest node 1" for a device. */
char *piece_name(const Ctx *ctx, const Piece *p);
/* " in affinity 0-7 on host nodes 0-1 of CPU kind 1 (4 CPUs dedicated to
 * other VMs)": where a refusal looked, CAND the candidate nodes. */
char *scope_phrase(const Ctx *ctx, const Attempt *a, const gboolean *cand);

/* "WHO needs NEED but the best node N has only M MiB uncommitted (...)":
 * node index I, the best there was, holds less than NEED units of class C
 * in AVAIL. */
void set_node_short_error(const Ctx *ctx, const guint64 *avail, guint i,
                          guint c, guint64 need, const char *who,
                          GError **error);
/* --device-locality=required, and no guest node on node index I, which
 * holds a vfio device of the guest. */
void set_device_node_error(const Ctx *ctx, guint i, GError **error);

G_END_DECLS
