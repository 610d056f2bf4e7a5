/* Helpers for tests that plan on the recorded hosts in tests/data/topologies
 * (QP_TOPOLOGIES) with the planner's default options. */
#pragma once

#include <glib.h>

#include "topology/plan/plan.h"

G_BEGIN_DECLS

/* The recorded host NAME ("intel-2s-smt.xml"). */
QpHost *qp_test_recorded(const char *name);

/* The plan for R on H with CLAIMS (may be NULL) in MODE; asserts it fits. */
QpPlan *qp_test_plan_ok(const QpHost *h, const QpClaims *claims,
                        const QpRequest *r, QpMode mode);

/* The error for R on H in MODE; asserts one line and "does not fit". */
GError *qp_test_plan_nofit(const QpHost *h, const QpRequest *r, QpMode mode);

/* MiB of ordinary memory, and pages of PAGE_KIB, PLAN claims on NODE. */
guint64 qp_test_mem_on(const QpPlan *plan, int node);
guint64 qp_test_pages_on(const QpPlan *plan, int node, guint64 page_kib);

G_END_DECLS
