/* The keeper: a detached process per VM that talks to QEMU over the private
 * monitor, applies the plan to every thread, resumes the guest, re-applies
 * the plan where someone else reset a thread (keeping what the caller pinned
 * itself: caller-pinning.h), claims memory plugged later (memory.h),
 * and releases the VM's claim when QEMU exits. The keeper holds the VM's
 * claim (QpHeldClaim, adopted from the launcher): every change to its
 * record is a qp_held_claim_adjust(), each edit changing only its own
 * fields of the claim. */
#include "launcher/keeper/state.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launcher/keeper/migrate.h"
#include "launcher/log.h"
#include "topology/base/proc.h"

#define HOLD_QMP_TIMEOUT_MS 3000

/* How long after QEMU's greeting the keeper of a plan that does not pause
 * waits before its first command (greet()): longer than QEMU takes from
 * its greeting to a running guest for a small VM (tens of ms under TCG on
 * the benchmark hosts, whose whole start is 60-80 ms), short beside
 * anything a caller does to a VM it has just started. */
#define FIRST_LOOK_AFTER_MS 200
/* Between two looks for the vCPUs of a QEMU waiting in --preconfig. */
#define PRECONFIG_LOOK_MS 100

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
    if (fd > 2 && fd != dfd && fd != cfg->qmp_fd && fd != cfg->status_fd &&
        fd != cfg->guard_fd)
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

static void
release_claim(Keeper *k)
{
  g_autoptr(GError) error = NULL;
  if (!qp_held_claim_release(k->claim, &error))
    qp_error("keeper: cannot release the claim: %s", error->message);
}

static void
report(Keeper *k, const char *line)
{
  int fd = k->cfg->status_fd;
  if (fd < 0 || k->reported)
    return;
  k->reported = TRUE;
  (void)!write(fd, line, strlen(line));
  close(fd);
  /* The caller may read our stderr until it closes: let it go now that
   * QEMU runs as a daemon. */
  to_dev_null(STDERR_FILENO, O_WRONLY);
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

/* The guest runs, or QEMU is gone: the guard may go. */
static void
stop_guard(Keeper *k)
{
  if (k->guard_fd < 0)
    return;
  (void)!write(k->guard_fd, "r", 1);
  close(k->guard_fd);
  k->guard_fd = -1;
}

/* QEMU left on its own: the claim goes back, and the launcher (under
 * -daemonize) hears whether the plan was in force while it ran. */
G_GNUC_NORETURN static void
qemu_left(Keeper *k)
{
  stop_guard(k);
  release_claim(k);
  /* The plan was in force and the guest ran (and stopped at once):
   * nothing went wrong. Unpaused, it was from QEMU's first instruction. */
  if (k->applied || !k->cfg->paused) {
    report(k, "ok\n");
    _exit(0);
  }
  /* Before the greeting QEMU always says why it stopped (a bad option, a
   * missing file): a second line would only blur it. */
  if (!k->greeted)
    _exit(1);
  report_failure(k, "QEMU exited before the plan was applied");
  _exit(1);
}

/* Something went wrong after QEMU started: QEMU must not run (or stay
 * paused) without the plan. Kill it, release the claim, say why. */
G_GNUC_NORETURN static void
fail(Keeper *k, GError *error)
{
  /* What comes of QEMU is this keeper's to say. */
  stop_guard(k);
  /* QEMU exited, or the monitor closed: is QEMU leaving on its own? */
  gboolean closed =
      g_error_matches(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_QEMU_EXITED) ||
      g_error_matches(error, QP_QMP_ERROR, QP_QMP_ERROR_IO);
  /* A daemon whose PID is not known yet is gone when nothing holds its
   * end of the monitor any more. */
  if (closed && !qp_keeper_watching(k) && !k->cfg->paused &&
      !qp_keeper_monitor_peers(k, FALSE)) {
    g_clear_error(&error);
    qemu_left(k);
  }
  /* QEMU said it exits while a command was in flight (a SIGTERM before
   * the first look): it may hang on its way out until nudged. */
  for (guint i = 0; closed && qp_keeper_watching(k) && k->qmp != NULL &&
                    qp_qmp_exiting(k->qmp) && i < 10;
       i++) {
    if (qp_keeper_qemu_gone(k, NUDGE_AFTER_MS)) {
      g_clear_error(&error);
      qemu_left(k);
    }
    qp_keeper_nudge(k);
  }
  /* Any other error may come of QEMU leaving too (its vCPU threads gone
   * first): a short look is enough to tell. */
  if (qp_keeper_watching(k) && qp_keeper_qemu_gone(k, closed ? 2000 : 200)) {
    g_clear_error(&error);
    qemu_left(k);
  }
  if (qp_keeper_watching(k)) {
    qp_keeper_signal_qemu(k, SIGKILL);
    qp_keeper_qemu_gone(k, 5000);
  } else {
    qp_keeper_monitor_peers(k, TRUE);
  }
  release_claim(k);
  char *line = g_strdup_printf("QEMU was stopped: %s",
                               error ? error->message : "unknown error");
  g_clear_error(&error);
  report_failure(k, line);
  g_free(line);
  g_clear_pointer(&k->first_vcpus, g_array_unref);
  g_clear_pointer(&k->first_iothreads, g_array_unref);
  _exit(1);
}

/* Detaches from the launcher: its descriptors, stdio, signals, working
 * directory; the keeper holds the VM's claim from now on. */
static void
detach(Keeper *k)
{
  const QpKeeperConfig *cfg = k->cfg;
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
}

/* Whether the first look asks QEMU for its iothreads: when the command
 * line has some. QEMU reads a monitor's input one byte per pass of its
 * loop, each pass a few microseconds, so every byte sent before cont
 * holds up a paused guest's start (docs/design.md, "Where a paused
 * start's time goes"). An iothread a caller adds over its own monitor
 * before the first look is found, as one added at any later time, by the
 * look every LOOK_EVERY_MS; until then it runs where the process may. */
static gboolean
first_look_iothreads(const Keeper *k)
{
  return k->cfg->req == NULL || k->cfg->req->n_iothreads > 0;
}

/* Waits for QEMU's greeting and negotiates capabilities. */
static void
greet(Keeper *k)
{
  GError *error = NULL;
  /* The launcher, which was to become QEMU, gone already (killed before
   * its exec, and reaped): QEMU never ran, and its caller knows why. The
   * claim goes back, with no line about a QEMU stopped. */
  if (k->cfg->qemu_pid > 0 && !qp_keeper_watch_qemu(k, k->cfg->qemu_pid))
    qemu_left(k);
  k->qmp = qp_qmp_new(k->cfg->qmp_fd, k->cfg->qmp_timeout_ms);
  if (!qp_keeper_wait_for_greeting(k, &error))
    fail(k, error);
  /* Unpaused, the plan is in force from QEMU's first instruction and the
   * first look only learns and checks. QEMU runs every command on its main
   * loop, holding its big lock, and the greeting comes before its start is
   * over: commands sent now run as the guest starts and hold up its first
   * steps. So the first look waits; QEMU sends no event before
   * qmp_capabilities, and what changes meanwhile (the caller's pins, memory
   * it plugs) the look finds all the same. */
  if (!k->cfg->paused && !k->cfg->daemonize &&
      qp_keeper_qemu_gone(k, FIRST_LOOK_AFTER_MS))
    qemu_left(k);
  /* The first look's queries go with qmp_capabilities: one round trip. */
  const char *first_look_queries[] = {"query-cpus-fast", NULL, NULL};
  if (first_look_iothreads(k))
    first_look_queries[1] = "query-iothreads";
  if (!qp_qmp_handshake_ahead(k->qmp, first_look_queries, &error))
    fail(k, error);
  k->greeted = TRUE;
  k->greeted_waited_us = qp_qmp_waited_us(k->qmp);
  qp_keeper_log(k, 1, "QMP greeting and capabilities");
}

/* QEMU is the process of the vCPU threads: with -daemonize, the keeper
 * learns its PID here. */
static void
find_qemu(Keeper *k, GArray *vcpus)
{
  GError *error = NULL;
  if (vcpus->len == 0) {
    g_set_error(&error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
                "query-cpus-fast reports no vCPU");
    fail(k, error);
  }
  int tid = g_array_index(vcpus, QpVcpu, 0).thread_id;
  int tgid = qp_keeper_tgid_of(tid);
  if (tgid <= 0) {
    g_set_error(&error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
                "vCPU 0: thread %d is gone", tid);
    fail(k, error);
  }
  if (k->qemu_pid > 0 && tgid != k->qemu_pid) {
    g_set_error(&error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
                "vCPU threads belong to process %d, not to QEMU (%d)", tgid,
                k->qemu_pid);
    fail(k, error);
  }
  if (!qp_keeper_watching(k) && !qp_keeper_watch_qemu(k, tgid)) {
    g_set_error(&error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
                "QEMU (pid %d) is gone", tgid);
    fail(k, error);
  }
  qp_keeper_log(k, 1, "QEMU is pid %d with %u vCPUs", k->qemu_pid, vcpus->len);
}

/* Whether ERROR is QEMU's refusal of a query before its machine is
 * initialised: under --preconfig, until the caller's x-exit-preconfig. */
static gboolean
before_machine_init(const GError *error)
{
  return g_error_matches(error, QP_QMP_ERROR, QP_QMP_ERROR_COMMAND) &&
         strstr(error->message, "permitted only after machine "
                                "initialization") != NULL;
}

/* --preconfig: QEMU has no vCPU until the caller's x-exit-preconfig, and
 * waits for it as long as the caller likes (QEMU started paused by
 * qemu-pin stays so after it). Asks again every PRECONFIG_LOOK_MS until
 * the vCPUs are there; a QEMU that leaves meanwhile is no failure. */
static GArray *
query_cpus_after_preconfig(Keeper *k, GError **error)
{
  qp_keeper_log(k, 1, "QEMU waits in --preconfig: the first look waits");
  for (;;) {
    g_clear_error(error);
    if (!qp_keeper_watching(k))
      g_usleep(PRECONFIG_LOOK_MS * 1000);
    else if (qp_keeper_qemu_gone(k, PRECONFIG_LOOK_MS))
      qemu_left(k);
    GArray *vcpus = qp_qmp_query_cpus(k->qmp, error);
    if (vcpus != NULL || !before_machine_init(*error))
      return vcpus;
  }
}

/* -daemonize with --preconfig: QEMU's first process returns as soon as
 * its daemon waits for the caller's x-exit-preconfig, which the caller
 * sends once qemu-pin has returned, as QEMU alone does. The daemon is
 * found by its end of the monitor (the processes before it gone), the
 * record names it and the launcher hears "ok": the plan's CPUs and memory
 * binding are the process's from its start, and a plan that pauses keeps
 * the guest paused (-S) until the first look, after x-exit-preconfig, has
 * pinned. */
static void
daemon_in_preconfig(Keeper *k)
{
  GError *error = NULL;
  int pid = qp_keeper_monitor_daemon(k, k->cfg->start_timeout_ms, &error);
  if (pid <= 0)
    fail(k, error);
  if (!qp_keeper_watch_qemu(k, pid)) {
    g_set_error(&error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_QEMU_EXITED,
                "QEMU (pid %d) is gone", pid);
    fail(k, error);
  }
  if (!qp_held_claim_set_qemu(k->claim, k->qemu_pid, &error))
    fail(k, error);
  qp_keeper_log(k, 1, "QEMU is daemon %d, waiting in --preconfig", pid);
  report(k, "ok\n");
}

/* The first look at QEMU's threads: every one goes where the plan says,
 * unless the caller pinned it itself. A paused start keeps the threads it
 * found (k->first_vcpus, k->first_iothreads) for resume(). */
static void
first_look(Keeper *k)
{
  GError *error = NULL;
  g_autoptr(GArray) vcpus = qp_qmp_query_cpus(k->qmp, &error);
  if (vcpus == NULL && before_machine_init(error)) {
    if (k->cfg->daemonize)
      daemon_in_preconfig(k);
    vcpus = query_cpus_after_preconfig(k, &error);
  }
  if (vcpus == NULL)
    fail(k, error);
  find_qemu(k, vcpus);
  g_autoptr(GArray) iothreads =
      first_look_iothreads(k) ? qp_qmp_query_iothreads(k->qmp, &error)
                              : g_array_new(FALSE, TRUE, sizeof(QpIothread));
  if (iothreads == NULL)
    fail(k, error);
  qp_keeper_say_caller_memory(k);
  guint changed = 0;
  if (!qp_keeper_look_and_apply(k, vcpus, iothreads, &changed, &error))
    fail(k, error);
  k->applied = TRUE;
  qp_keeper_log(k, 1, "pinned %u threads (%u vCPUs, %u iothreads)", changed,
                vcpus->len, iothreads->len);
  /* Unpaused, the guest was never held: this look is all there was. */
  if (!k->cfg->paused)
    qp_keeper_log(
        k, 1,
        "waited %.3f ms for QEMU's replies between the greeting and the "
        "first look",
        (double)(qp_qmp_waited_us(k->qmp) - k->greeted_waited_us) / 1000.0);
  if (k->cfg->paused) {
    k->first_vcpus = g_steal_pointer(&vcpus);
    k->first_iothreads = g_steal_pointer(&iothreads);
  }
}

/* Resumes the guest qemu-pin started paused. */
static void
resume(Keeper *k)
{
  GError *error = NULL;
  g_autoptr(QpJv) r = qp_qmp_execute(k->qmp, "cont", NULL, &error);
  if (r == NULL)
    fail(k, error);
  qp_keeper_log(k, 1, "cont");
  qp_keeper_log(
      k, 1, "waited %.3f ms for QEMU's replies between the greeting and cont",
      (double)(qp_qmp_waited_us(k->qmp) - k->greeted_waited_us) / 1000.0);
  /* Events queued meanwhile: the RESUME of our own cont, and maybe one of
   * the caller's after it moved threads. One more look covers both; a
   * guest that stopped at once may already be gone, which is no news.
   * When our RESUME is all there is, the threads are those of the first
   * look, and the look reads their CPUs without asking QEMU: a query now
   * would run beside the guest's first steps (greet()). A caller's pins
   * are found all the same; a vCPU plugged meanwhile, by the look every
   * LOOK_EVERY_MS, as one plugged later. */
  guint resumes = 0, others = 0;
  while (qp_qmp_has_event(k->qmp)) {
    g_autoptr(QpJv) ev = qp_qmp_next_event(k->qmp, 0, NULL);
    if (ev == NULL)
      break;
    if (strcmp(qp_jv_get_string_or(ev, "event", ""), "RESUME") == 0)
      resumes++;
    else
      others++;
  }
  g_autoptr(GArray) vcpus = g_steal_pointer(&k->first_vcpus);
  g_autoptr(GArray) iothreads = g_steal_pointer(&k->first_iothreads);
  if (resumes == 0)
    return;
  g_autoptr(GError) again = NULL;
  gboolean ok =
      resumes == 1 && others == 0
          ? qp_keeper_look_and_apply(k, vcpus, iothreads, NULL, &again)
          : qp_keeper_query_and_apply(k, NULL, &again);
  if (!ok)
    qp_keeper_log(k, 1, "after cont: %s", again->message);
}

void
qp_keeper_main(const QpKeeperConfig *cfg)
{
  Keeper keeper = {.cfg = cfg,
                   .plan = cfg->plan,
                   .host = cfg->host,
                   .control_fd = -1,
                   .qemu_pid = cfg->qemu_pid,
                   .pidfd = -1,
                   .guard_fd = cfg->guard_fd,
                   .t0 = g_get_monotonic_time()};
  Keeper *k = &keeper;
  GError *error = NULL;

  detach(k);
  greet(k);
  first_look(k);
  if (cfg->mem_hotplug)
    k->mem = qp_mem_watch_new(cfg, &k->plan, k->claim, k->qmp);
  /* The daemon now keeps the record alive; the launcher is about to go. */
  if (cfg->daemonize && !qp_held_claim_set_qemu(k->claim, k->qemu_pid, &error))
    fail(k, error);
  if (cfg->paused)
    resume(k);
  stop_guard(k);
  report(k, "ok\n");
  qp_keeper_control_open(k);

  /* From now on a query that times out is only tried again later; and the
   * one in flight when QEMU hangs on its way out (see NUDGE_AFTER_MS) keeps
   * the keeper from seeing SHUTDOWN until it times out. */
  qp_qmp_set_timeout(k->qmp, MIN(cfg->qmp_timeout_ms, HOLD_QMP_TIMEOUT_MS));
  qp_keeper_hold(k);
  qp_keeper_log(k, 1, "QEMU exited; releasing the claim");
  qp_mem_cgroup_remove(qp_held_claim_get(k->claim)->id);
  release_claim(k);
  _exit(0);
}
