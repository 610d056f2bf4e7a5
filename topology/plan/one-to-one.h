/* Mode one-to-one (topology/plan/one-to-one.c). */
#pragma once

#include "topology/plan/context.h"

G_BEGIN_DECLS

/* One-to-one on A, down the SMT ladder --smt allows. */
gboolean plan_o2o(QpPlan *plan, const Ctx *ctx, Attempt *a, GError **error);

/* Picks one PU per vCPU of VCPUS on the cores of node index I. */
void pick_cores(QpPlan *plan, const Ctx *ctx, Attempt *a, CapKind cap, guint i,
                hwloc_const_bitmap_t vcpus);
/* "vCPUs 0-1 -> CPUs 0-1 on host node 0, one physical core each" (WHO
 * first when not empty). */
void reason_cores(QpPlan *plan, const Ctx *ctx, guint i,
                  hwloc_const_bitmap_t vcpus, CapKind cap, const char *who);

/* The cores a vCPU plugged later may take, best first: free cores of the
 * VM's own nodes, then of other nodes, of the kind the boot vCPUs run on
 * (of hwloc_bitmap_t). */
GPtrArray *spare_cores(const QpHost *host, const QpClaims *claims,
                       const QpPlacementOptions *opts, const QpPlan *plan);

G_END_DECLS
