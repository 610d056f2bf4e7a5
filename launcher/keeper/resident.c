/* How much of the VM's claim is no longer outstanding: the keeper measures
 * its own QEMU's ordinary memory per host node from /proc/PID/numa_maps
 * (as a VM that preallocates starts, after the preallocation, and every
 * RESIDENT_EVERY_MS) and writes it into the record's resident-mib when it
 * moved by RESIDENT_STEP_MIB on some node. Readers trust it only up to the
 * claim and QEMU's resident set (topology/plan/capacity.c), so a figure
 * gone stale only makes the outstanding claim larger. One keeper reads one
 * QEMU: no launch pays for a scan of every VM. */
#include "launcher/keeper/state.h"

#include <string.h>

#include "launcher/keeper/migrate.h"
#include "launcher/log.h"

/* The lines of /proc/PID/numa_maps, or NULL when it cannot be read (QEMU
 * gone, no NUMA in the kernel). */
static char **
numa_maps_lines(int pid)
{
  g_autofree char *path = g_strdup_printf("/proc/%d/numa_maps", pid);
  g_autofree char *text = NULL;
  if (!g_file_get_contents(path, &text, NULL, NULL))
    return NULL;
  return g_strsplit(text, "\n", -1);
}

/* Adds the pages of one numa_maps LINE on each node: an ordinary
 * mapping's to PER_NODE_KIB (of QpNodeAmount, in KiB); a hugetlb mapping's
 * ("huge"), which are the pools' and count nowhere there, to HUGE (of
 * QpHugeClaim, pages per node and page size) when it is not NULL. */
static void
add_line(const char *line, GArray *per_node_kib, GArray *huge)
{
  g_auto(GStrv) t = g_strsplit(line, " ", -1);
  gboolean is_huge;
  guint64 page_kib = qp_numa_maps_page_kib(t, &is_huge);
  if (is_huge && (huge == NULL || page_kib == 0))
    return;
  if (page_kib == 0)
    page_kib = 4;
  int node;
  guint64 pages;
  for (guint i = 0; t[i] != NULL; i++) {
    if (!qp_numa_maps_node_pages(t[i], &node, &pages))
      continue;
    if (!is_huge) {
      qp_node_amount_add(per_node_kib, node, pages * page_kib);
      continue;
    }
    guint j = 0;
    while (j < huge->len &&
           (g_array_index(huge, QpHugeClaim, j).node != node ||
            g_array_index(huge, QpHugeClaim, j).page_kib != page_kib))
      j++;
    if (j == huge->len) {
      QpHugeClaim h = {node, page_kib, 0};
      g_array_append_val(huge, h);
    }
    g_array_index(huge, QpHugeClaim, j).pages += pages;
  }
}

/* QEMU's ordinary memory per node now (of QpNodeAmount, in MiB), and, when
 * HUGE is not NULL, its hugepages per node and page size (*HUGE, of
 * QpHugeClaim) from the same read; NULL (*HUGE untouched) when numa_maps
 * cannot be read (QEMU gone, no NUMA in the kernel). */
static GArray *
measure(int pid, GArray **huge)
{
  g_auto(GStrv) lines = numa_maps_lines(pid);
  if (lines == NULL)
    return NULL;
  GArray *a = g_array_new(FALSE, TRUE, sizeof(QpNodeAmount));
  GArray *h =
      huge != NULL ? g_array_new(FALSE, TRUE, sizeof(QpHugeClaim)) : NULL;
  for (guint i = 0; lines[i] != NULL; i++)
    add_line(lines[i], a, h);
  for (guint j = 0; j < a->len; j++)
    g_array_index(a, QpNodeAmount, j).mib /= 1024;
  if (huge != NULL)
    *huge = h;
  return a;
}

/* The pages of HUGE (of QpHugeClaim) of PAGE_KIB as amounts per node (of
 * QpNodeAmount, the pages in its mib), for qp_caller_mems_claim(), which
 * moves amounts whatever their unit. */
static GArray *
huge_amounts(const GArray *huge, guint64 page_kib)
{
  GArray *a = g_array_new(FALSE, TRUE, sizeof(QpNodeAmount));
  for (guint j = 0; j < huge->len; j++) {
    const QpHugeClaim *h = &g_array_index(huge, QpHugeClaim, j);
    if (h->page_kib == page_kib)
      qp_node_amount_add(a, h->node, h->pages);
  }
  return a;
}

/* The hugepage claim (HUGE, of QpHugeClaim) as it follows the pages (NOW,
 * of QpHugeClaim) off nodes no longer ALLOWED, page size by page size, as
 * the ordinary memory does (qp_caller_mems_claim()): the kernel migrates
 * hugetlb pages too when the cpuset's mems change, taking them from the new
 * node's pool. NULL when it holds no node that left. */
static GArray *
follow_huge(const GArray *huge, hwloc_const_bitmap_t allowed, const GArray *now)
{
  gboolean left = FALSE;
  for (guint j = 0; j < huge->len; j++)
    left |= !hwloc_bitmap_isset(
        allowed, (unsigned)g_array_index(huge, QpHugeClaim, j).node);
  if (!left)
    return NULL;
  GArray *out = g_array_new(FALSE, TRUE, sizeof(QpHugeClaim));
  for (guint j = 0; j < huge->len; j++) {
    guint64 page_kib = g_array_index(huge, QpHugeClaim, j).page_kib;
    gboolean done = FALSE;
    for (guint o = 0; o < out->len && !done; o++)
      done = g_array_index(out, QpHugeClaim, o).page_kib == page_kib;
    if (done)
      continue;
    g_autoptr(GArray) was = huge_amounts(huge, page_kib);
    g_autoptr(GArray) has = huge_amounts(now, page_kib);
    g_autoptr(GArray) moved = qp_caller_mems_claim(was, allowed, has);
    const GArray *is = moved != NULL ? moved : was;
    for (guint i = 0; i < is->len; i++) {
      const QpNodeAmount *a = &g_array_index(is, QpNodeAmount, i);
      QpHugeClaim h = {a->node, page_kib, a->mib};
      g_array_append_val(out, h);
    }
  }
  return out;
}

/* Whether NOW differs from what the record says (WAS) by a step on a node. */
static gboolean
moved(const GArray *was, const GArray *now)
{
  for (int pass = 0; pass < 2; pass++) {
    const GArray *a = pass == 0 ? was : now;
    for (guint j = 0; j < a->len; j++) {
      int node = g_array_index(a, QpNodeAmount, j).node;
      guint64 x = qp_node_amount_of(was, node),
              y = qp_node_amount_of(now, node);
      if ((x > y ? x - y : y - x) >= RESIDENT_STEP_MIB)
        return TRUE;
    }
  }
  return FALSE;
}

static gboolean
set_resident(QpClaim *claim, const QpClaims *claims, gpointer data,
             GError **error)
{
  const GArray *now = data;
  g_array_set_size(claim->resident, 0);
  for (guint j = 0; j < now->len; j++)
    if (g_array_index(now, QpNodeAmount, j).mib > 0)
      g_array_append_val(claim->resident, g_array_index(now, QpNodeAmount, j));
  return TRUE;
}

/* Whether the plan binds ordinary guest memory to several host nodes with
 * one policy (a balanced VM split over nodes): the kernel chooses among
 * them page by page, not as the claim splits it. */
static gboolean
plan_binds_several(const QpPlan *plan)
{
  for (guint i = 0; i < plan->n_mem; i++) {
    const QpPlanMem *m = &plan->mem[i];
    if (m->page_kib == 0 && !m->caller_set && m->host_nodes != NULL &&
        hwloc_bitmap_weight(m->host_nodes) >= 2)
      return TRUE;
  }
  return FALSE;
}

/* A node holds more of the VM's memory (NOW, MiB per node) than its claim
 * there by a step, another of its claim less: pages move from the one to
 * the other (robustness finding 40), at most EVEN_OUT_MAX_MIB each time.
 * TRUE if some did. */
static gboolean
even_out(Keeper *k, const QpClaim *claim, const GArray *now)
{
  if (!plan_binds_several(k->plan) || claim->mem->len < 2)
    return FALSE;
  g_autoptr(GArray) take = g_array_new(FALSE, TRUE, sizeof(QpNodeAmount));
  g_autoptr(GArray) give = g_array_new(FALSE, TRUE, sizeof(QpNodeAmount));
  guint64 most = 0;
  for (guint j = 0; j < claim->mem->len; j++) {
    const QpNodeAmount *c = &g_array_index(claim->mem, QpNodeAmount, j);
    guint64 has = qp_node_amount_of(now, c->node);
    if (has > c->mib) {
      qp_node_amount_add(take, c->node, has - c->mib);
      most = MAX(most, has - c->mib);
    } else if (has < c->mib)
      qp_node_amount_add(give, c->node, c->mib - has);
  }
  if (most < RESIDENT_STEP_MIB || give->len == 0)
    return FALSE;
  guint64 moved = 0;
  g_autoptr(GError) error = NULL;
  if (!qp_mem_even_out(k->qemu_pid, take, give, EVEN_OUT_MAX_MIB, &moved,
                       &error)) {
    static gboolean said; /* once: it is tried again every measure */
    if (!said)
      qp_error("keeper: cannot keep the VM's memory within its claim: %s",
               error->message);
    said = TRUE;
    return FALSE;
  }
  qp_keeper_log(k, 1,
                "resident: %" G_GUINT64_FORMAT
                " MiB moved to the nodes of the claim that held less",
                moved);
  return moved > 0;
}

typedef struct {
  const GArray *mem;  /* of QpNodeAmount, or NULL: unchanged */
  const GArray *huge; /* of QpHugeClaim, or NULL: unchanged */
  gboolean caller;    /* a caller narrowed the nodes: the VM is its */
} FollowedMem;

static gboolean
set_mem(QpClaim *claim, const QpClaims *claims, gpointer data, GError **error)
{
  const FollowedMem *f = data;
  if (f->mem != NULL) {
    g_array_set_size(claim->mem, 0);
    g_array_append_vals(claim->mem, f->mem->data, f->mem->len);
  }
  if (f->huge != NULL) {
    g_array_set_size(claim->huge, 0);
    g_array_append_vals(claim->huge, f->huge->data, f->huge->len);
  }
  claim->caller_placed |= f->caller;
  return TRUE;
}

/* The host's nodes with memory online now, or NULL when the kernel does
 * not say. */
static hwloc_bitmap_t
nodes_with_memory(void)
{
  hwloc_bitmap_t nodes = NULL;
  return qp_list_read_file("/sys/devices/system/node/has_memory", &nodes, NULL)
             ? nodes
             : NULL;
}

/* "128 MiB on node 2, 40 MiB on node 3" of AMOUNTS (of QpNodeAmount), or
 * NULL when it is empty. */
static char *
amounts_text(const GArray *amounts)
{
  GString *s = g_string_new(NULL);
  for (guint j = 0; j < amounts->len; j++) {
    const QpNodeAmount *a = &g_array_index(amounts, QpNodeAmount, j);
    g_string_append_printf(s, "%s%" G_GUINT64_FORMAT " MiB on node %d",
                           j ? ", " : "", a->mib, a->node);
  }
  return g_string_free(s, s->len == 0);
}

/* AMOUNTS (of QpNodeAmount) and HUGE (of QpHugeClaim) in words: "128 MiB
 * on node 2, 32 pages of 2048 KiB on node 3", or "none". */
static char *
claim_text(const GArray *amounts, const GArray *huge)
{
  g_autofree char *mem = amounts_text(amounts);
  GString *s = g_string_new(mem);
  for (guint j = 0; j < huge->len; j++) {
    const QpHugeClaim *h = &g_array_index(huge, QpHugeClaim, j);
    g_string_append_printf(s,
                           "%s%" G_GUINT64_FORMAT " pages of %" G_GUINT64_FORMAT
                           " KiB on node %d",
                           s->len ? ", " : "", h->pages, h->page_kib, h->node);
  }
  if (s->len == 0)
    g_string_append(s, "none");
  return g_string_free(s, FALSE);
}

/* The nodes QEMU may take memory from (its cgroup's cpuset.mems) no longer
 * hold nodes of the claim: the kernel moved the pages and rebound the
 * policies, and the claim follows them (NOW: ordinary MiB per node), its
 * hugepages too (NOW_HUGE: pages, follow_huge()). When a caller
 * narrowed them (`virsh numatune --live`, an orchestrator's cgroup), the
 * VM's placement is the caller's from then on (robustness finding 51); a
 * node whose memory went offline entirely left them by the kernel's hand,
 * and that alone is no caller's choice (finding 73). TRUE if the claim
 * changed. */
static gboolean
follow_allowed_mems(Keeper *k, const GArray *now, const GArray *now_huge)
{
  if (k->mems_at_start == NULL)
    return FALSE;
  g_auto(hwloc_bitmap_t) allowed = qp_mem_allowed_nodes(k->qemu_pid);
  if (allowed == NULL)
    return FALSE;
  /* Only nodes QEMU could use at the start can have been taken away: a
   * model's nodes the kernel never had (QEMU_PIN_TOPOLOGY) are no change. */
  const QpClaim *claim = qp_held_claim_get(k->claim);
  g_auto(hwloc_bitmap_t) judged = hwloc_bitmap_dup(allowed);
  for (guint j = 0; j < claim->mem->len; j++) {
    int node = g_array_index(claim->mem, QpNodeAmount, j).node;
    if (!hwloc_bitmap_isset(k->mems_at_start, (unsigned)node))
      hwloc_bitmap_set(judged, (unsigned)node);
  }
  for (guint j = 0; j < claim->huge->len; j++) {
    int node = g_array_index(claim->huge, QpHugeClaim, j).node;
    if (!hwloc_bitmap_isset(k->mems_at_start, (unsigned)node))
      hwloc_bitmap_set(judged, (unsigned)node);
  }
  g_autoptr(GArray) mem = claim->mem->len > 0
                              ? qp_caller_mems_claim(claim->mem, judged, now)
                              : NULL;
  g_autoptr(GArray) huge = follow_huge(claim->huge, judged, now_huge);
  if (mem == NULL && huge == NULL)
    return FALSE;
  g_auto(hwloc_bitmap_t) with_memory = nodes_with_memory();
  g_auto(hwloc_bitmap_t) gone = hwloc_bitmap_alloc();
  FollowedMem f = {
      mem, huge,
      qp_caller_mems_narrowed(k->mems_at_start, allowed, with_memory, gone)};
  g_autofree char *was = claim_text(claim->mem, claim->huge);
  g_autoptr(GError) error = NULL;
  if (!qp_held_claim_adjust(k->claim, set_mem, &f, &error)) {
    qp_error("keeper: cannot claim the VM's memory where its pages are: %s",
             error->message);
    return FALSE;
  }
  g_autofree char *list = qp_list_format(allowed);
  claim = qp_held_claim_get(k->claim);
  g_autofree char *is = claim_text(claim->mem, claim->huge);
  if (f.caller) {
    g_free(k->mems_narrowed);
    k->mems_narrowed = g_strdup_printf(
        "the caller allowed its memory only on nodes %s (cpuset.mems)", list);
    qp_keeper_log(k, 1,
                  "memory: the caller allowed QEMU's memory only on nodes %s: "
                  "claimed %s (was %s)",
                  list, is, was);
  } else {
    g_autofree char *off = qp_list_format(gone);
    qp_keeper_log(k, 1,
                  "memory: node %s has no memory online any more (not the "
                  "caller's choice): claimed %s, where its pages went (was "
                  "%s)",
                  off, is, was);
  }
  return TRUE;
}

static void
measure_later(Keeper *k)
{
  k->next_resident_at =
      g_get_monotonic_time() + (gint64)RESIDENT_EVERY_MS * 1000;
}

void
qp_keeper_resident_start(Keeper *k)
{
  k->mems_at_start = qp_mem_allowed_nodes(k->qemu_pid);
  if ((k->cfg->req != NULL && k->cfg->req->prealloc) || k->cfg->mem_lock)
    qp_keeper_measure_resident(k);
  else
    measure_later(k);
}

void
qp_keeper_measure_resident(Keeper *k)
{
  measure_later(k);
  /* Now and then, a record removed by hand while the VM runs is written
   * again: the claim holds as long as the VM lives. */
  static gboolean said; /* that it cannot: once */
  g_autoptr(GError) lost = NULL;
  gboolean restored = FALSE;
  gboolean ok = qp_held_claim_restore(k->claim, &restored, &lost);
  if (!ok && !said)
    qp_error("keeper: the VM's ledger record is gone and cannot be written "
             "again: %s",
             lost->message);
  said |= !ok;
  if (restored)
    qp_warning("keeper: the VM's ledger record was gone (removed by hand?): "
               "written again");
  g_autoptr(GArray) now_huge = NULL;
  g_autoptr(GArray) now = measure(k->qemu_pid, &now_huge);
  const QpClaim *claim = qp_held_claim_get(k->claim);
  if (now == NULL || claim->mem->len + claim->huge->len == 0)
    return;
  if (follow_allowed_mems(k, now, now_huge))
    claim = qp_held_claim_get(k->claim);
  if (claim->mem->len == 0)
    return;
  if (even_out(k, claim, now)) {
    g_array_unref(now);
    now = measure(k->qemu_pid, NULL);
    if (now == NULL)
      return;
  }
  if (!moved(claim->resident, now))
    return;
  g_autoptr(GError) error = NULL;
  if (!qp_held_claim_adjust(k->claim, set_resident, now, &error)) {
    qp_error("keeper: cannot write the VM's resident memory: %s",
             error->message);
    return;
  }
  g_autofree char *text = amounts_text(claim->resident);
  qp_keeper_log(k, 1, "resident: %s", text ? text : "none");
}
