/* The claims a plan makes (see claim.h): the record of a new VM, and the
 * memory a running VM adds to its claim or gives back. */
#include "topology/plan/claim.h"

#include "topology/plan/capacity.h"

static void
add_units(GArray *a, int node, guint64 units)
{
  for (guint i = 0; i < a->len; i++) {
    QpNodeUnits *u = &g_array_index(a, QpNodeUnits, i);
    if (u->node == node) {
      u->units += units;
      return;
    }
  }
  QpNodeUnits u = {node, units};
  g_array_append_val(a, u);
}

/* Adds DELTA (negative: takes, never below 0) to what CLAIM holds on NODE
 * in PAGE_KIB memory. */
static void
claim_adjust(QpClaim *claim, int node, guint64 page_kib, gint64 delta)
{
  if (page_kib == 0) {
    for (guint i = 0; i < claim->mem->len; i++) {
      QpNodeAmount *m = &g_array_index(claim->mem, QpNodeAmount, i);
      if (m->node != node)
        continue;
      m->mib = delta < 0 && (guint64)-delta > m->mib ? 0 : m->mib + delta;
      if (m->mib == 0)
        g_array_remove_index(claim->mem, i);
      return;
    }
    if (delta > 0) {
      QpNodeAmount m = {.node = node, .mib = (guint64)delta};
      g_array_append_val(claim->mem, m);
    }
    return;
  }
  for (guint i = 0; i < claim->huge->len; i++) {
    QpHugeClaim *h = &g_array_index(claim->huge, QpHugeClaim, i);
    if (h->node != node || h->page_kib != page_kib)
      continue;
    h->pages = delta < 0 && (guint64)-delta > h->pages ? 0 : h->pages + delta;
    if (h->pages == 0)
      g_array_remove_index(claim->huge, i);
    return;
  }
  if (delta > 0) {
    QpHugeClaim h = {
        .node = node, .page_kib = page_kib, .pages = (guint64)delta};
    g_array_append_val(claim->huge, h);
  }
}

gboolean
qp_claim_add_memory(const QpHost *host, const QpClaims *claims,
                    const QpPlacementOptions *opts, QpClaim *claim,
                    hwloc_const_bitmap_t nodes, guint64 page_kib, guint64 units,
                    GArray *taken, GError **error)
{
  g_autoptr(GArray) set = g_array_new(FALSE, FALSE, sizeof(guint));
  g_autofree guint64 *avail = g_new0(guint64, MAX(host->n_nodes, 1));
  g_autofree guint64 *got = g_new0(guint64, MAX(host->n_nodes, 1));
  guint64 have = 0;
  int best = -1;
  int id;
  g_autofree char *list = qp_list_format(nodes);
  hwloc_bitmap_foreach_begin(id, nodes)
  {
    int i = qp_host_node_index(host, id);
    if (i < 0)
      continue;
    guint u = (guint)i;
    g_array_append_val(set, u);
    avail[i] = qp_node_uncommitted(host, claims, opts, u, page_kib);
    have += avail[i];
    if (best < 0 || avail[i] > avail[best])
      best = i;
  }
  hwloc_bitmap_foreach_end();
  if (units == 0)
    return TRUE;
  g_autofree char *what =
      page_kib == 0 ? g_strdup_printf("%" G_GUINT64_FORMAT " MiB", units)
                    : g_strdup_printf("%" G_GUINT64_FORMAT
                                      " x %" G_GUINT64_FORMAT " KiB hugepages",
                                      units, page_kib);
  if (best < 0) {
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT,
                "%s on host nodes %s: no such node on this host", what,
                *list ? list : "(none)");
    return FALSE;
  }
  if (have < units) {
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT,
                "%s do not fit on host node%s %s: only %" G_GUINT64_FORMAT
                "%s uncommitted there",
                what, set->len > 1 ? "s" : "", list, have,
                page_kib == 0 ? " MiB" : " pages");
    return FALSE;
  }
  qp_plan_split_units(units, (const guint *)(void *)set->data, set->len, avail,
                      got);
  for (guint x = 0; x < set->len; x++) {
    guint i = g_array_index(set, guint, x);
    if (got[i] == 0)
      continue;
    claim_adjust(claim, host->nodes[i].id, page_kib, (gint64)got[i]);
    add_units(taken, host->nodes[i].id, got[i]);
  }
  return TRUE;
}

void
qp_claim_drop_memory(QpClaim *claim, GArray *taken, guint64 page_kib,
                     guint64 units)
{
  for (guint i = taken->len; i > 0 && units > 0; i--) {
    QpNodeUnits *u = &g_array_index(taken, QpNodeUnits, i - 1);
    guint64 give = MIN(units, u->units);
    claim_adjust(claim, u->node, page_kib, -(gint64)give);
    u->units -= give;
    units -= give;
    if (u->units == 0)
      g_array_remove_index(taken, i - 1);
  }
}

QpClaim *
qp_claim_from_plan(const QpPlan *plan, const char *id, const char *name)
{
  QpClaim *c = qp_claim_new();
  c->id = g_strdup(id);
  /* A record is JSON: a -name that is not UTF-8 must not corrupt it. */
  c->name = name != NULL ? g_utf8_make_valid(name, -1) : NULL;
  c->mode = plan->mode;
  if (plan->claim_mem)
    g_array_append_vals(c->mem, plan->claim_mem->data, plan->claim_mem->len);
  if (plan->claim_huge)
    g_array_append_vals(c->huge, plan->claim_huge->data, plan->claim_huge->len);
  if (plan->load)
    g_array_append_vals(c->load, plan->load->data, plan->load->len);
  qp_cpu_load_copy(c->cpu_load, plan->cpu_load);
  c->best_effort = plan->best_effort;
  /* Backends whose host nodes the caller chose make the VM the caller's
   * from its first record, not only from its keeper's first look
   * (qp_keeper_caller_placed() says the same of them). */
  for (guint m = 0; m < plan->n_mem; m++)
    c->caller_placed |= plan->mem[m].caller_set;
  if (plan->dedicated)
    hwloc_bitmap_copy(c->dedicated, plan->dedicated);
  c->time = g_get_real_time() / G_USEC_PER_SEC;
  /* The words name the caller's files, which need not be UTF-8 either. */
  for (guint i = 0; plan->devices != NULL && i < plan->devices->len; i++) {
    g_autofree char *words = qp_plan_device_words(plan, i);
    g_ptr_array_add(c->devices, g_utf8_make_valid(words, -1));
  }
  return c;
}
