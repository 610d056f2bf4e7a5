/* Mode one-to-one (topology/plan/one-to-one.c). */
#pragma once

#include "topology/plan/internal.h"

G_BEGIN_DECLS

/* One-to-one on A, down the SMT ladder --smt allows. */
gboolean qp_plan_o2o(QpPlan *plan, const Ctx *ctx, Attempt *a, GError **error);

/* The cores a vCPU plugged later may take, best first: free cores of the
 * VM's own nodes, then of other nodes, of the kind the boot vCPUs run on
 * (of hwloc_bitmap_t). */
GPtrArray *qp_plan_spare_cores(const QpHost *host, const QpClaims *claims,
                               const QpPlacementOptions *opts,
                               const QpPlan *plan);

G_END_DECLS
