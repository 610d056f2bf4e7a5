/* `qemu-pin status --metrics` (see status.h): one HELP and TYPE line per
 * metric family, then its samples; every value a gauge, in bytes, pages
 * or CPUs as its name says. Memory, hugepages and CPUs per node come from
 * capacity.c, as `qemu-pin status` shows them. */
#include "topology/status/status.h"

#include "topology/plan/capacity.h"
#include "topology/status/usage.h"

#define MIB ((guint64)1024 * 1024)

/* A metric family being written: its samples follow its HELP and TYPE. */
static void
family(GString *s, const char *name, const char *help)
{
  g_string_append_printf(s, "# HELP qemu_pin_%s %s\n# TYPE qemu_pin_%s gauge\n",
                         name, help, name);
}

/* VALUE escaped for a label: backslash, double quote and newline. */
static char *
label_value(const char *value)
{
  GString *s = g_string_new(NULL);
  for (const char *p = value ? value : ""; *p; p++) {
    if (*p == '\\' || *p == '"')
      g_string_append_c(s, '\\');
    if (*p == '\n')
      g_string_append(s, "\\n");
    else
      g_string_append_c(s, *p);
  }
  return g_string_free(s, FALSE);
}

static void
sample(GString *s, const char *name, const char *labels, guint64 value)
{
  g_string_append_printf(s, "qemu_pin_%s{%s} %" G_GUINT64_FORMAT "\n", name,
                         labels, value);
}

/* ---- Host nodes ---------------------------------------------------------- */

typedef enum {
  MEM_TOTAL,
  MEM_RESERVED,
  MEM_CLAIMED,
  MEM_FREE,
  MEM_HUGEPAGE_POOLS,
  MEM_OUTSIDE,
  MEM_OUTSTANDING,
  MEM_AVAILABLE,
} MemField;

static const struct {
  const char *name, *help;
} mem_families[] = {
    {"node_memory_total_bytes", "Memory of the host NUMA node."},
    {"node_memory_reserved_bytes", "Memory of the node kept for the host."},
    {"node_memory_claimed_bytes",
     "Ordinary memory of the node claimed by VMs in the ledger."},
    {"node_memory_free_bytes",
     "Ordinary memory of the node no claim holds, after the host reserve "
     "and hugepage pools (0 when an unreadable record holds the node)."},
    {"node_memory_hugepage_pools_bytes",
     "Memory of the node in hugepage pools (not for ordinary memory)."},
    {"node_memory_outside_claims_bytes",
     "Ordinary memory of the node in use by anything that holds no claim "
     "(0 on a host whose memory is not measured)."},
    {"node_memory_outstanding_bytes",
     "Ordinary memory of the node claimed but not yet resident in its VM."},
    {"node_memory_available_bytes",
     "Ordinary memory a new claim can take on the node now: the kernel's "
     "free and reclaimable memory less outstanding claims, at most the "
     "free memory above."},
};

static guint64
mem_field(const QpNodeCapacity *cap, MemField f)
{
  switch (f) {
  case MEM_TOTAL:
    return cap->total_mib;
  case MEM_RESERVED:
    return cap->reserve_mib;
  case MEM_CLAIMED:
    return cap->claimed_mib;
  case MEM_FREE:
    return cap->uncommitted_mib;
  case MEM_HUGEPAGE_POOLS:
    return cap->hugepage_mib;
  case MEM_OUTSIDE:
    return cap->outside_mib;
  case MEM_OUTSTANDING:
    return cap->measured ? cap->outstanding_mib : cap->claimed_mib;
  case MEM_AVAILABLE:
    return cap->uncommitted_mib;
  }
  return 0;
}

/* The capacity of every host node, counted once for all the families. */
static QpNodeCapacity *
capacities(const QpHost *host, const QpClaims *claims,
           const QpPlacementOptions *opts)
{
  QpNodeCapacity *caps = g_new0(QpNodeCapacity, MAX(host->n_nodes, 1));
  for (guint i = 0; i < host->n_nodes; i++)
    qp_node_capacity(host, claims, opts, i, &caps[i]);
  return caps;
}

static void
capacities_free(QpNodeCapacity *caps, guint n)
{
  for (guint i = 0; i < n; i++)
    qp_node_capacity_clear(&caps[i]);
  g_free(caps);
}

static void
node_memory(GString *s, const QpNodeCapacity *caps, guint n)
{
  for (guint f = 0; f < G_N_ELEMENTS(mem_families); f++) {
    family(s, mem_families[f].name, mem_families[f].help);
    for (guint i = 0; i < n; i++) {
      g_autofree char *l = g_strdup_printf("node=\"%d\"", caps[i].node);
      sample(s, mem_families[f].name, l, mem_field(&caps[i], f) * MIB);
    }
  }
}

static void
node_hugepages(GString *s, const QpHost *host, const QpClaims *claims)
{
  static const char *const names[] = {"node_hugepages_total_pages",
                                      "node_hugepages_free_pages",
                                      "node_hugepages_claimed_pages"};
  static const char *const helps[] = {
      "Hugepages in the node's pool of this page size.",
      "Hugepages of the pool free now.",
      "Hugepages of the pool claimed by VMs in the ledger."};
  for (guint f = 0; f < G_N_ELEMENTS(names); f++) {
    family(s, names[f], helps[f]);
    for (guint i = 0; i < host->n_nodes; i++) {
      g_autoptr(GArray) sizes = qp_node_page_sizes(&host->nodes[i], claims);
      for (guint j = 0; j < sizes->len; j++) {
        guint64 kib = g_array_index(sizes, guint64, j);
        QpNodePages p;
        qp_node_pages(host, claims, i, kib, &p);
        guint64 v = f == 0 ? p.total : f == 1 ? p.free : p.claimed;
        g_autofree char *l = g_strdup_printf(
            "node=\"%d\",page_size_bytes=\"%" G_GUINT64_FORMAT "\"",
            host->nodes[i].id, kib * 1024);
        sample(s, names[f], l, v);
      }
    }
  }
}

static void
node_cpus(GString *s, const QpNodeCapacity *caps, guint n)
{
  static const char *const names[] = {"node_dedicated_cpus", "node_shared_cpus",
                                      "node_shared_vcpus", "node_blocked"};
  static const char *const helps[] = {
      "CPUs of the node dedicated to one vCPU each.",
      "Usable CPUs of the node no VM has dedicated: where shared vCPUs run.",
      "Shared vCPUs the ledger puts on the node.",
      "1 when an unreadable ledger record holds the node whole."};
  for (guint f = 0; f < G_N_ELEMENTS(names); f++) {
    family(s, names[f], helps[f]);
    for (guint i = 0; i < n; i++) {
      const QpNodeCapacity *cap = &caps[i];
      int w = hwloc_bitmap_weight(cap->dedicated);
      guint64 v = f == 0   ? (guint64)MAX(w, 0)
                  : f == 1 ? cap->shared_cpus
                  : f == 2 ? cap->shared_vcpus
                           : (guint64)cap->blocked;
      g_autofree char *l = g_strdup_printf("node=\"%d\"", cap->node);
      sample(s, names[f], l, v);
    }
  }
}

/* ---- VMs ------------------------------------------------------------------
 */

/* The labels of VM C (and of host node NODE unless it is -1). */
static char *
vm_labels(const QpClaim *c, int node)
{
  g_autofree char *name = label_value(c->name);
  g_autofree char *uuid = label_value(c->uuid);
  g_autofree char *id = label_value(c->id);
  g_autofree char *on =
      node >= 0 ? g_strdup_printf(",node=\"%d\"", node) : g_strdup("");
  return g_strdup_printf("name=\"%s\",uuid=\"%s\",claim=\"%s\",mode=\"%s\"%s",
                         name, uuid, id, qp_mode_name(c->mode), on);
}

static void
vm_best_effort(GString *s, const QpClaims *claims)
{
  family(s, "vm_best_effort",
         "1 when mode auto placed the VM best effort (its vCPUs share CPUs "
         "beyond what its mode promises), else 0.");
  for (guint i = 0; i < claims->claims->len; i++) {
    const QpClaim *c = claims->claims->pdata[i];
    g_autofree char *l = vm_labels(c, -1);
    sample(s, "vm_best_effort", l, (guint64)c->best_effort);
  }
}

/* Dedicated CPUs of C on host node N. */
static guint64
vm_dedicated_on(const QpClaim *c, const QpNode *n)
{
  if (n->all_cpus == NULL)
    return 0;
  g_auto(hwloc_bitmap_t) on = hwloc_bitmap_alloc();
  hwloc_bitmap_and(on, c->dedicated, n->all_cpus);
  int w = hwloc_bitmap_weight(on);
  return w > 0 ? (guint64)w : 0;
}

static void
vm_memory(GString *s, const QpClaims *claims)
{
  family(s, "vm_memory_bytes", "Ordinary memory a VM claims on a host node.");
  for (guint i = 0; i < claims->claims->len; i++) {
    const QpClaim *c = claims->claims->pdata[i];
    for (guint j = 0; j < c->mem->len; j++) {
      const QpNodeAmount *a = &g_array_index(c->mem, QpNodeAmount, j);
      g_autofree char *l = vm_labels(c, a->node);
      sample(s, "vm_memory_bytes", l, a->mib * MIB);
    }
  }
  family(s, "vm_hugepages_bytes",
         "Memory in hugepages of one size a VM claims on a host node.");
  for (guint i = 0; i < claims->claims->len; i++) {
    const QpClaim *c = claims->claims->pdata[i];
    for (guint j = 0; j < c->huge->len; j++) {
      const QpHugeClaim *h = &g_array_index(c->huge, QpHugeClaim, j);
      g_autofree char *l = vm_labels(c, h->node);
      g_autofree char *ls =
          g_strdup_printf("%s,page_size_bytes=\"%" G_GUINT64_FORMAT "\"", l,
                          h->page_kib * 1024);
      sample(s, "vm_hugepages_bytes", ls, h->pages * h->page_kib * 1024);
    }
  }
}

static void
vm_cpus(GString *s, const QpHost *host, const QpClaims *claims)
{
  family(s, "vm_dedicated_cpus",
         "Host CPUs of a node dedicated to a VM's vCPUs.");
  for (guint i = 0; i < claims->claims->len; i++) {
    const QpClaim *c = claims->claims->pdata[i];
    for (guint k = 0; k < host->n_nodes; k++) {
      guint64 n = vm_dedicated_on(c, &host->nodes[k]);
      g_autofree char *l = vm_labels(c, host->nodes[k].id);
      if (n > 0)
        sample(s, "vm_dedicated_cpus", l, n);
    }
  }
  family(s, "vm_dedicated_cpus_shared",
         "Dedicated CPUs of a VM on a node that other VMs' shared vCPUs "
         "float on too.");
  for (guint i = 0; i < claims->claims->len; i++) {
    const QpClaim *c = claims->claims->pdata[i];
    g_autoptr(GArray) sharers = qp_status_sharers(host, claims, i);
    g_auto(hwloc_bitmap_t) shared = hwloc_bitmap_alloc();
    for (guint j = 0; j < sharers->len; j++)
      hwloc_bitmap_or(shared, shared, g_array_index(sharers, QpSharer, j).cpus);
    for (guint k = 0; k < host->n_nodes; k++) {
      const QpNode *n = &host->nodes[k];
      if (vm_dedicated_on(c, n) == 0)
        continue;
      g_auto(hwloc_bitmap_t) on = hwloc_bitmap_alloc();
      hwloc_bitmap_and(on, shared, n->all_cpus); /* vm_dedicated_on() > 0 */
      int w = hwloc_bitmap_weight(on);
      g_autofree char *l = vm_labels(c, n->id);
      sample(s, "vm_dedicated_cpus_shared", l, (guint64)MAX(w, 0));
    }
  }
  family(s, "vm_shared_vcpus",
         "vCPUs of a VM that share a host node's CPUs with other VMs.");
  for (guint i = 0; i < claims->claims->len; i++) {
    const QpClaim *c = claims->claims->pdata[i];
    for (guint j = 0; j < c->load->len; j++) {
      const QpNodeLoad *l = &g_array_index(c->load, QpNodeLoad, j);
      g_autofree char *lb = vm_labels(c, l->node);
      sample(s, "vm_shared_vcpus", lb, l->vcpus);
    }
  }
}

char *
qp_status_to_metrics(const QpHost *host, const QpClaims *claims,
                     const QpPlacementOptions *opts)
{
  GString *s = g_string_new(NULL);
  QpNodeCapacity *caps = capacities(host, claims, opts);
  node_memory(s, caps, host->n_nodes);
  node_hugepages(s, host, claims);
  node_cpus(s, caps, host->n_nodes);
  capacities_free(caps, host->n_nodes);
  vm_memory(s, claims);
  vm_cpus(s, host, claims);
  vm_best_effort(s, claims);
  family(s, "ledger_records",
         "Records in the ledger: of running VMs (live), of VMs that are gone "
         "left for their owner or root to remove (stale), unreadable, of a "
         "shared ledger's member that claim more than its VM holds "
         "(ignored).");
  sample(s, "ledger_records", "state=\"live\"", claims->claims->len);
  sample(s, "ledger_records", "state=\"stale\"", claims->n_stale);
  sample(s, "ledger_records", "state=\"unreadable\"", claims->n_unreadable);
  sample(s, "ledger_records", "state=\"ignored\"", claims->ignored->len);
  return g_string_free(s, FALSE);
}
