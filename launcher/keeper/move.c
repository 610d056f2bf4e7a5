/* `qemu-pin move` inside the keeper: the keeper holds the VM's claim, its
 * plan, the request it was made from and the monitor, so the move is its
 * work. The command asks over the keeper's control socket (an abstract
 * unix socket named after the keeper's pid, for root or the keeper's own
 * user) and prints the one-object answer.
 *
 * A move, two-phase with the ledger: re-plan through the planner with the
 * destination as the only host nodes allowed, the VM's own record left
 * out; the record then claims source AND destination (a move killed on the
 * way leaves a claim that covers wherever the pages are); threads go to
 * the new plan; pages move, rate-limited; the binding follows where a
 * cgroup of qemu-pin's own can rebind it; numa_maps says where the memory
 * is; only then is the record cut to the destination, with "moved-at". A
 * move that stops on the way (the caller's pinning, a failure) settles the
 * record on the nodes numa_maps finds the guest memory on. */
#include "launcher/keeper/state.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "launcher/affinity.h"
#include "launcher/keeper/migrate.h"
#include "launcher/log.h"
#include "topology/plan/claim.h"

/* Guest memory that must be on the destination for the move to count. */
#define ON_DESTINATION_PERMILLE 950

socklen_t
qp_keeper_control_address(int keeper_pid, struct sockaddr_un *sa)
{
  memset(sa, 0, sizeof(*sa));
  sa->sun_family = AF_UNIX;
  int n = g_snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1,
                     "qemu-pin-keeper/%d", keeper_pid);
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (gsize)n);
}

void
qp_keeper_control_open(Keeper *k)
{
  struct sockaddr_un sa;
  socklen_t len = qp_keeper_control_address(getpid(), &sa);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd >= 0 &&
      (bind(fd, (struct sockaddr *)&sa, len) < 0 || listen(fd, 4) < 0)) {
    qp_keeper_log(k, 1, "no control socket (move unavailable): %s",
                  g_strerror(errno));
    close(fd);
    fd = -1;
  }
  k->control_fd = fd;
}

/* ---- What may not move -------------------------------------------------- */

static gboolean G_GNUC_PRINTF(2, 3) refuse(GError **error, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *why = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_MOVE_REFUSED,
              "move refused: %s", why);
  return FALSE;
}

/* Whether the VM may move to TO. A VM the caller placed is refused with a
 * code of its own (QP_LAUNCH_ERROR_CALLER_PLACED), which the answer carries
 * ("code": "caller-placed") for `rebalance` to plan without it. */
static gboolean
may_move(Keeper *k, hwloc_const_bitmap_t to, GError **error)
{
  const QpPlan *plan = k->plan;
  const QpRequest *req = k->cfg->req;
  const QpPlacementOptions *p = k->cfg->placement;
  g_autofree char *placed = qp_keeper_caller_placed(k);
  if (placed != NULL) {
    g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_CALLER_PLACED,
                "move refused: %s; qemu-pin never moves what the caller "
                "placed",
                placed);
    return FALSE;
  }
  if (req == NULL || (req->vfio != NULL && req->vfio[0] != NULL))
    return refuse(error,
                  "the VM has a VFIO device (%s): its pages are pinned for "
                  "DMA and cannot move",
                  req && req->vfio ? req->vfio[0] : "?");
  /* DIMMs plugged after the move, and what a virtio-mem device grows by,
   * must land on the destination: only the binding, moved with the pages,
   * puts them there. */
  g_autofree char *why = NULL;
  const QpMemDevice *resized = qp_request_virtio_mem(req);
  if (k->cfg->mem_hotplug &&
      !qp_mem_binding_movable(k->qemu_pid, geteuid(),
                              qp_held_claim_get(k->claim)->id, &why)) {
    if (resized != NULL)
      return refuse(error,
                    "the VM's memory can be resized (virtio-mem device %s) "
                    "and only its pages could move (%s): what it grows by "
                    "later would land on the nodes it leaves",
                    resized->device != NULL ? resized->device : resized->memdev,
                    why);
    return refuse(error,
                  "the VM's memory can be plugged (-m maxmem) and only its "
                  "pages could move (%s): memory plugged later would land "
                  "on the nodes it leaves",
                  why);
  }
  if (plan->n_vnodes > 0 && req->n_gnodes == 0)
    return refuse(error, "%s",
                  "qemu-pin gave the guest its NUMA topology at launch: it "
                  "mirrors the nodes the VM started on");
  if (p->hostnodes != NULL && !hwloc_bitmap_isincluded(to, p->hostnodes)) {
    g_autofree char *allowed = qp_list_format(p->hostnodes);
    return refuse(error,
                  "the VM was started with --hostnodes=%s: the destination "
                  "must be inside it",
                  allowed);
  }
  return TRUE;
}

/* Whether the VM may keep memory on every node of TO, and use a CPU of
 * TO: the CPUs it was started inside (the
 * affinity and cgroup cpuset qemu-pin was started with, less isolated
 * CPUs: HOST's allowed, as the keeper inherited them) and --affinity. A
 * caller that started it under `taskset -c` kept it off the other nodes,
 * as --hostnodes does: the move is refused, as that one is, before the
 * planner finds no CPU there (which `rebalance` took for a failure and
 * stopped at). Memory-only nodes have no CPU to check. */
static gboolean
may_use_cpus_of(const QpHost *host, const QpPlacementOptions *p,
                hwloc_const_bitmap_t to, GError **error)
{
  g_auto(hwloc_bitmap_t) there = hwloc_bitmap_alloc();
  for (guint i = 0; i < host->n_nodes; i++)
    if (hwloc_bitmap_isset(to, (unsigned)host->nodes[i].id))
      hwloc_bitmap_or(there, there, host->nodes[i].all_cpus);
  /* Nodes with memory that QEMU's cgroup (cpuset.mems, as it is now) or
   * the memory policy qemu-pin was started with (numactl --membind) keep
   * the VM's memory off: the planner would find no node there. */
  g_auto(hwloc_bitmap_t) off = hwloc_bitmap_alloc();
  for (guint i = 0; i < host->n_nodes; i++) {
    int id = host->nodes[i].id;
    if (id >= 0 && host->nodes[i].total_mib > 0 &&
        hwloc_bitmap_isset(to, (unsigned)id) &&
        ((host->allowed_nodes != NULL &&
          !hwloc_bitmap_isset(host->allowed_nodes, (unsigned)id)) ||
         qp_host_node_mem_denied(host, id)))
      hwloc_bitmap_set(off, (unsigned)id);
  }
  if (!hwloc_bitmap_iszero(off)) {
    g_auto(hwloc_bitmap_t) may = hwloc_bitmap_alloc();
    for (guint i = 0; i < host->n_nodes; i++) {
      int id = host->nodes[i].id;
      if (id >= 0 && host->nodes[i].total_mib > 0 &&
          (host->allowed_nodes == NULL ||
           hwloc_bitmap_isset(host->allowed_nodes, (unsigned)id)) &&
          !qp_host_node_mem_denied(host, id))
        hwloc_bitmap_set(may, (unsigned)id);
    }
    g_autofree char *mems = qp_list_format(may);
    g_autofree char *outside = qp_list_format(off);
    return refuse(error,
                  "the VM's memory may use host nodes %s only (QEMU's cgroup "
                  "cpuset.mems and the memory policy qemu-pin was started "
                  "with): nodes %s are outside them",
                  mems, outside);
  }
  g_auto(hwloc_bitmap_t) usable = hwloc_bitmap_dup(host->allowed);
  if (p->affinity != NULL)
    hwloc_bitmap_and(usable, usable, p->affinity);
  if (hwloc_bitmap_iszero(there) || hwloc_bitmap_intersects(there, usable))
    return TRUE;
  g_autofree char *cpus = qp_list_format(usable);
  g_autofree char *nodes = qp_list_format(to);
  g_autofree char *theirs = qp_list_format(there);
  return refuse(error,
                "the VM was started inside CPUs %s (the affinity and cpuset "
                "qemu-pin was started with%s): nodes %s have none of them "
                "(their CPUs are %s)",
                cpus, p->affinity != NULL ? ", and --affinity" : "", nodes,
                theirs);
}

/* ---- The ledger's two phases -------------------------------------------- */

typedef struct {
  const QpHost *host;
  const QpRequest *req;
  QpPlacementOptions opts;
  QpPlan *plan; /* out */
} Replan;

/* AMOUNTS (of QpNodeAmount or QpNodeLoad: an int node first, then a
 * value) gains OTHER's nodes, the larger value where both have one. */
static void
widen_amounts(GArray *amounts, const GArray *other, gboolean loads)
{
  for (guint i = 0; other != NULL && i < other->len; i++) {
    const QpNodeAmount *o =
        loads ? NULL : &g_array_index(other, QpNodeAmount, i);
    const QpNodeLoad *ol = loads ? &g_array_index(other, QpNodeLoad, i) : NULL;
    int node = loads ? ol->node : o->node;
    guint j;
    for (j = 0; j < amounts->len; j++) {
      if (loads && g_array_index(amounts, QpNodeLoad, j).node == node) {
        QpNodeLoad *a = &g_array_index(amounts, QpNodeLoad, j);
        a->vcpus = MAX(a->vcpus, ol->vcpus);
        break;
      }
      if (!loads && g_array_index(amounts, QpNodeAmount, j).node == node) {
        QpNodeAmount *a = &g_array_index(amounts, QpNodeAmount, j);
        a->mib = MAX(a->mib, o->mib);
        break;
      }
    }
    if (j == amounts->len)
      g_array_append_vals(amounts, loads ? (gconstpointer)ol : (gconstpointer)o,
                          1);
  }
}

/* HUGE (of QpHugeClaim) gains OTHER's pages, the larger count where both
 * have a node and page size. */
static void
widen_huge(GArray *huge, const GArray *other)
{
  for (guint i = 0; other != NULL && i < other->len; i++) {
    const QpHugeClaim *o = &g_array_index(other, QpHugeClaim, i);
    guint j;
    for (j = 0; j < huge->len; j++) {
      QpHugeClaim *h = &g_array_index(huge, QpHugeClaim, j);
      if (h->node == o->node && h->page_kib == o->page_kib) {
        h->pages = MAX(h->pages, o->pages);
        break;
      }
    }
    if (j == huge->len)
      g_array_append_val(huge, *o);
  }
}

/* HOST as the VM of CLAIM finds it, into OWN (nodes and pools its own
 * copies: own_host_clear()). With its record left out of the re-plan, the
 * VM's own pages would count as memory used outside any claim: on a node
 * it is on already, what the kernel can give there would lack them, and a
 * move onto its own node (or a consolidation that `rebalance` planned,
 * counting them as room for the VM) be refused for want of memory it
 * holds. They are given back, as the rebalance planner does
 * (release_pages): its ordinary memory as this keeper measured it in its
 * QEMU's numa_maps (the record's "resident-mib"; a reader's trust in it is
 * for other keepers' records), at most what it claims there; its
 * hugepages as it claims them, at most the pages of the pool in use. */
static void
own_host_init(QpHost *own, const QpHost *host, const QpClaim *claim)
{
  *own = *host;
  QpNode *nodes =
      g_memdup2(host->nodes, sizeof(QpNode) * MAX(host->n_nodes, 1));
  own->nodes = nodes;
  for (guint i = 0; i < own->n_nodes; i++) {
    GArray *pools = nodes[i].hugepages;
    if (pools != NULL)
      pools = nodes[i].hugepages = g_array_copy(pools);
    for (guint p = 0; pools != NULL && p < pools->len; p++) {
      QpHugePool *pool = &g_array_index(pools, QpHugePool, p);
      guint64 mine = 0;
      for (guint j = 0; j < claim->huge->len; j++) {
        const QpHugeClaim *h = &g_array_index(claim->huge, QpHugeClaim, j);
        if (h->node == nodes[i].id && h->page_kib == pool->page_kib)
          mine += h->pages;
      }
      guint64 used = pool->total > pool->free ? pool->total - pool->free : 0;
      pool->free += MIN(mine, used);
    }
    if (!nodes[i].measured)
      continue;
    guint64 mine = 0;
    for (guint j = 0; claim->resident != NULL && j < claim->resident->len; j++)
      if (g_array_index(claim->resident, QpNodeAmount, j).node == nodes[i].id)
        mine += g_array_index(claim->resident, QpNodeAmount, j).mib;
    /* No more than it claims there, as the planner trusts a record. */
    guint64 claimed = 0;
    for (guint j = 0; j < claim->mem->len; j++)
      if (g_array_index(claim->mem, QpNodeAmount, j).node == nodes[i].id)
        claimed += g_array_index(claim->mem, QpNodeAmount, j).mib;
    mine = MIN(mine, claimed);
    nodes[i].can_give_mib += mine;
    nodes[i].used_mib = nodes[i].used_mib > mine ? nodes[i].used_mib - mine : 0;
  }
}

static void
own_host_clear(QpHost *own)
{
  for (guint i = 0; i < own->n_nodes; i++)
    if (own->nodes[i].hugepages != NULL)
      g_array_unref(own->nodes[i].hugepages);
  g_clear_pointer(&own->nodes, g_free);
}

/* Phase one: the plan on the destination, claimed beside the source. */
static gboolean
replan_and_widen(QpClaim *claim, const QpClaims *claims, gpointer data,
                 GError **error)
{
  Replan *r = data;
  QpClaims others = {g_ptr_array_new(), claims->blocked_nodes,
                     g_ptr_array_new(), 0, 0};
  for (guint i = 0; i < claims->claims->len; i++) {
    QpClaim *c = claims->claims->pdata[i];
    if (g_strcmp0(c->id, claim->id) != 0)
      g_ptr_array_add(others.claims, c);
  }
  QpHost own;
  own_host_init(&own, r->host, claim);
  r->plan = qp_plan_compute(&own, &others, r->req, &r->opts, error);
  own_host_clear(&own);
  g_ptr_array_unref(others.claims);
  g_ptr_array_unref(others.warnings);
  if (r->plan == NULL) {
    /* No room on the destination under the VM's own settings (its reserve,
     * --hostnodes, --affinity: what its record does not say) is a refusal
     * that changes nothing: `rebalance` plans again without the VM. */
    if (error != NULL &&
        g_error_matches(*error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT)) {
      g_autoptr(GError) nofit = g_steal_pointer(error);
      return refuse(error, "%s", nofit->message);
    }
    g_prefix_error(error, "move refused: ");
    return FALSE;
  }
  widen_amounts(claim->mem, r->plan->claim_mem, FALSE);
  widen_amounts(claim->load, r->plan->load, TRUE);
  widen_huge(claim->huge, r->plan->claim_huge);
  hwloc_bitmap_or(claim->dedicated, claim->dedicated, r->plan->dedicated);
  return TRUE;
}

/* Phase two's edit: the claim cut to PLAN, the move's; SAME_NODES when the
 * VM was placed again on the nodes it was on. */
typedef struct {
  const QpPlan *plan;
  gboolean same_nodes;
  hwloc_bitmap_t plugged; /* cores claimed for plugged vCPUs there */
} Cut;

/* Phase two: the record holds the destination only. */
static gboolean
cut_to_destination(QpClaim *claim, const QpClaims *claims, gpointer data,
                   GError **error)
{
  (void)claims;
  (void)error;
  const Cut *cut = data;
  const QpPlan *plan = cut->plan;
  g_autoptr(QpClaim) fresh = qp_claim_from_plan(plan, claim->id, claim->name);
  g_array_set_size(claim->mem, 0);
  g_array_append_vals(claim->mem, fresh->mem->data, fresh->mem->len);
  g_array_set_size(claim->huge, 0);
  g_array_append_vals(claim->huge, fresh->huge->data, fresh->huge->len);
  g_array_set_size(claim->load, 0);
  g_array_append_vals(claim->load, fresh->load->data, fresh->load->len);
  qp_cpu_load_copy(claim->cpu_load, fresh->cpu_load);
  hwloc_bitmap_or(claim->dedicated, fresh->dedicated, cut->plugged);
  claim->best_effort = fresh->best_effort;
  /* Placed again where it was is no move: no cooldown for it. */
  if (!cut->same_nodes)
    claim->moved_at = g_get_real_time() / G_USEC_PER_SEC;
  return TRUE;
}

/* A move stopped after phase one: the memory claimed on the nodes that hold
 * the guest memory now (PAGES, as the check counts it), each with what the
 * move claimed there and never less than is on it; the CPUs as they were
 * BEFORE the move (NULL: as they are, the threads having taken the new
 * plan). */
typedef struct {
  const GArray *pages;
  hwloc_const_bitmap_t huge_nodes; /* the nodes that hold hugepages of it */
  const QpClaim *before;
} Settle;

static gboolean
settle_to_pages(QpClaim *claim, const QpClaims *claims, gpointer data,
                GError **error)
{
  (void)claims;
  (void)error;
  const Settle *s = data;
  for (guint i = claim->mem->len; i-- > 0;)
    if (qp_node_amount_of(s->pages,
                          g_array_index(claim->mem, QpNodeAmount, i).node) == 0)
      g_array_remove_index(claim->mem, i);
  widen_amounts(claim->mem, s->pages, FALSE);
  /* Hugepages: the nodes that hold none leave the claim (unless none holds
   * any yet: where they will come from is not known). */
  for (guint i = claim->huge->len; i-- > 0;)
    if (!hwloc_bitmap_iszero(s->huge_nodes) &&
        !hwloc_bitmap_isset(
            s->huge_nodes,
            (unsigned)g_array_index(claim->huge, QpHugeClaim, i).node))
      g_array_remove_index(claim->huge, i);
  if (s->before != NULL) {
    g_array_set_size(claim->load, 0);
    g_array_append_vals(claim->load, s->before->load->data,
                        s->before->load->len);
    hwloc_bitmap_copy(claim->dedicated, s->before->dedicated);
  }
  return TRUE;
}

/* ---- Threads ------------------------------------------------------------ */

/* The new plan becomes the keeper's: every thread of QEMU is set to its
 * startup CPUs (which a thread seen for the first time inherits), the
 * look forgets what it saw, and the next look pins each thread as the
 * plan says. */
static gboolean
take_plan(Keeper *k, const QpHost *host, QpPlan *plan, GError **error)
{
  /* The CPUs beyond QEMU's start affinity stay those the launch saw: the
   * keeper's own affinity says nothing of them. */
  g_auto(hwloc_bitmap_t) beyond =
      k->host->beyond != NULL ? hwloc_bitmap_dup(k->host->beyond) : NULL;
  g_clear_pointer(&k->own_plan, qp_plan_free);
  g_clear_pointer(&k->own_host, qp_caller_host_free);
  k->own_plan = plan;
  k->plan = plan;
  k->own_host = qp_caller_host_new(host, plan, k->cfg->placement->affinity);
  hwloc_bitmap_free(k->own_host->beyond);
  k->own_host->beyond = g_steal_pointer(&beyond);
  k->host = k->own_host;
  qp_caller_pins_free(k->pins);
  k->pins = qp_caller_pins_new(plan->n_vcpus);
  qp_keeper_forget_plugged(k);
  hwloc_const_bitmap_t start =
      plan->startup_cpus != NULL && !hwloc_bitmap_iszero(plan->startup_cpus)
          ? plan->startup_cpus
          : plan->process_cpus;
  g_autofree char *task = g_strdup_printf("/proc/%d/task", k->qemu_pid);
  g_autoptr(GDir) dir = g_dir_open(task, 0, NULL);
  const char *name;
  while (dir != NULL && (name = g_dir_read_name(dir)) != NULL)
    qp_set_affinity(atoi(name), start, NULL);
  if (!qp_keeper_query_and_apply(k, NULL, error))
    return FALSE;
  /* A look claims the cores of plugged vCPUs as it pins them; the next
   * keeps the other threads off those cores (pinning.c). */
  return g_hash_table_size(k->plugged) == 0 ||
         qp_keeper_query_and_apply(k, NULL, error);
}

/* ---- The move ----------------------------------------------------------- */

typedef struct {
  hwloc_bitmap_t from;
  guint64 moved_mib;
  QpMemWhere where;
  char *cgroup; /* the cgroup that rebound the memory, or NULL */
  char *why;    /* why the binding did not move, or NULL */
} Moved;

static void
moved_clear(Moved *m)
{
  g_clear_pointer(&m->from, hwloc_bitmap_free);
  g_clear_pointer(&m->cgroup, g_free);
  g_clear_pointer(&m->why, g_free);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(Moved, moved_clear)

static hwloc_bitmap_t
claim_nodes(const QpClaim *c)
{
  hwloc_bitmap_t nodes = hwloc_bitmap_alloc();
  for (guint i = 0; i < c->mem->len; i++)
    hwloc_bitmap_set(nodes,
                     (unsigned)g_array_index(c->mem, QpNodeAmount, i).node);
  for (guint i = 0; i < c->huge->len; i++)
    if (g_array_index(c->huge, QpHugeClaim, i).pages > 0)
      hwloc_bitmap_set(nodes,
                       (unsigned)g_array_index(c->huge, QpHugeClaim, i).node);
  for (guint i = 0; i < c->load->len; i++)
    hwloc_bitmap_set(nodes,
                     (unsigned)g_array_index(c->load, QpNodeLoad, i).node);
  return nodes;
}

/* Rebinds QEMU's memory to NODES through its own cgroup CGROUP: these are
 * then the nodes it could use as qemu-pin left them, which no caller
 * narrowed (resident.c follows only a caller's cpuset.mems). */
static gboolean
rebind(Keeper *k, const char *cgroup, hwloc_const_bitmap_t nodes,
       GError **error)
{
  if (!qp_mem_rebind(cgroup, nodes, error))
    return FALSE;
  if (k->mems_at_start != NULL)
    hwloc_bitmap_copy(k->mems_at_start, nodes);
  return TRUE;
}

/* After phase one: pages, binding, the check (the threads follow). */
static gboolean
move_memory(Keeper *k, const QpHost *host, hwloc_const_bitmap_t to,
            guint rate_mib, Moved *m, GError **error)
{
  const char *id = qp_held_claim_get(k->claim)->id;
  m->cgroup = qp_mem_own_cgroup(k->qemu_pid, id, &m->why);
  /* A VM moved before is in its cgroup already, its memory allowed only
   * on the old nodes: the pages may move only once the destination is
   * allowed too. */
  if (m->cgroup != NULL) {
    g_auto(hwloc_bitmap_t) both = hwloc_bitmap_alloc();
    hwloc_bitmap_or(both, m->from, to);
    if (!rebind(k, m->cgroup, both, error))
      return FALSE;
  }
  g_auto(hwloc_bitmap_t) host_nodes = hwloc_bitmap_alloc();
  for (guint i = 0; i < host->n_nodes; i++)
    if (host->nodes[i].total_mib > 0)
      hwloc_bitmap_set(host_nodes, (unsigned)host->nodes[i].id);
  if (!qp_mem_move_pages(k->qemu_pid, host_nodes, to, rate_mib, &m->moved_mib,
                         error))
    return FALSE;
  if (m->cgroup != NULL && !rebind(k, m->cgroup, to, error))
    return FALSE;
  if (!qp_mem_where(k->qemu_pid, to, &m->where, error))
    return FALSE;
  if (m->where.on_kib * 1000 < m->where.total_kib * ON_DESTINATION_PERMILLE) {
    g_autofree char *list = qp_list_format(to);
    g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
                "move of QEMU (pid %d) unfinished: %" G_GUINT64_FORMAT
                " of %" G_GUINT64_FORMAT " MiB of guest memory on nodes %s",
                k->qemu_pid, m->where.on_kib / 1024, m->where.total_kib / 1024,
                list);
    return FALSE;
  }
  return TRUE;
}

static QpJv *
answer(const QpClaim *c, hwloc_const_bitmap_t to, const Moved *m)
{
  g_autofree char *from = qp_list_format(m->from);
  g_autofree char *dest = qp_list_format(to);
  guint64 mib = 0;
  for (guint i = 0; i < c->mem->len; i++)
    mib += g_array_index(c->mem, QpNodeAmount, i).mib;
  QpJv *o = qp_jv_object();
  qp_jv_set(o, "vm", qp_jv_string(c->id));
  qp_jv_set(o, "name", qp_jv_string(c->name));
  qp_jv_set(o, "from", qp_jv_string(from));
  qp_jv_set(o, "to", qp_jv_string(dest));
  qp_jv_set(o, "mib", qp_jv_int((gint64)mib));
  qp_jv_set(o, "moved-mib", qp_jv_int((gint64)m->moved_mib));
  qp_jv_set(o, "on-destination-permille",
            qp_jv_int(m->where.total_kib ? (gint64)(m->where.on_kib * 1000 /
                                                    m->where.total_kib)
                                         : 1000));
  qp_jv_set(o, "binding-moved", qp_jv_bool(m->cgroup != NULL));
  qp_jv_set(o, "binding", qp_jv_string(m->cgroup != NULL ? m->cgroup : m->why));
  qp_jv_set(o, "moved-at", qp_jv_int(c->moved_at));
  return o;
}

/* The move stopped after phase one, ERROR set: the record is settled on
 * where the guest memory is now (settle_to_pages(); BEFORE: the claim before
 * the move, whose CPUs the threads still use, or NULL), and ERROR's line
 * says what it claims. */
static void
stop_move(Keeper *k, const QpClaim *before, GError **error)
{
  g_autoptr(GError) local = NULL;
  g_auto(hwloc_bitmap_t) huge_nodes = hwloc_bitmap_alloc();
  g_autoptr(GArray) pages =
      qp_mem_where_per_node(k->qemu_pid, huge_nodes, &local);
  if (pages != NULL && pages->len == 0 && hwloc_bitmap_iszero(huge_nodes))
    g_set_error(&local, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
                "numa_maps of QEMU (pid %d) shows no guest memory on any node",
                k->qemu_pid);
  Settle settle = {pages, huge_nodes, before};
  g_autofree char *said = NULL;
  if (local == NULL &&
      qp_held_claim_adjust(k->claim, settle_to_pages, &settle, &local)) {
    const QpClaim *c = qp_held_claim_get(k->claim);
    GString *s = g_string_new(NULL);
    for (guint j = 0; j < c->mem->len; j++) {
      const QpNodeAmount *a = &g_array_index(c->mem, QpNodeAmount, j);
      g_string_append_printf(s, "%s%" G_GUINT64_FORMAT " MiB on node %d",
                             s->len ? ", " : "", a->mib, a->node);
    }
    for (guint j = 0; j < c->huge->len; j++) {
      const QpHugeClaim *h = &g_array_index(c->huge, QpHugeClaim, j);
      g_string_append_printf(s,
                             "%s%" G_GUINT64_FORMAT " x %" G_GUINT64_FORMAT
                             " KiB hugepages on node %d",
                             s->len ? ", " : "", h->pages, h->page_kib,
                             h->node);
    }
    said = g_strdup_printf("the record claims %s, where the guest memory is",
                           s->str);
    g_string_free(s, TRUE);
  } else {
    /* Unmeasured or unwritten: the claim covers source and destination. */
    said = g_strdup_printf("the record claims source and destination (%s)",
                           local->message);
  }
  qp_keeper_log(k, 1, "move stopped: %s", said);
  if (error != NULL && *error != NULL) {
    char *msg = g_strdup_printf("%s; %s", (*error)->message, said);
    g_free((*error)->message);
    (*error)->message = msg;
  }
}

/* Moves the VM to the host nodes TO; the answer to print, or NULL with
 * the one-line error (nothing changed when it was refused). */
static QpJv *
move_vm(Keeper *k, hwloc_const_bitmap_t to, guint rate_mib, GError **error)
{
  /* What the caller did to the threads, and to memory, since the last
   * look counts. */
  if (!qp_keeper_query_and_apply(k, NULL, error))
    return NULL;
  qp_keeper_look_at_unplugged_memory(k);
  /* Where its pages are now (the record's figure is up to 10 s old, and
   * none right after a move): the re-plan counts them as its own. */
  qp_keeper_measure_resident(k);
  /* Nodes the VM may not use are named first: they say more of this
   * destination than that the VM is the caller's (whose cpuset.mems may be
   * what left them out). */
  g_autoptr(QpHost) host = qp_host_load_full(k->cfg->topology, FALSE, error);
  if (host == NULL || !may_use_cpus_of(host, k->cfg->placement, to, error) ||
      !may_move(k, to, error))
    return NULL;
  /* Memory given to the VM after its start moves with it, and a virtio-mem
   * device with what it holds now: the plan claims them on the destination
   * as the command line's memory devices. */
  const QpRequest *req = k->cfg->req;
  g_autoptr(GArray) devmem = g_array_new(FALSE, FALSE, sizeof(QpMemDevice));
  g_array_append_vals(devmem, req->devmem, req->n_devmem);
  qp_mem_watch_request_devices(k->mem, req->n_gnodes > 0, devmem);
  QpRequest grown = *req;
  grown.devmem = (QpMemDevice *)(gpointer)devmem->data;
  grown.n_devmem = devmem->len;
  Replan r = {host, &grown, *k->cfg->placement, NULL};
  r.opts.hostnodes = (hwloc_bitmap_t)to;
  r.opts.mode = k->plan->mode;
  r.opts.vnuma = FALSE;
  g_auto(Moved)
      m = {claim_nodes(qp_held_claim_get(k->claim)), 0, {0, 0}, NULL, NULL};
  g_autoptr(QpClaim) before = qp_claim_copy(qp_held_claim_get(k->claim));
  if (!qp_held_claim_adjust(k->claim, replan_and_widen, &r, error)) {
    /* Refused, or the record could not be written: nothing changed. */
    g_clear_pointer(&r.plan, qp_plan_free);
    return NULL;
  }
  qp_keeper_log(k, 1, "move: claimed the destination beside the source");
  QpPlan *plan = r.plan;
  /* Memory first: moving QEMU into a cpuset cgroup sets every thread's
   * CPUs to the cgroup's, so the threads are pinned after it. */
  if (!move_memory(k, host, to, rate_mib, &m, error)) {
    qp_plan_free(plan);
    stop_move(k, before, error);
    return NULL;
  }
  /* (A test stands in for a long copy here: QEMU_PIN_TEST_MOVE_PAUSE_MS.) */
  const char *pause_ms = g_getenv("QEMU_PIN_TEST_MOVE_PAUSE_MS");
  if (pause_ms != NULL)
    g_usleep((gulong)g_ascii_strtoull(pause_ms, NULL, 10) * 1000);
  /* The caller may have pinned a thread while the pages moved (a copy at
   * --rate takes its time): its decision wins over the new plan. The move
   * stops there, the record settled where the memory is, as for a move
   * that fails half-way, and its CPUs then follow the caller's pinning. */
  if (qp_caller_pins_moved(k->pins)) {
    (void)qp_keeper_query_and_apply(k, NULL, NULL);
    g_autofree char *placed = qp_keeper_caller_placed(k);
    if (placed != NULL) {
      g_autofree char *list = qp_list_format(to);
      qp_plan_free(plan);
      g_set_error(
          error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_CALLER_PLACED,
          "move stopped: %s while the pages moved to nodes %s (qemu-pin "
          "never moves what the caller placed); the threads stay where "
          "they are",
          placed, list);
      stop_move(k, before, error);
      (void)qp_keeper_query_and_apply(k, NULL, NULL);
      return NULL;
    }
  }
  if (!take_plan(k, host, plan, error)) {
    stop_move(k, NULL, error);
    return NULL;
  }
  qp_mem_watch_rehome(k->mem);
  g_auto(hwloc_bitmap_t) plugged = qp_keeper_plugged_cores(k);
  Cut cut = {plan, hwloc_bitmap_isequal(m.from, to), plugged};
  if (!qp_held_claim_adjust(k->claim, cut_to_destination, &cut, error))
    return NULL;
  /* Where the pages are now, in the record before the answer: until then
   * it said the source, and the destination counted them twice, as memory
   * used outside any claim and as its claim not yet resident (the next
   * move of a rebalance, or a launch, in the next 10 s saw too little
   * room there). */
  qp_keeper_measure_resident(k);
  qp_keeper_log(k, 1, "move: %" G_GUINT64_FORMAT " MiB of pages moved",
                m.moved_mib);
  return answer(qp_held_claim_get(k->claim), to, &m);
}

/* ---- The control socket ------------------------------------------------- */

static gboolean
peer_may_ask(const struct ucred *cred)
{
  return cred->uid == 0 || cred->uid == geteuid();
}

/* Whether the client on FD is gone: it closed its end (killed while its
 * request waited behind another move), so nobody reads the answer. A
 * client that is there has only shut its writing down (POLLRDHUP), never
 * both directions (POLLHUP). */
static gboolean
client_gone(int fd)
{
  struct pollfd p = {fd, POLLIN, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLERR)) != 0;
}

static char *
read_request(int fd)
{
  GString *s = g_string_new(NULL);
  char buf[512];
  ssize_t n;
  while (s->len < 4096 && (n = read(fd, buf, sizeof(buf))) > 0) {
    g_string_append_len(s, buf, n);
    if (memchr(buf, '\n', (size_t)n) != NULL)
      break;
  }
  return g_string_free(s, FALSE);
}

/* The request {"to-nodes": "1", "rate-mib": 512}, its answer. */
static QpJv *
serve(Keeper *k, const char *text, GError **error)
{
  g_autoptr(QpJv) o = qp_jv_parse(text, -1, NULL);
  const char *nodes = qp_jv_get_string_or(o, "to-nodes", NULL);
  g_auto(hwloc_bitmap_t) to = NULL;
  if (nodes == NULL ||
      !qp_list_parse(nodes, "--to-nodes", QP_LIST_MAX_INDEX, &to, error)) {
    if (error != NULL && *error == NULL)
      g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_USAGE,
                  "the keeper got no move request it can read");
    return NULL;
  }
  guint rate = (guint)qp_jv_get_int_or(o, "rate-mib", 0);
  return move_vm(k, to, rate, error);
}

void
qp_keeper_control_serve(Keeper *k)
{
  int fd = accept4(k->control_fd, NULL, NULL, SOCK_CLOEXEC);
  if (fd < 0)
    return;
  struct timeval tv = {5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  struct ucred cred = {0, (uid_t)-1, (gid_t)-1};
  socklen_t len = sizeof(cred);
  g_autoptr(GError) error = NULL;
  g_autoptr(QpJv) reply = NULL;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 ||
      !peer_may_ask(&cred))
    g_set_error(&error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
                "move refused: only root or the VM's own user may move it");
  else {
    g_autofree char *text = read_request(fd);
    /* Requests wait one behind the other (a move is served whole): one
     * whose client went away meanwhile is nobody's any more. */
    if (client_gone(fd)) {
      g_strchomp(text);
      qp_keeper_log(k, 1,
                    "move request %s dropped: its client (pid %d) is gone, "
                    "nothing changed",
                    *text ? text : "(empty)", (int)cred.pid);
      close(fd);
      return;
    }
    reply = serve(k, text, &error);
  }
  if (reply == NULL) {
    reply = qp_jv_object();
    qp_jv_set(reply, "error", qp_jv_string(error ? error->message : "failed"));
    if (g_error_matches(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_CALLER_PLACED))
      qp_jv_set(reply, "code", qp_jv_string(QP_MOVE_REFUSED_CALLER_PLACED));
    else if (g_error_matches(error, QP_LAUNCH_ERROR,
                             QP_LAUNCH_ERROR_MOVE_REFUSED))
      qp_jv_set(reply, "code", qp_jv_string(QP_MOVE_REFUSED));
    qp_keeper_log(k, 1, "%s", error ? error->message : "move failed");
  }
  g_autofree char *out = qp_jv_write(reply, FALSE);
  g_autofree char *line = g_strconcat(out, "\n", NULL);
  (void)!write(fd, line, strlen(line));
  close(fd);
}
