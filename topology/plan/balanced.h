/* Mode balanced (topology/plan/balanced.c). */
#pragma once

#include "topology/plan/internal.h"

G_BEGIN_DECLS

/* Balanced on A: the fewest nodes holding the memory and CPU_NEED usable
 * CPUs (the vCPUs, or fewer when the placement is best effort). */
gboolean qp_plan_balanced(QpPlan *plan, const Ctx *ctx, Attempt *a,
                          guint cpu_need, GError **error);

G_END_DECLS
