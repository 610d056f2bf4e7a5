/* Cores given to vCPUs (topology/plan/cores.c): under one-to-one, with
 * vNUMA (numa.c) or without (one-to-one.c). */
#pragma once

#include "topology/plan/internal.h"

G_BEGIN_DECLS

/* Picks one PU per vCPU of VCPUS on the cores of node index I. */
void qp_plan_pick_cores(QpPlan *plan, const Ctx *ctx, Attempt *a, CapKind cap,
                        guint i, hwloc_const_bitmap_t vcpus);
/* "vCPUs 0-1 -> CPUs 0-1 on host node 0, one physical core each" (WHO
 * first when not empty). */
void qp_plan_reason_cores(QpPlan *plan, const Ctx *ctx, guint i,
                          hwloc_const_bitmap_t vcpus, CapKind cap,
                          const char *who);

G_END_DECLS
