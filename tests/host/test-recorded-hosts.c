/* The hosts for cache domains and device locality (one row each in
 * tests/data/topologies/README.md): every file loads in the host model with
 * the shape its row gives, and holds the caches, CPU kinds and OS devices
 * the row lists, and the host model's cache domains agree with hwloc's
 * caches. OS devices are read with hwloc directly (the host model keeps
 * none). */
#include "topology/host/host.h"

#include <string.h>

G_DEFINE_AUTO_CLEANUP_FREE_FUNC(hwloc_topology_t, hwloc_topology_destroy, NULL)

typedef struct {
  const char *file;
  guint packages, nodes, cores, cpus;
  guint64 node0_mib; /* memory of node 0 */
  guint near, far;   /* SLIT from node 0 to node 1 and to the last node */
  /* L3 caches inside each node and cores of each; when an L3 spans
   * several nodes, l3_per_node is 0 and nodes_per_l3 says how many. */
  guint l3_per_node, cores_per_l3, nodes_per_l3;
  /* L2 caches shared by more than one core, cores of each, and their CPU
   * lists ("12-15 16-19") when the row names them. */
  guint shared_l2, cores_per_shared_l2;
  const char *shared_l2_cpus;
  const char *kinds; /* "name:cpus" per host-model kind, NULL if one kind */
  guint pci, pci_unknown; /* PCI devices in the host model, of no node */
  /* OS devices hwloc holds: block devices under a PCI device, network. */
  guint pci_block, net;
} Shape;

static const Shape shapes[] = {
    {.file = "epyc-7351p.xml",
     .packages = 1,
     .nodes = 4,
     .cores = 16,
     .cpus = 32,
     .node0_mib = 15891,
     .near = 16,
     .far = 16,
     .l3_per_node = 2,
     .cores_per_l3 = 2,
     .nodes_per_l3 = 1},
    {.file = "epyc-7451-2s.xml",
     .packages = 2,
     .nodes = 8,
     .cores = 48,
     .cpus = 96,
     .node0_mib = 32768,
     .near = 16,
     .far = 32,
     .l3_per_node = 2,
     .cores_per_l3 = 3,
     .nodes_per_l3 = 1},
    {.file = "epyc-7763-2s.xml",
     .packages = 2,
     .nodes = 2,
     .cores = 128,
     .cpus = 128,
     .node0_mib = 262144,
     .near = 32,
     .far = 32,
     .l3_per_node = 8,
     .cores_per_l3 = 8,
     .nodes_per_l3 = 1},
    {.file = "spr-snc4.xml",
     .packages = 2,
     .nodes = 8,
     .cores = 112,
     .cpus = 224,
     .node0_mib = 32256,
     .near = 12,
     .far = 21,
     .l3_per_node = 0,
     .cores_per_l3 = 56,
     .nodes_per_l3 = 4},
    {.file = "lakefield.xml",
     .packages = 1,
     .nodes = 1,
     .cores = 5,
     .cpus = 5,
     .node0_mib = 3766,
     .l3_per_node = 1,
     .cores_per_l3 = 5,
     .nodes_per_l3 = 1,
     .shared_l2 = 1,
     .cores_per_shared_l2 = 4,
     .shared_l2_cpus = "0-3",
     .kinds = "IntelAtom:0-3 IntelCore:4"},
    {.file = "raptorlake.xml",
     .packages = 1,
     .nodes = 1,
     .cores = 14,
     .cpus = 20,
     .node0_mib = 32768,
     .l3_per_node = 1,
     .cores_per_l3 = 14,
     .nodes_per_l3 = 1,
     .shared_l2 = 2,
     .cores_per_shared_l2 = 4,
     .shared_l2_cpus = "12-15 16-19",
     .kinds = "IntelAtom:12-19 IntelCore:0-11"},
    {.file = "x3950m2-io.xml",
     .packages = 16,
     .nodes = 4,
     .cores = 96,
     .cpus = 96,
     .node0_mib = 48894,
     .near = 26,
     .far = 26,
     .l3_per_node = 4,
     .cores_per_l3 = 6,
     .nodes_per_l3 = 1,
     .shared_l2 = 48,
     .cores_per_shared_l2 = 2,
     .pci = 14,
     .pci_block = 4,
     .net = 8},
    {.file = "dcs8000z-io.xml",
     .packages = 2,
     .nodes = 2,
     .cores = 16,
     .cpus = 16,
     .node0_mib = 16354,
     .near = 21,
     .far = 21,
     .l3_per_node = 1,
     .cores_per_l3 = 8,
     .nodes_per_l3 = 1,
     .pci = 128,
     .pci_unknown = 92,
     .pci_block = 2,
     .net = 3},
    {.file = "opteron-6272-4s.xml",
     .packages = 4,
     .nodes = 8,
     .cores = 64,
     .cpus = 64,
     .node0_mib = 16043,
     .near = 16,
     .far = 22,
     .l3_per_node = 1,
     .cores_per_l3 = 8,
     .nodes_per_l3 = 1,
     .shared_l2 = 32,
     .cores_per_shared_l2 = 2},
};

typedef struct {
  const char *file;
  const char *name; /* OS device name */
  hwloc_obj_osdev_type_t type;
  const char *bdf; /* its PCI device */
  int node;        /* that PCI device's node in the host model */
} Device;

static const Device devices[] = {
    {"x3950m2-io.xml", "sda", HWLOC_OBJ_OSDEV_BLOCK, "0000:04:00.0", 0},
    {"x3950m2-io.xml", "sr0", HWLOC_OBJ_OSDEV_BLOCK, "0000:00:1f.2", 0},
    {"x3950m2-io.xml", "sdb", HWLOC_OBJ_OSDEV_BLOCK, "0000:64:00.0", 2},
    {"x3950m2-io.xml", "sdc", HWLOC_OBJ_OSDEV_BLOCK, "0000:94:00.0", 3},
    {"x3950m2-io.xml", "eth0", HWLOC_OBJ_OSDEV_NETWORK, "0000:02:00.0", 0},
    {"x3950m2-io.xml", "eth1", HWLOC_OBJ_OSDEV_NETWORK, "0000:02:00.1", 0},
    {"x3950m2-io.xml", "eth2", HWLOC_OBJ_OSDEV_NETWORK, "0000:32:00.0", 1},
    {"x3950m2-io.xml", "eth3", HWLOC_OBJ_OSDEV_NETWORK, "0000:32:00.1", 1},
    {"x3950m2-io.xml", "eth4", HWLOC_OBJ_OSDEV_NETWORK, "0000:62:00.0", 2},
    {"x3950m2-io.xml", "eth5", HWLOC_OBJ_OSDEV_NETWORK, "0000:62:00.1", 2},
    {"x3950m2-io.xml", "eth6", HWLOC_OBJ_OSDEV_NETWORK, "0000:92:00.0", 3},
    {"x3950m2-io.xml", "eth7", HWLOC_OBJ_OSDEV_NETWORK, "0000:92:00.1", 3},
    {"dcs8000z-io.xml", "nvme0n1", HWLOC_OBJ_OSDEV_BLOCK, "0000:00:02.0", 0},
    {"dcs8000z-io.xml", "sda", HWLOC_OBJ_OSDEV_BLOCK, "0000:00:1f.2", 0},
    {"dcs8000z-io.xml", "eth0", HWLOC_OBJ_OSDEV_NETWORK, "0000:02:00.0", 0},
    {"dcs8000z-io.xml", "eth1", HWLOC_OBJ_OSDEV_NETWORK, "0000:02:00.3", 0},
    {"dcs8000z-io.xml", "ib0", HWLOC_OBJ_OSDEV_NETWORK, "0000:82:00.0", 1},
};

static char *
path_of(const char *file)
{
  return g_build_filename(g_getenv("QP_TOPOLOGIES"), file, NULL);
}

static QpHost *
load_host(const char *file)
{
  g_autofree char *path = path_of(file);
  g_autoptr(GError) error = NULL;
  QpHost *h = qp_host_load(path, &error);
  g_assert_no_error(error);
  g_assert_nonnull(h);
  return h;
}

/* FILE as hwloc imports it, with caches and every I/O object. */
static hwloc_topology_t
load_hwloc(const char *file)
{
  g_autofree char *path = path_of(file);
  hwloc_topology_t topo = NULL;
  g_assert_cmpint(qp_hwloc_topology_init(&topo), ==, 0);
  hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_ALL);
  g_assert_cmpint(hwloc_topology_set_xml(topo, path), ==, 0);
  g_assert_cmpint(hwloc_topology_load(topo), ==, 0);
  return topo;
}

static guint
cores_in(hwloc_topology_t topo, hwloc_const_cpuset_t set)
{
  return (guint)hwloc_get_nbobjs_inside_cpuset_by_type(topo, set,
                                                       HWLOC_OBJ_CORE);
}

static void
check_l3(hwloc_topology_t topo, const Shape *s)
{
  hwloc_obj_t n = NULL;
  while ((n = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, n))) {
    guint inside = 0, spanning = 0;
    hwloc_obj_t c = NULL;
    while ((c = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_L3CACHE, c))) {
      if (!hwloc_bitmap_intersects(c->cpuset, n->cpuset))
        continue;
      g_assert_cmpuint(cores_in(topo, c->cpuset), ==, s->cores_per_l3);
      if (hwloc_bitmap_isincluded(c->cpuset, n->cpuset)) {
        inside++;
      } else {
        g_assert_true(hwloc_bitmap_isincluded(n->cpuset, c->cpuset));
        g_assert_cmpint(hwloc_bitmap_weight(c->nodeset), ==,
                        (int)s->nodes_per_l3);
        spanning++;
      }
    }
    g_assert_cmpuint(inside, ==, s->l3_per_node);
    g_assert_cmpuint(spanning, ==, s->l3_per_node == 0 ? 1 : 0);
  }
}

static void
check_l2(hwloc_topology_t topo, const Shape *s)
{
  g_autoptr(GString) lists = g_string_new(NULL);
  guint shared = 0;
  hwloc_obj_t c = NULL;
  while ((c = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_L2CACHE, c))) {
    guint cores = cores_in(topo, c->cpuset);
    if (cores < 2)
      continue;
    g_assert_cmpuint(cores, ==, s->cores_per_shared_l2);
    g_autofree char *l = qp_list_format(c->cpuset);
    g_string_append_printf(lists, "%s%s", shared++ ? " " : "", l);
  }
  g_assert_cmpuint(shared, ==, s->shared_l2);
  if (s->shared_l2_cpus != NULL)
    g_assert_cmpstr(lists->str, ==, s->shared_l2_cpus);
}

/* The host model's cache domains agree with hwloc's caches: per node the
 * L3s inside it, and every L2 shared by more than one core; each core
 * points at the domains holding it. */
static void
check_domains(const QpHost *h, const Shape *s)
{
  guint l2 = 0;
  g_autoptr(GString) l2_lists = g_string_new(NULL);
  for (guint i = 0; i < h->n_nodes; i++) {
    guint l3 = 0;
    for (guint d = 0; d < h->n_domains; d++) {
      const QpCacheDomain *cd = &h->domains[d];
      g_assert_true(hwloc_bitmap_isincluded(cd->cpus, h->nodes[i].all_cpus) ||
                    cd->node != h->nodes[i].id);
      if (cd->node != h->nodes[i].id)
        continue;
      if (cd->level == QP_CACHE_L3) {
        g_assert_cmpuint(cd->n_cores, ==, s->cores_per_l3);
        l3++;
      } else {
        g_assert_cmpuint(cd->n_cores, ==, s->cores_per_shared_l2);
        g_autofree char *l = qp_list_format(cd->cpus);
        g_string_append_printf(l2_lists, "%s%s", l2++ ? " " : "", l);
      }
    }
    g_assert_cmpuint(l3, ==, s->l3_per_node);
  }
  g_assert_cmpuint(l2, ==, s->shared_l2);
  if (s->shared_l2_cpus != NULL)
    g_assert_cmpstr(l2_lists->str, ==, s->shared_l2_cpus);
  for (guint c = 0; c < h->n_cores; c++)
    for (int l = 0; l < QP_CACHE_LEVELS; l++) {
      int d = h->cores[c].domain[l];
      if (d >= 0)
        g_assert_true(
            hwloc_bitmap_isincluded(h->cores[c].pus, h->domains[d].cpus));
      else if (l == QP_CACHE_L3)
        g_assert_cmpuint(s->l3_per_node, ==, 0);
    }
}

/* "IntelAtom:0-3 IntelCore:4": each host-model kind and its CPUs. */
static char *
kinds_of(const QpHost *h)
{
  GString *s = g_string_new(NULL);
  for (guint k = 0; k < h->n_kinds; k++) {
    g_auto(hwloc_bitmap_t) cpus = hwloc_bitmap_alloc();
    for (guint c = 0; c < h->n_cpus; c++)
      if (h->cpus[c].kind == (int)k)
        hwloc_bitmap_set(cpus, (unsigned)h->cpus[c].id);
    g_autofree char *l = qp_list_format(cpus);
    g_string_append_printf(s, "%s%s:%s", k ? " " : "", h->kind_names[k], l);
  }
  return g_string_free(s, FALSE);
}

static void
test_shape(gconstpointer data)
{
  const Shape *s = data;
  g_autoptr(QpHost) h = load_host(s->file);
  g_auto(hwloc_topology_t) topo = load_hwloc(s->file);

  g_assert_cmpint(hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE), ==,
                  (int)s->packages);
  g_assert_cmpuint(h->n_nodes, ==, s->nodes);
  g_assert_cmpuint(h->n_cores, ==, s->cores);
  g_assert_cmpuint(h->n_cpus, ==, s->cpus);
  g_assert_cmpuint(hwloc_bitmap_weight(h->allowed), ==, s->cpus);
  for (guint i = 0; i < h->n_nodes; i++)
    g_assert_cmpuint(hwloc_bitmap_weight(h->nodes[i].cpus), ==,
                     s->cpus / s->nodes);
  g_assert_cmpuint(h->nodes[0].total_mib, ==, s->node0_mib);
  if (s->nodes > 1) {
    g_assert_cmpuint(qp_host_distance(h, h->nodes[0].id, h->nodes[1].id), ==,
                     s->near);
    g_assert_cmpuint(
        qp_host_distance(h, h->nodes[0].id, h->nodes[h->n_nodes - 1].id), ==,
        s->far);
  }

  check_l3(topo, s);
  check_l2(topo, s);
  check_domains(h, s);

  g_autofree char *kinds = kinds_of(h);
  if (s->kinds != NULL)
    g_assert_cmpstr(kinds, ==, s->kinds);
  else
    g_assert_cmpuint(h->n_kinds, ==, 1);

  g_assert_cmpuint(h->pci->len, ==, s->pci);
  guint unknown = 0;
  for (guint i = 0; i < h->pci->len; i++)
    unknown += g_array_index(h->pci, QpPciDevice, i).node < 0;
  g_assert_cmpuint(unknown, ==, s->pci_unknown);

  guint pci_block = 0, net = 0;
  hwloc_obj_t os = NULL;
  while ((os = hwloc_get_next_osdev(topo, os))) {
    if (os->attr->osdev.type == HWLOC_OBJ_OSDEV_BLOCK &&
        os->parent->type == HWLOC_OBJ_PCI_DEVICE)
      pci_block++;
    if (os->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK)
      net++;
  }
  g_assert_cmpuint(pci_block, ==, s->pci_block);
  g_assert_cmpuint(net, ==, s->net);
}

static int
pci_node(const QpHost *h, const char *bdf)
{
  for (guint i = 0; i < h->pci->len; i++) {
    const QpPciDevice *d = &g_array_index(h->pci, QpPciDevice, i);
    if (strcmp(d->bdf, bdf) == 0)
      return d->node;
  }
  g_assert_not_reached();
}

static void
test_device(gconstpointer data)
{
  const Device *d = data;
  g_autoptr(QpHost) h = load_host(d->file);
  g_auto(hwloc_topology_t) topo = load_hwloc(d->file);

  hwloc_obj_t os = NULL;
  while ((os = hwloc_get_next_osdev(topo, os)))
    if (strcmp(os->name, d->name) == 0)
      break;
  g_assert_nonnull(os);
  g_assert_cmpint(os->attr->osdev.type, ==, d->type);

  hwloc_obj_t pci = os->parent;
  g_assert_cmpint(pci->type, ==, HWLOC_OBJ_PCI_DEVICE);
  const struct hwloc_pcidev_attr_s *a = &pci->attr->pcidev;
  g_autofree char *bdf =
      g_strdup_printf("%04x:%02x:%02x.%01x", (unsigned)a->domain,
                      (unsigned)a->bus, (unsigned)a->dev, (unsigned)a->func);
  g_assert_cmpstr(bdf, ==, d->bdf);

  g_assert_cmpint(pci_node(h, bdf), ==, d->node);
  hwloc_obj_t near = hwloc_get_non_io_ancestor_obj(topo, os);
  g_assert_true(hwloc_bitmap_isset(near->nodeset, (unsigned)d->node));
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_assert_nonnull(g_getenv("QP_TOPOLOGIES"));
  for (gsize i = 0; i < G_N_ELEMENTS(shapes); i++) {
    g_autofree char *name =
        g_strdup_printf("/recorded-hosts/shape/%s", shapes[i].file);
    g_test_add_data_func(name, &shapes[i], test_shape);
  }
  for (gsize i = 0; i < G_N_ELEMENTS(devices); i++) {
    g_autofree char *name = g_strdup_printf("/recorded-hosts/device/%s/%s",
                                            devices[i].file, devices[i].name);
    g_test_add_data_func(name, &devices[i], test_device);
  }
  return g_test_run();
}
