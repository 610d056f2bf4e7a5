/* The guest topology suggested with --vnuma (topology/plan/vnuma.c). */
#pragma once

#include "topology/plan/plan.h"

G_BEGIN_DECLS

/* Fills PLAN's vnuma fields for a guest without vNUMA: the guest topology
 * mirroring the placement of its first PLACED vCPUs. */
void qp_plan_suggest_vnuma(QpPlan *plan, const QpHost *host,
                           const QpRequest *req, guint placed);

G_END_DECLS
