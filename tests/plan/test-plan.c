/* The placement planner (topology/plan.c) on hand-built hosts and on the
 * recorded hosts in tests/data/topologies.
 *
 * Hand-built hosts come from a small builder below, so that every case
 * states its host in a few lines; the recorded hosts check that the same
 * decisions come out of hwloc's view of those machines. */
#include "topology/plan/capacity.h"
#include "topology/ledger/ledger.h"
#include "topology/plan/claim.h"
#include "topology/plan/plan.h"
#include "topology/status/status.h"

#include <string.h>

/* ---- Host builder ------------------------------------------------------- */

typedef struct {
  QpHost *h;
  guint cap_cores, cap_cpus;
} Builder;

static QpHost *
host_new(guint n_nodes, guint64 mem_mib, guint remote_distance)
{
  QpHost *h = g_new0(QpHost, 1);
  h->source = g_strdup("test");
  h->n_nodes = n_nodes;
  h->nodes = g_new0(QpNode, n_nodes);
  for (guint i = 0; i < n_nodes; i++) {
    h->nodes[i].id = (int)i;
    h->nodes[i].total_mib = h->nodes[i].free_mib = mem_mib;
    h->nodes[i].cpus = hwloc_bitmap_alloc();
    h->nodes[i].all_cpus = hwloc_bitmap_alloc();
    h->nodes[i].hugepages = g_array_new(FALSE, TRUE, sizeof(QpHugePool));
  }
  h->distance = g_new(guint, n_nodes * n_nodes);
  for (guint i = 0; i < n_nodes; i++)
    for (guint j = 0; j < n_nodes; j++)
      h->distance[i * n_nodes + j] = i == j ? 10 : remote_distance;
  h->cores = g_new0(QpCore, 4096);
  h->cpus = g_new0(QpCpu, 8192);
  h->allowed = hwloc_bitmap_alloc();
  h->n_kinds = 1;
  h->pci = g_array_new(FALSE, TRUE, sizeof(QpPciDevice));
  return h;
}

/* A core on NODE with PUs PU0 and (if >= 0) PU1. */
static void
host_core(QpHost *h, int node, int package, int kind, int pu0, int pu1)
{
  guint c = h->n_cores++;
  h->cores[c].package = package;
  h->cores[c].node = node;
  h->cores[c].pus = hwloc_bitmap_alloc();
  int pus[2] = {pu0, pu1};
  for (int k = 0; k < 2; k++) {
    if (pus[k] < 0)
      continue;
    QpCpu *cpu = &h->cpus[h->n_cpus++];
    cpu->id = pus[k];
    cpu->core = (int)c;
    cpu->node = node;
    cpu->package = package;
    cpu->kind = kind;
    cpu->allowed = TRUE;
    hwloc_bitmap_set(h->cores[c].pus, pus[k]);
    hwloc_bitmap_set(h->nodes[node].cpus, pus[k]);
    hwloc_bitmap_set(h->nodes[node].all_cpus, pus[k]);
    hwloc_bitmap_set(h->allowed, pus[k]);
    h->n_kinds = MAX(h->n_kinds, (guint)kind + 1);
  }
}

static int
compare_cpu(gconstpointer a, gconstpointer b)
{
  return ((const QpCpu *)a)->id - ((const QpCpu *)b)->id;
}

static void
host_done(QpHost *h)
{
  qsort(h->cpus, h->n_cpus, sizeof(QpCpu), compare_cpu);
}

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

static void
host_free(QpHost *h)
{
  for (guint i = 0; i < h->n_nodes; i++) {
    hwloc_bitmap_free(h->nodes[i].cpus);
    hwloc_bitmap_free(h->nodes[i].all_cpus);
    g_array_unref(h->nodes[i].hugepages);
  }
  for (guint c = 0; c < h->n_cores; c++)
    hwloc_bitmap_free(h->cores[c].pus);
  for (guint p = 0; p < h->pci->len; p++)
    g_free(g_array_index(h->pci, QpPciDevice, p).bdf);
  g_array_unref(h->pci);
  g_free(h->nodes);
  g_free(h->cores);
  g_free(h->cpus);
  g_free(h->distance);
  hwloc_bitmap_free(h->allowed);
  g_free(h->source);
  g_free(h);
}
typedef QpHost TestHost;
G_DEFINE_AUTOPTR_CLEANUP_FUNC(TestHost, host_free)

/* Seed 000's host, AMD EPYC 7351P: node N = CPUs 4N..4N+3 and
 * 16+4N..16+4N+3, CPU c and c+16 are SMT siblings, SLIT 10/16. MEM gives the
 * node sizes (NULL: 16384 MiB each). */
static QpHost *
epyc(const guint64 *mem)
{
  QpHost *h = host_new(4, 16384, 16);
  for (int n = 0; n < 4; n++) {
    if (mem != NULL)
      h->nodes[n].total_mib = h->nodes[n].free_mib = mem[n];
    for (int j = 0; j < 4; j++)
      host_core(h, n, 0, 0, 4 * n + j, 16 + 4 * n + j);
  }
  host_done(h);
  return h;
}

/* 2-socket Intel, one node per socket, 8 cores each, siblings n and n+16. */
static QpHost *
intel_2s(void)
{
  QpHost *h = host_new(2, 65536, 21);
  for (int c = 0; c < 16; c++)
    host_core(h, c / 8, c / 8, 0, c, c + 16);
  host_done(h);
  return h;
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

/* Hybrid: 4 P-cores with 2 threads (CPUs 0-7, kind 1, most performant)
 * and 12 E-cores (CPUs 8-19, kind 0). */
static QpHost *
hybrid(void)
{
  QpHost *h = host_new(1, 32768, 10);
  for (int c = 0; c < 4; c++)
    host_core(h, 0, 0, 1, 2 * c, 2 * c + 1);
  for (int c = 0; c < 12; c++)
    host_core(h, 0, 0, 0, 8 + c, -1);
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

/* ---- Request and option helpers ----------------------------------------- */

static hwloc_bitmap_t
list(const char *text)
{
  hwloc_bitmap_t set = NULL;
  g_assert_true(qp_list_parse(text, "test", QP_LIST_MAX_INDEX, &set, NULL));
  return set;
}

static QpRequest *
request(guint vcpus, guint64 mem_mib)
{
  QpRequest *r = qp_request_new();
  r->vcpus = r->maxcpus = vcpus;
  r->sockets = 1;
  r->cores = vcpus;
  r->mem_mib = mem_mib;
  return r;
}

/* N guest nodes, each with VCPUS_EACH consecutive vCPUs and MEM_EACH MiB. */
static void
request_vnuma(QpRequest *r, guint n, guint vcpus_each, guint64 mem_each)
{
  r->n_gnodes = n;
  r->gnodes = g_new0(QpGuestNode, n);
  for (guint g = 0; g < n; g++) {
    r->gnodes[g].id = (int)g;
    r->gnodes[g].vcpus = hwloc_bitmap_alloc();
    hwloc_bitmap_set_range(r->gnodes[g].vcpus, g * vcpus_each,
                           (int)((g + 1) * vcpus_each) - 1);
    r->gnodes[g].mem_mib = mem_each;
    r->gnodes[g].memdev = g_strdup_printf("ram-node%u", g);
  }
}

typedef struct {
  QpPlacementOptions o;
} Opts;

static void
opts_free(Opts *o)
{
  qp_placement_options_clear(&o->o);
  g_free(o);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC(Opts, opts_free)

static Opts *
opts_new(QpMode mode, const char *affinity)
{
  Opts *o = g_new0(Opts, 1);
  qp_placement_options_init(&o->o);
  o->o.mode = mode;
  if (affinity != NULL)
    o->o.affinity = list(affinity);
  return o;
}

static QpClaim *
claim_add(QpClaims *claims, const char *id)
{
  QpClaim *c = qp_claim_new();
  c->id = g_strdup(id);
  g_ptr_array_add(claims->claims, c);
  return c;
}

static void
claim_mem(QpClaim *c, int node, guint64 mib)
{
  QpNodeAmount m = {.node = node, .mib = mib};
  g_array_append_val(c->mem, m);
}

static void
assert_set(hwloc_const_bitmap_t set, const char *expected)
{
  g_assert_nonnull(set);
  g_autofree char *s = qp_list_format(set);
  g_assert_cmpstr(s, ==, expected);
}

static void
assert_vcpu(const QpPlan *p, guint v, const char *expected)
{
  g_assert_cmpuint(v, <, p->n_vcpus);
  assert_set(p->vcpu_cpus[v], expected);
}

static guint64
claimed_on(const QpPlan *p, int node)
{
  for (guint i = 0; i < p->claim_mem->len; i++)
    if (g_array_index(p->claim_mem, QpNodeAmount, i).node == node)
      return g_array_index(p->claim_mem, QpNodeAmount, i).mib;
  return 0;
}

static guint
load_on(const QpPlan *p, int node)
{
  for (guint i = 0; i < p->load->len; i++)
    if (g_array_index(p->load, QpNodeLoad, i).node == node)
      return g_array_index(p->load, QpNodeLoad, i).vcpus;
  return 0;
}

static gboolean
has_text(GPtrArray *lines, const char *needle)
{
  for (guint i = 0; i < lines->len; i++)
    if (strstr(g_ptr_array_index(lines, i), needle) != NULL)
      return TRUE;
  return FALSE;
}

/* Every error is one line and names what fell short. */
static void
assert_nofit(GError *error, const char *needle)
{
  g_assert_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT);
  g_assert_null(strchr(error->message, '\n'));
  if (strstr(error->message, needle) == NULL)
    g_error("error \"%s\" lacks \"%s\"", error->message, needle);
}

static QpPlan *
plan_ok(const QpHost *h, const QpClaims *c, const QpRequest *r, const Opts *o)
{
  g_autoptr(GError) error = NULL;
  QpPlan *p = qp_plan_compute(h, c, r, &o->o, &error);
  g_assert_no_error(error);
  g_assert_nonnull(p);
  g_assert_cmpuint(p->n_vcpus, ==, MAX(r->maxcpus, r->vcpus));
  for (guint v = 0; v < p->n_vcpus; v++)
    g_assert_nonnull(p->vcpu_cpus[v]);
  /* Nothing outside the CPUs this process may use. */
  g_assert_true(hwloc_bitmap_isincluded(p->process_cpus, h->allowed));
  g_assert_true(hwloc_bitmap_isincluded(p->emulator_cpus, p->process_cpus));
  g_assert_true(hwloc_bitmap_isincluded(p->startup_cpus, p->process_cpus));
  for (guint v = 0; v < p->n_vcpus; v++)
    g_assert_true(hwloc_bitmap_isincluded(p->vcpu_cpus[v], p->process_cpus));
  /* The plan serialises. */
  g_autoptr(JsonNode) json = qp_plan_to_json(p);
  g_assert_true(JSON_NODE_HOLDS_OBJECT(json));
  g_autofree char *human = qp_plan_to_human(p, h);
  g_assert_nonnull(human);
  if (g_test_verbose()) {
    g_autofree char *js = json_to_string(json, TRUE);
    g_printerr("%s\n%s\n", human, js);
  }
  return p;
}

/* ---- Seed 000 ------------------------------------------------------------
 *
 * Guest: sockets=4,cores=2,numa=1,memory=8192 -> 4 guest nodes of 2 vCPUs
 * (vCPUs 2k,2k+1 on guest node k) and 2048 MiB each; affinity
 * 0,1,4,5,8,9,12,13 = 2 physical cores per host node, no SMT siblings.
 * "With explicit hostnodes": guest node k has host-nodes=k,policy=bind. */

static QpRequest *
seed_request(gboolean explicit_hostnodes)
{
  QpRequest *r = request(8, 8192);
  r->sockets = 4;
  r->cores = 2;
  r->threads = 1;
  request_vnuma(r, 4, 2, 2048);
  if (explicit_hostnodes)
    for (guint g = 0; g < 4; g++) {
      r->gnodes[g].host_nodes = hwloc_bitmap_alloc();
      hwloc_bitmap_set(r->gnodes[g].host_nodes, g);
      r->gnodes[g].policy = QP_POLICY_BIND;
    }
  return r;
}

#define SEED_AFFINITY "0,1,4,5,8,9,12,13"

/* Seed 000 config 1_pinning_balanced (seed measured: STREAM triad 44506
 * MB/s, sc-membench read 33669 MB/s, latency 168.22 ns, against 40862 /
 * 38295 / 117.74 unpinned): "allocator auto-selects host NUMA
 * nodes by uncommitted memory, binds guest memory to them with policy=bind,
 * confines the QEMU process to the selected nodes' CPUs. individual vCPU
 * threads are NOT pinned." The seed's v2 chose by memory alone and put the
 * 8 vCPUs of an 8 GiB guest on one node (its 2 allowed CPUs), which lost
 * bandwidth against no pinning. Here a VM never overcommits itself: 8 vCPUs
 * need 8 usable CPUs and every node has 2 in the affinity, so the fewest
 * nodes holding both memory and CPUs are all four. */
static void
check_seed_balanced(const QpHost *h, gboolean explicit_hostnodes)
{
  g_autoptr(QpRequest) r = seed_request(explicit_hostnodes);
  g_autoptr(Opts) o = opts_new(QP_MODE_BALANCED, SEED_AFFINITY);
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  g_assert_cmpint(p->mode, ==, QP_MODE_BALANCED);
  assert_set(p->process_cpus, "0-1,4-5,8-9,12-13");
  for (guint v = 0; v < 8; v++)
    assert_vcpu(p, v, "0-1,4-5,8-9,12-13"); /* vCPUs float */
  assert_set(p->emulator_cpus, "0-1,4-5,8-9,12-13");
  assert_set(p->startup_cpus, "0-1,4-5,8-9,12-13");
  g_assert_true(hwloc_bitmap_iszero(p->dedicated));
  g_assert_cmpuint(p->n_mem, ==, 4);
  for (guint g = 0; g < 4; g++) {
    g_assert_cmpint(p->mem[g].gnode, ==, (int)g);
    g_assert_cmpuint(p->mem[g].mem_mib, ==, 2048);
    g_assert_cmpint(p->mem[g].policy, ==, QP_POLICY_BIND);
    g_assert_cmpint(p->mem[g].caller_set, ==, explicit_hostnodes);
    g_autofree char *memdev = g_strdup_printf("ram-node%u", g);
    g_assert_cmpstr(p->mem[g].memdev, ==, memdev);
    if (explicit_hostnodes) {
      g_autofree char *k = g_strdup_printf("%u", g);
      assert_set(p->mem[g].host_nodes, k);
    } else {
      assert_set(p->mem[g].host_nodes, "0-3");
    }
  }
  assert_set(p->mem_nodes, "0-3");
  g_assert_cmpint(p->mem_policy, ==, QP_POLICY_BIND);
  /* Each guest node's 2048 MiB split evenly over 0-3 (or on its own node):
   * 2048 MiB per host node either way; 8 floating vCPUs, 2 per node. */
  for (int n = 0; n < 4; n++) {
    g_assert_cmpuint(claimed_on(p, n), ==, 2048);
    g_assert_cmpuint(load_on(p, n), ==, 2);
  }
  assert_set(p->host_nodes, "0-3");
  g_assert_true(has_text(p->reasons, "no single node holds the guest: the "
                                     "most usable CPUs on one node are 2"));
}

static void
test_seed_balanced(void)
{
  g_autoptr(TestHost) h = epyc(NULL);
  check_seed_balanced(h, FALSE);
}

static void
test_seed_balanced_hostnodes(void)
{
  g_autoptr(TestHost) h = epyc(NULL);
  check_seed_balanced(h, TRUE);
}

/* Seed 000 configs 2_pinning_numa_auto (seed measured: triad 52944 MB/s,
 * read 60821 MB/s, latency 113.21 ns) and 4_pinning_numa (53052, 60965,
 * 113.06) -- 2: "allocator auto-assigns each guest
 * NUMA node to a host NUMA node (least-loaded first), pins vCPU sets per
 * node") and 4_pinning_numa ("user manually maps each guest NUMA node to a
 * specific host NUMA node"). The seed reports no mapping for the auto run;
 * on an empty host every node is equally loaded and holds the same memory
 * (in whole GiB), so the tie-break (lowest node id) gives guest node k ->
 * host node k, the same as the explicit run: vCPUs 2k,2k+1 -> the node's
 * two CPUs in the affinity. */
static void
check_seed_numa(const QpHost *h, QpMode mode, gboolean explicit_hostnodes)
{
  g_autoptr(QpRequest) r = seed_request(explicit_hostnodes);
  g_autoptr(Opts) o = opts_new(mode, SEED_AFFINITY);
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  g_assert_cmpint(p->mode, ==, QP_MODE_NUMA);
  const char *cpus[] = {"0-1", "4-5", "8-9", "12-13"};
  for (guint g = 0; g < 4; g++) {
    assert_vcpu(p, 2 * g, cpus[g]);
    assert_vcpu(p, 2 * g + 1, cpus[g]);
    g_autofree char *k = g_strdup_printf("%u", g);
    assert_set(p->mem[g].host_nodes, k);
    g_assert_cmpint(p->mem[g].gnode, ==, (int)g);
    g_assert_cmpint(p->mem[g].policy, ==, QP_POLICY_BIND);
    g_assert_cmpuint(p->mem[g].mem_mib, ==, 2048);
    g_assert_cmpint(p->mem[g].caller_set, ==, explicit_hostnodes);
    g_assert_cmpuint(claimed_on(p, (int)g), ==, 2048);
    g_assert_cmpuint(load_on(p, (int)g), ==, 2);
  }
  assert_set(p->process_cpus, "0-1,4-5,8-9,12-13");
  assert_set(p->emulator_cpus, "0-1,4-5,8-9,12-13");
  assert_set(p->mem_nodes, "0-3");
  g_assert_true(hwloc_bitmap_iszero(p->dedicated));
  if (!explicit_hostnodes)
    g_assert_true(has_text(p->reasons, "guest node 0 -> host node 0: least "
                                       "loaded (0 shared vCPUs on 2 usable "
                                       "CPUs)"));
  else
    g_assert_true(has_text(p->reasons, "guest node 3 -> host node 3: the "
                                       "caller's host-nodes"));
  g_assert_cmpuint(p->warnings->len, ==, 0);
}

static void
test_seed_numa_auto(void)
{
  g_autoptr(TestHost) h = epyc(NULL);
  check_seed_numa(h, QP_MODE_NUMA, FALSE);
  /* auto = numa for a guest with more than one node */
  check_seed_numa(h, QP_MODE_AUTO, FALSE);
}

static void
test_seed_numa_hostnodes(void)
{
  g_autoptr(TestHost) h = epyc(NULL);
  check_seed_numa(h, QP_MODE_NUMA, TRUE);
}

/* With the seed's own node sizes (numactl -H: 15891, 16124, 16124, 16123
 * MB) the differences are under 1 GiB, which the planner treats as equal:
 * still guest node k -> host node k. */
static void
test_seed_numa_seed_sizes(void)
{
  const guint64 mem[] = {15891, 16124, 16124, 16123};
  g_autoptr(TestHost) h = epyc(mem);
  check_seed_numa(h, QP_MODE_NUMA, FALSE);
}

/* Seed 000 configs 3_pinning_one_to_one_auto (seed measured: triad 53016
 * MB/s, read 60624 MB/s, latency 113.36 ns) and 5_pinning_one_to_one
 * (52362, 60387, 112.71) -- 3: ("same auto-assignment as 2,
 * but each vCPU is pinned to exactly one host core") and
 * 5_pinning_one_to_one (explicit hostnodes): vCPU 0 -> CPU 0, 1 -> 1,
 * 2 -> 4, 3 -> 5, 4 -> 8, 5 -> 9, 6 -> 12, 7 -> 13. The whole cores are
 * dedicated (with their siblings 16,17,20,21,...); memory is bound per guest
 * node because the guest has numa: 1. */
static void
check_seed_o2o(const QpHost *h, gboolean explicit_hostnodes)
{
  g_autoptr(QpRequest) r = seed_request(explicit_hostnodes);
  g_autoptr(Opts) o = opts_new(QP_MODE_ONE_TO_ONE, SEED_AFFINITY);
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  g_assert_cmpint(p->mode, ==, QP_MODE_ONE_TO_ONE);
  const char *cpu[] = {"0", "1", "4", "5", "8", "9", "12", "13"};
  for (guint v = 0; v < 8; v++)
    assert_vcpu(p, v, cpu[v]);
  assert_set(p->dedicated, "0-1,4-5,8-9,12-13,16-17,20-21,24-25,28-29");
  for (guint g = 0; g < 4; g++) {
    g_autofree char *k = g_strdup_printf("%u", g);
    assert_set(p->mem[g].host_nodes, k);
    g_assert_cmpint(p->mem[g].caller_set, ==, explicit_hostnodes);
    g_assert_cmpuint(claimed_on(p, (int)g), ==, 2048);
  }
  /* Every usable CPU is a vCPU's: the emulator shares the VM's CPUs. */
  assert_set(p->emulator_cpus, "0-1,4-5,8-9,12-13");
  assert_set(p->iothread_cpus, "0-1,4-5,8-9,12-13");
  assert_set(p->process_cpus, "0-1,4-5,8-9,12-13");
  g_assert_cmpuint(p->load->len, ==, 0);
  g_assert_cmpuint(p->warnings->len, ==, 0);
}

static void
test_seed_o2o_auto(void)
{
  g_autoptr(TestHost) h = epyc(NULL);
  check_seed_o2o(h, FALSE);
}

static void
test_seed_o2o_hostnodes(void)
{
  g_autoptr(TestHost) h = epyc(NULL);
  check_seed_o2o(h, TRUE);
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

/* ---- One-to-one and SMT ------------------------------------------------- */

static void
test_o2o_avoids_siblings(void)
{
  g_autoptr(TestHost) h = intel_2s();
  g_autoptr(QpRequest) r = request(4, 4096);
  g_autoptr(Opts) o = opts_new(QP_MODE_ONE_TO_ONE, NULL);
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  /* One PU per physical core, never two siblings; no vNUMA: no binding. */
  for (guint v = 0; v < 4; v++) {
    g_autofree char *c = g_strdup_printf("%u", v);
    assert_vcpu(p, v, c);
  }
  assert_set(p->dedicated, "0-3,16-19");
  /* The RAM is listed with its claim but not bound. */
  g_assert_cmpuint(p->n_mem, ==, 1);
  g_assert_null(p->mem[0].host_nodes);
  g_assert_null(p->mem_nodes);
  g_assert_cmpuint(claimed_on(p, 0), ==, 4096); /* claimed, not bound */
  /* Emulator off the dedicated cores, on the rest of node 0. */
  assert_set(p->emulator_cpus, "4-7,20-23");
  assert_set(p->process_cpus, "0-7,20-23");
  g_assert_cmpuint(p->warnings->len, ==, 0);
}

static void
test_o2o_threads2_pairs(void)
{
  g_autoptr(TestHost) h = intel_2s();
  g_autoptr(QpRequest) r = request(4, 4096);
  r->cores = 2;
  r->threads = 2;
  g_autoptr(Opts) o = opts_new(QP_MODE_ONE_TO_ONE, NULL);
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  /* vCPUs 2k and 2k+1 on the two PUs of one core. */
  assert_vcpu(p, 0, "0");
  assert_vcpu(p, 1, "16");
  assert_vcpu(p, 2, "1");
  assert_vcpu(p, 3, "17");
  assert_set(p->dedicated, "0-1,16-17");
  g_assert_true(has_text(p->reasons, "threads=2"));
}

/* No sibling pairs in the affinity: with --smt=prefer each vCPU gets a core
 * of its own (and a warning); with --smt=strict that is an error. */
static void
test_o2o_threads2_without_pairs(void)
{
  g_autoptr(TestHost) h = intel_2s();
  g_autoptr(QpRequest) r = request(4, 4096);
  r->cores = 2;
  r->threads = 2;
  g_autoptr(Opts) o = opts_new(QP_MODE_ONE_TO_ONE, "0-7");
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  for (guint v = 0; v < 4; v++) {
    g_autofree char *c = g_strdup_printf("%u", v);
    assert_vcpu(p, v, c);
  }
  g_assert_true(has_text(p->warnings, "the guest has threads=2 but too few "
                                      "free cores have 2 usable SMT "
                                      "siblings"));
  o->o.smt = QP_SMT_STRICT;
  g_autoptr(GError) error = NULL;
  g_autoptr(QpPlan) p2 = qp_plan_compute(h, NULL, r, &o->o, &error);
  g_assert_null(p2);
  assert_nofit(error, "one-to-one with threads=2 needs 2 free cores with 2 "
                      "usable SMT siblings but only 0 are free in affinity "
                      "0-7");
}

static void
test_o2o_strict_shortage(void)
{
  g_autoptr(TestHost) h = intel_2s();
  g_autoptr(QpRequest) r = request(8, 4096);
  g_autoptr(Opts) o = opts_new(QP_MODE_ONE_TO_ONE, "0-5,16-21");
  o->o.smt = QP_SMT_STRICT;
  g_autoptr(GError) error = NULL;
  g_autoptr(QpPlan) p = qp_plan_compute(h, NULL, r, &o->o, &error);
  g_assert_null(p);
  assert_nofit(error, "one-to-one needs 8 free cores but only 6 are free in "
                      "affinity 0-5,16-21");
  assert_nofit(error, "--smt=strict");
}

static void
test_o2o_prefer_siblings_last(void)
{
  g_autoptr(TestHost) h = intel_2s();
  g_autoptr(QpRequest) r = request(8, 4096);
  g_autoptr(Opts) o = opts_new(QP_MODE_ONE_TO_ONE, "0-5,16-21");
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  /* Six cores first, then the siblings of the first two. */
  const char *cpu[] = {"0", "1", "2", "3", "4", "5", "16", "17"};
  for (guint v = 0; v < 8; v++)
    assert_vcpu(p, v, cpu[v]);
  assert_set(p->dedicated, "0-5,16-21");
  g_assert_cmpuint(p->warnings->len, ==, 1);
  g_assert_true(has_text(p->warnings, "vCPUs 0-1,6-7 share physical cores"));
}

/* A guest with vNUMA whose nodes land on different sockets. */
static void
test_o2o_vnuma(void)
{
  g_autoptr(TestHost) h = intel_2s();
  g_autoptr(QpRequest) r = request(4, 4096);
  request_vnuma(r, 2, 2, 2048);
  g_autoptr(Opts) o = opts_new(QP_MODE_ONE_TO_ONE, NULL);
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  assert_vcpu(p, 0, "0");
  assert_vcpu(p, 1, "1");
  assert_vcpu(p, 2, "8");
  assert_vcpu(p, 3, "9");
  assert_set(p->mem[0].host_nodes, "0");
  assert_set(p->mem[1].host_nodes, "1");
  assert_set(p->emulator_cpus, "2-7,10-15,18-23,26-31");
}

/* Hotplug: the plan covers maxcpus, but only the boot vCPUs' cores are
 * dedicated; a vCPU plugged later takes one of the spare cores (the VM's
 * node first) when it comes, and until then shares the VM's CPUs. */
static void
test_maxcpus(void)
{
  g_autoptr(TestHost) h = intel_2s();
  g_autoptr(QpRequest) r = request(2, 1024);
  r->maxcpus = 4;
  g_autoptr(Opts) o = opts_new(QP_MODE_ONE_TO_ONE, NULL);
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  g_assert_cmpuint(p->n_vcpus, ==, 4);
  g_assert_cmpuint(p->n_boot_vcpus, ==, 2);
  assert_vcpu(p, 0, "0");
  assert_vcpu(p, 1, "1");
  assert_vcpu(p, 3, "0-1");
  assert_set(p->dedicated, "0-1,16-17");
  g_assert_nonnull(p->hotplug_cores);
  /* The 6 other cores of node 0, then the 8 of node 1. */
  g_assert_cmpuint(p->hotplug_cores->len, ==, 6 + 8);
  assert_set(g_ptr_array_index(p->hotplug_cores, 0), "2,18");
  assert_set(g_ptr_array_index(p->hotplug_cores, 6), "8,24");
}

/* ---- Distances ---------------------------------------------------------- */

/* Nodes 0 and 4 hold the most memory, but a guest that needs two nodes gets
 * two on one socket (distance 12), not 0 and 4 (distance 32). */
static void
test_distance_same_socket(void)
{
  g_autoptr(TestHost) h = two_socket_8_nodes();
  h->nodes[0].total_mib = h->nodes[4].total_mib = 16384;
  g_autoptr(QpRequest) r = request(4, 20000);
  g_autoptr(Opts) o = opts_new(QP_MODE_BALANCED, NULL);
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  assert_set(p->mem[0].host_nodes, "0-1");
  assert_set(p->process_cpus, "0-7");
  g_assert_cmpuint(claimed_on(p, 0) + claimed_on(p, 1), ==, 20000);
  g_assert_cmpuint(claimed_on(p, 1), ==, 8192); /* all node 1 has */
  g_assert_true(has_text(p->reasons, "max distance 12"));

  /* The same by CPUs: 6 vCPUs need two 4-core nodes. */
  g_autoptr(QpRequest) r2 = request(6, 2048);
  g_autoptr(QpPlan) p2 = plan_ok(h, NULL, r2, o);
  assert_set(p2->mem[0].host_nodes, "0-1");
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

  /* numa mode never maps a guest node to it: a third guest node shares. */
  g_autoptr(QpRequest) r4 = request(3, 3072);
  request_vnuma(r4, 3, 1, 1024);
  g_autoptr(Opts) o4 = opts_new(QP_MODE_NUMA, NULL);
  g_autoptr(QpPlan) p4 = plan_ok(h, NULL, r4, o4);
  assert_set(p4->mem[0].host_nodes, "0");
  assert_set(p4->mem[1].host_nodes, "1");
  assert_set(p4->mem[2].host_nodes, "0");
  g_assert_true(has_text(p4->warnings, "guest node 2 shares host node 0 "
                                       "with guest node 0"));
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

/* A guest that must span nodes: spread shares its memory evenly, pack
 * fills the tightest node first so that what is left stays together, where
 * a later guest fits on one node (bench/simulate: the difference between
 * pack and first fit). */
static void
test_spanning_memory_split(void)
{
  g_autoptr(TestHost) h = epyc(NULL);
  g_autoptr(QpClaims) c = qp_claims_new();
  QpClaim *a = claim_add(c, "a");
  claim_mem(a, 0, 8384);  /* 8000 MiB left */
  claim_mem(a, 1, 6384);  /* 10000 left */
  claim_mem(a, 2, 16384); /* full */
  claim_mem(a, 3, 16384); /* full */
  g_autoptr(QpRequest) r = request(2, 12000);

  g_autoptr(Opts) spread = opts_new(QP_MODE_BALANCED, NULL);
  g_autoptr(QpPlan) ps = plan_ok(h, c, r, spread);
  assert_set(ps->mem[0].host_nodes, "0-1");
  g_assert_cmpuint(claimed_on(ps, 0), ==, 6000);
  g_assert_cmpuint(claimed_on(ps, 1), ==, 6000);

  g_autoptr(Opts) pack = opts_new(QP_MODE_BALANCED, NULL);
  pack->o.strategy = QP_STRATEGY_PACK;
  g_autoptr(QpPlan) pp = plan_ok(h, c, r, pack);
  assert_set(pp->mem[0].host_nodes, "0-1");
  g_assert_cmpuint(claimed_on(pp, 0), ==, 8000);
  g_assert_cmpuint(claimed_on(pp, 1), ==, 4000);

  /* The next 6000 MiB guest: on one node after pack, spanning after
   * spread (4000 and 2000 MiB left). */
  QpClaim *after_pack = qp_claim_from_plan(pp, "b", "b");
  g_ptr_array_add(c->claims, after_pack);
  g_autoptr(QpRequest) r2 = request(2, 6000);
  g_autoptr(QpPlan) next = plan_ok(h, c, r2, pack);
  assert_set(next->mem[0].host_nodes, "1");
  g_ptr_array_remove(c->claims, after_pack);
  g_ptr_array_add(c->claims, qp_claim_from_plan(ps, "b", "b"));
  g_autoptr(QpPlan) next2 = plan_ok(h, c, r2, spread);
  assert_set(next2->mem[0].host_nodes, "0-1");
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

/* ---- Devices ------------------------------------------------------------ */

static void
add_pci(QpHost *h, const char *bdf, int node)
{
  QpPciDevice d = {.bdf = g_strdup(bdf), .node = node};
  g_array_append_val(h->pci, d);
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

/* ---- numa: assignment ---------------------------------------------------- */

/* Node 0 has 8 CPUs, node 1 has 4. Guest node 0 (1 vCPU) would take node 0
 * first (equal load and memory, lowest id), leaving nothing for guest node
 * 1 (6 vCPUs); the matching moves guest node 0 to node 1 instead of making
 * two guest nodes share a host node. */
static void
test_numa_distinct_before_sharing(void)
{
  g_autoptr(TestHost) h = host_new(2, 16384, 20);
  for (int c = 0; c < 12; c++)
    host_core(h, c < 8 ? 0 : 1, 0, 0, c, -1);
  host_done(h);
  g_autoptr(QpRequest) r = request(7, 2048);
  request_vnuma(r, 2, 1, 1024);
  hwloc_bitmap_set_range(r->gnodes[1].vcpus, 1, 6);
  g_autoptr(Opts) o = opts_new(QP_MODE_NUMA, NULL);
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  assert_set(p->mem[0].host_nodes, "1");
  assert_set(p->mem[1].host_nodes, "0");
  assert_vcpu(p, 0, "8-11");
  assert_vcpu(p, 6, "0-7");
  g_assert_cmpuint(p->warnings->len, ==, 0);

  /* A memory-only guest node may go to a node without usable CPUs. */
  g_autoptr(QpRequest) r2 = request(2, 2048);
  request_vnuma(r2, 2, 2, 1024);
  hwloc_bitmap_zero(r2->gnodes[1].vcpus);
  g_autoptr(Opts) o2 = opts_new(QP_MODE_NUMA, "0-7");
  g_autoptr(QpPlan) p2 = plan_ok(h, NULL, r2, o2);
  assert_set(p2->mem[0].host_nodes, "0");
  assert_set(p2->mem[1].host_nodes, "1");
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
  g_assert_cmpuint(p->warnings->len, ==, 2);
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

/* ---- Best effort: mode auto never refuses a VM for CPUs ------------------ */

/* NODES nodes of CPUS CPUs each (one PU per core, CPU ids consecutive),
 * MIB of memory each, SLIT 10/20. */
static QpHost *
flat_host(guint nodes, guint cpus, guint64 mib)
{
  QpHost *h = host_new(nodes, mib, 20);
  for (guint n = 0; n < nodes; n++)
    for (guint c = 0; c < cpus; c++)
      host_core(h, (int)n, (int)n, 0, (int)(n * cpus + c), -1);
  host_done(h);
  return h;
}

/* The plan is best effort, and its one warning (among WARNINGS in all) names
 * every NEEDLE. */
static void
assert_best_effort(const QpPlan *p, guint warnings, const char *const *needles)
{
  g_assert_true(p->best_effort);
  g_assert_cmpuint(p->not_given->len, >, 0);
  g_assert_cmpuint(p->warnings->len, ==, warnings);
  guint hits = 0;
  for (guint w = 0; w < p->warnings->len; w++) {
    const char *line = g_ptr_array_index(p->warnings, w);
    if (!g_str_has_prefix(line, "best effort (mode auto): "))
      continue;
    hits++;
    g_assert_null(strchr(line, '\n'));
    for (guint i = 0; needles[i] != NULL; i++)
      if (strstr(line, needles[i]) == NULL)
        g_error("warning \"%s\" lacks \"%s\"", line, needles[i]);
  }
  g_assert_cmpuint(hits, ==, 1);
}

/* MODE given explicitly refuses the request for CPUs. */
static void
assert_refused_for_cpus(const QpHost *h, const QpClaims *c, const QpRequest *r,
                        QpMode mode)
{
  g_autoptr(Opts) o = opts_new(mode, NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(QpPlan) p = qp_plan_compute(h, c, r, &o->o, &error);
  g_assert_null(p);
  assert_nofit(error, "VM does not fit: ");
  if (strstr(error->message, "CPU") == NULL &&
      strstr(error->message, "cores") == NULL)
    g_error("%s refuses for something else than CPUs: %s", qp_mode_name(mode),
            error->message);
}

/* The same request in every explicit mode is refused for CPUs. */
static void
assert_explicit_modes_refuse(const QpHost *h, const QpClaims *c,
                             const QpRequest *r)
{
  assert_refused_for_cpus(h, c, r, QP_MODE_BALANCED);
  assert_refused_for_cpus(h, c, r, QP_MODE_NUMA);
  assert_refused_for_cpus(h, c, r, QP_MODE_ONE_TO_ONE);
}

/* This host's shape (2 CPUs, one node): -smp 8 floats on both CPUs. */
static void
test_best_effort_one_node(void)
{
  g_autoptr(TestHost) h = flat_host(1, 2, 4096);
  g_autoptr(QpRequest) r = request(8, 1024);
  g_autoptr(Opts) o = opts_new(QP_MODE_AUTO, NULL);
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  g_assert_cmpint(p->mode, ==, QP_MODE_BALANCED);
  for (guint v = 0; v < 8; v++)
    assert_vcpu(p, v, "0-1");
  assert_set(p->process_cpus, "0-1");
  assert_set(p->mem_nodes, "0");
  g_assert_cmpuint(claimed_on(p, 0), ==, 1024);
  g_assert_cmpuint(load_on(p, 0), ==, 8);
  g_assert_cmpuint(p->cpu_load->len, ==, 1);
  assert_set(g_array_index(p->cpu_load, QpCpuLoad, 0).cpus, "0-1");
  g_assert_cmpuint(g_array_index(p->cpu_load, QpCpuLoad, 0).vcpus, ==, 8);
  const char *want[] = {"8 vCPUs share 2 usable CPUs on host node 0 (4.00 per "
                        "CPU)",
                        "--mode=balanced refuses", NULL};
  assert_best_effort(p, 1, want);
  g_autoptr(JsonNode) json = qp_plan_to_json(p);
  JsonObject *jo = json_node_get_object(json);
  g_assert_true(json_object_get_boolean_member(jo, "best-effort"));
  g_assert_cmpuint(
      json_array_get_length(json_object_get_array_member(jo, "not-given")), ==,
      1);
  JsonArray *cl = json_object_get_array_member(
      json_object_get_object_member(jo, "claims"), "cpu-load");
  g_assert_cmpuint(json_array_get_length(cl), ==, 1);
  g_assert_cmpstr(json_object_get_string_member(
                      json_array_get_object_element(cl, 0), "cpus"),
                  ==, "0-1");
  assert_explicit_modes_refuse(h, NULL, r);

  /* A VM that fits is no best effort: no warning, no not-given. */
  g_autoptr(QpRequest) r2 = request(2, 1024);
  g_autoptr(QpPlan) p2 = plan_ok(h, NULL, r2, o);
  g_assert_false(p2->best_effort);
  g_assert_cmpuint(p2->not_given->len, ==, 0);
  g_assert_cmpuint(p2->warnings->len, ==, 0);
}

/* A 2-node guest with 4 vCPUs per node on that host: both guest nodes on
 * host node 0, memory bound per guest node there. */
static void
test_best_effort_vnuma_one_node(void)
{
  g_autoptr(TestHost) h = flat_host(1, 2, 4096);
  g_autoptr(QpRequest) r = request(8, 2048);
  request_vnuma(r, 2, 4, 1024);
  g_autoptr(Opts) o = opts_new(QP_MODE_AUTO, NULL);
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  g_assert_cmpint(p->mode, ==, QP_MODE_NUMA);
  for (guint v = 0; v < 8; v++)
    assert_vcpu(p, v, "0-1");
  g_assert_cmpuint(p->n_mem, ==, 2);
  for (guint m = 0; m < 2; m++) {
    g_assert_cmpint(p->mem[m].gnode, ==, (int)m);
    assert_set(p->mem[m].host_nodes, "0");
    g_assert_cmpint(p->mem[m].policy, ==, QP_POLICY_BIND);
  }
  g_assert_cmpuint(claimed_on(p, 0), ==, 2048);
  g_assert_cmpuint(load_on(p, 0), ==, 8);
  const char *want[] = {"8 vCPUs share 2 usable CPUs (4.00 per CPU)",
                        "guest nodes 0-1 share host node 0",
                        "--mode=numa refuses", NULL};
  assert_best_effort(p, 1, want);
  assert_explicit_modes_refuse(h, NULL, r);
}

/* More vCPUs than the host has CPUs: every usable CPU, memory bound over
 * the nodes the vCPUs float on, as balanced binds a set of nodes. */
static void
test_best_effort_every_cpu(void)
{
  g_autoptr(TestHost) h = epyc(NULL);
  g_autoptr(QpRequest) r = request(40, 4096);
  g_autoptr(Opts) o = opts_new(QP_MODE_AUTO, NULL);
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  assert_set(p->process_cpus, "0-31");
  assert_vcpu(p, 39, "0-31");
  assert_set(p->mem_nodes, "0-3");
  for (int n = 0; n < 4; n++) {
    g_assert_cmpuint(claimed_on(p, n), ==, 1024);
    g_assert_cmpuint(load_on(p, n), ==, 10);
  }
  const char *want[] = {"40 vCPUs share 32 usable CPUs on host nodes 0-3 "
                        "(1.25 per CPU)",
                        NULL};
  assert_best_effort(p, 1, want);
  assert_explicit_modes_refuse(h, NULL, r);

  /* Inside --affinity (and the cgroup): never beyond it. */
  g_autoptr(Opts) oa = opts_new(QP_MODE_AUTO, "4-7");
  g_autoptr(QpPlan) pa = plan_ok(h, NULL, r, oa);
  assert_set(pa->process_cpus, "4-7");
  assert_set(pa->mem_nodes, "1");
  const char *want_a[] = {"40 vCPUs share 4 usable CPUs on host node 1 "
                          "(10.00 per CPU)",
                          NULL};
  assert_best_effort(pa, 1, want_a);
}

/* Guest nodes whose vCPUs do not fit one host node span the nearest nodes'
 * spare CPUs ("more nodes") before any CPU is shared. */
static void
test_best_effort_more_nodes(void)
{
  g_autoptr(TestHost) h = flat_host(2, 4, 8192);
  g_autoptr(QpRequest) r = request(8, 2048);
  request_vnuma(r, 2, 4, 1024);
  /* Guest node 0 gets vCPUs 0-5, guest node 1 vCPUs 6-7. */
  hwloc_bitmap_set_range(r->gnodes[0].vcpus, 0, 5);
  hwloc_bitmap_zero(r->gnodes[1].vcpus);
  hwloc_bitmap_set_range(r->gnodes[1].vcpus, 6, 7);
  g_autoptr(Opts) o = opts_new(QP_MODE_AUTO, NULL);
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  assert_vcpu(p, 0, "0-7");
  assert_vcpu(p, 5, "0-7");
  assert_vcpu(p, 6, "4-7");
  assert_vcpu(p, 7, "4-7");
  assert_set(p->mem[0].host_nodes, "0");
  assert_set(p->mem[1].host_nodes, "1");
  g_assert_cmpuint(load_on(p, 0), ==, 4);
  g_assert_cmpuint(load_on(p, 1), ==, 4);
  const char *want[] = {"guest node 0's vCPUs span host nodes 0-1", NULL};
  assert_best_effort(p, 1, want);
  g_assert_false(has_text(p->not_given, "per CPU"));
  /* Balanced and one-to-one without vNUMA would fit 8 vCPUs on 8 CPUs. */
  assert_refused_for_cpus(h, NULL, r, QP_MODE_NUMA);
}

/* More vCPUs than CPUs on uneven nodes: each guest node gets its share of
 * the CPUs (vCPUs x usable / all vCPUs), spilling to the nearest node. */
static void
test_best_effort_even_share(void)
{
  g_autoptr(TestHost) h = host_new(2, 8192, 20);
  for (int c = 0; c < 8; c++)
    host_core(h, c < 6 ? 0 : 1, 0, 0, c, -1);
  host_done(h);
  g_autoptr(QpRequest) r = request(12, 2048);
  request_vnuma(r, 2, 6, 1024);
  g_autoptr(Opts) o = opts_new(QP_MODE_AUTO, NULL);
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  assert_vcpu(p, 0, "0-5"); /* 6 vCPUs on 6 of the 8 CPUs: its share */
  assert_vcpu(p, 6, "0-7"); /* node 1's 2 CPUs and node 0's 2 spare */
  assert_set(p->mem[1].host_nodes, "1");
  g_assert_cmpuint(load_on(p, 0), ==, 9);
  g_assert_cmpuint(load_on(p, 1), ==, 3);
  const char *want[] = {"12 vCPUs share 8 usable CPUs (1.50 per CPU)",
                        "guest node 1's vCPUs span host nodes 0-1", NULL};
  assert_best_effort(p, 1, want);
}

/* Another VM's dedicated cores are never used while other CPUs exist; a
 * guest node's memory goes where its vCPUs run when it fits there. */
static void
test_best_effort_dedicated(void)
{
  g_autoptr(TestHost) h = flat_host(2, 2, 8192);
  g_autoptr(QpClaims) c = qp_claims_new();
  QpClaim *o2o = claim_add(c, "o2o");
  o2o->mode = QP_MODE_ONE_TO_ONE;
  hwloc_bitmap_set_range(o2o->dedicated, 0, 1); /* all of node 0 */
  claim_mem(o2o, 0, 1024);

  g_autoptr(QpRequest) r = request(4, 2048);
  request_vnuma(r, 2, 2, 1024);
  g_autoptr(Opts) o = opts_new(QP_MODE_AUTO, NULL);
  g_autoptr(QpPlan) p = plan_ok(h, c, r, o);
  for (guint v = 0; v < 4; v++)
    assert_vcpu(p, v, "2-3");
  assert_set(p->mem[0].host_nodes, "1");
  assert_set(p->mem[1].host_nodes, "1");
  const char *want[] = {"guest nodes 0-1 share host node 1",
                        "4 vCPUs share 2 usable CPUs", NULL};
  assert_best_effort(p, 1, want);
  g_assert_false(has_text(p->not_given, "dedicated"));
  assert_explicit_modes_refuse(h, c, r);

  /* Memory that fits only on node 0 stays there; the vCPUs run on the
   * nearest CPUs that are not dedicated. */
  g_autoptr(QpRequest) r2 = request(4, 10240);
  request_vnuma(r2, 2, 2, 5120);
  claim_mem(o2o, 1, 2048); /* node 1 has 6144 left */
  g_autoptr(QpPlan) p2 = plan_ok(h, c, r2, o);
  assert_set(p2->mem[0].host_nodes, "1");
  assert_set(p2->mem[1].host_nodes, "0");
  assert_vcpu(p2, 0, "2-3");
  assert_vcpu(p2, 3, "2-3");
  const char *want2[] = {"guest node 1's memory is on host node 0, its vCPUs "
                         "on 1",
                         NULL};
  assert_best_effort(p2, 1, want2);
}

/* When other VMs have dedicated every usable CPU, the VM shares their cores
 * rather than being refused, and says so. */
static void
test_best_effort_all_dedicated(void)
{
  g_autoptr(TestHost) h = flat_host(1, 2, 4096);
  g_autoptr(QpClaims) c = qp_claims_new();
  QpClaim *o2o = claim_add(c, "o2o");
  o2o->mode = QP_MODE_ONE_TO_ONE;
  hwloc_bitmap_set_range(o2o->dedicated, 0, 1);
  g_autoptr(QpRequest) r = request(2, 1024);
  g_autoptr(Opts) o = opts_new(QP_MODE_AUTO, NULL);
  g_autoptr(QpPlan) p = plan_ok(h, c, r, o);
  assert_vcpu(p, 0, "0-1");
  assert_vcpu(p, 1, "0-1");
  g_assert_true(hwloc_bitmap_iszero(p->dedicated));
  const char *want[] = {"every usable CPU is dedicated to a one-to-one VM, "
                        "so the vCPUs share those cores (0-1)",
                        NULL};
  assert_best_effort(p, 1, want);
  assert_explicit_modes_refuse(h, c, r);
}

/* Hybrid hosts: the CPUs of every kind count when no single kind holds the
 * vCPUs. */
static void
test_best_effort_kinds(void)
{
  g_autoptr(TestHost) h = hybrid(); /* 8 P CPUs, 12 E CPUs */
  g_autoptr(Opts) o = opts_new(QP_MODE_AUTO, NULL);
  g_autoptr(QpRequest) r = request(16, 4096);
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  assert_set(p->process_cpus, "0-19");
  assert_set(p->startup_cpus, "8-19"); /* the largest same-kind subset */
  const char *want[] = {"the vCPUs straddle CPU kinds", NULL};
  assert_best_effort(p, 1, want);
  g_assert_false(has_text(p->not_given, "per CPU"));

  g_autoptr(QpRequest) r2 = request(24, 4096);
  g_autoptr(QpPlan) p2 = plan_ok(h, NULL, r2, o);
  assert_set(p2->process_cpus, "0-19");
  const char *want2[] = {"24 vCPUs share 20 usable CPUs", "straddle", NULL};
  assert_best_effort(p2, 1, want2);
}

/* --device-locality=required keeps the VM on the devices' nodes, sharing
 * their CPUs. */
static void
test_best_effort_device_required(void)
{
  g_autoptr(TestHost) h = intel_2s();
  add_pci(h, "0000:af:00.0", 1);
  g_autoptr(QpRequest) r = request(20, 4096);
  r->vfio = g_new0(char *, 2);
  r->vfio[0] = g_strdup("0000:af:00.0");
  g_autoptr(Opts) o = opts_new(QP_MODE_AUTO, NULL);
  o->o.device_locality = QP_DEVLOC_REQUIRED;
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  assert_set(p->process_cpus, "8-15,24-31");
  assert_set(p->mem_nodes, "1");
  const char *want[] = {"20 vCPUs share 16 usable CPUs on host node 1", NULL};
  assert_best_effort(p, 1, want);
}

/* Memory that does not fit is refused in every mode, auto included, also
 * when the CPUs do not fit either; options that leave no CPU at all too. */
static void
test_best_effort_memory_refused(void)
{
  g_autoptr(TestHost) h = flat_host(1, 2, 4096);
  const QpMode modes[] = {QP_MODE_AUTO, QP_MODE_BALANCED, QP_MODE_NUMA,
                          QP_MODE_ONE_TO_ONE};
  for (gsize m = 0; m < G_N_ELEMENTS(modes); m++) {
    g_autoptr(Opts) o = opts_new(modes[m], NULL);
    for (guint vcpus = 1; vcpus <= 8; vcpus *= 8) {
      g_autoptr(QpRequest) r = request(vcpus, 8192);
      g_autoptr(GError) error = NULL;
      g_autoptr(QpPlan) p = qp_plan_compute(h, NULL, r, &o->o, &error);
      g_assert_null(p);
      if (modes[m] == QP_MODE_AUTO || vcpus == 1)
        assert_nofit(error, "guest needs 8192 MiB but the best node 0 has "
                            "only 4096 MiB uncommitted");
    }
  }
  /* A guest node that fits no node, in auto. */
  g_autoptr(QpRequest) r = request(8, 6144);
  request_vnuma(r, 2, 4, 3072);
  g_autoptr(Opts) o = opts_new(QP_MODE_AUTO, NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(QpPlan) p = qp_plan_compute(h, NULL, r, &o->o, &error);
  g_assert_null(p);
  assert_nofit(error, "guest node 1 needs 3072 MiB but the best node 0 has "
                      "only 1024 MiB uncommitted");

  /* --affinity outside the host leaves no CPU: its own bad option. */
  g_autoptr(QpRequest) r2 = request(8, 1024);
  g_autoptr(Opts) o2 = opts_new(QP_MODE_AUTO, "4000");
  g_autoptr(GError) error2 = NULL;
  g_autoptr(QpPlan) p2 = qp_plan_compute(h, NULL, r2, &o2->o, &error2);
  g_assert_null(p2);
  assert_nofit(error2, "no CPU may run the guest's 8 vCPUs in affinity 4000");
}

/* Hot-pluggable vCPUs: the boot vCPUs share the CPUs, those plugged later
 * join them; the load counts the boot vCPUs, one warning. */
static void
test_best_effort_hotplug(void)
{
  g_autoptr(TestHost) h = flat_host(1, 2, 4096);
  g_autoptr(QpRequest) r = request(4, 1024);
  r->maxcpus = 8;
  g_autoptr(Opts) o = opts_new(QP_MODE_AUTO, NULL);
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  g_assert_cmpuint(p->n_boot_vcpus, ==, 4);
  assert_vcpu(p, 7, "0-1");
  g_assert_cmpuint(load_on(p, 0), ==, 4);
  const char *want[] = {"4 vCPUs share 2 usable CPUs", NULL};
  assert_best_effort(p, 1, want);
}

/* The ledger records the load a best-effort VM adds, per CPU set, and a
 * later auto VM puts its guest nodes on the less loaded node. */
static void
test_best_effort_sees_load(void)
{
  g_autoptr(TestHost) h = flat_host(2, 2, 8192);
  g_autoptr(QpClaims) c = qp_claims_new();
  /* First VM: 6 vCPUs inside --hostnodes=0. */
  g_autoptr(QpRequest) r1 = request(6, 1024);
  g_autoptr(Opts) o1 = opts_new(QP_MODE_AUTO, NULL);
  o1->o.hostnodes = list("0");
  g_autoptr(QpPlan) p1 = plan_ok(h, c, r1, o1);
  g_assert_true(p1->best_effort);
  QpClaim *first = qp_claim_from_plan(p1, "first", "first");
  g_assert_true(first->best_effort);
  g_assert_cmpuint(first->cpu_load->len, ==, 1);
  assert_set(g_array_index(first->cpu_load, QpCpuLoad, 0).cpus, "0-1");
  g_assert_cmpuint(g_array_index(first->cpu_load, QpCpuLoad, 0).vcpus, ==, 6);
  g_ptr_array_add(c->claims, first);
  /* Another VM holds as much memory on node 1, so that only the load tells
   * the nodes apart. */
  claim_mem(claim_add(c, "memory"), 1, claimed_on(p1, 0));
  g_autofree double *load = qp_claims_cpu_load(h, c);
  g_assert_cmpfloat(load[0], ==, 3.0);
  g_assert_cmpfloat(load[1], ==, 3.0);
  g_assert_cmpfloat(load[2], ==, 0.0);

  /* Second VM: 3 guest nodes of 2 vCPUs on the 4 CPUs; two of them go to
   * the node the first VM does not load. */
  g_autoptr(QpRequest) r2 = request(6, 3072);
  request_vnuma(r2, 3, 2, 1024);
  g_autoptr(Opts) o2 = opts_new(QP_MODE_AUTO, NULL);
  g_autoptr(QpPlan) p2 = plan_ok(h, c, r2, o2);
  guint on1 = 0;
  for (guint m = 0; m < p2->n_mem; m++)
    on1 += hwloc_bitmap_isset(p2->mem[m].host_nodes, 1);
  g_assert_cmpuint(on1, ==, 2);
  assert_set(p2->mem[0].host_nodes, "1");
}

/* Shared load per CPU: from a record's CPU sets, or spread over the node's
 * CPUs that are not dedicated when the record predates CPU sets. */
static void
test_best_effort_cpu_load(void)
{
  g_autoptr(TestHost) h = flat_host(2, 4, 8192);
  g_autoptr(QpClaims) c = qp_claims_new();
  QpClaim *old = claim_add(c, "old");
  QpNodeLoad l = {.node = 0, .vcpus = 3};
  g_array_append_val(old->load, l);
  QpClaim *o2o = claim_add(c, "o2o");
  hwloc_bitmap_set(o2o->dedicated, 0);
  QpClaim *sets = claim_add(c, "sets");
  QpNodeLoad l1 = {.node = 1, .vcpus = 4};
  g_array_append_val(sets->load, l1);
  QpCpuLoad cl = {list("6-7"), 4};
  g_array_append_val(sets->cpu_load, cl);
  g_autofree double *load = qp_claims_cpu_load(h, c);
  const double want[] = {0, 1, 1, 1, 0, 0, 2, 2};
  for (guint i = 0; i < 8; i++)
    g_assert_cmpfloat(load[i], ==, want[i]);
}

/* ---- Recorded hosts (tests/data/topologies, loaded by topology/host.c) --- */

static QpHost *
recorded(const char *name)
{
  const char *dir = g_getenv("QP_TOPOLOGIES");
  if (dir == NULL)
    dir = QP_TEST_TOPOLOGIES;
  g_autofree char *path = g_build_filename(dir, name, NULL);
  g_autoptr(GError) error = NULL;
  QpHost *h = qp_host_load(path, &error);
  g_assert_no_error(error);
  g_assert_nonnull(h);
  if (g_test_verbose()) {
    g_autofree char *text = qp_host_to_text(h);
    g_printerr("%s\n", text);
  }
  return h;
}

/* The seed's six configurations on the recorded EPYC 7351P, whose nodes
 * have the seed's own sizes (15891, 16124, 16124, 16123 MB). */
static void
test_recorded_seed(void)
{
  g_autoptr(QpHost) h = recorded("epyc-7351p.xml");
  check_seed_balanced(h, FALSE);
  check_seed_balanced(h, TRUE);
  check_seed_numa(h, QP_MODE_NUMA, FALSE);
  check_seed_numa(h, QP_MODE_NUMA, TRUE);
  check_seed_o2o(h, FALSE);
  check_seed_o2o(h, TRUE);
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
  assert_set(p->mem[0].host_nodes, "0-1");
  g_assert_true(has_text(p->reasons, "max distance 12"));

  /* With nodes 1-3 busy, the second node is still on socket 0 when one
   * is left there, never across. */
  g_autoptr(QpClaims) c = qp_claims_new();
  QpClaim *x = claim_add(c, "x");
  hwloc_bitmap_set_range(x->dedicated, 4, 11); /* nodes 1 and 2 */
  g_autoptr(QpPlan) p2 = plan_ok(h, c, r, o);
  assert_set(p2->mem[0].host_nodes, "0,3");
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
}

/* Best effort on recorded hosts: this machine (2 CPUs, one node), the
 * cgroup subset and the seed's EPYC. */
static void
test_recorded_best_effort(void)
{
  g_autoptr(Opts) o = opts_new(QP_MODE_AUTO, NULL);
  g_autoptr(QpHost) me = recorded("this-machine.xml");
  g_autoptr(QpRequest) r = request(8, 512);
  g_autoptr(QpPlan) p = plan_ok(me, NULL, r, o);
  for (guint v = 0; v < 8; v++)
    assert_vcpu(p, v, "0-1");
  const char *want[] = {"8 vCPUs share 2 usable CPUs", NULL};
  assert_best_effort(p, 1, want);
  g_autoptr(QpRequest) r2 = request(8, 512);
  request_vnuma(r2, 2, 4, 256);
  g_autoptr(QpPlan) p2 = plan_ok(me, NULL, r2, o);
  assert_set(p2->mem[0].host_nodes, "0");
  assert_set(p2->mem[1].host_nodes, "0");
  const char *want2[] = {"guest nodes 0-1 share host node 0", NULL};
  assert_best_effort(p2, 1, want2);

  /* The cgroup allows 0-5,16-19: never anything else. */
  g_autoptr(QpHost) cg = recorded("cgroup-subset.xml");
  g_autoptr(QpRequest) r3 = request(12, 4096);
  g_autoptr(QpPlan) p3 = plan_ok(cg, NULL, r3, o);
  assert_set(p3->process_cpus, "0-5,16-19");
  const char *want3[] = {"12 vCPUs share 10 usable CPUs", NULL};
  assert_best_effort(p3, 1, want3);

  /* 4 guest nodes of 10 vCPUs on the EPYC's 4 nodes of 8 CPUs: each guest
   * node's share is exactly its own host node. */
  g_autoptr(QpHost) epyc_rec = recorded("epyc-7351p.xml");
  g_autoptr(QpRequest) r4 = request(40, 8192);
  request_vnuma(r4, 4, 10, 2048);
  g_autoptr(QpPlan) p4 = plan_ok(epyc_rec, NULL, r4, o);
  for (guint g = 0; g < 4; g++) {
    g_autofree char *cpus = g_strdup_printf("%u-%u,%u-%u", 4 * g, 4 * g + 3,
                                            16 + 4 * g, 16 + 4 * g + 3);
    g_autofree char *node = g_strdup_printf("%u", g);
    assert_vcpu(p4, 10 * g, cpus);
    assert_vcpu(p4, 10 * g + 9, cpus);
    assert_set(p4->mem[g].host_nodes, node);
    g_assert_cmpuint(load_on(p4, (int)g), ==, 10);
  }
  const char *want4[] = {"40 vCPUs share 32 usable CPUs (1.25 per CPU)", NULL};
  assert_best_effort(p4, 1, want4);
  g_assert_cmpuint(p4->not_given->len, ==, 1);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/plan/seed/balanced", test_seed_balanced);
  g_test_add_func("/plan/seed/balanced-hostnodes",
                  test_seed_balanced_hostnodes);
  g_test_add_func("/plan/seed/numa-auto", test_seed_numa_auto);
  g_test_add_func("/plan/seed/numa-hostnodes", test_seed_numa_hostnodes);
  g_test_add_func("/plan/seed/numa-seed-node-sizes", test_seed_numa_seed_sizes);
  g_test_add_func("/plan/seed/one-to-one-auto", test_seed_o2o_auto);
  g_test_add_func("/plan/seed/one-to-one-hostnodes", test_seed_o2o_hostnodes);
  g_test_add_func("/plan/seed/none", test_seed_none);
  g_test_add_func("/plan/one-to-one/avoids-smt-siblings",
                  test_o2o_avoids_siblings);
  g_test_add_func("/plan/one-to-one/threads2-gets-sibling-pairs",
                  test_o2o_threads2_pairs);
  g_test_add_func("/plan/one-to-one/threads2-without-host-pairs",
                  test_o2o_threads2_without_pairs);
  g_test_add_func("/plan/one-to-one/strict-shortage-is-an-error",
                  test_o2o_strict_shortage);
  g_test_add_func("/plan/one-to-one/prefer-uses-siblings-last",
                  test_o2o_prefer_siblings_last);
  g_test_add_func("/plan/one-to-one/follows-vnuma", test_o2o_vnuma);
  g_test_add_func("/plan/one-to-one/covers-maxcpus", test_maxcpus);
  g_test_add_func("/plan/distance/two-nodes-on-one-socket",
                  test_distance_same_socket);
  g_test_add_func("/plan/kinds/never-straddles", test_kinds_no_straddle);
  g_test_add_func("/plan/cpuless/memory-only-when-needed", test_cpuless_node);
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
  g_test_add_func("/plan/claims/spanning-memory-even-or-tightest-first",
                  test_spanning_memory_split);
  g_test_add_func("/plan/claims/reserve", test_reserve);
  g_test_add_func("/plan/claims/blocked-nodes", test_claims_blocked_nodes);
  g_test_add_func("/plan/errors/name-the-shortfall",
                  test_errors_name_shortfall);
  g_test_add_func("/plan/hugepages/pools", test_hugepages);
  g_test_add_func("/plan/devices/locality", test_device_locality);
  g_test_add_func("/plan/numa/distinct-nodes-before-sharing",
                  test_numa_distinct_before_sharing);
  g_test_add_func("/plan/options/hostnodes", test_hostnodes_option);
  g_test_add_func("/plan/vnuma/mirrors-placement", test_vnuma_suggestion);
  g_test_add_func("/plan/scale/64-nodes-1000-claims", test_scale_64_nodes);
  g_test_add_func("/plan/best-effort/one-node-overcommit",
                  test_best_effort_one_node);
  g_test_add_func("/plan/best-effort/vnuma-on-one-node",
                  test_best_effort_vnuma_one_node);
  g_test_add_func("/plan/best-effort/every-usable-cpu",
                  test_best_effort_every_cpu);
  g_test_add_func("/plan/best-effort/more-nodes-before-sharing",
                  test_best_effort_more_nodes);
  g_test_add_func("/plan/best-effort/even-share-of-cpus",
                  test_best_effort_even_share);
  g_test_add_func("/plan/best-effort/never-others-dedicated-cores",
                  test_best_effort_dedicated);
  g_test_add_func("/plan/best-effort/all-cpus-dedicated",
                  test_best_effort_all_dedicated);
  g_test_add_func("/plan/best-effort/cpu-kinds", test_best_effort_kinds);
  g_test_add_func("/plan/best-effort/device-locality-required",
                  test_best_effort_device_required);
  g_test_add_func("/plan/best-effort/memory-still-refused",
                  test_best_effort_memory_refused);
  g_test_add_func("/plan/best-effort/hotplug", test_best_effort_hotplug);
  g_test_add_func("/plan/best-effort/later-vm-sees-load",
                  test_best_effort_sees_load);
  g_test_add_func("/plan/best-effort/cpu-load-per-cpu",
                  test_best_effort_cpu_load);
  g_test_add_func("/plan/recorded/epyc-7351p-seed", test_recorded_seed);
  g_test_add_func("/plan/recorded/intel-2s-smt", test_recorded_intel_smt);
  g_test_add_func("/plan/recorded/2s-8node", test_recorded_2s8n);
  g_test_add_func("/plan/recorded/hybrid", test_recorded_hybrid);
  g_test_add_func("/plan/recorded/cpuless", test_recorded_cpuless);
  g_test_add_func("/plan/recorded/cgroup-subset", test_recorded_cgroup);
  g_test_add_func("/plan/recorded/best-effort", test_recorded_best_effort);
  return g_test_run();
}
