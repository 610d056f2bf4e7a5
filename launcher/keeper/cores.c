/* Cores the keeper claims while the VM runs: one for each vCPU plugged
 * into a one-to-one VM (the first of the plan's spare cores that no VM
 * holds then), given back when it is unplugged; and the planned core of a
 * vCPU reset after the caller had it elsewhere, claimed again if no VM
 * took it meanwhile. Each change is an adjustment of the VM's held claim
 * in the ledger. */
#include "launcher/keeper/state.h"

#include "launcher/log.h"

typedef struct {
  GPtrArray *candidates; /* of hwloc_bitmap_t: cores in order of preference */
  hwloc_bitmap_t core;   /* out: the core claimed */
} TakeCore;

/* Ledger edit: adds to the claim the first candidate core that no VM holds
 * (the claim itself included). */
static gboolean
take_free_core(QpClaim *claim, const QpClaims *claims, gpointer data,
               GError **error)
{
  TakeCore *t = data;
  g_auto(hwloc_bitmap_t) taken = hwloc_bitmap_dup(claim->dedicated);
  for (guint i = 0; i < claims->claims->len; i++) {
    const QpClaim *c = g_ptr_array_index(claims->claims, i);
    if (g_strcmp0(c->id, claim->id) != 0)
      hwloc_bitmap_or(taken, taken, c->dedicated);
  }
  for (guint i = 0; i < t->candidates->len; i++) {
    hwloc_const_bitmap_t c = g_ptr_array_index(t->candidates, i);
    if (!hwloc_bitmap_intersects(c, taken)) {
      t->core = hwloc_bitmap_dup(c);
      hwloc_bitmap_or(claim->dedicated, claim->dedicated, c);
      return TRUE;
    }
  }
  g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT,
              "no core is free");
  return FALSE;
}

/* Claim edit: gives back the CPUs DATA. */
static gboolean
drop_cpus(QpClaim *claim, const QpClaims *claims, gpointer data, GError **error)
{
  hwloc_bitmap_andnot(claim->dedicated, claim->dedicated, data);
  return TRUE;
}

/* Claims the first of CANDIDATES that no VM holds now in the ledger; NULL
 * when there is none (QP_TOPOLOGY_ERROR_NOFIT) or the ledger failed. */
static hwloc_bitmap_t
claim_free_core(Keeper *k, GPtrArray *candidates, GError **error)
{
  TakeCore t = {candidates, NULL};
  if (qp_held_claim_adjust(k->claim, take_free_core, &t, error))
    return t.core;
  if (t.core != NULL) /* the write failed: the core is not ours */
    qp_held_claim_amend(k->claim, drop_cpus, t.core);
  g_clear_pointer(&t.core, hwloc_bitmap_free);
  return NULL;
}

/* Claims a free core for hot-plugged vCPU INDEX (one-to-one) in the
 * ledger: the first of the plan's spare cores that no VM holds now. */
static hwloc_bitmap_t
claim_core(Keeper *k, int index, GError **error)
{
  g_autoptr(GError) local = NULL;
  hwloc_bitmap_t core = claim_free_core(k, k->plan->hotplug_cores, &local);
  if (core != NULL)
    return core;
  if (!g_error_matches(local, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT)) {
    g_propagate_error(error, g_steal_pointer(&local));
    return NULL;
  }
  g_autofree char *mine =
      qp_list_format(qp_held_claim_get(k->claim)->dedicated);
  g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
              "vCPU %d was plugged but no core is free for it: it shares "
              "the VM's cores %s",
              index, mine);
  return NULL;
}

gboolean
qp_keeper_release_unplugged(Keeper *k, GArray *vcpus)
{
  if (k->plugged == NULL || g_hash_table_size(k->plugged) == 0)
    return FALSE;
  gboolean changed = FALSE;
  g_autoptr(GList) keys = g_hash_table_get_keys(k->plugged);
  for (GList *l = keys; l != NULL; l = l->next) {
    int index = GPOINTER_TO_INT(l->data);
    gboolean present = FALSE;
    for (guint i = 0; i < vcpus->len && !present; i++)
      present = g_array_index(vcpus, QpVcpu, i).cpu_index == index;
    if (present)
      continue;
    hwloc_const_bitmap_t core = g_hash_table_lookup(k->plugged, l->data);
    qp_held_claim_amend(k->claim, drop_cpus, (gpointer)core);
    g_autofree char *list = qp_list_format(core);
    qp_keeper_log(k, 1, "vCPU %d was unplugged: core %s released", index, list);
    g_hash_table_remove(k->plugged, l->data);
    g_hash_table_remove(k->plugged_pu, l->data);
    g_hash_table_remove(k->warned, l->data);
    changed = TRUE;
  }
  return changed;
}

hwloc_bitmap_t
qp_keeper_plugged_cores(const Keeper *k)
{
  hwloc_bitmap_t all = hwloc_bitmap_alloc();
  GHashTableIter it;
  gpointer core;
  g_hash_table_iter_init(&it, k->plugged);
  while (g_hash_table_iter_next(&it, NULL, &core))
    hwloc_bitmap_or(all, all, core);
  return all;
}

/* Claim edit: gives back the cores of the plugged vCPUs of keeper DATA,
 * but not the CPUs its plan dedicates. */
static gboolean
drop_plugged(QpClaim *claim, const QpClaims *claims, gpointer data,
             GError **error)
{
  const Keeper *k = data;
  g_auto(hwloc_bitmap_t) plugged = qp_keeper_plugged_cores(k);
  hwloc_bitmap_andnot(claim->dedicated, claim->dedicated, plugged);
  hwloc_bitmap_or(claim->dedicated, claim->dedicated, k->plan->dedicated);
  return TRUE;
}

void
qp_keeper_forget_plugged(Keeper *k)
{
  qp_held_claim_amend(k->claim, drop_plugged, k);
  g_hash_table_remove_all(k->plugged);
  g_hash_table_remove_all(k->plugged_pu);
  g_hash_table_remove_all(k->warned);
  g_hash_table_remove_all(k->fallback);
}

hwloc_const_bitmap_t
qp_keeper_vcpu_target(Keeper *k, int index)
{
  const QpPlan *plan = k->plan;
  hwloc_const_bitmap_t fallback =
      g_hash_table_lookup(k->fallback, GINT_TO_POINTER(index));
  if (fallback != NULL)
    return fallback;
  if (plan->hotplug_cores == NULL || qp_plan_vcpu_boots(plan, (guint)index))
    return plan->vcpu_cpus[index];
  hwloc_bitmap_t core = g_hash_table_lookup(k->plugged, GINT_TO_POINTER(index));
  if (core == NULL &&
      !g_hash_table_contains(k->warned, GINT_TO_POINTER(index))) {
    g_autoptr(GError) error = NULL;
    core = claim_core(k, index, &error);
    if (core != NULL) {
      g_hash_table_insert(k->plugged, GINT_TO_POINTER(index), core);
      g_autofree char *list = qp_list_format(core);
      qp_keeper_log(k, 1, "vCPU %d was plugged: core %s claimed", index, list);
    } else {
      qp_warning("%s", error->message);
      g_hash_table_add(k->warned, GINT_TO_POINTER(index));
    }
  }
  if (core == NULL)
    return plan->vcpu_cpus[index];
  /* The whole core is the VM's; the vCPU runs on its first PU, as the boot
   * vCPUs do, so that a sibling is never shared by two vCPUs. */
  hwloc_bitmap_t pu =
      g_hash_table_lookup(k->plugged_pu, GINT_TO_POINTER(index));
  if (pu == NULL) {
    pu = hwloc_bitmap_alloc();
    hwloc_bitmap_set(pu, (unsigned)hwloc_bitmap_first(core));
    g_hash_table_insert(k->plugged_pu, GINT_TO_POINTER(index), pu);
  }
  return pu;
}

hwloc_const_bitmap_t
qp_keeper_vcpu_core(Keeper *k, guint index)
{
  hwloc_const_bitmap_t core =
      g_hash_table_lookup(k->plugged, GINT_TO_POINTER(index));
  if (core == NULL && index < k->host->n_vcpus)
    core = k->host->vcpu_core[index];
  return core;
}

hwloc_const_bitmap_t
qp_keeper_reclaim_core(Keeper *k, guint index, hwloc_const_bitmap_t want)
{
  hwloc_const_bitmap_t core = qp_keeper_vcpu_core(k, index);
  const QpClaim *own = qp_held_claim_get(k->claim);
  if (core == NULL || hwloc_bitmap_isincluded(core, own->dedicated))
    return want;
  g_autoptr(GPtrArray) one = g_ptr_array_new();
  g_ptr_array_add(one, (gpointer)core);
  g_autoptr(GError) error = NULL;
  g_auto(hwloc_bitmap_t) got = claim_free_core(k, one, &error);
  g_autofree char *list = qp_list_format(core);
  if (got != NULL)
    return want;
  if (!g_error_matches(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT)) {
    qp_error("keeper: %s", error->message);
    return want;
  }
  if (hwloc_bitmap_iszero(own->dedicated))
    return want;
  g_autofree char *mine = qp_list_format(own->dedicated);
  qp_warning("vCPU %u was reset, but another VM took its core %s meanwhile: "
             "it shares the VM's cores %s",
             index, list, mine);
  hwloc_bitmap_t cores = hwloc_bitmap_dup(own->dedicated);
  g_hash_table_insert(k->fallback, GINT_TO_POINTER(index), cores);
  return cores;
}
