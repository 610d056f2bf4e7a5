/* The guest topology suggested with --vnuma for a guest without -numa: it
 * mirrors the host nodes the placement uses. */
#include "topology/plan/vnuma.h"

#include "topology/plan/cache.h"
#include "topology/plan/result.h"

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

/* TRUE when the plan claims memory only on the nodes VM_IDS. */
static gboolean
claims_within(const QpPlan *plan, hwloc_const_bitmap_t vm_ids)
{
  for (guint c = 0; c < plan->claim_mem->len; c++) {
    const QpNodeAmount *m = &g_array_index(plan->claim_mem, QpNodeAmount, c);
    if (!hwloc_bitmap_isset(vm_ids, m->node))
      return FALSE;
  }
  for (guint c = 0; c < plan->claim_huge->len; c++) {
    const QpHugeClaim *h = &g_array_index(plan->claim_huge, QpHugeClaim, c);
    if (!hwloc_bitmap_isset(vm_ids, h->node))
      return FALSE;
  }
  return TRUE;
}

/* The host node (index) of each of the first PLACED vCPUs into VNODE_OF,
 * and the nodes they use, in order of their first vCPU, into USED.
 * Returns TRUE when the layout is symmetric: every used node holds the
 * same number of placed vCPUs, in one consecutive range, and memory is
 * claimed only on those nodes. */
static gboolean
placed_layout(const QpPlan *plan, const QpHost *host, guint placed,
              int *vnode_of, GArray *used)
{
  g_autofree guint *count = g_new0(guint, MAX(host->n_nodes, 1));
  for (guint v = 0; v < placed; v++) {
    int i = vcpu_node_index(plan, host, v);
    vnode_of[v] = i;
    if (i >= 0)
      count[i]++;
  }
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
  return claims_within(plan, vm_ids) && symmetric;
}

/* MiB of the guest's RAM the plan claims on host node ID (memory devices
 * keep their own backends). */
static guint64
ram_mib_on(const QpPlan *plan, int id)
{
  guint64 mib = 0;
  for (guint m = 0; m < plan->n_mem; m++) {
    const QpPlanMem *pm = &plan->mem[m];
    for (guint c = 0; pm->kind == QP_MEM_RAM && c < pm->claim->len; c++) {
      const QpNodeUnits *u = &g_array_index(pm->claim, QpNodeUnits, c);
      if (u->node == id)
        mib += pm->page_kib == 0 ? u->units : u->units * pm->page_kib / 1024;
    }
  }
  return mib;
}

/* One guest node per host node of USED (indexes), with the vCPUs VNODE_OF
 * gives it, the RAM claimed there and the host's distances; the guest's
 * memory in full (rounding of hugepage claims goes to the first). */
static void
fill_vnodes(QpPlan *plan, const QpHost *host, const QpRequest *req,
            const GArray *used, const int *vnode_of)
{
  guint nn = host->n_nodes;
  guint k = used->len;
  guint64 mem_total = 0;
  plan->n_vnodes = k;
  plan->vnodes = g_new0(QpPlanVnode, k);
  plan->vnode_distance = g_new0(guint, k * k);
  for (guint x = 0; x < k; x++) {
    guint i = g_array_index(used, guint, x);
    QpPlanVnode *vn = &plan->vnodes[x];
    vn->id = (int)x;
    vn->host_node = host->nodes[i].id;
    vn->vcpus = hwloc_bitmap_alloc();
    for (guint v = 0; v < plan->n_vcpus; v++)
      if (vnode_of[v] == (int)i)
        hwloc_bitmap_set(vn->vcpus, v);
    vn->mem_mib = ram_mib_on(plan, vn->host_node);
    mem_total += vn->mem_mib;
    for (guint y = 0; y < k; y++) {
      guint j = g_array_index(used, guint, y);
      plan->vnode_distance[x * k + y] = host->distance != NULL
                                            ? host->distance[i * nn + j]
                                            : (i == j ? 10 : 20);
    }
  }
  if (mem_total != req->mem_mib && k > 0) {
    guint64 rest = req->mem_mib;
    for (guint x = 1; x < k; x++)
      rest -= MIN(rest, plan->vnodes[x].mem_mib);
    plan->vnodes[0].mem_mib = rest;
  }
}

/* Each socket in dies that share a host L3 when the placement gives them
 * (every vCPU placed, one-to-one cores): -smp dies=D, cores per die. */
static void
set_dies(QpPlan *plan, const QpHost *host, guint placed)
{
  guint per_socket = plan->vnuma_cores * plan->vnuma_threads;
  guint dies = placed == plan->n_vcpus
                   ? qp_plan_cache_guest_dies(plan, host, plan->vnuma_sockets,
                                              per_socket, plan->vnuma_threads)
                   : 1;
  plan->vnuma_dies = dies;
  if (dies < 2)
    return;
  plan->vnuma_cores /= dies;
  qp_plan_add_reason(
      plan,
      "--vnuma: dies=%u, cores=%u per die: each die's vCPUs run in "
      "one host L3, and QEMU gives each guest die its own L3",
      dies, plan->vnuma_cores);
}

/* The guest topology mirroring the placement of the first PLACED vCPUs;
 * every possible vCPU (up to maxcpus) is in it, so that QEMU's -smp
 * product and the -numa nodes cover them all. QEMU numbers vCPUs
 * socket-major and boots the lowest indexes, so each guest node is a run of
 * whole sockets: the placed vCPUs fill sockets in index order, and the
 * sockets above them (vCPUs plugged later) go to the guest nodes in turn. A
 * socket holds the largest number of vCPUs that divides every node's share
 * and the hot-pluggable count. */
void
qp_plan_suggest_vnuma(QpPlan *plan, const QpHost *host, const QpRequest *req,
                      guint placed)
{
  guint n = plan->n_vcpus;
  placed = MIN(MAX(placed, 1), n);
  if (plan->mode == QP_MODE_BALANCED) {
    qp_plan_add_reason(plan,
                       "--vnuma: no guest topology suggested in balanced mode: "
                       "its vCPUs float over the chosen nodes");
    return;
  }
  g_autofree int *vnode_of = g_new0(int, MAX(n, 1));
  g_autoptr(GArray) used = g_array_new(FALSE, FALSE, sizeof(guint));
  gboolean symmetric = placed_layout(plan, host, placed, vnode_of, used);

  plan->vnuma = TRUE;
  guint threads = MAX(req->threads, 1);
  if (!symmetric) {
    plan->vnuma_sockets = 1;
    plan->vnuma_cores = n;
    plan->vnuma_threads = 1;
    qp_plan_add_reason(plan,
                       "--vnuma: the chosen CPUs form an asymmetric layout, so "
                       "the suggested guest topology is flat (sockets=1, "
                       "cores=%u) without -numa nodes",
                       n);
    return;
  }
  if (used->len < 2) {
    if (n % threads != 0)
      threads = 1;
    plan->vnuma_sockets = 1;
    plan->vnuma_cores = n / threads;
    plan->vnuma_threads = threads;
    qp_plan_add_reason(plan,
                       "--vnuma: one host node: sockets=1, cores=%u, "
                       "threads=%u and no -numa node",
                       plan->vnuma_cores, threads);
    set_dies(plan, host, placed);
    return;
  }
  guint socket = gcd(placed / used->len, n - placed);
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
  fill_vnodes(plan, host, req, used, vnode_of);

  g_auto(hwloc_bitmap_t) vm_ids = hwloc_bitmap_alloc();
  for (guint x = 0; x < plan->n_vnodes; x++)
    hwloc_bitmap_set(vm_ids, plan->vnodes[x].host_node);
  g_autofree char *l = qp_list_format(vm_ids);
  if (placed < n)
    qp_plan_add_reason(
        plan,
        "--vnuma: guest topology mirrors host nodes %s: "
        "sockets=%u, cores=%u, threads=%u; vCPUs %u-%u, if plugged, "
        "fill the sockets above the boot vCPUs, which go to the guest "
        "nodes in turn",
        l, plan->vnuma_sockets, plan->vnuma_cores, threads, placed, n - 1);
  else
    qp_plan_add_reason(plan,
                       "--vnuma: guest topology mirrors host nodes %s: "
                       "sockets=%u, cores=%u, threads=%u, one -numa node per "
                       "host node",
                       l, plan->vnuma_sockets, plan->vnuma_cores, threads);
  set_dies(plan, host, placed);
}
