/* Helpers for tests that plan on the recorded hosts (qp-plan-test.h). */
#include "tests/common/qp-plan-test.h"

#include <string.h>

QpHost *
qp_test_recorded(const char *name)
{
  g_autofree char *path =
      g_build_filename(g_getenv("QP_TOPOLOGIES"), name, NULL);
  g_autoptr(GError) error = NULL;
  QpHost *h = qp_host_load(path, &error);
  g_assert_no_error(error);
  g_assert_nonnull(h);
  return h;
}

static QpPlan *
plan(const QpHost *h, const QpClaims *claims, const QpRequest *r, QpMode mode,
     GError **error)
{
  QpPlacementOptions opts;
  qp_placement_options_init(&opts);
  opts.mode = mode;
  QpPlan *p = qp_plan_compute(h, claims, r, &opts, error);
  qp_placement_options_clear(&opts);
  return p;
}

QpPlan *
qp_test_plan_ok(const QpHost *h, const QpClaims *claims, const QpRequest *r,
                QpMode mode)
{
  g_autoptr(GError) error = NULL;
  QpPlan *p = plan(h, claims, r, mode, &error);
  g_assert_no_error(error);
  g_assert_nonnull(p);
  return p;
}

GError *
qp_test_plan_nofit(const QpHost *h, const QpRequest *r, QpMode mode)
{
  GError *error = NULL;
  g_autoptr(QpPlan) p = plan(h, NULL, r, mode, &error);
  g_assert_null(p);
  g_assert_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT);
  g_assert_null(strchr(error->message, '\n'));
  return error;
}

guint64
qp_test_mem_on(const QpPlan *p, int node)
{
  guint64 mib = 0;
  for (guint i = 0; i < p->claim_mem->len; i++)
    if (g_array_index(p->claim_mem, QpNodeAmount, i).node == node)
      mib += g_array_index(p->claim_mem, QpNodeAmount, i).mib;
  return mib;
}

guint64
qp_test_pages_on(const QpPlan *p, int node, guint64 page_kib)
{
  guint64 pages = 0;
  for (guint i = 0; i < p->claim_huge->len; i++) {
    const QpHugeClaim *h = &g_array_index(p->claim_huge, QpHugeClaim, i);
    if (h->node == node && h->page_kib == page_kib)
      pages += h->pages;
  }
  return pages;
}
