/* The placement engine: (host, claims, request, options) -> plan.
 *
 * Pure: no I/O, no clock, no globals. Everything below works on the host
 * model and the ledger's contents passed in, so any decision can be replayed
 * from a recorded host and a ledger snapshot.
 *
 * Outline:
 *   1. Node state: usable CPUs (allowed & affinity & --hostnodes - CPUs
 *      dedicated to other VMs), uncommitted memory per memory class
 *      (ordinary memory, and the free hugepages of each size the guest
 *      uses), shared vCPU load of other VMs.
 *   2. CPU kinds: the plan is tried on the CPUs of one kind at a time, most
 *      performant kind first; kinds are mixed only when --affinity forces it.
 *   3. The mode: balanced (fewest close nodes holding memory and CPUs),
 *      numa (each guest node to one host node, least loaded first),
 *      one-to-one (a physical core per vCPU, or SMT sibling pairs for a guest
 *      with threads=2).
 *   4. Derived sets: process, emulator, iothread and startup CPUs, claims.
 *   5. Mode auto never refuses a VM for CPUs: what balanced or numa refused
 *      is placed best-effort.
 *
 * This file is the entry: the mode, the CPU kinds, hot-pluggable vCPUs and
 * best effort. The rest is in topology/plan/:
 *   context.c     the host as the request sees it (1, and the Attempt of 2)
 *   memory.c      claiming the guest's memory: classes, pieces, splits
 *   node-sets.c   the fewest close nodes holding a guest (balanced, and
 *                 one-to-one without vNUMA)
 *   balanced.c, numa.c, one-to-one.c, best-effort.c   the modes (3, 5)
 *   result.c      the plan, and what every mode derives (4)
 *   vnuma.c       the guest topology suggested with --vnuma
 *   phrases.c     the words of reasons and refusals
 *   output.c      JSON (docs/plan-schema.md) and text */
#include "topology/plan/plan.h"

#include "topology/plan/balanced.h"
#include "topology/plan/best-effort.h"
#include "topology/plan/internal.h"
#include "topology/plan/numa.h"
#include "topology/plan/one-to-one.h"
#include "topology/plan/phrases.h"
#include "topology/plan/result.h"
#include "topology/plan/vnuma.h"

static QpPlan *
plan_on(const Ctx *ctx, QpMode mode, hwloc_const_bitmap_t usable,
        const char *kind_note, GError **error)
{
  Attempt a;
  qp_plan_attempt_init(&a, ctx, usable);
  a.kind_note = kind_note;
  QpPlan *plan = qp_plan_new(ctx->n);
  plan->mode = mode;
  gboolean ok = FALSE;
  switch (mode) {
  case QP_MODE_BALANCED:
    ok = qp_plan_balanced(plan, ctx, &a, ctx->n, error);
    break;
  case QP_MODE_NUMA:
    ok = qp_plan_by_gnode(plan, ctx, &a, FALSE, CAP_CPUS, error);
    break;
  case QP_MODE_ONE_TO_ONE:
    ok = qp_plan_o2o(plan, ctx, &a, error);
    break;
  default:
    g_assert_not_reached();
  }
  qp_plan_attempt_clear(&a, ctx->nn);
  if (!ok) {
    g_clear_pointer(&plan, qp_plan_free);
    return NULL;
  }
  /* Every vCPU has a rule (a vCPU left out would be a planner bug: let it
   * float on the process CPUs rather than crash the launcher). */
  for (guint v = 0; v < plan->n_vcpus; v++)
    if (plan->vcpu_cpus[v] == NULL) {
      plan->vcpu_cpus[v] = hwloc_bitmap_dup(plan->process_cpus);
      qp_plan_add_warning(plan,
                          "vCPU %u got no CPU of its own: it floats on the "
                          "process CPUs",
                          ctx->req->slot_of ? ctx->req->slot_of[v] : v);
    }
  return plan;
}

/* Mode none: no placement, QEMU runs where it may. */
static QpPlan *
plan_none(const Ctx *ctx)
{
  QpPlan *plan = qp_plan_new(ctx->n);
  plan->mode = QP_MODE_NONE;
  hwloc_bitmap_t all = hwloc_bitmap_alloc();
  if (ctx->host->allowed != NULL)
    hwloc_bitmap_copy(all, ctx->host->allowed);
  for (guint v = 0; v < ctx->n; v++)
    plan->vcpu_cpus[v] = hwloc_bitmap_dup(all);
  plan->process_cpus = hwloc_bitmap_dup(all);
  plan->emulator_cpus = hwloc_bitmap_dup(all);
  plan->iothread_cpus = hwloc_bitmap_dup(all);
  plan->startup_cpus = all;
  qp_plan_add_reason(plan, "mode none: no placement, QEMU runs where it may");
  return plan;
}

/* The plan on the most performant CPU kind that fits, or NULL with the
 * first kind's error in FIRST. */
static QpPlan *
plan_on_one_kind(const Ctx *ctx, QpMode mode, GError **first)
{
  const QpHost *host = ctx->host;
  for (guint k = host->n_kinds; k-- > 0;) {
    g_auto(hwloc_bitmap_t) kc = qp_host_kind_cpus(host, k);
    hwloc_bitmap_and(kc, kc, ctx->usable);
    if (hwloc_bitmap_iszero(kc))
      continue;
    g_autofree char *note = g_strdup_printf(" of CPU kind %u", k);
    g_autoptr(GError) err = NULL;
    QpPlan *plan = plan_on(ctx, mode, kc, note, &err);
    if (plan != NULL) {
      g_autofree char *l = qp_list_format(kc);
      qp_plan_add_reason(plan,
                         "CPU kind %u (%s): the most performant kind that "
                         "fits, usable CPUs %s",
                         k,
                         host->kind_names != NULL && host->kind_names[k] != NULL
                             ? host->kind_names[k]
                             : "unnamed",
                         l);
      return plan;
    }
    if (*first == NULL)
      *first = g_steal_pointer(&err);
  }
  return NULL;
}

/* On a host with several CPU kinds: the most performant kind that fits;
 * kinds are mixed only when --affinity leaves no single kind that fits. */
static QpPlan *
plan_on_kinds(const Ctx *ctx, QpMode mode, GError **error)
{
  const QpHost *host = ctx->host;
  g_autoptr(GError) first = NULL;
  QpPlan *plan = plan_on_one_kind(ctx, mode, &first);
  if (plan != NULL)
    return plan;
  guint spanned = 0;
  for (guint k = 0; k < host->n_kinds; k++) {
    g_auto(hwloc_bitmap_t) kc = qp_host_kind_cpus(host, k);
    if (hwloc_bitmap_intersects(kc, ctx->usable))
      spanned++;
  }
  gboolean affinity = ctx->opts->affinity != NULL;
  if (affinity && spanned > 1) {
    plan = plan_on(ctx, mode, ctx->usable, "", NULL);
    if (plan != NULL) {
      g_autofree char *l = qp_list_format(ctx->opts->affinity);
      qp_plan_add_warning(plan,
                          "the VM's CPUs straddle CPU kinds: no single kind in "
                          "--affinity %s holds the guest",
                          l);
      return plan;
    }
  }
  if (first == NULL) {
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT,
                "guest needs %u CPUs but no CPU is usable", ctx->n);
    return NULL;
  }
  g_propagate_error(error, g_steal_pointer(&first));
  if (spanned > 1 && !affinity && error != NULL && *error != NULL &&
      !qp_plan_error_is_memory(*error)) {
    char *m = g_strdup_printf("%s (CPUs of one kind only; an "
                              "--affinity spanning kinds allows "
                              "mixing them)",
                              (*error)->message);
    g_free((*error)->message);
    (*error)->message = m;
  }
  return NULL;
}

/* Notes made before the mode ran first, the ledger's own warnings last. */
static void
add_notes(QpPlan *plan, const QpPlan *notes, const QpClaims *claims)
{
  for (guint w = 0; w < notes->warnings->len; w++)
    g_ptr_array_insert(plan->warnings, (gint)w,
                       g_strdup(g_ptr_array_index(notes->warnings, w)));
  if (claims != NULL && claims->warnings != NULL)
    for (guint w = 0; w < claims->warnings->len; w++)
      g_ptr_array_add(plan->warnings,
                      g_strdup(g_ptr_array_index(claims->warnings, w)));
}

/* A plan in MODE (never auto); BEST_EFFORT: mode auto after balanced or
 * numa refused the VM. */
static QpPlan *
plan_in_mode(const Ctx *ctx, QpMode mode, gboolean best_effort, GError **error)
{
  if (mode == QP_MODE_NONE)
    return plan_none(ctx);
  if (best_effort) {
    QpPlan *plan = qp_plan_new(ctx->n);
    plan->mode = mode;
    if (!qp_plan_best_effort(plan, ctx, error))
      g_clear_pointer(&plan, qp_plan_free);
    return plan;
  }
  if (ctx->host->n_kinds <= 1)
    return plan_on(ctx, mode, ctx->usable, "", error);
  return plan_on_kinds(ctx, mode, error);
}

static QpPlan *
plan_compute(const QpHost *host, const QpClaims *claims, const QpRequest *req,
             const QpPlacementOptions *opts, gboolean best_effort,
             GError **error)
{
  g_return_val_if_fail(host != NULL && req != NULL && opts != NULL, NULL);
  Ctx ctx = {0};
  g_autoptr(QpPlan) notes = qp_plan_new(0);
  QpPlan *plan = NULL;
  QpMode mode = opts->mode;
  if (mode == QP_MODE_AUTO)
    mode = req->n_gnodes > 1 ? QP_MODE_NUMA : QP_MODE_BALANCED;
  if (qp_plan_ctx_init(&ctx, host, claims, req, opts, notes, error))
    plan = plan_in_mode(&ctx, mode, best_effort, error);
  if (plan != NULL)
    add_notes(plan, notes, claims);
  qp_plan_ctx_clear(&ctx);
  return plan;
}

/* REQ with only its boot vCPUs (maxcpus = vcpus, guest nodes trimmed),
 * numbered from 0 in index order: a vCPU -device at start may fill a
 * slot above a hole (REQ's boot), and the plan for BOOT_REQ gives the
 * K-th boot vCPU's place at its index K. */
static void
boot_request(const QpRequest *req, QpRequest *boot_req)
{
  g_auto(hwloc_bitmap_t) boot_set = qp_request_boot_set(req);
  guint boot = (guint)hwloc_bitmap_weight(boot_set);
  *boot_req = *req;
  boot_req->vcpus = boot;
  boot_req->maxcpus = boot;
  boot_req->boot = NULL;
  guint *slot_of = g_new0(guint, MAX(boot, 1));
  guint s = 0;
  int b;
  hwloc_bitmap_foreach_begin(b, boot_set)
  {
    slot_of[s++] = (guint)b;
  }
  hwloc_bitmap_foreach_end();
  boot_req->slot_of = slot_of;
  boot_req->gnodes = g_new0(QpGuestNode, MAX(req->n_gnodes, 1));
  for (guint g = 0; g < req->n_gnodes; g++) {
    boot_req->gnodes[g] = req->gnodes[g];
    boot_req->gnodes[g].vcpus = hwloc_bitmap_alloc();
    guint k = 0;
    int v;
    hwloc_bitmap_foreach_begin(v, boot_set)
    {
      if (hwloc_bitmap_isset(req->gnodes[g].vcpus, (unsigned)v))
        hwloc_bitmap_set(boot_req->gnodes[g].vcpus, k);
      k++;
    }
    hwloc_bitmap_foreach_end();
  }
}

static void
boot_request_clear(QpRequest *boot_req)
{
  for (guint g = 0; g < boot_req->n_gnodes; g++)
    hwloc_bitmap_free(boot_req->gnodes[g].vcpus);
  g_free(boot_req->gnodes);
  g_free((guint *)boot_req->slot_of);
}

/* Extends a plan made for the boot vCPUs (boot_request()) to every
 * possible vCPU: each boot vCPU takes its place at its own index, and a
 * vCPU plugged later runs where the boot vCPUs of its guest node run (all
 * of the VM's CPUs when there is none, or when SHARE_OWN). */
static void
extend_to_maxcpus(QpPlan *plan, const QpRequest *req, guint max,
                  gboolean share_own)
{
  g_auto(hwloc_bitmap_t) boot_set = qp_request_boot_set(req);
  guint had = plan->n_vcpus;
  g_autofree hwloc_bitmap_t *placed = plan->vcpu_cpus;
  plan->vcpu_cpus = g_new0(hwloc_bitmap_t, max);
  g_auto(hwloc_bitmap_t) own = hwloc_bitmap_alloc();
  guint k = 0;
  int b;
  hwloc_bitmap_foreach_begin(b, boot_set)
  {
    if (k < had && (guint)b < max)
      plan->vcpu_cpus[b] = placed[k];
    else if (k < had)
      hwloc_bitmap_free(placed[k]);
    if (k < had)
      hwloc_bitmap_or(own, own, placed[k]);
    k++;
  }
  hwloc_bitmap_foreach_end();
  for (; k < had; k++)
    hwloc_bitmap_free(placed[k]);
  for (guint v = 0; v < max; v++) {
    if (plan->vcpu_cpus[v] != NULL)
      continue;
    hwloc_const_bitmap_t like = own;
    for (guint g = 0; !share_own && g < req->n_gnodes; g++) {
      if (!hwloc_bitmap_isset(req->gnodes[g].vcpus, v))
        continue;
      g_auto(hwloc_bitmap_t) boots = hwloc_bitmap_dup(req->gnodes[g].vcpus);
      hwloc_bitmap_and(boots, boots, boot_set);
      int first = hwloc_bitmap_first(boots);
      if (first >= 0 && (guint)first < max && plan->vcpu_cpus[first] != NULL)
        like = plan->vcpu_cpus[first];
    }
    plan->vcpu_cpus[v] = hwloc_bitmap_dup(like);
  }
  plan->n_vcpus = max;
  plan->n_boot_vcpus = had;
}

/* The vCPUs of REQ (up to MAX) plugged later, not at the start. */
static hwloc_bitmap_t
later_vcpus(const QpRequest *req, guint max)
{
  g_auto(hwloc_bitmap_t) boot_set = qp_request_boot_set(req);
  hwloc_bitmap_t later = hwloc_bitmap_alloc();
  hwloc_bitmap_set_range(later, 0, (int)max - 1);
  hwloc_bitmap_andnot(later, later, boot_set);
  return later;
}

/* Balanced or numa with hot-pluggable vCPUs: room for every possible
 * vCPU if the host has it; else for the boot vCPUs, those plugged later
 * sharing their CPUs (Proxmox and libvirt give every VM a maxcpus above
 * what it boots with). */
static QpPlan *
plan_shared_later(const QpHost *host, const QpClaims *claims,
                  const QpRequest *req, const QpPlacementOptions *opts,
                  guint max, guint *placed, GError **error)
{
  g_autoptr(GError) full_error = NULL;
  QpPlan *plan = plan_compute(host, claims, req, opts, FALSE, &full_error);
  if (plan != NULL) {
    plan->n_boot_vcpus = MAX(req->vcpus, 1);
    return plan;
  }
  if (!g_error_matches(full_error, QP_TOPOLOGY_ERROR,
                       QP_TOPOLOGY_ERROR_NOFIT)) {
    g_propagate_error(error, g_steal_pointer(&full_error));
    return NULL;
  }
  QpRequest boot_req;
  boot_request(req, &boot_req);
  plan = plan_compute(host, claims, &boot_req, opts, FALSE, NULL);
  boot_request_clear(&boot_req);
  if (plan == NULL) {
    g_propagate_error(error, g_steal_pointer(&full_error));
    return NULL;
  }
  guint boot = plan->n_vcpus;
  extend_to_maxcpus(plan, req, max, FALSE);
  *placed = boot;
  /* "vCPU 1, if plugged, shares" or "vCPUs 1-3, if plugged, share" */
  g_auto(hwloc_bitmap_t) later = later_vcpus(req, max);
  g_autofree char *later_list = qp_list_format(later);
  g_autofree char *later_words =
      hwloc_bitmap_weight(later) == 1
          ? g_strdup_printf("vCPU %s, if plugged, shares the CPUs of its",
                            later_list)
          : g_strdup_printf("vCPUs %s, if plugged, share the CPUs of their",
                            later_list);
  qp_plan_add_warning(plan,
                      "room for the %u boot vCPU%s only (%s): %s guest "
                      "node's boot vCPUs",
                      boot, boot == 1 ? "" : "s", full_error->message,
                      later_words);
  return plan;
}

/* A plan for every possible vCPU. *PLACED is how many vCPUs have a place
 * of their own: every one, or the boot vCPUs (the others share). */
static QpPlan *
plan_with_hotplug(const QpHost *host, const QpClaims *claims,
                  const QpRequest *req, const QpPlacementOptions *opts,
                  gboolean best_effort, guint *placed, GError **error)
{
  guint boot = MAX(req->vcpus, 1);
  guint max = MAX(req->maxcpus, boot);
  *placed = max;
  if (max == boot) {
    QpPlan *plan = plan_compute(host, claims, req, opts, best_effort, error);
    if (plan != NULL)
      plan->n_boot_vcpus = plan->n_vcpus;
    return plan;
  }

  QpRequest boot_req;
  QpPlan *plan = NULL;
  if (best_effort) {
    /* The boot vCPUs share what there is; those plugged later share the
     * CPUs of their guest node's boot vCPUs. */
    boot_request(req, &boot_req);
    plan = plan_compute(host, claims, &boot_req, opts, TRUE, error);
    boot_request_clear(&boot_req);
    if (plan != NULL)
      extend_to_maxcpus(plan, req, max, FALSE);
    *placed = boot;
  } else if (opts->mode != QP_MODE_ONE_TO_ONE) {
    plan = plan_shared_later(host, claims, req, opts, max, placed, error);
  } else {
    /* One-to-one with hot-pluggable vCPUs: a core is dedicated to each
     * boot vCPU; one plugged later takes a free core when it comes (the
     * keeper claims it), so that a VM does not hold cores it may never
     * use. */
    boot_request(req, &boot_req);
    plan = plan_compute(host, claims, &boot_req, opts, FALSE, error);
    boot_request_clear(&boot_req);
    if (plan == NULL)
      return NULL;
    guint had = plan->n_vcpus;
    extend_to_maxcpus(plan, req, max, TRUE);
    *placed = had;
    plan->hotplug_cores = qp_plan_spare_cores(host, claims, opts, plan);
    g_auto(hwloc_bitmap_t) later = later_vcpus(req, max);
    g_autofree char *later_list = qp_list_format(later);
    g_autofree char *own_list =
        qp_list_format(plan->vcpu_cpus[hwloc_bitmap_first(later)]);
    qp_plan_add_reason(
        plan,
        "vCPUs %s are hot-pluggable: each takes a free core when "
        "plugged (%u free now), else shares the VM's CPUs %s",
        later_list, plan->hotplug_cores->len, own_list);
  }
  if (plan != NULL)
    plan->boot_vcpus = qp_request_boot_set(req);
  return plan;
}

/* Whether SET (NULL or empty: leave the thread alone) differs from the
 * startup CPUs START, which every thread inherits. */
static gboolean
apart(hwloc_const_bitmap_t set, hwloc_const_bitmap_t start)
{
  if (set == NULL || hwloc_bitmap_iszero(set))
    return FALSE;
  return start == NULL || hwloc_bitmap_iszero(start) ||
         !hwloc_bitmap_isequal(set, start);
}

/* QEMU must start paused when a thread that exists at the start (the
 * boot vCPUs, the main thread, the iothreads of REQ) must run on CPUs
 * other than the startup CPUs it inherits. vCPUs plugged later are pinned
 * when they come, paused or not. */
static gboolean
plan_needs_pause(const QpPlan *plan, const QpRequest *req)
{
  hwloc_const_bitmap_t start = plan->startup_cpus;
  for (guint v = 0; v < plan->n_vcpus; v++)
    if (qp_plan_vcpu_boots(plan, v) && apart(plan->vcpu_cpus[v], start))
      return TRUE;
  if (apart(plan->emulator_cpus, start))
    return TRUE;
  if (req->n_iothreads > 0 && apart(plan->iothread_cpus, start))
    return TRUE;
  for (guint i = 0; plan->iothreads != NULL && i < plan->iothreads->len; i++)
    if (apart(((const QpPlanIothread *)plan->iothreads->pdata[i])->cpus, start))
      return TRUE;
  return FALSE;
}

QpPlan *
qp_plan_compute(const QpHost *host, const QpClaims *claims,
                const QpRequest *req, const QpPlacementOptions *opts,
                GError **error)
{
  g_return_val_if_fail(host != NULL && req != NULL && opts != NULL, NULL);
  GError *local = NULL;
  guint placed = 0;
  QpPlan *plan =
      plan_with_hotplug(host, claims, req, opts, FALSE, &placed, &local);
  /* Mode auto never refuses a VM for CPUs: what balanced or numa refused
   * is placed best-effort, which fails only for memory (or options that
   * leave no CPU at all). */
  if (plan == NULL && opts->mode == QP_MODE_AUTO &&
      g_error_matches(local, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT)) {
    g_clear_error(&local);
    plan = plan_with_hotplug(host, claims, req, opts, TRUE, &placed, &local);
  }
  /* The guest topology it suggests would renumber the slots that the
   * vCPUs plugged at start name by their ids (and its -smp cpus= would
   * fill theirs). */
  if (plan != NULL && opts->vnuma && req->n_gnodes == 0 && req->boot != NULL)
    qp_plan_add_reason(plan,
                       "--vnuma: no guest topology suggested: vCPUs plugged "
                       "with -device at start name their slots in the "
                       "caller's -smp topology");
  else if (plan != NULL && opts->vnuma && req->n_gnodes == 0)
    qp_plan_suggest_vnuma(plan, host, req, placed);
  if (plan != NULL)
    plan->pause = plan_needs_pause(plan, req);
  if (local != NULL &&
      g_error_matches(local, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT))
    g_prefix_error(&local, "VM does not fit: ");
  if (local != NULL)
    g_propagate_error(error, local);
  return plan;
}
