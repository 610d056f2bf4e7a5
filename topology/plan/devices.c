#include "topology/plan/devices.h"

#include <string.h>

#include "topology/plan/result.h"

static void
device_free(gpointer p)
{
  QpPlanDevice *d = p;
  g_free(d->what);
  g_free(d->bdf);
  g_free(d->iothread);
  g_free(d);
}

static void
iothread_free(gpointer p)
{
  QpPlanIothread *t = p;
  g_free(t->id);
  hwloc_bitmap_free(t->cpus);
  g_free(t);
}

static void
add_device(QpPlan *plan, const Ctx *ctx, const char *what, const char *bdf,
           const char *iothread)
{
  const QpPciDevice *p = bdf != NULL ? qp_host_find_pci(ctx->host, bdf) : NULL;
  QpPlanDevice *d = g_new0(QpPlanDevice, 1);
  d->what = g_strdup(what);
  d->bdf = g_strdup(bdf);
  d->node = p != NULL ? p->node : -1;
  d->iothread = g_strdup(iothread);
  g_ptr_array_add(plan->devices, d);
}

/* The one host node of the devices iothread ID serves: -1 when none is
 * known, -2 when they are on different nodes. */
static int
iothread_node(const QpPlan *plan, const char *id)
{
  int node = -1;
  for (guint d = 0; d < plan->devices->len; d++) {
    const QpPlanDevice *dev = plan->devices->pdata[d];
    if (dev->iothread == NULL || strcmp(dev->iothread, id) != 0 ||
        dev->node < 0)
      continue;
    if (node >= 0 && node != dev->node)
      return -2;
    node = dev->node;
  }
  return node;
}

/* Places iothread ID near its devices, or says why it stays with the VM. */
static void
place_iothread(QpPlan *plan, const Ctx *ctx, const Attempt *a, const char *id)
{
  int node = iothread_node(plan, id);
  if (node == -2) {
    qp_plan_add_reason(
        plan,
        "iothread %s serves devices on several host nodes: it stays "
        "with the VM",
        id);
    return;
  }
  int i = qp_plan_node_index(ctx, node);
  if (i < 0)
    return;
  g_auto(hwloc_bitmap_t) cpus = hwloc_bitmap_dup(a->node_cpus[i]);
  hwloc_bitmap_andnot(cpus, cpus, plan->dedicated);
  if (hwloc_bitmap_iszero(cpus)) {
    qp_plan_add_reason(
        plan,
        "iothread %s stays with the VM: host node %d of its devices "
        "has no usable CPU off the VM's dedicated cores",
        id, node);
    return;
  }
  QpPlanIothread *t = g_new0(QpPlanIothread, 1);
  t->id = g_strdup(id);
  t->node = node;
  t->cpus = g_steal_pointer(&cpus);
  g_ptr_array_add(plan->iothreads, t);
  hwloc_bitmap_or(plan->process_cpus, plan->process_cpus, t->cpus);
  g_autofree char *l = qp_list_format(t->cpus);
  qp_plan_add_reason(plan, "iothread %s on %s: host node %d, its devices' node",
                     id, l, node);
}

void
qp_plan_devices(QpPlan *plan, const Ctx *ctx, const Attempt *a)
{
  const QpRequest *req = ctx->req;
  plan->devices = g_ptr_array_new_with_free_func(device_free);
  plan->iothreads = g_ptr_array_new_with_free_func(iothread_free);
  for (char **b = req->vfio; b != NULL && *b != NULL; b++) {
    g_autofree char *what = g_strdup_printf("vfio-pci %s", *b);
    add_device(plan, ctx, what, *b, NULL);
  }
  for (guint d = 0; req->io != NULL && d < req->io->len; d++) {
    const QpIoDevice *io = req->io->pdata[d];
    add_device(plan, ctx, io->what, io->bdf, io->iothread);
  }
  if (ctx->opts->device_locality == QP_DEVLOC_IGNORE)
    return;
  plan->device_locality = TRUE;
  g_autoptr(GHashTable) seen = g_hash_table_new(g_str_hash, g_str_equal);
  for (guint d = 0; d < plan->devices->len; d++) {
    const QpPlanDevice *dev = plan->devices->pdata[d];
    if (dev->iothread == NULL || !g_hash_table_add(seen, dev->iothread))
      continue;
    place_iothread(plan, ctx, a, dev->iothread);
  }
}

const QpPlanIothread *
qp_plan_iothread(const QpPlan *plan, const char *id)
{
  for (guint i = 0; plan->iothreads != NULL && i < plan->iothreads->len; i++) {
    const QpPlanIothread *t = plan->iothreads->pdata[i];
    if (strcmp(t->id, id) == 0)
      return t;
  }
  return NULL;
}

char *
qp_plan_device_words(const QpPlan *plan, guint i)
{
  const QpPlanDevice *d = plan->devices->pdata[i];
  GString *s = g_string_new(d->what);
  if (d->bdf != NULL)
    g_string_append_printf(s, ": PCI %s", d->bdf);
  else
    g_string_append(s, ": no host PCI device found");
  if (d->node >= 0)
    g_string_append_printf(s, ", host node %d", d->node);
  else if (d->bdf != NULL)
    g_string_append(s, ", host node unknown");
  if (d->iothread != NULL) {
    const QpPlanIothread *t = qp_plan_iothread(plan, d->iothread);
    g_autofree char *l = t != NULL ? qp_list_format(t->cpus) : NULL;
    g_string_append_printf(s, ", iothread %s%s%s", d->iothread,
                           l != NULL ? " on CPUs " : " with the VM",
                           l != NULL ? l : "");
  }
  return g_string_free(s, FALSE);
}
