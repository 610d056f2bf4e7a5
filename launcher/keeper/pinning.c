/* The keeper's look at QEMU's threads: each is put where the plan says
 * unless the caller pinned it itself (caller-pinning.h), the affinity read
 * back; then the VM's claim follows what the threads really use. */
#include "launcher/keeper/state.h"

#include <stdlib.h>

#include "launcher/affinity.h"
#include "launcher/log.h"

/* The list in a sysfs file, or NULL. */
static hwloc_bitmap_t
sys_cpus(const char *path)
{
  hwloc_bitmap_t set = NULL;
  return qp_list_read_file(path, &set, NULL) ? set : NULL;
}

/* Every CPU but those offline now: the host's CPUs that are not online. A
 * CPU the host does not have (a plan made on another host) is not offline:
 * pinning to it fails, as it should. NULL when sysfs does not say (then no
 * CPU is taken for offline). */
static hwloc_bitmap_t
online_cpus(void)
{
  g_auto(hwloc_bitmap_t) online = sys_cpus("/sys/devices/system/cpu/online");
  g_auto(hwloc_bitmap_t) possible =
      sys_cpus("/sys/devices/system/cpu/possible");
  if (online == NULL || possible == NULL)
    return NULL;
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  hwloc_bitmap_not(set, possible);
  hwloc_bitmap_or(set, set, online);
  return set;
}

/* Pins TID to SET and reads it back: the kernel shows SET less the CPUs
 * offline (ONLINE, NULL: none is). */
static gboolean
pin_and_verify(int tid, hwloc_const_bitmap_t set, const char *what,
               hwloc_const_bitmap_t online, GError **error)
{
  if (set == NULL || hwloc_bitmap_iszero(set))
    return TRUE;
  if (!qp_set_affinity(tid, set, error)) {
    g_prefix_error(error, "%s: ", what);
    return FALSE;
  }
  g_auto(hwloc_bitmap_t) got = qp_get_affinity(tid, error);
  if (got == NULL)
    return FALSE;
  g_auto(hwloc_bitmap_t) shown = hwloc_bitmap_dup(set);
  if (online != NULL)
    hwloc_bitmap_and(shown, shown, online);
  if (!hwloc_bitmap_isequal(got, shown)) {
    g_autofree char *want = qp_list_format(set);
    g_autofree char *have = qp_list_format(got);
    g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
                "%s (thread %d) was pinned to CPUs %s but runs on %s", what,
                tid, want, have);
    return FALSE;
  }
  return TRUE;
}

/* One look at QEMU's threads. */
typedef struct {
  Keeper *k;
  hwloc_const_bitmap_t usable;
  hwloc_const_bitmap_t beyond; /* see qp_caller_judge() */
  hwloc_bitmap_t emulator;     /* NULL: other threads are left alone */
  hwloc_bitmap_t iothread;     /* the iothreads not near their devices */
  /* The emulator's and iothreads' sets as the last look had them, when a
   * vCPU plugged or unplugged since changed them (else NULL): a thread
   * still there is ours, not the caller's, and goes to the new set. */
  hwloc_bitmap_t emulator_was, iothread_was;
  /* The sets a thread inherits from one qemu-pin pinned (the startup CPUs,
   * the emulator's set, the main thread's, the emulator's set before the
   * last plug): a thread seen for the first time with one of them is not
   * the caller's. */
  hwloc_const_bitmap_t inherited[4];
  hwloc_bitmap_t main_had;    /* the main thread's affinity, or NULL */
  hwloc_bitmap_t main_caller; /* the caller's CPUs for it, or NULL */
  hwloc_bitmap_t online;      /* every CPU but those offline, or NULL */
  GHashTable *done;           /* the tids looked at */
  guint changed;              /* threads whose affinity had to change */
} Look;

/* The main thread first: QEMU's threads inherit its affinity. */
static gboolean
pin_main_thread(Look *l, GError **error)
{
  Keeper *k = l->k;
  if (l->main_had == NULL || l->emulator == NULL)
    return TRUE;
  g_auto(hwloc_bitmap_t) had = hwloc_bitmap_dup(l->main_had);
  if (l->emulator_was != NULL && hwloc_bitmap_isequal(had, l->emulator_was)) {
    if (!qp_set_affinity(k->qemu_pid, l->emulator, error)) {
      g_prefix_error(error, "emulator thread: ");
      return FALSE;
    }
    hwloc_bitmap_copy(had, l->emulator);
    l->changed++;
  }
  QpPinVerdict verdict =
      qp_caller_pins_judge(k->pins, k->qemu_pid, "the emulator thread", -1, had,
                           l->emulator, l->usable, l->beyond, l->inherited, 2);
  if (verdict == QP_PIN_RESET) {
    if (!qp_set_affinity(k->qemu_pid, l->emulator, error)) {
      g_prefix_error(error, "emulator thread: ");
      return FALSE;
    }
    l->changed++;
  } else if (verdict == QP_PIN_CALLER) {
    l->main_caller = hwloc_bitmap_dup(l->main_had);
  }
  g_hash_table_add(l->done, GINT_TO_POINTER(k->qemu_pid));
  return TRUE;
}

/* A vCPU on its plan's CPUs whose core the claim gave back: the caller had
 * it elsewhere, and put it back on the plan by hand (`taskset`, `virsh
 * vcpupin`) rather than by a reset. Its core is claimed again, as on a
 * reset; not while it shares the VM's cores for want of its own. */
static gboolean
core_given_back(Keeper *k, int index)
{
  if (g_hash_table_contains(k->fallback, GINT_TO_POINTER(index)))
    return FALSE;
  hwloc_const_bitmap_t core = qp_keeper_vcpu_core(k, (guint)index);
  return core != NULL &&
         !hwloc_bitmap_isincluded(core, qp_held_claim_get(k->claim)->dedicated);
}

static gboolean
pin_vcpus(Look *l, GArray *vcpus, GError **error)
{
  Keeper *k = l->k;
  const QpPlan *plan = k->plan;
  for (guint i = 0; i < vcpus->len; i++) {
    QpVcpu *v = &g_array_index(vcpus, QpVcpu, i);
    if (v->cpu_index < 0 || (guint)v->cpu_index >= plan->n_vcpus) {
      g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
                  "QEMU reports vCPU %d but the plan has %u vCPUs",
                  v->cpu_index, plan->n_vcpus);
      return FALSE;
    }
    hwloc_const_bitmap_t want = qp_keeper_vcpu_target(k, v->cpu_index);
    g_auto(hwloc_bitmap_t) had = qp_get_affinity(v->thread_id, NULL);
    g_autofree char *what = g_strdup_printf("vCPU %d", v->cpu_index);
    if (had == NULL) {
      g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
                  "vCPU %d: thread %d is gone", v->cpu_index, v->thread_id);
      return FALSE;
    }
    g_hash_table_add(l->done, GINT_TO_POINTER(v->thread_id));
    if (want == NULL || hwloc_bitmap_iszero(want))
      continue;
    QpPinVerdict verdict = qp_caller_pins_judge(
        k->pins, v->thread_id, what, v->cpu_index, had, want, l->usable,
        l->beyond, l->inherited, G_N_ELEMENTS(l->inherited));
    if (verdict == QP_PIN_CALLER ||
        (verdict == QP_PIN_PLANNED && !core_given_back(k, v->cpu_index)))
      continue;
    hwloc_const_bitmap_t to =
        qp_keeper_reclaim_core(k, (guint)v->cpu_index, want);
    if (verdict == QP_PIN_PLANNED && to == want)
      continue; /* its core claimed again, and it is there already */
    if (to != want)
      qp_caller_pins_judge(k->pins, v->thread_id, what, v->cpu_index, to, to,
                           l->usable, l->beyond, NULL, 0);
    if (!pin_and_verify(v->thread_id, to, what, l->online, error))
      return FALSE;
    l->changed++;
  }
  return TRUE;
}

static gboolean
pin_iothreads(Look *l, GArray *iothreads, GError **error)
{
  Keeper *k = l->k;
  for (guint i = 0; iothreads != NULL && i < iothreads->len; i++) {
    QpIothread *t = &g_array_index(iothreads, QpIothread, i);
    /* Near the devices it serves, else with the VM. */
    const QpPlanIothread *near = qp_plan_iothread(k->plan, t->id);
    hwloc_const_bitmap_t want = near != NULL ? near->cpus : l->iothread;
    g_autofree char *what = g_strdup_printf("iothread %s", t->id);
    g_auto(hwloc_bitmap_t) had = qp_get_affinity(t->thread_id, NULL);
    g_hash_table_add(l->done, GINT_TO_POINTER(t->thread_id));
    if (had == NULL || want == NULL || hwloc_bitmap_iszero(want))
      continue;
    if (near == NULL && l->iothread_was != NULL &&
        hwloc_bitmap_isequal(had, l->iothread_was)) {
      if (!pin_and_verify(t->thread_id, want, what, l->online, error))
        return FALSE;
      hwloc_bitmap_copy(had, want);
      l->changed++;
    }
    if (qp_caller_pins_judge(k->pins, t->thread_id, what, -1, had, want,
                             l->usable, l->beyond, l->inherited,
                             G_N_ELEMENTS(l->inherited)) != QP_PIN_RESET)
      continue;
    if (!pin_and_verify(t->thread_id, want, what, l->online, error))
      return FALSE;
    l->changed++;
  }
  return TRUE;
}

/* Every other thread: the emulator's set, or the caller's where the
 * caller pinned the main thread they came from. Threads come and go
 * (QEMU's worker pool), so one that vanished meanwhile is not an error;
 * they are too many and too short-lived to remember each. */
static void
pin_other_threads(Look *l)
{
  g_autofree char *task = g_strdup_printf("/proc/%d/task", l->k->qemu_pid);
  g_autoptr(GDir) dir = g_dir_open(task, 0, NULL);
  const char *name;
  while (l->emulator != NULL && dir != NULL &&
         (name = g_dir_read_name(dir)) != NULL) {
    int tid = atoi(name);
    if (tid <= 0 || g_hash_table_contains(l->done, GINT_TO_POINTER(tid)))
      continue;
    g_auto(hwloc_bitmap_t) had = qp_get_affinity(tid, NULL);
    if (had == NULL ||
        (l->main_caller != NULL && hwloc_bitmap_isequal(had, l->main_caller)) ||
        (qp_caller_judge_online(had, l->emulator, l->usable, l->beyond,
                                l->inherited, 2, l->online) != QP_PIN_RESET &&
         (l->emulator_was == NULL ||
          !hwloc_bitmap_isequal(had, l->emulator_was))))
      continue;
    if (qp_set_affinity(tid, l->emulator, NULL))
      l->changed++;
  }
}

/* SET (NULL or empty: none) less the cores OFF, or SET whole when that
 * leaves nothing; NULL for none. */
static hwloc_bitmap_t
set_off(hwloc_const_bitmap_t set, hwloc_const_bitmap_t off)
{
  if (set == NULL || hwloc_bitmap_iszero(set))
    return NULL;
  hwloc_bitmap_t out = hwloc_bitmap_dup(set);
  if (off != NULL)
    hwloc_bitmap_andnot(out, out, off);
  if (hwloc_bitmap_iszero(out))
    hwloc_bitmap_copy(out, set);
  return out;
}

/* NOW, and in *WAS what the last look had when it differs (else NULL). */
static hwloc_bitmap_t
set_now(hwloc_const_bitmap_t set, hwloc_const_bitmap_t off,
        hwloc_const_bitmap_t off_was, hwloc_bitmap_t *was)
{
  hwloc_bitmap_t now = set_off(set, off);
  *was = now != NULL ? set_off(set, off_was) : NULL;
  if (*was != NULL && hwloc_bitmap_isequal(*was, now))
    g_clear_pointer(was, hwloc_bitmap_free);
  return now;
}

/* Applies the plan to every thread of QEMU the caller did not pin itself
 * (caller-pinning.h): vCPUs to their sets, iothreads to theirs, every other
 * thread (main loop, RCU, workers) to the emulator set. A core claimed for
 * a plugged vCPU is its own as a boot vCPU's is: the emulator's and the
 * iothreads' sets leave it while the vCPU is there (unless nothing else is
 * left to them). CHANGED: the number of threads whose affinity had to
 * change. */
static gboolean
apply_plan(Keeper *k, GArray *vcpus, GArray *iothreads, guint *changed,
           GError **error)
{
  const QpPlan *plan = k->plan;
  Look l = {.k = k, .usable = k->host->usable, .beyond = k->host->beyond};
  g_auto(hwloc_bitmap_t) off = qp_keeper_plugged_cores(k);
  l.emulator =
      set_now(plan->emulator_cpus, off, k->plugged_off, &l.emulator_was);
  l.iothread =
      set_now(plan->iothread_cpus, off, k->plugged_off, &l.iothread_was);
  qp_caller_pins_begin(k->pins);
  l.online = online_cpus();
  qp_caller_pins_set_online(k->pins, l.online);
  l.main_had = qp_get_affinity(k->qemu_pid, NULL);
  l.inherited[0] = plan->startup_cpus;
  l.inherited[1] = l.emulator;
  l.inherited[2] = l.main_had;
  l.inherited[3] = l.emulator_was;
  l.done = g_hash_table_new(g_direct_hash, g_direct_equal);
  gboolean ok = pin_main_thread(&l, error) && pin_vcpus(&l, vcpus, error) &&
                pin_iothreads(&l, iothreads, error);
  if (ok)
    pin_other_threads(&l);
  if (ok && changed)
    *changed = l.changed;
  if (ok) {
    g_clear_pointer(&k->plugged_off, hwloc_bitmap_free);
    k->plugged_off = g_steal_pointer(&off);
  }
  g_hash_table_unref(l.done);
  g_clear_pointer(&l.online, hwloc_bitmap_free);
  g_clear_pointer(&l.main_had, hwloc_bitmap_free);
  g_clear_pointer(&l.main_caller, hwloc_bitmap_free);
  g_clear_pointer(&l.emulator, hwloc_bitmap_free);
  g_clear_pointer(&l.iothread, hwloc_bitmap_free);
  g_clear_pointer(&l.emulator_was, hwloc_bitmap_free);
  g_clear_pointer(&l.iothread_was, hwloc_bitmap_free);
  return ok;
}

char *
qp_keeper_caller_placed(const Keeper *k)
{
  const QpPlan *plan = k->plan;
  for (guint v = 0; v < plan->n_vcpus; v++)
    if (qp_caller_pins_vcpu(k->pins, v) != NULL)
      return g_strdup_printf("the caller pinned vCPU %u itself", v);
  const char *thread = qp_caller_pins_other(k->pins);
  if (thread != NULL)
    return g_strdup_printf("the caller pinned %s itself", thread);
  for (guint m = 0; m < plan->n_mem; m++)
    if (plan->mem[m].caller_set)
      return g_strdup_printf(
          "the caller chose the host nodes of memory backend %s",
          plan->mem[m].memdev ? plan->mem[m].memdev : "(machine)");
  const char *bound = qp_mem_watch_caller_bound(k->mem);
  if (bound != NULL)
    return g_strdup_printf(
        "the caller chose the host nodes of memory backend %s", bound);
  if (k->mems_narrowed != NULL)
    return g_strdup(k->mems_narrowed);
  return NULL;
}

typedef struct {
  hwloc_bitmap_t dedicated;
  GArray *load;     /* of QpNodeLoad */
  GArray *cpu_load; /* of QpCpuLoad */
  gboolean caller_placed;
} ClaimUse;

/* Ledger edit: the claim's CPUs as the VM uses them (its memory is
 * memory.c's to change), and whether the caller placed the VM. */
static gboolean
set_claim_use(QpClaim *claim, const QpClaims *claims, gpointer data,
              GError **error)
{
  const ClaimUse *u = data;
  claim->caller_placed = u->caller_placed;
  hwloc_bitmap_copy(claim->dedicated, u->dedicated);
  g_array_set_size(claim->load, 0);
  g_array_append_vals(claim->load, u->load->data, u->load->len);
  qp_cpu_load_copy(claim->cpu_load, u->cpu_load);
  return TRUE;
}

/* After a look at the threads: the record follows what the VM uses (the
 * cores of vCPUs the caller moved elsewhere are given back, shared vCPUs
 * counted where the caller put them) and whether the caller placed it, and
 * one line says what the caller decided and what the claim became. */
static void
follow_caller(Keeper *k, GArray *vcpus, hwloc_const_bitmap_t held_before,
              char *changes)
{
  const QpPlan *plan = k->plan;
  const QpCallerHost *host = k->host;
  const QpClaim *own = qp_held_claim_get(k->claim);
  guint n = host->n_vcpus;
  g_autofree hwloc_const_bitmap_t *effective =
      g_new0(hwloc_const_bitmap_t, MAX(n, 1));
  g_autofree hwloc_const_bitmap_t *cores =
      g_new0(hwloc_const_bitmap_t, MAX(n, 1));
  g_autofree gboolean *present = g_new0(gboolean, MAX(n, 1));
  for (guint i = 0; i < vcpus->len; i++) {
    int index = g_array_index(vcpus, QpVcpu, i).cpu_index;
    if (index >= 0 && (guint)index < n)
      present[index] = TRUE;
  }
  /* The vCPUs the plan made room for: every possible one where balanced
   * or numa found a CPU for each (its load counts them all), else the boot
   * vCPUs. One plugged beyond them shares their CPUs and counts once it
   * is there, and only then. */
  guint planned = 0;
  for (guint i = 0; plan->load != NULL && i < plan->load->len; i++)
    planned += g_array_index(plan->load, QpNodeLoad, i).vcpus;
  gboolean room_all =
      plan->mode != QP_MODE_ONE_TO_ONE && planned >= plan->n_vcpus;
  gboolean beyond = FALSE;
  gboolean any_caller = FALSE;
  for (guint v = 0; v < n; v++) {
    hwloc_const_bitmap_t caller = qp_caller_pins_vcpu(k->pins, v);
    hwloc_const_bitmap_t pu =
        g_hash_table_lookup(k->plugged_pu, GINT_TO_POINTER(v));
    hwloc_const_bitmap_t fallback =
        g_hash_table_lookup(k->fallback, GINT_TO_POINTER(v));
    any_caller |= caller != NULL;
    effective[v] = caller     ? caller
                   : pu       ? pu
                   : fallback ? fallback
                              : plan->vcpu_cpus[v];
    /* A vCPU slot beyond the room made for it, not plugged, runs nowhere
     * yet (for one-to-one its planned set, the VM's cores, would keep
     * every core in use). */
    gboolean outside = !room_all && !qp_plan_vcpu_boots(plan, v);
    if (outside && !present[v])
      effective[v] = NULL;
    beyond |= outside && present[v];
    cores[v] = qp_keeper_vcpu_core(k, v);
  }
  g_autofree char *placed = qp_keeper_caller_placed(k);
  ClaimUse use = {hwloc_bitmap_alloc(),
                  g_array_new(FALSE, FALSE, sizeof(QpNodeLoad)),
                  qp_cpu_load_array_new(), placed != NULL};
  qp_caller_claim(host, effective, cores, own->dedicated, use.dedicated,
                  use.load, use.cpu_load);
  if (!any_caller && !beyond) {
    g_array_set_size(use.load, 0);
    if (plan->load != NULL)
      g_array_append_vals(use.load, plan->load->data, plan->load->len);
    qp_cpu_load_copy(use.cpu_load, plan->cpu_load);
  }
  /* The record to write, and the news since the look began (a core
   * claimed again on the way is written already). */
  gboolean same = !k->unwritten && use.caller_placed == own->caller_placed &&
                  hwloc_bitmap_isequal(use.dedicated, own->dedicated) &&
                  qp_caller_load_equal(use.load, own->load) &&
                  qp_caller_cpu_load_equal(use.cpu_load, own->cpu_load);
  if (changes != NULL || !hwloc_bitmap_isequal(use.dedicated, held_before)) {
    g_autofree char *line =
        qp_caller_look_text(changes, held_before, use.dedicated, use.load);
    qp_keeper_log(k, 1, "%s", line);
  }
  if (!same) {
    g_autoptr(GError) error = NULL;
    k->unwritten = !qp_held_claim_adjust(k->claim, set_claim_use, &use, &error);
    if (k->unwritten)
      qp_error("keeper: %s", error->message);
  }
  hwloc_bitmap_free(use.dedicated);
  g_array_unref(use.load);
  g_array_unref(use.cpu_load);
  g_free(changes);
}

void
qp_keeper_say_caller_memory(Keeper *k)
{
  const QpPlan *plan = k->plan;
  g_autoptr(GString) s = g_string_new(NULL);
  for (guint m = 0; m < plan->n_mem; m++) {
    const QpPlanMem *pm = &plan->mem[m];
    if (!pm->caller_set)
      continue;
    g_autofree char *nodes = qp_list_format(pm->host_nodes);
    if (s->len > 0)
      g_string_append(s, ", ");
    if (pm->gnode < 0)
      g_string_append_printf(s, "the guest's memory on host nodes %s", nodes);
    else
      g_string_append_printf(s, "guest node %d's memory on host nodes %s",
                             pm->gnode, nodes);
  }
  if (s->len > 0)
    qp_keeper_log(k, 1, "the caller's memory binding kept: %s, claimed there",
                  s->str);
}

gboolean
qp_keeper_look_and_apply(Keeper *k, GArray *vcpus, GArray *iothreads,
                         guint *changed, GError **error)
{
  k->unwritten |= qp_keeper_release_unplugged(k, vcpus);
  /* Cores claimed again on the way are news of this look too. */
  g_auto(hwloc_bitmap_t) held =
      hwloc_bitmap_dup(qp_held_claim_get(k->claim)->dedicated);
  gboolean ok = apply_plan(k, vcpus, iothreads, changed, error);
  if (ok)
    follow_caller(k, vcpus, held, qp_caller_pins_end(k->pins));
  k->next_look_at = g_get_monotonic_time() + (gint64)LOOK_EVERY_MS * 1000;
  return ok;
}

gboolean
qp_keeper_query_and_apply(Keeper *k, guint *changed, GError **error)
{
  g_autoptr(GArray) vcpus = qp_qmp_query_cpus(k->qmp, error);
  if (vcpus == NULL)
    return FALSE;
  g_autoptr(GArray) iothreads = qp_qmp_query_iothreads(k->qmp, error);
  if (iothreads == NULL)
    return FALSE;
  return qp_keeper_look_and_apply(k, vcpus, iothreads, changed, error);
}
