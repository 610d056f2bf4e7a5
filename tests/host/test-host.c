/* The host model on recorded hosts (tests/data/topologies, see its README),
 * synthetic hosts and this machine. */
#include "topology/host/host.h"
#include "topology/status/status.h"
#include "tests/common/qp-test.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <sched.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

/* The path of the recorded host NAME of tests/data/topologies. */
static char *
topology(const char *name)
{
  const char *dir = g_getenv("QP_TOPOLOGIES");
  return dir != NULL ? g_build_filename(dir, name, NULL)
                     : g_test_build_filename(G_TEST_DIST, "..", "data",
                                             "topologies", name, NULL);
}

static QpHost *
load_recorded(const char *name)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *path = topology(name);
  QpHost *host = qp_host_load(path, &error);
  g_assert_no_error(error);
  g_assert_nonnull(host);
  g_assert_cmpstr(host->source, ==, path);
  return host;
}

static const QpNode *
node(const QpHost *host, int id)
{
  int i = qp_host_node_index(host, id);
  g_assert_cmpint(i, >=, 0);
  return &host->nodes[i];
}

static const QpCpu *
cpu(const QpHost *host, int id)
{
  int i = qp_host_cpu_index(host, id);
  g_assert_cmpint(i, >=, 0);
  g_assert_cmpint(host->cpus[i].id, ==, id);
  return &host->cpus[i];
}

/* The list string of a bitmap, freed at the end of the test. */
static const char *
list(hwloc_const_bitmap_t set)
{
  char *s = qp_list_format(set);
  g_test_queue_free(s);
  return s;
}

static const char *
siblings(const QpHost *host, int id)
{
  return list(host->cores[cpu(host, id)->core].pus);
}

static const char *
node_cpus(const QpHost *host, int id)
{
  return list(node(host, id)->cpus);
}

static const QpHugePool *
pool(const QpNode *n, guint64 page_kib)
{
  for (guint i = 0; i < n->hugepages->len; i++) {
    const QpHugePool *p = &g_array_index(n->hugepages, QpHugePool, i);
    if (p->page_kib == page_kib)
      return p;
  }
  return NULL;
}

static void
test_epyc(void)
{
  g_autoptr(QpHost) h = load_recorded("epyc-7351p.xml");
  g_assert_cmpuint(h->n_nodes, ==, 4);
  g_assert_cmpuint(h->n_cpus, ==, 32);
  g_assert_cmpuint(h->n_cores, ==, 16);
  g_assert_cmpstr(node_cpus(h, 0), ==, "0-3,16-19");
  g_assert_cmpstr(node_cpus(h, 1), ==, "4-7,20-23");
  g_assert_cmpstr(node_cpus(h, 2), ==, "8-11,24-27");
  g_assert_cmpstr(node_cpus(h, 3), ==, "12-15,28-31");
  const guint64 mib[] = {15891, 16124, 16124, 16123};
  for (int n = 0; n < 4; n++) {
    g_assert_cmpuint(node(h, n)->total_mib, ==, mib[n]);
    g_assert_cmpuint(node(h, n)->free_mib, ==, mib[n]);
    g_assert_true(hwloc_bitmap_isequal(node(h, n)->cpus, node(h, n)->all_cpus));
  }
  /* SMT siblings are n and n+16. */
  g_assert_cmpstr(siblings(h, 0), ==, "0,16");
  g_assert_cmpstr(siblings(h, 21), ==, "5,21");
  g_assert_cmpint(cpu(h, 21)->node, ==, 1);
  g_assert_cmpint(cpu(h, 31)->node, ==, 3);
  g_assert_cmpint(cpu(h, 31)->package, ==, 0);
  g_assert_cmpint(h->cores[cpu(h, 13)->core].node, ==, 3);
  /* Cores come in order of their first PU. */
  g_assert_cmpstr(list(h->cores[0].pus), ==, "0,16");
  g_assert_cmpstr(list(h->cores[15].pus), ==, "15,31");
  /* SLIT 10 local / 16 remote. */
  for (int a = 0; a < 4; a++)
    for (int b = 0; b < 4; b++)
      g_assert_cmpuint(qp_host_distance(h, a, b), ==, a == b ? 10 : 16);
  g_assert_cmpuint(h->n_kinds, ==, 1);
  g_assert_cmpstr(list(h->allowed), ==, "0-31");
  g_assert_cmpstr(list(h->allowed_nodes), ==, "0-3");
  /* Pools exist but hold no pages; the 4 KiB base page is not a pool. */
  g_assert_cmpuint(node(h, 0)->hugepages->len, ==, 2);
  g_assert_cmpuint(pool(node(h, 0), 2048)->total, ==, 0);
  g_assert_cmpuint(pool(node(h, 0), 1048576)->total, ==, 0);
  g_assert_null(pool(node(h, 0), 4));
  g_assert_cmpuint(h->pci->len, ==, 0);
}

static void
test_intel_smt(void)
{
  g_autoptr(QpHost) h = load_recorded("intel-2s-smt.xml");
  g_assert_cmpuint(h->n_nodes, ==, 2);
  g_assert_cmpuint(h->n_cores, ==, 16);
  g_assert_cmpstr(node_cpus(h, 0), ==, "0-7,16-23");
  g_assert_cmpstr(node_cpus(h, 1), ==, "8-15,24-31");
  g_assert_cmpstr(siblings(h, 0), ==, "0,16");
  g_assert_cmpstr(siblings(h, 16), ==, "0,16");
  g_assert_cmpstr(siblings(h, 9), ==, "9,25");
  g_assert_cmpint(cpu(h, 7)->package, ==, 0);
  g_assert_cmpint(cpu(h, 8)->package, ==, 1);
  g_assert_cmpint(cpu(h, 24)->package, ==, 1);
  g_assert_cmpint(cpu(h, 24)->node, ==, 1);
  g_assert_cmpuint(qp_host_distance(h, 0, 1), ==, 21);
  g_assert_cmpuint(qp_host_distance(h, 1, 1), ==, 10);
  for (int n = 0; n < 2; n++) {
    g_assert_cmpuint(node(h, n)->total_mib, ==, 65536);
    const QpHugePool *p2m = pool(node(h, n), 2048);
    const QpHugePool *p1g = pool(node(h, n), 1048576);
    g_assert_nonnull(p2m);
    g_assert_nonnull(p1g);
    g_assert_cmpuint(p2m->total, ==, 1024);
    g_assert_cmpuint(p2m->free, ==, 1024);
    g_assert_cmpuint(p1g->total, ==, 4);
    g_assert_cmpuint(p1g->free, ==, 4);
    /* Ascending page size. */
    g_assert_cmpuint(
        g_array_index(node(h, n)->hugepages, QpHugePool, 0).page_kib, ==, 2048);
  }
}

static void
test_intel_pci(void)
{
  g_autoptr(QpHost) h = load_recorded("intel-2s-smt.xml");
  static const struct {
    const char *bdf;
    int node;
  } want[] = {
      {"0000:00:14.0", 0}, /* a USB controller: any class is kept */
      {"0000:3b:00.0", 0}, {"0000:3b:00.1", 0},
      {"0000:af:00.0", 1}, {"0000:d8:00.0", 1},
  };
  g_assert_cmpuint(h->pci->len, ==, G_N_ELEMENTS(want));
  for (guint i = 0; i < G_N_ELEMENTS(want); i++) {
    const QpPciDevice *d = &g_array_index(h->pci, QpPciDevice, i);
    g_assert_cmpstr(d->bdf, ==, want[i].bdf);
    g_assert_cmpint(d->node, ==, want[i].node);
  }
}

static void
test_2s8n(void)
{
  g_autoptr(QpHost) h = load_recorded("2s-8node.xml");
  g_assert_cmpuint(h->n_nodes, ==, 8);
  g_assert_cmpuint(h->n_cpus, ==, 32);
  g_assert_cmpuint(h->n_cores, ==, 32);
  for (int n = 0; n < 8; n++) {
    g_autofree char *want = g_strdup_printf("%d-%d", 4 * n, 4 * n + 3);
    g_assert_cmpstr(node_cpus(h, n), ==, want);
    g_assert_cmpuint(node(h, n)->total_mib, ==, 32768);
    g_assert_cmpint(cpu(h, 4 * n)->package, ==, n / 4);
  }
  g_assert_cmpstr(siblings(h, 5), ==, "5");
  g_assert_cmpuint(qp_host_distance(h, 0, 0), ==, 10);
  g_assert_cmpuint(qp_host_distance(h, 0, 3), ==, 12);
  g_assert_cmpuint(qp_host_distance(h, 5, 7), ==, 12);
  g_assert_cmpuint(qp_host_distance(h, 0, 4), ==, 32);
  g_assert_cmpuint(qp_host_distance(h, 7, 2), ==, 32);
}

static void
test_hybrid(void)
{
  g_autoptr(QpHost) h = load_recorded("hybrid.xml");
  g_assert_cmpuint(h->n_nodes, ==, 1);
  g_assert_cmpuint(h->n_cpus, ==, 24);
  g_assert_cmpuint(h->n_cores, ==, 16);
  g_assert_cmpstr(node_cpus(h, 0), ==, "0-23");
  /* hwloc ranks kinds by efficiency, lowest first: E-cores are kind 0. */
  g_assert_cmpuint(h->n_kinds, ==, 2);
  g_assert_cmpstr(h->kind_names[0], ==, "IntelAtom");
  g_assert_cmpstr(h->kind_names[1], ==, "IntelCore");
  g_assert_cmpint(h->kind_efficiency[0], <, h->kind_efficiency[1]);
  for (int c = 0; c < 24; c++)
    g_assert_cmpint(cpu(h, c)->kind, ==, c < 16 ? 1 : 0);
  g_assert_cmpstr(siblings(h, 0), ==, "0-1");
  g_assert_cmpstr(siblings(h, 15), ==, "14-15");
  g_assert_cmpstr(siblings(h, 16), ==, "16");
  g_assert_cmpstr(siblings(h, 23), ==, "23");
}

static void
test_cpuless(void)
{
  g_autoptr(QpHost) h = load_recorded("cpuless.xml");
  g_assert_cmpuint(h->n_nodes, ==, 3);
  g_assert_cmpint(h->nodes[2].id, ==, 2);
  g_assert_cmpstr(node_cpus(h, 0), ==, "0-3");
  g_assert_cmpstr(node_cpus(h, 1), ==, "4-7");
  g_assert_cmpstr(node_cpus(h, 2), ==, "");
  g_assert_true(hwloc_bitmap_iszero(node(h, 2)->all_cpus));
  g_assert_cmpuint(node(h, 2)->total_mib, ==, 65536);
  g_assert_cmpuint(node(h, 0)->total_mib, ==, 32768);
  for (int c = 0; c < 8; c++)
    g_assert_cmpint(cpu(h, c)->node, ==, c / 4);
  g_assert_cmpuint(qp_host_distance(h, 0, 1), ==, 20);
  g_assert_cmpuint(qp_host_distance(h, 0, 2), ==, 30);
  g_assert_cmpuint(qp_host_distance(h, 2, 1), ==, 30);
  g_assert_cmpuint(qp_host_distance(h, 2, 2), ==, 10);
  g_assert_cmpstr(list(h->allowed_nodes), ==, "0-2");
}

static void
test_cgroup_subset(void)
{
  g_autoptr(QpHost) h = load_recorded("cgroup-subset.xml");
  /* Every CPU is still seen; only 0-5,16-19 are allowed. */
  g_assert_cmpuint(h->n_cpus, ==, 32);
  g_assert_cmpstr(list(h->allowed), ==, "0-5,16-19");
  g_assert_cmpstr(node_cpus(h, 0), ==, "0-3,16-19");
  g_assert_cmpstr(list(node(h, 0)->all_cpus), ==, "0-3,16-19");
  g_assert_cmpstr(node_cpus(h, 1), ==, "4-5");
  g_assert_cmpstr(list(node(h, 1)->all_cpus), ==, "4-7,20-23");
  g_assert_cmpstr(node_cpus(h, 2), ==, "");
  g_assert_cmpstr(list(node(h, 2)->all_cpus), ==, "8-11,24-27");
  g_assert_true(cpu(h, 4)->allowed);
  g_assert_false(cpu(h, 6)->allowed);
  g_assert_false(cpu(h, 20)->allowed);
  g_assert_cmpstr(siblings(h, 20), ==, "4,20");
}

static void
test_this_machine_recorded(void)
{
  g_autoptr(QpHost) h = load_recorded("this-machine.xml");
  g_assert_cmpuint(h->n_nodes, >=, 1);
  g_assert_cmpuint(h->n_cpus, >=, 1);
  g_assert_cmpuint(h->nodes[0].total_mib, >, 0);
  /* Every CPU belongs to a node of the host. */
  for (guint c = 0; c < h->n_cpus; c++)
    g_assert_cmpint(qp_host_node_index(h, h->cpus[c].node), >=, 0);
}

static void
test_synthetic(void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(QpHost) h =
      qp_host_load_synthetic("pack:2 numa:2(memory=16GiB) core:4 pu:2", &error);
  g_assert_no_error(error);
  g_assert_cmpstr(h->source, ==, "pack:2 numa:2(memory=16GiB) core:4 pu:2");
  g_assert_cmpuint(h->n_nodes, ==, 4);
  g_assert_cmpuint(h->n_cores, ==, 16);
  g_assert_cmpuint(h->n_cpus, ==, 32);
  g_assert_cmpstr(node_cpus(h, 1), ==, "8-15");
  g_assert_cmpuint(node(h, 3)->total_mib, ==, 16384);
  g_assert_cmpuint(node(h, 3)->free_mib, ==, 16384);
  g_assert_cmpstr(siblings(h, 9), ==, "8-9");
  g_assert_cmpint(cpu(h, 16)->package, ==, 1);
  g_assert_cmpstr(list(h->allowed), ==, "0-31");
  /* No distances in a synthetic description: 10 local, 20 remote ... */
  g_assert_cmpuint(qp_host_distance(h, 0, 0), ==, 10);
  g_assert_cmpuint(qp_host_distance(h, 0, 3), ==, 20);
  /* ... until a test sets them. */
  guint m[16];
  for (int a = 0; a < 4; a++)
    for (int b = 0; b < 4; b++)
      m[a * 4 + b] = a == b ? 10 : (a / 2 == b / 2 ? 12 : 32);
  qp_host_set_distances(h, m);
  g_assert_cmpuint(qp_host_distance(h, 0, 1), ==, 12);
  g_assert_cmpuint(qp_host_distance(h, 1, 2), ==, 32);
  /* A cgroup subset modelled on a synthetic host. */
  g_auto(hwloc_bitmap_t) allowed = NULL;
  g_assert_true(qp_list_parse("0-3,8,40", "allowed", QP_LIST_MAX_INDEX,
                              &allowed, &error));
  qp_host_set_allowed(h, allowed);
  g_assert_cmpstr(list(h->allowed), ==, "0-3,8");
  g_assert_cmpstr(node_cpus(h, 0), ==, "0-3");
  g_assert_cmpstr(node_cpus(h, 1), ==, "8");
  g_assert_cmpstr(list(node(h, 1)->all_cpus), ==, "8-15");
  g_assert_false(cpu(h, 9)->allowed);
  g_assert_true(cpu(h, 8)->allowed);
}

/* Shapes the planner tests build synthetically: PUs without cores, two
 * nodes attached at one level (the lower id owns the CPUs, the other is
 * memory only), SMT siblings numbered apart with explicit indexes. */
static void
test_synthetic_shapes(void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(QpHost) flat = qp_host_load_synthetic("numa:2 pu:4", &error);
  g_assert_no_error(error);
  g_assert_cmpuint(flat->n_cores, ==, 8);
  g_assert_cmpstr(siblings(flat, 5), ==, "5");
  g_assert_cmpstr(node_cpus(flat, 1), ==, "4-7");

  g_autoptr(QpHost) mem = qp_host_load_synthetic(
      "pack:2 [numa(memory=1GiB)] [numa(memory=2GiB)] core:2 pu:1", &error);
  g_assert_no_error(error);
  g_assert_cmpuint(mem->n_nodes, ==, 4);
  g_assert_cmpstr(node_cpus(mem, 0), ==, "0-1");
  g_assert_cmpstr(node_cpus(mem, 1), ==, "");
  g_assert_cmpuint(node(mem, 1)->total_mib, ==, 2048);
  g_assert_cmpstr(node_cpus(mem, 2), ==, "2-3");
  g_assert_cmpstr(node_cpus(mem, 3), ==, "");
  g_assert_cmpint(cpu(mem, 3)->node, ==, 2);

  g_autoptr(QpHost) smt = qp_host_load_synthetic(
      "numa:2 core:2 pu:2(indexes=0,4,1,5,2,6,3,7)", &error);
  g_assert_no_error(error);
  g_assert_cmpstr(siblings(smt, 1), ==, "1,5");
  g_assert_cmpstr(node_cpus(smt, 0), ==, "0-1,4-5");
  g_assert_cmpstr(node_cpus(smt, 1), ==, "2-3,6-7");
}

/* A NUMA node hwloc attaches below an L3 (a node per L3 on AMD Bulldozer,
 * per L3 here) keeps its own CPUs: the cache is not dropped from under it. */
static void
test_nodes_below_l3(void)
{
  /* As `lstopo -i DESCRIPTION --of xml` records it. */
  hwloc_topology_t topo = NULL;
  g_assert_cmpint(qp_hwloc_topology_init(&topo), ==, 0);
  g_assert_cmpint(hwloc_topology_set_synthetic(
                      topo, "pack:1 numa:4(memory=16GiB) l3:1 core:4 pu:2"),
                  ==, 0);
  g_assert_cmpint(hwloc_topology_load(topo), ==, 0);
  g_autofree char *dir = g_dir_make_tmp("qp-host-XXXXXX", NULL);
  g_autofree char *xml = g_build_filename(dir, "l3-nodes.xml", NULL);
  g_assert_cmpint(hwloc_topology_export_xml(topo, xml, 0), ==, 0);
  hwloc_topology_destroy(topo);
  g_autoptr(GError) error = NULL;
  g_autoptr(QpHost) h = qp_host_load(xml, &error);
  g_assert_no_error(error);
  g_unlink(xml);
  g_rmdir(dir);
  g_assert_cmpuint(h->n_nodes, ==, 4);
  g_assert_cmpstr(node_cpus(h, 0), ==, "0-7");
  g_assert_cmpstr(node_cpus(h, 1), ==, "8-15");
  g_assert_cmpstr(node_cpus(h, 3), ==, "24-31");
  g_assert_cmpint(cpu(h, 13)->node, ==, 1);

  g_autoptr(QpHost) opt = load_recorded("opteron-6272-4s.xml");
  g_assert_cmpuint(opt->n_nodes, ==, 8);
  g_assert_cmpstr(node_cpus(opt, 0), ==, "0-7");
  g_assert_cmpstr(node_cpus(opt, 1), ==, "8-15");
  g_assert_cmpstr(node_cpus(opt, 6), ==, "16-23");
  g_assert_cmpstr(node_cpus(opt, 2), ==, "32-39");
  g_assert_cmpstr(node_cpus(opt, 5), ==, "56-63");
}

/* Cache domains: an L3 of several cores is one, an L3 of one core (as
 * some VMs show) is not, and neither is an L3 over several nodes. */
static void
test_cache_domains_synthetic(void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(QpHost) per_core =
      qp_host_load_synthetic("numa:1 l3:2 core:1 pu:2", &error);
  g_assert_no_error(error);
  g_assert_cmpuint(per_core->n_domains, ==, 0);
  g_assert_cmpint(per_core->cores[0].domain[QP_CACHE_L3], ==, -1);

  g_autoptr(QpHost) ccx =
      qp_host_load_synthetic("numa:2 l3:2 l2:2 core:1 pu:1", &error);
  g_assert_no_error(error);
  g_assert_cmpuint(ccx->n_domains, ==, 4);
  g_assert_cmpint(ccx->domains[1].node, ==, 0);
  g_assert_cmpstr(list(ccx->domains[1].cpus), ==, "2-3");
  g_assert_cmpint(ccx->cores[3].domain[QP_CACHE_L3], ==, 1);

  g_autoptr(QpHost) wide =
      qp_host_load_synthetic("l3:1 numa:2 core:2 pu:1", &error);
  g_assert_no_error(error);
  g_assert_cmpuint(wide->n_domains, ==, 0);
}

static void
test_synthetic_invalid(void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(QpHost) h = qp_host_load_synthetic("pack:2 bogus:3", &error);
  g_assert_null(h);
  g_assert_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_INVALID);
  g_assert_nonnull(strstr(error->message, "'pack:2 bogus:3'"));
  g_assert_null(strchr(error->message, '\n'));
}

static hwloc_bitmap_t
affinity(void)
{
  cpu_set_t set;
  hwloc_bitmap_t b = hwloc_bitmap_alloc();
  g_assert_cmpint(sched_getaffinity(0, sizeof(set), &set), ==, 0);
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, &set))
      hwloc_bitmap_set(b, (unsigned)c);
  return b;
}

static hwloc_bitmap_t
isolated(void)
{
  g_autofree char *text = NULL;
  hwloc_bitmap_t b = NULL;
  if (g_file_get_contents("/sys/devices/system/cpu/isolated", &text, NULL,
                          NULL) &&
      *g_strstrip(text) != '\0')
    g_assert_true(qp_list_parse(text, "isolated", QP_LIST_MAX_INDEX, &b, NULL));
  return b != NULL ? b : hwloc_bitmap_alloc();
}

static void
test_live(void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(QpHost) h = qp_host_load(NULL, &error);
  g_assert_no_error(error);
  g_assert_cmpstr(h->source, ==, "live");
  g_assert_cmpuint(h->n_nodes, >=, 1);
  g_assert_cmpuint(h->n_cores, >=, 1);
  g_assert_cmpuint(h->n_kinds, >=, 1);
  g_auto(hwloc_bitmap_t) want = affinity();
  g_auto(hwloc_bitmap_t) iso = isolated();
  hwloc_bitmap_andnot(want, want, iso);
  g_assert_cmpstr(list(h->allowed), ==, list(want));
  for (guint i = 0; i < h->n_nodes; i++) {
    g_assert_cmpuint(h->nodes[i].free_mib, <=, h->nodes[i].total_mib);
    g_assert_true(hwloc_bitmap_isincluded(h->nodes[i].cpus, h->allowed));
  }
  /* The node ids and CPU lists are those numactl reports (sysfs). */
  for (guint i = 0; i < h->n_nodes; i++) {
    g_autofree char *path = g_strdup_printf(
        "/sys/devices/system/node/node%d/cpulist", h->nodes[i].id);
    g_autofree char *text = NULL;
    if (!g_file_get_contents(path, &text, NULL, NULL))
      continue;
    g_assert_cmpstr(list(h->nodes[i].all_cpus), ==, g_strstrip(text));
  }
}

/* Every hugepage size the kernel has on each node (2 MiB, 1 GiB, ...) is a
 * pool of that node, with the kernel's counts. */
static void
test_live_hugepages(void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(QpHost) h = qp_host_load(NULL, &error);
  g_assert_no_error(error);
  guint sizes = 0;
  for (guint i = 0; i < h->n_nodes; i++) {
    const QpNode *n = &h->nodes[i];
    g_autofree char *dir =
        g_strdup_printf("/sys/devices/system/node/node%d/hugepages", n->id);
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    const char *name;
    while (d != NULL && (name = g_dir_read_name(d)) != NULL) {
      guint64 kib = 0;
      if (sscanf(name, "hugepages-%" G_GUINT64_FORMAT "kB", &kib) != 1)
        continue;
      g_autofree char *nr = g_strdup_printf("%s/%s/nr_hugepages", dir, name);
      g_autofree char *text = NULL;
      g_assert_true(g_file_get_contents(nr, &text, NULL, NULL));
      const QpHugePool *p = pool(n, kib);
      if (p == NULL)
        g_error("node %d: no pool of %" G_GUINT64_FORMAT " KiB pages", n->id,
                kib);
      g_assert_cmpuint(p->total, ==, g_ascii_strtoull(text, NULL, 10));
      g_assert_cmpuint(p->free, <=, p->total);
      sizes++;
    }
    if (d == NULL)
      g_test_message("node %d has no hugepages directory", n->id);
  }
  g_test_message("%u hugepage pools checked", sizes);
}

/* A host with no hugepage of a size reads that size's pools empty without
 * asking each node; one page more on the first node is read there at
 * once. Root only: the test reserves the page (under the lock the launch
 * tests take for hugepages) and gives it back. */
static void
test_live_hugepages_grown(void)
{
  if (geteuid() != 0) {
    g_test_skip("reserving a hugepage needs root");
    return;
  }
  g_autoptr(GError) error = NULL;
  g_autoptr(QpHost) h = qp_host_load(NULL, &error);
  g_assert_no_error(error);
  const QpNode *first = &h->nodes[0];
  g_autofree char *nr = g_strdup_printf(
      "/sys/devices/system/node/node%d/hugepages/hugepages-2048kB/"
      "nr_hugepages",
      first->id);
  int lock = open("/tmp/qp-hugepages.lock", O_CREAT | O_RDWR | O_CLOEXEC, 0600);
  g_assert_cmpint(lock, >=, 0);
  g_assert_cmpint(flock(lock, LOCK_EX), ==, 0);
  gint64 before = qp_test_read_number(nr);
  if (before < 0 || pool(first, 2048) == NULL) {
    close(lock);
    g_test_skip("this host has no 2 MiB hugepages");
    return;
  }
  gboolean grown = qp_test_write_number(nr, before + 1) &&
                   qp_test_read_number(nr) == before + 1;
  QpHost *after = grown ? qp_host_load(NULL, &error) : NULL;
  g_assert_true(qp_test_write_number(nr, before));
  close(lock);
  if (!grown) {
    g_test_skip("the kernel did not give the test a 2 MiB hugepage");
    return;
  }
  g_assert_no_error(error);
  g_assert_cmpuint(pool(&after->nodes[0], 2048)->total, ==,
                   (guint64)before + 1);
  g_assert_cmpuint(pool(&after->nodes[0], 2048)->free, <=, (guint64)before + 1);
  qp_host_free(after);
  /* Given back: the pool reads as it was. */
  g_autoptr(QpHost) again = qp_host_load(NULL, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(pool(&again->nodes[0], 2048)->total, ==, (guint64)before);
}

static void
test_live_follows_affinity(void)
{
  cpu_set_t saved, one;
  g_assert_cmpint(sched_getaffinity(0, sizeof(saved), &saved), ==, 0);
  g_auto(hwloc_bitmap_t) before = affinity();
  g_auto(hwloc_bitmap_t) iso = isolated();
  hwloc_bitmap_andnot(before, before, iso);
  int last = hwloc_bitmap_last(before);
  if (last < 0) {
    g_test_skip("no usable CPU");
    return;
  }
  CPU_ZERO(&one);
  CPU_SET(last, &one);
  g_assert_cmpint(sched_setaffinity(0, sizeof(one), &one), ==, 0);
  g_autoptr(GError) error = NULL;
  QpHost *h = qp_host_load(NULL, &error);
  g_assert_cmpint(sched_setaffinity(0, sizeof(saved), &saved), ==, 0);
  g_assert_no_error(error);
  g_autofree char *want = g_strdup_printf("%d", last);
  g_assert_cmpstr(list(h->allowed), ==, want);
  g_assert_true(cpu(h, last)->allowed);
  if (h->n_cpus > 1)
    g_assert_cmpuint(h->n_cpus, >, (guint)hwloc_bitmap_weight(h->allowed));
  qp_host_free(h);
}

/* Every PCI function in sysfs but PCI-to-PCI and CardBus bridges (hwloc's
 * Bridge objects) is listed, with the node sysfs gives where it gives one. */
static void
test_live_pci(void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(QpHost) h = qp_host_load(NULL, &error);
  g_assert_no_error(error);
  g_autoptr(GDir) dir = g_dir_open("/sys/bus/pci/devices", 0, NULL);
  if (dir == NULL) {
    g_test_skip("no /sys/bus/pci/devices");
    return;
  }
  g_autoptr(GPtrArray) want = g_ptr_array_new_with_free_func(g_free);
  const char *name;
  while ((name = g_dir_read_name(dir)) != NULL) {
    g_autofree char *cls_path =
        g_strdup_printf("/sys/bus/pci/devices/%s/class", name);
    g_autofree char *node_path =
        g_strdup_printf("/sys/bus/pci/devices/%s/numa_node", name);
    g_autofree char *cls = NULL, *nodes = NULL;
    g_assert_true(g_file_get_contents(cls_path, &cls, NULL, NULL));
    guint64 c = g_ascii_strtoull(cls, NULL, 16);
    if ((c >> 8) == 0x0604 || (c >> 8) == 0x0607)
      continue;
    g_ptr_array_add(want, g_strdup(name));
    int sys_node = -1;
    if (g_file_get_contents(node_path, &nodes, NULL, NULL))
      sys_node = atoi(nodes);
    gboolean found = FALSE;
    for (guint i = 0; i < h->pci->len; i++) {
      const QpPciDevice *d = &g_array_index(h->pci, QpPciDevice, i);
      if (strcmp(d->bdf, name) != 0)
        continue;
      found = TRUE;
      if (sys_node >= 0)
        g_assert_cmpint(d->node, ==, sys_node);
    }
    if (!found)
      g_error("PCI device %s is missing from the live host", name);
  }
  g_assert_cmpuint(h->pci->len, ==, want->len);
}

static void
check_load_error(const char *path, int code)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(QpHost) h = qp_host_load(path, &error);
  g_assert_null(h);
  g_assert_error(error, QP_TOPOLOGY_ERROR, code);
  g_assert_nonnull(strstr(error->message, path));
  g_assert_null(strchr(error->message, '\n'));
}

static void
test_missing_file(void)
{
  check_load_error("/nonexistent/qemu-pin/host.xml", QP_TOPOLOGY_ERROR_FILE);
}

static void
test_malformed_file(void)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp("qp-host-XXXXXX", &error);
  g_assert_no_error(error);
  g_autofree char *bad_xml = g_build_filename(dir, "truncated.xml", NULL);
  g_autofree char *not_xml = g_build_filename(dir, "not-xml.xml", NULL);
  g_assert_true(g_file_set_contents(
      bad_xml,
      "<?xml version=\"1.0\"?>\n<topology version=\"2.0\">\n<object type=", -1,
      NULL));
  g_assert_true(g_file_set_contents(not_xml, "node 0 cpus: 0-3\n", -1, NULL));
  check_load_error(bad_xml, QP_TOPOLOGY_ERROR_FILE);
  check_load_error(not_xml, QP_TOPOLOGY_ERROR_FILE);
  check_load_error(dir, QP_TOPOLOGY_ERROR_FILE); /* a directory */
  /* A recorded host edited into one no machine is (outside check, stop
   * 43): a node's memory size negative (read back as 16 EiB), and one CPU
   * listed twice. Both were planned on. */
  g_autofree char *good = NULL;
  g_autofree char *epyc = topology("epyc-7351p.xml");
  g_assert_true(g_file_get_contents(epyc, &good, NULL, NULL));
  g_autofree char *neg_xml = g_build_filename(dir, "negative.xml", NULL);
  g_autofree char *dup_xml = g_build_filename(dir, "twice.xml", NULL);
  g_autoptr(GString) neg = g_string_new(good);
  g_assert_cmpuint(g_string_replace(neg, "local_memory=\"16662921216\"",
                                    "local_memory=\"-1\"", 1),
                   ==, 1);
  g_autoptr(GString) dup = g_string_new(good);
  g_assert_cmpuint(g_string_replace(dup, "type=\"PU\" os_index=\"1\"",
                                    "type=\"PU\" os_index=\"0\"", 1),
                   ==, 1);
  g_assert_true(g_file_set_contents(neg_xml, neg->str, -1, NULL));
  g_assert_true(g_file_set_contents(dup_xml, dup->str, -1, NULL));
  check_load_error(neg_xml, QP_TOPOLOGY_ERROR_FILE);
  check_load_error(dup_xml, QP_TOPOLOGY_ERROR_FILE);
  g_unlink(neg_xml);
  g_unlink(dup_xml);
  g_unlink(bad_xml);
  g_unlink(not_xml);
  g_rmdir(dir);
}

static void
test_json(void)
{
  g_autoptr(QpHost) h = load_recorded("cpuless.xml");
  g_autoptr(JsonNode) root = qp_host_to_json(h);
  JsonObject *o = json_node_get_object(root);
  JsonArray *nodes = json_object_get_array_member(o, "nodes");
  g_assert_cmpuint(json_array_get_length(nodes), ==, 3);
  JsonObject *n0 = json_array_get_object_element(nodes, 0);
  JsonObject *n2 = json_array_get_object_element(nodes, 2);
  g_assert_cmpint(json_object_get_int_member(n0, "id"), ==, 0);
  g_assert_cmpstr(json_object_get_string_member(n0, "cpus"), ==, "0-3");
  g_assert_cmpint(json_object_get_int_member(n2, "total_mib"), ==, 65536);
  g_assert_cmpint(json_object_get_int_member(n2, "free_mib"), ==, 65536);
  g_assert_cmpstr(json_object_get_string_member(n2, "cpus"), ==, "");
  JsonArray *row = json_object_get_array_member(n2, "distances");
  g_assert_cmpuint(json_array_get_length(row), ==, 3);
  g_assert_cmpint(json_array_get_int_element(row, 0), ==, 30);
  g_assert_cmpint(json_array_get_int_element(row, 2), ==, 10);
  JsonArray *hp = json_object_get_array_member(n0, "hugepages");
  g_assert_cmpuint(json_array_get_length(hp), ==, 2);
  g_assert_cmpint(json_object_get_int_member(
                      json_array_get_object_element(hp, 0), "page_kib"),
                  ==, 2048);
  g_assert_cmpstr(json_object_get_string_member(o, "allowed"), ==, "0-7");
  g_assert_cmpuint(
      json_array_get_length(json_object_get_array_member(o, "cores")), ==, 8);
  g_assert_cmpuint(
      json_array_get_length(json_object_get_array_member(o, "kinds")), ==, 1);
  g_assert_cmpuint(
      json_array_get_length(json_object_get_array_member(o, "pci")), ==, 0);

  g_autoptr(QpHost) intel = load_recorded("intel-2s-smt.xml");
  g_autoptr(JsonNode) iroot = qp_host_to_json(intel);
  JsonArray *pci =
      json_object_get_array_member(json_node_get_object(iroot), "pci");
  JsonObject *gpu = json_array_get_object_element(pci, 4);
  g_assert_cmpstr(json_object_get_string_member(gpu, "bdf"), ==,
                  "0000:d8:00.0");
  g_assert_cmpint(json_object_get_int_member(gpu, "node"), ==, 1);
  JsonObject *core0 = json_array_get_object_element(
      json_object_get_array_member(json_node_get_object(iroot), "cores"), 0);
  g_assert_cmpstr(json_object_get_string_member(core0, "cpus"), ==, "0,16");

  g_autoptr(QpHost) epyc = load_recorded("epyc-7351p.xml");
  g_autoptr(JsonNode) eroot = qp_host_to_json(epyc);
  JsonObject *en1 = json_array_get_object_element(
      json_object_get_array_member(json_node_get_object(eroot), "nodes"), 1);
  JsonArray *doms = json_object_get_array_member(en1, "cache_domains");
  g_assert_cmpuint(json_array_get_length(doms), ==, 2);
  JsonObject *d1 = json_array_get_object_element(doms, 1);
  g_assert_cmpstr(json_object_get_string_member(d1, "level"), ==, "L3");
  g_assert_cmpstr(json_object_get_string_member(d1, "cpus"), ==, "6-7,22-23");
  g_assert_cmpint(json_object_get_int_member(d1, "cores"), ==, 2);
  g_assert_cmpint(json_object_get_int_member(d1, "size_kib"), ==, 8192);
}

static void
test_text(void)
{
  g_autoptr(QpHost) h = load_recorded("cpuless.xml");
  g_autofree char *text = qp_host_to_text(h);
  g_assert_nonnull(strstr(text, "available: 3 nodes (0-2)\n"));
  g_assert_nonnull(strstr(text, "node 0 cpus: 0-3\n"));
  g_assert_nonnull(strstr(text, "node 2 cpus: (none: memory only)\n"));
  g_assert_nonnull(strstr(text, "node 2 size: 65536 MiB\n"));
  g_assert_nonnull(strstr(text, "  0:   10  20  30\n"));

  g_autoptr(QpHost) cg = load_recorded("cgroup-subset.xml");
  g_autofree char *cgtext = qp_host_to_text(cg);
  g_assert_nonnull(strstr(cgtext, "node 1 cpus: 4-7,20-23 (allowed: 4-5)\n"));
  g_assert_nonnull(
      strstr(cgtext, "node 3 cpus: 12-15,28-31 (allowed: none)\n"));
  g_assert_nonnull(
      strstr(cgtext, "cores: 16, CPUs: 32, up to 2 threads per core\n"));

  g_autoptr(QpHost) hy = load_recorded("hybrid.xml");
  g_autofree char *hytext = qp_host_to_text(hy);
  g_assert_nonnull(
      strstr(hytext, "kind 0: IntelAtom, efficiency 0, cpus 16-23\n"));
  g_assert_nonnull(
      strstr(hytext, "kind 1: IntelCore, efficiency 1, cpus 0-15\n"));

  g_autoptr(QpHost) epyc = load_recorded("epyc-7351p.xml");
  g_autofree char *etext = qp_host_to_text(epyc);
  g_assert_nonnull(strstr(etext, "node 0 cache domains: L3 0-1,16-17 (8 MiB), "
                                 "L3 2-3,18-19 (8 MiB)\n"));
  g_autoptr(QpHost) raptor = load_recorded("raptorlake.xml");
  g_autofree char *rtext = qp_host_to_text(raptor);
  g_assert_nonnull(strstr(rtext, "node 0 cache domains: L3 0-19 (24 MiB), "
                                 "L2 12-15 (2 MiB), L2 16-19 (2 MiB)\n"));
  /* No cache inside a node: no line. */
  g_assert_null(strstr(text, "cache domains"));
}

/* Mapped into this process: a file whose path holds NEEDLE. */
static gboolean
mapped(const char *needle)
{
  g_autofree char *maps = NULL;
  g_assert_true(g_file_get_contents("/proc/self/maps", &maps, NULL, NULL));
  return strstr(maps, needle) != NULL;
}

/* hwloc dlopens the plugins it finds at its first init; qemu-pin uses none
 * of them, and loading them took about 5 ms of every launch. Run in a
 * subprocess: plugins stay loaded while any topology of the process lives. */
static void
test_no_unused_plugins(void)
{
  if (g_test_subprocess()) {
    g_setenv("HWLOC_PLUGINS_BLACKLIST", "hwloc_cuda", TRUE);
    hwloc_topology_t topo = NULL;
    g_assert_cmpint(qp_hwloc_topology_init(&topo), ==, 0);
    g_assert_cmpint(hwloc_topology_load(topo), ==, 0);
    g_assert_false(mapped("hwloc_xml_libxml"));
    g_assert_false(mapped("libxml2"));
    g_assert_false(mapped("hwloc_opencl"));
    g_assert_false(mapped("hwloc_gl"));
    g_assert_false(mapped("hwloc_pci"));
    /* The caller's own list is kept, and given back as it was. */
    g_assert_cmpstr(g_getenv("HWLOC_PLUGINS_BLACKLIST"), ==, "hwloc_cuda");
    hwloc_topology_destroy(topo);
    g_unsetenv("HWLOC_PLUGINS_BLACKLIST");
    g_assert_cmpint(qp_hwloc_topology_init(&topo), ==, 0);
    g_assert_null(g_getenv("HWLOC_PLUGINS_BLACKLIST"));
    hwloc_topology_destroy(topo);
    /* A recorded topology still loads, through hwloc's own XML parser. */
    g_autoptr(QpHost) h = load_recorded("epyc-7351p.xml");
    g_assert_cmpuint(h->n_nodes, ==, 4);
    g_assert_false(mapped("libxml2"));
    return;
  }
  g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_INHERIT_STDERR);
  g_test_trap_assert_passed();
}

/* The check above can fail: a plain hwloc init does load them here. */
static void
test_plain_init_loads_plugins(void)
{
  if (g_test_subprocess()) {
    g_unsetenv("HWLOC_PLUGINS_BLACKLIST");
    hwloc_topology_t topo = NULL;
    g_assert_cmpint(hwloc_topology_init(&topo), ==, 0);
    if (!g_file_test("/usr/lib/x86_64-linux-gnu/hwloc/hwloc_xml_libxml.so",
                     G_FILE_TEST_EXISTS)) {
      hwloc_topology_destroy(topo);
      return;
    }
    g_assert_true(mapped("hwloc_xml_libxml"));
    hwloc_topology_destroy(topo);
    return;
  }
  g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_INHERIT_STDERR);
  g_test_trap_assert_passed();
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/host/epyc-7351p/nodes-cpus-memory-smt-slit", test_epyc);
  g_test_add_func(
      "/host/intel-2s/smt-siblings-n-and-n-plus-16-and-hugepage-pools",
      test_intel_smt);
  g_test_add_func("/host/intel-2s/pci-devices-carry-their-node",
                  test_intel_pci);
  g_test_add_func("/host/2s-8node/non-uniform-distances", test_2s8n);
  g_test_add_func("/host/hybrid/e-cores-are-kind-0-p-cores-kind-1",
                  test_hybrid);
  g_test_add_func("/host/cpuless/memory-only-node-has-no-cpus", test_cpuless);
  g_test_add_func("/host/cgroup-subset/allowed-is-a-subset-all-cpus-seen",
                  test_cgroup_subset);
  g_test_add_func("/host/recorded/this-machine-loads",
                  test_this_machine_recorded);
  g_test_add_func("/host/synthetic/defaults-and-test-setters", test_synthetic);
  g_test_add_func("/host/synthetic/coreless-memory-only-and-spread-smt-shapes",
                  test_synthetic_shapes);
  g_test_add_func("/host/nodes-below-l3-keep-their-cpus", test_nodes_below_l3);
  g_test_add_func("/host/cache-domains/synthetic-shapes",
                  test_cache_domains_synthetic);
  g_test_add_func("/host/synthetic/invalid-description-is-one-line-error",
                  test_synthetic_invalid);
  g_test_add_func("/host/live/allowed-equals-affinity-minus-isolated",
                  test_live);
  g_test_add_func("/host/live/allowed-follows-narrowed-affinity",
                  test_live_follows_affinity);
  g_test_add_func("/host/live/hugepage-pools-of-every-size-per-node",
                  test_live_hugepages);
  g_test_add_func("/host/live/hugepage-pool-grown-is-read-at-once",
                  test_live_hugepages_grown);
  g_test_add_func("/host/live/pci-devices-match-sysfs", test_live_pci);
  g_test_add_func("/host/errors/missing-file-named", test_missing_file);
  g_test_add_func("/host/errors/malformed-xml-named", test_malformed_file);
  g_test_add_func("/host/output/json", test_json);
  g_test_add_func("/host/output/text", test_text);
  g_test_add_func("/host/hwloc/unused-plugins-not-loaded",
                  test_no_unused_plugins);
  g_test_add_func("/host/hwloc/plain-init-loads-plugins",
                  test_plain_init_loads_plugins);
  return g_test_run();
}
