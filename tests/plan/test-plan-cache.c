/* Cache domains in the planner (topology/plan/cache.c) on the recorded
 * hosts: one-to-one fills the fewest cache domains inside the nodes the
 * NUMA choice gave; balanced and numa float a VM that fits one domain
 * inside the least-loaded one. */
#include "tests/common/qp-plan-test.h"
#include "topology/capacity.h"

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

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/plan-cache/epyc-7351p/o2o-two-vcpus-one-l3",
                  test_epyc_o2o_two_in_one_l3);
  g_test_add_func("/plan-cache/epyc-7351p/o2o-six-vcpus-fewest-l3",
                  test_epyc_o2o_six_fewest_l3);
  return g_test_run();
}
