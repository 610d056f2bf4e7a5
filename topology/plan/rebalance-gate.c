/* The periodic rebalance's hysteresis (rebalance-gate.h). */
#include "topology/plan/rebalance-gate.h"

guint64
qp_rebalance_gain(const QpRebalance *r)
{
  guint64 mib = 0;
  for (guint i = 0; i < r->moves->len; i++) {
    const QpMove *m = r->moves->pdata[i];
    if (m->consolidate || m->relieves >= 0)
      mib += m->mib;
  }
  return mib;
}

gboolean
qp_rebalance_worth(const QpRebalance *r, guint64 min_mib)
{
  gboolean consolidates = FALSE;
  for (guint i = 0; i < r->moves->len; i++) {
    const QpMove *m = r->moves->pdata[i];
    /* A node whose claims exceed its memory: always worth it. */
    if (m->relieves >= 0)
      return TRUE;
    consolidates |= m->consolidate;
  }
  return consolidates && qp_rebalance_gain(r) >= min_mib;
}
