/* A ledger record's types (see claims.h): made, copied and freed. */
#include "topology/ledger/claims.h"

static void
cpu_load_clear(gpointer p)
{
  QpCpuLoad *l = p;
  g_clear_pointer(&l->cpus, hwloc_bitmap_free);
}

GArray *
qp_cpu_load_array_new(void)
{
  GArray *a = g_array_new(FALSE, TRUE, sizeof(QpCpuLoad));
  g_array_set_clear_func(a, cpu_load_clear);
  return a;
}

void
qp_cpu_load_copy(GArray *dst, const GArray *src)
{
  g_array_set_size(dst, 0);
  for (guint i = 0; src != NULL && i < src->len; i++) {
    const QpCpuLoad *l = &g_array_index(src, QpCpuLoad, i);
    QpCpuLoad copy = {hwloc_bitmap_dup(l->cpus), l->vcpus};
    g_array_append_val(dst, copy);
  }
}

QpClaim *
qp_claim_new(void)
{
  QpClaim *c = g_new0(QpClaim, 1);
  c->mem = g_array_new(FALSE, TRUE, sizeof(QpNodeAmount));
  c->huge = g_array_new(FALSE, TRUE, sizeof(QpHugeClaim));
  c->load = g_array_new(FALSE, TRUE, sizeof(QpNodeLoad));
  c->cpu_load = qp_cpu_load_array_new();
  c->dedicated = hwloc_bitmap_alloc();
  c->devices = g_ptr_array_new_with_free_func(g_free);
  c->resident = g_array_new(FALSE, TRUE, sizeof(QpNodeAmount));
  return c;
}

void
qp_claim_free(QpClaim *c)
{
  if (c == NULL)
    return;
  g_free(c->id);
  g_free(c->name);
  g_free(c->uuid);
  g_array_unref(c->mem);
  g_array_unref(c->huge);
  g_array_unref(c->load);
  g_array_unref(c->cpu_load);
  hwloc_bitmap_free(c->dedicated);
  g_ptr_array_unref(c->devices);
  g_array_unref(c->resident);
  g_free(c);
}

QpClaims *
qp_claims_new(void)
{
  QpClaims *s = g_new0(QpClaims, 1);
  s->claims = g_ptr_array_new_with_free_func((GDestroyNotify)qp_claim_free);
  s->blocked_nodes = hwloc_bitmap_alloc();
  s->warnings = g_ptr_array_new_with_free_func(g_free);
  return s;
}

void
qp_claims_free(QpClaims *s)
{
  if (s == NULL)
    return;
  g_ptr_array_unref(s->claims);
  hwloc_bitmap_free(s->blocked_nodes);
  g_ptr_array_unref(s->warnings);
  g_free(s);
}
