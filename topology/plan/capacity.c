/* What each host node holds that no claim has (see capacity.h). */
#include "topology/plan/capacity.h"

#include <string.h>

/* ---- Sums over the claims ----------------------------------------------- */

guint64
qp_node_reserve_mib(const QpPlacementOptions *opts, int node)
{
  if (opts == NULL)
    return 0;
  if (opts->node_reserve != NULL)
    for (guint i = 0; i < opts->node_reserve->len; i++) {
      const QpNodeAmount *a =
          &g_array_index(opts->node_reserve, QpNodeAmount, i);
      if (a->node == node)
        return a->mib;
    }
  return opts->reserve_mib;
}

/* The number of records in CLAIMS (NULL: none). */
static guint
n_claims(const QpClaims *claims)
{
  return claims != NULL && claims->claims != NULL ? claims->claims->len : 0;
}

static const QpClaim *
claim_at(const QpClaims *claims, guint i)
{
  return g_ptr_array_index(claims->claims, i);
}

guint64
qp_claims_node_mem_mib(const QpClaims *claims, int node)
{
  guint64 sum = 0;
  for (guint i = 0; i < n_claims(claims); i++) {
    const QpClaim *c = claim_at(claims, i);
    for (guint j = 0; c->mem != NULL && j < c->mem->len; j++) {
      const QpNodeAmount *a = &g_array_index(c->mem, QpNodeAmount, j);
      if (a->node == node)
        sum += a->mib;
    }
  }
  return sum;
}

guint64
qp_claims_node_huge_pages(const QpClaims *claims, int node, guint64 page_kib)
{
  guint64 sum = 0;
  for (guint i = 0; i < n_claims(claims); i++) {
    const QpClaim *c = claim_at(claims, i);
    for (guint j = 0; c->huge != NULL && j < c->huge->len; j++) {
      const QpHugeClaim *h = &g_array_index(c->huge, QpHugeClaim, j);
      if (h->node == node && h->page_kib == page_kib)
        sum += h->pages;
    }
  }
  return sum;
}

guint
qp_claims_node_vcpus(const QpClaims *claims, int node)
{
  guint sum = 0;
  for (guint i = 0; i < n_claims(claims); i++) {
    const QpClaim *c = claim_at(claims, i);
    for (guint j = 0; c->load != NULL && j < c->load->len; j++) {
      const QpNodeLoad *l = &g_array_index(c->load, QpNodeLoad, j);
      if (l->node == node)
        sum += l->vcpus;
    }
  }
  return sum;
}

hwloc_bitmap_t
qp_claims_dedicated(const QpClaims *claims)
{
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  for (guint i = 0; i < n_claims(claims); i++) {
    const QpClaim *c = claim_at(claims, i);
    if (c->dedicated != NULL)
      hwloc_bitmap_or(set, set, c->dedicated);
  }
  return set;
}

gboolean
qp_claims_node_blocked(const QpClaims *claims, int node)
{
  return claims != NULL && claims->blocked_nodes != NULL &&
         hwloc_bitmap_isset(claims->blocked_nodes, (unsigned)node);
}

static void
spread_load(const QpHost *host, double *load, hwloc_const_bitmap_t cpus,
            guint vcpus)
{
  int w = hwloc_bitmap_weight(cpus);
  if (w <= 0 || vcpus == 0)
    return;
  int cpu;
  hwloc_bitmap_foreach_begin(cpu, cpus)
  {
    int i = qp_host_cpu_index(host, cpu);
    if (i >= 0)
      load[i] += (double)vcpus / w;
  }
  hwloc_bitmap_foreach_end();
}

/* A record without CPU sets: its vCPUs floated on their nodes' CPUs that no
 * VM has dedicated (every CPU of the node when none is left). */
static void
spread_node_load(const QpHost *host, double *load, const QpClaim *cl,
                 hwloc_const_bitmap_t dedicated)
{
  g_auto(hwloc_bitmap_t) cpus = hwloc_bitmap_alloc();
  for (guint k = 0; cl->load != NULL && k < cl->load->len; k++) {
    const QpNodeLoad *l = &g_array_index(cl->load, QpNodeLoad, k);
    int i = qp_host_node_index(host, l->node);
    if (i < 0)
      continue;
    const QpNode *node = &host->nodes[i];
    hwloc_bitmap_zero(cpus);
    if (node->cpus != NULL)
      hwloc_bitmap_andnot(cpus, node->cpus, dedicated);
    if (hwloc_bitmap_iszero(cpus) && node->all_cpus != NULL)
      hwloc_bitmap_copy(cpus, node->all_cpus);
    spread_load(host, load, cpus, l->vcpus);
  }
}

void
qp_claim_add_cpu_load(const QpHost *host, const QpClaim *cl,
                      hwloc_const_bitmap_t dedicated, double *load)
{
  if (cl->cpu_load == NULL || cl->cpu_load->len == 0) {
    spread_node_load(host, load, cl, dedicated);
    return;
  }
  for (guint g = 0; g < cl->cpu_load->len; g++) {
    const QpCpuLoad *l = &g_array_index(cl->cpu_load, QpCpuLoad, g);
    spread_load(host, load, l->cpus, l->vcpus);
  }
}

double *
qp_claims_cpu_load(const QpHost *host, const QpClaims *claims)
{
  double *load = g_new0(double, MAX(host->n_cpus, 1));
  g_auto(hwloc_bitmap_t) dedicated = qp_claims_dedicated(claims);
  for (guint c = 0; c < n_claims(claims); c++)
    qp_claim_add_cpu_load(host, claim_at(claims, c), dedicated, load);
  return load;
}

/* ---- Memory of a node --------------------------------------------------- */

/* What C's record says is resident on NODE (every entry of it). */
static guint64
record_resident(const QpClaim *c, int node)
{
  guint64 sum = 0;
  for (guint j = 0; j < c->resident->len; j++) {
    const QpNodeAmount *a = &g_array_index(c->resident, QpNodeAmount, j);
    if (a->node == node)
      sum += a->mib;
  }
  return sum;
}

static guint64
claim_node_mem(const QpClaim *c, int node)
{
  guint64 sum = 0;
  for (guint j = 0; c->mem != NULL && j < c->mem->len; j++) {
    const QpNodeAmount *a = &g_array_index(c->mem, QpNodeAmount, j);
    if (a->node == node)
      sum += a->mib;
  }
  return sum;
}

/* Whether resident entry J of C is the first of its node. */
static gboolean
first_of_node(const QpClaim *c, guint j)
{
  int node = g_array_index(c->resident, QpNodeAmount, j).node;
  for (guint k = 0; k < j; k++)
    if (g_array_index(c->resident, QpNodeAmount, k).node == node)
      return FALSE;
  return TRUE;
}

guint64
qp_claim_resident_mib(const QpClaim *c, int node)
{
  if (c->resident == NULL || c->resident->len == 0 || c->qemu_rss_mib == 0)
    return 0;
  guint64 said = record_resident(c, node);
  if (said == 0)
    return 0;
  guint64 here = MIN(said, claim_node_mem(c, node));
  /* A record is trusted only as far as its own QEMU: over all nodes, no
   * more than that process has resident (each node's share cut alike). */
  guint64 all = 0;
  for (guint j = 0; j < c->resident->len; j++)
    all += g_array_index(c->resident, QpNodeAmount, j).mib;
  if (all <= c->qemu_rss_mib)
    return here; /* the common case: one look at the record */
  all = 0;
  for (guint j = 0; j < c->resident->len; j++)
    if (first_of_node(c, j)) {
      int other = g_array_index(c->resident, QpNodeAmount, j).node;
      all += MIN(record_resident(c, other), claim_node_mem(c, other));
    }
  if (all <= c->qemu_rss_mib)
    return here;
  return (guint64)((unsigned __int128)here * c->qemu_rss_mib / all);
}

guint64
qp_node_hugepage_mib(const QpNode *n)
{
  guint64 mib = 0;
  for (guint i = 0; n->hugepages != NULL && i < n->hugepages->len; i++) {
    const QpHugePool *p = &g_array_index(n->hugepages, QpHugePool, i);
    mib += p->total * p->page_kib / 1024;
  }
  return mib;
}

/* Fills OUT for host->nodes[INDEX] from what the claims hold there: CLAIMED
 * MiB, RESIDENT of them (trusted). */
static void
fill_node_memory(const QpHost *host, const QpPlacementOptions *opts,
                 guint index, guint64 claimed, guint64 resident,
                 QpNodeMemory *out)
{
  const QpNode *n = &host->nodes[index];
  memset(out, 0, sizeof(*out));
  out->total_mib = n->total_mib;
  out->hugepage_mib = qp_node_hugepage_mib(n);
  out->plain_mib =
      n->total_mib > out->hugepage_mib ? n->total_mib - out->hugepage_mib : 0;
  if (qp_host_node_mem_denied(host, n->id)) {
    /* memory this process may not use: none to plan with */
    out->hugepage_mib = 0;
    out->plain_mib = 0;
  }
  out->reserve_mib = qp_node_reserve_mib(opts, n->id);
  out->claimed_mib = claimed;
  guint64 used = out->reserve_mib + out->claimed_mib;
  out->room_mib = out->plain_mib > used ? out->plain_mib - used : 0;
  out->uncommitted_mib = out->room_mib;
  if (!n->measured)
    return;
  /* Seed 003: a claim is outstanding until its pages are allocated; a new
   * claim must fit in what the kernel can give less every outstanding
   * claim. */
  out->measured = TRUE;
  out->can_give_mib = n->can_give_mib;
  out->resident_mib = MIN(resident, out->claimed_mib);
  out->outstanding_mib = out->claimed_mib - out->resident_mib;
  out->outside_mib =
      n->used_mib > out->resident_mib ? n->used_mib - out->resident_mib : 0;
  guint64 now = n->can_give_mib > out->outstanding_mib
                    ? n->can_give_mib - out->outstanding_mib
                    : 0;
  out->uncommitted_mib = MIN(out->room_mib, now);
}

void
qp_node_memory(const QpHost *host, const QpClaims *claims,
               const QpPlacementOptions *opts, guint index, QpNodeMemory *out)
{
  const int id = host->nodes[index].id;
  guint64 resident = 0;
  for (guint i = 0; host->nodes[index].measured && i < n_claims(claims); i++)
    resident += qp_claim_resident_mib(claim_at(claims, i), id);
  fill_node_memory(host, opts, index, qp_claims_node_mem_mib(claims, id),
                   resident, out);
}

guint64
qp_node_memory_excess(const QpNodeMemory *m)
{
  guint64 room = m->plain_mib - MIN(m->reserve_mib, m->plain_mib);
  return m->claimed_mib > room ? m->claimed_mib - room : 0;
}

void
qp_nodes_memory(const QpHost *host, const QpClaims *claims,
                const QpPlacementOptions *opts, QpNodeMemory *out)
{
  const guint nn = host->n_nodes;
  g_autofree guint64 *claimed = g_new0(guint64, MAX(nn, 1));
  g_autofree guint64 *resident = g_new0(guint64, MAX(nn, 1));
  gboolean measured = FALSE;
  for (guint i = 0; i < nn; i++)
    measured |= host->nodes[i].measured;
  for (guint c = 0; c < n_claims(claims); c++) {
    const QpClaim *cl = claim_at(claims, c);
    for (guint j = 0; cl->mem != NULL && j < cl->mem->len; j++) {
      const QpNodeAmount *a = &g_array_index(cl->mem, QpNodeAmount, j);
      int i = qp_host_node_index(host, a->node);
      if (i >= 0)
        claimed[i] += a->mib;
    }
    for (guint j = 0; measured && j < cl->resident->len; j++) {
      int node = g_array_index(cl->resident, QpNodeAmount, j).node;
      int i = qp_host_node_index(host, node);
      if (i >= 0 && first_of_node(cl, j))
        resident[i] += qp_claim_resident_mib(cl, node);
    }
  }
  for (guint i = 0; i < nn; i++)
    fill_node_memory(host, opts, i, claimed[i], resident[i], &out[i]);
}

void
qp_node_pages(const QpHost *host, const QpClaims *claims, guint index,
              guint64 page_kib, QpNodePages *out)
{
  const QpNode *n = &host->nodes[index];
  memset(out, 0, sizeof(*out));
  for (guint i = 0; n->hugepages != NULL && i < n->hugepages->len; i++) {
    const QpHugePool *p = &g_array_index(n->hugepages, QpHugePool, i);
    if (p->page_kib == page_kib) {
      out->total = p->total;
      out->free = p->free;
      break;
    }
  }
  if (qp_host_node_mem_denied(host, n->id))
    out->total = out->free = 0;
  out->claimed = qp_claims_node_huge_pages(claims, n->id, page_kib);
  /* A running VM's pages are claimed and, once QEMU has touched them (every
   * preallocated backend), no longer free: counting them off the free pages
   * again would refuse room that is there. The pool less the claims is what
   * qemu-pin's VMs leave; the free pages bound it when others took some. */
  guint64 left = out->total > out->claimed ? out->total - out->claimed : 0;
  out->uncommitted = MIN(left, out->free);
}

guint64
qp_node_uncommitted(const QpHost *host, const QpClaims *claims,
                    const QpPlacementOptions *opts, guint index,
                    guint64 page_kib)
{
  if (qp_claims_node_blocked(claims, host->nodes[index].id))
    return 0;
  if (page_kib != 0) {
    QpNodePages pages;
    qp_node_pages(host, claims, index, page_kib, &pages);
    return pages.uncommitted;
  }
  QpNodeMemory mem;
  qp_node_memory(host, claims, opts, index, &mem);
  return mem.uncommitted_mib;
}

/* ---- A node as status shows it ------------------------------------------ */

void
qp_node_capacity(const QpHost *host, const QpClaims *claims,
                 const QpPlacementOptions *opts, guint index,
                 QpNodeCapacity *out)
{
  const QpNode *n = &host->nodes[index];
  QpNodeMemory mem;
  qp_node_memory(host, claims, opts, index, &mem);
  memset(out, 0, sizeof(*out));
  out->node = n->id;
  out->total_mib = mem.total_mib;
  out->hugepage_mib = mem.hugepage_mib;
  out->reserve_mib = mem.reserve_mib;
  out->claimed_mib = mem.claimed_mib;
  out->blocked = qp_claims_node_blocked(claims, n->id);
  out->uncommitted_mib = out->blocked ? 0 : mem.uncommitted_mib;
  out->measured = mem.measured;
  out->can_give_mib = mem.can_give_mib;
  out->outstanding_mib = mem.outstanding_mib;
  out->outside_mib = mem.outside_mib;

  g_auto(hwloc_bitmap_t) all = qp_claims_dedicated(claims);
  out->dedicated = hwloc_bitmap_alloc();
  if (n->all_cpus != NULL)
    hwloc_bitmap_and(out->dedicated, all, n->all_cpus);
  out->shared_vcpus = qp_claims_node_vcpus(claims, n->id);
  if (n->cpus != NULL) {
    g_auto(hwloc_bitmap_t) free_cpus = hwloc_bitmap_alloc();
    hwloc_bitmap_andnot(free_cpus, n->cpus, out->dedicated);
    int w = hwloc_bitmap_weight(free_cpus);
    out->shared_cpus = w > 0 ? (guint)w : 0;
  }
}

void
qp_node_capacity_clear(QpNodeCapacity *cap)
{
  g_clear_pointer(&cap->dedicated, hwloc_bitmap_free);
}

GArray *
qp_node_page_sizes(const QpNode *n, const QpClaims *claims)
{
  GArray *sizes = g_array_new(FALSE, FALSE, sizeof(guint64));
  if (n->hugepages)
    for (guint i = 0; i < n->hugepages->len; i++)
      g_array_append_val(sizes,
                         g_array_index(n->hugepages, QpHugePool, i).page_kib);
  for (guint i = 0; claims && i < claims->claims->len; i++) {
    const QpClaim *c = claims->claims->pdata[i];
    for (guint j = 0; j < c->huge->len; j++) {
      const QpHugeClaim *h = &g_array_index(c->huge, QpHugeClaim, j);
      gboolean seen = FALSE;
      for (guint k = 0; k < sizes->len; k++)
        seen |= g_array_index(sizes, guint64, k) == h->page_kib;
      if (h->node == n->id && !seen)
        g_array_append_val(sizes, h->page_kib);
    }
  }
  return sizes;
}
