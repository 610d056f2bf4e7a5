/* What the planner's tests share (see plan-hosts.h). */
#include "tests/plan/plan-hosts.h"

#include <string.h>

QpHost *
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
void
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

void
host_done(QpHost *h)
{
  qsort(h->cpus, h->n_cpus, sizeof(QpCpu), compare_cpu);
}

void
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
  hwloc_bitmap_free(h->allowed_nodes);
  g_free(h->source);
  g_free(h);
}

/* Seed 000's host, AMD EPYC 7351P: node N = CPUs 4N..4N+3 and
 * 16+4N..16+4N+3, CPU c and c+16 are SMT siblings, SLIT 10/16. MEM gives the
 * node sizes (NULL: 16384 MiB each). */
QpHost *
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
QpHost *
intel_2s(void)
{
  QpHost *h = host_new(2, 65536, 21);
  for (int c = 0; c < 16; c++)
    host_core(h, c / 8, c / 8, 0, c, c + 16);
  host_done(h);
  return h;
}

/* Hybrid: 4 P-cores with 2 threads (CPUs 0-7, kind 1, most performant)
 * and 12 E-cores (CPUs 8-19, kind 0). */
QpHost *
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

/* ---- Request and option helpers ----------------------------------------- */

hwloc_bitmap_t
list(const char *text)
{
  hwloc_bitmap_t set = NULL;
  g_assert_true(qp_list_parse(text, "test", QP_LIST_MAX_INDEX, &set, NULL));
  return set;
}

QpRequest *
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
void
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

void
opts_free(Opts *o)
{
  qp_placement_options_clear(&o->o);
  g_free(o);
}

Opts *
opts_new(QpMode mode, const char *affinity)
{
  Opts *o = g_new0(Opts, 1);
  qp_placement_options_init(&o->o);
  o->o.mode = mode;
  if (affinity != NULL)
    o->o.affinity = list(affinity);
  return o;
}

QpClaim *
claim_add(QpClaims *claims, const char *id)
{
  QpClaim *c = qp_claim_new();
  c->id = g_strdup(id);
  g_ptr_array_add(claims->claims, c);
  return c;
}

void
claim_mem(QpClaim *c, int node, guint64 mib)
{
  QpNodeAmount m = {.node = node, .mib = mib};
  g_array_append_val(c->mem, m);
}

void
assert_set(hwloc_const_bitmap_t set, const char *expected)
{
  g_assert_nonnull(set);
  g_autofree char *s = qp_list_format(set);
  g_assert_cmpstr(s, ==, expected);
}

void
assert_vcpu(const QpPlan *p, guint v, const char *expected)
{
  g_assert_cmpuint(v, <, p->n_vcpus);
  assert_set(p->vcpu_cpus[v], expected);
}

guint64
claimed_on(const QpPlan *p, int node)
{
  for (guint i = 0; i < p->claim_mem->len; i++)
    if (g_array_index(p->claim_mem, QpNodeAmount, i).node == node)
      return g_array_index(p->claim_mem, QpNodeAmount, i).mib;
  return 0;
}

guint
load_on(const QpPlan *p, int node)
{
  for (guint i = 0; i < p->load->len; i++)
    if (g_array_index(p->load, QpNodeLoad, i).node == node)
      return g_array_index(p->load, QpNodeLoad, i).vcpus;
  return 0;
}

gboolean
has_text(GPtrArray *lines, const char *needle)
{
  for (guint i = 0; i < lines->len; i++)
    if (strstr(g_ptr_array_index(lines, i), needle) != NULL)
      return TRUE;
  return FALSE;
}

/* Every error is one line and names what fell short. */
void
assert_nofit(GError *error, const char *needle)
{
  g_assert_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT);
  g_assert_null(strchr(error->message, '\n'));
  if (strstr(error->message, needle) == NULL)
    g_error("error \"%s\" lacks \"%s\"", error->message, needle);
}

void
plan_refused(const QpHost *h, const QpClaims *c, const QpRequest *r,
             const Opts *o, const char *needle)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(QpPlan) p = qp_plan_compute(h, c, r, &o->o, &error);
  g_assert_null(p);
  assert_nofit(error, needle);
}

QpPlan *
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

QpRequest *
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

/* ---- Devices ------------------------------------------------------------ */

void
add_pci(QpHost *h, const char *bdf, int node)
{
  QpPciDevice d = {.bdf = g_strdup(bdf), .node = node};
  g_array_append_val(h->pci, d);
}

/* ---- Recorded hosts (tests/data/topologies, loaded by topology/host/) -----
 */

QpHost *
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

void
check_recorded_seed(void (*check)(const QpHost *h, gboolean explicit_hostnodes))
{
  g_autoptr(QpHost) h = recorded("epyc-7351p.xml");
  check(h, FALSE);
  check(h, TRUE);
}
