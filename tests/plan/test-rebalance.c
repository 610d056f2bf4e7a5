/* The rebalance planner (topology/plan/rebalance.h) on hand-built and
 * recorded hosts: the VMs are placed by the real planner, their claims made
 * as a launch makes them, and the moves checked against what each node
 * holds afterwards. */
#include "tests/plan/plan-hosts.h"

#include <stdio.h>
#include <string.h>

#include "topology/plan/rebalance-gate.h"
#include "topology/plan/rebalance.h"

/* Places a VM of VCPUS and MIB with MODE inside host nodes NODES (NULL:
 * anywhere) and adds its claim as ID. */
static void
place(const QpHost *h, QpClaims *claims, const char *id, QpMode mode,
      guint vcpus, guint64 mib, const char *nodes)
{
  g_autoptr(QpRequest) r = request(vcpus, mib);
  g_autoptr(Opts) o = opts_new(mode, NULL);
  if (nodes != NULL)
    o->o.hostnodes = list(nodes);
  g_autoptr(QpPlan) p = plan_ok(h, claims, r, o);
  g_ptr_array_add(claims->claims, qp_claim_from_plan(p, id, id));
}

/* Places "vnuma", mode numa: two guest nodes of 2 vCPUs and 4 GiB each,
 * inside host nodes NODES. */
static void
place_vnuma(const QpHost *h, QpClaims *claims, const char *nodes)
{
  g_autoptr(QpRequest) vn = request(4, 8192);
  request_vnuma(vn, 2, 2, 4096);
  g_autoptr(Opts) no = opts_new(QP_MODE_NUMA, NULL);
  no->o.hostnodes = list(nodes);
  g_autoptr(QpPlan) p = plan_ok(h, claims, vn, no);
  g_ptr_array_add(claims->claims, qp_claim_from_plan(p, "vnuma", "vnuma"));
}

/* Every claim of CLAIMS is movable, never moved before. */
static QpRebalanceVm *
all_movable(const QpClaims *claims)
{
  QpRebalanceVm *vms = g_new0(QpRebalanceVm, MAX(claims->claims->len, 1));
  for (guint x = 0; x < claims->claims->len; x++)
    vms[x].id = ((const QpClaim *)claims->claims->pdata[x])->id;
  return vms;
}

static QpRebalanceVm *
vm_of(QpRebalanceVm *vms, guint n, const char *id)
{
  for (guint x = 0; x < n; x++)
    if (strcmp(vms[x].id, id) == 0)
      return &vms[x];
  g_assert_not_reached();
}

static const QpClaim *
claim_of(const QpClaims *claims, const char *id)
{
  for (guint x = 0; x < claims->claims->len; x++)
    if (strcmp(((const QpClaim *)claims->claims->pdata[x])->id, id) == 0)
      return claims->claims->pdata[x];
  g_assert_not_reached();
}

/* Nodes holding C's memory, as a list. */
static char *
mem_nodes(const QpClaim *c)
{
  g_auto(hwloc_bitmap_t) set = hwloc_bitmap_alloc();
  for (guint x = 0; x < c->mem->len; x++)
    if (g_array_index(c->mem, QpNodeAmount, x).mib > 0)
      hwloc_bitmap_set(set,
                       (unsigned)g_array_index(c->mem, QpNodeAmount, x).node);
  return qp_list_format(set);
}

/* C's memory on host node NODE. */
static guint64
mib_on(const QpClaim *c, int node)
{
  for (guint x = 0; x < c->mem->len; x++)
    if (g_array_index(c->mem, QpNodeAmount, x).node == node)
      return g_array_index(c->mem, QpNodeAmount, x).mib;
  return 0;
}

/* No node holds more claims than its memory, no CPU is dedicated twice. */
static void
assert_consistent(const QpHost *h, const QpClaims *claims)
{
  for (guint i = 0; i < h->n_nodes; i++) {
    QpNodeMemory m;
    qp_node_memory(h, claims, NULL, i, &m);
    g_assert_cmpuint(m.claimed_mib, <=, m.plain_mib);
  }
  g_auto(hwloc_bitmap_t) seen = hwloc_bitmap_alloc();
  for (guint x = 0; x < claims->claims->len; x++) {
    const QpClaim *c = claims->claims->pdata[x];
    g_assert_false(hwloc_bitmap_intersects(seen, c->dedicated));
    hwloc_bitmap_or(seen, seen, c->dedicated);
  }
}

static QpRebalance *
rebalance(const QpHost *h, const QpClaims *claims, const QpRebalanceVm *vms,
          const QpRequest *req, const Opts *o)
{
  QpRebalanceOptions ro = {.now = 100000,
                           .cooldown_s = 600,
                           .req = req,
                           .opts = o != NULL ? &o->o : NULL};
  g_autoptr(GError) error = NULL;
  QpRebalance *r =
      qp_rebalance_compute(h, claims, vms, claims->claims->len, &ro, &error);
  g_assert_no_error(error);
  g_assert_nonnull(r);
  assert_consistent(h, r->after);
  return r;
}

/* The lab scenario, pure: four VMs of half a node, one per node,
 * one of 30% beside the first; a VM of 65% fits on no node. */
static QpClaims *
fragmented(const QpHost *h)
{
  QpClaims *claims = qp_claims_new();
  for (int n = 0; n < 4; n++) {
    g_autofree char *id = g_strdup_printf("half%d", n);
    g_autofree char *node = g_strdup_printf("%d", n);
    place(h, claims, id, QP_MODE_BALANCED, 2, 8192, node);
  }
  place(h, claims, "small", QP_MODE_BALANCED, 2, 4915, "0");
  return claims;
}

static void
test_lab_scenario(void)
{
  g_autoptr(TestHost) h = epyc(NULL);
  g_autoptr(QpClaims) claims = fragmented(h);
  g_autoptr(QpRequest) big = request(2, 10650);
  g_autoptr(Opts) o = opts_new(QP_MODE_BALANCED, NULL);
  /* Without moves balanced spans it over two half-empty nodes. */
  g_autoptr(QpPlan) before = plan_ok(h, claims, big, o);
  g_assert_cmpint(hwloc_bitmap_weight(before->host_nodes), ==, 2);

  g_autofree QpRebalanceVm *vms = all_movable(claims);
  g_autoptr(QpRebalance) r = rebalance(h, claims, vms, big, o);
  /* One move of a half-node VM onto another half-empty node: the fewest MiB
   * (the 30% VM alone does not make room). */
  g_assert_cmpuint(r->moves->len, ==, 1);
  const QpMove *m = r->moves->pdata[0];
  g_assert_true(g_str_has_prefix(m->vm, "half"));
  g_assert_cmpuint(m->mib, ==, 8192);
  g_assert_cmpuint(r->mib, ==, 8192);
  g_assert_cmpint(hwloc_bitmap_weight(m->from), ==, 1);
  g_assert_cmpint(hwloc_bitmap_weight(m->to), ==, 1);
  g_assert_false(hwloc_bitmap_isequal(m->from, m->to));
  g_assert_cmpuint(r->req_nodes_after, ==, 1);
  g_assert_nonnull(r->plan);
  g_assert_cmpint(hwloc_bitmap_weight(r->plan->host_nodes), ==, 1);
  /* The big VM goes where the moved one was. */
  g_assert_true(hwloc_bitmap_isequal(r->plan->host_nodes, m->from));
  /* Every VM is still on one node; the claims as given are unchanged. */
  for (guint x = 0; x < r->after->claims->len; x++) {
    g_autofree char *n = mem_nodes(r->after->claims->pdata[x]);
    g_assert_null(strchr(n, ','));
    g_assert_null(strchr(n, '-'));
  }
  g_autofree char *orig = mem_nodes(claim_of(claims, m->vm));
  g_autofree char *from = qp_list_format(m->from);
  g_assert_cmpstr(orig, ==, from);
  /* Planning the big VM on the claims after the moves puts it on one node. */
  g_autoptr(QpPlan) after = plan_ok(h, r->after, big, o);
  g_assert_cmpint(hwloc_bitmap_weight(after->host_nodes), ==, 1);
}

/* The same on a measured host (what the kernel can give, each VM's pages
 * resident): a VM's pages count once, and the node it leaves gets them
 * back, so the one move still makes room. */
static void
test_lab_scenario_measured(void)
{
  g_autoptr(TestHost) h = epyc(NULL);
  g_autoptr(QpClaims) claims = fragmented(h);
  for (guint x = 0; x < claims->claims->len; x++) {
    QpClaim *c = claims->claims->pdata[x];
    g_array_append_vals(c->resident, c->mem->data, c->mem->len);
    for (guint y = 0; y < c->mem->len; y++)
      c->qemu_rss_mib += g_array_index(c->mem, QpNodeAmount, y).mib;
  }
  for (guint i = 0; i < h->n_nodes; i++) {
    QpNode *n = &h->nodes[i];
    guint64 used = 0;
    for (guint x = 0; x < claims->claims->len; x++)
      used += qp_claim_resident_mib(claims->claims->pdata[x], n->id);
    n->measured = TRUE;
    n->used_mib = used;
    n->can_give_mib = n->total_mib - used;
  }
  g_autoptr(QpRequest) big = request(2, 10650);
  g_autoptr(Opts) o = opts_new(QP_MODE_BALANCED, NULL);
  g_autoptr(QpPlan) before = plan_ok(h, claims, big, o);
  g_assert_cmpint(hwloc_bitmap_weight(before->host_nodes), ==, 2);
  g_autofree QpRebalanceVm *vms = all_movable(claims);
  g_autoptr(QpRebalance) r = rebalance(h, claims, vms, big, o);
  g_assert_cmpuint(r->moves->len, ==, 1);
  g_assert_cmpuint(r->req_nodes_after, ==, 1);
  g_assert_nonnull(r->plan);
  g_assert_cmpint(hwloc_bitmap_weight(r->plan->host_nodes), ==, 1);
  g_assert_true(hwloc_bitmap_isequal(
      r->plan->host_nodes, ((const QpMove *)r->moves->pdata[0])->from));
}

/* A request that fits one node as it is needs no move. */
static void
test_fits_already(void)
{
  g_autoptr(TestHost) h = epyc(NULL);
  g_autoptr(QpClaims) claims = fragmented(h);
  g_autoptr(QpRequest) small = request(2, 4096);
  g_autofree QpRebalanceVm *vms = all_movable(claims);
  g_autoptr(QpRebalance) r = rebalance(h, claims, vms, small, NULL);
  g_assert_cmpuint(r->moves->len, ==, 0);
  g_assert_cmpuint(r->req_nodes_before, ==, 1);
  g_assert_cmpuint(r->req_nodes_after, ==, 1);
}

/* What the caller placed, VFIO, a recent move and a VM the caller did not
 * name stay where they are: with the half-node VMs kept, no move makes
 * room, and none is made. */
static void
test_never_moved(void)
{
  g_autoptr(TestHost) h = epyc(NULL);
  g_autoptr(QpClaims) claims = fragmented(h);
  g_autoptr(QpRequest) big = request(2, 10650);
  g_autofree QpRebalanceVm *vms = all_movable(claims);
  guint n = claims->claims->len;
  vm_of(vms, n, "half0")->caller_set = TRUE;
  vm_of(vms, n, "half1")->vfio = TRUE;
  vm_of(vms, n, "half2")->moved_at = 100000 - 599; /* cooldown 600 s */
  g_ptr_array_add(((QpClaim *)claim_of(claims, "half3"))->devices,
                  g_strdup("vfio-pci 0000:3b:00.0: host node 3"));
  g_autoptr(QpRebalance) r = rebalance(h, claims, vms, big, NULL);
  g_assert_cmpuint(r->moves->len, ==, 0);
  /* Balanced spans it over two half-empty nodes, as without a rebalance. */
  g_assert_cmpuint(r->req_nodes_before, ==, 2);
  g_assert_cmpuint(r->req_nodes_after, ==, 2);
  g_assert_nonnull(r->plan);
  g_assert_true(has_text(r->kept, "half0: its placement is the caller's own"));
  g_assert_true(has_text(r->kept, "half1: it has VFIO devices"));
  g_assert_true(has_text(r->kept, "half2: it moved less than the cooldown"));
  g_assert_true(has_text(r->kept, "half3: it has VFIO devices"));

  /* Once the cooldown is over, half2 may move, and it is the one moved. */
  vm_of(vms, n, "half2")->moved_at = 100000 - 600;
  g_autoptr(QpRebalance) r2 = rebalance(h, claims, vms, big, NULL);
  g_assert_cmpuint(r2->moves->len, ==, 1);
  g_assert_cmpstr(((QpMove *)r2->moves->pdata[0])->vm, ==, "half2");

  /* A claim with no QpRebalanceVm is never moved either. */
  QpRebalanceOptions ro = {.now = 100000, .cooldown_s = 600, .req = big};
  g_autoptr(GError) error = NULL;
  g_autoptr(QpRebalance) r4 =
      qp_rebalance_compute(h, claims, NULL, 0, &ro, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(r4->moves->len, ==, 0);
  g_assert_true(has_text(r4->kept, "half2: not among the VMs"));
}

/* A VM stays inside the host nodes it was started with: each half-node VM
 * was started on its own node but half3 on nodes 2-3, so half3 is the one
 * that moves, to node 2. */
static void
test_stays_inside_nodes(void)
{
  g_autoptr(TestHost) h = epyc(NULL);
  g_autoptr(QpClaims) claims = fragmented(h);
  g_autoptr(QpRequest) big = request(2, 10650);
  g_autofree QpRebalanceVm *vms = all_movable(claims);
  guint n = claims->claims->len;
  for (int v = 0; v < 4; v++) {
    g_autofree char *id = g_strdup_printf("half%d", v);
    g_autofree char *node = g_strdup_printf("%d", v);
    vm_of(vms, n, id)->nodes = list(v < 3 ? node : "2-3");
  }
  g_autoptr(QpRebalance) r = rebalance(h, claims, vms, big, NULL);
  g_assert_cmpuint(r->moves->len, ==, 1);
  const QpMove *m = r->moves->pdata[0];
  g_assert_cmpstr(m->vm, ==, "half3");
  assert_set(m->to, "2");
  g_assert_cmpuint(r->req_nodes_after, ==, 1);
  assert_set(r->plan->host_nodes, "3");
  /* With half3 on node 3 alone as well, nothing may move. */
  hwloc_bitmap_free(vm_of(vms, n, "half3")->nodes);
  vm_of(vms, n, "half3")->nodes = list("3");
  g_autoptr(QpRebalance) r2 = rebalance(h, claims, vms, big, NULL);
  g_assert_cmpuint(r2->moves->len, ==, 0);
  g_assert_cmpuint(r2->req_nodes_after, ==, 2);
  for (guint v = 0; v < n; v++)
    hwloc_bitmap_free(vms[v].nodes);
}

/* Claims where c (8 GiB) spans nodes 0 and 1: a and b of MIB each took
 * most of those nodes first, and a has left since. */
static QpClaims *
spanning_c(const QpHost *h, guint64 mib)
{
  QpClaims *claims = qp_claims_new();
  place(h, claims, "a", QP_MODE_BALANCED, 2, mib, "0");
  place(h, claims, "b", QP_MODE_BALANCED, 2, mib, "1");
  place(h, claims, "c", QP_MODE_BALANCED, 2, 8192, "0-1");
  g_autofree char *span = mem_nodes(claim_of(claims, "c"));
  g_assert_cmpstr(span, ==, "0-1");
  g_ptr_array_remove_index(claims->claims, 0);
  return claims;
}

/* Goal (a): a VM that had to span comes back to one node once room is
 * there, moving only what is not on that node yet. */
static void
test_spanning_comes_back(void)
{
  g_autoptr(TestHost) h = epyc(NULL);
  /* 8 GiB left on nodes 0 and 1 as 4 + 4: c spans them; a leaves: c fits
   * on node 0, where half of it is already. */
  g_autoptr(QpClaims) claims = spanning_c(h, 12288);
  g_autofree QpRebalanceVm *vms = all_movable(claims);
  g_autoptr(QpRebalance) r = rebalance(h, claims, vms, NULL, NULL);
  g_assert_cmpuint(r->spanning_before, ==, 1);
  g_assert_cmpuint(r->spanning_after, ==, 0);
  g_assert_cmpuint(r->moves->len, ==, 1);
  const QpMove *m = r->moves->pdata[0];
  g_assert_cmpstr(m->vm, ==, "c");
  g_assert_true(m->consolidate);
  assert_set(m->from, "0-1");
  g_assert_cmpint(hwloc_bitmap_weight(m->to), ==, 1);
  g_assert_cmpuint(m->mib, ==, 4096);
  const QpClaim *c = claim_of(r->after, "c");
  g_autofree char *to = mem_nodes(c);
  g_autofree char *mto = qp_list_format(m->to);
  g_assert_cmpstr(to, ==, mto);
  /* Its vCPUs went with it: load and CPU set on that node alone. */
  g_assert_cmpuint(c->load->len, ==, 1);
  g_assert_cmpuint(g_array_index(c->load, QpNodeLoad, 0).vcpus, ==, 2);
  g_assert_cmpuint(c->cpu_load->len, ==, 1);
  int ni = qp_host_node_index(h, g_array_index(c->load, QpNodeLoad, 0).node);
  g_assert_true(hwloc_bitmap_isincluded(
      g_array_index(c->cpu_load, QpCpuLoad, 0).cpus, h->nodes[ni].cpus));
  /* Nothing else to do the second time. */
  g_autofree QpRebalanceVm *vms2 = all_movable(r->after);
  g_autoptr(QpRebalance) again = rebalance(h, r->after, vms2, NULL, NULL);
  g_assert_cmpuint(again->moves->len, ==, 0);
}

/* c of spanning_c() (8 GiB, 4 GiB on each of nodes 0 and 1; node 0 has
 * 12 GiB to claim, nodes 2 and 3 all 16) was started with its own host
 * reserve OWN ("node:MiB,...", the record's "started-reserve-mib"); the
 * rebalance plans with OURS on every node. Returns the node c is moved to
 * ("" for no move), after checking it against c's keeper: the keeper
 * re-plans c with its own reserve on each destination (as
 * launcher/keeper/move.c does: the other claims, hostnodes the
 * destination), and the rebalance moves c only where the keeper accepts,
 * and somewhere whenever the keeper would accept a node and OURS is 0. */
static char *
move_of_c(const char *own, guint64 ours)
{
  g_autoptr(TestHost) h = epyc(NULL);
  g_autoptr(QpClaims) claims = spanning_c(h, 12288);
  guint n = claims->claims->len;
  g_autofree QpRebalanceVm *vms = all_movable(claims);
  g_autoptr(GArray) reserve = g_array_new(FALSE, FALSE, sizeof(QpNodeAmount));
  g_auto(GStrv) items = g_strsplit(own, ",", -1);
  for (guint x = 0; items[x] != NULL; x++) {
    QpNodeAmount a = {0, 0};
    g_assert_cmpint(sscanf(items[x], "%d:%" G_GUINT64_FORMAT, &a.node, &a.mib),
                    ==, 2);
    g_array_append_val(reserve, a);
  }
  vm_of(vms, n, "c")->reserve = reserve;
  g_autoptr(Opts) o = opts_new(QP_MODE_BALANCED, NULL);
  o->o.reserve_mib = ours;
  g_autoptr(QpRebalance) r = rebalance(h, claims, vms, NULL, o);

  /* Where c's keeper accepts a move. */
  g_autoptr(QpClaims) others = qp_claims_new();
  for (guint x = 0; x < n; x++)
    if (claims->claims->pdata[x] != claim_of(claims, "c"))
      g_ptr_array_add(others->claims, qp_claim_copy(claims->claims->pdata[x]));
  g_autoptr(QpRequest) req = request(2, 8192);
  g_auto(hwloc_bitmap_t) accepts = hwloc_bitmap_alloc();
  for (guint i = 0; i < h->n_nodes; i++) {
    g_autoptr(Opts) k = opts_new(QP_MODE_BALANCED, NULL);
    k->o.node_reserve = g_array_copy(reserve);
    k->o.hostnodes = hwloc_bitmap_alloc();
    hwloc_bitmap_set(k->o.hostnodes, (unsigned)h->nodes[i].id);
    g_autoptr(GError) error = NULL;
    g_autoptr(QpPlan) p = qp_plan_compute(h, others, req, &k->o, &error);
    if (p != NULL)
      hwloc_bitmap_set(accepts, (unsigned)h->nodes[i].id);
  }
  g_assert_cmpuint(r->moves->len, <=, 1);
  if (r->moves->len == 0) {
    g_assert_true(ours > 0 || hwloc_bitmap_iszero(accepts));
    return g_strdup("");
  }
  const QpMove *m = r->moves->pdata[0];
  g_assert_cmpstr(m->vm, ==, "c");
  g_assert_true(hwloc_bitmap_isincluded(m->to, accepts));
  return qp_list_format(m->to);
}

/* A VM started with a host reserve of its own is moved only where it fits
 * under that reserve too, as its keeper checks the move (robustness.md,
 * finding 55): under the rebalance's reserve alone c would go to node 0,
 * where half of it is. */
static void
test_own_reserve(void)
{
  g_autofree char *none = move_of_c("", 0);
  g_assert_cmpstr(none, ==, "0");
  /* Node 0 keeps 8192 for the host: exactly room for c's other half. */
  g_autofree char *exact = move_of_c("0:8192", 0);
  g_assert_cmpstr(exact, ==, "0");
  /* One MiB more: not there, but whole to node 2, which has room. */
  g_autofree char *more = move_of_c("0:8193", 0);
  g_assert_cmpstr(more, ==, "2");
  /* Room on no node under its reserve: no move (its keeper would refuse
   * each). */
  g_autofree char *nowhere = move_of_c("0:10000,1:10000,2:10000,3:10000", 0);
  g_assert_cmpstr(nowhere, ==, "");
  /* The larger of the two reserves counts on each node: the rebalance's
   * 4000 on node 0 with the VM's 3000 leaves room there; the VM's 9000
   * with the rebalance's 4000 does not. */
  g_autofree char *ours = move_of_c("0:3000", 4000);
  g_assert_cmpstr(ours, ==, "0");
  g_autofree char *its = move_of_c("0:9000", 4000);
  g_assert_cmpstr(its, ==, "2");
}

/* One-to-one keeps its mode: the move takes free cores at the destination,
 * never a core another VM has. */
static void
test_one_to_one_takes_free_cores(void)
{
  g_autoptr(TestHost) h = epyc(NULL);
  g_autoptr(QpClaims) claims = qp_claims_new();
  place(h, claims, "pinned", QP_MODE_ONE_TO_ONE, 2, 8192, "0");
  place(h, claims, "other", QP_MODE_ONE_TO_ONE, 2, 2048, "1");
  for (int n = 1; n < 4; n++) {
    g_autofree char *id = g_strdup_printf("fill%d", n);
    g_autofree char *node = g_strdup_printf("%d", n);
    place(h, claims, id, QP_MODE_BALANCED, 2, 8192, node);
  }
  g_autoptr(QpRequest) big = request(2, 12288);
  g_autofree QpRebalanceVm *vms = all_movable(claims);
  guint n = claims->claims->len;
  for (int f = 1; f < 4; f++) {
    g_autofree char *id = g_strdup_printf("fill%d", f);
    vm_of(vms, n, id)->caller_set = TRUE;
  }
  vm_of(vms, n, "other")->caller_set = TRUE;
  g_autoptr(QpRebalance) r = rebalance(h, claims, vms, big, NULL);
  g_assert_cmpuint(r->moves->len, ==, 1);
  const QpMove *m = r->moves->pdata[0];
  g_assert_cmpstr(m->vm, ==, "pinned");
  g_assert_cmpint(m->mode, ==, QP_MODE_ONE_TO_ONE);
  assert_set(m->from, "0");
  const QpClaim *c = claim_of(r->after, "pinned");
  const QpClaim *before = claim_of(claims, "pinned");
  g_assert_cmpint(hwloc_bitmap_weight(c->dedicated), ==,
                  hwloc_bitmap_weight(before->dedicated));
  int to = hwloc_bitmap_first(m->to);
  g_assert_true(hwloc_bitmap_isincluded(
      c->dedicated, h->nodes[qp_host_node_index(h, to)].cpus));
  /* assert_consistent (in rebalance()) checked no core is taken twice. */
  g_assert_cmpuint(r->req_nodes_after, ==, 1);
}

/* Mode numa keeps one host node per guest node: the piece in the way moves
 * to a node of its own, the other stays. */
static void
test_numa_pieces(void)
{
  g_autoptr(TestHost) h = epyc(NULL);
  g_autoptr(QpClaims) claims = qp_claims_new();
  place_vnuma(h, claims, "0-1");
  for (int n = 1; n < 4; n++) {
    g_autofree char *id = g_strdup_printf("fill%d", n);
    g_autofree char *node = g_strdup_printf("%d", n);
    place(h, claims, id, QP_MODE_BALANCED, 2, n == 1 ? 4096 : 8192, node);
  }
  place(h, claims, "fill0", QP_MODE_BALANCED, 2, 4096, "0");
  g_autofree QpRebalanceVm *vms = all_movable(claims);
  guint n = claims->claims->len;
  for (int f = 0; f < 4; f++) {
    g_autofree char *id = g_strdup_printf("fill%d", f);
    vm_of(vms, n, id)->caller_set = TRUE;
  }
  /* Nodes 0 and 1 hold 8 GiB each (4 of vnuma's, 4 of a filler): a VM of
   * 12 GiB needs one of vnuma's pieces gone. */
  g_autoptr(QpRequest) big = request(2, 12288);
  g_autoptr(QpRebalance) r = rebalance(h, claims, vms, big, NULL);
  g_assert_cmpuint(r->moves->len, ==, 1);
  const QpMove *m = r->moves->pdata[0];
  g_assert_cmpstr(m->vm, ==, "vnuma");
  g_assert_cmpuint(m->pairs->len, ==, 1);
  g_assert_cmpuint(m->mib, ==, 4096);
  assert_set(m->from, "0-1");
  g_assert_cmpint(hwloc_bitmap_weight(m->to), ==, 2);
  const QpNodePair *np = &g_array_index(m->pairs, QpNodePair, 0);
  g_assert_true(np->from == 0 || np->from == 1);
  g_assert_true(np->to >= 2);
  g_assert_cmpuint(r->req_nodes_after, ==, 1);
}

/* On a recorded host (2 sockets x 4 nodes): every node left with 12 GiB,
 * 4 of them a small VM's; a VM of 14 GiB would span two nodes. Moving one
 * small VM (4 GiB) is the cheapest way to one node. */
static void
test_recorded_2s_8node(void)
{
  g_autoptr(QpHost) h = recorded("2s-8node.xml");
  g_assert_cmpuint(h->n_nodes, ==, 8);
  g_autoptr(QpClaims) claims = qp_claims_new();
  for (guint i = 0; i < h->n_nodes; i++) {
    g_autofree char *id = g_strdup_printf("vm%u", i);
    g_autofree char *small = g_strdup_printf("small%u", i);
    g_autofree char *node = g_strdup_printf("%d", h->nodes[i].id);
    QpNodeMemory m;
    qp_node_memory(h, NULL, NULL, i, &m);
    g_assert_cmpuint(m.uncommitted_mib, >, 16384);
    place(h, claims, id, QP_MODE_BALANCED, 2, m.uncommitted_mib - 16384, node);
    place(h, claims, small, QP_MODE_BALANCED, 1, 4096, node);
  }
  g_autoptr(QpRequest) big = request(4, 14336);
  g_autoptr(Opts) o = opts_new(QP_MODE_BALANCED, NULL);
  g_autoptr(QpPlan) before = plan_ok(h, claims, big, o);
  g_assert_cmpint(hwloc_bitmap_weight(before->host_nodes), ==, 2);
  g_autofree QpRebalanceVm *vms = all_movable(claims);
  g_autoptr(QpRebalance) r = rebalance(h, claims, vms, big, o);
  g_assert_cmpuint(r->req_nodes_before, ==, 2);
  g_assert_cmpuint(r->req_nodes_after, ==, 1);
  g_assert_cmpuint(r->moves->len, ==, 1);
  g_assert_cmpuint(r->mib, ==, 4096);
  const QpMove *m = r->moves->pdata[0];
  g_assert_true(g_str_has_prefix(m->vm, "small"));
  g_assert_true(hwloc_bitmap_isequal(r->plan->host_nodes, m->from));
}

/* The periodic rebalance's hysteresis (rebalance-gate.h): the moves are
 * made only when they bring at least --rebalance-min-mib onto a spanning
 * VM's node; moves that only make room for a request never pass it. */
static void
test_min_mib(void)
{
  g_autoptr(TestHost) h = epyc(NULL);
  g_autoptr(QpClaims) claims = qp_claims_new();
  place(h, claims, "a", QP_MODE_BALANCED, 2, 12288, "0");
  place(h, claims, "b", QP_MODE_BALANCED, 2, 12288, "1");
  place(h, claims, "c", QP_MODE_BALANCED, 2, 8192, "0-1");
  g_ptr_array_remove_index(claims->claims, 0);
  g_autofree QpRebalanceVm *vms = all_movable(claims);
  g_autoptr(QpRebalance) r = rebalance(h, claims, vms, NULL, NULL);
  g_assert_cmpuint(r->moves->len, ==, 1);
  /* c's half off its new node: 4 GiB come onto it. */
  g_assert_cmpuint(qp_rebalance_gain(r), ==, 4096);
  g_assert_true(qp_rebalance_worth(r, 0));
  g_assert_true(qp_rebalance_worth(r, 4096));
  g_assert_false(qp_rebalance_worth(r, 4097));

  /* Nothing spans: nothing is worth it, whatever the threshold. */
  g_autofree QpRebalanceVm *vms2 = all_movable(r->after);
  g_autoptr(QpRebalance) again = rebalance(h, r->after, vms2, NULL, NULL);
  g_assert_cmpuint(qp_rebalance_gain(again), ==, 0);
  g_assert_false(qp_rebalance_worth(again, 0));

  /* The lab scenario's one move makes room for a request: no gain. */
  g_autoptr(QpClaims) frag = fragmented(h);
  g_autoptr(QpRequest) big = request(2, 10650);
  g_autoptr(Opts) o = opts_new(QP_MODE_BALANCED, NULL);
  g_autofree QpRebalanceVm *vms3 = all_movable(frag);
  g_autoptr(QpRebalance) room = rebalance(h, frag, vms3, big, o);
  g_assert_cmpuint(room->moves->len, ==, 1);
  g_assert_cmpuint(qp_rebalance_gain(room), ==, 0);
  g_assert_false(qp_rebalance_worth(room, 0));
}

/* The move of MOVES at X: VM ID from node FROM to node TO, MIB moved. */
static void
assert_move(const QpRebalance *r, guint x, const char *id, const char *from,
            const char *to, guint64 mib)
{
  g_assert_cmpuint(x, <, r->moves->len);
  const QpMove *m = r->moves->pdata[x];
  g_assert_cmpstr(m->vm, ==, id);
  assert_set(m->from, from);
  assert_set(m->to, to);
  g_assert_cmpuint(m->mib, ==, mib);
  g_assert_false(m->consolidate);
}

/* Claims on node index I beyond its plain memory less the reserve. */
static guint64
excess_on(const QpHost *h, const QpClaims *claims, const Opts *o, guint i)
{
  QpNodeMemory m;
  qp_node_memory(h, claims, &o->o, i, &m);
  return qp_node_memory_excess(&m);
}

/* Goal (c) (robustness.md, finding 71): node 3 shrinks under its claims
 * (memory taken offline). VMs a (8 GiB), b (5 GiB) and c (2 GiB) on it;
 * nodes 0 and 1 have 4 GiB of room, node 2 is empty. A numa VM's piece
 * moves alone. */
static QpClaims *
shrunk_host_claims(QpHost *h, guint64 node3_mib)
{
  QpClaims *claims = qp_claims_new();
  place(h, claims, "a", QP_MODE_BALANCED, 2, 8192, "3");
  place(h, claims, "b", QP_MODE_BALANCED, 2, 5120, "3");
  place(h, claims, "c", QP_MODE_BALANCED, 2, 2048, "3");
  place(h, claims, "d", QP_MODE_BALANCED, 2, 12288, "0");
  place(h, claims, "e", QP_MODE_BALANCED, 2, 12288, "1");
  h->nodes[3].total_mib = h->nodes[3].free_mib = node3_mib;
  return claims;
}

static void
test_relieve_overcommitted(void)
{
  g_autoptr(Opts) o = opts_new(QP_MODE_BALANCED, NULL);
  o->o.reserve_mib = 0;

  /* 5 GiB too many: b alone is enough and moves the fewest MiB (a would
   * do too); it goes to node 2, the one node with room for it. */
  g_autoptr(TestHost) h = epyc(NULL);
  g_autoptr(QpClaims) claims = shrunk_host_claims(h, 10240);
  g_assert_cmpuint(excess_on(h, claims, o, 3), ==, 5120);
  g_autofree QpRebalanceVm *vms = all_movable(claims);
  g_autoptr(QpRebalance) r = rebalance(h, claims, vms, NULL, o);
  assert_move(r, 0, "b", "3", "2", 5120);
  g_assert_cmpuint(r->moves->len, ==, 1);
  g_assert_cmpint(((const QpMove *)r->moves->pdata[0])->relieves, ==, 3);
  g_assert_cmpuint(excess_on(h, r->after, o, 3), ==, 0);
  /* Always worth making, whatever the hysteresis. */
  g_assert_true(qp_rebalance_worth(r, G_MAXUINT64));

  /* b placed by its caller: a goes instead (the one other VM enough). */
  vm_of(vms, claims->claims->len, "b")->caller_set = TRUE;
  g_autoptr(QpRebalance) kept = rebalance(h, claims, vms, NULL, o);
  assert_move(kept, 0, "a", "3", "2", 8192);
  g_assert_cmpuint(kept->moves->len, ==, 1);
  g_assert_cmpuint(excess_on(h, kept->after, o, 3), ==, 0);

  /* 11 GiB too many: no VM is enough alone; a takes the most off, then b
   * is enough; both to node 2, c stays. */
  g_autoptr(TestHost) h2 = epyc(NULL);
  g_autoptr(QpClaims) claims2 = shrunk_host_claims(h2, 4096);
  g_assert_cmpuint(excess_on(h2, claims2, o, 3), ==, 11264);
  g_autofree QpRebalanceVm *vms2 = all_movable(claims2);
  g_autoptr(QpRebalance) r2 = rebalance(h2, claims2, vms2, NULL, o);
  g_assert_cmpuint(r2->moves->len, ==, 2);
  assert_move(r2, 0, "a", "3", "2", 8192);
  assert_move(r2, 1, "b", "3", "2", 5120);
  g_assert_cmpuint(excess_on(h2, r2->after, o, 3), ==, 0);
  g_assert_cmpuint(mib_on(claim_of(r2->after, "c"), 3), ==, 2048);

  /* A numa VM with guest nodes on host nodes 2 and 3: its piece on node 3
   * goes to a node of its own with room (0 and 1 have 4 GiB each, node 2
   * is its other piece's), the other stays. */
  g_autoptr(TestHost) h4 = epyc(NULL);
  g_autoptr(QpClaims) claims4 = qp_claims_new();
  place_vnuma(h4, claims4, "2-3");
  place(h4, claims4, "f3", QP_MODE_BALANCED, 2, 8192, "3");
  place(h4, claims4, "d", QP_MODE_BALANCED, 2, 12288, "0");
  place(h4, claims4, "e", QP_MODE_BALANCED, 2, 14336, "1");
  h4->nodes[3].total_mib = h4->nodes[3].free_mib = 10240;
  g_assert_cmpuint(excess_on(h4, claims4, o, 3), ==, 2048);
  g_autofree QpRebalanceVm *vms4 = all_movable(claims4);
  vm_of(vms4, claims4->claims->len, "f3")->caller_set = TRUE;
  g_autoptr(QpRebalance) r4 = rebalance(h4, claims4, vms4, NULL, o);
  g_assert_cmpuint(r4->moves->len, ==, 1);
  const QpMove *m4 = r4->moves->pdata[0];
  g_assert_cmpstr(m4->vm, ==, "vnuma");
  g_assert_cmpint(m4->relieves, ==, 3);
  g_assert_cmpuint(m4->mib, ==, 4096);
  g_assert_cmpuint(m4->pairs->len, ==, 1);
  g_assert_cmpint(g_array_index(m4->pairs, QpNodePair, 0).from, ==, 3);
  g_assert_cmpint(g_array_index(m4->pairs, QpNodePair, 0).to, ==, 0);
  assert_set(m4->to, "0,2");
  g_assert_cmpuint(excess_on(h4, r4->after, o, 3), ==, 0);

  /* The same host with node 3 whole: nothing to relieve, nothing spans. */
  g_autoptr(TestHost) h3 = epyc(NULL);
  g_autoptr(QpClaims) claims3 = shrunk_host_claims(h3, 16384);
  g_autofree QpRebalanceVm *vms3 = all_movable(claims3);
  g_autoptr(QpRebalance) r3 = rebalance(h3, claims3, vms3, NULL, o);
  g_assert_cmpuint(r3->moves->len, ==, 0);
}

/* Room on no node for 8 GiB (4 + 2 + 2 + 2 GiB free), and no VM that
 * leaves a node fits straight on another: the greedy, which moves VMs only
 * to room that is there, could only bring the request from three nodes to
 * two (f off node 2, beside the 4 GiB of node 0). The search moves f off
 * node 2 to make room there for b, which leaves node 0 room for all of
 * it. */
static QpClaims *
chain_host(const QpHost *h)
{
  QpClaims *claims = qp_claims_new();
  place(h, claims, "a", QP_MODE_BALANCED, 2, 8192, "0");
  place(h, claims, "b", QP_MODE_BALANCED, 2, 4096, "0");
  place(h, claims, "c", QP_MODE_BALANCED, 2, 8192, "1");
  place(h, claims, "d", QP_MODE_BALANCED, 2, 6144, "1");
  place(h, claims, "e", QP_MODE_BALANCED, 2, 12288, "2");
  place(h, claims, "f", QP_MODE_BALANCED, 2, 2048, "2");
  place(h, claims, "g", QP_MODE_BALANCED, 2, 14336, "3");
  return claims;
}

static void
test_search_chain(void)
{
  g_autoptr(TestHost) h = epyc(NULL);
  g_autoptr(QpClaims) claims = chain_host(h);
  g_autoptr(QpRequest) req = request(2, 8192);
  g_autoptr(Opts) o = opts_new(QP_MODE_BALANCED, NULL);
  g_autofree QpRebalanceVm *vms = all_movable(claims);
  g_autoptr(QpRebalance) r = rebalance(h, claims, vms, req, o);
  g_assert_cmpuint(r->req_nodes_before, ==, 3);
  g_assert_cmpuint(r->moves->len, ==, 2);
  assert_move(r, 0, "f", "2", "1", 2048);
  assert_move(r, 1, "b", "0", "2", 4096);
  g_assert_cmpuint(r->mib, ==, 6144);
  g_assert_cmpuint(r->req_nodes_after, ==, 1);
  assert_set(r->plan->host_nodes, "0");
  g_autoptr(QpPlan) after = plan_ok(h, r->after, req, o);
  assert_set(after->host_nodes, "0");

  /* With f kept (its caller placed it), no chain is left: nothing moves
   * (no set of two nodes can be cleared either), and the request spans
   * three nodes as before. */
  vm_of(vms, claims->claims->len, "f")->caller_set = TRUE;
  g_autoptr(QpRebalance) kept = rebalance(h, claims, vms, req, o);
  g_assert_cmpuint(kept->moves->len, ==, 0);
  g_assert_cmpuint(kept->req_nodes_after, ==, 3);
}

/* Node 0 is full of x (6 GiB), y and z (5 GiB each); the request (10
 * GiB) fits nowhere else. The greedy frees the largest first and then the
 * cheapest that covers the rest: x and y, 11 GiB moved. The search moves y
 * and z, 10 GiB, the least any plan moves. */
static void
test_search_fewest_mib(void)
{
  g_autoptr(TestHost) h = epyc(NULL);
  g_autoptr(QpClaims) claims = qp_claims_new();
  place(h, claims, "x", QP_MODE_BALANCED, 2, 6144, "0");
  place(h, claims, "y", QP_MODE_BALANCED, 2, 5120, "0");
  place(h, claims, "z", QP_MODE_BALANCED, 2, 5120, "0");
  place(h, claims, "w", QP_MODE_BALANCED, 2, 10240, "1");
  place(h, claims, "q", QP_MODE_BALANCED, 2, 11264, "2");
  place(h, claims, "s", QP_MODE_BALANCED, 2, 11264, "3");
  g_autoptr(QpRequest) req = request(2, 10240);
  g_autoptr(Opts) o = opts_new(QP_MODE_BALANCED, NULL);
  g_autofree QpRebalanceVm *vms = all_movable(claims);
  g_autoptr(QpRebalance) r = rebalance(h, claims, vms, req, o);
  g_assert_cmpuint(r->req_nodes_before, ==, 2);
  g_assert_cmpuint(r->moves->len, ==, 2);
  assert_move(r, 0, "y", "0", "2", 5120);
  assert_move(r, 1, "z", "0", "3", 5120);
  g_assert_cmpuint(r->mib, ==, 10240);
  g_assert_cmpuint(r->req_nodes_after, ==, 1);
  assert_set(r->plan->host_nodes, "0");
}

/* Goal (a) by a chain: c spans nodes 0 and 1, and no node has room for
 * all of it as things stand (node 0 holds d and e beside its part, nodes 2
 * and 3 hold f and g); moving e off node 0 to the room left on node 2
 * (as much as on node 3: the lower id) makes room there, and c comes home
 * onto node 0: e's MiB and the part of c that was on node 1, no VM
 * spanning after. */
static void
test_consolidate_chain(void)
{
  g_autoptr(TestHost) h = epyc(NULL);
  g_autoptr(QpClaims) claims = spanning_c(h, 11264);
  place(h, claims, "d", QP_MODE_BALANCED, 2, 6144, "0");
  place(h, claims, "e", QP_MODE_BALANCED, 2, 4096, "0");
  place(h, claims, "f", QP_MODE_BALANCED, 2, 10752, "2");
  place(h, claims, "g", QP_MODE_BALANCED, 2, 10752, "3");
  const QpClaim *c = claim_of(claims, "c");
  guint64 c_on_0 = mib_on(c, 0);
  g_assert_cmpuint(c_on_0, >, 0);
  g_assert_cmpuint(c_on_0, <, 8192);
  /* No node holds c now: it would move straight otherwise. */
  for (guint i = 0; i < h->n_nodes; i++) {
    QpNodeMemory m;
    qp_node_memory(h, claims, NULL, i, &m);
    g_assert_cmpuint(m.uncommitted_mib + mib_on(c, h->nodes[i].id), <, 8192);
  }
  g_autofree QpRebalanceVm *vms = all_movable(claims);
  g_autoptr(QpRebalance) r = rebalance(h, claims, vms, NULL, NULL);
  g_assert_cmpuint(r->spanning_before, ==, 1);
  g_assert_cmpuint(r->spanning_after, ==, 0);
  g_assert_cmpuint(r->moves->len, ==, 2);
  assert_move(r, 0, "e", "0", "2", 4096);
  const QpMove *m = r->moves->pdata[1];
  g_assert_cmpstr(m->vm, ==, "c");
  g_assert_true(m->consolidate);
  assert_set(m->from, "0-1");
  assert_set(m->to, "0");
  g_assert_cmpuint(m->mib, ==, 8192 - c_on_0);
  g_assert_cmpuint(r->mib, ==, 4096 + 8192 - c_on_0);
  g_autofree char *to = mem_nodes(claim_of(r->after, "c"));
  g_assert_cmpstr(to, ==, "0");
  g_assert_cmpuint(qp_rebalance_gain(r), ==, 8192 - c_on_0);

  /* With e kept where it is (its caller placed it), no chain is left: d
   * is too large for the room on nodes 2 and 3, and nothing moves. */
  vm_of(vms, claims->claims->len, "e")->caller_set = TRUE;
  g_autoptr(QpRebalance) kept = rebalance(h, claims, vms, NULL, NULL);
  g_assert_cmpuint(kept->moves->len, ==, 0);
  g_assert_cmpuint(kept->spanning_after, ==, 1);
}

/* Pools of 2 MiB pages, TOTAL of them on each node of NODES, FREE free. */
static void
pools(QpHost *h, const char *nodes, guint64 total, guint64 free)
{
  g_auto(hwloc_bitmap_t) set = list(nodes);
  for (guint i = 0; i < h->n_nodes; i++)
    if (hwloc_bitmap_isset(set, (unsigned)h->nodes[i].id)) {
      g_array_set_size(h->nodes[i].hugepages, 0);
      g_array_append_val(h->nodes[i].hugepages,
                         ((QpHugePool){2048, total, free}));
    }
}

/* C's 2 MiB pages on NODE. */
static guint64
pages_on(const QpClaim *c, int node)
{
  guint64 n = 0;
  for (guint x = 0; x < c->huge->len; x++)
    if (g_array_index(c->huge, QpHugeClaim, x).node == node)
      n += g_array_index(c->huge, QpHugeClaim, x).pages;
  return n;
}

/* A balanced VM ID of 3 GiB in 2 MiB pages added to CLAIMS, placed inside
 * host nodes NODES, whose pools hold 1024 pages each: it spans two. */
static void
place_huge(const QpHost *h, QpClaims *claims, const char *id, const char *nodes)
{
  g_autoptr(QpRequest) r = request(2, 3072);
  r->page_kib = 2048;
  g_autoptr(Opts) o = opts_new(QP_MODE_BALANCED, NULL);
  o->o.hostnodes = list(nodes);
  g_autoptr(QpPlan) p = plan_ok(h, claims, r, o);
  g_ptr_array_add(claims->claims, qp_claim_from_plan(p, id, id));
}

static QpClaims *
spanning_huge(const QpHost *h, const char *id)
{
  QpClaims *claims = qp_claims_new();
  place_huge(h, claims, id, "0-1");
  return claims;
}

/* Goal (a) for a VM whose memory is in hugepage pools: it comes back to
 * one node once that node's pool has the pages it lacks (free and claimed
 * by nobody), its claim then naming that pool alone; it stays spanning
 * while no pool has them. */
static void
test_huge_comes_back(void)
{
  g_autoptr(TestHost) h = epyc(NULL);
  pools(h, "0-1", 1024, 1024);
  g_autoptr(QpClaims) claims = spanning_huge(h, "hp");
  const QpClaim *c = claim_of(claims, "hp");
  guint64 on0 = pages_on(c, 0), on1 = pages_on(c, 1);
  g_assert_cmpuint(on0 + on1, ==, 1536);
  g_assert_cmpuint(on0, >, 0);
  g_assert_cmpuint(on1, >, 0);
  g_autofree QpRebalanceVm *vms = all_movable(claims);

  /* No pool has room for all of it: nothing moves, and it is not kept for
   * its hugepages. */
  g_autoptr(QpRebalance) none = rebalance(h, claims, vms, NULL, NULL);
  g_assert_cmpuint(none->spanning_before, ==, 1);
  g_assert_cmpuint(none->moves->len, ==, 0);
  g_assert_cmpuint(none->kept->len, ==, 0);

  /* Node 0's pool grows to 2048 pages, room enough by the claims, but all
   * its free pages save one fewer than would arrive are taken by something
   * else: nothing moves. */
  pools(h, "0", 2048, on1 - 1);
  g_autoptr(QpRebalance) shy = rebalance(h, claims, vms, NULL, NULL);
  g_assert_cmpuint(shy->moves->len, ==, 0);
  g_assert_cmpuint(shy->spanning_after, ==, 1);

  /* With the pages free, it moves to node 0: only its pages on node 1
   * change node, and its claim names node 0's pool alone. */
  pools(h, "0", 2048, on1);
  g_autoptr(QpRebalance) r = rebalance(h, claims, vms, NULL, NULL);
  g_assert_cmpuint(r->spanning_after, ==, 0);
  g_assert_cmpuint(r->moves->len, ==, 1);
  const QpMove *m = r->moves->pdata[0];
  g_assert_cmpstr(m->vm, ==, "hp");
  g_assert_true(m->consolidate);
  assert_set(m->from, "0-1");
  assert_set(m->to, "0");
  g_assert_cmpuint(m->mib, ==, on1 * 2);
  const QpClaim *after = claim_of(r->after, "hp");
  g_assert_cmpuint(after->huge->len, ==, 1);
  g_assert_cmpuint(pages_on(after, 0), ==, 1536);
  QpNodePages np;
  qp_node_pages(h, r->after, 0, 2048, &np);
  g_assert_cmpuint(np.claimed, ==, 1536);
  g_assert_cmpuint(np.claimed, <=, np.total);
}

/* Two spanning hugepage VMs and one pool with room for one of them: one
 * moves, the pages it takes are gone for the other. */
static void
test_huge_pool_taken_once(void)
{
  g_autoptr(TestHost) h = epyc(NULL);
  pools(h, "0-3", 1024, 1024);
  g_autoptr(QpClaims) claims = spanning_huge(h, "p");
  place_huge(h, claims, "q", "2-3");
  /* Node 0's pool: room by the claims for both, but free pages for p's
   * pages elsewhere and one fewer than q's 1536: once p has taken its
   * pages, q's are not there. */
  guint64 p_on0 = pages_on(claim_of(claims, "p"), 0);
  pools(h, "0", 4096, 1536 - p_on0 + 1536 - 1);
  g_autofree QpRebalanceVm *vms = all_movable(claims);
  g_autoptr(QpRebalance) r = rebalance(h, claims, vms, NULL, NULL);
  g_assert_cmpuint(r->spanning_before, ==, 2);
  g_assert_cmpuint(r->moves->len, ==, 1);
  g_assert_cmpuint(r->spanning_after, ==, 1);
  const QpMove *m = r->moves->pdata[0];
  g_assert_cmpstr(m->vm, ==, "p");
  assert_set(m->to, "0");
  g_assert_cmpuint(pages_on(claim_of(r->after, "q"), 0), ==, 0);
}

/* A numa VM whose guest nodes are in hugepage pools: a piece in the way
 * moves to a node whose pool has its pages, free and claimed by nobody.
 * Nodes 0 and 1 hold its two guest nodes (1024 pages of 2 MiB each); node
 * 0's pool has 2048, the others 1024, taken by a VM that stays on node 3
 * and half by one on node 2. A VM of 4 GiB in 2 MiB pages spans nodes 0
 * and 2 until the guest node on node 0 moves to node 2, the one pool with
 * its 1024 pages; the pool it leaves was never touched (all its pages
 * free), and the VM then fits node 0 alone. */
static void
test_huge_numa_moves(void)
{
  g_autoptr(TestHost) h = epyc(NULL);
  pools(h, "0", 2048, 2048);
  pools(h, "1", 1024, 1024);
  pools(h, "2", 2048, 2048);
  pools(h, "3", 1024, 1024);
  g_autoptr(QpClaims) claims = qp_claims_new();
  g_autoptr(QpRequest) vn = request(4, 4096);
  request_vnuma(vn, 2, 2, 2048);
  vn->page_kib = 2048;
  for (guint g = 0; g < vn->n_gnodes; g++)
    vn->gnodes[g].page_kib = 2048;
  g_autoptr(Opts) no = opts_new(QP_MODE_NUMA, NULL);
  no->o.hostnodes = list("0-1");
  g_autoptr(QpPlan) p = plan_ok(h, claims, vn, no);
  g_ptr_array_add(claims->claims, qp_claim_from_plan(p, "n", "n"));
  const QpClaim *c = claim_of(claims, "n");
  g_assert_cmpuint(pages_on(c, 0), ==, 1024);
  g_assert_cmpuint(pages_on(c, 1), ==, 1024);
  for (int f = 2; f < 4; f++) {
    g_autoptr(QpRequest) r = request(2, 2048);
    r->page_kib = 2048;
    g_autoptr(Opts) o = opts_new(QP_MODE_BALANCED, NULL);
    g_autofree char *node = g_strdup_printf("%d", f);
    o->o.hostnodes = list(node);
    g_autoptr(QpPlan) fp = plan_ok(h, claims, r, o);
    g_autofree char *id = g_strdup_printf("fill%d", f);
    g_ptr_array_add(claims->claims, qp_claim_from_plan(fp, id, id));
  }
  g_autofree QpRebalanceVm *vms = all_movable(claims);
  guint n = claims->claims->len;
  vm_of(vms, n, "fill2")->caller_set = TRUE;
  vm_of(vms, n, "fill3")->caller_set = TRUE;
  g_autoptr(QpRequest) big = request(2, 4096);
  big->page_kib = 2048;
  g_autoptr(QpRebalance) r = rebalance(h, claims, vms, big, NULL);
  g_assert_cmpuint(r->kept->len, ==, 2); /* the fillers alone */
  g_assert_cmpuint(r->req_nodes_before, ==, 2);
  g_assert_cmpuint(r->moves->len, ==, 1);
  const QpMove *m = r->moves->pdata[0];
  g_assert_cmpstr(m->vm, ==, "n");
  g_assert_cmpuint(m->pairs->len, ==, 1);
  const QpNodePair *np = &g_array_index(m->pairs, QpNodePair, 0);
  g_assert_cmpint(np->from, ==, 0);
  g_assert_cmpint(np->to, ==, 2);
  g_assert_cmpuint(m->mib, ==, 2048);
  assert_set(m->from, "0-1");
  assert_set(m->to, "1-2");
  const QpClaim *after = claim_of(r->after, "n");
  g_assert_cmpuint(pages_on(after, 0), ==, 0);
  g_assert_cmpuint(pages_on(after, 1), ==, 1024);
  g_assert_cmpuint(pages_on(after, 2), ==, 1024);
  g_assert_cmpuint(r->req_nodes_after, ==, 1);
  assert_set(r->plan->host_nodes, "0");
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/rebalance/lab-scenario/measured-host-one-move",
                  test_lab_scenario_measured);
  g_test_add_func("/rebalance/lab-scenario/one-move-makes-room",
                  test_lab_scenario);
  g_test_add_func("/rebalance/request/fits-already-no-move", test_fits_already);
  g_test_add_func("/rebalance/never-moves/caller-vfio-cooldown-unknown",
                  test_never_moved);
  g_test_add_func("/rebalance/keeps/started-host-nodes",
                  test_stays_inside_nodes);
  g_test_add_func("/rebalance/keeps/own-reserve", test_own_reserve);
  g_test_add_func("/rebalance/consolidate/spanning-comes-back",
                  test_spanning_comes_back);
  g_test_add_func("/rebalance/consolidate/chain-makes-room",
                  test_consolidate_chain);
  g_test_add_func("/rebalance/one-to-one/takes-free-cores",
                  test_one_to_one_takes_free_cores);
  g_test_add_func("/rebalance/numa/one-node-per-guest-node", test_numa_pieces);
  g_test_add_func("/rebalance/recorded/2s-8node/one-node-after-moves",
                  test_recorded_2s_8node);
  g_test_add_func("/rebalance/relieve/overcommitted-node",
                  test_relieve_overcommitted);
  g_test_add_func("/rebalance/min-mib/gain-of-consolidating-moves",
                  test_min_mib);
  g_test_add_func("/rebalance/search/room-made-at-the-destination",
                  test_search_chain);
  g_test_add_func("/rebalance/search/fewest-mib-not-largest-first",
                  test_search_fewest_mib);
  g_test_add_func("/rebalance/hugepages/spanning-comes-back",
                  test_huge_comes_back);
  g_test_add_func("/rebalance/hugepages/pool-taken-once",
                  test_huge_pool_taken_once);
  g_test_add_func("/rebalance/hugepages/numa-piece-moves",
                  test_huge_numa_moves);
  return g_test_run();
}
