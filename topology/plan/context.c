/* The host context of one plan: which nodes may be used, each node's
 * uncommitted memory per memory class, the other VMs' load and dedicated
 * CPUs, the usable CPUs, the guest's memory classes and pieces, and the
 * nodes of its vfio devices; then one try (Attempt) on a set of CPUs. */
#include "topology/plan/internal.h"

#include <string.h>

#include "topology/plan/capacity.h"

#include "topology/plan/result.h"

int
qp_plan_node_index(const Ctx *ctx, int id)
{
  if (id < 0 || id > ctx->max_node_id)
    return -1;
  return ctx->node_idx[id];
}

int
qp_plan_cpu_index(const Ctx *ctx, int id)
{
  if (id < 0 || id > ctx->max_cpu_id)
    return -1;
  return ctx->cpu_idx[id];
}

guint64
qp_plan_units_to_mib(const Ctx *ctx, guint c, guint64 units)
{
  return units * ctx->cls_kib[c] / 1024;
}

static guint64
mib_to_units(const Ctx *ctx, guint c, guint64 mib)
{
  return (mib * 1024 + ctx->cls_kib[c] - 1) / ctx->cls_kib[c];
}

/* Class of memory in pages of PAGE_KIB (0: ordinary memory). */
static guint
class_of(const Ctx *ctx, guint64 page_kib)
{
  for (guint c = 1; page_kib != 0 && c < ctx->ncls; c++)
    if (ctx->cls_page[c] == page_kib)
      return c;
  return 0;
}

guint
qp_plan_node_cap(const Attempt *a, CapKind cap, guint i)
{
  switch (cap) {
  case CAP_CPUS:
    return a->n_cpus[i];
  case CAP_CORES:
    return a->node_cores[i]->len;
  case CAP_GROUPS:
    return a->n_groups[i];
  case CAP_PUS:
    return a->n_pus[i];
  }
  return 0;
}

/* Counts CPU units GT needs under CAP. */
guint
qp_plan_task_units(const Ctx *ctx, CapKind cap, hwloc_const_bitmap_t vcpus)
{
  if (cap != CAP_GROUPS)
    return (guint)hwloc_bitmap_weight(vcpus);
  guint n = 0;
  int last = -1, v;
  hwloc_bitmap_foreach_begin(v, vcpus)
  {
    int g = v / (int)ctx->threads;
    if (g != last)
      n++;
    last = g;
  }
  hwloc_bitmap_foreach_end();
  return n;
}

void
qp_plan_ctx_clear(Ctx *ctx)
{
  g_free(ctx->cls_kib);
  g_free(ctx->cls_page);
  g_free(ctx->cls_used);
  if (ctx->pieces != NULL)
    g_array_unref(ctx->pieces);
  g_free(ctx->node_ok);
  g_free(ctx->device_node);
  g_free(ctx->avail);
  g_free(ctx->total_units);
  g_free(ctx->claimed_units);
  g_free(ctx->reserve_units);
  g_free(ctx->outside_mib);
  g_free(ctx->can_give_mib);
  g_free(ctx->outstanding_mib);
  g_free(ctx->load);
  hwloc_bitmap_free(ctx->dedicated_others);
  hwloc_bitmap_free(ctx->usable);
  g_free(ctx->cpu_idx);
  g_free(ctx->node_idx);
  g_free(ctx->vcpu_gnode);
}

static void
add_page_size(GArray *sizes, guint64 page_kib)
{
  if (page_kib == 0)
    return;
  for (guint i = 0; i < sizes->len; i++)
    if (g_array_index(sizes, guint64, i) == page_kib)
      return;
  g_array_append_val(sizes, page_kib);
}

static gint
compare_u64(gconstpointer a, gconstpointer b)
{
  guint64 x = *(const guint64 *)a, y = *(const guint64 *)b;
  return x < y ? -1 : x > y;
}

static hwloc_const_bitmap_t
nonempty(hwloc_const_bitmap_t set)
{
  return set != NULL && !hwloc_bitmap_iszero(set) ? set : NULL;
}

static void
add_piece(Ctx *ctx, int gi, QpMemKind kind, guint64 mib, guint64 page_kib,
          const char *memdev, const char *device, hwloc_const_bitmap_t caller,
          QpPolicy policy)
{
  Piece p = {.gi = gi,
             .kind = kind,
             .cls = class_of(ctx, page_kib),
             .mem_mib = mib,
             .memdev = memdev,
             .device = device,
             .fixed = nonempty(caller),
             .caller_set = nonempty(caller) != NULL,
             .caller_policy = policy};
  p.units = mib_to_units(ctx, p.cls, mib);
  g_array_append_val(ctx->pieces, p);
}

/* The memory classes the guest uses and the pieces of its memory: the RAM
 * of each guest node (or of the guest) first, in guest node order, then
 * the memory devices and unused backends. A piece whose backend has no
 * host-nodes of the caller's goes where its guest node's RAM must go. */
static void
init_classes(Ctx *ctx)
{
  const QpRequest *req = ctx->req;
  g_autoptr(GArray) sizes = g_array_new(FALSE, FALSE, sizeof(guint64));
  if (req->n_gnodes == 0)
    add_page_size(sizes, req->page_kib);
  for (guint g = 0; g < req->n_gnodes; g++)
    add_page_size(sizes, req->gnodes[g].page_kib);
  for (guint d = 0; d < req->n_devmem; d++)
    add_page_size(sizes, req->devmem[d].page_kib);
  g_array_sort(sizes, compare_u64);
  ctx->ncls = sizes->len + 1;
  ctx->cls_kib = g_new0(guint64, ctx->ncls);
  ctx->cls_page = g_new0(guint64, ctx->ncls);
  ctx->cls_used = g_new0(gboolean, ctx->ncls);
  ctx->cls_kib[0] = 1024;
  for (guint c = 1; c < ctx->ncls; c++)
    ctx->cls_kib[c] = ctx->cls_page[c] = g_array_index(sizes, guint64, c - 1);

  ctx->pieces = g_array_new(FALSE, TRUE, sizeof(Piece));
  if (req->n_gnodes == 0)
    add_piece(ctx, -1, QP_MEM_RAM, req->mem_mib, req->page_kib, req->memdev,
              NULL, req->host_nodes, req->policy);
  for (guint g = 0; g < req->n_gnodes; g++) {
    const QpGuestNode *gn = &req->gnodes[g];
    add_piece(ctx, (int)g, QP_MEM_RAM, gn->mem_mib, gn->page_kib, gn->memdev,
              NULL, gn->host_nodes, gn->policy);
  }
  guint n_ram = ctx->pieces->len;
  for (guint d = 0; d < req->n_devmem; d++) {
    const QpMemDevice *dm = &req->devmem[d];
    /* A node QEMU refuses (it names no guest node) counts as the first. */
    int gi = req->n_gnodes == 0                                   ? -1
             : dm->gnode >= 0 && (guint)dm->gnode < req->n_gnodes ? dm->gnode
                                                                  : 0;
    add_piece(ctx, gi, dm->kind, dm->mib, dm->page_kib, dm->memdev, dm->device,
              dm->host_nodes, dm->policy);
    Piece *p = &g_array_index(ctx->pieces, Piece, ctx->pieces->len - 1);
    const Piece *ram = &g_array_index(ctx->pieces, Piece, MAX(gi, 0));
    if (p->fixed == NULL && MAX(gi, 0) < (int)n_ram)
      p->fixed = ram->fixed;
  }
  gboolean any = FALSE;
  for (guint x = 0; x < ctx->pieces->len; x++) {
    const Piece *p = &g_array_index(ctx->pieces, Piece, x);
    if (p->units > 0)
      ctx->cls_used[p->cls] = any = TRUE;
  }
  if (!any)
    ctx->cls_used[0] = TRUE;
}

/* Maps from node and CPU ids to their indexes in the host. */
static void
init_index_maps(Ctx *ctx)
{
  const QpHost *host = ctx->host;
  ctx->max_node_id = -1;
  for (guint i = 0; i < ctx->nn; i++)
    ctx->max_node_id = MAX(ctx->max_node_id, host->nodes[i].id);
  ctx->node_idx = g_new(int, ctx->max_node_id + 2);
  for (int i = 0; i <= ctx->max_node_id + 1; i++)
    ctx->node_idx[i] = -1;
  for (guint i = 0; i < ctx->nn; i++)
    if (host->nodes[i].id >= 0)
      ctx->node_idx[host->nodes[i].id] = (int)i;
  ctx->max_cpu_id = -1;
  for (guint i = 0; i < host->n_cpus; i++)
    ctx->max_cpu_id = MAX(ctx->max_cpu_id, host->cpus[i].id);
  ctx->cpu_idx = g_new(int, ctx->max_cpu_id + 2);
  for (int i = 0; i <= ctx->max_cpu_id + 1; i++)
    ctx->cpu_idx[i] = -1;
  for (guint i = 0; i < host->n_cpus; i++)
    if (host->cpus[i].id >= 0)
      ctx->cpu_idx[host->cpus[i].id] = (int)i;
}

/* Nodes the VM may use: in --hostnodes, allowed, not blocked. */
static void
init_node_ok(Ctx *ctx)
{
  ctx->node_ok = g_new0(gboolean, MAX(ctx->nn, 1));
  for (guint i = 0; i < ctx->nn; i++) {
    int id = ctx->host->nodes[i].id;
    const QpPlacementOptions *opts = ctx->opts;
    ctx->node_ok[i] =
        (opts->hostnodes == NULL || hwloc_bitmap_isset(opts->hostnodes, id)) &&
        !qp_claims_node_blocked(ctx->claims, id) &&
        (ctx->host->allowed_nodes == NULL ||
         hwloc_bitmap_isset(ctx->host->allowed_nodes, id));
  }
}

/* What other VMs hold: their dedicated CPUs and shared vCPUs, and per node
 * and memory class the units no claim has (capacity.h counts them, as
 * status does). */
static void
init_node_state(Ctx *ctx)
{
  gsize cells = MAX((gsize)ctx->nn * ctx->ncls, 1);
  ctx->dedicated_others = qp_claims_dedicated(ctx->claims);
  ctx->avail = g_new0(guint64, cells);
  ctx->total_units = g_new0(guint64, cells);
  ctx->claimed_units = g_new0(guint64, cells);
  ctx->reserve_units = g_new0(guint64, cells);
  ctx->outside_mib = g_new0(guint64, MAX(ctx->nn, 1));
  ctx->can_give_mib = g_new0(guint64, MAX(ctx->nn, 1));
  ctx->outstanding_mib = g_new0(guint64, MAX(ctx->nn, 1));
  ctx->load = g_new0(guint, MAX(ctx->nn, 1));
  g_autofree QpNodeMemory *mems = g_new0(QpNodeMemory, MAX(ctx->nn, 1));
  qp_nodes_memory(ctx->host, ctx->claims, ctx->opts, mems);
  for (guint i = 0; i < ctx->nn; i++) {
    ctx->load[i] = qp_claims_node_vcpus(ctx->claims, ctx->host->nodes[i].id);
    const QpNodeMemory mem = mems[i];
    gsize k = AT(ctx, 0, i);
    ctx->total_units[k] = mem.plain_mib;
    ctx->reserve_units[k] = mem.reserve_mib;
    ctx->claimed_units[k] = mem.claimed_mib;
    ctx->avail[k] = mem.uncommitted_mib;
    ctx->outside_mib[i] = mem.outside_mib;
    ctx->can_give_mib[i] = mem.can_give_mib;
    ctx->outstanding_mib[i] = mem.outstanding_mib;
    for (guint c = 1; c < ctx->ncls; c++) {
      QpNodePages pages;
      qp_node_pages(ctx->host, ctx->claims, i, ctx->cls_page[c], &pages);
      k = AT(ctx, c, i);
      ctx->total_units[k] = pages.total;
      ctx->claimed_units[k] = pages.claimed;
      ctx->avail[k] = pages.uncommitted;
    }
  }
}

hwloc_bitmap_t
qp_plan_cpus_with_dedicated(const Ctx *ctx)
{
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  for (guint i = 0; i < ctx->nn; i++)
    if (ctx->node_ok[i] && ctx->host->nodes[i].cpus != NULL)
      hwloc_bitmap_or(set, set, ctx->host->nodes[i].cpus);
  if (ctx->host->allowed != NULL)
    hwloc_bitmap_and(set, set, ctx->host->allowed);
  if (ctx->opts->affinity != NULL)
    hwloc_bitmap_and(set, set, ctx->opts->affinity);
  return set;
}

/* vCPU -> guest node. vCPUs no -numa node names go to the first one, as
 * QEMU does. */
static void
init_vcpu_gnodes(Ctx *ctx)
{
  const QpRequest *req = ctx->req;
  ctx->vcpu_gnode = g_new0(int, ctx->n);
  for (guint g = req->n_gnodes; g-- > 0;) {
    if (req->gnodes[g].vcpus == NULL)
      continue;
    int v;
    hwloc_bitmap_foreach_begin(v, req->gnodes[g].vcpus)
    {
      if ((guint)v < ctx->n)
        ctx->vcpu_gnode[v] = (int)g;
    }
    hwloc_bitmap_foreach_end();
  }
}

/* The nodes of the guest's storage and network devices: one whose host
 * device or node is unknown (a file on tmpfs, a tap on no port) has no
 * locality to keep, which is no reason to warn or to refuse. */
static void
init_io_device_nodes(Ctx *ctx)
{
  for (guint d = 0; ctx->req->io != NULL && d < ctx->req->io->len; d++) {
    const QpIoDevice *io = ctx->req->io->pdata[d];
    const QpPciDevice *p =
        io->bdf != NULL ? qp_host_find_pci(ctx->host, io->bdf) : NULL;
    int i = p != NULL ? qp_plan_node_index(ctx, p->node) : -1;
    if (i >= 0) {
      ctx->device_node[i] = TRUE;
      ctx->any_device_node = TRUE;
    }
  }
}

/* The nodes of the guest's vfio, storage and network devices
 * (--device-locality). */
static gboolean
init_device_nodes(Ctx *ctx, QpPlan *notes, GError **error)
{
  const QpRequest *req = ctx->req;
  QpDeviceLocality locality = ctx->opts->device_locality;
  ctx->device_node = g_new0(gboolean, MAX(ctx->nn, 1));
  if (locality == QP_DEVLOC_IGNORE)
    return TRUE;
  for (char **b = req->vfio; b != NULL && *b != NULL; b++) {
    const QpPciDevice *d = qp_host_find_pci(ctx->host, *b);
    int i = d != NULL ? qp_plan_node_index(ctx, d->node) : -1;
    if (i < 0) {
      const char *why =
          d == NULL ? "is not on this host" : "has no known NUMA node";
      if (locality == QP_DEVLOC_REQUIRED) {
        g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT,
                    "vfio device %s %s: --device-locality=required needs "
                    "its host node (use preferred or ignore)",
                    *b, why);
        return FALSE;
      }
      qp_plan_add_warning(notes, "vfio device %s %s: its locality is ignored",
                          *b, why);
      continue;
    }
    ctx->device_node[i] = TRUE;
    ctx->any_device_node = TRUE;
  }
  init_io_device_nodes(ctx);
  return TRUE;
}

gboolean
qp_plan_ctx_init(Ctx *ctx, const QpHost *host, const QpClaims *claims,
                 const QpRequest *req, const QpPlacementOptions *opts,
                 QpPlan *notes, GError **error)
{
  ctx->host = host;
  ctx->claims = claims;
  ctx->req = req;
  ctx->opts = opts;
  ctx->n = MAX(MAX(req->maxcpus, req->vcpus), 1);
  ctx->threads = MAX(req->threads, 1);
  ctx->nn = host->n_nodes;
  init_classes(ctx);
  init_index_maps(ctx);
  init_node_ok(ctx);
  init_node_state(ctx);
  ctx->usable = qp_plan_cpus_with_dedicated(ctx);
  hwloc_bitmap_andnot(ctx->usable, ctx->usable, ctx->dedicated_others);
  init_vcpu_gnodes(ctx);
  return init_device_nodes(ctx, notes, error);
}

/* Candidates for node sets, honouring --device-locality=required. */
gboolean *
qp_plan_set_candidates(const Ctx *ctx, char **prefix)
{
  gboolean *cand = g_new0(gboolean, MAX(ctx->nn, 1));
  gboolean required =
      ctx->opts->device_locality == QP_DEVLOC_REQUIRED && ctx->any_device_node;
  for (guint i = 0; i < ctx->nn; i++)
    cand[i] = ctx->node_ok[i] && (!required || ctx->device_node[i]);
  if (required) {
    gboolean vfio = ctx->req->vfio != NULL && ctx->req->vfio[0] != NULL;
    GString *p = g_string_new(vfio ? "with --device-locality=required (vfio"
                                   : "with --device-locality=required (");
    for (char **b = ctx->req->vfio; b != NULL && *b != NULL; b++) {
      const QpPciDevice *d = qp_host_find_pci(ctx->host, *b);
      if (d != NULL)
        g_string_append_printf(p, " %s on node %d", *b, d->node);
    }
    for (guint x = 0; ctx->req->io != NULL && x < ctx->req->io->len; x++) {
      const QpIoDevice *io = ctx->req->io->pdata[x];
      const QpPciDevice *d =
          io->bdf != NULL ? qp_host_find_pci(ctx->host, io->bdf) : NULL;
      if (d != NULL && d->node >= 0)
        g_string_append_printf(p, " %s on node %d", io->what, d->node);
    }
    g_string_append(p, "): ");
    *prefix = g_string_free(p, FALSE);
  } else {
    *prefix = g_strdup("");
  }
  return cand;
}

const Piece *
qp_plan_piece_at(const Ctx *ctx, guint x)
{
  return &g_array_index(ctx->pieces, Piece, x);
}

void
qp_plan_attempt_clear(Attempt *a, guint nn)
{
  hwloc_bitmap_free(a->usable);
  hwloc_bitmap_free(a->taken);
  if (a->node_cpus != NULL)
    for (guint i = 0; i < nn; i++)
      hwloc_bitmap_free(a->node_cpus[i]);
  g_free(a->node_cpus);
  g_free(a->n_cpus);
  if (a->node_cores != NULL)
    for (guint i = 0; i < nn; i++)
      g_array_unref(a->node_cores[i]);
  g_free(a->node_cores);
  g_free(a->n_groups);
  g_free(a->n_pus);
  g_free(a->core_used);
}

void
qp_plan_attempt_init(Attempt *a, const Ctx *ctx, hwloc_const_bitmap_t usable)
{
  const QpHost *host = ctx->host;
  guint nn = ctx->nn;
  memset(a, 0, sizeof(*a));
  a->kind_note = "";
  a->usable = hwloc_bitmap_dup(usable);
  a->taken = hwloc_bitmap_alloc();
  a->node_cpus = g_new0(hwloc_bitmap_t, MAX(nn, 1));
  a->n_cpus = g_new0(guint, MAX(nn, 1));
  a->node_cores = g_new0(GArray *, MAX(nn, 1));
  a->n_groups = g_new0(guint, MAX(nn, 1));
  a->n_pus = g_new0(guint, MAX(nn, 1));
  a->core_used = g_new0(gboolean, MAX(host->n_cores, 1));
  for (guint i = 0; i < nn; i++) {
    a->node_cpus[i] = hwloc_bitmap_alloc();
    if (ctx->node_ok[i] && host->nodes[i].cpus != NULL)
      hwloc_bitmap_and(a->node_cpus[i], host->nodes[i].cpus, usable);
    a->n_cpus[i] = (guint)MAX(hwloc_bitmap_weight(a->node_cpus[i]), 0);
    a->node_cores[i] = g_array_new(FALSE, FALSE, sizeof(guint));
  }
  /* Free cores: no PU dedicated to another VM, at least one PU usable. */
  g_auto(hwloc_bitmap_t) pus = hwloc_bitmap_alloc();
  for (guint c = 0; c < host->n_cores; c++) {
    const QpCore *core = &host->cores[c];
    if (core->pus == NULL ||
        hwloc_bitmap_intersects(core->pus, ctx->dedicated_others))
      continue;
    hwloc_bitmap_and(pus, core->pus, usable);
    int first = hwloc_bitmap_first(pus);
    if (first < 0)
      continue;
    int ci = qp_plan_cpu_index(ctx, first);
    int i = ci >= 0 ? qp_plan_node_index(ctx, host->cpus[ci].node) : -1;
    if (i < 0 || !hwloc_bitmap_isset(a->node_cpus[i], first))
      continue;
    hwloc_bitmap_and(pus, pus, a->node_cpus[i]);
    guint w = (guint)hwloc_bitmap_weight(pus);
    g_array_append_val(a->node_cores[i], c);
    a->n_pus[i] += w;
    if (w >= ctx->threads)
      a->n_groups[i]++;
  }
}

char *
qp_plan_vcpu_list(const Ctx *ctx, hwloc_const_bitmap_t vcpus)
{
  if (ctx->req->slot_of == NULL)
    return qp_list_format(vcpus);
  g_auto(hwloc_bitmap_t) slots = hwloc_bitmap_alloc();
  int v;
  hwloc_bitmap_foreach_begin(v, vcpus)
  {
    if ((guint)v < ctx->n)
      hwloc_bitmap_set(slots, ctx->req->slot_of[v]);
  }
  hwloc_bitmap_foreach_end();
  return qp_list_format(slots);
}
