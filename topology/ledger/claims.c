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

guint64
qp_node_amount_of(const GArray *amounts, int node)
{
  for (guint j = 0; amounts != NULL && j < amounts->len; j++)
    if (g_array_index(amounts, QpNodeAmount, j).node == node)
      return g_array_index(amounts, QpNodeAmount, j).mib;
  return 0;
}

void
qp_node_amount_add(GArray *amounts, int node, guint64 mib)
{
  for (guint j = 0; j < amounts->len; j++)
    if (g_array_index(amounts, QpNodeAmount, j).node == node) {
      g_array_index(amounts, QpNodeAmount, j).mib += mib;
      return;
    }
  QpNodeAmount a = {.node = node, .mib = mib};
  g_array_append_val(amounts, a);
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
  c->started_nodes = hwloc_bitmap_alloc();
  c->started_cpus = hwloc_bitmap_alloc();
  c->started_reserve = g_array_new(FALSE, TRUE, sizeof(QpNodeAmount));
  c->devices = g_ptr_array_new_with_free_func(g_free);
  c->resident = g_array_new(FALSE, TRUE, sizeof(QpNodeAmount));
  return c;
}

QpClaim *
qp_claim_copy(const QpClaim *c)
{
  QpClaim *copy = qp_claim_new();
  copy->id = g_strdup(c->id);
  copy->name = g_strdup(c->name);
  copy->uuid = g_strdup(c->uuid);
  copy->qemu_pid = c->qemu_pid;
  copy->qemu_start = c->qemu_start;
  copy->launcher_pid = c->launcher_pid;
  copy->launcher_start = c->launcher_start;
  copy->keeper_pid = c->keeper_pid;
  copy->mode = c->mode;
  g_array_append_vals(copy->mem, c->mem->data, c->mem->len);
  g_array_append_vals(copy->huge, c->huge->data, c->huge->len);
  hwloc_bitmap_copy(copy->dedicated, c->dedicated);
  g_array_append_vals(copy->load, c->load->data, c->load->len);
  qp_cpu_load_copy(copy->cpu_load, c->cpu_load);
  copy->best_effort = c->best_effort;
  copy->time = c->time;
  copy->moved_at = c->moved_at;
  copy->caller_placed = c->caller_placed;
  hwloc_bitmap_copy(copy->started_nodes, c->started_nodes);
  hwloc_bitmap_copy(copy->started_cpus, c->started_cpus);
  g_array_append_vals(copy->started_reserve, c->started_reserve->data,
                      c->started_reserve->len);
  for (guint i = 0; i < c->devices->len; i++)
    g_ptr_array_add(copy->devices, g_strdup(c->devices->pdata[i]));
  g_array_append_vals(copy->resident, c->resident->data, c->resident->len);
  copy->qemu_rss_mib = c->qemu_rss_mib;
  return copy;
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
  hwloc_bitmap_free(c->started_nodes);
  hwloc_bitmap_free(c->started_cpus);
  g_array_unref(c->started_reserve);
  g_ptr_array_unref(c->devices);
  g_array_unref(c->resident);
  g_free(c);
}

static void
ignored_free(gpointer p)
{
  QpIgnoredRecord *r = p;
  g_free(r->file);
  g_free(r->reason);
  g_free(r);
}

QpClaims *
qp_claims_new(void)
{
  QpClaims *s = g_new0(QpClaims, 1);
  s->claims = g_ptr_array_new_with_free_func((GDestroyNotify)qp_claim_free);
  s->blocked_nodes = hwloc_bitmap_alloc();
  s->warnings = g_ptr_array_new_with_free_func(g_free);
  s->ignored = g_ptr_array_new_with_free_func(ignored_free);
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
  g_ptr_array_unref(s->ignored);
  g_free(s);
}

/* The index of the live record CLAIMS holds for the VM named UUID (its
 * -uuid, or a record id) or NAME, else -1; *BY says which matched. */
static int
find_vm(const QpClaims *claims, const char *uuid, const char *name,
        const char **by)
{
  for (guint i = 0; uuid != NULL && i < claims->claims->len; i++) {
    const QpClaim *c = claims->claims->pdata[i];
    if (c->uuid != NULL && g_ascii_strcasecmp(c->uuid, uuid) == 0) {
      *by = "uuid";
      return (int)i;
    }
    if (g_strcmp0(c->id, uuid) == 0) {
      *by = "id";
      return (int)i;
    }
  }
  /* By name only where no -uuid tells two VMs of one name apart, and only
   * where one running VM has it: of two, either might be the one the
   * command line stands for, and leaving out the other would count room
   * that VM holds. Then neither is left out (`move` refuses such a name). */
  int found = -1;
  for (guint i = 0; name != NULL && i < claims->claims->len; i++) {
    const QpClaim *c = claims->claims->pdata[i];
    if (g_strcmp0(c->name, name) == 0 && (c->uuid == NULL || uuid == NULL)) {
      if (found >= 0)
        return -1;
      found = (int)i;
    }
  }
  if (found >= 0)
    *by = "name";
  return found;
}

QpClaim *
qp_claims_take_vm(QpClaims *claims, const char *uuid, const char *name,
                  const char **by)
{
  const char *how = NULL;
  int i = find_vm(claims, uuid, name, &how);
  if (i < 0)
    return NULL;
  if (by != NULL)
    *by = how;
  return g_ptr_array_steal_index(claims->claims, (guint)i);
}
