/* The keeper: a detached process per VM that talks to QEMU over the private
 * monitor, applies the plan to every thread, resumes the guest, re-applies
 * the plan where someone else reset a thread (keeping what the caller pinned
 * itself: caller-pinning.h), claims memory plugged later (memory.h),
 * and releases the VM's claim when QEMU exits. The keeper holds the VM's
 * claim (QpHeldClaim, adopted from the launcher): every change to its
 * record is a qp_held_claim_adjust(), each edit changing only its own
 * fields of the claim. */
#include "launcher/keeper/keeper.h"

#include "launcher/affinity.h"
#include "launcher/keeper/caller-pinning.h"
#include "launcher/keeper/memory.h"
#include "launcher/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "qmp/qmp.h"
#include "qp-error.h"

typedef struct {
  const QpKeeperConfig *cfg;
  QpHeldClaim *claim; /* the VM's claim, ours from the start */
  QpQmp *qmp;
  int qemu_pid;
  int pidfd;          /* -1: no pidfd (kernel < 5.3, valgrind): poll /proc */
  guint64 qemu_start; /* start time of qemu_pid, when it is known */
  gboolean greeted;   /* the handshake succeeded */
  gboolean applied;   /* every thread runs where the plan says */
  gint64 t0;
  /* one-to-one hotplug: cpu-index -> the core (PUs) claimed for it */
  GHashTable *plugged;
  GHashTable *plugged_pu; /* cpu-index -> the PU of that core it runs on */
  GHashTable *warned;     /* cpu-indexes already warned about */
  QpMemWatch *mem;        /* memory plugged later, or NULL */
  /* vCPU index -> the VM's own cores, for a vCPU whose planned core another
   * VM took while the caller had it elsewhere */
  GHashTable *fallback;
  QpCallerPins *pins;  /* the threads' affinities, the caller's decisions */
  gboolean unwritten;  /* the claim changed since the record was written */
  gint64 next_look_at; /* when to look for threads moved by the caller */
  /* QEMU said it is exiting (SHUTDOWN on a host signal or quit): when it
   * is still there a while later, the signal is sent again. */
  gint64 exiting_since;
  guint nudges;
} Keeper;

/* QEMU 7.2 can hang for good in its monitor cleanup after SIGTERM when a
 * QMP command was in flight: the wakeup of the dispatcher is lost, and only
 * another signal (or event on its main loop) brings it back. Plain QEMU does
 * it too; pinned VMs here did more often (docs/robustness.md, finding 10). */
#define NUDGE_AFTER_MS 1000
#define HOLD_QMP_TIMEOUT_MS 3000
/* How often the keeper looks whether someone moved a thread while no QMP
 * event said so (`virsh vcpupin` on a running VM): one sched_getaffinity
 * per vCPU, iothread and the main thread, no QMP unless one moved. */
#define LOOK_EVERY_MS 5000

static void klog(Keeper *k, int level, const char *fmt, ...)
    G_GNUC_PRINTF(3, 4);

static void
klog(Keeper *k, int level, const char *fmt, ...)
{
  if (k->cfg->verbose < level)
    return;
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  qp_info("keeper: +%.3f ms: %s",
          (double)(g_get_monotonic_time() - k->t0) / 1000.0, msg);
}

/* Closes every inherited descriptor but stdio and the ones we use: above
 * all the ledger's lock, whose flock a copy would keep held if the launcher
 * died holding it. */
static void
close_inherited(const QpKeeperConfig *cfg)
{
  DIR *d = opendir("/proc/self/fd");
  if (d == NULL)
    return;
  int dfd = dirfd(d);
  GArray *fds = g_array_new(FALSE, FALSE, sizeof(int));
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (!g_ascii_isdigit(e->d_name[0]))
      continue;
    int fd = atoi(e->d_name);
    if (fd > 2 && fd != dfd && fd != cfg->qmp_fd && fd != cfg->status_fd)
      g_array_append_val(fds, fd);
  }
  closedir(d);
  for (guint i = 0; i < fds->len; i++)
    close(g_array_index(fds, int, i));
  g_array_free(fds, TRUE);
}

static void
to_dev_null(int fd, int flags)
{
  int n = open("/dev/null", flags | O_CLOEXEC);
  if (n >= 0) {
    dup2(n, fd);
    close(n);
  }
}

static int
tgid_of(int tid)
{
  g_autofree char *path = g_strdup_printf("/proc/%d/status", tid);
  g_autofree char *text = NULL;
  if (!g_file_get_contents(path, &text, NULL, NULL))
    return -1;
  const char *p = strstr(text, "\nTgid:");
  return p ? atoi(p + 6) : -1;
}

/* Starts watching QEMU (PID): a pidfd, or its start time where the kernel
 * (or valgrind) has no pidfd_open. FALSE if it is already gone. */
static gboolean
watch_qemu(Keeper *k, int pid)
{
  k->qemu_pid = pid;
  k->qemu_start = qp_proc_start_time(pid);
  k->pidfd = pidfd_open(pid, 0);
  return k->pidfd >= 0 || k->qemu_start != 0;
}

static gboolean
watching(const Keeper *k)
{
  return k->pidfd >= 0 || k->qemu_start != 0;
}

/* TRUE once QEMU has exited, waiting up to TIMEOUT_MS. */
static gboolean
qemu_gone(Keeper *k, int timeout_ms)
{
  if (k->pidfd >= 0) {
    struct pollfd p = {k->pidfd, POLLIN, 0};
    return poll(&p, 1, timeout_ms) == 1;
  }
  gint64 deadline = g_get_monotonic_time() + (gint64)timeout_ms * 1000;
  for (;;) {
    if (qp_proc_start_time(k->qemu_pid) != k->qemu_start)
      return TRUE;
    if (g_get_monotonic_time() >= deadline)
      return FALSE;
    g_usleep(20000);
  }
}

static void
signal_qemu(Keeper *k, int sig)
{
  if (k->pidfd >= 0)
    pidfd_send_signal(k->pidfd, sig, NULL, 0);
  else if (!qemu_gone(k, 0))
    kill(k->qemu_pid, sig);
}

static void
kill_qemu(Keeper *k)
{
  signal_qemu(k, SIGKILL);
}

static gboolean
pin_and_verify(int tid, hwloc_const_bitmap_t set, const char *what,
               GError **error)
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
  if (!hwloc_bitmap_isequal(got, set)) {
    g_autofree char *want = qp_list_format(set);
    g_autofree char *have = qp_list_format(got);
    g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
                "%s (thread %d) was pinned to CPUs %s but runs on %s", what,
                tid, want, have);
    return FALSE;
  }
  return TRUE;
}

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
  hwloc_bitmap_t core = claim_free_core(k, k->cfg->plan->hotplug_cores, &local);
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

/* Gives back the cores of vCPUs that were unplugged; TRUE if any (the
 * record is rewritten after the look, with what the caller changed). */
static gboolean
release_unplugged(Keeper *k, GArray *vcpus)
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
    klog(k, 1, "vCPU %d was unplugged: core %s released", index, list);
    g_hash_table_remove(k->plugged, l->data);
    g_hash_table_remove(k->plugged_pu, l->data);
    g_hash_table_remove(k->warned, l->data);
    changed = TRUE;
  }
  return changed;
}

/* Where vCPU INDEX belongs: its planned set, or for a vCPU plugged into a
 * one-to-one VM the core claimed for it (claimed now if need be). */
static hwloc_const_bitmap_t
vcpu_target(Keeper *k, int index)
{
  const QpPlan *plan = k->cfg->plan;
  hwloc_const_bitmap_t fallback =
      g_hash_table_lookup(k->fallback, GINT_TO_POINTER(index));
  if (fallback != NULL)
    return fallback;
  if (plan->hotplug_cores == NULL || (guint)index < plan->n_boot_vcpus)
    return plan->vcpu_cpus[index];
  hwloc_bitmap_t core = g_hash_table_lookup(k->plugged, GINT_TO_POINTER(index));
  if (core == NULL &&
      !g_hash_table_contains(k->warned, GINT_TO_POINTER(index))) {
    g_autoptr(GError) error = NULL;
    core = claim_core(k, index, &error);
    if (core != NULL) {
      g_hash_table_insert(k->plugged, GINT_TO_POINTER(index), core);
      g_autofree char *list = qp_list_format(core);
      klog(k, 1, "vCPU %d was plugged: core %s claimed", index, list);
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

/* The core planned (boot vCPU) or claimed (plugged vCPU) for vCPU INDEX in
 * one-to-one, or NULL. */
static hwloc_const_bitmap_t
vcpu_core(Keeper *k, guint index)
{
  hwloc_const_bitmap_t core =
      g_hash_table_lookup(k->plugged, GINT_TO_POINTER(index));
  if (core == NULL && index < k->cfg->host->n_vcpus)
    core = k->cfg->host->vcpu_core[index];
  return core;
}

/* vCPU INDEX goes back to the plan after the caller had it elsewhere: its
 * core was given back then, and is claimed again if no VM took it meanwhile.
 * Else it shares the VM's own cores from now on, with a warning. Returns
 * where it goes. */
static hwloc_const_bitmap_t
reclaim_core(Keeper *k, guint index, hwloc_const_bitmap_t want)
{
  hwloc_const_bitmap_t core = vcpu_core(k, index);
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

/* Applies the plan to every thread of QEMU the caller did not pin itself
 * (caller-pinning.h): vCPUs to their sets, iothreads to theirs, every other
 * thread (main loop, RCU, workers) to the emulator set. Returns the number
 * of threads whose affinity had to change. */
static gboolean
apply_plan(Keeper *k, GArray *vcpus, GArray *iothreads, guint *changed,
           GError **error)
{
  const QpPlan *plan = k->cfg->plan;
  hwloc_const_bitmap_t usable = k->cfg->host->usable;
  hwloc_const_bitmap_t emulator =
      plan->emulator_cpus != NULL && !hwloc_bitmap_iszero(plan->emulator_cpus)
          ? plan->emulator_cpus
          : NULL;
  g_autoptr(GHashTable) done = g_hash_table_new(g_direct_hash, g_direct_equal);
  guint n_changed = 0;

  qp_caller_pins_begin(k->pins);
  /* The main thread first: QEMU's threads inherit its affinity. A thread
   * seen for the first time with a set it inherited is not the caller's. */
  g_auto(hwloc_bitmap_t) main_had = qp_get_affinity(k->qemu_pid, NULL);
  hwloc_const_bitmap_t inherited[] = {plan->startup_cpus, emulator, main_had};
  g_auto(hwloc_bitmap_t) main_caller = NULL;
  if (main_had != NULL && emulator != NULL) {
    QpPinVerdict verdict =
        qp_caller_pins_judge(k->pins, k->qemu_pid, "emulator", -1, main_had,
                             emulator, usable, inherited, 2);
    if (verdict == QP_PIN_RESET) {
      if (!qp_set_affinity(k->qemu_pid, emulator, error)) {
        g_prefix_error(error, "emulator thread: ");
        return FALSE;
      }
      n_changed++;
    } else if (verdict == QP_PIN_CALLER) {
      main_caller = hwloc_bitmap_dup(main_had);
    }
    g_hash_table_add(done, GINT_TO_POINTER(k->qemu_pid));
  }

  for (guint i = 0; i < vcpus->len; i++) {
    QpVcpu *v = &g_array_index(vcpus, QpVcpu, i);
    if (v->cpu_index < 0 || (guint)v->cpu_index >= plan->n_vcpus) {
      g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
                  "QEMU reports vCPU %d but the plan has %u vCPUs",
                  v->cpu_index, plan->n_vcpus);
      return FALSE;
    }
    hwloc_const_bitmap_t want = vcpu_target(k, v->cpu_index);
    g_auto(hwloc_bitmap_t) had = qp_get_affinity(v->thread_id, NULL);
    g_autofree char *what = g_strdup_printf("vCPU %d", v->cpu_index);
    if (had == NULL) {
      g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
                  "vCPU %d: thread %d is gone", v->cpu_index, v->thread_id);
      return FALSE;
    }
    g_hash_table_add(done, GINT_TO_POINTER(v->thread_id));
    if (want == NULL || hwloc_bitmap_iszero(want))
      continue;
    QpPinVerdict verdict =
        qp_caller_pins_judge(k->pins, v->thread_id, what, v->cpu_index, had,
                             want, usable, inherited, G_N_ELEMENTS(inherited));
    if (verdict != QP_PIN_RESET)
      continue;
    hwloc_const_bitmap_t to = reclaim_core(k, (guint)v->cpu_index, want);
    if (to != want)
      qp_caller_pins_judge(k->pins, v->thread_id, what, v->cpu_index, to, to,
                           usable, NULL, 0);
    if (!pin_and_verify(v->thread_id, to, what, error))
      return FALSE;
    n_changed++;
  }
  for (guint i = 0; iothreads != NULL && i < iothreads->len; i++) {
    QpIothread *t = &g_array_index(iothreads, QpIothread, i);
    g_autofree char *what = g_strdup_printf("iothread %s", t->id);
    g_auto(hwloc_bitmap_t) had = qp_get_affinity(t->thread_id, NULL);
    g_hash_table_add(done, GINT_TO_POINTER(t->thread_id));
    if (had == NULL || plan->iothread_cpus == NULL ||
        hwloc_bitmap_iszero(plan->iothread_cpus))
      continue;
    if (qp_caller_pins_judge(k->pins, t->thread_id, what, -1, had,
                             plan->iothread_cpus, usable, inherited,
                             G_N_ELEMENTS(inherited)) != QP_PIN_RESET)
      continue;
    if (!pin_and_verify(t->thread_id, plan->iothread_cpus, what, error))
      return FALSE;
    n_changed++;
  }

  /* Every other thread: the emulator's set, or the caller's where the
   * caller pinned the main thread they came from. Threads come and go
   * (QEMU's worker pool), so one that vanished meanwhile is not an error;
   * they are too many and too short-lived to remember each. */
  g_autofree char *task = g_strdup_printf("/proc/%d/task", k->qemu_pid);
  g_autoptr(GDir) dir = g_dir_open(task, 0, NULL);
  const char *name;
  while (emulator != NULL && dir != NULL &&
         (name = g_dir_read_name(dir)) != NULL) {
    int tid = atoi(name);
    if (tid <= 0 || g_hash_table_contains(done, GINT_TO_POINTER(tid)))
      continue;
    g_auto(hwloc_bitmap_t) had = qp_get_affinity(tid, NULL);
    if (had == NULL ||
        (main_caller != NULL && hwloc_bitmap_isequal(had, main_caller)) ||
        qp_caller_judge(had, emulator, usable, inherited, 2) != QP_PIN_RESET)
      continue;
    if (qp_set_affinity(tid, emulator, NULL))
      n_changed++;
  }
  if (changed)
    *changed = n_changed;
  return TRUE;
}

typedef struct {
  hwloc_bitmap_t dedicated;
  GArray *load;     /* of QpNodeLoad */
  GArray *cpu_load; /* of QpCpuLoad */
} ClaimUse;

/* Ledger edit: the claim's CPUs as the VM uses them (its memory is
 * memory.c's to change). */
static gboolean
set_claim_use(QpClaim *claim, const QpClaims *claims, gpointer data,
              GError **error)
{
  const ClaimUse *u = data;
  hwloc_bitmap_copy(claim->dedicated, u->dedicated);
  g_array_set_size(claim->load, 0);
  g_array_append_vals(claim->load, u->load->data, u->load->len);
  qp_cpu_load_copy(claim->cpu_load, u->cpu_load);
  return TRUE;
}

/* After a look at the threads: the record follows what the VM uses (the
 * cores of vCPUs the caller moved elsewhere are given back, shared vCPUs
 * counted where the caller put them), and one line says what the caller
 * decided and what the claim became. */
static void
follow_caller(Keeper *k, GArray *vcpus, hwloc_const_bitmap_t held_before,
              char *changes)
{
  const QpPlan *plan = k->cfg->plan;
  const QpCallerHost *host = k->cfg->host;
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
    /* A one-to-one vCPU slot not plugged runs nowhere yet (its planned
     * set, the VM's cores, would keep every core in use). */
    if (plan->mode == QP_MODE_ONE_TO_ONE && v >= plan->n_boot_vcpus &&
        !present[v])
      effective[v] = NULL;
    cores[v] = vcpu_core(k, v);
  }
  ClaimUse use = {hwloc_bitmap_alloc(),
                  g_array_new(FALSE, FALSE, sizeof(QpNodeLoad)),
                  qp_cpu_load_array_new()};
  qp_caller_claim(host, effective, cores, own->dedicated, use.dedicated,
                  use.load, use.cpu_load);
  if (!any_caller) {
    g_array_set_size(use.load, 0);
    if (plan->load != NULL)
      g_array_append_vals(use.load, plan->load->data, plan->load->len);
    qp_cpu_load_copy(use.cpu_load, plan->cpu_load);
  }
  /* The record to write, and the news since the look began (a core
   * claimed again on the way is written already). */
  gboolean same = !k->unwritten &&
                  hwloc_bitmap_isequal(use.dedicated, own->dedicated) &&
                  qp_caller_load_equal(use.load, own->load) &&
                  qp_caller_cpu_load_equal(use.cpu_load, own->cpu_load);
  if (changes != NULL || !hwloc_bitmap_isequal(use.dedicated, held_before)) {
    g_autofree char *line =
        qp_caller_look_text(changes, held_before, use.dedicated, use.load);
    klog(k, 1, "%s", line);
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

/* Says which guest memory stays where the caller bound it (host-nodes of
 * its backend), claimed there. */
static void
say_caller_memory(Keeper *k)
{
  const QpPlan *plan = k->cfg->plan;
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
    klog(k, 1, "the caller's memory binding kept: %s, claimed there", s->str);
}

/* Looks at every thread of QEMU: the plan goes back where a thread was
 * reset, the caller's pinning stays, the record follows. */
static gboolean
look_and_apply(Keeper *k, GArray *vcpus, GArray *iothreads, guint *changed,
               GError **error)
{
  k->unwritten |= release_unplugged(k, vcpus);
  /* Cores claimed again on the way are news of this look too. */
  g_auto(hwloc_bitmap_t) held =
      hwloc_bitmap_dup(qp_held_claim_get(k->claim)->dedicated);
  gboolean ok = apply_plan(k, vcpus, iothreads, changed, error);
  if (ok)
    follow_caller(k, vcpus, held, qp_caller_pins_end(k->pins));
  k->next_look_at = g_get_monotonic_time() + (gint64)LOOK_EVERY_MS * 1000;
  return ok;
}

static gboolean
query_and_apply(Keeper *k, guint *changed, GError **error)
{
  g_autoptr(GArray) vcpus = qp_qmp_query_cpus(k->qmp, error);
  if (vcpus == NULL)
    return FALSE;
  g_autoptr(GArray) iothreads = qp_qmp_query_iothreads(k->qmp, error);
  if (iothreads == NULL)
    return FALSE;
  return look_and_apply(k, vcpus, iothreads, changed, error);
}

/* Waits until the monitor has something to say, QEMU exits, or the start
 * timeout passes. */
static gboolean
wait_for_greeting(Keeper *k, GError **error)
{
  struct pollfd p[2] = {{qp_qmp_get_fd(k->qmp), POLLIN, 0},
                        {k->pidfd, POLLIN, 0}};
  int n = k->pidfd >= 0 ? 2 : 1;
  /* Without a pidfd, look at /proc between short waits. */
  int slice = k->pidfd < 0 && watching(k) ? 100 : G_MAXINT;
  gint64 deadline =
      g_get_monotonic_time() + (gint64)k->cfg->start_timeout_ms * 1000;
  for (;;) {
    gint64 left = (deadline - g_get_monotonic_time()) / 1000;
    if (left <= 0) {
      g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
                  "QEMU's monitor did not greet within %u ms (see "
                  "--start-timeout)",
                  k->cfg->start_timeout_ms);
      return FALSE;
    }
    int r = poll(p, (nfds_t)n, (int)MIN(left, slice));
    if (r < 0 && errno == EINTR)
      continue;
    if (r == 0 && k->pidfd < 0 && watching(k) && qemu_gone(k, 0)) {
      g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_QEMU_EXITED,
                  "QEMU exited before its monitor answered");
      return FALSE;
    }
    if (r < 0) {
      g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED, "poll: %s",
                  g_strerror(errno));
      return FALSE;
    }
    if (p[0].revents)
      return TRUE;
    if (n == 2 && p[1].revents) {
      g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_QEMU_EXITED,
                  "QEMU exited before its monitor answered");
      return FALSE;
    }
  }
}

static void
remove_record(Keeper *k)
{
  g_autoptr(GError) error = NULL;
  if (!qp_held_claim_release(k->claim, &error))
    qp_error("keeper: cannot release the claim: %s", error->message);
}

static void
report(Keeper *k, const char *line)
{
  int fd = k->cfg->status_fd;
  if (fd < 0)
    return;
  (void)!write(fd, line, strlen(line));
  close(fd);
  /* The caller may read our stderr until it closes: let it go now that
   * QEMU runs as a daemon. */
  to_dev_null(STDERR_FILENO, O_WRONLY);
}

/* -daemonize before the daemon's PID is known: QEMU is whoever holds the
 * other end of the monitor's socket pair. */
static void
kill_monitor_peers(Keeper *k)
{
  if (k->cfg->qemu_end_ino == 0)
    return;
  g_autofree char *want =
      g_strdup_printf("socket:[%" G_GUINT64_FORMAT "]", k->cfg->qemu_end_ino);
  g_autoptr(GDir) proc = g_dir_open("/proc", 0, NULL);
  const char *name;
  while (proc != NULL && (name = g_dir_read_name(proc)) != NULL) {
    int pid = atoi(name);
    if (pid <= 0 || pid == getpid())
      continue;
    g_autofree char *fds = g_strdup_printf("/proc/%d/fd", pid);
    g_autoptr(GDir) dir = g_dir_open(fds, 0, NULL);
    const char *fd;
    gboolean holds = FALSE;
    while (!holds && dir != NULL && (fd = g_dir_read_name(dir)) != NULL) {
      g_autofree char *link = g_strdup_printf("%s/%s", fds, fd);
      g_autofree char *target = g_file_read_link(link, NULL);
      holds = target != NULL && strcmp(target, want) == 0;
    }
    if (!holds)
      continue;
    int pfd = pidfd_open(pid, 0);
    if (pfd < 0)
      continue;
    pidfd_send_signal(pfd, SIGKILL, NULL, 0);
    struct pollfd p = {pfd, POLLIN, 0};
    poll(&p, 1, 5000);
    close(pfd);
  }
}

static void
report_failure(Keeper *k, const char *line)
{
  if (k->cfg->status_fd >= 0) {
    g_autofree char *l = g_strdup_printf("%s\n", line);
    report(k, l);
  } else {
    qp_error("%s", line);
  }
}

/* Something went wrong after QEMU started: QEMU must not run (or stay
 * paused) without the plan. Kill it, release the claim, say why. */
G_GNUC_NORETURN static void
fail(Keeper *k, GError *error)
{
  /* QEMU exited, or the monitor closed: is QEMU leaving on its own? */
  if (watching(k) &&
      (g_error_matches(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_QEMU_EXITED) ||
       g_error_matches(error, QP_QMP_ERROR, QP_QMP_ERROR_IO))) {
    if (qemu_gone(k, 2000)) {
      g_clear_error(&error);
      remove_record(k);
      /* The plan was in force and the guest ran (and stopped at once):
       * nothing went wrong. */
      if (k->applied) {
        report(k, "ok\n");
        _exit(0);
      }
      /* Before the greeting QEMU always says why it stopped (a bad
       * option, a missing file): a second line would only blur it. */
      if (!k->greeted)
        _exit(1);
      report_failure(k, "QEMU exited before the plan was applied");
      _exit(1);
    }
  }
  if (watching(k)) {
    kill_qemu(k);
    qemu_gone(k, 5000);
  } else {
    kill_monitor_peers(k);
  }
  remove_record(k);
  char *line = g_strdup_printf("QEMU was stopped: %s",
                               error ? error->message : "unknown error");
  g_clear_error(&error);
  report_failure(k, line);
  g_free(line);
  _exit(1);
}

/* SHUTDOWN whose reason makes QEMU exit whatever -no-shutdown says. */
static gboolean
is_exit(JsonObject *ev)
{
  JsonNode *node = json_object_get_member(ev, "data");
  if (node == NULL || !JSON_NODE_HOLDS_OBJECT(node))
    return FALSE;
  const char *reason = json_object_get_string_member_with_default(
      json_node_get_object(node), "reason", "");
  return strcmp(reason, "host-signal") == 0 ||
         strcmp(reason, "host-qmp-quit") == 0;
}

static void
on_event(Keeper *k, JsonObject *ev)
{
  const char *name =
      json_object_get_string_member_with_default(ev, "event", "");
  if (strcmp(name, "SHUTDOWN") == 0 && is_exit(ev) && k->exiting_since == 0) {
    /* No more queries: one in flight is what can hang QEMU's exit. */
    k->exiting_since = g_get_monotonic_time();
    klog(k, 1, "QEMU is exiting");
    return;
  }
  if (k->exiting_since != 0)
    return;
  if (k->mem != NULL && qp_mem_watch_event(name))
    qp_mem_watch_update(k->mem, k->qmp);
  /* RESUME: someone else may have moved threads before resuming (libvirt
   * does). DEVICE_DELETED: an unplugged vCPU gives its core back. */
  if (strcmp(name, "RESUME") != 0 && strcmp(name, "DEVICE_DELETED") != 0)
    return;
  g_autoptr(GError) error = NULL;
  guint changed = 0;
  if (!query_and_apply(k, &changed, &error)) {
    /* QEMU going away while we look is no news. */
    if (!g_error_matches(error, QP_QMP_ERROR, QP_QMP_ERROR_IO))
      qp_error("keeper: re-applying the plan on resume: %s", error->message);
  } else if (changed > 0)
    klog(k, 1, "re-applied the plan to %u threads on resume", changed);
}

/* Holds the claim until QEMU exits, re-applying the plan on RESUME, and
 * looking every LOOK_EVERY_MS whether the caller moved a thread. */
static void
hold(Keeper *k)
{
  gboolean monitor_open = TRUE;
  for (;;) {
    while (monitor_open && qp_qmp_has_event(k->qmp)) {
      g_autoptr(JsonObject) ev = qp_qmp_next_event(k->qmp, 0, NULL);
      if (ev == NULL)
        break;
      on_event(k, ev);
    }
    struct pollfd p[2] = {
        {k->pidfd, POLLIN, 0},
        {monitor_open ? qp_qmp_get_fd(k->qmp) : -1, POLLIN, 0}};
    /* vCPUs and memory may be plugged: there is no QMP event for that, so
     * look. */
    const QpPlan *plan = k->cfg->plan;
    gboolean polling = monitor_open && k->exiting_since == 0 &&
                       (plan->n_vcpus > plan->n_boot_vcpus || k->mem != NULL);
    /* QEMU said it exits: when the next SIGTERM is due. */
    gint64 nudge_at = k->exiting_since == 0
                          ? 0
                          : k->exiting_since +
                                (gint64)NUDGE_AFTER_MS * 1000 * (k->nudges + 1);
    int timeout = polling ? 500 : -1;
    gboolean looking = monitor_open && k->exiting_since == 0;
    if (looking) {
      /* Rounded up: waking before the look is due would spin. */
      gint64 in = (k->next_look_at - g_get_monotonic_time() + 999) / 1000;
      timeout = (int)CLAMP(in, 0, timeout < 0 ? LOOK_EVERY_MS : timeout);
    }
    if (nudge_at != 0)
      timeout = (int)MAX(0, (nudge_at - g_get_monotonic_time()) / 1000);
    if (k->pidfd < 0 && (timeout < 0 || timeout > 200))
      timeout = 200; /* no pidfd: look at /proc */
    int r = poll(p, 2, timeout);
    if (r < 0 && errno == EINTR)
      continue;
    if (k->pidfd < 0 && qemu_gone(k, 0))
      return; /* QEMU exited */
    if (r == 0 && nudge_at != 0 && g_get_monotonic_time() >= nudge_at) {
      k->nudges++;
      if (k->nudges == 1)
        qp_info("keeper: QEMU (pid %d) is still there %d ms after it began "
                "to exit: sending SIGTERM again",
                k->qemu_pid, NUDGE_AFTER_MS);
      signal_qemu(k, SIGTERM);
      continue;
    }
    gboolean look_due = looking && g_get_monotonic_time() >= k->next_look_at;
    if (r == 0 && (polling || look_due)) {
      /* vCPUs that may be plugged are looked for through QMP on every
       * tick; otherwise a look through QMP only when a thread moved:
       * sched_getaffinity alone tells that. */
      gboolean vcpu_poll = polling && plan->n_vcpus > plan->n_boot_vcpus;
      if (vcpu_poll || (look_due && qp_caller_pins_moved(k->pins))) {
        g_autoptr(GError) error = NULL;
        if (!query_and_apply(k, NULL, &error) &&
            !g_error_matches(error, QP_QMP_ERROR, QP_QMP_ERROR_IO))
          qp_error("keeper: %s", error->message);
      } else if (look_due) {
        k->next_look_at = g_get_monotonic_time() + (gint64)LOOK_EVERY_MS * 1000;
      }
      if (polling && k->mem != NULL)
        qp_mem_watch_update(k->mem, k->qmp);
      continue;
    }
    if (r == 0)
      continue;
    if (p[0].revents)
      return; /* QEMU exited */
    if (p[1].revents) {
      g_autoptr(GError) error = NULL;
      g_autoptr(JsonObject) ev = qp_qmp_next_event(k->qmp, 0, &error);
      if (ev != NULL)
        on_event(k, ev);
      else if (error != NULL)
        monitor_open = FALSE; /* QEMU is going away: wait for it */
    }
  }
}

void
qp_keeper_main(const QpKeeperConfig *cfg)
{
  Keeper keeper = {.cfg = cfg,
                   .qemu_pid = cfg->qemu_pid,
                   .pidfd = -1,
                   .t0 = g_get_monotonic_time()};
  Keeper *k = &keeper;
  GError *error = NULL;

  k->plugged = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL,
                                     (GDestroyNotify)hwloc_bitmap_free);
  k->plugged_pu = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL,
                                        (GDestroyNotify)hwloc_bitmap_free);
  k->warned = g_hash_table_new(g_direct_hash, g_direct_equal);
  k->fallback = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL,
                                      (GDestroyNotify)hwloc_bitmap_free);
  k->pins = qp_caller_pins_new(cfg->plan->n_vcpus);
  /* The launcher learns our PID after the fork: our claim must know it
   * too, since we rewrite the record (daemon PID, hot-plugged cores). */
  k->claim = qp_held_claim_adopt(cfg->state_dir, cfg->claim);
  prctl(PR_SET_NAME, "qemu-pin-keeper", 0, 0, 0);
  signal(SIGINT, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);
  close_inherited(cfg);
  to_dev_null(STDIN_FILENO, O_RDONLY);
  to_dev_null(STDOUT_FILENO, O_WRONLY);
  if (chdir("/") < 0) {
    /* harmless */
  }

  if (cfg->qemu_pid > 0)
    watch_qemu(k, cfg->qemu_pid);
  k->qmp = qp_qmp_new(cfg->qmp_fd, cfg->qmp_timeout_ms);

  if (!wait_for_greeting(k, &error))
    fail(k, error);
  if (!qp_qmp_handshake(k->qmp, &error))
    fail(k, error);
  k->greeted = TRUE;
  klog(k, 1, "QMP greeting and capabilities");

  g_autoptr(GArray) vcpus = qp_qmp_query_cpus(k->qmp, &error);
  if (vcpus == NULL)
    fail(k, error);
  if (vcpus->len == 0) {
    g_set_error(&error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
                "query-cpus-fast reports no vCPU");
    fail(k, error);
  }
  int tgid = tgid_of(g_array_index(vcpus, QpVcpu, 0).thread_id);
  if (tgid <= 0) {
    g_set_error(&error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
                "vCPU 0: thread %d is gone",
                g_array_index(vcpus, QpVcpu, 0).thread_id);
    fail(k, error);
  }
  if (k->qemu_pid > 0 && tgid != k->qemu_pid) {
    g_set_error(&error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
                "vCPU threads belong to process %d, not to QEMU (%d)", tgid,
                k->qemu_pid);
    fail(k, error);
  }
  if (!watching(k) && !watch_qemu(k, tgid)) {
    g_set_error(&error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
                "QEMU (pid %d) is gone", tgid);
    fail(k, error);
  }
  klog(k, 1, "QEMU is pid %d with %u vCPUs", k->qemu_pid, vcpus->len);

  g_autoptr(GArray) iothreads = qp_qmp_query_iothreads(k->qmp, &error);
  if (iothreads == NULL)
    fail(k, error);
  say_caller_memory(k);
  guint changed = 0;
  if (!look_and_apply(k, vcpus, iothreads, &changed, &error))
    fail(k, error);
  k->applied = TRUE;
  klog(k, 1, "pinned %u threads (%u vCPUs, %u iothreads)", changed, vcpus->len,
       iothreads->len);
  if (cfg->mem_hotplug)
    k->mem = qp_mem_watch_new(cfg, k->claim, k->qmp);

  /* The daemon now keeps the record alive; the launcher is about to go. */
  if (cfg->daemonize && !qp_held_claim_set_qemu(k->claim, k->qemu_pid, &error))
    fail(k, error);

  if (cfg->send_cont) {
    g_autoptr(JsonNode) r = qp_qmp_execute(k->qmp, "cont", NULL, &error);
    if (r == NULL)
      fail(k, error);
    klog(k, 1, "cont");
    /* Events queued meanwhile: the RESUME of our own cont, and maybe one of
     * the caller's after it moved threads. One more look covers both; a
     * guest that stopped at once may already be gone, which is no news. */
    gboolean resumed = FALSE;
    while (qp_qmp_has_event(k->qmp)) {
      g_autoptr(JsonObject) ev = qp_qmp_next_event(k->qmp, 0, NULL);
      if (ev == NULL)
        break;
      resumed |=
          g_strcmp0(json_object_get_string_member_with_default(ev, "event", ""),
                    "RESUME") == 0;
    }
    if (resumed) {
      g_autoptr(GError) again = NULL;
      if (!query_and_apply(k, NULL, &again))
        klog(k, 1, "after cont: %s", again->message);
    }
  }
  report(k, "ok\n");
  /* Held until QEMU exits, then _exit: free what is no longer needed. */
  g_clear_pointer(&vcpus, g_array_unref);
  g_clear_pointer(&iothreads, g_array_unref);

  /* From now on a query that times out is only tried again later; and the
   * one in flight when QEMU hangs on its way out (see NUDGE_AFTER_MS) keeps
   * the keeper from seeing SHUTDOWN until it times out. */
  qp_qmp_set_timeout(k->qmp, MIN(cfg->qmp_timeout_ms, HOLD_QMP_TIMEOUT_MS));
  hold(k);
  klog(k, 1, "QEMU exited; releasing the claim");
  remove_record(k);
  _exit(0);
}
