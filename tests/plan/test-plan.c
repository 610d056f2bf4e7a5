/* The placement planner (topology/plan/) on hand-built hosts. What every mode
 * of the planner shares: the host's distances, CPU kinds and CPU-less nodes,
 * the CPUs allowed, the caller's nodes, claims and the host reserve, refusals,
 * hugepages, devices, options, --vnuma, scale, and the recorded hosts of
 * tests/data/topologies. */
#include "tests/plan/plan-hosts.h"

#include <string.h>

static void
host_allow(QpHost *h, const char *list)
{
  hwloc_bitmap_t set = NULL;
  g_assert_true(qp_list_parse(list, "allowed", QP_LIST_MAX_INDEX, &set, NULL));
  hwloc_bitmap_and(h->allowed, h->allowed, set);
  for (guint i = 0; i < h->n_nodes; i++)
    hwloc_bitmap_and(h->nodes[i].cpus, h->nodes[i].cpus, set);
  for (guint c = 0; c < h->n_cpus; c++)
    h->cpus[c].allowed = hwloc_bitmap_isset(set, h->cpus[c].id);
  hwloc_bitmap_free(set);
}

/* 2 sockets x 4 nodes, 4 cores per node, no SMT, SLIT 10/12/32. */
static QpHost *
two_socket_8_nodes(void)
{
  QpHost *h = host_new(8, 8192, 32);
  for (guint i = 0; i < 8; i++)
    for (guint j = 0; j < 8; j++)
      if (i != j && i / 4 == j / 4)
        h->distance[i * 8 + j] = 12;
  for (int c = 0; c < 32; c++)
    host_core(h, c / 4, c / 16, 0, c, -1);
  host_done(h);
  return h;
}

/* Nodes 0 and 1 with 4 cores and 8 GiB each, node 2 a CPU-less 32 GiB
 * memory node (CXL), SLIT 10/20/30. */
static QpHost *
cpuless(void)
{
  QpHost *h = host_new(3, 8192, 20);
  h->nodes[2].total_mib = h->nodes[2].free_mib = 32768;
  guint d[] = {10, 20, 30, 20, 10, 30, 30, 30, 10};
  memcpy(h->distance, d, sizeof(d));
  for (int c = 0; c < 8; c++)
    host_core(h, c / 4, c / 4, 0, c, -1);
  host_done(h);
  return h;
}

/* Seed 000 config 0_numa_no_pinning (seed measured: triad 40862 MB/s, read
 * 38295 MB/s, latency 117.74 ns): mode none plans nothing. */
static void
test_seed_none(void)
{
  g_autoptr(TestHost) h = epyc(NULL);
  g_autoptr(QpRequest) r = seed_request(FALSE);
  g_autoptr(Opts) o = opts_new(QP_MODE_NONE, NULL);
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  g_assert_cmpint(p->mode, ==, QP_MODE_NONE);
  g_assert_cmpuint(p->n_mem, ==, 0);
  g_assert_null(p->mem_nodes);
  g_assert_cmpuint(p->claim_mem->len, ==, 0);
  assert_set(p->process_cpus, "0-31");
}

/* ---- Distances ---------------------------------------------------------- */

/* Nodes 0 and 4 hold the most memory, but a guest that needs two nodes gets
 * two on one socket (distance 12), not 0 and 4 (distance 32). Its 4 vCPUs
 * fit node 0's CPUs: they float there, and node 0 holds all it can of the
 * memory, node 1 the rest. */
static void
test_distance_same_socket(void)
{
  g_autoptr(TestHost) h = two_socket_8_nodes();
  h->nodes[0].total_mib = h->nodes[4].total_mib = 16384;
  g_autoptr(QpRequest) r = request(4, 20000);
  g_autoptr(Opts) o = opts_new(QP_MODE_BALANCED, NULL);
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  assert_set(p->mem[0].host_nodes, "0-1");
  assert_set(p->process_cpus, "0-3");
  g_assert_cmpuint(claimed_on(p, 0), ==, 16384); /* all node 0 has */
  g_assert_cmpuint(claimed_on(p, 1), ==, 20000 - 16384);
  g_assert_cmpuint(load_on(p, 0), ==, 4);
  g_assert_cmpuint(load_on(p, 1), ==, 0);
  g_assert_true(has_text(p->reasons, "max distance 12"));

  /* The same by CPUs: 6 vCPUs need two 4-core nodes. They float over
   * both; the memory, which node 1 holds alone, is bound there (the
   * tightest node that holds it), so that the kernel puts every page where
   * the claim says and node 0 stays whole. */
  g_autoptr(QpRequest) r2 = request(6, 2048);
  g_autoptr(QpPlan) p2 = plan_ok(h, NULL, r2, o);
  assert_set(p2->host_nodes, "0-1");
  assert_set(p2->process_cpus, "0-7");
  assert_set(p2->mem[0].host_nodes, "1");
  g_assert_cmpuint(claimed_on(p2, 1), ==, 2048);
  g_assert_cmpuint(claimed_on(p2, 0), ==, 0);
}

/* ---- CPU kinds ---------------------------------------------------------- */

static void
test_kinds_no_straddle(void)
{
  g_autoptr(TestHost) h = hybrid();
  g_autoptr(Opts) o = opts_new(QP_MODE_BALANCED, NULL);

  /* Fits on the P-cores: the most performant kind. */
  g_autoptr(QpRequest) r = request(4, 4096);
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  assert_set(p->process_cpus, "0-7");
  assert_set(p->startup_cpus, "0-7");
  g_assert_true(has_text(p->reasons, "CPU kind 1"));

  /* 12 vCPUs only fit on the 12 E-cores: still one kind. */
  g_autoptr(QpRequest) r2 = request(12, 4096);
  g_autoptr(QpPlan) p2 = plan_ok(h, NULL, r2, o);
  assert_set(p2->process_cpus, "8-19");
  g_assert_cmpuint(p2->warnings->len, ==, 0);

  /* 16 vCPUs fit no kind: without --affinity that is an error. */
  g_autoptr(QpRequest) r3 = request(16, 4096);
  g_autoptr(GError) error = NULL;
  g_autoptr(QpPlan) p3 = qp_plan_compute(h, NULL, r3, &o->o, &error);
  g_assert_null(p3);
  assert_nofit(error, "guest needs 16 CPUs for 16 vCPUs but only 8 are "
                      "usable on host nodes 0 of CPU kind 1");
  assert_nofit(error, "--affinity spanning kinds");
  /* Memory short: no word of CPU kinds, nor of --smt=strict in one-to-one
   * (outside check, stop 43: both were said for memory too). */
  g_autoptr(QpRequest) big = request(2, 1 << 20);
  g_autoptr(GError) mem_error = NULL;
  g_autoptr(QpPlan) none = qp_plan_compute(h, NULL, big, &o->o, &mem_error);
  g_assert_null(none);
  assert_nofit(mem_error, "MiB uncommitted");
  g_assert_null(strstr(mem_error->message, "kind"));
  g_autoptr(Opts) strict = opts_new(QP_MODE_ONE_TO_ONE, NULL);
  strict->o.smt = QP_SMT_STRICT;
  g_clear_error(&mem_error);
  g_autoptr(QpPlan) none2 =
      qp_plan_compute(h, NULL, big, &strict->o, &mem_error);
  g_assert_null(none2);
  assert_nofit(mem_error, "MiB uncommitted");
  g_assert_null(strstr(mem_error->message, "--smt=strict"));

  /* ... and with an --affinity spanning both kinds, a warning; the startup
   * set is the largest same-kind subset (the 12 E-cores). */
  g_autoptr(Opts) o4 = opts_new(QP_MODE_BALANCED, "0-19");
  g_autoptr(QpPlan) p4 = plan_ok(h, NULL, r3, o4);
  assert_set(p4->process_cpus, "0-19");
  assert_set(p4->startup_cpus, "8-19");
  g_assert_true(has_text(p4->warnings, "straddle CPU kinds"));

  /* one-to-one takes P-cores, one PU each. */
  g_autoptr(Opts) o5 = opts_new(QP_MODE_ONE_TO_ONE, NULL);
  g_autoptr(QpPlan) p5 = plan_ok(h, NULL, r, o5);
  assert_vcpu(p5, 0, "0");
  assert_vcpu(p5, 3, "6");
  assert_set(p5->dedicated, "0-7");
}

/* ---- CPU-less memory node ------------------------------------------------ */

static void
test_cpuless_node(void)
{
  g_autoptr(TestHost) h = cpuless();
  g_autoptr(Opts) o = opts_new(QP_MODE_BALANCED, NULL);

  /* Fits on a node with CPUs: the CPU-less node stays out. */
  g_autoptr(QpRequest) r = request(4, 4096);
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  assert_set(p->mem[0].host_nodes, "0");
  assert_set(p->process_cpus, "0-3");

  /* 12 GiB fit on no single node with CPUs; 0+1 hold 16 GiB and 8 CPUs at
   * distance 20, 0+2 hold 40 GiB at distance 30: the closer pair wins. */
  g_autoptr(QpRequest) r2 = request(4, 12288);
  g_autoptr(QpPlan) p2 = plan_ok(h, NULL, r2, o);
  assert_set(p2->mem[0].host_nodes, "0-1");

  /* 20 GiB: only the CPU-less node can add that memory. It is used for
   * memory only: the CPUs come from node 0. */
  g_autoptr(QpRequest) r3 = request(4, 20480);
  g_autoptr(QpPlan) p3 = plan_ok(h, NULL, r3, o);
  assert_set(p3->mem[0].host_nodes, "0,2");
  assert_set(p3->process_cpus, "0-3");
  g_assert_cmpuint(load_on(p3, 2), ==, 0);
  g_assert_cmpuint(load_on(p3, 0), ==, 4);

  /* numa mode never maps a guest node to it: a third guest node shares,
   * which two nodes with CPUs for three guest nodes make the host's shape:
   * the plan says it, no warning does. */
  g_autoptr(QpRequest) r4 = request(3, 3072);
  request_vnuma(r4, 3, 1, 1024);
  g_autoptr(Opts) o4 = opts_new(QP_MODE_NUMA, NULL);
  g_autoptr(QpPlan) p4 = plan_ok(h, NULL, r4, o4);
  assert_set(p4->mem[0].host_nodes, "0");
  assert_set(p4->mem[1].host_nodes, "1");
  assert_set(p4->mem[2].host_nodes, "0");
  g_assert_cmpuint(p4->warnings->len, ==, 0);
  g_assert_true(has_text(p4->reasons,
                         "guest node 2 -> host node 0: shared with guest node "
                         "0, the least loaded node with room left: 2 host "
                         "nodes with CPUs for 3 guest nodes"));
}

/* A CPU-less node (HBM, CXL) close to node 0: it joins a set only when the
 * nodes with CPUs cannot hold the memory, though it is closer than they
 * are, and though with it fewer nodes would do (outside check, stop 43:
 * HBM and MCDRAM nodes were taken first). */
static void
test_cpuless_last(void)
{
  g_autoptr(TestHost) h = host_new(4, 8192, 20);
  h->nodes[3].total_mib = h->nodes[3].free_mib = 32768;
  guint d[] = {10, 20, 20, 15, 20, 10, 20, 25, 20, 20, 10, 25, 15, 25, 25, 10};
  memcpy(h->distance, d, sizeof(d));
  for (int c = 0; c < 12; c++)
    host_core(h, c / 4, 0, 0, c, -1);
  host_done(h);
  g_autoptr(Opts) o = opts_new(QP_MODE_BALANCED, NULL);
  g_autoptr(QpRequest) r = request(2, 12288);
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  g_assert_cmpuint(claimed_on(p, 3), ==, 0);
  g_assert_cmpuint(hwloc_bitmap_weight(p->host_nodes), ==, 2);
  g_autoptr(QpRequest) r2 = request(2, 20480);
  g_autoptr(QpPlan) p2 = plan_ok(h, NULL, r2, o);
  assert_set(p2->host_nodes, "0-2");
  g_assert_cmpuint(claimed_on(p2, 3), ==, 0);
  /* Only with it does the memory fit: then it joins. */
  g_autoptr(QpRequest) r3 = request(2, 40960);
  g_autoptr(QpPlan) p3 = plan_ok(h, NULL, r3, o);
  g_assert_cmpuint(claimed_on(p3, 3), >, 0);
}

/* ---- Allowed CPUs (cgroup) ---------------------------------------------- */

/* A guest without vNUMA whose RAM backend the caller bound to host node 1
 * (libvirt's <numatune mode='strict' nodeset='1'>: host-nodes on
 * -machine memory-backend=): the memory is claimed on node 1 in every mode,
 * kept as the caller's, and the vCPUs go to node 1 too, although node 0 is
 * the emptier node and qemu-pin alone would choose it. */
static void
test_caller_nodes_without_vnuma(gconstpointer data)
{
  QpMode mode = GPOINTER_TO_INT(data);
  g_autoptr(TestHost) h = intel_2s();
  g_autoptr(QpClaims) c = qp_claims_new();
  claim_mem(claim_add(c, "busy"), 1, 32768);
  g_autoptr(QpRequest) r = request(2, 4096);
  r->host_nodes = list("1");
  r->policy = QP_POLICY_BIND;
  g_autoptr(Opts) o = opts_new(mode, NULL);
  g_autoptr(QpPlan) p = plan_ok(h, c, r, o);
  g_assert_cmpuint(claimed_on(p, 1), ==, 4096);
  g_assert_cmpuint(claimed_on(p, 0), ==, 0);
  g_assert_cmpuint(p->n_mem, ==, 1);
  g_assert_cmpint(p->mem[0].gnode, ==, -1);
  g_assert_true(p->mem[0].caller_set);
  g_assert_cmpint(p->mem[0].policy, ==, QP_POLICY_BIND);
  assert_set(p->mem[0].host_nodes, "1");
  g_auto(hwloc_bitmap_t) node1 = list("8-15,24-31");
  for (guint v = 0; v < p->n_vcpus; v++)
    g_assert_true(hwloc_bitmap_isincluded(p->vcpu_cpus[v], node1));
  assert_set(p->host_nodes, "1");
}

static void
test_cgroup_subset(void)
{
  g_autoptr(TestHost) h = epyc(NULL);
  host_allow(h, "2-5,18-21");
  const QpMode modes[] = {QP_MODE_BALANCED, QP_MODE_NUMA, QP_MODE_ONE_TO_ONE};
  for (gsize m = 0; m < G_N_ELEMENTS(modes); m++) {
    g_autoptr(QpRequest) r = request(4, 2048);
    g_autoptr(Opts) o = opts_new(modes[m], NULL);
    g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o); /* checks allowed */
    g_assert_true(hwloc_bitmap_isincluded(p->process_cpus, h->allowed));
    if (modes[m] != QP_MODE_ONE_TO_ONE) {
      /* node 0 holds 2,3,18,19: 4 CPUs, one node */
      assert_set(p->process_cpus, "2-3,18-19");
    } else {
      /* 4 free cores: 2,3 on node 0 and 4,5 on node 1 */
      assert_vcpu(p, 0, "2");
      assert_vcpu(p, 1, "3");
      assert_vcpu(p, 2, "4");
      assert_vcpu(p, 3, "5");
    }
  }
}

/* ---- Claims ---------------------------------------------------------------
 */

static void
test_claims_dedicated_never_reused(void)
{
  g_autoptr(TestHost) h = epyc(NULL);
  g_autoptr(QpClaims) c = qp_claims_new();
  QpClaim *other = claim_add(c, "other");
  hwloc_bitmap_set(other->dedicated, 0);
  hwloc_bitmap_set(other->dedicated, 16);
  hwloc_bitmap_set(other->dedicated, 5); /* only one PU of core 5/21 */

  g_autoptr(QpRequest) r = request(3, 1024);
  g_autoptr(Opts) o = opts_new(QP_MODE_ONE_TO_ONE, NULL);
  g_autoptr(QpPlan) p = plan_ok(h, c, r, o);
  assert_vcpu(p, 0, "1");
  assert_vcpu(p, 1, "2");
  assert_vcpu(p, 2, "3");
  g_assert_false(hwloc_bitmap_intersects(p->dedicated, other->dedicated));

  /* A core with one PU dedicated elsewhere is not free either: node 1 has
   * 3 free cores (6, 7 and 4), not core 5/21. */
  g_autoptr(QpRequest) r2 = request(4, 1024);
  g_autoptr(Opts) o2 = opts_new(QP_MODE_ONE_TO_ONE, "4-7,20-23");
  o2->o.smt = QP_SMT_STRICT;
  g_autoptr(GError) error = NULL;
  g_autoptr(QpPlan) p2 = qp_plan_compute(h, c, r2, &o2->o, &error);
  g_assert_null(p2);
  assert_nofit(error, "needs 4 free cores but only 3 are free");
  assert_nofit(error, "(3 CPUs dedicated to other VMs)");

  /* Balanced floats around them. */
  g_autoptr(Opts) o3 = opts_new(QP_MODE_BALANCED, NULL);
  g_autoptr(QpPlan) p3 = plan_ok(h, c, r, o3);
  assert_set(p3->process_cpus, "1-3,17-19");
}

static void
test_claims_memory(void)
{
  g_autoptr(TestHost) h = epyc(NULL);
  g_autoptr(QpClaims) c = qp_claims_new();
  QpClaim *a = claim_add(c, "a");
  claim_mem(a, 0, 12000);
  claim_mem(a, 1, 10000);
  QpClaim *b = claim_add(c, "b");
  claim_mem(b, 2, 3000);
  claim_mem(b, 3, 9000);

  /* spread: the most uncommitted memory: node 2 (13384 MiB). */
  g_autoptr(QpRequest) r = request(2, 2048);
  g_autoptr(Opts) o = opts_new(QP_MODE_BALANCED, NULL);
  g_autoptr(QpPlan) p = plan_ok(h, c, r, o);
  assert_set(p->mem[0].host_nodes, "2");
  g_assert_cmpuint(claimed_on(p, 2), ==, 2048);
  g_assert_true(has_text(p->reasons, "13384 MiB uncommitted"));

  /* pack: the tightest fit: node 0 (4384 MiB). */
  o->o.strategy = QP_STRATEGY_PACK;
  g_autoptr(QpPlan) p2 = plan_ok(h, c, r, o);
  assert_set(p2->mem[0].host_nodes, "0");

  /* 5000 MiB no longer fit on node 0: pack takes node 1 (6384). */
  g_autoptr(QpRequest) r3 = request(2, 5000);
  g_autoptr(QpPlan) p3 = plan_ok(h, c, r3, o);
  assert_set(p3->mem[0].host_nodes, "1");

  /* numa mode with one guest node: least loaded, then most memory. */
  QpNodeLoad l = {.node = 2, .vcpus = 8};
  g_array_append_val(b->load, l);
  g_autoptr(Opts) o4 = opts_new(QP_MODE_NUMA, NULL);
  g_autoptr(QpPlan) p4 = plan_ok(h, c, r, o4);
  /* node 2 carries 8 shared vCPUs; of the idle nodes 3 has the most
   * uncommitted memory (7384 MiB) */
  assert_set(p4->mem[0].host_nodes, "3");
  assert_set(p4->process_cpus, "12-15,28-31");
}

/* Claims on epyc()'s four 16384 MiB nodes, one claim "a" that leaves
 * LEFT[n] MiB uncommitted on node n. */
static QpClaims *
epyc_left(const guint64 *left)
{
  QpClaims *c = qp_claims_new();
  QpClaim *a = claim_add(c, "a");
  for (int n = 0; n < 4; n++)
    claim_mem(a, n, 16384 - left[n]);
  return c;
}

/* A guest that must span nodes: spread puts its vCPUs and all the memory
 * the roomier node holds there and the rest on the other node, pack fills
 * the tightest node first; either way what is left stays together, where a
 * later guest fits on one node (bench/simulate: even shares left a
 * fragment on both nodes, and the next guest spanning). */
static void
test_spanning_memory_split(void)
{
  g_autoptr(TestHost) h = epyc(NULL);
  g_autoptr(QpClaims) c = epyc_left((guint64[]){8000, 10000, 0, 0});
  g_autoptr(QpRequest) r = request(2, 12000);

  g_autoptr(Opts) spread = opts_new(QP_MODE_BALANCED, NULL);
  g_autoptr(QpPlan) ps = plan_ok(h, c, r, spread);
  assert_set(ps->mem[0].host_nodes, "0-1");
  assert_set(ps->process_cpus, "4-7,20-23"); /* node 1's CPUs */
  g_assert_cmpuint(claimed_on(ps, 1), ==, 10000);
  g_assert_cmpuint(claimed_on(ps, 0), ==, 2000);
  g_assert_cmpuint(load_on(ps, 1), ==, 2);
  g_assert_cmpuint(load_on(ps, 0), ==, 0);
  g_assert_true(has_text(ps->reasons, "vCPUs float over host node 1"));

  g_autoptr(Opts) pack = opts_new(QP_MODE_BALANCED, NULL);
  pack->o.strategy = QP_STRATEGY_PACK;
  g_autoptr(QpPlan) pp = plan_ok(h, c, r, pack);
  assert_set(pp->mem[0].host_nodes, "0-1");
  g_assert_cmpuint(claimed_on(pp, 0), ==, 8000);
  g_assert_cmpuint(claimed_on(pp, 1), ==, 4000);

  /* The next 6000 MiB guest: on one node after either (node 1 after pack,
   * node 0 after spread). */
  QpClaim *after_pack = qp_claim_from_plan(pp, "b", "b");
  g_ptr_array_add(c->claims, after_pack);
  g_autoptr(QpRequest) r2 = request(2, 6000);
  g_autoptr(QpPlan) next = plan_ok(h, c, r2, pack);
  assert_set(next->mem[0].host_nodes, "1");
  g_ptr_array_remove(c->claims, after_pack);
  g_ptr_array_add(c->claims, qp_claim_from_plan(ps, "b", "b"));
  g_autoptr(QpPlan) next2 = plan_ok(h, c, r2, spread);
  assert_set(next2->mem[0].host_nodes, "0");

  /* Interleave spreads the pages evenly whatever runs where: even shares,
   * the vCPUs over the set. */
  g_autoptr(Opts) il = opts_new(QP_MODE_BALANCED, NULL);
  il->o.policy = QP_POLICY_INTERLEAVE;
  g_ptr_array_set_size(c->claims, 1);
  g_autoptr(QpPlan) pi = plan_ok(h, c, r, il);
  g_assert_cmpuint(claimed_on(pi, 0), ==, 6000);
  g_assert_cmpuint(claimed_on(pi, 1), ==, 6000);
  assert_set(pi->process_cpus, "0-7,16-23");
}

/* Spread, a guest that fills one node and a fragment of another: of the
 * pairs that hold it, the one that leaves the least over, so the fragment
 * lands on the node that holds it most tightly and the roomy nodes stay
 * whole for the next guest. Even shares over the two roomiest nodes (0 and
 * 3, as before) left 3500 and 2500 MiB there, and a 9000 MiB guest then
 * spanned. */
static void
test_spanning_fragment_on_tightest(void)
{
  g_autoptr(TestHost) h = epyc(NULL);
  g_autoptr(QpClaims) c = epyc_left((guint64[]){10000, 7000, 3500, 9000});
  g_autoptr(QpRequest) r = request(2, 13000);
  g_autoptr(Opts) o = opts_new(QP_MODE_BALANCED, NULL);
  g_autoptr(QpPlan) p = plan_ok(h, c, r, o);
  assert_set(p->host_nodes, "0,2");
  assert_set(p->mem[0].host_nodes, "0,2");
  assert_set(p->process_cpus, "0-3,16-19");
  g_assert_cmpuint(claimed_on(p, 0), ==, 10000);
  g_assert_cmpuint(claimed_on(p, 2), ==, 3000);
  g_assert_true(has_text(p->reasons, "3000 MiB on node 2"));

  /* Nodes 1 and 3 untouched: a 9000 MiB guest fits node 3 alone. */
  g_ptr_array_add(c->claims, qp_claim_from_plan(p, "b", "b"));
  g_autoptr(QpRequest) r2 = request(2, 9000);
  g_autoptr(QpPlan) p2 = plan_ok(h, c, r2, o);
  assert_set(p2->host_nodes, "3");
}

/* A balanced VM whose vCPUs need two nodes while one of them has no room
 * for memory (its memory all the host's reserve): the memory is bound to
 * the node that claims it only, so that the vCPUs on the other node do not
 * allocate there first (outside check, stop 43: bound to both, with pack). */
static void
test_bound_where_claimed(void)
{
  g_autoptr(TestHost) h = epyc(NULL);
  g_autoptr(QpRequest) r = request(16, 8192);
  for (int strategy = 0; strategy < 2; strategy++) {
    g_autoptr(Opts) o = opts_new(QP_MODE_BALANCED, NULL);
    o->o.strategy = strategy ? QP_STRATEGY_PACK : QP_STRATEGY_SPREAD;
    o->o.node_reserve = g_array_new(FALSE, TRUE, sizeof(QpNodeAmount));
    QpNodeAmount n0 = {.node = 0, .mib = 16384};
    g_array_append_val(o->o.node_reserve, n0);
    g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
    g_assert_cmpuint(hwloc_bitmap_weight(p->host_nodes), ==, 2);
    g_assert_cmpuint(claimed_on(p, 0), ==, 0);
    g_assert_false(hwloc_bitmap_isset(p->mem[0].host_nodes, 0));
  }
}

/* A spanning guest's claims follow the policy as the kernel places pages
 * (outside check, stop 43: interleave was claimed as pack filled, and
 * preferred split evenly, gigabytes away from where the pages went). */
static void
test_claims_follow_policy(void)
{
  g_autoptr(TestHost) h = epyc(NULL);
  g_autoptr(QpRequest) r = request(4, 20480);
  for (int strategy = 0; strategy < 2; strategy++) {
    g_autoptr(Opts) o = opts_new(QP_MODE_BALANCED, NULL);
    o->o.strategy = strategy ? QP_STRATEGY_PACK : QP_STRATEGY_SPREAD;
    o->o.policy = QP_POLICY_INTERLEAVE;
    g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
    /* Interleave: even over the nodes it is bound to. */
    g_assert_cmpuint(hwloc_bitmap_weight(p->mem[0].host_nodes), ==, 2);
    int a = hwloc_bitmap_first(p->mem[0].host_nodes);
    int b = hwloc_bitmap_next(p->mem[0].host_nodes, a);
    g_assert_cmpuint(claimed_on(p, a), ==, 10240);
    g_assert_cmpuint(claimed_on(p, b), ==, 10240);
    /* Preferred: one node, filled first; the rest falls back elsewhere. */
    o->o.policy = QP_POLICY_PREFERRED;
    g_autoptr(QpPlan) q = plan_ok(h, NULL, r, o);
    g_assert_cmpuint(hwloc_bitmap_weight(q->mem[0].host_nodes), ==, 1);
    int n = hwloc_bitmap_first(q->mem[0].host_nodes);
    g_assert_cmpuint(claimed_on(q, n), >=, 15000);
    g_assert_cmpuint(claimed_on(q, n), >, 20480 / 2);
  }
}

/* A node reserve and the per-node override shrink uncommitted memory. */
static void
test_reserve(void)
{
  g_autoptr(TestHost) h = epyc(NULL);
  g_autoptr(QpRequest) r = request(2, 15000);
  g_autoptr(Opts) o = opts_new(QP_MODE_NUMA, NULL);
  o->o.reserve_mib = 2048;
  o->o.node_reserve = g_array_new(FALSE, TRUE, sizeof(QpNodeAmount));
  QpNodeAmount n3 = {.node = 3, .mib = 512};
  g_array_append_val(o->o.node_reserve, n3);
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  assert_set(p->mem[0].host_nodes, "3");

  g_autoptr(QpRequest) r2 = request(2, 16000);
  g_autoptr(GError) error = NULL;
  g_autoptr(QpPlan) p2 = qp_plan_compute(h, NULL, r2, &o->o, &error);
  g_assert_null(p2);
  assert_nofit(error, "guest needs 16000 MiB but the best node 3 has only "
                      "15872 MiB uncommitted (16384 MiB total, 0 MiB "
                      "claimed, 512 MiB reserved)");
}

static void
test_claims_blocked_nodes(void)
{
  g_autoptr(TestHost) h = epyc(NULL);
  g_autoptr(QpClaims) c = qp_claims_new();
  hwloc_bitmap_set(c->blocked_nodes, 0);
  hwloc_bitmap_set(c->blocked_nodes, 2);
  g_ptr_array_add(c->warnings, g_strdup("ledger record x is unreadable"));

  g_autoptr(QpRequest) r = request(8, 4096);
  g_autoptr(Opts) o = opts_new(QP_MODE_BALANCED, NULL);
  g_autoptr(QpPlan) p = plan_ok(h, c, r, o);
  assert_set(p->mem[0].host_nodes, "1");
  g_assert_true(has_text(p->warnings, "ledger record x is unreadable"));

  /* numa: 4 guest nodes on the 2 unblocked nodes, sharing. */
  g_autoptr(QpRequest) r2 = seed_request(FALSE);
  g_autoptr(Opts) o2 = opts_new(QP_MODE_NUMA, NULL);
  g_autoptr(QpPlan) p2 = plan_ok(h, c, r2, o2);
  for (guint g = 0; g < 4; g++)
    g_assert_false(hwloc_bitmap_isset(p2->mem[g].host_nodes, 0) ||
                   hwloc_bitmap_isset(p2->mem[g].host_nodes, 2));
  g_assert_true(has_text(p2->warnings, "no assignment with distinct host "
                                       "nodes fits"));

  /* A caller's host-nodes on a blocked node names it. */
  g_autoptr(QpRequest) r3 = seed_request(TRUE);
  g_autoptr(GError) error = NULL;
  g_autoptr(QpPlan) p3 = qp_plan_compute(h, c, r3, &o2->o, &error);
  g_assert_null(p3);
  assert_nofit(error, "host-nodes 0 of guest node 0: node 0 is fully "
                      "claimed");
}

/* ---- Errors ------------------------------------------------------------- */

static void
test_errors_name_shortfall(void)
{
  g_autoptr(TestHost) h = epyc(NULL);
  g_autoptr(QpClaims) c = qp_claims_new();
  QpClaim *a = claim_add(c, "a");
  claim_mem(a, 2, 12288);
  for (int n = 0; n < 4; n++)
    if (n != 2)
      claim_mem(a, n, 14000);

  struct {
    QpMode mode;
    guint vcpus;
    guint64 mem;
    const char *affinity;
    const char *needle;
  } cases[] = {
      {QP_MODE_NUMA, 2, 8192, NULL,
       "guest needs 8192 MiB but the best node 2 has only 4096 MiB "
       "uncommitted (16384 MiB total, 12288 MiB claimed)"},
      {QP_MODE_BALANCED, 2, 20000, NULL,
       "guest needs 20000 MiB but the usable host nodes have only 11248 MiB "
       "uncommitted together; the best node 2 has 4096 MiB uncommitted"},
      {QP_MODE_BALANCED, 40, 1024, NULL,
       "guest needs 40 CPUs for 40 vCPUs but only 32 are usable on host "
       "nodes 0-3"},
      {QP_MODE_NUMA, 12, 1024, NULL,
       "guest needs 12 usable CPUs (one host node per guest node) but the "
       "best host node 0 has only 8 left"},
      {QP_MODE_ONE_TO_ONE, 40, 1024, NULL,
       "one-to-one needs 40 CPUs on "
       "free cores but only 32 are free"},
  };
  for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autoptr(QpRequest) r = request(cases[i].vcpus, cases[i].mem);
    g_autoptr(Opts) o = opts_new(cases[i].mode, cases[i].affinity);
    g_autoptr(GError) error = NULL;
    g_autoptr(QpPlan) p = qp_plan_compute(h, c, r, &o->o, &error);
    if (p != NULL)
      g_error("case %" G_GSIZE_FORMAT " planned", i);
    assert_nofit(error, cases[i].needle);
  }

  /* A caller's host-nodes that does not fit names that node. */
  g_autoptr(QpRequest) r = request(2, 8192);
  request_vnuma(r, 1, 2, 8192);
  r->gnodes[0].host_nodes = list("2");
  r->gnodes[0].policy = QP_POLICY_BIND;
  g_autoptr(Opts) o = opts_new(QP_MODE_NUMA, NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(QpPlan) p = qp_plan_compute(h, c, r, &o->o, &error);
  g_assert_null(p);
  assert_nofit(error, "guest node 0 needs 8192 MiB on its host-nodes 2 but "
                      "node 2 has only 4096 MiB uncommitted");
}

/* ---- Hugepages ---------------------------------------------------------- */

static void
test_hugepages(void)
{
  g_autoptr(TestHost) h = epyc(NULL);
  for (int n = 0; n < 4; n++) {
    QpHugePool pool = {.page_kib = 2048, .total = 2048, .free = 2048};
    if (n == 1)
      pool.total = pool.free = 4096; /* 8 GiB */
    g_array_append_val(h->nodes[n].hugepages, pool);
  }
  g_autoptr(QpClaims) c = qp_claims_new();
  QpClaim *a = claim_add(c, "a");
  QpHugeClaim hc = {.node = 1, .page_kib = 2048, .pages = 3000};
  g_array_append_val(a->huge, hc);
  claim_mem(a, 0, 20000); /* plain memory claims do not touch the pools */

  g_autoptr(QpRequest) r = request(2, 4096);
  r->page_kib = 2048;
  g_autoptr(Opts) o = opts_new(QP_MODE_NUMA, NULL);
  g_autoptr(QpPlan) p = plan_ok(h, c, r, o);
  /* node 1 has 1096 pages left, the others 2048: node 0 (lowest id). */
  assert_set(p->mem[0].host_nodes, "0");
  g_assert_cmpuint(p->claim_mem->len, ==, 0);
  g_assert_cmpuint(p->claim_huge->len, ==, 1);
  QpHugeClaim *got = &g_array_index(p->claim_huge, QpHugeClaim, 0);
  g_assert_cmpint(got->node, ==, 0);
  g_assert_cmpuint(got->page_kib, ==, 2048);
  g_assert_cmpuint(got->pages, ==, 2048);

  g_autoptr(QpRequest) r2 = request(2, 6144);
  r2->page_kib = 2048;
  g_autoptr(GError) error = NULL;
  g_autoptr(QpPlan) p2 = qp_plan_compute(h, c, r2, &o->o, &error);
  g_assert_null(p2);
  assert_nofit(error, "guest needs 6144 MiB of 2048 KiB hugepages (3072 "
                      "pages) but the best node 0 has only 4096 MiB");

  /* Pools are not plain memory: node 1's 8 GiB pool leaves 8 GiB. */
  g_autoptr(QpRequest) r3 = request(2, 10000);
  g_autoptr(Opts) o3 = opts_new(QP_MODE_NUMA, "4-7");
  g_autoptr(GError) error3 = NULL;
  g_autoptr(QpPlan) p3 = qp_plan_compute(h, NULL, r3, &o3->o, &error3);
  g_assert_null(p3);
  assert_nofit(error3, "has only 8192 MiB uncommitted");
}

static void
test_device_locality(void)
{
  g_autoptr(TestHost) h = epyc(NULL);
  add_pci(h, "0000:41:00.0", 2);
  g_autoptr(QpRequest) r = request(4, 4096);
  r->vfio = g_new0(char *, 2);
  r->vfio[0] = g_strdup("0000:41:00.0");

  g_autoptr(Opts) o = opts_new(QP_MODE_BALANCED, NULL);
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  assert_set(p->mem[0].host_nodes, "2"); /* preferred (default) */

  o->o.device_locality = QP_DEVLOC_IGNORE;
  g_autoptr(QpPlan) p2 = plan_ok(h, NULL, r, o);
  assert_set(p2->mem[0].host_nodes, "0");

  /* required: the device's node must hold the guest. */
  o->o.device_locality = QP_DEVLOC_REQUIRED;
  g_autoptr(QpRequest) r3 = request(12, 4096);
  r3->vfio = g_strdupv(r->vfio);
  g_autoptr(GError) error = NULL;
  g_autoptr(QpPlan) p3 = qp_plan_compute(h, NULL, r3, &o->o, &error);
  g_assert_null(p3);
  assert_nofit(error, "with --device-locality=required (vfio 0000:41:00.0 on "
                      "node 2): guest needs 12 CPUs for 12 vCPUs but only 8 "
                      "are usable on host nodes 2");

  /* numa: the guest node that gets the device's node is the first one. */
  g_autoptr(QpRequest) r4 = seed_request(FALSE);
  r4->vfio = g_strdupv(r->vfio);
  g_autoptr(Opts) o4 = opts_new(QP_MODE_NUMA, NULL);
  g_autoptr(QpPlan) p4 = plan_ok(h, NULL, r4, o4);
  assert_set(p4->mem[0].host_nodes, "2");
  assert_set(p4->mem[1].host_nodes, "0");
  g_assert_true(has_text(p4->reasons, "holds its vfio device"));

  /* An unknown device is an error only when required. */
  g_autoptr(QpRequest) r5 = request(2, 1024);
  r5->vfio = g_new0(char *, 2);
  r5->vfio[0] = g_strdup("0000:99:00.0");
  g_autoptr(GError) error5 = NULL;
  g_autoptr(QpPlan) p5 = qp_plan_compute(h, NULL, r5, &o->o, &error5);
  g_assert_null(p5);
  assert_nofit(error5, "vfio device 0000:99:00.0 is not on this host");
  g_autoptr(Opts) o6 = opts_new(QP_MODE_BALANCED, NULL);
  g_autoptr(QpPlan) p6 = plan_ok(h, NULL, r5, o6);
  g_assert_true(has_text(p6->warnings, "0000:99:00.0 is not on this host"));
}

/* --hostnodes restricts every mode to those nodes. */
static void
test_hostnodes_option(void)
{
  g_autoptr(TestHost) h = epyc(NULL);
  g_autoptr(QpRequest) r = seed_request(FALSE);
  const QpMode modes[] = {QP_MODE_BALANCED, QP_MODE_NUMA, QP_MODE_ONE_TO_ONE};
  for (gsize m = 0; m < G_N_ELEMENTS(modes); m++) {
    g_autoptr(Opts) o = opts_new(modes[m], NULL);
    o->o.hostnodes = list("2-3");
    g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
    /* balanced: 8 vCPUs and 8 GiB fit on node 2 alone */
    assert_set(p->host_nodes, modes[m] == QP_MODE_BALANCED ? "2" : "2-3");
    g_auto(hwloc_bitmap_t) inside = list("8-15,24-31");
    g_assert_true(hwloc_bitmap_isincluded(p->process_cpus, inside));
  }
  /* numa: 4 guest nodes on 2 host nodes share, guest nodes 0,2 on node 2 */
  g_autoptr(Opts) o = opts_new(QP_MODE_NUMA, NULL);
  o->o.hostnodes = list("2-3");
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  assert_set(p->mem[0].host_nodes, "2");
  assert_set(p->mem[1].host_nodes, "3");
  assert_set(p->mem[2].host_nodes, "2");
  assert_set(p->mem[3].host_nodes, "3");
  /* The caller's two nodes for four guest nodes: said in the plan only. */
  g_assert_cmpuint(p->warnings->len, ==, 0);
  g_assert_true(has_text(p->reasons, "2 host nodes with CPUs for 4 guest "
                                     "nodes"));
}

/* ---- Suggested guest topology (--vnuma) -------------------------------- */

static void
test_vnuma_suggestion(void)
{
  g_autoptr(TestHost) h = intel_2s();
  g_autoptr(Opts) o = opts_new(QP_MODE_ONE_TO_ONE, NULL);
  o->o.vnuma = TRUE;

  /* 12 vCPUs need both sockets: 6 + 6, mirrored as 2 sockets of 6 cores
   * and one guest node per host node. */
  g_autoptr(QpRequest) r = request(12, 8192);
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  g_assert_true(p->vnuma);
  g_assert_cmpuint(p->vnuma_sockets, ==, 2);
  g_assert_cmpuint(p->vnuma_cores, ==, 6);
  g_assert_cmpuint(p->vnuma_threads, ==, 1);
  g_assert_cmpuint(p->n_vnodes, ==, 2);
  assert_set(p->vnodes[0].vcpus, "0-5");
  assert_set(p->vnodes[1].vcpus, "6-11");
  g_assert_cmpint(p->vnodes[0].host_node, ==, 0);
  g_assert_cmpint(p->vnodes[1].host_node, ==, 1);
  g_assert_cmpuint(p->vnodes[0].mem_mib, ==, 4096);
  g_assert_cmpuint(p->vnodes[1].mem_mib, ==, 4096);
  g_assert_cmpuint(p->vnode_distance[1], ==, 21);
  g_assert_cmpuint(p->vnode_distance[3], ==, 10);
  assert_vcpu(p, 5, "5");
  assert_vcpu(p, 6, "8");

  /* threads=2: 16 sibling pairs on 16 cores, 2 sockets x 8 cores x 2. */
  g_autoptr(QpRequest) r2 = request(32, 8192);
  r2->cores = 16;
  r2->threads = 2;
  g_autoptr(QpPlan) p2 = plan_ok(h, NULL, r2, o);
  g_assert_cmpuint(p2->vnuma_sockets, ==, 2);
  g_assert_cmpuint(p2->vnuma_cores, ==, 8);
  g_assert_cmpuint(p2->vnuma_threads, ==, 2);

  /* Node 1 has only 3 cores in the affinity: 7 + 3 is asymmetric, so the
   * suggestion is flat (seed 000) and names no guest node. */
  g_autoptr(Opts) o3 = opts_new(QP_MODE_ONE_TO_ONE, "0-10");
  o3->o.vnuma = TRUE;
  g_autoptr(QpRequest) r3 = request(10, 8192);
  g_autoptr(QpPlan) p3 = plan_ok(h, NULL, r3, o3);
  g_assert_true(p3->vnuma);
  g_assert_cmpuint(p3->vnuma_sockets, ==, 1);
  g_assert_cmpuint(p3->vnuma_cores, ==, 10);
  g_assert_cmpuint(p3->n_vnodes, ==, 0);
  assert_vcpu(p3, 6, "6");
  assert_vcpu(p3, 7, "8");
  g_assert_true(has_text(p3->reasons, "asymmetric"));

  /* Not for balanced (vCPUs float) nor for a guest with its own -numa. */
  g_autoptr(Opts) o4 = opts_new(QP_MODE_BALANCED, NULL);
  o4->o.vnuma = TRUE;
  g_autoptr(QpPlan) p4 = plan_ok(h, NULL, r, o4);
  g_assert_false(p4->vnuma);
  g_autoptr(QpRequest) r5 = request(4, 4096);
  request_vnuma(r5, 2, 2, 2048);
  g_autoptr(QpPlan) p5 = plan_ok(h, NULL, r5, o);
  g_assert_false(p5->vnuma);
  g_assert_cmpuint(p5->n_vnodes, ==, 0);
}

/* ---- Scale -------------------------------------------------------------- */

/* 64 nodes x 16 CPUs (8 cores x 2 threads), 8 sockets of 8 nodes, and 1,000
 * claims of other VMs. Asserts the plan; g_test_message reports the time
 * (not asserted: the formal benchmark lives in bench/). */
static void
test_scale_64_nodes(void)
{
  g_autoptr(TestHost) h = host_new(64, 65536, 32);
  for (guint i = 0; i < 64; i++)
    for (guint j = 0; j < 64; j++)
      if (i != j)
        h->distance[i * 64 + j] = i / 8 == j / 8 ? 16 : 32;
  for (int n = 0; n < 64; n++)
    for (int k = 0; k < 8; k++)
      host_core(h, n, n / 8, 0, n * 8 + k, 512 + n * 8 + k);
  host_done(h);

  g_autoptr(QpClaims) c = qp_claims_new();
  for (guint i = 0; i < 1000; i++) {
    g_autofree char *id = g_strdup_printf("vm%u", i);
    QpClaim *cl = claim_add(c, id);
    claim_mem(cl, (int)(i % 64), 1024 + (i % 7) * 256);
    QpNodeLoad l = {.node = (int)(i % 64), .vcpus = 2};
    g_array_append_val(cl->load, l);
    if (i % 50 == 0) { /* 20 VMs with a dedicated core each */
      hwloc_bitmap_set(cl->dedicated, (int)i / 50 * 8);
      hwloc_bitmap_set(cl->dedicated, 512 + (int)i / 50 * 8);
    }
  }

  /* A big 4-node numa guest, a 48-vCPU balanced one, a one-to-one one. */
  g_autoptr(QpRequest) r = request(64, 131072);
  request_vnuma(r, 4, 16, 32768);
  g_autoptr(Opts) on = opts_new(QP_MODE_NUMA, NULL);
  g_autoptr(QpRequest) rb = request(48, 65536);
  g_autoptr(Opts) ob = opts_new(QP_MODE_BALANCED, NULL);
  g_autoptr(QpRequest) ro = request(40, 65536);
  g_autoptr(Opts) oo = opts_new(QP_MODE_ONE_TO_ONE, NULL);

  GTimer *t = g_timer_new();
  const guint rounds = 20;
  for (guint k = 0; k < rounds; k++) {
    g_autoptr(QpPlan) pn = qp_plan_compute(h, c, r, &on->o, NULL);
    g_autoptr(QpPlan) pb = qp_plan_compute(h, c, rb, &ob->o, NULL);
    g_autoptr(QpPlan) po = qp_plan_compute(h, c, ro, &oo->o, NULL);
    g_assert_nonnull(pn);
    g_assert_nonnull(pb);
    g_assert_nonnull(po);
    if (k == 0) {
      /* 48 vCPUs need 3 nodes of 16 CPUs, on one socket (distance 16). */
      g_assert_cmpint(hwloc_bitmap_weight(pb->mem[0].host_nodes), ==, 3);
      g_assert_true(has_text(pb->reasons, "max distance 16"));
      /* 40 one-to-one vCPUs need 5 nodes of 8 cores. */
      g_assert_cmpint(hwloc_bitmap_weight(po->host_nodes), ==, 5);
      g_auto(hwloc_bitmap_t) others = hwloc_bitmap_alloc();
      for (guint i = 0; i < c->claims->len; i++)
        hwloc_bitmap_or(
            others, others,
            ((QpClaim *)g_ptr_array_index(c->claims, i))->dedicated);
      g_assert_false(hwloc_bitmap_intersects(po->dedicated, others));
    }
  }
  double ms = g_timer_elapsed(t, NULL) * 1000.0 / (rounds * 3);
  g_test_message("64 nodes, 1024 CPUs, 1000 claims: %.3f ms per plan", ms);

  /* The worst case for node-set growth: a guest that needs most nodes. */
  g_autoptr(QpRequest) rw = request(900, 65536);
  g_autoptr(QpRequest) rw2 = request(480, 65536);
  g_timer_start(t);
  for (guint k = 0; k < rounds; k++) {
    g_autoptr(QpPlan) pw = qp_plan_compute(h, c, rw, &ob->o, NULL);
    g_autoptr(QpPlan) pw2 = qp_plan_compute(h, c, rw2, &oo->o, NULL);
    g_assert_nonnull(pw);
    g_assert_nonnull(pw2);
    if (k == 0) {
      /* 984 usable CPUs (14 on 20 nodes, 16 on 44): 900 vCPUs need 58 */
      g_assert_cmpint(hwloc_bitmap_weight(pw->host_nodes), ==, 58);
      g_assert_cmpint(hwloc_bitmap_weight(pw2->dedicated), ==, 960);
    }
  }
  ms = g_timer_elapsed(t, NULL) * 1000.0 / (rounds * 2);
  g_timer_destroy(t);
  g_test_message("64 nodes, 1000 claims, guests of 900 (balanced) and 480 "
                 "(one-to-one) vCPUs: %.3f ms per plan",
                 ms);
}

static void
test_recorded_intel_smt(void)
{
  g_autoptr(QpHost) h = recorded("intel-2s-smt.xml");
  g_autoptr(QpRequest) r = request(4, 4096);
  g_autoptr(Opts) o = opts_new(QP_MODE_ONE_TO_ONE, NULL);
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  for (guint v = 0; v < 4; v++) {
    g_autofree char *c = g_strdup_printf("%u", v);
    assert_vcpu(p, v, c);
  }
  assert_set(p->dedicated, "0-3,16-19");

  r->threads = 2;
  r->cores = 2;
  g_autoptr(QpPlan) p2 = plan_ok(h, NULL, r, o);
  assert_vcpu(p2, 0, "0");
  assert_vcpu(p2, 1, "16");
  assert_vcpu(p2, 2, "1");
  assert_vcpu(p2, 3, "17");

  /* 1 GiB pages: 4 per node in the recorded pools. */
  g_autoptr(QpRequest) r3 = request(2, 4096);
  r3->page_kib = 1048576;
  g_autoptr(Opts) o3 = opts_new(QP_MODE_NUMA, NULL);
  g_autoptr(QpPlan) p3 = plan_ok(h, NULL, r3, o3);
  g_assert_cmpuint(p3->claim_huge->len, ==, 1);
  g_assert_cmpuint(g_array_index(p3->claim_huge, QpHugeClaim, 0).pages, ==, 4);
  r3->mem_mib = 5120;
  g_autoptr(GError) error = NULL;
  g_autoptr(QpPlan) p4 = qp_plan_compute(h, NULL, r3, &o3->o, &error);
  g_assert_null(p4);
  assert_nofit(error, "5120 MiB of 1048576 KiB hugepages (5 pages)");
}

static void
test_recorded_2s8n(void)
{
  g_autoptr(QpHost) h = recorded("2s-8node.xml");
  g_autoptr(QpRequest) r = request(6, 4096);
  g_autoptr(Opts) o = opts_new(QP_MODE_BALANCED, NULL);
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  /* 6 vCPUs need two 4-CPU nodes; node 0 holds the memory alone (the
   * first of equal nodes) and it is bound there. */
  assert_set(p->host_nodes, "0-1");
  assert_set(p->mem[0].host_nodes, "0");
  g_assert_true(has_text(p->reasons, "max distance 12"));

  /* With nodes 1-3 busy, the second node is still on socket 0 when one
   * is left there, never across. */
  g_autoptr(QpClaims) c = qp_claims_new();
  QpClaim *x = claim_add(c, "x");
  hwloc_bitmap_set_range(x->dedicated, 4, 11); /* nodes 1 and 2 */
  g_autoptr(QpPlan) p2 = plan_ok(h, c, r, o);
  assert_set(p2->host_nodes, "0,3");
  assert_set(p2->process_cpus, "0-3,12-15");
}

static void
test_recorded_hybrid(void)
{
  g_autoptr(QpHost) h = recorded("hybrid.xml");
  g_assert_cmpuint(h->n_kinds, ==, 2);
  g_autoptr(QpRequest) r = request(4, 4096);
  g_autoptr(Opts) o = opts_new(QP_MODE_BALANCED, NULL);
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  assert_set(p->process_cpus, "0-15");
  assert_set(p->startup_cpus, "0-15");

  g_autoptr(Opts) o2 = opts_new(QP_MODE_ONE_TO_ONE, NULL);
  g_autoptr(QpPlan) p2 = plan_ok(h, NULL, r, o2);
  assert_vcpu(p2, 0, "0");
  assert_vcpu(p2, 1, "2");
  assert_vcpu(p2, 2, "4");
  assert_vcpu(p2, 3, "6");

  /* 20 vCPUs with an affinity over everything straddle, with a warning;
   * startup = the 16 P-core CPUs, the largest same-kind subset. */
  g_autoptr(QpRequest) r3 = request(20, 4096);
  g_autoptr(Opts) o3 = opts_new(QP_MODE_BALANCED, "0-23");
  g_autoptr(QpPlan) p3 = plan_ok(h, NULL, r3, o3);
  assert_set(p3->process_cpus, "0-23");
  assert_set(p3->startup_cpus, "0-15");
  g_assert_true(has_text(p3->warnings, "straddle CPU kinds"));
}

static void
test_recorded_cpuless(void)
{
  g_autoptr(QpHost) h = recorded("cpuless.xml");
  g_autoptr(Opts) o = opts_new(QP_MODE_BALANCED, NULL);
  g_autoptr(QpRequest) r = request(2, 40960);
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  assert_set(p->mem[0].host_nodes, "0-1"); /* distance 20 beats 30 */
  g_autoptr(QpRequest) r2 = request(2, 71680);
  g_autoptr(QpPlan) p2 = plan_ok(h, NULL, r2, o);
  assert_set(p2->mem[0].host_nodes, "0,2"); /* only node 2 adds enough */
  assert_set(p2->process_cpus, "0-3");
}

static void
test_recorded_cgroup(void)
{
  g_autoptr(QpHost) h = recorded("cgroup-subset.xml");
  const QpMode modes[] = {QP_MODE_BALANCED, QP_MODE_NUMA, QP_MODE_ONE_TO_ONE};
  for (gsize m = 0; m < G_N_ELEMENTS(modes); m++) {
    g_autoptr(QpRequest) r = request(8, 4096);
    g_autoptr(Opts) o = opts_new(modes[m], NULL);
    if (modes[m] == QP_MODE_ONE_TO_ONE)
      r->vcpus = r->maxcpus = 6;
    g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o); /* checks allowed */
    if (modes[m] != QP_MODE_ONE_TO_ONE) {
      assert_set(p->process_cpus, "0-3,16-19");
    } else {
      /* 6 free cores: 0-3 on node 0 and 4-5 on node 1 */
      assert_set(p->dedicated, "0-5,16-21");
      assert_vcpu(p, 5, "5");
    }
  }
  /* --hostnodes of a node the cpuset leaves no CPU of: the refusal says
   * which CPUs this process may use (outside check, stop 43: it said
   * "host nodes (none)" only). */
  g_autoptr(QpRequest) r = request(2, 1024);
  g_autoptr(Opts) o = opts_new(QP_MODE_AUTO, NULL);
  o->o.hostnodes = list("2");
  plan_refused(h, NULL, r, o, "(this process may run on CPUs 0-5,16-19)");
}

/* The plan of a VM of 2 vCPUs and 1 GiB on H in MODE, which must place it
 * with the guarantee of its mode (not best effort). */
static QpPlan *
plan_small(const QpHost *h, QpMode mode)
{
  g_autoptr(QpRequest) r = request(2, 1024);
  g_autoptr(Opts) o = opts_new(mode, NULL);
  QpPlan *p = plan_ok(h, NULL, r, o);
  g_assert_false(p->best_effort);
  return p;
}

/* A host whose CPU nodes have no memory (memoryless-initiators.xml: nodes
 * 0-3 hold the CPUs, 5-10 the memory). Linux never lists a memoryless node
 * in a cpuset's mems, so the recorded allowed nodes are 5-10; the CPUs of
 * nodes 0-3 are still this process's to run on (QEMU alone runs there),
 * with memory from the nodes that have it (outside check, branch h8: every
 * VM was refused for "0 usable CPUs"). */
static void
test_recorded_memoryless(void)
{
  g_autoptr(QpHost) h = recorded("memoryless-initiators.xml");
  const QpMode modes[] = {QP_MODE_AUTO, QP_MODE_BALANCED, QP_MODE_ONE_TO_ONE};
  for (gsize m = 0; m < G_N_ELEMENTS(modes); m++) {
    g_autoptr(QpPlan) p = plan_small(h, modes[m]);
    /* node 0 and its nearest memory, node 5 (distance 11) */
    assert_set(p->process_cpus, "0-1");
    g_assert_cmpuint(claimed_on(p, 5), ==, 1024);
    g_assert_cmpuint(claimed_on(p, 0), ==, 0);
  }
  /* all 8 CPUs: the four CPU nodes with the memory on one node */
  g_autoptr(QpRequest) r = request(8, 4096);
  g_autoptr(Opts) o = opts_new(QP_MODE_BALANCED, NULL);
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  assert_set(p->process_cpus, "0-7");
}

/* A host recorded in a cgroup whose CPUs are of one node and whose memory
 * nodes are others (cgroup-mems-apart.xml: cpuset.cpus 0-3, node 0's;
 * cpuset.mems 2-3). QEMU alone runs there; a live launch plans node 0 as a
 * node without memory (finding 50), and so must a plan on the recording:
 * every VM was refused in every mode, auto too, for "no CPU may run the
 * guest's 2 vCPUs on host nodes 2-3" (outside check, stop 55: hwloc's
 * recorded hosts). */
static void
test_recorded_mems_apart(void)
{
  g_autoptr(QpHost) h = recorded("cgroup-mems-apart.xml");
  g_assert_true(qp_host_node_mem_denied(h, 0));
  g_assert_false(qp_host_node_mem_denied(h, 2));
  const QpMode modes[] = {QP_MODE_AUTO, QP_MODE_BALANCED, QP_MODE_ONE_TO_ONE};
  for (gsize m = 0; m < G_N_ELEMENTS(modes); m++) {
    g_autoptr(QpPlan) p = plan_small(h, modes[m]);
    g_assert_true(hwloc_bitmap_isincluded(p->process_cpus, h->allowed));
    g_assert_cmpuint(claimed_on(p, 0), ==, 0);
    g_assert_cmpuint(claimed_on(p, 2) + claimed_on(p, 3), ==, 1024);
  }
  /* numa binds each guest node on its host node: none has both */
  g_autoptr(QpRequest) r = request(2, 1024);
  g_autoptr(Opts) o = opts_new(QP_MODE_NUMA, NULL);
  plan_refused(h, NULL, r, o, "outside the nodes this process may use");
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/plan/seed/none", test_seed_none);
  g_test_add_func("/plan/distance/two-nodes-on-one-socket",
                  test_distance_same_socket);
  g_test_add_func("/plan/kinds/never-straddles", test_kinds_no_straddle);
  g_test_add_func("/plan/cpuless/memory-only-when-needed", test_cpuless_node);
  g_test_add_func("/plan/cpuless/joins-last", test_cpuless_last);
  g_test_add_func("/plan/allowed/cgroup-subset", test_cgroup_subset);
  g_test_add_data_func("/plan/caller/host-nodes-without-vnuma/balanced",
                       GINT_TO_POINTER(QP_MODE_BALANCED),
                       test_caller_nodes_without_vnuma);
  g_test_add_data_func("/plan/caller/host-nodes-without-vnuma/numa",
                       GINT_TO_POINTER(QP_MODE_NUMA),
                       test_caller_nodes_without_vnuma);
  g_test_add_data_func("/plan/caller/host-nodes-without-vnuma/one-to-one",
                       GINT_TO_POINTER(QP_MODE_ONE_TO_ONE),
                       test_caller_nodes_without_vnuma);
  g_test_add_func("/plan/claims/dedicated-never-reused",
                  test_claims_dedicated_never_reused);
  g_test_add_func("/plan/claims/memory-spread-pack", test_claims_memory);
  g_test_add_func("/plan/claims/spanning-fragment-on-tightest-node",
                  test_spanning_fragment_on_tightest);
  g_test_add_func("/plan/claims/spanning-memory-with-vcpus-or-tightest-first",
                  test_spanning_memory_split);
  g_test_add_func("/plan/claims/reserve", test_reserve);
  g_test_add_func("/plan/claims/follow-the-policy", test_claims_follow_policy);
  g_test_add_func("/plan/claims/bound-where-claimed", test_bound_where_claimed);
  g_test_add_func("/plan/claims/blocked-nodes", test_claims_blocked_nodes);
  g_test_add_func("/plan/errors/name-the-shortfall",
                  test_errors_name_shortfall);
  g_test_add_func("/plan/hugepages/pools", test_hugepages);
  g_test_add_func("/plan/devices/locality", test_device_locality);
  g_test_add_func("/plan/options/hostnodes", test_hostnodes_option);
  g_test_add_func("/plan/vnuma/mirrors-placement", test_vnuma_suggestion);
  g_test_add_func("/plan/scale/64-nodes-1000-claims", test_scale_64_nodes);
  g_test_add_func("/plan/recorded/intel-2s-smt", test_recorded_intel_smt);
  g_test_add_func("/plan/recorded/2s-8node", test_recorded_2s8n);
  g_test_add_func("/plan/recorded/hybrid", test_recorded_hybrid);
  g_test_add_func("/plan/recorded/cpuless", test_recorded_cpuless);
  g_test_add_func("/plan/recorded/cgroup-subset", test_recorded_cgroup);
  g_test_add_func("/plan/recorded/memoryless-cpu-nodes",
                  test_recorded_memoryless);
  g_test_add_func("/plan/recorded/cpus-and-memory-apart",
                  test_recorded_mems_apart);
  return g_test_run();
}
