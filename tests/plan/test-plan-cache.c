/* Cache domains in the planner (topology/plan/cache.c) on the recorded
 * hosts: one-to-one fills the fewest cache domains inside the nodes the
 * NUMA choice gave; balanced and numa float a VM that fits one domain
 * inside the least-loaded one. */
#include "tests/common/qp-plan-test.h"
#include "topology/plan/capacity.h"
#include "topology/ledger/ledger.h"
#include "topology/plan/claim.h"
#include "topology/status/status.h"

#include <string.h>

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
  r->threads = 1;
  r->mem_mib = mem_mib;
  return r;
}

/* Another VM holding CPUS as dedicated cores. */
static void
claim_cores(QpClaims *claims, const char *id, const char *cpus)
{
  QpClaim *c = qp_claim_new();
  c->id = g_strdup(id);
  c->mode = QP_MODE_ONE_TO_ONE;
  hwloc_bitmap_free(c->dedicated);
  c->dedicated = list(cpus);
  g_ptr_array_add(claims->claims, c);
}

static char *
vcpu_cpus(const QpPlan *p)
{
  g_auto(hwloc_bitmap_t) all = hwloc_bitmap_alloc();
  for (guint v = 0; v < p->n_vcpus; v++)
    hwloc_bitmap_or(all, all, p->vcpu_cpus[v]);
  return qp_list_format(all);
}

/* The cache domains of LEVEL the vCPUs of P run in. */
static guint
domains_used(const QpHost *h, const QpPlan *p, int level)
{
  guint n = 0;
  for (guint d = 0; d < h->n_domains; d++) {
    if (h->domains[d].level != level)
      continue;
    for (guint v = 0; v < p->n_vcpus; v++)
      if (hwloc_bitmap_intersects(p->vcpu_cpus[v], h->domains[d].cpus)) {
        n++;
        break;
      }
  }
  return n;
}

/* The fewest domains of LEVEL inside node index I that hold WANT free
 * cores, free meaning no PU in TAKEN: whole domains by free count. */
static guint
fewest_domains(const QpHost *h, guint i, hwloc_const_bitmap_t taken, guint want,
               int level)
{
  GArray *free = g_array_new(FALSE, TRUE, sizeof(guint));
  for (guint d = 0; d < h->n_domains; d++) {
    if (h->domains[d].level != level || h->domains[d].node != h->nodes[i].id)
      continue;
    guint f = 0;
    for (guint c = 0; c < h->n_cores; c++)
      f += hwloc_bitmap_isincluded(h->cores[c].pus, h->domains[d].cpus) &&
           !hwloc_bitmap_intersects(h->cores[c].pus, taken);
    g_array_append_val(free, f);
  }
  guint n = 0;
  while (want > 0 && free->len > 0) {
    guint best = 0;
    for (guint k = 1; k < free->len; k++)
      if (g_array_index(free, guint, k) > g_array_index(free, guint, best))
        best = k;
    guint f = g_array_index(free, guint, best);
    want -= MIN(want, f);
    g_array_remove_index(free, best);
    n++;
  }
  g_array_unref(free);
  return n;
}

/* The case: the EPYC 7351P with core 0 (CPUs 0,16) taken; a 2-vCPU
 * one-to-one VM lands in one L3 (cores 2 and 3), not on cores 1 and 2. */
static void
test_epyc_o2o_two_in_one_l3(void)
{
  g_autoptr(QpHost) h = qp_test_recorded("epyc-7351p.xml");
  g_autoptr(QpClaims) claims = qp_claims_new();
  claim_cores(claims, "other", "0,16");
  g_autoptr(QpRequest) r = request(2, 1024);
  g_autoptr(QpPlan) p = qp_test_plan_ok(h, claims, r, QP_MODE_ONE_TO_ONE);
  g_autofree char *cpus = vcpu_cpus(p);
  g_assert_cmpstr(cpus, ==, "2-3");
  g_assert_cmpuint(domains_used(h, p, QP_CACHE_L3), ==, 1);
}

/* A 6-vCPU one-to-one VM on the same host spans the fewest L3 domains the
 * nodes it got allow: per node, no more domains than its cores need. */
static void
test_epyc_o2o_six_fewest_l3(void)
{
  g_autoptr(QpHost) h = qp_test_recorded("epyc-7351p.xml");
  g_autoptr(QpClaims) claims = qp_claims_new();
  claim_cores(claims, "other", "0,16");
  g_autoptr(QpRequest) r = request(6, 1024);
  g_autoptr(QpPlan) p = qp_test_plan_ok(h, claims, r, QP_MODE_ONE_TO_ONE);
  g_auto(hwloc_bitmap_t) taken = list("0,16");
  guint want = 0;
  for (guint i = 0; i < h->n_nodes; i++) {
    guint on = 0;
    for (guint v = 0; v < p->n_vcpus; v++)
      on += hwloc_bitmap_isincluded(p->vcpu_cpus[v], h->nodes[i].cpus);
    want += fewest_domains(h, i, taken, on, QP_CACHE_L3);
  }
  g_autofree char *cpus = vcpu_cpus(p);
  if (g_test_verbose())
    g_printerr("6 vCPUs on %s\n", cpus);
  g_assert_cmpuint(domains_used(h, p, QP_CACHE_L3), ==, want);
  g_assert_cmpuint(want, ==, 3);
}

/* Another VM with VCPUS shared vCPUs floating over CPUS on NODE. */
static void
claim_load(QpClaims *claims, const char *id, int node, const char *cpus,
           guint vcpus)
{
  QpClaim *c = qp_claim_new();
  c->id = g_strdup(id);
  c->mode = QP_MODE_BALANCED;
  QpNodeLoad l = {.node = node, .vcpus = vcpus};
  g_array_append_val(c->load, l);
  QpCpuLoad cl = {.cpus = list(cpus), .vcpus = vcpus};
  g_array_append_val(c->cpu_load, cl);
  g_ptr_array_add(claims->claims, c);
}

/* The domain of LEVEL whose CPUs are exactly SET, or -1. */
static int
domain_equal(const QpHost *h, hwloc_const_bitmap_t set, int level)
{
  for (guint d = 0; d < h->n_domains; d++)
    if (h->domains[d].level == level &&
        hwloc_bitmap_isequal(h->domains[d].cpus, set))
      return (int)d;
  return -1;
}

/* Balanced: a 2-vCPU VM floats over one L3 (2 cores, 4 CPUs) of its node,
 * the least-loaded one. */
static void
test_epyc_balanced_least_loaded_l3(void)
{
  g_autoptr(QpHost) h = qp_test_recorded("epyc-7351p.xml");
  g_autoptr(QpRequest) r = request(2, 1024);
  g_autoptr(QpPlan) p = qp_test_plan_ok(h, NULL, r, QP_MODE_BALANCED);
  g_autofree char *cpus = vcpu_cpus(p);
  g_assert_cmpstr(cpus, ==, "0-1,16-17");
  g_assert_true(hwloc_bitmap_isequal(p->vcpu_cpus[0], p->vcpu_cpus[1]));
  /* The record carries the load on the domain's CPUs. */
  g_assert_cmpuint(p->cpu_load->len, ==, 1);
  g_autofree char *lc =
      qp_list_format(g_array_index(p->cpu_load, QpCpuLoad, 0).cpus);
  g_assert_cmpstr(lc, ==, "0-1,16-17");

  /* Every node's first L3 carries a vCPU of another VM (room for this
   * one still, at 0.75 per CPU against 0.5): whichever node the VM gets,
   * it floats over that node's second L3. */
  g_autoptr(QpClaims) claims = qp_claims_new();
  for (guint d = 0; d < h->n_domains; d += 2) {
    g_autofree char *id = g_strdup_printf("busy%u", d);
    g_autofree char *l = qp_list_format(h->domains[d].cpus);
    claim_load(claims, id, h->domains[d].node, l, 1);
  }
  g_autoptr(QpPlan) q = qp_test_plan_ok(h, claims, r, QP_MODE_BALANCED);
  int d = domain_equal(h, q->vcpu_cpus[0], QP_CACHE_L3);
  g_assert_cmpint(d, >=, 0);
  g_assert_cmpint(d % 2, ==, 1);
  g_assert_true(hwloc_bitmap_isequal(q->vcpu_cpus[0], q->vcpu_cpus[1]));
}

/* Balanced: when every domain would carry more than one vCPU per CPU, the
 * VM floats over the whole node as without domains. */
static void
test_epyc_balanced_busy_floats_over_node(void)
{
  g_autoptr(QpHost) h = qp_test_recorded("epyc-7351p.xml");
  g_autoptr(QpClaims) claims = qp_claims_new();
  for (guint d = 0; d < h->n_domains; d++) {
    g_autofree char *id = g_strdup_printf("busy%u", d);
    g_autofree char *l = qp_list_format(h->domains[d].cpus);
    claim_load(claims, id, h->domains[d].node, l, 3);
  }
  g_autoptr(QpRequest) r = request(2, 1024);
  g_autoptr(QpPlan) p = qp_test_plan_ok(h, claims, r, QP_MODE_BALANCED);
  int ci = qp_host_cpu_index(h, hwloc_bitmap_first(p->vcpu_cpus[0]));
  int ni = qp_host_node_index(h, h->cpus[ci].node);
  g_assert_true(hwloc_bitmap_isequal(p->vcpu_cpus[0], h->nodes[ni].cpus));
}

/* numa: each guest node that fits an L3 floats inside one of its host
 * node's; one-to-one with guest nodes fills one L3 per guest node. */
static void
test_epyc_numa_per_guest_node(void)
{
  g_autoptr(QpHost) h = qp_test_recorded("epyc-7351p.xml");
  g_autoptr(QpRequest) r = request(4, 2048);
  r->n_gnodes = 2;
  r->gnodes = g_new0(QpGuestNode, 2);
  for (guint g = 0; g < 2; g++) {
    r->gnodes[g].id = (int)g;
    r->gnodes[g].vcpus = hwloc_bitmap_alloc();
    hwloc_bitmap_set_range(r->gnodes[g].vcpus, 2 * g, 2 * g + 1);
    r->gnodes[g].mem_mib = 1024;
    r->gnodes[g].memdev = g_strdup_printf("ram-node%u", g);
  }
  g_autoptr(QpPlan) p = qp_test_plan_ok(h, NULL, r, QP_MODE_NUMA);
  for (guint v = 0; v < 4; v++)
    g_assert_cmpint(domain_equal(h, p->vcpu_cpus[v], QP_CACHE_L3), >=, 0);
  g_assert_true(hwloc_bitmap_isequal(p->vcpu_cpus[0], p->vcpu_cpus[1]));
  g_assert_false(hwloc_bitmap_isequal(p->vcpu_cpus[0], p->vcpu_cpus[2]));

  /* One-to-one with the same guest nodes, core 0 of every node taken:
   * each guest node's two cores in one L3 (the node's second). */
  g_autoptr(QpClaims) claims = qp_claims_new();
  claim_cores(claims, "other", "0,4,8,12,16,20,24,28");
  g_autoptr(QpPlan) o = qp_test_plan_ok(h, claims, r, QP_MODE_ONE_TO_ONE);
  for (guint g = 0; g < 2; g++) {
    g_auto(hwloc_bitmap_t) both = hwloc_bitmap_alloc();
    hwloc_bitmap_or(both, o->vcpu_cpus[2 * g], o->vcpu_cpus[2 * g + 1]);
    g_assert_cmpuint(hwloc_bitmap_weight(both), ==, 2);
    int d = -1;
    for (guint x = 0; x < h->n_domains; x++)
      if (hwloc_bitmap_isincluded(both, h->domains[x].cpus))
        d = (int)x;
    g_assert_cmpint(d, >=, 0);
    g_assert_cmpint(d % 2, ==, 1);
  }
}

/* A VM's record as the ledger writes it and reads it back. */
static QpClaim *
through_ledger(const QpPlan *p, const char *id)
{
  g_autoptr(QpClaim) c = qp_claim_from_plan(p, id, NULL);
  g_autofree char *json = qp_claim_to_json(c);
  g_autoptr(GError) error = NULL;
  QpClaim *back = qp_claim_from_json(json, strlen(json), &error);
  g_assert_no_error(error);
  return back;
}

/* status accounts per L3: a one-to-one VM's dedicated cores and a balanced
 * VM's shared vCPUs, both from their records (the balanced one floats in
 * an L3, which its cpu-load says); a record without cpu-load (older
 * qemu-pin) still reads, its load spread over its node. */
static void
test_epyc_status_per_l3(void)
{
  g_autoptr(QpHost) h = qp_test_recorded("epyc-7351p.xml");
  g_autoptr(QpClaims) claims = qp_claims_new();
  g_autoptr(QpRequest) r2 = request(2, 1024);
  g_autoptr(QpPlan) o2o = qp_test_plan_ok(h, claims, r2, QP_MODE_ONE_TO_ONE);
  g_ptr_array_add(claims->claims, through_ledger(o2o, "o2o"));
  g_autoptr(QpPlan) bal = qp_test_plan_ok(h, claims, r2, QP_MODE_BALANCED);
  g_ptr_array_add(claims->claims, through_ledger(bal, "bal"));
  g_autofree char *bal_cpus = vcpu_cpus(bal);
  g_assert_cmpstr(bal_cpus, ==, "4-5,20-21"); /* node 1: more free CPUs */

  g_autofree char *text = qp_status_to_text(h, claims, NULL);
  if (g_test_verbose())
    g_printerr("%s", text);
  g_assert_nonnull(strstr(text, "  L3 0-1,16-17: 2 of 2 cores dedicated, "
                                "0.00 shared vCPUs (0.00 per CPU)\n"));
  g_assert_nonnull(strstr(text, "  L3 4-5,20-21: 0 of 2 cores dedicated, "
                                "2.00 shared vCPUs (0.50 per CPU)\n"));
  g_assert_nonnull(strstr(text, "  L3 6-7,22-23: 0 of 2 cores dedicated, "
                                "0.00 shared vCPUs (0.00 per CPU)\n"));

  g_autoptr(JsonNode) root = qp_status_to_json(h, claims, NULL);
  JsonArray *nodes =
      json_object_get_array_member(json_node_get_object(root), "nodes");
  JsonArray *doms = json_object_get_array_member(
      json_array_get_object_element(nodes, 0), "cache-domains");
  g_assert_cmpuint(json_array_get_length(doms), ==, 2);
  JsonObject *d0 = json_array_get_object_element(doms, 0);
  g_assert_cmpint(json_object_get_int_member(d0, "dedicated-cores"), ==, 2);
  JsonObject *d2 = json_array_get_object_element(
      json_object_get_array_member(json_array_get_object_element(nodes, 1),
                                   "cache-domains"),
      0);
  g_assert_cmpfloat(json_object_get_double_member(d2, "shared-vcpus"), ==, 2.0);

  /* An older record: load per node only, no cpu-load member (the same
   * 2-vCPU balanced VM, moved to node 2): spread over the node's 8 CPUs,
   * each L3 there carries 1 vCPU. */
  g_autoptr(QpPlan) moved = qp_test_plan_ok(h, claims, r2, QP_MODE_BALANCED);
  g_autoptr(QpClaim) mc = qp_claim_from_plan(moved, "old", NULL);
  g_array_index(mc->load, QpNodeLoad, 0).node = 2;
  g_array_index(mc->mem, QpNodeAmount, 0).node = 2;
  g_autofree char *json = qp_claim_to_json(mc);
  g_autoptr(JsonNode) rec = json_from_string(json, NULL);
  json_object_remove_member(json_node_get_object(rec), "cpu-load");
  g_assert_false(json_object_has_member(json_node_get_object(rec), "cpu-load"));
  g_autofree char *old = json_to_string(rec, FALSE);
  g_autoptr(GError) error = NULL;
  QpClaim *c = qp_claim_from_json(old, strlen(old), &error);
  g_assert_no_error(error);
  g_ptr_array_add(claims->claims, c);
  g_autofree char *text2 = qp_status_to_text(h, claims, NULL);
  g_assert_nonnull(strstr(text2, "  L3 10-11,26-27: 0 of 2 cores dedicated, "
                                 "1.00 shared vCPUs (0.25 per CPU)\n"));
}

static const char *const hosts[] = {
    "epyc-7351p.xml",   "epyc-7451-2s.xml", "epyc-7763-2s.xml",
    "spr-snc4.xml",     "lakefield.xml",    "raptorlake.xml",
    "x3950m2-io.xml",   "dcs8000z-io.xml",  "opteron-6272-4s.xml",
    "intel-2s-smt.xml", "hybrid.xml",
};

/* Every recorded host, every mode: a VM of as many vCPUs as the smallest
 * L3 inside a node has cores runs inside one L3 (two VMs in a row, the
 * second beside the first); on hosts with no L3 inside a node, on one
 * node. */
static void
test_every_host_every_mode(gconstpointer data)
{
  g_autoptr(QpHost) h = qp_test_recorded(data);
  guint n = 0;
  for (guint d = 0; d < h->n_domains; d++) {
    const QpCacheDomain *cd = &h->domains[d];
    int ni = qp_host_node_index(h, cd->node);
    if (cd->level == QP_CACHE_L3 &&
        !hwloc_bitmap_isequal(cd->cpus, h->nodes[ni].all_cpus))
      n = n == 0 ? cd->n_cores : MIN(n, cd->n_cores);
  }
  QpMode modes[] = {QP_MODE_AUTO, QP_MODE_BALANCED, QP_MODE_NUMA,
                    QP_MODE_ONE_TO_ONE};
  for (guint m = 0; m < G_N_ELEMENTS(modes); m++) {
    g_autoptr(QpRequest) r = request(n > 0 ? n : 2, 512);
    g_autoptr(QpPlan) p = qp_test_plan_ok(h, NULL, r, modes[m]);
    if (g_test_verbose()) {
      g_autofree char *c = vcpu_cpus(p);
      g_printerr("%s mode %d: %u vCPUs on %s\n", (const char *)data, modes[m],
                 r->vcpus, c);
    }
    g_assert_cmpuint(hwloc_bitmap_weight(p->host_nodes), ==, 1);
    if (n > 0)
      g_assert_cmpuint(domains_used(h, p, QP_CACHE_L3), ==, 1);
  }
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/plan-cache/epyc-7351p/o2o-two-vcpus-one-l3",
                  test_epyc_o2o_two_in_one_l3);
  g_test_add_func("/plan-cache/epyc-7351p/o2o-six-vcpus-fewest-l3",
                  test_epyc_o2o_six_fewest_l3);
  g_test_add_func("/plan-cache/epyc-7351p/balanced-least-loaded-l3",
                  test_epyc_balanced_least_loaded_l3);
  g_test_add_func("/plan-cache/epyc-7351p/balanced-busy-floats-over-node",
                  test_epyc_balanced_busy_floats_over_node);
  g_test_add_func("/plan-cache/epyc-7351p/numa-per-guest-node",
                  test_epyc_numa_per_guest_node);
  g_test_add_func("/plan-cache/epyc-7351p/status-per-l3",
                  test_epyc_status_per_l3);
  for (gsize i = 0; i < G_N_ELEMENTS(hosts); i++) {
    g_autofree char *name =
        g_strdup_printf("/plan-cache/every-mode/%s", hosts[i]);
    g_test_add_data_func(name, hosts[i], test_every_host_every_mode);
  }
  return g_test_run();
}
