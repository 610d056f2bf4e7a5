/* The placement engine: (host, claims, request, options) -> plan.
 *
 * Pure: no I/O, no clock, no globals. Everything below works on the host
 * model and the ledger's contents passed in, so any decision can be replayed
 * from a recorded host and a ledger snapshot.
 *
 * Outline:
 *   1. Node state: usable CPUs (allowed & affinity & --hostnodes - CPUs
 *      dedicated to other VMs), uncommitted memory per memory class
 *      (ordinary memory, and the free hugepages of each size the guest
 *      uses), shared vCPU load of other VMs.
 *   2. CPU kinds: the plan is tried on the CPUs of one kind at a time, most
 *      performant kind first; kinds are mixed only when --affinity forces it.
 *   3. The mode: balanced (fewest close nodes holding memory and CPUs),
 *      numa (each guest node to one host node, least loaded first),
 *      one-to-one (a physical core per vCPU, or SMT sibling pairs for a guest
 *      with threads=2).
 *   4. Derived sets: process, emulator, iothread and startup CPUs, claims.
 *   5. Mode auto never refuses a VM for CPUs: what balanced or numa refused
 *      is placed best-effort (plan-best-effort.c).
 *
 * Node sets are grown from every seed node (numad's centre + nearest), so a
 * plan costs O(n^3) in the number of nodes at worst instead of enumerating
 * subsets. docs/plan-schema.md documents the JSON output. */
#include "topology/plan-internal.h"

#include <string.h>

int
node_index(const Ctx *ctx, int id)
{
  if (id < 0 || id > ctx->max_node_id)
    return -1;
  return ctx->node_idx[id];
}

int
cpu_index(const Ctx *ctx, int id)
{
  if (id < 0 || id > ctx->max_cpu_id)
    return -1;
  return ctx->cpu_idx[id];
}

guint
dist(const Ctx *ctx, guint a, guint b)
{
  if (ctx->host->distance == NULL)
    return a == b ? 10 : 20;
  return ctx->host->distance[a * ctx->nn + b];
}

guint64
units_to_mib(const Ctx *ctx, guint c, guint64 units)
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

/* "8192 MiB" or "8192 MiB of 2048 KiB hugepages (4096 pages)". */
char *
mem_phrase(const Ctx *ctx, guint c, guint64 units)
{
  if (c == 0)
    return g_strdup_printf("%" G_GUINT64_FORMAT " MiB", units);
  return g_strdup_printf("%" G_GUINT64_FORMAT " MiB of %" G_GUINT64_FORMAT
                         " KiB hugepages (%" G_GUINT64_FORMAT " pages)",
                         units_to_mib(ctx, c, units), ctx->cls_page[c], units);
}

/* What NEED (units per class) holds: "1024 MiB and 2048 MiB of 2048 KiB
 * hugepages (1024 pages)". */
char *
need_phrase(const Ctx *ctx, const guint64 *need)
{
  GString *s = g_string_new("");
  for (guint c = 0; c < ctx->ncls; c++)
    if (need[c] > 0) {
      g_autofree char *p = mem_phrase(ctx, c, need[c]);
      g_string_append_printf(s, "%s%s", s->len ? " and " : "", p);
    }
  if (s->len == 0)
    g_string_append(s, "0 MiB");
  return g_string_free(s, FALSE);
}

/* Memory of node I that counts when ranking nodes: the uncommitted MiB of
 * every class the guest uses. */
guint64
rank_mib(const Ctx *ctx, const guint64 *avail, guint i)
{
  guint64 mib = 0;
  for (guint c = 0; c < ctx->ncls; c++)
    if (ctx->cls_used[c])
      mib += units_to_mib(ctx, c, avail[AT(ctx, c, i)]);
  return mib;
}

/* "16384 MiB uncommitted, 2048 MiB uncommitted in 2048 KiB hugepages" */
static char *
avail_phrase(const Ctx *ctx, const guint64 *avail, guint i)
{
  GString *s = g_string_new("");
  for (guint c = 0; c < ctx->ncls; c++) {
    if (!ctx->cls_used[c])
      continue;
    g_string_append_printf(s, "%s%" G_GUINT64_FORMAT " MiB uncommitted",
                           s->len ? ", " : "",
                           units_to_mib(ctx, c, avail[AT(ctx, c, i)]));
    if (c > 0)
      g_string_append_printf(s, " in %" G_GUINT64_FORMAT " KiB hugepages",
                             ctx->cls_page[c]);
  }
  return g_string_free(s, FALSE);
}

/* TRUE when node I holds NEED (units per class) in AVAIL. */
gboolean
fits(const Ctx *ctx, const guint64 *avail, guint i, const guint64 *need)
{
  for (guint c = 0; c < ctx->ncls; c++)
    if (avail[AT(ctx, c, i)] < need[c])
      return FALSE;
  return TRUE;
}

/* The first class of NEED that node I cannot hold. */
guint
short_class(const Ctx *ctx, const guint64 *avail, guint i, const guint64 *need)
{
  for (guint c = 0; c < ctx->ncls; c++)
    if (avail[AT(ctx, c, i)] < need[c])
      return c;
  return 0;
}

/* "(16124 MiB total, 12028 MiB claimed, 512 MiB reserved)" */
char *
node_mem_detail(const Ctx *ctx, guint c, guint i)
{
  const char *what = c == 0 ? "total" : "in the pool";
  gsize k = AT(ctx, c, i);
  g_autofree char *reserve =
      ctx->reserve_units[k] > 0
          ? g_strdup_printf(", %" G_GUINT64_FORMAT " MiB reserved",
                            units_to_mib(ctx, c, ctx->reserve_units[k]))
          : g_strdup("");
  return g_strdup_printf("(%" G_GUINT64_FORMAT " MiB %s, %" G_GUINT64_FORMAT
                         " MiB claimed%s)",
                         units_to_mib(ctx, c, ctx->total_units[k]), what,
                         units_to_mib(ctx, c, ctx->claimed_units[k]), reserve);
}

void
add_reason(QpPlan *plan, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_ptr_array_add(plan->reasons, g_strdup_vprintf(fmt, ap));
  va_end(ap);
}

void
add_warning(QpPlan *plan, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_ptr_array_add(plan->warnings, g_strdup_vprintf(fmt, ap));
  va_end(ap);
}

static const char *
cap_unit_name(CapKind cap)
{
  switch (cap) {
  case CAP_CPUS:
    return "usable CPUs";
  case CAP_CORES:
    return "free cores";
  case CAP_GROUPS:
    return "free cores with SMT siblings";
  case CAP_PUS:
    return "free CPUs on free cores";
  }
  return "?";
}

static guint
node_cap(const Attempt *a, CapKind cap, guint i)
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

/* ---- Plan allocation ---------------------------------------------------- */

static QpPlan *
plan_new(guint n)
{
  QpPlan *plan = g_new0(QpPlan, 1);
  plan->n_vcpus = n;
  plan->vcpu_cpus = g_new0(hwloc_bitmap_t, MAX(n, 1));
  plan->claim_mem = g_array_new(FALSE, TRUE, sizeof(QpNodeAmount));
  plan->claim_huge = g_array_new(FALSE, TRUE, sizeof(QpHugeClaim));
  plan->load = g_array_new(FALSE, TRUE, sizeof(QpNodeLoad));
  plan->cpu_load = qp_cpu_load_array_new();
  plan->dedicated = hwloc_bitmap_alloc();
  plan->host_nodes = hwloc_bitmap_alloc();
  plan->reasons = g_ptr_array_new_with_free_func(g_free);
  plan->warnings = g_ptr_array_new_with_free_func(g_free);
  plan->not_given = g_ptr_array_new_with_free_func(g_free);
  plan->mem_policy = QP_POLICY_DEFAULT;
  return plan;
}

static void
plan_mem_clear(QpPlanMem *m)
{
  hwloc_bitmap_free(m->host_nodes);
  g_free(m->memdev);
  g_free(m->device);
  if (m->claim != NULL)
    g_array_unref(m->claim);
}

/* Drops every piece of memory the plan holds (a failed try). */
static void
plan_mem_drop(QpPlan *plan)
{
  for (guint i = 0; i < plan->n_mem; i++)
    plan_mem_clear(&plan->mem[i]);
  g_clear_pointer(&plan->mem, g_free);
  plan->n_mem = 0;
}

void
qp_plan_free(QpPlan *plan)
{
  if (plan == NULL)
    return;
  if (plan->vcpu_cpus != NULL)
    for (guint i = 0; i < plan->n_vcpus; i++)
      hwloc_bitmap_free(plan->vcpu_cpus[i]);
  g_free(plan->vcpu_cpus);
  hwloc_bitmap_free(plan->process_cpus);
  hwloc_bitmap_free(plan->emulator_cpus);
  hwloc_bitmap_free(plan->iothread_cpus);
  hwloc_bitmap_free(plan->startup_cpus);
  hwloc_bitmap_free(plan->mem_nodes);
  plan_mem_drop(plan);
  if (plan->claim_mem != NULL)
    g_array_unref(plan->claim_mem);
  if (plan->claim_huge != NULL)
    g_array_unref(plan->claim_huge);
  hwloc_bitmap_free(plan->dedicated);
  if (plan->load != NULL)
    g_array_unref(plan->load);
  if (plan->cpu_load != NULL)
    g_array_unref(plan->cpu_load);
  if (plan->not_given != NULL)
    g_ptr_array_unref(plan->not_given);
  if (plan->reasons != NULL)
    g_ptr_array_unref(plan->reasons);
  if (plan->warnings != NULL)
    g_ptr_array_unref(plan->warnings);
  hwloc_bitmap_free(plan->host_nodes);
  for (guint i = 0; i < plan->n_vnodes; i++)
    hwloc_bitmap_free(plan->vnodes[i].vcpus);
  g_free(plan->vnodes);
  g_free(plan->vnode_distance);
  if (plan->hotplug_cores != NULL)
    g_ptr_array_unref(plan->hotplug_cores);
  g_free(plan);
}

/* ---- Context setup ------------------------------------------------------ */

static void
ctx_clear(Ctx *ctx)
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
  g_free(ctx->load);
  hwloc_bitmap_free(ctx->dedicated_others);
  hwloc_bitmap_free(ctx->usable);
  g_free(ctx->cpu_idx);
  g_free(ctx->node_idx);
  g_free(ctx->vcpu_gnode);
}

static guint64
node_reserve_mib(const QpPlacementOptions *opts, int id)
{
  if (opts->node_reserve != NULL)
    for (guint i = 0; i < opts->node_reserve->len; i++) {
      const QpNodeAmount *r =
          &g_array_index(opts->node_reserve, QpNodeAmount, i);
      if (r->node == id)
        return r->mib;
    }
  return opts->reserve_mib;
}

static const QpHugePool *
node_pool(const QpNode *node, guint64 page_kib)
{
  if (node->hugepages == NULL)
    return NULL;
  for (guint i = 0; i < node->hugepages->len; i++) {
    const QpHugePool *p = &g_array_index(node->hugepages, QpHugePool, i);
    if (p->page_kib == page_kib)
      return p;
  }
  return NULL;
}

static const QpPciDevice *
find_pci(const QpHost *host, const char *bdf)
{
  if (host->pci == NULL)
    return NULL;
  for (guint i = 0; i < host->pci->len; i++) {
    const QpPciDevice *d = &g_array_index(host->pci, QpPciDevice, i);
    if (d->bdf != NULL && g_ascii_strcasecmp(d->bdf, bdf) == 0)
      return d;
  }
  /* "3b:00.0" without the domain */
  if (strlen(bdf) == 7) {
    g_autofree char *full = g_strdup_printf("0000:%s", bdf);
    return find_pci(host, full);
  }
  return NULL;
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
    add_piece(ctx, -1, QP_MEM_RAM, req->mem_mib, req->page_kib, NULL, NULL,
              req->host_nodes, req->policy);
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

static gboolean
ctx_init(Ctx *ctx, const QpHost *host, const QpClaims *claims,
         const QpRequest *req, const QpPlacementOptions *opts, QpPlan *notes,
         GError **error)
{
  ctx->host = host;
  ctx->claims = claims;
  ctx->req = req;
  ctx->opts = opts;
  ctx->n = MAX(MAX(req->maxcpus, req->vcpus), 1);
  ctx->threads = MAX(req->threads, 1);
  ctx->nn = host->n_nodes;
  init_classes(ctx);

  guint nn = ctx->nn;
  ctx->max_node_id = -1;
  for (guint i = 0; i < nn; i++)
    ctx->max_node_id = MAX(ctx->max_node_id, host->nodes[i].id);
  ctx->node_idx = g_new(int, ctx->max_node_id + 2);
  for (int i = 0; i <= ctx->max_node_id + 1; i++)
    ctx->node_idx[i] = -1;
  for (guint i = 0; i < nn; i++)
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

  /* Nodes. */
  ctx->node_ok = g_new0(gboolean, MAX(nn, 1));
  for (guint i = 0; i < nn; i++) {
    int id = host->nodes[i].id;
    gboolean ok = TRUE;
    if (opts->hostnodes != NULL && !hwloc_bitmap_isset(opts->hostnodes, id))
      ok = FALSE;
    if (claims != NULL && claims->blocked_nodes != NULL &&
        hwloc_bitmap_isset(claims->blocked_nodes, id))
      ok = FALSE;
    if (host->allowed_nodes != NULL &&
        !hwloc_bitmap_isset(host->allowed_nodes, id))
      ok = FALSE;
    ctx->node_ok[i] = ok;
  }

  /* Claims of other VMs. */
  gsize cells = MAX((gsize)nn * ctx->ncls, 1);
  ctx->dedicated_others = hwloc_bitmap_alloc();
  ctx->avail = g_new0(guint64, cells);
  ctx->total_units = g_new0(guint64, cells);
  ctx->claimed_units = g_new0(guint64, cells);
  ctx->reserve_units = g_new0(guint64, cells);
  ctx->load = g_new0(guint, MAX(nn, 1));
  if (claims != NULL && claims->claims != NULL)
    for (guint c = 0; c < claims->claims->len; c++) {
      const QpClaim *cl = g_ptr_array_index(claims->claims, c);
      if (cl->dedicated != NULL)
        hwloc_bitmap_or(ctx->dedicated_others, ctx->dedicated_others,
                        cl->dedicated);
      if (cl->load != NULL)
        for (guint k = 0; k < cl->load->len; k++) {
          const QpNodeLoad *l = &g_array_index(cl->load, QpNodeLoad, k);
          int i = node_index(ctx, l->node);
          if (i >= 0)
            ctx->load[i] += l->vcpus;
        }
      if (cl->mem != NULL)
        for (guint k = 0; k < cl->mem->len; k++) {
          const QpNodeAmount *m = &g_array_index(cl->mem, QpNodeAmount, k);
          int i = node_index(ctx, m->node);
          if (i >= 0)
            ctx->claimed_units[AT(ctx, 0, i)] += m->mib;
        }
      if (cl->huge != NULL)
        for (guint k = 0; k < cl->huge->len; k++) {
          const QpHugeClaim *h = &g_array_index(cl->huge, QpHugeClaim, k);
          int i = node_index(ctx, h->node);
          guint hc = class_of(ctx, h->page_kib);
          if (i >= 0 && hc > 0)
            ctx->claimed_units[AT(ctx, hc, i)] += h->pages;
        }
    }

  for (guint i = 0; i < nn; i++) {
    const QpNode *node = &host->nodes[i];
    /* Memory in hugepage pools is not available to plain allocations. */
    guint64 pools = 0;
    if (node->hugepages != NULL)
      for (guint k = 0; k < node->hugepages->len; k++) {
        const QpHugePool *p = &g_array_index(node->hugepages, QpHugePool, k);
        pools += p->total * p->page_kib / 1024;
      }
    guint64 total = node->total_mib > pools ? node->total_mib - pools : 0;
    gsize k = AT(ctx, 0, i);
    ctx->total_units[k] = total;
    ctx->reserve_units[k] = node_reserve_mib(opts, node->id);
    guint64 used = ctx->reserve_units[k] + ctx->claimed_units[k];
    ctx->avail[k] = total > used ? total - used : 0;
    /* Hugepages: the pool's free pages less what other VMs claimed. */
    for (guint c = 1; c < ctx->ncls; c++) {
      const QpHugePool *p = node_pool(node, ctx->cls_page[c]);
      guint64 free_pages = p != NULL ? p->free : 0;
      k = AT(ctx, c, i);
      ctx->total_units[k] = p != NULL ? p->total : 0;
      ctx->avail[k] = free_pages > ctx->claimed_units[k]
                          ? free_pages - ctx->claimed_units[k]
                          : 0;
    }
  }

  /* Usable CPUs. */
  ctx->usable = hwloc_bitmap_alloc();
  for (guint i = 0; i < nn; i++)
    if (ctx->node_ok[i] && host->nodes[i].cpus != NULL)
      hwloc_bitmap_or(ctx->usable, ctx->usable, host->nodes[i].cpus);
  if (host->allowed != NULL)
    hwloc_bitmap_and(ctx->usable, ctx->usable, host->allowed);
  if (opts->affinity != NULL)
    hwloc_bitmap_and(ctx->usable, ctx->usable, opts->affinity);
  hwloc_bitmap_andnot(ctx->usable, ctx->usable, ctx->dedicated_others);

  /* vCPU -> guest node. vCPUs no -numa node names go to the first one, as
   * QEMU does. */
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

  /* Devices. */
  ctx->device_node = g_new0(gboolean, MAX(nn, 1));
  if (req->vfio != NULL && opts->device_locality != QP_DEVLOC_IGNORE)
    for (char **b = req->vfio; *b != NULL; b++) {
      const QpPciDevice *d = find_pci(host, *b);
      int i = d != NULL ? node_index(ctx, d->node) : -1;
      if (i < 0) {
        if (opts->device_locality == QP_DEVLOC_REQUIRED) {
          g_set_error(
              error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT,
              "vfio device %s %s: --device-locality=required needs "
              "its host node (use preferred or ignore)",
              *b, d == NULL ? "is not on this host" : "has no known NUMA node");
          return FALSE;
        }
        add_warning(notes, "vfio device %s %s: its locality is ignored", *b,
                    d == NULL ? "is not on this host"
                              : "has no known NUMA node");
        continue;
      }
      ctx->device_node[i] = TRUE;
      ctx->any_device_node = TRUE;
    }
  return TRUE;
}

/* ---- Attempts ----------------------------------------------------------- */

void
attempt_clear(Attempt *a, guint nn)
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
attempt_init(Attempt *a, const Ctx *ctx, hwloc_const_bitmap_t usable)
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
    int ci = cpu_index(ctx, first);
    int i = ci >= 0 ? node_index(ctx, host->cpus[ci].node) : -1;
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

/* ---- Memory helpers ----------------------------------------------------- */

/* Takes what is left of LEFT units from the nodes of SET in order, each
 * as far as it holds. Returns what no node could take. */
static guint64
fill_in_order(guint64 left, const guint *set, guint k, guint64 *avail,
              guint64 *claim)
{
  for (guint j = 0; j < k && left > 0; j++) {
    guint64 take = MIN(left, avail[set[j]]);
    avail[set[j]] -= take;
    claim[set[j]] += take;
    left -= take;
  }
  return left;
}

/* Splits NEED units over SET (node indexes): even shares with the remainder
 * on the first node; a node short of its share leaves the rest to the
 * others, in order. The caller has checked that SET holds NEED. */
static void
split_units(guint64 need, const guint *set, guint k, guint64 *avail,
            guint64 *claim)
{
  guint64 left = need;
  if (k == 0)
    return;
  for (guint j = 0; j < k; j++) {
    guint64 want = need / k + (j == 0 ? need % k : 0);
    guint64 take = MIN(want, avail[set[j]]);
    avail[set[j]] -= take;
    claim[set[j]] += take;
    left -= take;
  }
  fill_in_order(left, set, k, avail, claim);
}

void
qp_plan_split_units(guint64 need, const guint *set, guint k, guint64 *avail,
                    guint64 *claim)
{
  split_units(need, set, k, avail, claim);
}

static gint
by_avail(gconstpointer a, gconstpointer b, gpointer avail)
{
  guint64 x = ((const guint64 *)avail)[*(const guint *)a];
  guint64 y = ((const guint64 *)avail)[*(const guint *)b];
  return x < y ? -1 : x > y;
}

/* Pack: fills the set's nodes tightest first, so that what stays free
 * stays together on the others, where a later guest fits on one node.
 * Even shares would leave a fragment on every node of the set. */
static void
split_units_tight(guint64 need, const guint *set, guint k, guint64 *avail,
                  guint64 *claim)
{
  g_autofree guint *order = g_memdup2(set, sizeof(guint) * k);
  /* Stable: equal nodes keep the set's order. */
  g_qsort_with_data(order, (gint)k, sizeof(guint), by_avail, avail);
  fill_in_order(need, order, k, avail, claim);
}

/* A copy of the uncommitted units per class and node, for one try. */
guint64 *
avail_copy(const Ctx *ctx)
{
  return g_memdup2(ctx->avail,
                   MAX((gsize)ctx->nn * ctx->ncls, 1) * sizeof(guint64));
}

static QpPolicy
bind_policy(const Ctx *ctx)
{
  return ctx->opts->policy == QP_POLICY_DEFAULT ? QP_POLICY_BIND
                                                : ctx->opts->policy;
}

char *
gnode_name(const Ctx *ctx, int gi)
{
  if (gi < 0)
    return g_strdup("guest");
  return g_strdup_printf("guest node %d", ctx->req->gnodes[gi].id);
}

const Piece *
piece_at(const Ctx *ctx, guint x)
{
  return &g_array_index(ctx->pieces, Piece, x);
}

/* "guest node 1", or "pc-dimm dimm0 of guest node 1" for a device. */
static char *
piece_name(const Ctx *ctx, const Piece *p)
{
  g_autofree char *g = gnode_name(ctx, p->gi);
  if (p->kind == QP_MEM_RAM)
    return g_steal_pointer(&g);
  if (p->kind == QP_MEM_UNUSED)
    return g_strdup_printf("unused memory backend %s", p->memdev);
  return g_strdup_printf("%s %s of %s", qp_mem_kind_name(p->kind),
                         p->device != NULL ? p->device : p->memdev, g);
}

/* ---- Claims per piece --------------------------------------------------- */

void
acc_init(Acc *acc, const Ctx *ctx)
{
  guint nn = MAX(ctx->nn, 1);
  acc->claim = g_new0(guint64, (gsize)nn * ctx->ncls);
  acc->piece = g_new0(guint64, (gsize)nn * MAX(ctx->pieces->len, 1));
  acc->load = g_new0(guint, nn);
  acc->unbound = FALSE;
}

void
acc_clear(Acc *acc)
{
  g_free(acc->claim);
  g_free(acc->piece);
  g_free(acc->load);
}

/* Claims piece X over the nodes SET (indexes) from AVAIL: even shares,
 * or with TIGHT the tightest node first (see split_units_tight). */
static void
take_piece(const Ctx *ctx, Acc *acc, guint64 *avail, guint x, const guint *set,
           guint k, gboolean tight)
{
  const Piece *p = piece_at(ctx, x);
  g_autofree guint64 *got = g_new0(guint64, MAX(ctx->nn, 1));
  if (tight)
    split_units_tight(p->units, set, k, avail + AT(ctx, p->cls, 0), got);
  else
    split_units(p->units, set, k, avail + AT(ctx, p->cls, 0), got);
  for (guint i = 0; i < ctx->nn; i++) {
    acc->piece[(gsize)x * ctx->nn + i] += got[i];
    acc->claim[AT(ctx, p->cls, i)] += got[i];
  }
}

/* Node indexes of host-nodes NODES of WHO, checked against the host. */
gboolean
node_indexes(const Ctx *ctx, hwloc_const_bitmap_t nodes, const char *who,
             GArray **out, GError **error)
{
  g_autoptr(GArray) set = g_array_new(FALSE, FALSE, sizeof(guint));
  g_autofree char *list = qp_list_format(nodes);
  int id;
  hwloc_bitmap_foreach_begin(id, nodes)
  {
    int i = node_index(ctx, id);
    if (i < 0) {
      g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT,
                  "host-nodes %s of %s: node %d does not exist on this host",
                  list, who, id);
      return FALSE;
    }
    if (ctx->claims != NULL && ctx->claims->blocked_nodes != NULL &&
        hwloc_bitmap_isset(ctx->claims->blocked_nodes, id)) {
      g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT,
                  "host-nodes %s of %s: node %d is fully claimed (blocked by "
                  "an unreadable ledger record)",
                  list, who, id);
      return FALSE;
    }
    guint u = (guint)i;
    g_array_append_val(set, u);
  }
  hwloc_bitmap_foreach_end();
  *out = g_steal_pointer(&set);
  return TRUE;
}

/* Claims piece X on the nodes it must go to (Piece.fixed). The caller's
 * nodes outside --hostnodes are allowed: an explicit binding wins. */
static gboolean
claim_fixed(const Ctx *ctx, Acc *acc, guint64 *avail, guint x, GError **error)
{
  const Piece *p = piece_at(ctx, x);
  g_autofree char *who = piece_name(ctx, p);
  g_autoptr(GArray) set = NULL;
  if (!node_indexes(ctx, p->fixed, who, &set, error))
    return FALSE;
  guint64 have = 0;
  guint best = g_array_index(set, guint, 0);
  for (guint j = 0; j < set->len; j++) {
    guint i = g_array_index(set, guint, j);
    have += avail[AT(ctx, p->cls, i)];
    if (avail[AT(ctx, p->cls, i)] > avail[AT(ctx, p->cls, best)])
      best = i;
  }
  if (have < p->units) {
    g_autofree char *list = qp_list_format(p->fixed);
    g_autofree char *need = mem_phrase(ctx, p->cls, p->units);
    g_autofree char *detail = node_mem_detail(ctx, p->cls, best);
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT,
                "%s needs %s on %s %s but node %d has only "
                "%" G_GUINT64_FORMAT " MiB uncommitted %s",
                who, need,
                p->caller_set ? "its host-nodes" : "the host-nodes of its RAM",
                list, ctx->host->nodes[best].id,
                units_to_mib(ctx, p->cls, avail[AT(ctx, p->cls, best)]),
                detail);
    return FALSE;
  }
  take_piece(ctx, acc, avail, x, (const guint *)(void *)set->data, set->len,
             FALSE);
  return TRUE;
}

/* Claims every piece that has nodes it must go to. */
gboolean
claim_all_fixed(const Ctx *ctx, Acc *acc, guint64 *avail, GError **error)
{
  for (guint x = 0; x < ctx->pieces->len; x++)
    if (piece_at(ctx, x)->fixed != NULL &&
        !claim_fixed(ctx, acc, avail, x, error))
      return FALSE;
  return TRUE;
}

/* Units per class of the pieces of guest node GI (-1: every piece) that
 * go where the planner chooses. */
guint64 *
free_need(const Ctx *ctx, int gi)
{
  guint64 *need = g_new0(guint64, ctx->ncls);
  for (guint x = 0; x < ctx->pieces->len; x++) {
    const Piece *p = piece_at(ctx, x);
    if (p->fixed == NULL && (gi < 0 || p->gi == gi || p->gi < 0))
      need[p->cls] += p->units;
  }
  return need;
}

/* ---- Node sets (balanced, one-to-one without vNUMA) --------------------- */

typedef struct {
  guint k;
  guint *nodes; /* ascending node index */
} NodeSet;

static void
node_set_free(gpointer p)
{
  NodeSet *s = p;
  g_free(s->nodes);
  g_free(s);
}

typedef struct {
  const Ctx *ctx;
  const Attempt *a;
  CapKind cap;
  const guint64 *avail;    /* units per class and node, AT() */
  const guint64 *mem_need; /* units per class */
  guint cap_need;
  const gboolean *cand;
} SetSearch;

/* TRUE when HAVE (units per class) holds the memory S needs. */
static gboolean
mem_held(const SetSearch *s, const guint64 *have)
{
  for (guint c = 0; c < s->ctx->ncls; c++)
    if (have[c] < s->mem_need[c])
      return FALSE;
  return TRUE;
}

/* TRUE when node J has memory of a class S still misses. */
static gboolean
mem_useful(const SetSearch *s, guint j, const guint64 *have)
{
  for (guint c = 0; c < s->ctx->ncls; c++)
    if (have[c] < s->mem_need[c] && s->avail[AT(s->ctx, c, j)] > 0)
      return TRUE;
  return FALSE;
}

/* What node J adds to the set: the share of the missing memory it holds
 * (averaged over the classes the guest needs) plus the share of the
 * missing CPU units. */
static double
contribution(const SetSearch *s, guint j, const guint64 *have, guint cap_have)
{
  double v = 0, mem = 0;
  guint classes = 0;
  for (guint c = 0; c < s->ctx->ncls; c++) {
    if (s->mem_need[c] == 0)
      continue;
    classes++;
    if (have[c] < s->mem_need[c])
      mem += (double)MIN(s->avail[AT(s->ctx, c, j)], s->mem_need[c] - have[c]) /
             (double)s->mem_need[c];
  }
  if (classes > 0)
    v += mem / classes;
  guint c = node_cap(s->a, s->cap, j);
  if (cap_have < s->cap_need)
    v += (double)MIN(c, s->cap_need - cap_have) / (double)s->cap_need;
  return v;
}

/* Grows a set from SEED until it holds the memory and the CPUs, adding the
 * node closest to the set (distance_first) or the one that contributes most
 * of what is still missing. Returns NULL when the usable nodes do not hold
 * the request. */
static NodeSet *
grow_from(const SetSearch *s, guint seed, gboolean distance_first, guint limit,
          gboolean *in_set, guint *maxd)
{
  const Ctx *ctx = s->ctx;
  guint nn = ctx->nn;
  guint k = 0;
  g_autofree guint *nodes = g_new(guint, nn);
  g_autofree guint64 *mem_have = g_new0(guint64, ctx->ncls);
  guint cap_have = 0;

  for (guint j = 0; j < nn; j++) {
    in_set[j] = FALSE;
    maxd[j] = dist(ctx, seed, j);
  }
  guint add = seed;
  for (;;) {
    in_set[add] = TRUE;
    nodes[k++] = add;
    for (guint c = 0; c < ctx->ncls; c++)
      mem_have[c] += s->avail[AT(ctx, c, add)];
    cap_have += node_cap(s->a, s->cap, add);
    for (guint j = 0; j < nn; j++)
      maxd[j] = MAX(maxd[j], dist(ctx, add, j));
    if (mem_held(s, mem_have) && cap_have >= s->cap_need)
      break;
    int best = -1;
    double best_c = 0;
    for (guint j = 0; j < nn; j++) {
      if (!s->cand[j] || in_set[j])
        continue;
      gboolean useful =
          mem_useful(s, j, mem_have) ||
          (cap_have < s->cap_need && node_cap(s->a, s->cap, j) > 0);
      if (!useful)
        continue;
      double c = contribution(s, j, mem_have, cap_have);
      if (best < 0) {
        best = (int)j;
        best_c = c;
        continue;
      }
      guint b = (guint)best;
      int cmp;
      if (distance_first) {
        cmp = maxd[j] != maxd[b] ? (maxd[j] < maxd[b] ? -1 : 1) : 0;
        if (cmp == 0 && dist(ctx, seed, j) != dist(ctx, seed, b))
          cmp = dist(ctx, seed, j) < dist(ctx, seed, b) ? -1 : 1;
        if (cmp == 0 && c != best_c)
          cmp = c > best_c ? -1 : 1;
      } else {
        cmp = c != best_c ? (c > best_c ? -1 : 1) : 0;
        if (cmp == 0 && maxd[j] != maxd[b])
          cmp = maxd[j] < maxd[b] ? -1 : 1;
      }
      if (cmp < 0) {
        best = (int)j;
        best_c = c;
      }
    }
    if (best < 0 || k >= limit) /* none left, or larger than a set found */
      return NULL;
    add = (guint)best;
  }
  NodeSet *set = g_new0(NodeSet, 1);
  set->k = k;
  set->nodes = g_new(guint, k);
  memcpy(set->nodes, nodes, k * sizeof(guint));
  for (guint x = 1; x < k; x++) /* insertion sort, k is small */
    for (guint y = x; y > 0 && set->nodes[y - 1] > set->nodes[y]; y--) {
      guint t = set->nodes[y];
      set->nodes[y] = set->nodes[y - 1];
      set->nodes[y - 1] = t;
    }
  return set;
}

typedef struct {
  guint devices; /* device nodes in the set */
  guint max_d;
  guint64 sum_d; /* of pairwise distances */
  guint64 mem;   /* uncommitted MiB (rank_mib) */
  guint64 cap;
  guint64 load; /* shared vCPUs of other VMs */
  guint64 cpus;
} SetScore;

static SetScore
score_set(const SetSearch *s, const NodeSet *set)
{
  const Ctx *ctx = s->ctx;
  SetScore sc = {0};
  for (guint x = 0; x < set->k; x++) {
    guint i = set->nodes[x];
    if (ctx->device_node[i])
      sc.devices++;
    sc.mem += rank_mib(ctx, s->avail, i);
    sc.cap += node_cap(s->a, s->cap, i);
    sc.load += ctx->load[i];
    sc.cpus += s->a->n_cpus[i];
    for (guint y = x + 1; y < set->k; y++) {
      guint d = dist(ctx, i, set->nodes[y]);
      sc.max_d = MAX(sc.max_d, d);
      sc.sum_d += d;
    }
  }
  return sc;
}

/* Negative when A ranks before B. */
static int
compare_sets(const SetSearch *s, const NodeSet *a, const NodeSet *b)
{
  SetScore x = score_set(s, a), y = score_set(s, b);
  if (s->ctx->opts->device_locality == QP_DEVLOC_PREFERRED &&
      x.devices != y.devices)
    return x.devices > y.devices ? -1 : 1;
  if (x.max_d != y.max_d)
    return x.max_d < y.max_d ? -1 : 1;
  if (x.sum_d != y.sum_d)
    return x.sum_d < y.sum_d ? -1 : 1;
  /* Memory compares in whole GiB: smaller differences are the noise of
   * firmware and kernel reservations (seed 000's nodes: 15891-16124 MB). */
  x.mem /= 1024;
  y.mem /= 1024;
  if (s->ctx->opts->strategy == QP_STRATEGY_PACK) {
    /* Tightest fit: least memory left over, then fewest CPUs left over. */
    if (x.mem != y.mem)
      return x.mem < y.mem ? -1 : 1;
    if (x.cap != y.cap)
      return x.cap < y.cap ? -1 : 1;
  } else {
    if (x.mem != y.mem)
      return x.mem > y.mem ? -1 : 1;
    /* least shared load per CPU: x.load/x.cpus < y.load/y.cpus */
    guint64 l = x.load * MAX(y.cpus, 1), r = y.load * MAX(x.cpus, 1);
    if (l != r)
      return l < r ? -1 : 1;
  }
  for (guint j = 0; j < a->k; j++)
    if (a->nodes[j] != b->nodes[j])
      return a->nodes[j] < b->nodes[j] ? -1 : 1;
  return 0;
}

static gboolean
same_set(const NodeSet *a, const NodeSet *b)
{
  return a->k == b->k && memcmp(a->nodes, b->nodes, a->k * sizeof(guint)) == 0;
}

/* "in affinity 0-7 on host nodes 0-1 of CPU kind 1 (4 CPUs dedicated to
 * other VMs)" */
char *
scope_phrase(const Ctx *ctx, const Attempt *a, const gboolean *cand)
{
  GString *s = g_string_new("");
  g_auto(hwloc_bitmap_t) nodes = hwloc_bitmap_alloc();
  for (guint i = 0; i < ctx->nn; i++)
    if (cand[i])
      hwloc_bitmap_set(nodes, ctx->host->nodes[i].id);
  if (ctx->opts->affinity != NULL) {
    g_autofree char *l = qp_list_format(ctx->opts->affinity);
    g_string_append_printf(s, " in affinity %s", l);
  }
  g_autofree char *nl = qp_list_format(nodes);
  g_string_append_printf(s, " on host nodes %s", *nl ? nl : "(none)");
  g_string_append(s, a->kind_note);
  int ded = hwloc_bitmap_weight(ctx->dedicated_others);
  if (ded > 0)
    g_string_append_printf(s, " (%d CPUs dedicated to other VMs)", ded);
  if (ctx->claims != NULL && ctx->claims->blocked_nodes != NULL &&
      !hwloc_bitmap_iszero(ctx->claims->blocked_nodes)) {
    g_autofree char *bl = qp_list_format(ctx->claims->blocked_nodes);
    gboolean one = hwloc_bitmap_weight(ctx->claims->blocked_nodes) == 1;
    g_string_append_printf(s,
                           " (%s %s %s held whole by unreadable ledger "
                           "records until an operator removes them)",
                           one ? "node" : "nodes", bl, one ? "is" : "are");
  }
  return g_string_free(s, FALSE);
}

static void
set_cap_error(const Ctx *ctx, CapKind cap, guint need, guint have,
              const char *scope, const char *prefix, GError **error)
{
  switch (cap) {
  case CAP_CPUS:
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT,
                "%sguest needs %u CPUs for %u vCPUs but only %u are usable%s",
                prefix, need, need, have, scope);
    break;
  case CAP_CORES:
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT,
                "%sone-to-one needs %u free cores but only %u are free%s",
                prefix, need, have, scope);
    break;
  case CAP_GROUPS:
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT,
                "%sone-to-one with threads=%u needs %u free cores with %u "
                "usable SMT siblings but only %u are free%s",
                prefix, ctx->threads, need, ctx->threads, have, scope);
    break;
  case CAP_PUS:
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT,
                "%sone-to-one needs %u CPUs on free cores but only %u are "
                "free%s",
                prefix, need, have, scope);
    break;
  }
}

/* Chooses the fewest candidate nodes holding MEM_NEED units and CAP_NEED
 * CPU units; among those the closest, then by strategy. */
static NodeSet *
choose_node_set(const SetSearch *s, const char *prefix, GError **error)
{
  const Ctx *ctx = s->ctx;
  guint nn = ctx->nn;
  g_autoptr(GPtrArray) sets = g_ptr_array_new_with_free_func(node_set_free);
  g_autofree gboolean *in_set = g_new0(gboolean, MAX(nn, 1));
  g_autofree guint *maxd = g_new0(guint, MAX(nn, 1));
  g_autofree guint64 *none = g_new0(guint64, ctx->ncls);
  guint kmin = G_MAXUINT;

  for (guint seed = 0; seed < nn; seed++) {
    if (!s->cand[seed])
      continue;
    if (s->cap_need > 0 ? node_cap(s->a, s->cap, seed) == 0
                        : !mem_held(s, none) && !mem_useful(s, seed, none))
      continue;
    for (int df = 1; df >= 0; df--) {
      NodeSet *set = grow_from(s, seed, df, kmin, in_set, maxd);
      if (set == NULL)
        continue;
      gboolean dup = set->k > kmin;
      for (guint x = 0; !dup && x < sets->len; x++)
        dup = same_set(g_ptr_array_index(sets, x), set);
      if (dup) {
        node_set_free(set);
        continue;
      }
      kmin = MIN(kmin, set->k);
      g_ptr_array_add(sets, set);
    }
  }

  NodeSet *best = NULL;
  for (guint x = 0; x < sets->len; x++) {
    NodeSet *set = g_ptr_array_index(sets, x);
    if (set->k == kmin && (best == NULL || compare_sets(s, set, best) < 0))
      best = set;
  }
  if (best != NULL) {
    NodeSet *r = g_new0(NodeSet, 1);
    r->k = best->k;
    r->nodes = g_memdup2(best->nodes, best->k * sizeof(guint));
    return r;
  }

  /* Name the shortfall: the class of memory the candidates lack. */
  g_autofree guint64 *mems = g_new0(guint64, ctx->ncls);
  guint cap = 0;
  for (guint i = 0; i < nn; i++)
    if (s->cand[i]) {
      for (guint c = 0; c < ctx->ncls; c++)
        mems[c] += s->avail[AT(ctx, c, i)];
      cap += node_cap(s->a, s->cap, i);
    }
  guint cls = 0;
  while (cls + 1 < ctx->ncls && s->mem_need[cls] == 0)
    cls++;
  for (guint c = ctx->ncls; c-- > 0;)
    if (mems[c] < s->mem_need[c])
      cls = c;
  guint64 mem = mems[cls];
  int bestmem = -1;
  for (guint i = 0; i < nn; i++)
    if (s->cand[i] && (bestmem < 0 || s->avail[AT(ctx, cls, i)] >
                                          s->avail[AT(ctx, cls, bestmem)]))
      bestmem = (int)i;
  g_autofree char *scope = scope_phrase(ctx, s->a, s->cand);
  if (cap < s->cap_need) {
    set_cap_error(ctx, s->cap, s->cap_need, cap, scope, prefix, error);
    return NULL;
  }
  g_autofree char *need = mem_phrase(ctx, cls, s->mem_need[cls]);
  if (bestmem < 0) {
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT,
                "%sguest needs %s but no host node may be used%s", prefix, need,
                scope);
    return NULL;
  }
  g_autofree char *detail = node_mem_detail(ctx, cls, (guint)bestmem);
  guint64 best_units = s->avail[AT(ctx, cls, bestmem)];
  guint ncand = 0;
  for (guint i = 0; i < nn; i++)
    ncand += s->cand[i] ? 1 : 0;
  if (ncand == 1)
    g_set_error(
        error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT,
        "%sguest needs %s but the best node %d has only %" G_GUINT64_FORMAT
        " MiB uncommitted %s",
        prefix, need, ctx->host->nodes[bestmem].id,
        units_to_mib(ctx, cls, best_units), detail);
  else
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT,
                "%sguest needs %s but the usable host nodes have only "
                "%" G_GUINT64_FORMAT " MiB uncommitted together; the best node "
                "%d has %" G_GUINT64_FORMAT " MiB uncommitted %s",
                prefix, need, units_to_mib(ctx, cls, mem),
                ctx->host->nodes[bestmem].id,
                units_to_mib(ctx, cls, best_units), detail);
  return NULL;
}

/* choose_node_set() for a guest without vNUMA whose RAM the caller bound
 * (host-nodes on -machine memory-backend=, libvirt's <numatune> without
 * cells): its vCPUs go to the caller's nodes when they have room, else to
 * the set choose_node_set() finds. */
static NodeSet *
choose_near_caller_mem(const SetSearch *s, const char *prefix, GError **error)
{
  const Ctx *ctx = s->ctx;
  const Piece *ram = ctx->req->n_gnodes == 0 ? piece_at(ctx, 0) : NULL;
  if (ram != NULL && ram->caller_set) {
    g_autofree gboolean *near = g_new0(gboolean, MAX(ctx->nn, 1));
    for (guint i = 0; i < ctx->nn; i++)
      near[i] = s->cand[i] && hwloc_bitmap_isset(
                                  ram->fixed, (unsigned)ctx->host->nodes[i].id);
    SetSearch there = *s;
    there.cand = near;
    NodeSet *set = choose_node_set(&there, prefix, NULL);
    if (set != NULL)
      return set;
  }
  return choose_node_set(s, prefix, error);
}

/* A reason for each piece the caller bound itself (MODE: the mode's name),
 * which stays on its nodes and is claimed there. */
static void
reason_caller_pieces(QpPlan *plan, const Ctx *ctx, const char *mode)
{
  for (guint x = 0; x < ctx->pieces->len; x++) {
    const Piece *p = piece_at(ctx, x);
    if (!p->caller_set)
      continue;
    g_autofree char *who = piece_name(ctx, p);
    g_autofree char *cl = qp_list_format(p->fixed);
    add_reason(plan,
               "%s: the memory of %s stays on host node%s %s, where the "
               "caller bound it, and is claimed there",
               mode, who, hwloc_bitmap_weight(p->fixed) > 1 ? "s" : "", cl);
  }
}

/* Candidates for node sets, honouring --device-locality=required. */
gboolean *
set_candidates(const Ctx *ctx, char **prefix)
{
  gboolean *cand = g_new0(gboolean, MAX(ctx->nn, 1));
  gboolean required =
      ctx->opts->device_locality == QP_DEVLOC_REQUIRED && ctx->any_device_node;
  for (guint i = 0; i < ctx->nn; i++)
    cand[i] = ctx->node_ok[i] && (!required || ctx->device_node[i]);
  if (required) {
    GString *p = g_string_new("with --device-locality=required (vfio");
    for (char **b = ctx->req->vfio; *b != NULL; b++) {
      const QpPciDevice *d = find_pci(ctx->host, *b);
      if (d != NULL)
        g_string_append_printf(p, " %s on node %d", *b, d->node);
    }
    g_string_append(p, "): ");
    *prefix = g_string_free(p, FALSE);
  } else {
    *prefix = g_strdup("");
  }
  return cand;
}

/* ---- Results common to every mode --------------------------------------- */

/* The plan's entry for piece X, bound to NODES (NULL: not bound), with
 * what ACC claimed for it. */
void
add_plan_mem(QpPlan *plan, const Ctx *ctx, const Acc *acc, guint x,
             hwloc_const_bitmap_t nodes)
{
  const Piece *p = piece_at(ctx, x);
  gboolean caller_set = p->caller_set && nodes == p->fixed;
  plan->mem = g_renew(QpPlanMem, plan->mem, plan->n_mem + 1);
  QpPlanMem *m = &plan->mem[plan->n_mem++];
  memset(m, 0, sizeof(*m));
  m->gnode = p->gi < 0 ? -1 : ctx->req->gnodes[p->gi].id;
  m->host_nodes = nodes != NULL ? hwloc_bitmap_dup(nodes) : NULL;
  m->policy = caller_set ? p->caller_policy : bind_policy(ctx);
  m->mem_mib = p->mem_mib;
  m->memdev = g_strdup(p->memdev);
  m->caller_set = caller_set;
  m->kind = p->kind;
  m->device = g_strdup(p->device);
  m->page_kib = ctx->cls_page[p->cls];
  m->claim = g_array_new(FALSE, FALSE, sizeof(QpNodeUnits));
  for (guint i = 0; i < ctx->nn; i++) {
    QpNodeUnits u = {ctx->host->nodes[i].id,
                     acc->piece[(gsize)x * ctx->nn + i]};
    if (u.units > 0)
      g_array_append_val(m->claim, u);
  }
}

hwloc_bitmap_t
ids_of(const Ctx *ctx, const guint *nodes, guint k)
{
  hwloc_bitmap_t b = hwloc_bitmap_alloc();
  for (guint j = 0; j < k; j++)
    hwloc_bitmap_set(b, ctx->host->nodes[nodes[j]].id);
  return b;
}

/* Largest same-kind subset of SET (the most performant kind on a tie). */
static hwloc_bitmap_t
largest_kind_subset(const Ctx *ctx, hwloc_const_bitmap_t set)
{
  guint nk = MAX(ctx->host->n_kinds, 1);
  g_autofree guint *count = g_new0(guint, nk);
  int id;
  hwloc_bitmap_foreach_begin(id, set)
  {
    int ci = cpu_index(ctx, id);
    int k = ci >= 0 ? ctx->host->cpus[ci].kind : 0;
    if (k >= 0 && (guint)k < nk)
      count[k]++;
  }
  hwloc_bitmap_foreach_end();
  guint best = nk - 1;
  for (guint k = nk; k-- > 0;)
    if (count[k] > count[best])
      best = k;
  hwloc_bitmap_t r = hwloc_bitmap_alloc();
  hwloc_bitmap_foreach_begin(id, set)
  {
    int ci = cpu_index(ctx, id);
    int k = ci >= 0 ? ctx->host->cpus[ci].kind : 0;
    if ((guint)MAX(k, 0) == best || nk == 1)
      hwloc_bitmap_set(r, id);
  }
  hwloc_bitmap_foreach_end();
  return r;
}

/* Fills claims, emulator/iothread/startup sets and host_nodes from what the
 * mode decided (vcpu_cpus, process_cpus, dedicated, mem, ACC). VM_NODES are
 * the node indexes whose CPUs the VM uses. */
void
finish_plan(QpPlan *plan, const Ctx *ctx, const Attempt *a, const Acc *acc,
            const gboolean *vm_nodes)
{
  for (guint i = 0; i < ctx->nn; i++) {
    int id = ctx->host->nodes[i].id;
    for (guint c = 0; c < ctx->ncls; c++) {
      guint64 units = acc->claim[AT(ctx, c, i)];
      if (units == 0)
        continue;
      hwloc_bitmap_set(plan->host_nodes, id);
      if (c == 0) {
        QpNodeAmount m = {.node = id, .mib = units};
        g_array_append_val(plan->claim_mem, m);
      } else {
        QpHugeClaim h = {
            .node = id, .page_kib = ctx->cls_page[c], .pages = units};
        g_array_append_val(plan->claim_huge, h);
      }
    }
    if (acc->load[i] > 0) {
      QpNodeLoad l = {.node = id, .vcpus = acc->load[i]};
      g_array_append_val(plan->load, l);
    }
    if (vm_nodes[i])
      hwloc_bitmap_set(plan->host_nodes, id);
  }

  /* Emulator and iothreads: the VM's nodes' usable CPUs off its dedicated
   * cores, when any are left; else the VM's own CPUs. */
  g_auto(hwloc_bitmap_t) vm_cpus = hwloc_bitmap_alloc();
  for (guint v = 0; v < plan->n_vcpus; v++)
    hwloc_bitmap_or(vm_cpus, vm_cpus, plan->vcpu_cpus[v]);
  g_auto(hwloc_bitmap_t) around = hwloc_bitmap_alloc();
  for (guint i = 0; i < ctx->nn; i++)
    if (vm_nodes[i])
      hwloc_bitmap_or(around, around, a->node_cpus[i]);
  hwloc_bitmap_andnot(around, around, plan->dedicated);
  if (hwloc_bitmap_iszero(around)) {
    hwloc_bitmap_copy(around, vm_cpus);
    add_reason(plan, "emulator and iothreads share the vCPUs' CPUs: no other "
                     "usable CPU is left on the VM's nodes");
  } else if (!hwloc_bitmap_iszero(plan->dedicated)) {
    g_autofree char *l = qp_list_format(around);
    add_reason(plan,
               "emulator and iothreads on %s: the VM's nodes, off its "
               "dedicated cores",
               l);
  }
  plan->emulator_cpus = hwloc_bitmap_dup(around);
  plan->iothread_cpus = hwloc_bitmap_dup(around);
  if (plan->process_cpus == NULL) {
    plan->process_cpus = hwloc_bitmap_dup(vm_cpus);
    hwloc_bitmap_or(plan->process_cpus, plan->process_cpus, around);
  }
  plan->startup_cpus = largest_kind_subset(ctx, plan->process_cpus);
  if (ctx->host->n_kinds > 1 &&
      !hwloc_bitmap_isequal(plan->startup_cpus, plan->process_cpus)) {
    g_autofree char *l = qp_list_format(plan->startup_cpus);
    add_reason(plan,
               "startup CPUs %s: the largest same-kind subset of the "
               "process CPUs",
               l);
  }

  if (plan->n_mem > 0 && !acc->unbound) {
    plan->mem_nodes = hwloc_bitmap_alloc();
    for (guint m = 0; m < plan->n_mem; m++)
      if (plan->mem[m].host_nodes != NULL)
        hwloc_bitmap_or(plan->mem_nodes, plan->mem_nodes,
                        plan->mem[m].host_nodes);
    plan->mem_policy = bind_policy(ctx);
  }
  plan_fill_cpu_load(plan);
}

/* ---- balanced ----------------------------------------------------------- */

gboolean
plan_balanced(QpPlan *plan, const Ctx *ctx, Attempt *a, guint cpu_need,
              GError **error)
{
  guint nn = ctx->nn;
  g_autofree guint64 *avail = avail_copy(ctx);
  g_auto(Acc) acc;
  acc_init(&acc, ctx);

  /* Memory the caller bound itself stays there. */
  if (!claim_all_fixed(ctx, &acc, avail, error))
    return FALSE;
  g_autofree guint64 *need = free_need(ctx, -1);

  g_autofree char *prefix = NULL;
  g_autofree gboolean *cand = set_candidates(ctx, &prefix);
  SetSearch s = {ctx, a, CAP_CPUS, avail, need, cpu_need, cand};
  NodeSet *set = choose_near_caller_mem(&s, prefix, error);
  if (set == NULL)
    return FALSE;
  g_autofree guint *nodes = set->nodes;
  guint k = set->k;
  g_free(set);
  g_auto(hwloc_bitmap_t) ids = ids_of(ctx, nodes, k);

  SetScore sc = score_set(&s, &(NodeSet){k, nodes});
  g_autofree char *l = qp_list_format(ids);
  g_autofree char *needp = need_phrase(ctx, need);
  add_reason(plan,
             "balanced: host node%s %s: the fewest nodes (%u) holding %s "
             "and %u CPUs (%" G_GUINT64_FORMAT
             " usable CPUs, %" G_GUINT64_FORMAT " MiB uncommitted), max "
             "distance %u, %s strategy",
             k > 1 ? "s" : "", l, k, needp, cpu_need, sc.cpus, sc.mem,
             k > 1 ? sc.max_d : 10, qp_strategy_name(ctx->opts->strategy));
  if (k > 1) {
    guint64 best_mem = 0;
    guint best_cpus = 0;
    for (guint i = 0; i < nn; i++)
      if (cand[i]) {
        best_mem = MAX(best_mem, rank_mib(ctx, avail, i));
        best_cpus = MAX(best_cpus, a->n_cpus[i]);
      }
    add_reason(plan,
               "balanced: no single node holds the guest: the most "
               "usable CPUs on one node are %u, the most uncommitted "
               "memory %" G_GUINT64_FORMAT " MiB",
               best_cpus, best_mem);
  }
  if (ctx->any_device_node && ctx->opts->device_locality != QP_DEVLOC_IGNORE)
    add_reason(plan,
               "balanced: %u of the chosen nodes hold the guest's vfio "
               "devices",
               sc.devices);

  reason_caller_pieces(plan, ctx, "balanced");
  for (guint x = 0; x < ctx->pieces->len; x++) {
    const Piece *p = piece_at(ctx, x);
    if (p->fixed != NULL) {
      add_plan_mem(plan, ctx, &acc, x, p->fixed);
      continue;
    }
    take_piece(ctx, &acc, avail, x, nodes, k,
               ctx->opts->strategy == QP_STRATEGY_PACK);
    add_plan_mem(plan, ctx, &acc, x, ids);
  }

  plan->process_cpus = hwloc_bitmap_alloc();
  g_autofree gboolean *vm_nodes = g_new0(gboolean, MAX(nn, 1));
  guint ncpu_nodes = 0;
  for (guint j = 0; j < k; j++) {
    hwloc_bitmap_or(plan->process_cpus, plan->process_cpus,
                    a->node_cpus[nodes[j]]);
    vm_nodes[nodes[j]] = TRUE;
    if (a->n_cpus[nodes[j]] > 0)
      ncpu_nodes++;
  }
  for (guint v = 0; v < plan->n_vcpus; v++)
    plan->vcpu_cpus[v] = hwloc_bitmap_dup(plan->process_cpus);
  /* Floating vCPUs: the load is split evenly over the nodes with CPUs. */
  guint seen = 0;
  for (guint j = 0; j < k && ncpu_nodes > 0; j++)
    if (a->n_cpus[nodes[j]] > 0) {
      acc.load[nodes[j]] =
          ctx->n / ncpu_nodes + (seen < ctx->n % ncpu_nodes ? 1 : 0);
      seen++;
    }
  finish_plan(plan, ctx, a, &acc, vm_nodes);
  return TRUE;
}

/* ---- numa and one-to-one with vNUMA: guest node -> host node ------------ */

typedef struct {
  int gi;       /* index into req->gnodes, -1 for the whole guest */
  guint nv;     /* vCPUs */
  guint units;  /* CPU units needed (vCPUs, cores or sibling groups) */
  guint64 *mem; /* memory units needed per class, not counting the pieces
                   that must go to nodes of their own (Piece.fixed) */
  hwloc_bitmap_t vcpus;
  GArray *fixed; /* caller's node indexes, or NULL */
  int host;      /* chosen node index */
} GuestTask;

/* Counts CPU units GT needs under CAP. */
static guint
task_units(const Ctx *ctx, CapKind cap, hwloc_const_bitmap_t vcpus)
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

/* TRUE when node I ranks before node J for a new guest node: device nodes
 * first (--device-locality), least shared load per CPU, most uncommitted
 * memory in whole GiB, lowest id. */
static gboolean
node_before(const Ctx *ctx, const Attempt *a, const guint64 *avail,
            const guint *load, guint i, guint j)
{
  if (ctx->opts->device_locality != QP_DEVLOC_IGNORE &&
      ctx->device_node[i] != ctx->device_node[j])
    return ctx->device_node[i];
  guint64 li = (guint64)load[i] * MAX(a->n_cpus[j], 1);
  guint64 lj = (guint64)load[j] * MAX(a->n_cpus[i], 1);
  if (li != lj)
    return li < lj;
  guint64 gi = rank_mib(ctx, avail, i) / 1024;
  guint64 gj = rank_mib(ctx, avail, j) / 1024;
  if (gi != gj)
    return gi > gj;
  return i < j;
}

/* Kuhn's augmenting path over guest nodes with preference lists. */
static gboolean
augment(guint t, GArray **pref, int *owner, gboolean *seen)
{
  for (guint x = 0; x < pref[t]->len; x++) {
    guint i = g_array_index(pref[t], guint, x);
    if (seen[i])
      continue;
    seen[i] = TRUE;
    if (owner[i] < 0 || augment((guint)owner[i], pref, owner, seen)) {
      owner[i] = (int)t;
      return TRUE;
    }
  }
  return FALSE;
}

static void
gtasks_free(GuestTask *tasks, guint n)
{
  for (guint t = 0; t < n; t++) {
    hwloc_bitmap_free(tasks[t].vcpus);
    g_free(tasks[t].mem);
    if (tasks[t].fixed != NULL)
      g_array_unref(tasks[t].fixed);
  }
  g_free(tasks);
}

/* Picks one PU per vCPU of TASK on the cores of node I (one-to-one). */
static void
pick_cores(QpPlan *plan, const Ctx *ctx, Attempt *a, CapKind cap, guint i,
           hwloc_const_bitmap_t vcpus)
{
  const QpHost *host = ctx->host;
  GArray *cores = a->node_cores[i];
  g_auto(hwloc_bitmap_t) pus = hwloc_bitmap_alloc();
  int v;
  if (cap == CAP_GROUPS) {
    int last_group = -1;
    guint c = 0;
    int core = -1;
    hwloc_bitmap_foreach_begin(v, vcpus)
    {
      int group = v / (int)ctx->threads;
      if (group != last_group) {
        core = -1;
        for (; c < cores->len; c++) {
          guint ci = g_array_index(cores, guint, c);
          hwloc_bitmap_and(pus, host->cores[ci].pus, a->node_cpus[i]);
          if (!a->core_used[ci] &&
              (guint)hwloc_bitmap_weight(pus) >= ctx->threads) {
            core = (int)ci;
            a->core_used[ci] = TRUE;
            break;
          }
        }
        last_group = group;
      }
      if (core < 0)
        continue; /* counted beforehand: cannot happen */
      hwloc_bitmap_and(pus, host->cores[core].pus, a->node_cpus[i]);
      int pu = hwloc_bitmap_first(pus);
      for (int skip = v % (int)ctx->threads; skip > 0 && pu >= 0; skip--)
        pu = hwloc_bitmap_next(pus, pu);
      plan->vcpu_cpus[v] = hwloc_bitmap_alloc();
      hwloc_bitmap_set(plan->vcpu_cpus[v], pu);
      hwloc_bitmap_set(a->taken, pu);
      hwloc_bitmap_or(plan->dedicated, plan->dedicated, host->cores[core].pus);
    }
    hwloc_bitmap_foreach_end();
    return;
  }
  /* One PU per core, first pass over unused cores; then (CAP_PUS) the
   * untaken siblings of this VM's cores, in core order. */
  hwloc_bitmap_foreach_begin(v, vcpus)
  {
    int pu = -1, core = -1;
    for (guint c = 0; c < cores->len && pu < 0; c++) {
      guint ci = g_array_index(cores, guint, c);
      if (a->core_used[ci])
        continue;
      hwloc_bitmap_and(pus, host->cores[ci].pus, a->node_cpus[i]);
      pu = hwloc_bitmap_first(pus);
      core = (int)ci;
    }
    if (pu < 0 && cap == CAP_PUS)
      for (guint c = 0; c < cores->len && pu < 0; c++) {
        guint ci = g_array_index(cores, guint, c);
        hwloc_bitmap_and(pus, host->cores[ci].pus, a->node_cpus[i]);
        hwloc_bitmap_andnot(pus, pus, a->taken);
        pu = hwloc_bitmap_first(pus);
        core = (int)ci;
      }
    if (pu < 0)
      continue; /* counted beforehand: cannot happen */
    a->core_used[core] = TRUE;
    plan->vcpu_cpus[v] = hwloc_bitmap_alloc();
    hwloc_bitmap_set(plan->vcpu_cpus[v], pu);
    hwloc_bitmap_set(a->taken, pu);
    hwloc_bitmap_or(plan->dedicated, plan->dedicated, host->cores[core].pus);
  }
  hwloc_bitmap_foreach_end();
}

/* "vCPUs 0-1 -> CPUs 0-1 on host node 0, one physical core each" */
static void
reason_cores(QpPlan *plan, const Ctx *ctx, guint i, hwloc_const_bitmap_t vcpus,
             CapKind cap, const char *who)
{
  g_auto(hwloc_bitmap_t) cpus = hwloc_bitmap_alloc();
  int v;
  hwloc_bitmap_foreach_begin(v, vcpus)
  {
    if (plan->vcpu_cpus[v] != NULL)
      hwloc_bitmap_or(cpus, cpus, plan->vcpu_cpus[v]);
  }
  hwloc_bitmap_foreach_end();
  g_autofree char *vl = qp_list_format(vcpus);
  g_autofree char *cl = qp_list_format(cpus);
  add_reason(plan, "%s%svCPUs %s -> CPUs %s on host node %d, %s", who,
             *who ? " " : "", vl, cl, ctx->host->nodes[i].id,
             cap == CAP_GROUPS ? "one physical core per sibling group"
             : cap == CAP_PUS  ? "free cores first, then their siblings"
                               : "one physical core each, siblings left idle");
}

/* Claims the free pieces of guest node GI (-1: of the guest) on node I. */
void
take_task_pieces(const Ctx *ctx, Acc *acc, guint64 *avail, int gi, guint i)
{
  for (guint x = 0; x < ctx->pieces->len; x++) {
    const Piece *p = piece_at(ctx, x);
    if (p->fixed == NULL && p->gi == gi)
      take_piece(ctx, acc, avail, x, &i, 1, FALSE);
  }
}

static gboolean
plan_by_gnode(QpPlan *plan, const Ctx *ctx, Attempt *a, gboolean o2o,
              CapKind cap, GError **error)
{
  const QpRequest *req = ctx->req;
  const QpHost *host = ctx->host;
  guint nn = ctx->nn;
  guint nt = MAX(req->n_gnodes, 1);
  g_autofree guint64 *avail = avail_copy(ctx);
  g_autofree guint *capleft = g_new0(guint, MAX(nn, 1));
  g_autofree guint *load = g_memdup2(ctx->load, MAX(nn, 1) * sizeof(guint));
  g_auto(Acc) acc;
  acc_init(&acc, ctx);
  g_autofree int *owner = g_new(int, MAX(nn, 1));
  g_autofree gboolean *seen = g_new0(gboolean, MAX(nn, 1));
  g_autofree gboolean *used = g_new0(gboolean, MAX(nn, 1));
  g_autofree gboolean *vm_nodes = g_new0(gboolean, MAX(nn, 1));
  GuestTask *tasks = g_new0(GuestTask, nt);
  GArray **pref = g_new0(GArray *, nt);
  gboolean ok = FALSE;

  for (guint i = 0; i < nn; i++) {
    capleft[i] = node_cap(a, cap, i);
    owner[i] = -1;
  }

  for (guint t = 0; t < nt; t++) {
    GuestTask *gt = &tasks[t];
    gt->gi = req->n_gnodes > 0 ? (int)t : -1;
    gt->host = -1;
    gt->vcpus = hwloc_bitmap_alloc();
    for (guint v = 0; v < ctx->n; v++)
      if (req->n_gnodes == 0 || ctx->vcpu_gnode[v] == (int)t)
        hwloc_bitmap_set(gt->vcpus, v);
    gt->nv = (guint)hwloc_bitmap_weight(gt->vcpus);
    gt->units = task_units(ctx, cap, gt->vcpus);
    gt->mem = free_need(ctx, gt->gi);
    pref[t] = g_array_new(FALSE, FALSE, sizeof(guint));
  }

  /* 1. Memory the caller bound stays there, and guest nodes whose RAM the
   * caller bound are used as given. */
  if (!claim_all_fixed(ctx, &acc, avail, error))
    goto out;
  for (guint t = 0; t < nt; t++) {
    GuestTask *gt = &tasks[t];
    const Piece *ram = piece_at(ctx, t);
    if (!ram->caller_set)
      continue;
    g_autofree char *who = gnode_name(ctx, gt->gi);
    if (!node_indexes(ctx, ram->fixed, who, &gt->fixed, error))
      goto out;
    guint have = 0;
    g_auto(hwloc_bitmap_t) cpus = hwloc_bitmap_alloc();
    for (guint x = 0; x < gt->fixed->len; x++) {
      guint i = g_array_index(gt->fixed, guint, x);
      have += capleft[i];
      hwloc_bitmap_or(cpus, cpus, a->node_cpus[i]);
    }
    if (have < gt->units) {
      g_autofree char *list = qp_list_format(ram->fixed);
      g_autofree char *cl = qp_list_format(cpus);
      g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT,
                  "%s has %u vCPUs but its host-nodes %s have only %u %s%s "
                  "(%s)",
                  who, gt->nv, list, have, cap_unit_name(cap), a->kind_note,
                  *cl ? cl : "no usable CPUs");
      goto out;
    }
    /* Take the units from the caller's nodes in order; all of its nodes
     * count as used for the distinct assignment of the others. */
    guint left = gt->units;
    for (guint x = 0; x < gt->fixed->len; x++) {
      guint i = g_array_index(gt->fixed, guint, x);
      guint take = MIN(left, capleft[i]);
      capleft[i] -= take;
      left -= take;
      used[i] = TRUE;
    }
  }

  /* 2. The others: distinct host nodes, least loaded first (a maximum
   * matching with preference order: without conflicts, plain greedy). */
  for (guint t = 0; t < nt; t++) {
    GuestTask *gt = &tasks[t];
    if (gt->fixed != NULL)
      continue;
    for (guint i = 0; i < nn; i++)
      if (ctx->node_ok[i] && !used[i] && (gt->nv == 0 || a->n_cpus[i] > 0) &&
          capleft[i] >= gt->units && fits(ctx, avail, i, gt->mem)) {
        guint pos = pref[t]->len;
        while (pos > 0 && node_before(ctx, a, avail, load, i,
                                      g_array_index(pref[t], guint, pos - 1)))
          pos--;
        g_array_insert_val(pref[t], pos, i);
      }
    /* Its best free node; only when none is left, move earlier guest
     * nodes to their next choices (an augmenting path). */
    gboolean placed = FALSE;
    for (guint x = 0; x < pref[t]->len && !placed; x++) {
      guint i = g_array_index(pref[t], guint, x);
      if (owner[i] < 0) {
        owner[i] = (int)t;
        placed = TRUE;
      }
    }
    if (!placed) {
      memset(seen, 0, MAX(nn, 1) * sizeof(gboolean));
      augment(t, pref, owner, seen);
    }
  }
  for (guint i = 0; i < nn; i++)
    if (owner[i] >= 0)
      tasks[owner[i]].host = (int)i;
  for (guint t = 0; t < nt; t++) {
    GuestTask *gt = &tasks[t];
    if (gt->host < 0)
      continue;
    guint i = (guint)gt->host;
    g_autofree char *who = gnode_name(ctx, gt->gi);
    g_autofree char *room = avail_phrase(ctx, avail, i);
    capleft[i] -= gt->units;
    load[i] += o2o ? 0 : gt->nv;
    add_reason(plan,
               "%s -> host node %d: %s (%u shared vCPUs on %u usable "
               "CPUs), %s",
               who, host->nodes[i].id,
               ctx->device_node[i] &&
                       ctx->opts->device_locality != QP_DEVLOC_IGNORE
                   ? "holds its vfio device"
                   : "least loaded",
               ctx->load[i], a->n_cpus[i], room);
    take_task_pieces(ctx, &acc, avail, gt->gi, i);
    used[i] = TRUE;
  }

  /* 3. Guest nodes left over share a host node with another guest node. */
  for (guint t = 0; t < nt; t++) {
    GuestTask *gt = &tasks[t];
    if (gt->fixed != NULL || gt->host >= 0)
      continue;
    int best = -1;
    for (guint i = 0; i < nn; i++)
      if (ctx->node_ok[i] && (gt->nv == 0 || a->n_cpus[i] > 0) &&
          capleft[i] >= gt->units && fits(ctx, avail, i, gt->mem) &&
          (best < 0 || node_before(ctx, a, avail, load, i, (guint)best)))
        best = (int)i;
    g_autofree char *who = gnode_name(ctx, gt->gi);
    if (best < 0) {
      /* Name the shortfall: the node with the most room for the CPUs. */
      int bc = -1, bm = -1;
      for (guint i = 0; i < nn; i++) {
        if (!ctx->node_ok[i] || a->n_cpus[i] == 0)
          continue;
        if (bc < 0 || capleft[i] > capleft[bc])
          bc = (int)i;
        if (capleft[i] >= gt->units &&
            (bm < 0 || rank_mib(ctx, avail, i) > rank_mib(ctx, avail, bm)))
          bm = (int)i;
      }
      g_autofree gboolean *cand = g_new0(gboolean, MAX(nn, 1));
      for (guint i = 0; i < nn; i++)
        cand[i] = ctx->node_ok[i];
      g_autofree char *scope = scope_phrase(ctx, a, cand);
      if (bc < 0) {
        g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT,
                    "%s has %u vCPUs but no host node has %s%s", who, gt->nv,
                    cap_unit_name(cap), scope);
      } else if (bm < 0) {
        g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT,
                    "%s needs %u %s%s but the best host node %d has only %u "
                    "left%s",
                    who, gt->units, cap_unit_name(cap),
                    cap == CAP_CPUS ? " (one host node per guest node)" : "",
                    host->nodes[bc].id, capleft[bc], scope);
      } else {
        guint c = short_class(ctx, avail, (guint)bm, gt->mem);
        g_autofree char *need = mem_phrase(ctx, c, gt->mem[c]);
        g_autofree char *detail = node_mem_detail(ctx, c, (guint)bm);
        g_set_error(
            error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT,
            "%s needs %s but the best node %d has only %" G_GUINT64_FORMAT
            " MiB uncommitted %s",
            who, need, host->nodes[bm].id,
            units_to_mib(ctx, c, avail[AT(ctx, c, bm)]), detail);
      }
      goto out;
    }
    guint i = (guint)best;
    gt->host = best;
    capleft[i] -= gt->units;
    load[i] += o2o ? 0 : gt->nv;
    take_task_pieces(ctx, &acc, avail, gt->gi, i);
    GString *others = g_string_new("");
    for (guint u = 0; u < nt; u++)
      if (u != t && tasks[u].host == best)
        g_string_append_printf(others, "%s%d", others->len ? "," : "",
                               req->n_gnodes ? req->gnodes[u].id : 0);
    for (guint u = 0; u < nt; u++)
      if (u != t && tasks[u].fixed != NULL)
        for (guint x = 0; x < tasks[u].fixed->len; x++)
          if (g_array_index(tasks[u].fixed, guint, x) == i)
            g_string_append_printf(others, "%s%d", others->len ? "," : "",
                                   req->gnodes[u].id);
    add_warning(plan,
                "%s shares host node %d with guest node %s: no assignment "
                "with distinct host nodes fits",
                who, host->nodes[i].id, others->str);
    add_reason(plan,
               "%s -> host node %d: shared, the least loaded node with "
               "room left",
               who, host->nodes[i].id);
    g_string_free(others, TRUE);
  }

  /* --device-locality=required: every device node must be used. */
  if (ctx->opts->device_locality == QP_DEVLOC_REQUIRED && ctx->any_device_node)
    for (guint i = 0; i < nn; i++) {
      if (!ctx->device_node[i])
        continue;
      gboolean hit = FALSE;
      for (guint t = 0; t < nt; t++) {
        if (tasks[t].host == (int)i)
          hit = TRUE;
        if (tasks[t].fixed != NULL)
          for (guint x = 0; x < tasks[t].fixed->len; x++)
            hit = hit || g_array_index(tasks[t].fixed, guint, x) == i;
      }
      if (!hit) {
        g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT,
                    "--device-locality=required: no guest node fits on host "
                    "node %d, which holds a vfio device of the guest",
                    host->nodes[i].id);
        goto out;
      }
    }

  /* 4. vCPUs and memory. */
  for (guint t = 0; t < nt; t++) {
    GuestTask *gt = &tasks[t];
    g_autofree guint *one = NULL;
    const guint *nodes;
    guint k;
    if (gt->fixed != NULL) {
      nodes = (const guint *)(void *)gt->fixed->data;
      k = gt->fixed->len;
    } else {
      one = g_new(guint, 1);
      one[0] = (guint)gt->host;
      nodes = one;
      k = 1;
    }
    g_auto(hwloc_bitmap_t) cpus = hwloc_bitmap_alloc();
    for (guint x = 0; x < k; x++) {
      hwloc_bitmap_or(cpus, cpus, a->node_cpus[nodes[x]]);
      vm_nodes[nodes[x]] = TRUE;
    }
    if (gt->fixed != NULL) {
      g_autofree char *who = gnode_name(ctx, gt->gi);
      g_autofree char *list = qp_list_format(piece_at(ctx, t)->fixed);
      add_reason(plan, "%s -> host node%s %s: the caller's host-nodes", who,
                 k > 1 ? "s" : "", list);
      if (!o2o) {
        /* Shared load over the caller's nodes, remainder on the first. */
        for (guint x = 0; x < k; x++)
          acc.load[nodes[x]] += gt->nv / k + (x == 0 ? gt->nv % k : 0);
      }
    } else if (!o2o) {
      acc.load[nodes[0]] += gt->nv;
    }
    if (!o2o) {
      int v;
      hwloc_bitmap_foreach_begin(v, gt->vcpus)
      {
        plan->vcpu_cpus[v] = hwloc_bitmap_dup(cpus);
      }
      hwloc_bitmap_foreach_end();
    } else {
      for (guint x = 0; x < k; x++) {
        /* vCPUs of this guest node not yet placed go to the next node */
        g_auto(hwloc_bitmap_t) rest = hwloc_bitmap_alloc();
        int v;
        hwloc_bitmap_foreach_begin(v, gt->vcpus)
        {
          if (plan->vcpu_cpus[v] == NULL)
            hwloc_bitmap_set(rest, v);
        }
        hwloc_bitmap_foreach_end();
        if (hwloc_bitmap_iszero(rest))
          break;
        pick_cores(plan, ctx, a, cap, nodes[x], rest);
        g_auto(hwloc_bitmap_t) here = hwloc_bitmap_dup(rest);
        hwloc_bitmap_foreach_begin(v, rest)
        {
          if (plan->vcpu_cpus[v] == NULL)
            hwloc_bitmap_clr(here, v);
        }
        hwloc_bitmap_foreach_end();
        g_autofree char *who = gnode_name(ctx, gt->gi);
        if (!hwloc_bitmap_iszero(here))
          reason_cores(plan, ctx, nodes[x], here, cap, who);
      }
    }
  }
  /* Memory: each piece on its own nodes, or on its guest node's. */
  for (guint x = 0; x < ctx->pieces->len; x++) {
    const Piece *p = piece_at(ctx, x);
    const GuestTask *gt = &tasks[MAX(p->gi, 0)];
    if (p->fixed != NULL || gt->host < 0) {
      add_plan_mem(plan, ctx, &acc, x, p->fixed);
    } else {
      guint i = (guint)gt->host;
      g_auto(hwloc_bitmap_t) ids = ids_of(ctx, &i, 1);
      add_plan_mem(plan, ctx, &acc, x, ids);
    }
  }
  ok = TRUE;
  finish_plan(plan, ctx, a, &acc, vm_nodes);

out:
  for (guint t = 0; t < nt; t++)
    g_array_unref(pref[t]);
  g_free(pref);
  gtasks_free(tasks, nt);
  return ok;
}

/* ---- one-to-one without vNUMA ------------------------------------------- */

static gboolean
plan_o2o_flat(QpPlan *plan, const Ctx *ctx, Attempt *a, CapKind cap,
              GError **error)
{
  guint nn = ctx->nn;
  g_autofree guint64 *avail = avail_copy(ctx);
  g_auto(Acc) acc;
  acc_init(&acc, ctx);
  acc.unbound = TRUE;
  g_auto(hwloc_bitmap_t) all = hwloc_bitmap_alloc();
  hwloc_bitmap_set_range(all, 0, (int)ctx->n - 1);
  guint units = task_units(ctx, cap, all);
  if (!claim_all_fixed(ctx, &acc, avail, error))
    return FALSE;
  g_autofree guint64 *need = free_need(ctx, -1);
  guint64 need_mib = 0;
  for (guint c = 0; c < ctx->ncls; c++)
    need_mib += units_to_mib(ctx, c, need[c]);

  g_autofree char *prefix = NULL;
  g_autofree gboolean *cand = set_candidates(ctx, &prefix);
  SetSearch s = {ctx, a, cap, avail, need, units, cand};
  NodeSet *set = choose_near_caller_mem(&s, prefix, error);
  if (set == NULL)
    return FALSE;
  g_autofree guint *nodes = set->nodes;
  guint k = set->k;
  g_free(set);
  g_auto(hwloc_bitmap_t) ids = ids_of(ctx, nodes, k);
  g_autofree char *l = qp_list_format(ids);
  if (need_mib > 0)
    add_reason(plan,
               "one-to-one: cores on host node%s %s: the fewest nodes (%u) "
               "with %u %s and %" G_GUINT64_FORMAT " MiB for the guest; "
               "memory is not bound (the guest has no vNUMA), it is claimed "
               "where the vCPUs run",
               k > 1 ? "s" : "", l, k, units, cap_unit_name(cap), need_mib);
  else
    add_reason(plan,
               "one-to-one: cores on host node%s %s: the fewest nodes (%u) "
               "with %u %s",
               k > 1 ? "s" : "", l, k, units, cap_unit_name(cap));
  reason_caller_pieces(plan, ctx, "one-to-one");

  /* Memory claimed (not bound) over the set; the caller's bindings kept. */
  for (guint x = 0; x < ctx->pieces->len; x++) {
    const Piece *p = piece_at(ctx, x);
    if (p->fixed == NULL)
      take_piece(ctx, &acc, avail, x, nodes, k, FALSE);
    add_plan_mem(plan, ctx, &acc, x, p->fixed);
  }

  /* vCPUs (or sibling groups) split evenly over the nodes with cores,
   * remainder on the first, as the memory is; a node short of its share
   * leaves the rest to the others. Each node gets a consecutive range. */
  g_autofree gboolean *vm_nodes = g_new0(gboolean, MAX(nn, 1));
  g_autofree guint64 *capv = g_new0(guint64, MAX(nn, 1));
  g_autofree guint64 *count = g_new0(guint64, MAX(nn, 1));
  g_autofree guint *cpu_nodes = g_new0(guint, MAX(k, 1));
  guint kc = 0;
  for (guint j = 0; j < k; j++)
    if (node_cap(a, cap, nodes[j]) > 0) {
      capv[nodes[j]] = node_cap(a, cap, nodes[j]);
      cpu_nodes[kc++] = nodes[j];
    }
  split_units(units, cpu_nodes, kc, capv, count);
  guint next = 0;
  for (guint j = 0; j < kc && next < ctx->n; j++) {
    guint i = cpu_nodes[j];
    if (count[i] == 0)
      continue;
    vm_nodes[i] = TRUE;
    g_auto(hwloc_bitmap_t) vs = hwloc_bitmap_alloc();
    for (guint taken = 0; next < ctx->n && taken < count[i]; taken++) {
      guint end = next + 1;
      if (cap == CAP_GROUPS)
        end = MIN((next / ctx->threads + 1) * ctx->threads, ctx->n);
      hwloc_bitmap_set_range(vs, next, (int)end - 1);
      next = end;
    }
    pick_cores(plan, ctx, a, cap, i, vs);
    reason_cores(plan, ctx, i, vs, cap, "");
  }
  finish_plan(plan, ctx, a, &acc, vm_nodes);
  return TRUE;
}

/* ---- one-to-one: the SMT ladder ----------------------------------------- */

static gboolean
plan_o2o(QpPlan *plan, const Ctx *ctx, Attempt *a, GError **error)
{
  gboolean vnuma = ctx->req->n_gnodes > 0;
  CapKind ladder[3];
  guint n = 0;
  if (ctx->threads > 1)
    ladder[n++] = CAP_GROUPS;
  if (ctx->threads == 1 || ctx->opts->smt == QP_SMT_PREFER)
    ladder[n++] = CAP_CORES;
  if (ctx->opts->smt == QP_SMT_PREFER && ctx->threads == 1)
    ladder[n++] = CAP_PUS;

  g_autoptr(GError) first = NULL;
  for (guint r = 0; r < n; r++) {
    g_autoptr(GError) err = NULL;
    /* Each rung starts from a clean slate. */
    memset(a->core_used, 0, MAX(ctx->host->n_cores, 1) * sizeof(gboolean));
    hwloc_bitmap_zero(a->taken);
    hwloc_bitmap_zero(plan->dedicated);
    gboolean ok = vnuma ? plan_by_gnode(plan, ctx, a, TRUE, ladder[r], &err)
                        : plan_o2o_flat(plan, ctx, a, ladder[r], &err);
    if (ok) {
      if (ladder[r] == CAP_PUS) {
        g_auto(hwloc_bitmap_t) shared = hwloc_bitmap_alloc();
        for (guint v = 0; v < plan->n_vcpus; v++)
          for (guint w = 0; w < plan->n_vcpus; w++) {
            if (v == w || plan->vcpu_cpus[v] == NULL ||
                plan->vcpu_cpus[w] == NULL)
              continue;
            int pv = hwloc_bitmap_first(plan->vcpu_cpus[v]);
            int pw = hwloc_bitmap_first(plan->vcpu_cpus[w]);
            int cv = cpu_index(ctx, pv), cw = cpu_index(ctx, pw);
            if (cv >= 0 && cw >= 0 &&
                ctx->host->cpus[cv].core == ctx->host->cpus[cw].core) {
              hwloc_bitmap_set(shared, v);
              break;
            }
          }
        g_autofree char *sl = qp_list_format(shared);
        if (!hwloc_bitmap_iszero(shared))
          add_warning(plan,
                      "one-to-one: not enough free cores for %u vCPUs: vCPUs "
                      "%s share physical cores as SMT siblings (--smt=prefer; "
                      "--smt=strict refuses this)",
                      ctx->n, sl);
      }
      if (ladder[r] == CAP_CORES && ctx->threads > 1)
        add_warning(plan,
                    "one-to-one: the guest has threads=%u but too few free "
                    "cores have %u usable SMT siblings: each vCPU gets a core "
                    "of its own, so the guest's sibling threads are not "
                    "siblings on the host",
                    ctx->threads, ctx->threads);
      if (ladder[r] == CAP_GROUPS)
        add_reason(plan,
                   "one-to-one: the guest has threads=%u, so vCPUs "
                   "%u*k..%u*k+%u share one physical core as SMT siblings",
                   ctx->threads, ctx->threads, ctx->threads, ctx->threads - 1);
      return TRUE;
    }
    /* Throw away what the failed rung wrote. */
    for (guint v = 0; v < plan->n_vcpus; v++)
      g_clear_pointer(&plan->vcpu_cpus[v], hwloc_bitmap_free);
    plan_mem_drop(plan);
    g_ptr_array_set_size(plan->reasons, 0);
    g_ptr_array_set_size(plan->warnings, 0);
    /* The last rung's shortfall is the one that matters. */
    g_clear_error(&first);
    first = g_steal_pointer(&err);
  }
  if (ctx->opts->smt == QP_SMT_STRICT && ctx->threads == 1)
    g_propagate_prefixed_error(error, g_steal_pointer(&first), "%s",
                               "--smt=strict: ");
  else
    g_propagate_error(error, g_steal_pointer(&first));
  return FALSE;
}

/* ---- Entry -------------------------------------------------------------- */

static QpPlan *
plan_on(const Ctx *ctx, QpMode mode, hwloc_const_bitmap_t usable,
        const char *kind_note, GError **error)
{
  Attempt a;
  attempt_init(&a, ctx, usable);
  a.kind_note = kind_note;
  QpPlan *plan = plan_new(ctx->n);
  plan->mode = mode;
  gboolean ok = FALSE;
  switch (mode) {
  case QP_MODE_BALANCED:
    ok = plan_balanced(plan, ctx, &a, ctx->n, error);
    break;
  case QP_MODE_NUMA:
    ok = plan_by_gnode(plan, ctx, &a, FALSE, CAP_CPUS, error);
    break;
  case QP_MODE_ONE_TO_ONE:
    ok = plan_o2o(plan, ctx, &a, error);
    break;
  default:
    g_assert_not_reached();
  }
  attempt_clear(&a, ctx->nn);
  if (!ok) {
    g_clear_pointer(&plan, qp_plan_free);
    return NULL;
  }
  /* Every vCPU has a rule (a vCPU left out would be a planner bug: let it
   * float on the process CPUs rather than crash the launcher). */
  for (guint v = 0; v < plan->n_vcpus; v++)
    if (plan->vcpu_cpus[v] == NULL) {
      plan->vcpu_cpus[v] = hwloc_bitmap_dup(plan->process_cpus);
      add_warning(plan,
                  "vCPU %u got no CPU of its own: it floats on the "
                  "process CPUs",
                  v);
    }
  return plan;
}

static hwloc_bitmap_t
kind_cpus(const Ctx *ctx, guint kind)
{
  hwloc_bitmap_t b = hwloc_bitmap_alloc();
  for (guint c = 0; c < ctx->host->n_cpus; c++)
    if (ctx->host->cpus[c].kind == (int)kind)
      hwloc_bitmap_set(b, ctx->host->cpus[c].id);
  return b;
}

static void suggest_vnuma(QpPlan *plan, const QpHost *host,
                          const QpRequest *req, guint placed);

/* BEST_EFFORT: mode auto after balanced or numa refused the VM. */
static QpPlan *
plan_compute(const QpHost *host, const QpClaims *claims, const QpRequest *req,
             const QpPlacementOptions *opts, gboolean best_effort,
             GError **error)
{
  g_return_val_if_fail(host != NULL && req != NULL && opts != NULL, NULL);
  Ctx ctx = {0};
  g_autoptr(QpPlan) notes = plan_new(0);
  QpPlan *plan = NULL;
  QpMode mode = opts->mode;

  if (mode == QP_MODE_AUTO)
    mode = req->n_gnodes > 1 ? QP_MODE_NUMA : QP_MODE_BALANCED;

  if (!ctx_init(&ctx, host, claims, req, opts, notes, error))
    goto out;

  if (mode == QP_MODE_NONE) {
    plan = plan_new(ctx.n);
    plan->mode = QP_MODE_NONE;
    hwloc_bitmap_t all = hwloc_bitmap_alloc();
    if (host->allowed != NULL)
      hwloc_bitmap_copy(all, host->allowed);
    for (guint v = 0; v < ctx.n; v++)
      plan->vcpu_cpus[v] = hwloc_bitmap_dup(all);
    plan->process_cpus = hwloc_bitmap_dup(all);
    plan->emulator_cpus = hwloc_bitmap_dup(all);
    plan->iothread_cpus = hwloc_bitmap_dup(all);
    plan->startup_cpus = all;
    add_reason(plan, "mode none: no placement, QEMU runs where it may");
    goto out;
  }

  if (best_effort) {
    plan = plan_new(ctx.n);
    plan->mode = mode;
    if (!plan_best_effort(plan, &ctx, error))
      g_clear_pointer(&plan, qp_plan_free);
  } else if (host->n_kinds <= 1) {
    plan = plan_on(&ctx, mode, ctx.usable, "", error);
  } else {
    /* The most performant kind that fits; kinds are mixed only when
     * --affinity leaves no single kind that fits. */
    g_autoptr(GError) first = NULL;
    for (guint k = host->n_kinds; k-- > 0 && plan == NULL;) {
      g_auto(hwloc_bitmap_t) kc = kind_cpus(&ctx, k);
      hwloc_bitmap_and(kc, kc, ctx.usable);
      if (hwloc_bitmap_iszero(kc))
        continue;
      g_autofree char *note = g_strdup_printf(" of CPU kind %u", k);
      g_autoptr(GError) err = NULL;
      plan = plan_on(&ctx, mode, kc, note, &err);
      if (plan != NULL) {
        g_autofree char *l = qp_list_format(kc);
        add_reason(plan,
                   "CPU kind %u (%s): the most performant kind that "
                   "fits, usable CPUs %s",
                   k,
                   host->kind_names != NULL && host->kind_names[k] != NULL
                       ? host->kind_names[k]
                       : "unnamed",
                   l);
      } else if (first == NULL) {
        first = g_steal_pointer(&err);
      }
    }
    if (plan == NULL) {
      guint spanned = 0;
      for (guint k = 0; k < host->n_kinds; k++) {
        g_auto(hwloc_bitmap_t) kc = kind_cpus(&ctx, k);
        if (hwloc_bitmap_intersects(kc, ctx.usable))
          spanned++;
      }
      if (opts->affinity != NULL && spanned > 1) {
        g_autoptr(GError) err = NULL;
        plan = plan_on(&ctx, mode, ctx.usable, "", &err);
        if (plan != NULL) {
          g_autofree char *l = qp_list_format(opts->affinity);
          add_warning(plan,
                      "the VM's CPUs straddle CPU kinds: no single kind in "
                      "--affinity %s holds the guest",
                      l);
        }
      }
      if (plan == NULL && first != NULL) {
        if (spanned > 1 && opts->affinity == NULL)
          g_propagate_error(error, g_steal_pointer(&first));
        else
          g_propagate_error(error, g_steal_pointer(&first));
        if (spanned > 1 && opts->affinity == NULL && error != NULL &&
            *error != NULL) {
          char *m = g_strdup_printf("%s (CPUs of one kind only; an "
                                    "--affinity spanning kinds allows "
                                    "mixing them)",
                                    (*error)->message);
          g_free((*error)->message);
          (*error)->message = m;
        }
      } else if (plan == NULL) {
        g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT,
                    "guest needs %u CPUs but no CPU is usable", ctx.n);
      }
    }
  }

out:
  if (plan != NULL) {
    /* Notes made before the mode ran, and the ledger's own warnings. */
    for (guint w = 0; w < notes->warnings->len; w++)
      g_ptr_array_insert(plan->warnings, (gint)w,
                         g_strdup(g_ptr_array_index(notes->warnings, w)));
    if (claims != NULL && claims->warnings != NULL)
      for (guint w = 0; w < claims->warnings->len; w++)
        g_ptr_array_add(plan->warnings,
                        g_strdup(g_ptr_array_index(claims->warnings, w)));
  }
  ctx_clear(&ctx);
  return plan;
}

/* ---- Hot-pluggable vCPUs in one-to-one ---------------------------------- */

/* CPUs the VM may use at all: allowed, in --affinity, on --hostnodes. */
static hwloc_bitmap_t
usable_cpus(const QpHost *host, const QpPlacementOptions *opts)
{
  hwloc_bitmap_t set = hwloc_bitmap_dup(host->allowed);
  if (opts->affinity != NULL)
    hwloc_bitmap_and(set, set, opts->affinity);
  if (opts->hostnodes != NULL) {
    g_auto(hwloc_bitmap_t) on = hwloc_bitmap_alloc();
    for (guint i = 0; i < host->n_nodes; i++)
      if (hwloc_bitmap_isset(opts->hostnodes, (unsigned)host->nodes[i].id))
        hwloc_bitmap_or(on, on, host->nodes[i].all_cpus);
    hwloc_bitmap_and(set, set, on);
  }
  return set;
}

/* The cores a vCPU plugged later may take, best first: free cores of the
 * VM's own nodes, then of other nodes, of the kind the boot vCPUs run on. */
static GPtrArray *
spare_cores(const QpHost *host, const QpClaims *claims,
            const QpPlacementOptions *opts, const QpPlan *plan)
{
  GPtrArray *spare =
      g_ptr_array_new_with_free_func((GDestroyNotify)hwloc_bitmap_free);
  g_auto(hwloc_bitmap_t) usable = usable_cpus(host, opts);
  g_auto(hwloc_bitmap_t) taken = hwloc_bitmap_dup(plan->dedicated);
  for (guint i = 0; claims != NULL && i < claims->claims->len; i++) {
    const QpClaim *c = g_ptr_array_index(claims->claims, i);
    hwloc_bitmap_or(taken, taken, c->dedicated);
  }
  int first = hwloc_bitmap_first(plan->dedicated);
  int ci = first >= 0 ? qp_host_cpu_index(host, first) : -1;
  int kind = ci >= 0 ? host->cpus[ci].kind : -1;
  for (int pass = 0; pass < 2; pass++)
    for (guint c = 0; c < host->n_cores; c++) {
      const QpCore *core = &host->cores[c];
      gboolean own_node =
          core->node >= 0 &&
          hwloc_bitmap_isset(plan->host_nodes, (unsigned)core->node);
      if (own_node != (pass == 0) || hwloc_bitmap_intersects(core->pus, taken))
        continue;
      hwloc_bitmap_t pus = hwloc_bitmap_dup(core->pus);
      hwloc_bitmap_and(pus, pus, usable);
      int p0 = hwloc_bitmap_first(pus);
      int pi = p0 >= 0 ? qp_host_cpu_index(host, p0) : -1;
      if (p0 < 0 || (kind >= 0 && pi >= 0 && host->cpus[pi].kind != kind)) {
        hwloc_bitmap_free(pus);
        continue;
      }
      g_ptr_array_add(spare, pus);
    }
  return spare;
}

/* REQ with only its boot vCPUs (maxcpus = vcpus, guest nodes trimmed). */
static void
boot_request(const QpRequest *req, QpRequest *boot_req)
{
  guint boot = MAX(req->vcpus, 1);
  *boot_req = *req;
  boot_req->maxcpus = boot;
  boot_req->gnodes = g_new0(QpGuestNode, MAX(req->n_gnodes, 1));
  g_auto(hwloc_bitmap_t) boot_set = hwloc_bitmap_alloc();
  hwloc_bitmap_set_range(boot_set, 0, (int)boot - 1);
  for (guint g = 0; g < req->n_gnodes; g++) {
    boot_req->gnodes[g] = req->gnodes[g];
    boot_req->gnodes[g].vcpus = hwloc_bitmap_dup(req->gnodes[g].vcpus);
    hwloc_bitmap_and(boot_req->gnodes[g].vcpus, boot_req->gnodes[g].vcpus,
                     boot_set);
  }
}

static void
boot_request_clear(QpRequest *boot_req)
{
  for (guint g = 0; g < boot_req->n_gnodes; g++)
    hwloc_bitmap_free(boot_req->gnodes[g].vcpus);
  g_free(boot_req->gnodes);
}

/* Extends a plan made for the boot vCPUs to every possible vCPU: a vCPU
 * plugged later runs where the boot vCPUs of its guest node run (all of
 * the VM's CPUs when there is none, or when SHARE_OWN). */
static void
extend_to_maxcpus(QpPlan *plan, const QpRequest *req, guint max,
                  gboolean share_own)
{
  guint had = plan->n_vcpus;
  g_auto(hwloc_bitmap_t) own = hwloc_bitmap_alloc();
  for (guint v = 0; v < had; v++)
    hwloc_bitmap_or(own, own, plan->vcpu_cpus[v]);
  plan->vcpu_cpus = g_renew(hwloc_bitmap_t, plan->vcpu_cpus, max);
  for (guint v = had; v < max; v++) {
    hwloc_const_bitmap_t like = own;
    for (guint g = 0; !share_own && g < req->n_gnodes; g++) {
      if (!hwloc_bitmap_isset(req->gnodes[g].vcpus, v))
        continue;
      int first = hwloc_bitmap_first(req->gnodes[g].vcpus);
      if (first >= 0 && (guint)first < had)
        like = plan->vcpu_cpus[first];
    }
    plan->vcpu_cpus[v] = hwloc_bitmap_dup(like);
  }
  plan->n_vcpus = max;
  plan->n_boot_vcpus = had;
}

/* A plan for every possible vCPU. *PLACED is how many vCPUs, from index
 * 0, have a place of their own; those above share their CPUs. */
static QpPlan *
plan_with_hotplug(const QpHost *host, const QpClaims *claims,
                  const QpRequest *req, const QpPlacementOptions *opts,
                  gboolean best_effort, guint *placed, GError **error)
{
  guint boot = MAX(req->vcpus, 1);
  guint max = MAX(req->maxcpus, boot);
  *placed = max;
  if (max == boot) {
    QpPlan *plan = plan_compute(host, claims, req, opts, best_effort, error);
    if (plan != NULL)
      plan->n_boot_vcpus = plan->n_vcpus;
    return plan;
  }

  QpRequest boot_req;
  if (best_effort) {
    /* The boot vCPUs share what there is; those plugged later share the
     * CPUs of their guest node's boot vCPUs. */
    boot_request(req, &boot_req);
    QpPlan *plan = plan_compute(host, claims, &boot_req, opts, TRUE, error);
    boot_request_clear(&boot_req);
    if (plan != NULL)
      extend_to_maxcpus(plan, req, max, FALSE);
    *placed = boot;
    return plan;
  }
  if (opts->mode != QP_MODE_ONE_TO_ONE) {
    /* Room for every possible vCPU if the host has it; else for the boot
     * vCPUs, those plugged later sharing their CPUs (Proxmox and libvirt
     * give every VM a maxcpus above what it boots with). */
    g_autoptr(GError) full_error = NULL;
    QpPlan *plan = plan_compute(host, claims, req, opts, FALSE, &full_error);
    if (plan != NULL) {
      plan->n_boot_vcpus = boot;
      return plan;
    }
    if (!g_error_matches(full_error, QP_TOPOLOGY_ERROR,
                         QP_TOPOLOGY_ERROR_NOFIT)) {
      g_propagate_error(error, g_steal_pointer(&full_error));
      return NULL;
    }
    boot_request(req, &boot_req);
    plan = plan_compute(host, claims, &boot_req, opts, FALSE, NULL);
    boot_request_clear(&boot_req);
    if (plan == NULL) {
      g_propagate_error(error, g_steal_pointer(&full_error));
      return NULL;
    }
    extend_to_maxcpus(plan, req, max, FALSE);
    *placed = boot;
    add_warning(plan,
                "room for the %u boot vCPUs only (%s): vCPUs %u-%u, if "
                "plugged, share the CPUs of their guest node's boot vCPUs",
                boot, full_error->message, boot, max - 1);
    return plan;
  }

  /* One-to-one with hot-pluggable vCPUs: a core is dedicated to each boot
   * vCPU; one plugged later takes a free core when it comes (the keeper
   * claims it), so that a VM does not hold cores it may never use. */
  boot_request(req, &boot_req);
  QpPlan *plan = plan_compute(host, claims, &boot_req, opts, FALSE, error);
  boot_request_clear(&boot_req);
  if (plan == NULL)
    return NULL;
  guint had = plan->n_vcpus;
  extend_to_maxcpus(plan, req, max, TRUE);
  *placed = had;
  plan->hotplug_cores = spare_cores(host, claims, opts, plan);
  g_autofree char *own_list = qp_list_format(plan->vcpu_cpus[max - 1]);
  add_reason(plan,
             "vCPUs %u-%u are hot-pluggable: each takes a free core when "
             "plugged (%u free now), else shares the VM's CPUs %s",
             had, max - 1, plan->hotplug_cores->len, own_list);
  return plan;
}

QpPlan *
qp_plan_compute(const QpHost *host, const QpClaims *claims,
                const QpRequest *req, const QpPlacementOptions *opts,
                GError **error)
{
  g_return_val_if_fail(host != NULL && req != NULL && opts != NULL, NULL);
  GError *local = NULL;
  guint placed = 0;
  QpPlan *plan =
      plan_with_hotplug(host, claims, req, opts, FALSE, &placed, &local);
  /* Mode auto never refuses a VM for CPUs: what balanced or numa refused
   * is placed best-effort, which fails only for memory (or options that
   * leave no CPU at all). */
  if (plan == NULL && opts->mode == QP_MODE_AUTO &&
      g_error_matches(local, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT)) {
    g_clear_error(&local);
    plan = plan_with_hotplug(host, claims, req, opts, TRUE, &placed, &local);
  }
  if (plan != NULL && opts->vnuma && req->n_gnodes == 0)
    suggest_vnuma(plan, host, req, placed);
  if (local != NULL &&
      g_error_matches(local, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT))
    g_prefix_error(&local, "VM does not fit: ");
  if (local != NULL)
    g_propagate_error(error, local);
  return plan;
}

/* ---- Suggested guest topology (--vnuma) --------------------------------- */

/* Host node index of the CPUs of vCPU V, -1 if none. */
static int
vcpu_node_index(const QpPlan *plan, const QpHost *host, guint v)
{
  int ci = qp_host_cpu_index(host, hwloc_bitmap_first(plan->vcpu_cpus[v]));
  return ci >= 0 ? qp_host_node_index(host, host->cpus[ci].node) : -1;
}

static guint
gcd(guint a, guint b)
{
  while (b != 0) {
    guint t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/* The guest topology mirroring the placement of the first PLACED vCPUs;
 * every possible vCPU (up to maxcpus) is in it, so that QEMU's -smp
 * product and the -numa nodes cover them all. QEMU numbers vCPUs
 * socket-major and boots the lowest indexes, so each guest node is a run of
 * whole sockets: the placed vCPUs fill sockets in index order, and the
 * sockets above them (vCPUs plugged later) go to the guest nodes in turn. A
 * socket holds the largest number of vCPUs that divides every node's share
 * and the hot-pluggable count. */
static void
suggest_vnuma(QpPlan *plan, const QpHost *host, const QpRequest *req,
              guint placed)
{
  guint nn = host->n_nodes;
  guint n = plan->n_vcpus;
  placed = MIN(MAX(placed, 1), n);
  if (plan->mode == QP_MODE_BALANCED) {
    add_reason(plan, "--vnuma: no guest topology suggested in balanced mode: "
                     "its vCPUs float over the chosen nodes");
    return;
  }
  /* Host node of each placed vCPU (its first CPU's node). */
  g_autofree int *vnode_of = g_new0(int, MAX(n, 1));
  g_autofree guint *count = g_new0(guint, MAX(nn, 1));
  for (guint v = 0; v < placed; v++) {
    int i = vcpu_node_index(plan, host, v);
    vnode_of[v] = i;
    if (i >= 0)
      count[i]++;
  }
  /* Symmetric: every used node holds the same number of placed vCPUs, in
   * consecutive ranges, and memory is claimed only on those nodes. */
  g_autoptr(GArray) used = g_array_new(FALSE, FALSE, sizeof(guint));
  gboolean symmetric = vnode_of[0] >= 0;
  for (guint v = 0; v < placed && symmetric; v++) {
    if (vnode_of[v] < 0) {
      symmetric = FALSE;
      break;
    }
    guint i = (guint)vnode_of[v];
    if (v == 0 || vnode_of[v - 1] != vnode_of[v]) {
      for (guint x = 0; x < used->len; x++)
        if (g_array_index(used, guint, x) == i)
          symmetric = FALSE; /* a node's vCPUs are not one range */
      g_array_append_val(used, i);
    }
  }
  guint per = used->len > 0 ? placed / used->len : 0;
  for (guint x = 0; x < used->len && symmetric; x++)
    if (count[g_array_index(used, guint, x)] != per)
      symmetric = FALSE;
  g_auto(hwloc_bitmap_t) vm_ids = hwloc_bitmap_alloc();
  for (guint x = 0; x < used->len; x++)
    hwloc_bitmap_set(vm_ids, host->nodes[g_array_index(used, guint, x)].id);
  guint64 mem_total = 0;
  for (guint c = 0; c < plan->claim_mem->len; c++) {
    const QpNodeAmount *m = &g_array_index(plan->claim_mem, QpNodeAmount, c);
    if (!hwloc_bitmap_isset(vm_ids, m->node))
      symmetric = FALSE;
  }
  for (guint c = 0; c < plan->claim_huge->len; c++) {
    const QpHugeClaim *h = &g_array_index(plan->claim_huge, QpHugeClaim, c);
    if (!hwloc_bitmap_isset(vm_ids, h->node))
      symmetric = FALSE;
  }

  plan->vnuma = TRUE;
  if (!symmetric) {
    plan->vnuma_sockets = 1;
    plan->vnuma_cores = n;
    plan->vnuma_threads = 1;
    add_reason(plan,
               "--vnuma: the chosen CPUs form an asymmetric layout, so "
               "the suggested guest topology is flat (sockets=1, "
               "cores=%u) without -numa nodes",
               n);
    return;
  }
  if (used->len < 2) {
    guint threads = MAX(req->threads, 1);
    if (n % threads != 0)
      threads = 1;
    plan->vnuma_sockets = 1;
    plan->vnuma_cores = n / threads;
    plan->vnuma_threads = threads;
    add_reason(plan,
               "--vnuma: one host node: sockets=1, cores=%u, "
               "threads=%u and no -numa node",
               plan->vnuma_cores, threads);
    return;
  }
  guint socket = gcd(per, n - placed);
  guint threads = MAX(req->threads, 1);
  if (socket % threads != 0)
    threads = 1;
  plan->vnuma_sockets = n / socket;
  plan->vnuma_cores = socket / threads;
  plan->vnuma_threads = threads;
  /* Guest node of every vCPU: the placed ones where they run, each socket
   * above them to the guest nodes in turn. */
  for (guint v = placed; v < n; v++)
    vnode_of[v] =
        (int)g_array_index(used, guint, ((v - placed) / socket) % used->len);
  plan->n_vnodes = used->len;
  plan->vnodes = g_new0(QpPlanVnode, used->len);
  plan->vnode_distance = g_new0(guint, used->len * used->len);
  for (guint x = 0; x < used->len; x++) {
    guint i = g_array_index(used, guint, x);
    QpPlanVnode *vn = &plan->vnodes[x];
    vn->id = (int)x;
    vn->host_node = host->nodes[i].id;
    vn->vcpus = hwloc_bitmap_alloc();
    for (guint v = 0; v < n; v++)
      if (vnode_of[v] == (int)i)
        hwloc_bitmap_set(vn->vcpus, v);
    /* The RAM's claims there: memory devices keep their own backends. */
    for (guint m = 0; m < plan->n_mem; m++) {
      const QpPlanMem *pm = &plan->mem[m];
      for (guint c = 0; pm->kind == QP_MEM_RAM && c < pm->claim->len; c++) {
        const QpNodeUnits *u = &g_array_index(pm->claim, QpNodeUnits, c);
        if (u->node == vn->host_node)
          vn->mem_mib +=
              pm->page_kib == 0 ? u->units : u->units * pm->page_kib / 1024;
      }
    }
    mem_total += vn->mem_mib;
    for (guint y = 0; y < used->len; y++)
      plan->vnode_distance[x * used->len + y] =
          host->distance != NULL
              ? host->distance[i * nn + g_array_index(used, guint, y)]
              : (i == g_array_index(used, guint, y) ? 10 : 20);
  }
  /* The guest's memory in full (rounding of hugepage claims). */
  if (mem_total != req->mem_mib && plan->n_vnodes > 0) {
    guint64 rest = req->mem_mib;
    for (guint x = 1; x < plan->n_vnodes; x++)
      rest -= MIN(rest, plan->vnodes[x].mem_mib);
    plan->vnodes[0].mem_mib = rest;
  }
  g_autofree char *l = qp_list_format(vm_ids);
  if (placed < n)
    add_reason(plan,
               "--vnuma: guest topology mirrors host nodes %s: "
               "sockets=%u, cores=%u, threads=%u; vCPUs %u-%u, if plugged, "
               "fill the sockets above the boot vCPUs, which go to the guest "
               "nodes in turn",
               l, plan->vnuma_sockets, plan->vnuma_cores, threads, placed,
               n - 1);
  else
    add_reason(plan,
               "--vnuma: guest topology mirrors host nodes %s: "
               "sockets=%u, cores=%u, threads=%u, one -numa node per "
               "host node",
               l, plan->vnuma_sockets, plan->vnuma_cores, threads);
}

/* ---- Output ------------------------------------------------------------- */

static void
json_list(JsonBuilder *b, const char *name, hwloc_const_bitmap_t set)
{
  json_builder_set_member_name(b, name);
  if (set == NULL) {
    json_builder_add_null_value(b);
    return;
  }
  g_autofree char *l = qp_list_format(set);
  json_builder_add_string_value(b, l);
}

static void
json_strings(JsonBuilder *b, const char *name, GPtrArray *lines)
{
  json_builder_set_member_name(b, name);
  json_builder_begin_array(b);
  for (guint i = 0; lines != NULL && i < lines->len; i++)
    json_builder_add_string_value(b, g_ptr_array_index(lines, i));
  json_builder_end_array(b);
}

JsonNode *
qp_plan_to_json(const QpPlan *plan)
{
  g_autoptr(JsonBuilder) b = json_builder_new();
  json_builder_begin_object(b);
  json_builder_set_member_name(b, "mode");
  json_builder_add_string_value(b, qp_mode_name(plan->mode));
  json_builder_set_member_name(b, "best-effort");
  json_builder_add_boolean_value(b, plan->best_effort);
  json_strings(b, "not-given", plan->not_given);

  json_builder_set_member_name(b, "vcpus");
  json_builder_begin_array(b);
  for (guint v = 0; v < plan->n_vcpus; v++) {
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "index");
    json_builder_add_int_value(b, v);
    json_list(b, "cpus", plan->vcpu_cpus[v]);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);

  json_list(b, "process-cpus", plan->process_cpus);
  json_list(b, "emulator-cpus", plan->emulator_cpus);
  json_list(b, "iothread-cpus", plan->iothread_cpus);
  json_list(b, "startup-cpus", plan->startup_cpus);
  json_list(b, "host-nodes", plan->host_nodes);
  json_list(b, "memory-nodes", plan->mem_nodes);
  json_builder_set_member_name(b, "memory-policy");
  if (plan->mem_nodes != NULL)
    json_builder_add_string_value(b, qp_policy_name(plan->mem_policy));
  else
    json_builder_add_null_value(b);

  json_builder_set_member_name(b, "memory");
  json_builder_begin_array(b);
  for (guint m = 0; m < plan->n_mem; m++) {
    const QpPlanMem *pm = &plan->mem[m];
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "guest-node");
    if (pm->gnode >= 0)
      json_builder_add_int_value(b, pm->gnode);
    else
      json_builder_add_null_value(b);
    json_list(b, "host-nodes", pm->host_nodes);
    json_builder_set_member_name(b, "policy");
    json_builder_add_string_value(b, qp_policy_name(pm->policy));
    json_builder_set_member_name(b, "size-mib");
    json_builder_add_int_value(b, (gint64)pm->mem_mib);
    json_builder_set_member_name(b, "memdev");
    if (pm->memdev != NULL)
      json_builder_add_string_value(b, pm->memdev);
    else
      json_builder_add_null_value(b);
    json_builder_set_member_name(b, "caller-set");
    json_builder_add_boolean_value(b, pm->caller_set);
    json_builder_set_member_name(b, "kind");
    json_builder_add_string_value(b, qp_mem_kind_name(pm->kind));
    json_builder_set_member_name(b, "device");
    if (pm->device != NULL)
      json_builder_add_string_value(b, pm->device);
    else
      json_builder_add_null_value(b);
    json_builder_set_member_name(b, "page-kib");
    json_builder_add_int_value(b, (gint64)pm->page_kib);
    json_builder_set_member_name(b, "claimed");
    json_builder_begin_object(b);
    for (guint c = 0; pm->claim != NULL && c < pm->claim->len; c++) {
      const QpNodeUnits *u = &g_array_index(pm->claim, QpNodeUnits, c);
      g_autofree char *k = g_strdup_printf("%d", u->node);
      json_builder_set_member_name(b, k);
      json_builder_add_int_value(b, (gint64)u->units);
    }
    json_builder_end_object(b);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);

  json_builder_set_member_name(b, "claims");
  json_builder_begin_object(b);
  json_builder_set_member_name(b, "memory-mib");
  json_builder_begin_object(b);
  for (guint i = 0; plan->claim_mem != NULL && i < plan->claim_mem->len; i++) {
    const QpNodeAmount *a = &g_array_index(plan->claim_mem, QpNodeAmount, i);
    g_autofree char *k = g_strdup_printf("%d", a->node);
    json_builder_set_member_name(b, k);
    json_builder_add_int_value(b, (gint64)a->mib);
  }
  json_builder_end_object(b);
  json_builder_set_member_name(b, "hugepages");
  json_builder_begin_array(b);
  for (guint i = 0; plan->claim_huge != NULL && i < plan->claim_huge->len;
       i++) {
    const QpHugeClaim *h = &g_array_index(plan->claim_huge, QpHugeClaim, i);
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "node");
    json_builder_add_int_value(b, h->node);
    json_builder_set_member_name(b, "page-kib");
    json_builder_add_int_value(b, (gint64)h->page_kib);
    json_builder_set_member_name(b, "pages");
    json_builder_add_int_value(b, (gint64)h->pages);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
  json_list(b, "dedicated-cpus", plan->dedicated);
  json_builder_set_member_name(b, "load");
  json_builder_begin_object(b);
  for (guint i = 0; plan->load != NULL && i < plan->load->len; i++) {
    const QpNodeLoad *l = &g_array_index(plan->load, QpNodeLoad, i);
    g_autofree char *k = g_strdup_printf("%d", l->node);
    json_builder_set_member_name(b, k);
    json_builder_add_int_value(b, l->vcpus);
  }
  json_builder_end_object(b);
  json_builder_set_member_name(b, "cpu-load");
  json_builder_begin_array(b);
  for (guint i = 0; plan->cpu_load != NULL && i < plan->cpu_load->len; i++) {
    const QpCpuLoad *l = &g_array_index(plan->cpu_load, QpCpuLoad, i);
    json_builder_begin_object(b);
    json_list(b, "cpus", l->cpus);
    json_builder_set_member_name(b, "vcpus");
    json_builder_add_int_value(b, l->vcpus);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
  json_builder_end_object(b);

  if (plan->vnuma) {
    json_builder_set_member_name(b, "vnuma");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "sockets");
    json_builder_add_int_value(b, plan->vnuma_sockets);
    json_builder_set_member_name(b, "cores");
    json_builder_add_int_value(b, plan->vnuma_cores);
    json_builder_set_member_name(b, "threads");
    json_builder_add_int_value(b, plan->vnuma_threads);
    json_builder_set_member_name(b, "nodes");
    json_builder_begin_array(b);
    for (guint n = 0; n < plan->n_vnodes; n++) {
      const QpPlanVnode *vn = &plan->vnodes[n];
      json_builder_begin_object(b);
      json_builder_set_member_name(b, "id");
      json_builder_add_int_value(b, vn->id);
      json_list(b, "vcpus", vn->vcpus);
      json_builder_set_member_name(b, "size-mib");
      json_builder_add_int_value(b, (gint64)vn->mem_mib);
      json_builder_set_member_name(b, "host-node");
      json_builder_add_int_value(b, vn->host_node);
      json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_set_member_name(b, "distances");
    json_builder_begin_array(b);
    for (guint x = 0; x < plan->n_vnodes; x++) {
      json_builder_begin_array(b);
      for (guint y = 0; y < plan->n_vnodes; y++)
        json_builder_add_int_value(
            b, plan->vnode_distance[x * plan->n_vnodes + y]);
      json_builder_end_array(b);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
  }

  if (plan->hotplug_cores != NULL) {
    json_builder_set_member_name(b, "boot-vcpus");
    json_builder_add_int_value(b, plan->n_boot_vcpus);
    json_builder_set_member_name(b, "hotplug-cores");
    json_builder_begin_array(b);
    for (guint c = 0; c < plan->hotplug_cores->len; c++) {
      g_autofree char *l =
          qp_list_format(g_ptr_array_index(plan->hotplug_cores, c));
      json_builder_add_string_value(b, l);
    }
    json_builder_end_array(b);
  }
  json_strings(b, "reasons", plan->reasons);
  json_strings(b, "warnings", plan->warnings);
  json_builder_end_object(b);
  return json_builder_get_root(b);
}

static char *
fmt_list(hwloc_const_bitmap_t set)
{
  if (set == NULL)
    return g_strdup("-");
  char *l = qp_list_format(set);
  if (*l == '\0') {
    g_free(l);
    return g_strdup("-");
  }
  return l;
}

char *
qp_plan_to_human(const QpPlan *plan, const QpHost *host)
{
  GString *s = g_string_new("");
  g_autofree char *proc = fmt_list(plan->process_cpus);
  g_autofree char *emu = fmt_list(plan->emulator_cpus);
  g_autofree char *io = fmt_list(plan->iothread_cpus);
  g_autofree char *start = fmt_list(plan->startup_cpus);
  g_autofree char *nodes = fmt_list(plan->host_nodes);
  g_autofree char *memn = fmt_list(plan->mem_nodes);
  g_autofree char *ded = fmt_list(plan->dedicated);

  g_string_append_printf(s, "mode            %s%s\n", qp_mode_name(plan->mode),
                         plan->best_effort ? " (best effort)" : "");
  g_string_append_printf(s, "host nodes      %s\n", nodes);
  g_string_append_printf(s, "process CPUs    %s\n", proc);
  g_string_append_printf(s, "emulator CPUs   %s\n", emu);
  g_string_append_printf(s, "iothread CPUs   %s\n", io);
  g_string_append_printf(s, "startup CPUs    %s\n", start);
  g_string_append_printf(s, "dedicated CPUs  %s\n", ded);
  for (guint i = 0; plan->cpu_load != NULL && i < plan->cpu_load->len; i++) {
    const QpCpuLoad *l = &g_array_index(plan->cpu_load, QpCpuLoad, i);
    g_autofree char *cl = fmt_list(l->cpus);
    g_string_append_printf(s, "shared vCPUs    %u on CPUs %s\n", l->vcpus, cl);
  }
  if (plan->mem_nodes != NULL)
    g_string_append_printf(s, "memory policy   %s on nodes %s\n",
                           qp_policy_name(plan->mem_policy), memn);
  else
    g_string_append(s, "memory policy   not bound\n");

  /* vCPUs with the same CPUs in runs: "0-7  0-1,4-5" */
  g_string_append(s, "\nvCPUs       host CPUs\n");
  for (guint v = 0; v < plan->n_vcpus;) {
    guint w = v + 1;
    while (w < plan->n_vcpus &&
           hwloc_bitmap_isequal(plan->vcpu_cpus[w], plan->vcpu_cpus[v]))
      w++;
    g_autofree char *vs = w - v > 1 ? g_strdup_printf("%u-%u", v, w - 1)
                                    : g_strdup_printf("%u", v);
    g_autofree char *cs = fmt_list(plan->vcpu_cpus[v]);
    g_string_append_printf(s, "%-11s %s\n", vs, cs);
    v = w;
  }

  if (plan->n_mem > 0) {
    g_string_append(s, "\nguest node  host nodes  policy      MiB       "
                       "memdev          bound by  memory\n");
    for (guint m = 0; m < plan->n_mem; m++) {
      const QpPlanMem *pm = &plan->mem[m];
      g_autofree char *g =
          pm->gnode >= 0 ? g_strdup_printf("%d", pm->gnode) : g_strdup("-");
      g_autofree char *hn = fmt_list(pm->host_nodes);
      g_autofree char *what = g_strdup_printf(
          "%s%s%s%s", qp_mem_kind_name(pm->kind), pm->device != NULL ? " " : "",
          pm->device != NULL ? pm->device : "",
          pm->page_kib != 0 ? ", hugepages" : "");
      g_string_append_printf(
          s, "%-11s %-11s %-11s %-9" G_GUINT64_FORMAT " %-15s %-9s %s\n", g, hn,
          qp_policy_name(pm->policy), pm->mem_mib,
          pm->memdev != NULL ? pm->memdev : "-",
          pm->host_nodes == NULL ? "not bound"
          : pm->caller_set       ? "caller"
                                 : "qemu-pin",
          what);
    }
  }

  g_string_append(s, "\nclaims: node  memory MiB  hugepages           "
                     "shared vCPUs\n");
  guint n_nodes = host != NULL ? host->n_nodes : 0;
  g_autoptr(GArray) ids = g_array_new(FALSE, FALSE, sizeof(int));
  for (guint i = 0; i < n_nodes; i++)
    g_array_append_val(ids, host->nodes[i].id);
  if (host == NULL) {
    for (guint i = 0; i < plan->claim_mem->len; i++)
      g_array_append_val(ids,
                         g_array_index(plan->claim_mem, QpNodeAmount, i).node);
    for (guint i = 0; i < plan->claim_huge->len; i++)
      g_array_append_val(ids,
                         g_array_index(plan->claim_huge, QpHugeClaim, i).node);
    for (guint i = 0; i < plan->load->len; i++)
      g_array_append_val(ids, g_array_index(plan->load, QpNodeLoad, i).node);
  }
  g_auto(hwloc_bitmap_t) shown = hwloc_bitmap_alloc();
  for (guint x = 0; x < ids->len; x++) {
    int id = g_array_index(ids, int, x);
    if (id < 0 || hwloc_bitmap_isset(shown, id))
      continue;
    hwloc_bitmap_set(shown, id);
    guint64 mib = 0;
    guint vcpus = 0;
    GString *huge = g_string_new("");
    for (guint i = 0; i < plan->claim_mem->len; i++)
      if (g_array_index(plan->claim_mem, QpNodeAmount, i).node == id)
        mib += g_array_index(plan->claim_mem, QpNodeAmount, i).mib;
    for (guint i = 0; i < plan->claim_huge->len; i++) {
      const QpHugeClaim *h = &g_array_index(plan->claim_huge, QpHugeClaim, i);
      if (h->node == id)
        g_string_append_printf(
            huge, "%s%" G_GUINT64_FORMAT " x %" G_GUINT64_FORMAT " KiB",
            huge->len ? ", " : "", h->pages, h->page_kib);
    }
    for (guint i = 0; i < plan->load->len; i++)
      if (g_array_index(plan->load, QpNodeLoad, i).node == id)
        vcpus += g_array_index(plan->load, QpNodeLoad, i).vcpus;
    if (mib == 0 && huge->len == 0 && vcpus == 0) {
      g_string_free(huge, TRUE);
      continue;
    }
    g_string_append_printf(s,
                           "        %-5d %-11" G_GUINT64_FORMAT " %-19s %u\n",
                           id, mib, huge->len ? huge->str : "-", vcpus);
    g_string_free(huge, TRUE);
  }

  if (plan->vnuma) {
    g_string_append_printf(s,
                           "\nsuggested guest topology: sockets=%u "
                           "cores=%u threads=%u\n",
                           plan->vnuma_sockets, plan->vnuma_cores,
                           plan->vnuma_threads);
    for (guint n = 0; n < plan->n_vnodes; n++) {
      g_autofree char *vl = fmt_list(plan->vnodes[n].vcpus);
      g_string_append_printf(
          s,
          "  -numa node,nodeid=%d,cpus=%s (%" G_GUINT64_FORMAT
          " MiB, host node %d)\n",
          plan->vnodes[n].id, vl, plan->vnodes[n].mem_mib,
          plan->vnodes[n].host_node);
    }
  }

  if (plan->reasons != NULL && plan->reasons->len > 0) {
    g_string_append(s, "\nreasons:\n");
    for (guint i = 0; i < plan->reasons->len; i++)
      g_string_append_printf(s, "  - %s\n",
                             (char *)g_ptr_array_index(plan->reasons, i));
  }
  if (plan->warnings != NULL && plan->warnings->len > 0) {
    g_string_append(s, "\nwarnings:\n");
    for (guint i = 0; i < plan->warnings->len; i++)
      g_string_append_printf(s, "  ! %s\n",
                             (char *)g_ptr_array_index(plan->warnings, i));
  }
  return g_string_free(s, FALSE);
}
