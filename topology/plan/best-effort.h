/* Best effort, for mode auto (topology/plan/best-effort.c). */
#pragma once

#include "topology/plan/internal.h"

G_BEGIN_DECLS

/* Mode auto when the vCPUs do not fit what balanced or numa (PLAN->mode)
 * would give: widens the placement over more CPUs, sharing them, and says
 * in one warning what it could not give. Fails only for memory and for
 * options that leave no CPU at all. */
gboolean qp_plan_best_effort(QpPlan *plan, const Ctx *ctx, GError **error);

G_END_DECLS
