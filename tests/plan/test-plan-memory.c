/* The planner's memory classes on the recorded hosts in
 * tests/data/topologies: ordinary memory and the hugepages of each size are
 * planned and claimed apart, per host node, for every piece of the guest's
 * memory (the RAM of each guest node, memory devices, unused backends). */
#include "tests/common/qp-plan-test.h"
#include "topology/plan/capacity.h"
#include "topology/ledger/store.h"
#include "topology/plan/plan.h"
#include "topology/plan/claim.h"
#include "topology/status/status.h"

#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

static hwloc_bitmap_t
list(const char *text)
{
  hwloc_bitmap_t set = NULL;
  g_assert_true(qp_list_parse(text, "test", QP_LIST_MAX_INDEX, &set, NULL));
  return set;
}

static QpRequest *
request(guint vcpus, guint64 mem_mib, guint64 page_kib)
{
  QpRequest *r = qp_request_new();
  r->vcpus = r->maxcpus = r->cores = vcpus;
  r->mem_mib = mem_mib;
  r->page_kib = page_kib;
  return r;
}

/* Guest node G gets VCPUS (a list) and MIB of memory in PAGE_KIB pages. */
static void
gnode(QpRequest *r, guint g, const char *vcpus, guint64 mib, guint64 page_kib)
{
  if (g >= r->n_gnodes) {
    r->gnodes = g_renew(QpGuestNode, r->gnodes, g + 1);
    memset(&r->gnodes[r->n_gnodes], 0,
           (g + 1 - r->n_gnodes) * sizeof(QpGuestNode));
    r->n_gnodes = g + 1;
  }
  QpGuestNode *n = &r->gnodes[g];
  n->id = (int)g;
  n->vcpus = list(vcpus);
  n->mem_mib = mib;
  n->page_kib = page_kib;
  n->memdev = g_strdup_printf("ram%u", g);
}

static QpMemDevice *
device(QpRequest *r, QpMemKind kind, int gi, const char *memdev, guint64 mib,
       guint64 page_kib)
{
  r->devmem = g_renew(QpMemDevice, r->devmem, r->n_devmem + 1);
  QpMemDevice *d = &r->devmem[r->n_devmem++];
  memset(d, 0, sizeof(*d));
  d->kind = kind;
  d->gnode = gi;
  d->memdev = g_strdup(memdev);
  d->device = g_strdup_printf("dev-%s", memdev);
  d->mib = mib;
  d->page_kib = page_kib;
  return d;
}

/* Every claim of the plan is the sum of what its pieces claim. */
static void
assert_pieces_add_up(const QpPlan *p, const QpHost *h)
{
  for (guint n = 0; n < h->n_nodes; n++) {
    int id = h->nodes[n].id;
    guint64 mib = 0, p2m = 0, p1g = 0;
    for (guint m = 0; m < p->n_mem; m++)
      for (guint k = 0; k < p->mem[m].claim->len; k++) {
        const QpNodeUnits *u = &g_array_index(p->mem[m].claim, QpNodeUnits, k);
        if (u->node != id)
          continue;
        if (p->mem[m].page_kib == 0)
          mib += u->units;
        else if (p->mem[m].page_kib == 2048)
          p2m += u->units;
        else
          p1g += u->units;
      }
    g_assert_cmpuint(mib, ==, qp_test_mem_on(p, id));
    g_assert_cmpuint(p2m, ==, qp_test_pages_on(p, id, 2048));
    g_assert_cmpuint(p1g, ==, qp_test_pages_on(p, id, 1048576));
  }
}

/* Other VMs' hugepage claims reduce the pool of their size only. */
static void
test_classes_are_apart(void)
{
  g_autoptr(QpHost) h =
      qp_test_recorded("intel-2s-smt.xml"); /* 1024 x 2M, 4 x 1G */
  g_autoptr(QpClaims) c = qp_claims_new();
  QpClaim *other = qp_claim_new();
  other->id = g_strdup("other");
  QpHugeClaim g1 = {.node = 0, .page_kib = 1048576, .pages = 4};
  QpHugeClaim m2 = {.node = 1, .page_kib = 2048, .pages = 1024};
  g_array_append_val(other->huge, g1);
  g_array_append_val(other->huge, m2);
  g_ptr_array_add(c->claims, other);

  /* 2 MiB pages: only node 0 has them left. */
  g_autoptr(QpRequest) r = request(2, 1024, 2048);
  g_autoptr(QpPlan) p = qp_test_plan_ok(h, c, r, QP_MODE_BALANCED);
  g_assert_cmpuint(qp_test_pages_on(p, 0, 2048), ==, 512);
  g_assert_cmpuint(p->claim_mem->len, ==, 0);
  /* 1 GiB pages: only node 1. */
  g_autoptr(QpRequest) r1 = request(2, 2048, 1048576);
  g_autoptr(QpPlan) p1 = qp_test_plan_ok(h, c, r1, QP_MODE_BALANCED);
  g_assert_cmpuint(qp_test_pages_on(p1, 1, 1048576), ==, 2);
  /* Both in one guest: guest node 0 in 2M pages, guest node 1 in 1G
   * pages, ordinary memory in a pc-dimm of guest node 1. */
  g_autoptr(QpRequest) r2 = request(2, 3072, 0);
  gnode(r2, 0, "0", 1024, 2048);
  gnode(r2, 1, "1", 2048, 1048576);
  device(r2, QP_MEM_DIMM, 1, "d0", 512, 0);
  g_autoptr(QpPlan) p2 = qp_test_plan_ok(h, c, r2, QP_MODE_NUMA);
  g_assert_cmpuint(qp_test_pages_on(p2, 0, 2048), ==, 512);
  g_assert_cmpuint(qp_test_pages_on(p2, 1, 1048576), ==, 2);
  g_assert_cmpuint(qp_test_mem_on(p2, 1), ==, 512);
  g_assert_cmpuint(qp_test_mem_on(p2, 0), ==, 0);
  g_assert_cmpuint(p2->claim_huge->len, ==, 2);
  assert_pieces_add_up(p2, h);
}

/* A pool too small on one node: balanced spreads that class. By default
 * the vCPUs float on one node (the first of equal ones), which takes all of
 * its pool and the DIMM, the other node the rest of the pages; with
 * --strategy=pack the tightest node is filled first. */
static void
test_balanced_spreads_a_class(void)
{
  g_autoptr(QpHost) h = qp_test_recorded("intel-2s-smt.xml");
  g_autoptr(QpRequest) r = request(2, 3072, 2048); /* 1536 pages */
  device(r, QP_MEM_DIMM, -1, "d0", 1024, 0);
  g_autoptr(QpPlan) p = qp_test_plan_ok(h, NULL, r, QP_MODE_BALANCED);
  g_assert_cmpuint(qp_test_pages_on(p, 0, 2048), ==, 1024);
  g_assert_cmpuint(qp_test_pages_on(p, 1, 2048), ==, 512);
  g_assert_cmpuint(qp_test_mem_on(p, 0), ==, 1024);
  g_assert_cmpuint(qp_test_mem_on(p, 1), ==, 0);
  g_assert_true(hwloc_bitmap_isincluded(p->process_cpus, h->nodes[0].all_cpus));
  assert_pieces_add_up(p, h);

  QpPlacementOptions pack;
  qp_placement_options_init(&pack);
  pack.mode = QP_MODE_BALANCED;
  pack.strategy = QP_STRATEGY_PACK;
  g_autoptr(QpPlan) pk = qp_plan_compute(h, NULL, r, &pack, NULL);
  qp_placement_options_clear(&pack);
  g_assert_nonnull(pk);
  g_assert_cmpuint(
      qp_test_pages_on(pk, 0, 2048) + qp_test_pages_on(pk, 1, 2048), ==, 1536);
  g_assert_true(qp_test_pages_on(pk, 0, 2048) == 1024 ||
                qp_test_pages_on(pk, 1, 2048) == 1024);

  /* More than both pools hold: named in pages. */
  g_autoptr(QpRequest) big = request(2, 5120, 2048);
  g_autoptr(GError) e = qp_test_plan_nofit(h, big, QP_MODE_BALANCED);
  g_assert_nonnull(strstr(e->message, "guest needs 5120 MiB of 2048 KiB "
                                      "hugepages (2560 pages) but the usable "
                                      "host nodes have only 4096 MiB"));
}

/* A refusal for ordinary memory says the node's total as MemTotal has it,
 * and the part of it hugepage pools hold, which ordinary memory does not
 * have: the numbers add up (65536 - 6144 - 2048 claimed = 57344). Before,
 * it said "59392 MiB total", the total less the pools. A pool's refusal
 * says what is in the pool; a node without pools says its total alone. */
static void
test_refusal_names_pools(void)
{
  g_autoptr(QpHost) h = qp_test_recorded("intel-2s-smt.xml");
  g_autoptr(QpClaims) c = qp_claims_new();
  QpClaim *a = qp_claim_new();
  a->id = g_strdup("a");
  for (int n = 0; n < 2; n++) {
    QpNodeAmount m = {.node = n, .mib = 2048};
    g_array_append_val(a->mem, m);
  }
  g_ptr_array_add(c->claims, a);
  g_autoptr(QpRequest) r = request(2, 61440, 0);
  QpPlacementOptions o;
  qp_placement_options_init(&o);
  o.mode = QP_MODE_NUMA;
  g_autoptr(GError) e = NULL;
  g_autoptr(QpPlan) p = qp_plan_compute(h, c, r, &o, &e);
  g_assert_null(p);
  g_assert_cmpstr(e->message, ==,
                  "VM does not fit: guest needs 61440 MiB but the best node 0 "
                  "has only 57344 "
                  "MiB uncommitted (65536 MiB total, 6144 MiB of it in "
                  "hugepage pools, 2048 MiB claimed)");
  g_clear_error(&e);

  /* 1 GiB pages: 4 a node. */
  g_autoptr(QpRequest) big = request(2, 5120, 1048576);
  g_autoptr(QpPlan) p2 = qp_plan_compute(h, NULL, big, &o, &e);
  g_assert_null(p2);
  g_assert_cmpstr(e->message, ==,
                  "VM does not fit: guest needs 5120 MiB of 1048576 KiB "
                  "hugepages (5 pages) "
                  "but the best node 0 has only 4096 MiB uncommitted (4096 "
                  "MiB in the pool, 0 MiB claimed)");
  g_clear_error(&e);
  qp_placement_options_clear(&o);

  /* No pools: the total alone. */
  g_autoptr(QpHost) h2 = qp_test_recorded("2s-8node.xml"); /* 32 GiB a node */
  g_autoptr(QpRequest) r2 = request(2, 40960, 0);
  e = qp_test_plan_nofit(h2, r2, QP_MODE_NUMA);
  g_assert_cmpstr(e->message, ==,
                  "VM does not fit: guest needs 40960 MiB but the best node 0 "
                  "has only 32768 "
                  "MiB uncommitted (32768 MiB total, 0 MiB claimed)");
}

/* A device whose backend the caller bound is claimed there; one without
 * follows its guest node, also when the caller bound the node's RAM. */
static void
test_caller_bound_pieces(void)
{
  g_autoptr(QpHost) h = qp_test_recorded("2s-8node.xml"); /* 32 GiB per node */
  g_autoptr(QpRequest) r = request(2, 4096, 0);
  gnode(r, 0, "0", 2048, 0);
  gnode(r, 1, "1", 2048, 0);
  r->gnodes[1].host_nodes = list("5");
  r->gnodes[1].policy = QP_POLICY_PREFERRED;
  device(r, QP_MEM_DIMM, 1, "d1", 1024, 0);
  QpMemDevice *d = device(r, QP_MEM_DIMM, 0, "d2", 3072, 0);
  d->host_nodes = list("6-7");
  d->policy = QP_POLICY_INTERLEAVE;
  g_autoptr(QpPlan) p = qp_test_plan_ok(h, NULL, r, QP_MODE_NUMA);
  g_assert_cmpuint(p->n_mem, ==, 4);
  const QpPlanMem *d1 = &p->mem[2], *d2 = &p->mem[3];
  g_assert_cmpstr(d1->memdev, ==, "d1");
  g_assert_false(d1->caller_set); /* bound by qemu-pin, where its node is */
  g_assert_cmpint(d1->policy, ==, QP_POLICY_BIND);
  g_assert_cmpint(hwloc_bitmap_first(d1->host_nodes), ==, 5);
  g_assert_true(p->mem[1].caller_set);
  g_assert_true(d2->caller_set);
  g_assert_cmpint(d2->policy, ==, QP_POLICY_INTERLEAVE);
  g_assert_cmpuint(qp_test_mem_on(p, 5), ==, 2048 + 1024);
  g_assert_cmpuint(qp_test_mem_on(p, 6), ==, 1536);
  g_assert_cmpuint(qp_test_mem_on(p, 7), ==, 1536);
  assert_pieces_add_up(p, h);
  /* Its first record already says the caller placed it: rebalance keeps
   * it where it is before its keeper has looked. */
  g_autoptr(QpClaim) c = qp_claim_from_plan(p, "vm", "vm");
  g_assert_true(c->caller_placed);

  /* A caller-bound device that does not fit there: named. */
  d->mib = 70000;
  g_autoptr(GError) e = qp_test_plan_nofit(h, r, QP_MODE_NUMA);
  g_assert_nonnull(strstr(e->message, "pc-dimm dev-d2 of guest node 0 needs "
                                      "70000 MiB on its host-nodes 6-7"));
}

/* One-to-one without vNUMA: every piece is claimed where the vCPUs run
 * and none is bound. */
static void
test_one_to_one_flat(void)
{
  g_autoptr(QpHost) h = qp_test_recorded("intel-2s-smt.xml");
  g_autoptr(QpRequest) r = request(4, 4096, 0);
  device(r, QP_MEM_VIRTIO_MEM, -1, "v0", 2048, 0);
  device(r, QP_MEM_UNUSED, -1, "u0", 1024, 1048576);
  g_autoptr(QpPlan) p = qp_test_plan_ok(h, NULL, r, QP_MODE_ONE_TO_ONE);
  g_assert_cmpuint(p->n_mem, ==, 3);
  for (guint m = 0; m < p->n_mem; m++)
    g_assert_null(p->mem[m].host_nodes);
  g_assert_null(p->mem_nodes);
  g_assert_cmpuint(qp_test_mem_on(p, 0), ==, 6144);
  g_assert_cmpuint(qp_test_pages_on(p, 0, 1048576), ==, 1);
  assert_pieces_add_up(p, h);
}

/* The ledger records each page size per node as planned, status shows it,
 * and the next plan counts it. */
static void
test_ledger_and_status(void)
{
  g_autoptr(QpHost) h = qp_test_recorded("intel-2s-smt.xml");
  g_autoptr(QpRequest) r = request(2, 6144, 0);
  gnode(r, 0, "0", 2048, 0);
  gnode(r, 1, "1", 4096, 1048576);
  device(r, QP_MEM_DIMM, 1, "d0", 512, 0);
  g_autoptr(QpPlan) p = qp_test_plan_ok(h, NULL, r, QP_MODE_NUMA);
  int n0 = hwloc_bitmap_first(p->mem[0].host_nodes);
  int n1 = hwloc_bitmap_first(p->mem[1].host_nodes);
  g_assert_cmpint(n0, !=, n1);

  g_autofree char *tmp = g_dir_make_tmp("qp-plan-mem-XXXXXX", NULL);
  g_autofree char *dir = g_build_filename(tmp, "state", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(QpLedger) ledger = qp_ledger_open(dir, &error);
  g_assert_no_error(error);
  g_assert_true(qp_ledger_lock(ledger, &error));
  g_autoptr(QpClaim) claim = qp_claim_from_plan(p, "mixed", "mixed");
  claim->qemu_pid = getpid();
  claim->qemu_start = qp_proc_start_time(getpid());
  g_assert_true(qp_ledger_write(ledger, claim, &error));
  g_autoptr(QpClaims) claims = qp_ledger_read(ledger, h, &error);
  g_assert_no_error(error);
  qp_ledger_unlock(ledger);
  g_assert_cmpuint(claims->claims->len, ==, 1);

  QpPlacementOptions opts;
  qp_placement_options_init(&opts);
  g_autoptr(JsonNode) root = qp_status_to_json(h, claims, &opts);
  qp_placement_options_clear(&opts);
  JsonArray *nodes =
      json_object_get_array_member(json_node_get_object(root), "nodes");
  for (guint i = 0; i < json_array_get_length(nodes); i++) {
    JsonObject *n = json_array_get_object_element(nodes, i);
    gint64 id = json_object_get_int_member(n, "id");
    gint64 mib = json_object_get_int_member(
        json_object_get_object_member(n, "memory-mib"), "claimed");
    g_assert_cmpint(mib, ==, id == n0 ? 2048 : 512);
    JsonArray *hp = json_object_get_array_member(n, "hugepages");
    for (guint k = 0; k < json_array_get_length(hp); k++) {
      JsonObject *o = json_array_get_object_element(hp, k);
      gint64 kib = json_object_get_int_member(o, "page-kib");
      gint64 want = kib == 1048576 && id == n1 ? 4 : 0;
      g_assert_cmpint(json_object_get_int_member(o, "claimed"), ==, want);
    }
  }
  JsonObject *vm = json_array_get_object_element(
      json_object_get_array_member(json_node_get_object(root), "vms"), 0);
  g_assert_cmpuint(
      json_array_get_length(json_object_get_array_member(vm, "hugepages")), ==,
      1);

  /* The next guest on 1 GiB pages finds node N1's pool taken. */
  g_autoptr(QpRequest) r2 = request(1, 1024, 1048576);
  g_autoptr(QpPlan) p2 = qp_test_plan_ok(h, claims, r2, QP_MODE_BALANCED);
  g_assert_cmpuint(qp_test_pages_on(p2, n0, 1048576), ==, 1);
  g_assert_cmpuint(qp_test_pages_on(p2, n1, 1048576), ==, 0);

  g_autoptr(QpLedger) again = qp_ledger_open(dir, NULL);
  qp_ledger_remove(again, "mixed", NULL);
  g_autofree char *lock = g_build_filename(dir, "lock", NULL);
  g_unlink(lock);
  g_rmdir(dir);
  g_rmdir(tmp);
}

/* Status's figure of a node's JSON "uncommitted" member, for ordinary
 * memory (PAGE_KIB 0) or the pool of PAGE_KIB pages. */
static guint64
status_uncommitted(JsonNode *root, int node, guint64 page_kib)
{
  JsonArray *nodes =
      json_object_get_array_member(json_node_get_object(root), "nodes");
  for (guint i = 0; i < json_array_get_length(nodes); i++) {
    JsonObject *n = json_array_get_object_element(nodes, i);
    if (json_object_get_int_member(n, "id") != node)
      continue;
    if (page_kib == 0)
      return (guint64)json_object_get_int_member(
          json_object_get_object_member(n, "memory-mib"), "uncommitted");
    JsonArray *hp = json_object_get_array_member(n, "hugepages");
    for (guint k = 0; k < json_array_get_length(hp); k++) {
      JsonObject *o = json_array_get_object_element(hp, k);
      if ((guint64)json_object_get_int_member(o, "page-kib") == page_kib)
        return (guint64)json_object_get_int_member(o, "uncommitted");
    }
  }
  g_assert_not_reached();
}

/* A plan of MIB in PAGE_KIB pages on --hostnodes OPTS: TRUE when it fits
 * (on NODE alone). */
static gboolean
fits_on(const QpHost *h, const QpClaims *claims, const QpPlacementOptions *opts,
        int node, guint64 mib, guint64 page_kib)
{
  g_autoptr(QpRequest) r = request(1, mib, page_kib);
  g_autoptr(GError) error = NULL;
  g_autoptr(QpPlan) p = qp_plan_compute(h, claims, r, opts, &error);
  if (p == NULL) {
    g_assert_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT);
    return FALSE;
  }
  if (page_kib == 0)
    g_assert_cmpuint(qp_test_mem_on(p, node), ==, mib);
  else
    g_assert_cmpuint(qp_test_pages_on(p, node, page_kib) * page_kib / 1024, ==,
                     mib);
  return TRUE;
}

/* What status shows uncommitted on a node (its memory less hugepage pools,
 * host reserve and claims; a pool's free pages less claimed ones) is what
 * a plan can claim there, to the MiB and to the page. */
static void
test_status_free_is_what_fits(void)
{
  g_autoptr(QpHost) h = qp_test_recorded("intel-2s-smt.xml");
  int node = h->nodes[0].id;
  g_autoptr(QpClaims) claims = qp_claims_new();
  QpClaim *c = qp_claim_new();
  c->id = g_strdup("other");
  QpNodeAmount m = {node, 1000};
  g_array_append_val(c->mem, m);
  QpHugeClaim hc = {node, 1048576, 1};
  g_array_append_val(c->huge, hc);
  g_ptr_array_add(claims->claims, c);

  QpPlacementOptions opts;
  qp_placement_options_init(&opts);
  opts.mode = QP_MODE_BALANCED;
  opts.reserve_mib = 300;
  opts.hostnodes = hwloc_bitmap_alloc();
  hwloc_bitmap_set(opts.hostnodes, (unsigned)node);
  g_autoptr(JsonNode) root = qp_status_to_json(h, claims, &opts);

  guint64 mib = status_uncommitted(root, node, 0);
  g_assert_cmpuint(mib, >, 0);
  g_assert_true(fits_on(h, claims, &opts, node, mib, 0));
  g_assert_false(fits_on(h, claims, &opts, node, mib + 1, 0));

  guint64 pages = status_uncommitted(root, node, 1048576);
  g_assert_cmpuint(pages, >, 0);
  g_assert_true(fits_on(h, claims, &opts, node, pages * 1024, 1048576));
  g_assert_false(fits_on(h, claims, &opts, node, (pages + 1) * 1024, 1048576));
  qp_placement_options_clear(&opts);
}

/* A VM that preallocated its claimed hugepages took them off the pool's free
 * count: the pages left are the pool less the claims, not the free pages
 * less the claims again. Pages claimed but not yet touched are still free:
 * the claims bound them; pages someone else took: the free count does. */
static void
test_touched_pages_counted_once(void)
{
  g_autoptr(QpHost) h = qp_test_recorded("intel-2s-smt.xml");
  int node = h->nodes[0].id;
  g_assert_nonnull(h->nodes[0].hugepages);
  QpHugePool *pool = NULL;
  for (guint i = 0; i < h->nodes[0].hugepages->len; i++) {
    QpHugePool *p = &g_array_index(h->nodes[0].hugepages, QpHugePool, i);
    if (p->page_kib == 2048)
      pool = p;
  }
  g_assert_nonnull(pool);
  g_autoptr(QpClaims) claims = qp_claims_new();
  QpClaim *c = qp_claim_new();
  c->id = g_strdup("prealloc");
  QpHugeClaim hc = {node, 2048, 32};
  g_array_append_val(c->huge, hc);
  g_ptr_array_add(claims->claims, c);

  static const struct {
    guint64 total, free, left;
  } cases[] = {
      {64, 32, 32}, /* the claimed pages touched */
      {64, 64, 32}, /* claimed, not touched yet */
      {64, 16, 16}, /* touched, and 16 more taken by others */
      {16, 0, 0},   /* claims above the pool (it shrank) */
  };
  for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
    pool->total = cases[i].total;
    pool->free = cases[i].free;
    QpNodePages pages;
    qp_node_pages(h, claims, 0, 2048, &pages);
    g_assert_cmpuint(pages.claimed, ==, 32);
    g_assert_cmpuint(pages.uncommitted, ==, cases[i].left);
  }
}

/* Mode auto places a vNUMA guest with more vCPUs than CPUs best-effort and
 * claims each piece per node and page size as numa does: guest node 0 on
 * ordinary memory with a pc-dimm in 2 MiB pages, guest node 1 on 1 GiB
 * pages; the pc-dimm stays with guest node 0's host node. When another VM
 * holds node 1's 1 GiB pool, guest node 1's memory goes where 1 GiB pages
 * are left (node 0) and its vCPUs float on node 1's CPUs. */
static void
test_best_effort_per_page_size(void)
{
  g_autoptr(QpHost) h =
      qp_test_recorded("intel-2s-smt.xml"); /* 16 CPUs per node */
  g_autoptr(QpRequest) r = request(40, 4096, 0);
  gnode(r, 0, "0-19", 2048, 0);
  gnode(r, 1, "20-39", 2048, 1048576);
  device(r, QP_MEM_DIMM, 0, "d0", 512, 2048);

  g_autoptr(QpPlan) p = qp_test_plan_ok(h, NULL, r, QP_MODE_AUTO);
  g_assert_true(p->best_effort);
  g_assert_cmpint(p->mode, ==, QP_MODE_NUMA);
  g_assert_cmpuint(p->n_mem, ==, 3);
  g_assert_cmpint(hwloc_bitmap_first(p->mem[0].host_nodes), ==, 0);
  g_assert_cmpint(hwloc_bitmap_first(p->mem[1].host_nodes), ==, 1);
  g_assert_cmpstr(p->mem[2].memdev, ==, "d0");
  g_assert_cmpint(p->mem[2].gnode, ==, 0);
  g_assert_cmpuint(p->mem[2].page_kib, ==, 2048);
  g_assert_nonnull(p->mem[2].host_nodes);
  g_assert_true(
      hwloc_bitmap_isequal(p->mem[2].host_nodes, p->mem[0].host_nodes));
  g_assert_cmpuint(qp_test_mem_on(p, 0), ==, 2048);
  g_assert_cmpuint(qp_test_pages_on(p, 0, 2048), ==, 256);
  g_assert_cmpuint(qp_test_pages_on(p, 1, 1048576), ==, 2);
  g_assert_cmpuint(qp_test_mem_on(p, 1), ==, 0);
  g_assert_cmpuint(qp_test_pages_on(p, 0, 1048576), ==, 0);
  g_assert_cmpuint(p->claim_mem->len, ==, 1);
  g_assert_cmpuint(p->claim_huge->len, ==, 2);
  assert_pieces_add_up(p, h);

  /* Node 1's 1 GiB pages are another VM's. */
  g_autoptr(QpClaims) c = qp_claims_new();
  QpClaim *other = qp_claim_new();
  other->id = g_strdup("other");
  QpHugeClaim g1 = {.node = 1, .page_kib = 1048576, .pages = 4};
  g_array_append_val(other->huge, g1);
  g_ptr_array_add(c->claims, other);
  g_autoptr(QpPlan) q = qp_test_plan_ok(h, c, r, QP_MODE_AUTO);
  g_assert_true(q->best_effort);
  for (guint m = 0; m < q->n_mem; m++)
    g_assert_cmpint(hwloc_bitmap_first(q->mem[m].host_nodes), ==, 0);
  g_assert_cmpuint(qp_test_mem_on(q, 0), ==, 2048);
  g_assert_cmpuint(qp_test_pages_on(q, 0, 2048), ==, 256);
  g_assert_cmpuint(qp_test_pages_on(q, 0, 1048576), ==, 2);
  g_assert_cmpuint(qp_test_pages_on(q, 1, 1048576), ==, 0);
  assert_pieces_add_up(q, h);
  g_auto(hwloc_bitmap_t) node1 = list("8-15,24-31");
  g_assert_true(hwloc_bitmap_isequal(q->vcpu_cpus[20], node1));
  g_assert_true(hwloc_bitmap_isequal(q->vcpu_cpus[39], node1));
  const char *want[] = {"guest node 1's memory is on host node 0, its vCPUs "
                        "on 1",
                        "guest nodes 0-1 share host node 0"};
  for (guint w = 0; w < G_N_ELEMENTS(want); w++) {
    gboolean found = FALSE;
    for (guint i = 0; i < q->not_given->len; i++)
      found = found || strcmp(g_ptr_array_index(q->not_given, i), want[w]) == 0;
    if (!found)
      g_error("not-given lacks \"%s\"", want[w]);
  }

  /* More 1 GiB pages than any pool has left: refused for memory, in
   * pages, as numa refuses it. */
  r->gnodes[1].mem_mib = 6144;
  g_autoptr(GError) e = qp_test_plan_nofit(h, r, QP_MODE_AUTO);
  g_assert_nonnull(strstr(e->message, "guest node 1 needs 6144 MiB of 1048576 "
                                      "KiB hugepages (6 pages) but the best "
                                      "node"));
}

/* ---- Memory the node really has (seed 003) ------------------------------ */

/* Makes node index I of H a live host's node: the kernel can give GIVE MiB
 * there now, USED MiB are in use. */
static void
measure(QpHost *h, guint i, guint64 give, guint64 used)
{
  h->nodes[i].measured = TRUE;
  h->nodes[i].can_give_mib = give;
  h->nodes[i].used_mib = used;
}

/* A running VM's claim of CLAIM MiB on NODE, of which its record says
 * RESIDENT MiB are there, its QEMU's resident set RSS MiB. */
static QpClaim *
running(int node, guint64 claim, guint64 resident, guint64 rss)
{
  QpClaim *c = qp_claim_new();
  c->id = g_strdup("running");
  QpNodeAmount m = {node, claim};
  g_array_append_val(c->mem, m);
  if (resident > 0) {
    QpNodeAmount r = {node, resident};
    g_array_append_val(c->resident, r);
  }
  c->qemu_rss_mib = rss;
  return c;
}

/* Memory used outside any claim leaves a node no room the old rule (total
 * less claims) would have given; balanced refuses in one line that names
 * the node, what is used outside claims and what was asked. */
static void
test_room_is_what_the_kernel_can_give(void)
{
  g_autoptr(QpHost) h = qp_test_recorded("intel-2s-smt.xml");
  const int n0 = h->nodes[0].id;
  QpNodeMemory before;
  qp_node_memory(h, NULL, NULL, 0, &before);
  g_assert_cmpuint(before.uncommitted_mib, >, 8000);
  measure(h, 0, 3000, 2600);
  measure(h, 1, 3000, 2600);
  QpNodeMemory mem;
  qp_node_memory(h, NULL, NULL, 0, &mem);
  g_assert_cmpuint(mem.room_mib, ==, before.uncommitted_mib);
  g_assert_cmpuint(mem.uncommitted_mib, ==, 3000);
  g_assert_cmpuint(mem.outside_mib, ==, 2600);
  g_assert_cmpuint(mem.outstanding_mib, ==, 0);

  g_autoptr(QpRequest) fits = request(1, 3000, 0);
  g_autoptr(QpPlan) p = qp_test_plan_ok(h, NULL, fits, QP_MODE_BALANCED);
  g_assert_cmpuint(qp_test_mem_on(p, n0) + qp_test_mem_on(p, h->nodes[1].id),
                   ==, 3000);

  /* Beyond one node: balanced spreads over both, as for any VM one node
   * cannot hold; beyond both: refused. */
  g_autoptr(QpRequest) two = request(1, 5000, 0);
  g_autoptr(QpPlan) p2 = qp_test_plan_ok(h, NULL, two, QP_MODE_BALANCED);
  g_assert_cmpuint(qp_test_mem_on(p2, n0), >, 0);
  g_assert_cmpuint(qp_test_mem_on(p2, h->nodes[1].id), >, 0);
  g_autoptr(QpRequest) big = request(1, 6001, 0);
  g_autoptr(GError) e = qp_test_plan_nofit(h, big, QP_MODE_BALANCED);
  g_test_message("%s", e->message);
  g_assert_nonnull(strstr(e->message, "6001 MiB"));
  g_autofree char *node = g_strdup_printf("node %d has", n0);
  g_assert_nonnull(strstr(e->message, node));
  g_assert_nonnull(strstr(e->message, "2600 MiB used outside any claim"));
  g_assert_nonnull(strstr(e->message, "the kernel can give 3000 MiB"));
}

/* A running VM that preallocated its claim holds it once: its claim, not
 * its claim and its pages again. */
static void
test_prealloc_counted_once(void)
{
  g_autoptr(QpHost) h = qp_test_recorded("intel-2s-smt.xml");
  const int n0 = h->nodes[0].id;
  /* 512 MiB claimed and resident: the kernel's 3000 MiB free are what is
   * left; the pages are in "used" but no longer outside claims. */
  measure(h, 0, 3000, 2600);
  g_autoptr(QpClaims) claims = qp_claims_new();
  g_ptr_array_add(claims->claims, running(n0, 512, 512, 600));
  QpNodeMemory mem;
  qp_node_memory(h, claims, NULL, 0, &mem);
  g_assert_cmpuint(mem.claimed_mib, ==, 512);
  g_assert_cmpuint(mem.outstanding_mib, ==, 0);
  g_assert_cmpuint(mem.outside_mib, ==, 2600 - 512);
  g_assert_cmpuint(mem.uncommitted_mib, ==, 3000);
}

/* A VM that touched only part of its memory still holds its whole claim:
 * the rest is outstanding, off what the kernel can give. */
static void
test_partly_touched_holds_whole_claim(void)
{
  g_autoptr(QpHost) h = qp_test_recorded("intel-2s-smt.xml");
  const int n0 = h->nodes[0].id;
  measure(h, 0, 3000, 600);
  g_autoptr(QpClaims) claims = qp_claims_new();
  g_ptr_array_add(claims->claims, running(n0, 1024, 256, 300));
  QpNodeMemory mem;
  qp_node_memory(h, claims, NULL, 0, &mem);
  g_assert_cmpuint(mem.claimed_mib, ==, 1024);
  g_assert_cmpuint(mem.outstanding_mib, ==, 768);
  g_assert_cmpuint(mem.outside_mib, ==, 600 - 256);
  g_assert_cmpuint(mem.uncommitted_mib, ==, 3000 - 768);
  QpPlacementOptions opts;
  qp_placement_options_init(&opts);
  opts.mode = QP_MODE_BALANCED;
  opts.hostnodes = hwloc_bitmap_alloc();
  hwloc_bitmap_set(opts.hostnodes, (unsigned)n0);
  g_assert_true(fits_on(h, claims, &opts, n0, 3000 - 768, 0));
  g_assert_false(fits_on(h, claims, &opts, n0, 3000 - 768 + 1, 0));
  qp_placement_options_clear(&opts);
}

/* A node whose claims have more left to take than the kernel can give
 * there (memory used since, another VM's pages bound there) says so in
 * `status`, by how much; a node that can keep them says nothing of it. */
static void
test_status_says_short(void)
{
  g_autoptr(QpHost) h = qp_test_recorded("intel-2s-smt.xml");
  const int n0 = h->nodes[0].id;
  g_autoptr(QpClaims) claims = qp_claims_new();
  g_ptr_array_add(claims->claims, running(n0, 1024, 256, 300));
  measure(h, 0, 500, 2600);
  measure(h, 1, 3000, 600);
  g_autofree char *text = qp_status_to_text(h, claims, NULL);
  g_test_message("%s", text);
  g_autofree char *want = g_strdup_printf("node %d: ", n0);
  const char *line = strstr(text, want);
  g_assert_nonnull(line);
  const char *now = strstr(line, "  now: ");
  g_assert_nonnull(now);
  g_autofree char *now_line = g_strndup(now, strcspn(now, "\n"));
  g_assert_nonnull(strstr(now_line, "768 claimed not yet resident"));
  g_assert_nonnull(strstr(now_line, "; short by 268 MiB: the claims not yet "
                                    "resident are more than the kernel can "
                                    "give"));
  /* Enough there again: nothing said. */
  measure(h, 0, 768, 2600);
  g_autofree char *ok = qp_status_to_text(h, claims, NULL);
  g_assert_null(strstr(ok, "short by"));
}

/* A record is trusted only as far as its own VM: what it says is resident
 * counts up to its claim on that node, and in all up to its QEMU's resident
 * set; a record whose QEMU's resident set is not known counts nothing. */
static void
test_resident_trusted_as_far_as_its_vm(void)
{
  g_autoptr(QpHost) h = qp_test_recorded("intel-2s-smt.xml");
  const int n0 = h->nodes[0].id, n1 = h->nodes[1].id;
  g_autoptr(QpClaim) over = running(n0, 1024, 50000, 60000);
  g_assert_cmpuint(qp_claim_resident_mib(over, n0), ==, 1024);
  g_assert_cmpuint(qp_claim_resident_mib(over, n1), ==, 0);
  g_autoptr(QpClaim) small = running(n0, 1024, 1024, 100);
  g_assert_cmpuint(qp_claim_resident_mib(small, n0), ==, 100);
  g_autoptr(QpClaim) unknown = running(n0, 1024, 1024, 0);
  g_assert_cmpuint(qp_claim_resident_mib(unknown, n0), ==, 0);
  /* Over two nodes, cut alike: 1000 + 1000 resident, 1000 RSS. */
  g_autoptr(QpClaim) both = running(n0, 1000, 1000, 1000);
  QpNodeAmount m = {n1, 1000};
  g_array_append_val(both->mem, m);
  g_array_append_val(both->resident, m);
  g_assert_cmpuint(qp_claim_resident_mib(both, n0), ==, 500);
  g_assert_cmpuint(qp_claim_resident_mib(both, n1), ==, 500);
  /* A host that is not measured (recorded, synthetic): the old rule,
   * whatever the records say. */
  g_autoptr(QpClaims) claims = qp_claims_new();
  g_ptr_array_add(claims->claims, running(n0, 1024, 1024, 2000));
  QpNodeMemory mem;
  qp_node_memory(h, claims, NULL, 0, &mem);
  g_assert_false(mem.measured);
  g_assert_cmpuint(mem.uncommitted_mib, ==, mem.room_mib);
  g_assert_cmpuint(mem.outside_mib, ==, 0);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/plan/memory/page-sizes-are-claimed-apart",
                  test_classes_are_apart);
  g_test_add_func("/plan/memory/balanced-spreads-a-short-pool",
                  test_balanced_spreads_a_class);
  g_test_add_func("/plan/memory/refusal-names-hugepage-pools",
                  test_refusal_names_pools);
  g_test_add_func("/plan/memory/caller-bound-pieces", test_caller_bound_pieces);
  g_test_add_func("/plan/memory/one-to-one-claims-without-binding",
                  test_one_to_one_flat);
  g_test_add_func("/plan/memory/touched-hugepages-counted-once",
                  test_touched_pages_counted_once);
  g_test_add_func("/plan/memory/status-free-is-what-fits",
                  test_status_free_is_what_fits);
  g_test_add_func("/plan/memory/ledger-and-status-per-page-size",
                  test_ledger_and_status);
  g_test_add_func("/plan/memory/best-effort-per-page-size",
                  test_best_effort_per_page_size);
  g_test_add_func("/plan/memory/room/what-the-kernel-can-give",
                  test_room_is_what_the_kernel_can_give);
  g_test_add_func("/plan/memory/room/prealloc-counted-once",
                  test_prealloc_counted_once);
  g_test_add_func("/plan/memory/room/partly-touched-holds-whole-claim",
                  test_partly_touched_holds_whole_claim);
  g_test_add_func("/plan/memory/room/status-says-short",
                  test_status_says_short);
  g_test_add_func("/plan/memory/room/resident-trusted-as-far-as-its-vm",
                  test_resident_trusted_as_far_as_its_vm);
  return g_test_run();
}
