/* Host models compared field by field (see host-equal.h). */
#include "host-equal.h"

static void
assert_set_equal(hwloc_const_bitmap_t a, hwloc_const_bitmap_t b,
                 const char *what)
{
  g_autofree char *la = qp_list_format(a);
  g_autofree char *lb = qp_list_format(b);
  if (g_strcmp0(la, lb) != 0)
    g_test_message("%s differs", what);
  g_assert_true((a == NULL) == (b == NULL));
  g_assert_cmpstr(la, ==, lb);
  g_assert_true(a == NULL || hwloc_bitmap_isequal(a, b));
}

static void
assert_nodes_equal(const QpHost *a, const QpHost *b, gboolean live)
{
  g_assert_cmpuint(a->n_nodes, ==, b->n_nodes);
  for (guint i = 0; i < a->n_nodes; i++) {
    const QpNode *x = &a->nodes[i], *y = &b->nodes[i];
    g_assert_cmpint(x->id, ==, y->id);
    g_assert_cmpuint(x->total_mib, ==, y->total_mib);
    assert_set_equal(x->cpus, y->cpus, "node cpus");
    assert_set_equal(x->all_cpus, y->all_cpus, "node all_cpus");
    g_assert_cmpint(x->measured, ==, y->measured);
    if (!live) {
      g_assert_cmpuint(x->free_mib, ==, y->free_mib);
      g_assert_cmpuint(x->can_give_mib, ==, y->can_give_mib);
      g_assert_cmpuint(x->used_mib, ==, y->used_mib);
      g_assert_cmpuint(x->arc_mib, ==, y->arc_mib);
    }
    g_assert_cmpuint(x->hugepages->len, ==, y->hugepages->len);
    for (guint j = 0; j < x->hugepages->len; j++) {
      const QpHugePool *p = &g_array_index(x->hugepages, QpHugePool, j);
      const QpHugePool *q = &g_array_index(y->hugepages, QpHugePool, j);
      g_assert_cmpuint(p->page_kib, ==, q->page_kib);
      g_assert_cmpuint(p->total, ==, q->total);
      if (!live)
        g_assert_cmpuint(p->free, ==, q->free);
    }
  }
}

static void
assert_cpus_equal(const QpHost *a, const QpHost *b)
{
  g_assert_cmpuint(a->n_cores, ==, b->n_cores);
  for (guint c = 0; c < a->n_cores; c++) {
    const QpCore *x = &a->cores[c], *y = &b->cores[c];
    g_assert_cmpint(x->package, ==, y->package);
    g_assert_cmpint(x->node, ==, y->node);
    assert_set_equal(x->pus, y->pus, "core pus");
    for (int l = 0; l < QP_CACHE_LEVELS; l++)
      g_assert_cmpint(x->domain[l], ==, y->domain[l]);
  }
  g_assert_cmpuint(a->n_cpus, ==, b->n_cpus);
  for (guint c = 0; c < a->n_cpus; c++) {
    const QpCpu *x = &a->cpus[c], *y = &b->cpus[c];
    g_assert_cmpint(x->id, ==, y->id);
    g_assert_cmpint(x->core, ==, y->core);
    g_assert_cmpint(x->node, ==, y->node);
    g_assert_cmpint(x->package, ==, y->package);
    g_assert_cmpint(x->kind, ==, y->kind);
    g_assert_cmpint(x->allowed, ==, y->allowed);
  }
  g_assert_cmpuint(a->n_kinds, ==, b->n_kinds);
  g_assert_cmpuint(g_strv_length(a->kind_names), ==, a->n_kinds);
  g_assert_cmpuint(g_strv_length(b->kind_names), ==, b->n_kinds);
  for (guint k = 0; k < a->n_kinds; k++) {
    g_assert_cmpstr(a->kind_names[k], ==, b->kind_names[k]);
    g_assert_cmpint(a->kind_efficiency[k], ==, b->kind_efficiency[k]);
  }
}

static void
assert_domains_equal(const QpHost *a, const QpHost *b)
{
  g_assert_cmpuint(a->n_domains, ==, b->n_domains);
  for (guint d = 0; d < a->n_domains; d++) {
    const QpCacheDomain *x = &a->domains[d], *y = &b->domains[d];
    g_assert_cmpint(x->level, ==, y->level);
    g_assert_cmpint(x->node, ==, y->node);
    g_assert_cmpuint(x->size_kib, ==, y->size_kib);
    assert_set_equal(x->cpus, y->cpus, "domain cpus");
    g_assert_cmpuint(x->n_cores, ==, y->n_cores);
  }
}

void
qp_assert_host_equal(const QpHost *a, const QpHost *b, gboolean live)
{
  g_assert_nonnull(a);
  g_assert_nonnull(b);
  g_assert_cmpstr(a->source, ==, b->source);
  assert_nodes_equal(a, b, live);
  assert_cpus_equal(a, b);
  assert_domains_equal(a, b);
  for (guint i = 0; i < a->n_nodes; i++)
    for (guint j = 0; j < a->n_nodes; j++)
      g_assert_cmpuint(a->distance[i * a->n_nodes + j], ==,
                       b->distance[i * b->n_nodes + j]);
  assert_set_equal(a->allowed, b->allowed, "allowed");
  assert_set_equal(a->allowed_nodes, b->allowed_nodes, "allowed_nodes");
  g_assert_true((a->pci == NULL) == (b->pci == NULL));
  for (guint i = 0; a->pci != NULL && i < MAX(a->pci->len, b->pci->len); i++) {
    g_assert_cmpuint(i, <, a->pci->len);
    g_assert_cmpuint(i, <, b->pci->len);
    const QpPciDevice *x = &g_array_index(a->pci, QpPciDevice, i);
    const QpPciDevice *y = &g_array_index(b->pci, QpPciDevice, i);
    g_assert_cmpstr(x->bdf, ==, y->bdf);
    g_assert_cmpint(x->node, ==, y->node);
  }
  g_assert_cmpstr(a->inconsistent, ==, b->inconsistent);
}
