/* The keeper: a detached process per VM that talks to QEMU over the private
 * monitor, applies the plan to every thread, resumes the guest, re-applies
 * the plan whenever the guest is resumed by someone else, and releases the
 * VM's claim when QEMU exits. */
#include "launcher/keeper-memory.h"
#include "launcher/launch.h"
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

typedef struct {
  const QpKeeperConfig *cfg;
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

/* Claims a free core for hot-plugged vCPU INDEX (one-to-one) in the
 * ledger: the first of the plan's spare cores that no VM holds now. */
static hwloc_bitmap_t
claim_core(Keeper *k, int index, GError **error)
{
  const QpPlan *plan = k->cfg->plan;
  QpClaim *own = k->cfg->claim;
  g_autoptr(QpLedger) ledger = qp_ledger_open(k->cfg->state_dir, error);
  if (ledger == NULL || !qp_ledger_lock(ledger, error))
    return NULL;
  g_autoptr(QpClaims) claims = qp_ledger_read(ledger, NULL, error);
  if (claims == NULL) {
    qp_ledger_unlock(ledger);
    return NULL;
  }
  g_auto(hwloc_bitmap_t) taken = hwloc_bitmap_dup(own->dedicated);
  for (guint i = 0; i < claims->claims->len; i++) {
    const QpClaim *c = g_ptr_array_index(claims->claims, i);
    if (g_strcmp0(c->id, own->id) != 0)
      hwloc_bitmap_or(taken, taken, c->dedicated);
  }
  hwloc_bitmap_t core = NULL;
  for (guint i = 0; i < plan->hotplug_cores->len && core == NULL; i++) {
    hwloc_const_bitmap_t c = g_ptr_array_index(plan->hotplug_cores, i);
    if (!hwloc_bitmap_intersects(c, taken))
      core = hwloc_bitmap_dup(c);
  }
  if (core == NULL) {
    qp_ledger_unlock(ledger);
    g_autofree char *mine = qp_list_format(own->dedicated);
    g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
                "vCPU %d was plugged but no core is free for it: it shares "
                "the VM's cores %s",
                index, mine);
    return NULL;
  }
  hwloc_bitmap_or(own->dedicated, own->dedicated, core);
  gboolean ok = qp_ledger_write(ledger, own, error);
  qp_ledger_unlock(ledger);
  if (!ok) {
    hwloc_bitmap_andnot(own->dedicated, own->dedicated, core);
    hwloc_bitmap_free(core);
    return NULL;
  }
  return core;
}

/* Gives back the cores of vCPUs that were unplugged. */
static void
release_unplugged(Keeper *k, GArray *vcpus)
{
  if (k->plugged == NULL || g_hash_table_size(k->plugged) == 0)
    return;
  g_autoptr(GList) keys = g_hash_table_get_keys(k->plugged);
  gboolean changed = FALSE;
  for (GList *l = keys; l != NULL; l = l->next) {
    int index = GPOINTER_TO_INT(l->data);
    gboolean present = FALSE;
    for (guint i = 0; i < vcpus->len && !present; i++)
      present = g_array_index(vcpus, QpVcpu, i).cpu_index == index;
    if (present)
      continue;
    hwloc_const_bitmap_t core = g_hash_table_lookup(k->plugged, l->data);
    hwloc_bitmap_andnot(k->cfg->claim->dedicated, k->cfg->claim->dedicated,
                        core);
    g_autofree char *list = qp_list_format(core);
    klog(k, 1, "vCPU %d was unplugged: core %s released", index, list);
    g_hash_table_remove(k->plugged, l->data);
    g_hash_table_remove(k->plugged_pu, l->data);
    g_hash_table_remove(k->warned, l->data);
    changed = TRUE;
  }
  if (!changed)
    return;
  g_autoptr(GError) error = NULL;
  g_autoptr(QpLedger) ledger = qp_ledger_open(k->cfg->state_dir, &error);
  if (ledger == NULL || !qp_ledger_lock(ledger, &error)) {
    qp_error("keeper: %s", error->message);
    return;
  }
  if (!qp_ledger_write(ledger, k->cfg->claim, &error))
    qp_error("keeper: %s", error->message);
  qp_ledger_unlock(ledger);
}

/* Where vCPU INDEX belongs: its planned set, or for a vCPU plugged into a
 * one-to-one VM the core claimed for it (claimed now if need be). */
static hwloc_const_bitmap_t
vcpu_target(Keeper *k, int index)
{
  const QpPlan *plan = k->cfg->plan;
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

/* Applies the plan to every thread of QEMU: vCPUs to their sets, iothreads
 * to theirs, every other thread (main loop, RCU, workers) to the emulator
 * set. Returns the number of threads whose affinity had to change. */
static gboolean
apply_plan(Keeper *k, GArray *vcpus, GArray *iothreads, guint *changed,
           GError **error)
{
  const QpPlan *plan = k->cfg->plan;
  g_autoptr(GHashTable) done = g_hash_table_new(g_direct_hash, g_direct_equal);
  guint n_changed = 0;

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
    if (want != NULL && !hwloc_bitmap_isequal(had, want)) {
      if (!pin_and_verify(v->thread_id, want, what, error))
        return FALSE;
      n_changed++;
    }
    g_hash_table_add(done, GINT_TO_POINTER(v->thread_id));
  }
  for (guint i = 0; iothreads != NULL && i < iothreads->len; i++) {
    QpIothread *t = &g_array_index(iothreads, QpIothread, i);
    g_autofree char *what = g_strdup_printf("iothread %s", t->id);
    g_auto(hwloc_bitmap_t) had = qp_get_affinity(t->thread_id, NULL);
    if (had != NULL && plan->iothread_cpus != NULL &&
        !hwloc_bitmap_isequal(had, plan->iothread_cpus)) {
      if (!pin_and_verify(t->thread_id, plan->iothread_cpus, what, error))
        return FALSE;
      n_changed++;
    }
    g_hash_table_add(done, GINT_TO_POINTER(t->thread_id));
  }

  /* Every other thread: the emulator's set. Threads come and go (QEMU's
   * worker pool), so one that vanished meanwhile is not an error. */
  g_autofree char *task = g_strdup_printf("/proc/%d/task", k->qemu_pid);
  g_autoptr(GDir) dir = g_dir_open(task, 0, NULL);
  const char *name;
  while (dir != NULL && (name = g_dir_read_name(dir)) != NULL) {
    int tid = atoi(name);
    if (tid <= 0 || g_hash_table_contains(done, GINT_TO_POINTER(tid)))
      continue;
    if (plan->emulator_cpus == NULL || hwloc_bitmap_iszero(plan->emulator_cpus))
      continue;
    g_auto(hwloc_bitmap_t) had = qp_get_affinity(tid, NULL);
    if (had == NULL || hwloc_bitmap_isequal(had, plan->emulator_cpus))
      continue;
    g_autoptr(GError) local = NULL;
    if (!qp_set_affinity(tid, plan->emulator_cpus, &local)) {
      if (tid == k->qemu_pid) {
        g_propagate_prefixed_error(error, g_steal_pointer(&local),
                                   "emulator thread: ");
        return FALSE;
      }
      continue;
    }
    n_changed++;
  }
  if (changed)
    *changed = n_changed;
  return TRUE;
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
  release_unplugged(k, vcpus);
  return apply_plan(k, vcpus, iothreads, changed, error);
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
      g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
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
      g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
                  "QEMU exited before its monitor answered");
      return FALSE;
    }
  }
}

static void
remove_record(Keeper *k)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(QpLedger) ledger = qp_ledger_open(k->cfg->state_dir, &error);
  if (ledger == NULL || !qp_ledger_remove(ledger, k->cfg->claim->id, &error))
    qp_error("keeper: cannot release the claim: %s", error->message);
}

static gboolean
update_record(Keeper *k, GError **error)
{
  QpClaim *claim = k->cfg->claim;
  claim->qemu_pid = k->qemu_pid;
  claim->qemu_start = qp_proc_start_time(k->qemu_pid);
  /* The daemon now keeps the record alive; the launcher is about to go. */
  claim->launcher_pid = 0;
  claim->launcher_start = 0;
  g_autoptr(QpLedger) ledger = qp_ledger_open(k->cfg->state_dir, error);
  if (ledger == NULL || !qp_ledger_lock(ledger, error))
    return FALSE;
  gboolean ok = qp_ledger_write(ledger, claim, error);
  qp_ledger_unlock(ledger);
  return ok;
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
  /* The monitor closed: is QEMU leaving on its own? */
  gboolean left = g_strcmp0(error ? error->message : NULL,
                            "QEMU exited before its monitor answered") == 0;
  if (watching(k) &&
      (left || g_error_matches(error, QP_QMP_ERROR, QP_QMP_ERROR_IO))) {
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

/* Holds the claim until QEMU exits, re-applying the plan on RESUME. */
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
    if (r == 0 && polling) {
      g_autoptr(GError) error = NULL;
      if (plan->n_vcpus > plan->n_boot_vcpus &&
          !query_and_apply(k, NULL, &error) &&
          !g_error_matches(error, QP_QMP_ERROR, QP_QMP_ERROR_IO))
        qp_error("keeper: %s", error->message);
      if (k->mem != NULL)
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
  /* The launcher learns our PID after the fork: our copy must know it
   * too, since we rewrite the record (daemon PID, hot-plugged cores). */
  cfg->claim->keeper_pid = getpid();
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
  guint changed = 0;
  if (!apply_plan(k, vcpus, iothreads, &changed, &error))
    fail(k, error);
  k->applied = TRUE;
  klog(k, 1, "pinned %u threads (%u vCPUs, %u iothreads)", changed, vcpus->len,
       iothreads->len);
  if (cfg->mem_hotplug)
    k->mem = qp_mem_watch_new(cfg, k->qmp);

  if (cfg->daemonize && !update_record(k, &error))
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
