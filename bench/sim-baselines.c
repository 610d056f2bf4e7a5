/* Baseline placers for the placement simulator: see sim-baselines.h. */
#include "bench/sim-baselines.h"

#include <string.h>

const char *
sim_baseline_name(SimBaseline b)
{
  switch (b) {
  case SIM_FIRST_FIT:
    return "first-fit";
  case SIM_INCUS:
    return "incus";
  case SIM_XEN:
    return "xen-libxl";
  case SIM_PROXMOX:
    return "proxmox-balanced";
  default:
    return "?";
  }
}

SimState *
sim_state_new(guint n)
{
  SimState *s = g_new0(SimState, 1);
  s->n = n;
  s->id = g_new0(int, MAX(n, 1));
  s->total_mib = g_new0(guint64, MAX(n, 1));
  s->free_mib = g_new0(guint64, MAX(n, 1));
  s->cpus = g_new0(guint, MAX(n, 1));
  s->vcpus = g_new0(guint, MAX(n, 1));
  s->instances = g_new0(guint, MAX(n, 1));
  for (guint i = 0; i < n; i++)
    s->id[i] = (int)i;
  return s;
}

SimState *
sim_state_copy(const SimState *s)
{
  SimState *c = sim_state_new(s->n);
  memcpy(c->id, s->id, s->n * sizeof(int));
  memcpy(c->total_mib, s->total_mib, s->n * sizeof(guint64));
  memcpy(c->free_mib, s->free_mib, s->n * sizeof(guint64));
  memcpy(c->cpus, s->cpus, s->n * sizeof(guint));
  memcpy(c->vcpus, s->vcpus, s->n * sizeof(guint));
  memcpy(c->instances, s->instances, s->n * sizeof(guint));
  return c;
}

void
sim_state_free(SimState *s)
{
  if (s == NULL)
    return;
  g_free(s->id);
  g_free(s->total_mib);
  g_free(s->free_mib);
  g_free(s->cpus);
  g_free(s->vcpus);
  g_free(s->instances);
  g_free(s);
}

static void
sort_nodes(guint *nodes, guint k)
{
  for (guint x = 1; x < k; x++)
    for (guint y = x; y > 0 && nodes[y - 1] > nodes[y]; y--) {
      guint t = nodes[y];
      nodes[y] = nodes[y - 1];
      nodes[y - 1] = t;
    }
}

static gboolean
holds(const SimState *s, const SimVm *vm, const guint *nodes, guint k)
{
  guint64 mem = 0;
  guint cpus = 0;
  for (guint j = 0; j < k; j++) {
    mem += s->free_mib[nodes[j]];
    cpus += s->cpus[nodes[j]];
  }
  return mem >= vm->mem_mib && cpus >= vm->vcpus;
}

/* Takes nodes in the order ORDER until they hold VM. */
static gboolean
take_in_order(const SimState *s, const SimVm *vm, const guint *order,
              guint *nodes, guint *k)
{
  guint64 mem = 0;
  guint cpus = 0;
  *k = 0;
  for (guint x = 0; x < s->n; x++) {
    guint i = order[x];
    /* A node adds nothing when it has no memory left and the VM has all
     * the CPUs it needs, or no CPUs while memory is what is missing. */
    gboolean adds = (mem < vm->mem_mib && s->free_mib[i] > 0) ||
                    (cpus < vm->vcpus && s->cpus[i] > 0);
    if (!adds)
      continue;
    nodes[(*k)++] = i;
    mem += s->free_mib[i];
    cpus += s->cpus[i];
    if (mem >= vm->mem_mib && cpus >= vm->vcpus) {
      sort_nodes(nodes, *k);
      return TRUE;
    }
  }
  *k = 0;
  return FALSE;
}

/* First fit: the lowest node id that holds the VM; else the lowest ids with
 * room until they hold it. */
static gboolean
place_first_fit(const SimState *s, const SimVm *vm, guint *nodes, guint *k)
{
  for (guint i = 0; i < s->n; i++)
    if (holds(s, vm, &i, 1)) {
      nodes[0] = i;
      *k = 1;
      return TRUE;
    }
  g_autofree guint *order = g_new(guint, MAX(s->n, 1));
  for (guint i = 0; i < s->n; i++)
    order[i] = i;
  return take_in_order(s, vm, order, nodes, k);
}

/* Incus balanceNUMANodes: ceil(vcpus / cpus-per-node) nodes with the fewest
 * instances (lowest id on ties). Instances are counted, not memory: when the
 * chosen nodes cannot hold the memory (bound there, the guest would be
 * OOM-killed) the VM is refused. */
static gboolean
place_incus(const SimState *s, const SimVm *vm, guint *nodes, guint *k)
{
  guint total = 0;
  for (guint i = 0; i < s->n; i++)
    total += s->cpus[i];
  guint cpn = MAX(total / MAX(s->n, 1), 1);
  guint want = MAX((vm->vcpus + cpn - 1) / cpn, 1);
  if (want > s->n)
    return FALSE;
  g_autofree gboolean *used = g_new0(gboolean, MAX(s->n, 1));
  for (guint j = 0; j < want; j++) {
    int best = -1;
    for (guint i = 0; i < s->n; i++)
      if (!used[i] && (best < 0 || s->instances[i] < s->instances[best]))
        best = (int)i;
    used[best] = TRUE;
    nodes[j] = (guint)best;
  }
  *k = want;
  sort_nodes(nodes, *k);
  return holds(s, vm, nodes, *k);
}

/* libxl__get_numa_candidate: the smallest number of nodes whose free memory
 * and CPUs hold the VM; among those, fewer vCPUs already there, then more
 * free memory; the first combination (lowest ids) on a tie. */
static gboolean
place_xen(const SimState *s, const SimVm *vm, guint *nodes, guint *k)
{
  guint n = s->n;
  g_autofree guint *comb = g_new(guint, MAX(n, 1));
  for (guint size = 1; size <= n; size++) {
    gboolean found = FALSE;
    guint best_vcpus = 0;
    guint64 best_free = 0;
    for (guint j = 0; j < size; j++)
      comb[j] = j;
    for (;;) {
      if (holds(s, vm, comb, size)) {
        guint vc = 0;
        guint64 fr = 0;
        for (guint j = 0; j < size; j++) {
          vc += s->vcpus[comb[j]];
          fr += s->free_mib[comb[j]];
        }
        if (!found || vc < best_vcpus || (vc == best_vcpus && fr > best_free)) {
          found = TRUE;
          best_vcpus = vc;
          best_free = fr;
          memcpy(nodes, comb, size * sizeof(guint));
        }
      }
      /* Next combination in lexicographic order. */
      int j = (int)size - 1;
      while (j >= 0 && comb[j] == n - size + (guint)j)
        j--;
      if (j < 0)
        break;
      comb[j]++;
      for (guint x = (guint)j + 1; x < size; x++)
        comb[x] = comb[x - 1] + 1;
    }
    if (found) {
      *k = size;
      return TRUE;
    }
  }
  return FALSE;
}

/* Proxmox RFC balanced: the node with the most uncommitted memory; a VM it
 * cannot hold takes the next ones by uncommitted memory. */
static gboolean
place_proxmox(const SimState *s, const SimVm *vm, guint *nodes, guint *k)
{
  g_autofree guint *order = g_new(guint, MAX(s->n, 1));
  for (guint i = 0; i < s->n; i++)
    order[i] = i;
  for (guint x = 1; x < s->n; x++) /* stable: lowest id first on ties */
    for (guint y = x;
         y > 0 && s->free_mib[order[y - 1]] < s->free_mib[order[y]]; y--) {
      guint t = order[y];
      order[y] = order[y - 1];
      order[y - 1] = t;
    }
  return take_in_order(s, vm, order, nodes, k);
}

gboolean
sim_baseline_place(const SimState *s, const SimVm *vm, SimBaseline b,
                   guint *nodes, guint *k)
{
  *k = 0;
  switch (b) {
  case SIM_FIRST_FIT:
    return place_first_fit(s, vm, nodes, k);
  case SIM_INCUS:
    return place_incus(s, vm, nodes, k);
  case SIM_XEN:
    return place_xen(s, vm, nodes, k);
  case SIM_PROXMOX:
    return place_proxmox(s, vm, nodes, k);
  default:
    return FALSE;
  }
}

void
sim_split(const SimState *s, const SimVm *vm, const guint *nodes, guint k,
          guint64 *amounts)
{
  guint64 need = vm->mem_mib, left = need;
  if (k == 0)
    return;
  for (guint j = 0; j < k; j++) {
    guint64 want = need / k + (j == 0 ? need % k : 0);
    amounts[j] = MIN(want, s->free_mib[nodes[j]]);
    left -= amounts[j];
  }
  for (guint j = 0; j < k && left > 0; j++) {
    guint64 take = MIN(left, s->free_mib[nodes[j]] - amounts[j]);
    amounts[j] += take;
    left -= take;
  }
}

void
sim_commit(SimState *s, const SimVm *vm, const guint *nodes, guint k,
           const guint64 *amounts)
{
  for (guint j = 0; j < k; j++) {
    guint i = nodes[j];
    s->free_mib[i] -= MIN(amounts[j], s->free_mib[i]);
    s->vcpus[i] += vm->vcpus;
    s->instances[i]++;
  }
}

void
sim_release(SimState *s, const SimVm *vm, const guint *nodes, guint k,
            const guint64 *amounts)
{
  for (guint j = 0; j < k; j++) {
    guint i = nodes[j];
    s->free_mib[i] = MIN(s->free_mib[i] + amounts[j], s->total_mib[i]);
    s->vcpus[i] -= MIN(vm->vcpus, s->vcpus[i]);
    s->instances[i] -= MIN(1, s->instances[i]);
  }
}
