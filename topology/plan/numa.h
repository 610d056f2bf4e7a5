/* Mode numa, and one-to-one with vNUMA (topology/plan/numa.c). */
#pragma once

#include "topology/plan/internal.h"

G_BEGIN_DECLS

/* Each guest node (the whole guest without vNUMA) to one host node, on A.
 * O2O: one-to-one, whose vCPUs take CAP units (cores, sibling groups or
 * PUs) and add no shared load; else numa, whose vCPUs float on the host
 * node's CPUs. */
gboolean qp_plan_by_gnode(QpPlan *plan, const Ctx *ctx, Attempt *a,
                          gboolean o2o, CapKind cap, GError **error);

G_END_DECLS
