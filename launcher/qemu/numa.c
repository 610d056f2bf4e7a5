/* -numa as QEMU 7.2's numa.c reads it: nodes with their vCPUs and memory
 * (mem= on old machine types, memdev= since), vCPUs placed by topology ids
 * (-numa cpu), distances, and what QEMU completes when the command line
 * leaves it out (vCPUs of no node, RAM of no node). */
#include "launcher/qemu/numa.h"

#include <string.h>

#include "launcher/qemu/backends.h"
#include "launcher/qemu/keyval.h"
#include "launcher/qemu/numbers.h"
#include "launcher/qemu/option-table.h"
#include "launcher/qemu/smp.h"

typedef struct {
  gboolean present;
  const char *text; /* its -numa value */
  char *memdev;
  QpNumaNodeArg arg; /* where it is written, its RAM */
} NumaNode;

typedef struct {
  NumaNode nodes[QP_MAX_NODES];
  guint n;       /* nodes declared so far */
  int *cpu_node; /* per vCPU index, -1 if none */
  /* -numa dist's table, made by the first: 64 KiB that a launch without
   * one (nearly all) would only zero. */
  guint (*dist)[QP_MAX_NODES];
  gboolean has_dist;
} Numa;

static void
numa_clear(Numa *numa)
{
  for (guint i = 0; i < QP_MAX_NODES; i++)
    g_free(numa->nodes[i].memdev);
  g_free(numa->cpu_node);
  g_free(numa->dist);
}

static gboolean
numa_get_uint(GArray *kv, const char *key, guint64 max, const char *text,
              gboolean required, guint64 *out, gboolean *has, GError **error)
{
  const char *v = qp_kv_get(kv, key);
  *has = v != NULL;
  if (v == NULL) {
    if (required)
      return qp_args_invalid(error, "-numa '%s': %s is missing", text, key);
    return TRUE;
  }
  if (!qp_parse_uint(v, max, out))
    return qp_args_invalid(
        error,
        "-numa '%s': %s '%s' is not a number from 0 to %" G_GUINT64_FORMAT,
        text, key, v, max);
  return TRUE;
}

static gboolean
numa_assign(QpQemuArgs *a, Numa *numa, guint cpu, guint node, const char *text,
            GError **error)
{
  if (numa->cpu_node[cpu] >= 0 && (guint)numa->cpu_node[cpu] != node)
    return qp_args_invalid(
        error,
        "-numa '%s': vCPU %u is already assigned to node %d: the "
        "CPUs of two nodes must not overlap",
        text, cpu, numa->cpu_node[cpu]);
  numa->cpu_node[cpu] = (int)node;
  return TRUE;
}

/* The RAM of node N from its mem= or memdev= (of KV, its -numa TEXT). */
static gboolean
numa_node_memory(QpQemuArgs *a, Numa *numa, NumaNode *n, GArray *kv,
                 const char *text, GError **error)
{
  const char *mem = qp_kv_get(kv, "mem"), *memdev = qp_kv_get(kv, "memdev");
  if (mem != NULL && memdev != NULL)
    return qp_args_invalid(error,
                           "-numa '%s': mem and memdev exclude each other: "
                           "give one",
                           text);
  if (mem != NULL) {
    if (!a->machine_info.numa_mem_supported)
      return qp_args_invalid(
          error,
          "-numa '%s': mem= is not supported by machine '%s': use "
          "memdev= with an -object memory-backend-*",
          text, a->machine);
    g_autofree char *what = g_strdup_printf("-numa '%s': mem", text);
    if (!qp_parse_size(mem, what, TRUE, &n->arg.mem_bytes, error))
      return FALSE;
    n->arg.legacy_mem = TRUE;
  }
  if (memdev == NULL)
    return TRUE;
  QpBackend *b = qp_backend_find(a, memdev);
  if (b == NULL)
    return qp_args_invalid(
        error, "-numa '%s': memdev '%s' names no -object memory-backend-*",
        text, memdev);
  for (guint i = 0; i < QP_MAX_NODES; i++)
    if (numa->nodes[i].memdev && strcmp(numa->nodes[i].memdev, memdev) == 0)
      return qp_args_invalid(error,
                             "-numa '%s': memdev '%s' is already the memory "
                             "of node %u",
                             text, memdev, i);
  n->memdev = g_strdup(memdev);
  n->arg.mem_bytes = b->size_bytes;
  return TRUE;
}

/* The cpus= lists of KV (node ID's -numa TEXT) assigned to node ID. */
static gboolean
numa_node_cpus(QpQemuArgs *a, Numa *numa, guint id, GArray *kv,
               const char *text, GError **error)
{
  for (guint i = 0; i < kv->len; i++) {
    QpKvPair *p = &g_array_index(kv, QpKvPair, i);
    guint64 lo, hi;
    if (strcmp(p->key, "cpus") != 0)
      continue;
    if (!qp_parse_range(p->value, G_MAXUINT16, &lo, &hi))
      return qp_args_invalid(
          error,
          "-numa '%s': cpus '%s' is not a vCPU index or range such "
          "as 0-3",
          text, p->value);
    if (hi >= a->req->maxcpus)
      return qp_args_invalid(error,
                             "-numa '%s': vCPU %" G_GUINT64_FORMAT
                             " does not exist: "
                             "indexes go up to maxcpus - 1 (%u)",
                             text, hi, a->req->maxcpus - 1);
    for (guint64 c = lo; c <= hi; c++)
      if (!numa_assign(a, numa, (guint)c, id, text, error))
        return FALSE;
  }
  return TRUE;
}

static gboolean
numa_node(QpQemuArgs *a, Numa *numa, const QpOpt *o, GArray *kv, GError **error)
{
  static const char *const keys[] = {"type",   "nodeid",    "cpus", "mem",
                                     "memdev", "initiator", NULL};
  const char *text = o->value;
  guint64 id = numa->n;
  gboolean has;

  if (!qp_kv_check_keys(kv, keys, "-numa",
                        "nodeid, cpus, mem, memdev or initiator", error) ||
      !numa_get_uint(kv, "nodeid", G_MAXUINT16, text, FALSE, &id, &has, error))
    return FALSE;
  if (id >= QP_MAX_NODES)
    return qp_args_invalid(error,
                           "-numa '%s': node %" G_GUINT64_FORMAT
                           " is too high: "
                           "QEMU has at most %d NUMA nodes",
                           text, id, QP_MAX_NODES);
  NumaNode *n = &numa->nodes[id];
  if (n->present)
    return qp_args_invalid(error,
                           "-numa '%s': node %" G_GUINT64_FORMAT " is declared "
                           "twice",
                           text, id);
  n->present = TRUE;
  n->arg.argi = o->vi;
  n->text = text;
  numa->n++;
  return numa_node_memory(a, numa, n, kv, text, error) &&
         numa_node_cpus(a, numa, (guint)id, kv, text, error);
}

static gboolean
numa_cpu(QpQemuArgs *a, Numa *numa, const QpOpt *o, GArray *kv, GError **error)
{
  static const char *const keys[] = {"type",      "node-id",    "socket-id",
                                     "die-id",    "cluster-id", "core-id",
                                     "thread-id", NULL};
  const char *text = o->value;
  guint64 node = 0, ids[5] = {0};
  gboolean has, has_id[5];
  const QpRequest *r = a->req;

  if (!qp_kv_check_keys(kv, keys, "-numa",
                        "node-id, socket-id, die-id, cluster-id, core-id or "
                        "thread-id",
                        error) ||
      !numa_get_uint(kv, "node-id", G_MAXUINT16, text, TRUE, &node, &has,
                     error))
    return FALSE;
  if (node >= QP_MAX_NODES || !numa->nodes[node].present)
    return qp_args_invalid(
        error,
        "-numa '%s': node %" G_GUINT64_FORMAT " is not declared: "
        "an earlier -numa node,nodeid=%" G_GUINT64_FORMAT " must "
        "declare it",
        text, node, node);
  for (guint k = 0; k < 5; k++)
    if (!numa_get_uint(kv, keys[k + 2], G_MAXINT64, text, FALSE, &ids[k],
                       &has_id[k], error))
      return FALSE;
  if (has_id[1] && r->dies == 1 && a->machine_info.known)
    return qp_args_invalid(error,
                           "-numa '%s': die-id is not supported with one die "
                           "per socket",
                           text);
  if (has_id[2] && !a->machine_info.clusters_supported)
    return qp_args_invalid(error,
                           "-numa '%s': cluster-id is not supported by machine "
                           "'%s'",
                           text, a->machine);

  gboolean match = FALSE;
  for (guint c = 0; c < r->maxcpus; c++) {
    QpTopoIds t = qp_smp_topo_ids(r, c);
    guint64 v[5] = {t.socket, t.die, t.cluster, t.core, t.thread};
    gboolean skip = FALSE;
    for (guint k = 0; k < 5; k++)
      if (has_id[k] && ids[k] != v[k])
        skip = TRUE;
    if (skip)
      continue;
    if (!numa_assign(a, numa, c, (guint)node, text, error))
      return FALSE;
    match = TRUE;
  }
  if (!match)
    return qp_args_invalid(error,
                           "-numa '%s': no vCPU has these ids in the -smp "
                           "topology",
                           text);
  return TRUE;
}

static gboolean
numa_dist(Numa *numa, const char *text, GArray *kv, GError **error)
{
  static const char *const keys[] = {"type", "src", "dst", "val", NULL};
  guint64 src, dst, val;
  gboolean has;

  if (!qp_kv_check_keys(kv, keys, "-numa", "src, dst and val", error) ||
      !numa_get_uint(kv, "src", G_MAXUINT16, text, TRUE, &src, &has, error) ||
      !numa_get_uint(kv, "dst", G_MAXUINT16, text, TRUE, &dst, &has, error) ||
      !numa_get_uint(kv, "val", G_MAXUINT8, text, TRUE, &val, &has, error))
    return FALSE;
  if (src >= QP_MAX_NODES || dst >= QP_MAX_NODES || !numa->nodes[src].present ||
      !numa->nodes[dst].present)
    return qp_args_invalid(
        error,
        "-numa '%s': node %" G_GUINT64_FORMAT " is not declared: "
        "declare both nodes with -numa node first",
        text, (src >= QP_MAX_NODES || !numa->nodes[src].present) ? src : dst);
  if (val < 10)
    return qp_args_invalid(error,
                           "-numa '%s': distance %" G_GUINT64_FORMAT
                           " is below "
                           "the minimum of 10",
                           text, val);
  if (src == dst && val != 10)
    return qp_args_invalid(error,
                           "-numa '%s': the distance of a node to itself must "
                           "be 10",
                           text);
  if (numa->dist == NULL)
    numa->dist = g_malloc0(sizeof(guint[QP_MAX_NODES][QP_MAX_NODES]));
  numa->dist[src][dst] = (guint)val;
  numa->has_dist = TRUE;
  return TRUE;
}

/* The memory of the nodes: given with mem= on every node (old machine
 * types) or memdev= on some, adding up to -m. */
static gboolean
numa_memory(QpQemuArgs *a, Numa *numa, GError **error)
{
  guint n = numa->n;
  gboolean any_mem = FALSE, any_memdev = FALSE, sizes_known = TRUE;
  guint64 total = 0;

  for (guint i = 0; i < n; i++) {
    const NumaNode *nd = &numa->nodes[i];
    any_mem |= nd->arg.legacy_mem;
    any_memdev |= nd->memdev != NULL;
    if (nd->memdev != NULL && nd->arg.mem_bytes == 0)
      sizes_known = FALSE;
    total += nd->arg.mem_bytes;
  }
  if (any_mem && any_memdev)
    return qp_args_invalid(
        error, "-numa: mem= and memdev= are mixed: give every node "
               "memdev= (or, on old machine types, every node mem=)");
  if (any_memdev && a->machine_memdev != NULL)
    return qp_args_invalid(
        error,
        "-machine memory-backend=%s and -numa node,memdev= exclude "
        "each other: give the memory of each node with memdev=",
        a->machine_memdev);
  if ((any_mem || any_memdev) && sizes_known && total != a->ram_bytes)
    return qp_args_invalid(
        error,
        "-numa: the memory of the nodes adds up to %" G_GUINT64_FORMAT
        " MiB, but the RAM size (-m) is %" G_GUINT64_FORMAT " MiB: "
        "they must be equal",
        qp_bytes_to_mib(total), qp_bytes_to_mib(a->ram_bytes));
  if (any_mem || any_memdev)
    return TRUE;
  /* No node has memory: QEMU 7.2 refuses that on every x86 machine type
   * ("total memory for NUMA nodes (0x0) should equal RAM size"), with or
   * without -machine memory-backend; the split of -m among the nodes it
   * once made is gone since 5.1. */
  return qp_args_invalid(
      error,
      "-numa: the memory of the nodes adds up to 0 MiB (no node has "
      "memdev= or mem=), but the RAM size (-m) is %" G_GUINT64_FORMAT
      " MiB: they must be equal",
      qp_bytes_to_mib(a->ram_bytes));
}

/* The vCPUs no node names: on node 0 when some are named (QEMU 7.2 warns:
 * a note), else each socket on a node in turn. */
static void
numa_unnamed_cpus(QpQemuArgs *a, Numa *numa)
{
  const QpRequest *r = a->req;
  gboolean any_cpu = FALSE;
  g_autoptr(GString) missing = g_string_new(NULL);

  for (guint c = 0; c < r->maxcpus; c++)
    any_cpu |= numa->cpu_node[c] >= 0;
  for (guint c = 0; c < r->maxcpus; c++) {
    if (numa->cpu_node[c] >= 0)
      continue;
    if (any_cpu) {
      numa->cpu_node[c] = 0;
      g_string_append_printf(missing, "%s%u", missing->len ? "," : "", c);
    } else {
      numa->cpu_node[c] = (int)(qp_smp_topo_ids(r, c).socket % numa->n);
    }
  }
  if (missing->len)
    g_ptr_array_add(a->notes,
                    g_strdup_printf("vCPUs %s are in no -numa node: QEMU puts "
                                    "them on node 0",
                                    missing->str));
}

/* The distance matrix of -numa dist into R: one direction given stands for
 * both unless some pair is asymmetric, then every one must be given. */
static gboolean
numa_distances(const Numa *numa, QpRequest *r, GError **error)
{
  guint n = numa->n;
  gboolean asym = FALSE;

  for (guint s = 0; s < n; s++)
    for (guint d = s; d < n; d++) {
      if (s != d && numa->dist[s][d] == 0 && numa->dist[d][s] == 0)
        return qp_args_invalid(error,
                               "-numa dist: the distance between nodes %u "
                               "and %u is missing: give at least one "
                               "direction",
                               s, d);
      if (numa->dist[s][d] && numa->dist[d][s] &&
          numa->dist[s][d] != numa->dist[d][s])
        asym = TRUE;
    }
  for (guint s = 0; asym && s < n; s++)
    for (guint d = 0; d < n; d++)
      if (s != d && numa->dist[s][d] == 0)
        return qp_args_invalid(error,
                               "-numa dist: distances are asymmetric, so both "
                               "directions are needed, and %u to %u is missing",
                               s, d);
  r->gdistance = g_new0(guint, n * n);
  for (guint s = 0; s < n; s++)
    for (guint d = 0; d < n; d++)
      r->gdistance[s * n + d] = s == d             ? 10
                                : numa->dist[s][d] ? numa->dist[s][d]
                                                   : numa->dist[d][s];
  return TRUE;
}

/* The guest nodes of the request, and where each is written. */
static void
numa_to_request(QpQemuArgs *a, const Numa *numa)
{
  QpRequest *r = a->req;
  guint n = numa->n;

  r->n_gnodes = n;
  r->gnodes = g_new0(QpGuestNode, n);
  a->numa_nodes = g_new0(QpNumaNodeArg, n);
  for (guint i = 0; i < n; i++) {
    const NumaNode *nd = &numa->nodes[i];
    QpGuestNode *g = &r->gnodes[i];
    g->id = (int)i;
    g->vcpus = hwloc_bitmap_alloc();
    for (guint c = 0; c < r->maxcpus; c++)
      if (numa->cpu_node[c] == (int)i)
        hwloc_bitmap_set(g->vcpus, c);
    g->mem_mib = qp_bytes_to_mib(nd->arg.mem_bytes);
    g->memdev = g_strdup(nd->memdev);
    if (nd->memdev != NULL) {
      const QpBackend *b = qp_backend_find(a, nd->memdev);
      g->host_nodes = b->host_nodes ? hwloc_bitmap_dup(b->host_nodes) : NULL;
      g->policy = b->policy;
    }
    a->numa_nodes[i] = nd->arg;
  }
}

/* The nodes once every -numa is read: checked and completed as QEMU 7.2's
 * numa_complete_configuration() does. */
static gboolean
numa_finish(QpQemuArgs *a, Numa *numa, GError **error)
{
  if (numa->n == 0)
    return TRUE;
  for (guint i = 0; i < numa->n; i++)
    if (!numa->nodes[i].present)
      return qp_args_invalid(error,
                             "-numa: node %u is missing: node ids must run "
                             "from 0 to %u without gaps",
                             i, numa->n - 1);
  if (!numa_memory(a, numa, error))
    return FALSE;
  numa_unnamed_cpus(a, numa);
  if (numa->has_dist && !numa_distances(numa, a->req, error))
    return FALSE;
  numa_to_request(a, numa);
  return TRUE;
}

gboolean
qp_numa_read(QpQemuArgs *a, GArray *opts, GError **error)
{
  g_autofree Numa *numa = g_new0(Numa, 1);
  numa->cpu_node = g_new(int, a->req->maxcpus);
  for (guint c = 0; c < a->req->maxcpus; c++)
    numa->cpu_node[c] = -1;
  gboolean ok = TRUE;
  for (guint i = 0; ok && i < opts->len; i++) {
    const QpOpt *o = &g_array_index(opts, QpOpt, i);
    if (!qp_opt_is(o, "numa"))
      continue;
    g_autoptr(GArray) kv = qp_kv_parse(o->value, "type");
    const char *type = qp_kv_get(kv, "type");
    if (type == NULL)
      type = "node";
    if (strcmp(type, "node") == 0)
      ok = numa_node(a, numa, o, kv, error);
    else if (strcmp(type, "cpu") == 0)
      ok = numa_cpu(a, numa, o, kv, error);
    else if (strcmp(type, "dist") == 0)
      ok = numa_dist(numa, o->value, kv, error);
    else if (strcmp(type, "hmat-lb") != 0 && strcmp(type, "hmat-cache") != 0)
      ok = qp_args_invalid(
          error,
          "-numa '%s': unknown type '%s': expected node, cpu, dist, "
          "hmat-lb or hmat-cache",
          o->value, type);
  }
  if (ok)
    ok = numa_finish(a, numa, error);
  numa_clear(numa);
  return ok;
}
