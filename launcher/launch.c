/* One launch (see launch.h): the host, the plan and the VM's claim in one
 * critical section of the ledger, with QEMU's command line rewritten and
 * the keeper started inside it; then QEMU exec'd in place, or with
 * -daemonize run as a child we wait for, with the keeper. A launch that
 * fails after the claim releases it; the error goes back to the edge
 * (commands.c), which says it. */
#include "launcher/launch.h"
#include "launcher/affinity.h"
#include "launcher/front/front.h"
#include "launcher/hand-over.h"
#include "launcher/keeper/keeper.h"
#include "launcher/log.h"
#include "launcher/qemu/device-buses.h"
#include "launcher/qemu/memory.h"
#include "launcher/qemu/rewrite.h"
#include "topology/base/proc.h"
#include "topology/host/snapshot.h"
#include "topology/plan/capacity.h"
#include "topology/plan/claim.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- Exec --------------------------------------------------------------- */

void
qp_exec(const char *binary, char **argv, GError **error)
{
  qp_timing("exec");
  if (strchr(binary, '/') != NULL)
    execv(binary, argv);
  else
    execvp(binary, argv);
  int saved = errno;
  /* "qemu-pin help", "qemu-pin stauts": a word looked for on PATH that
   * names no QEMU may have been meant for qemu-pin itself. */
  gboolean mistyped = saved == ENOENT && strchr(binary, '/') == NULL &&
                      strstr(binary, "qemu") == NULL &&
                      strstr(binary, "kvm") == NULL;
  /* "qemu-pin --mode=none status": a command of qemu-pin's, not first. */
  g_autofree char *first = g_strdup_printf(
      "; qemu-pin's command %s comes first, before any option (qemu-pin %s "
      "[OPTIONS])",
      binary, binary);
  g_set_error(error, QP_LAUNCH_ERROR,
              saved == ENOENT ? QP_LAUNCH_ERROR_NO_BINARY
                              : QP_LAUNCH_ERROR_EXEC,
              "cannot run QEMU binary '%s': %s%s", binary, g_strerror(saved),
              !mistyped ? ""
              : qp_front_is_command(binary)
                  ? first
                  : "; nor is it a command of qemu-pin's (plan, "
                    "topology, status, move, rebalance: see qemu-pin "
                    "--help)");
}

/* ---- Planning ------------------------------------------------------------ */

QpQemuArgs *
qp_launch_read(const QpOptions *opts, guint argc, char **argv, GError **error)
{
  if (opts->placement.mode == QP_MODE_NONE)
    return NULL;
  QpQemuArgs *a = qp_qemu_args_parse(argc, argv, error);
  if (a == NULL || opts->topology == NULL || a->req->io == NULL)
    return a;
  /* Files and network interfaces were traced to PCI devices through this
   * machine's sysfs: on a recorded host (--topology) those addresses name
   * other devices, if any. (vfio-pci's host= is the caller's, kept.) */
  for (guint i = 0; i < a->req->io->len; i++)
    g_clear_pointer(&((QpIoDevice *)a->req->io->pdata[i])->bdf, g_free);
  return a;
}

static void
print_warnings(GPtrArray *warnings)
{
  for (guint i = 0; warnings != NULL && i < warnings->len; i++)
    qp_warning("%s", (const char *)warnings->pdata[i]);
}

char *
qp_launch_state_dir(const QpOptions *opts)
{
  g_autofree char *why = NULL;
  char *dir = qp_state_dir_for(opts->state_dir, &why);
  if (why != NULL)
    qp_warning("%s", why);
  return dir;
}

/* Whether the VM has a device on a host PCI device: vfio-pci, or storage
 * or network found on one. */
static gboolean
has_host_devices(const QpRequest *req)
{
  if (req->vfio != NULL && req->vfio[0] != NULL)
    return TRUE;
  for (guint i = 0; req->io != NULL && i < req->io->len; i++)
    if (((const QpIoDevice *)req->io->pdata[i])->bdf != NULL)
      return TRUE;
  return FALSE;
}

/* Loads the host the VM is planned on (its devices' locality too, when it
 * has some): the live host through its snapshot in the state directory DIR
 * (topology/host/snapshot.h). */
static QpHost *
load_host(const QpOptions *opts, const QpQemuArgs *args, const char *dir,
          GError **error)
{
  gboolean with_io = has_host_devices(args->req);
  QpHost *host = opts->topology != NULL
                     ? qp_host_load_full(opts->topology, with_io, error)
                     : qp_host_load_snapshot(dir, with_io, error);
  if (host != NULL && host->inconsistent != NULL)
    qp_info("%s", host->inconsistent);
  return host;
}

void
qp_launch_say_read(const QpQemuArgs *args)
{
  print_warnings(args->warnings);
  for (guint i = 0; i < args->notes->len; i++)
    qp_info("%s", (const char *)args->notes->pdata[i]);
}

/* Plans ARGS on HOST against CLAIMS, the ledger's live records, saying
 * first what reading the command line found. */
static QpPlan *
plan_on(const QpOptions *opts, const QpQemuArgs *args, const QpHost *host,
        const QpClaims *claims, GError **error)
{
  qp_launch_say_read(args);
  if (!qp_backends_page_sizes_check(args, host, error))
    return NULL;
  QpPlan *plan =
      qp_plan_compute(host, claims, args->req, &opts->placement, error);
  if (plan == NULL) {
    /* A plan carries the ledger's warnings; without one, say them here. */
    print_warnings(claims->warnings);
    return NULL;
  }
  gboolean warning = FALSE;
  g_autofree char *unbound =
      qp_qemu_args_file_backends_say(args, plan, &warning);
  if (unbound != NULL)
    qp_log(warning ? G_LOG_LEVEL_WARNING : G_LOG_LEVEL_INFO, "%s", unbound);
  return plan;
}

QpClaims *
qp_launch_read_ledger(const QpOptions *opts, const QpQemuArgs *args,
                      gboolean running, QpHost **host_out, QpClaim **own_out,
                      const char **by_out, GError **error)
{
  qp_timing("options");
  g_autofree char *dir = qp_launch_state_dir(opts);
  g_autoptr(QpHost) host = load_host(opts, args, dir, error);
  qp_timing("host");
  if (host == NULL)
    return NULL;
  g_autoptr(QpClaims) claims = qp_ledger_read_claims(dir, host, error);
  qp_timing("ledger");
  if (claims == NULL)
    return NULL;
  *own_out = running ? qp_claims_take_vm(claims, args->uuid, args->name, by_out)
                     : NULL;
  *host_out = g_steal_pointer(&host);
  return g_steal_pointer(&claims);
}

QpPlan *
qp_launch_plan(const QpOptions *opts, const QpQemuArgs *args, gboolean running,
               QpHost **host_out, GError **error)
{
  g_autoptr(QpHost) host = NULL;
  g_autoptr(QpClaim) own = NULL;
  const char *by = NULL;
  g_autoptr(QpClaims) claims =
      qp_launch_read_ledger(opts, args, running, &host, &own, &by, error);
  if (claims == NULL)
    return NULL;
  QpPlan *plan = plan_on(opts, args, host, claims, error);
  if (plan == NULL)
    return NULL;
  qp_launch_plan_ignores(plan, g_steal_pointer(&own), by);
  *host_out = g_steal_pointer(&host);
  return plan;
}

void
qp_launch_plan_ignores(QpPlan *plan, QpClaim *own, const char *by)
{
  qp_claim_free(plan->ignored);
  plan->ignored = own;
  plan->ignored_by = own != NULL ? by : NULL;
}

/* ---- Launch -------------------------------------------------------------- */

/* Gives the claim back after a launch failed. Failing that too is said
 * here: the launch's own error is what goes back to the edge. */
static void
release_claim(QpHeldClaim *held)
{
  g_autoptr(GError) error = NULL;
  if (!qp_held_claim_release(held, &error))
    qp_error("%s", error->message);
}

/* Confines this process (and so QEMU, which inherits it) to the plan's
 * startup CPUs and memory policy. */
static gboolean
apply_process_plan(const QpPlan *plan, GError **error)
{
  if (plan->startup_cpus != NULL && !hwloc_bitmap_iszero(plan->startup_cpus) &&
      !qp_set_affinity(0, plan->startup_cpus, error))
    return FALSE;
  if (plan->mem_nodes != NULL && !hwloc_bitmap_iszero(plan->mem_nodes) &&
      !qp_set_mempolicy(plan->mem_policy, plan->mem_nodes, error))
    return FALSE;
  return TRUE;
}

/* -daemonize: QEMU runs as our child; its first process exits 0 once the
 * daemon is ready, and the keeper then tells us on STATUS_FD whether the
 * plan is in force. Waits for both: QEMU's wait status, the keeper's LINE.
 * Returns TRUE when the keeper killed QEMU (its line says why). */
static gboolean
wait_daemon_and_keeper(pid_t child, int status_fd, int *status_out,
                       GString *line)
{
  int status = 0;
  gboolean exited = FALSE, reported = FALSE, killed = FALSE;
  int child_fd = pidfd_open(child, 0);

  /* Both must answer: QEMU's first process (0 once the daemon is ready)
   * and the keeper (the plan is in force). A keeper that gives up first
   * (QEMU never greeted) must not leave us waiting on a QEMU that hangs. */
  while (!exited || !reported) {
    struct pollfd p[2] = {{reported ? -1 : status_fd, POLLIN, 0},
                          {exited ? -1 : child_fd, POLLIN, 0}};
    int r = poll(p, 2, child_fd < 0 && !exited ? 100 : -1);
    if (r < 0 && errno != EINTR)
      break;
    if (!exited && (child_fd < 0 || p[1].revents)) {
      pid_t w = waitpid(child, &status, child_fd < 0 ? WNOHANG : 0);
      exited = w == child;
    }
    if (!reported && p[0].revents) {
      char buf[512];
      ssize_t n = read(status_fd, buf, sizeof(buf));
      if (n > 0)
        g_string_append_len(line, buf, n);
      else if (n == 0 || errno != EINTR)
        reported = TRUE;
      if (!exited && reported && strcmp(line->str, "ok\n") != 0) {
        /* The keeper gave up. If QEMU is leaving on its own (it refused
         * to start), let it say why; else it hangs: stop it. */
        struct pollfd q = {child_fd, POLLIN, 0};
        if (child_fd < 0 || poll(&q, 1, 1000) != 1) {
          kill(child, SIGKILL);
          killed = TRUE;
        }
        while (waitpid(child, &status, 0) < 0 && errno == EINTR)
          ;
        exited = TRUE;
      }
    }
  }
  if (child_fd >= 0)
    close(child_fd);
  close(status_fd);
  *status_out = status;
  /* Killed by the keeper, which says why. */
  return killed ||
         (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL && line->len > 0);
}

/* -daemonize: QEMU's daemon is our child once QEMU's first process has let
 * it go (start_daemon() makes us its subreaper), and the only one left:
 * killed and reaped after a launch that failed. */
static void
kill_daemon(void)
{
  g_autoptr(GDir) proc = g_dir_open("/proc", 0, NULL);
  const char *name;
  while (proc != NULL && (name = g_dir_read_name(proc)) != NULL) {
    if (!g_ascii_isdigit(name[0]))
      continue;
    pid_t pid = atoi(name);
    if (qp_proc_parent(pid) != getpid())
      continue;
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
      ;
  }
}

/* We exit 0 only when QEMU's first process and the keeper both say the
 * daemon runs with the plan in force; with QEMU's status when QEMU
 * refused to start (it said why itself); else with the keeper's line. */
static int
wait_daemonized(pid_t child, int status_fd, QpHeldClaim *held, GError **error)
{
  int status = 0;
  g_autoptr(GString) line = g_string_new(NULL);
  gboolean killed = wait_daemon_and_keeper(child, status_fd, &status, line);
  if (!killed && (!WIFEXITED(status) || WEXITSTATUS(status) != 0)) {
    release_claim(held);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  if (strcmp(line->str, "ok\n") != 0) {
    /* A keeper that gave up has stopped QEMU; one that died (killed) has
     * not: the daemon, ready or paused, would run on without its claim. */
    kill_daemon();
    g_strchomp(line->str);
    g_set_error_literal(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
                        line->len ? line->str
                                  : "the keeper died before QEMU was ready");
    release_claim(held);
    return -1;
  }
  return 0;
}

/* Memory can be plugged (-m maxmem) or resized (virtio-mem) later. */
static gboolean
memory_may_change(const QpRequest *req)
{
  return qp_request_virtio_mem(req) != NULL || req->maxmem_mib > 0;
}

/* One launch: what the claim's critical section makes, for the rest. */
typedef struct {
  QpOptions *opts;
  QpQemuArgs *args;
  const char *argv0;
  const char *state_dir;
  QpHost *host; /* freed before the keeper starts */
  QpPlan *plan;
  QpCallerHost *caller_host; /* the keeper's view of the host */
  QpKeeperSpawn *keeper;
  char **qemu_argv;
  char **start_backends; /* the memory backends QEMU starts with */
  int monitor[2];        /* the keeper's end, QEMU's end; -1 when closed */
  int status_pipe[2];    /* -daemonize: the keeper's word on the plan */
  int guard[2];          /* the guard's pipe (start_guard()); -1 when closed */
  gboolean paused;       /* qemu-pin starts QEMU paused for its keeper */
} Launch;

static void
launch_clear(Launch *l)
{
  /* A keeper still waiting for our exec leaves first. */
  g_clear_pointer(&l->keeper, qp_keeper_spawn_free);
  for (int i = 0; i < 2; i++)
    if (l->guard[i] >= 0)
      close(l->guard[i]);
  g_clear_pointer(&l->host, qp_host_free);
  g_clear_pointer(&l->plan, qp_plan_free);
  g_clear_pointer(&l->caller_host, qp_caller_host_free);
  g_clear_pointer(&l->qemu_argv, g_strfreev);
  g_clear_pointer(&l->start_backends, g_strfreev);
}

/* Ids of the memory backends QEMU starts with: the caller's, and the RAM's
 * (QEMU's own or the one the rewrite makes; the rewrite's others are named
 * "qemu-pin-..."). The keeper claims any other it finds as plugged, even one
 * added before its first look at a QEMU that was not paused. */
static char **
start_backends(const QpQemuArgs *args)
{
  GPtrArray *ids = g_ptr_array_new();
  for (guint i = 0; args->backends != NULL && i < args->backends->len; i++)
    g_ptr_array_add(
        ids, g_strdup(((const QpBackend *)args->backends->pdata[i])->id));
  g_ptr_array_add(ids, g_strdup(qp_qemu_args_ram_id(args)));
  g_ptr_array_add(ids, NULL);
  return (char **)g_ptr_array_free(ids, FALSE);
}

/* For the crash tests: with VAR=1, stop here, so that a test can kill
 * qemu-pin exactly there. */
static void
test_stop(const char *var)
{
  if (g_strcmp0(g_getenv(var), "1") == 0)
    raise(SIGSTOP);
}

/* The private monitor: a socket pair, the keeper's end and QEMU's. */
static gboolean
open_monitor(Launch *l, GError **error)
{
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, l->monitor) < 0) {
    g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
                "cannot create the monitor socket pair: %s", g_strerror(errno));
    l->monitor[0] = l->monitor[1] = -1;
    return FALSE;
  }
  return TRUE;
}

/* The guard's pipe, made before the keeper so that the keeper holds its
 * write end from its first instruction (start_guard()). */
static gboolean
open_guard_pipe(Launch *l, GError **error)
{
  if (pipe2(l->guard, O_CLOEXEC) < 0) {
    g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
                "cannot create a pipe: %s", g_strerror(errno));
    l->guard[0] = l->guard[1] = -1;
    return FALSE;
  }
  return TRUE;
}

/* A launch that execs QEMU in place starts its keeper before the ledger's
 * lock, where the keeper's start holds up no other launch: it waits for
 * its configuration (make_claim()) and the exec. FALSE when it failed;
 * under valgrind no keeper is started here, make_claim() forks one. */
static gboolean
spawn_keeper_ahead(Launch *l, GError **error)
{
  if (!open_monitor(l, error) || !open_guard_pipe(l, error))
    return FALSE;
  GError *local = NULL;
  l->keeper = qp_keeper_spawn_ahead(l->monitor[1], &local);
  if (local != NULL) {
    g_propagate_error(error, local);
    return FALSE;
  }
  qp_timing("keeper");
  /* Between the keeper's start and the lock. */
  test_stop("QEMU_PIN_TEST_STOP_BEFORE_LOCK");
  return TRUE;
}

/* Where the VM is started inside, for its record (a move never leaves it,
 * and `rebalance` plans none that would): the host nodes of --hostnodes
 * and of the memory this process may use (its cpuset, an inherited
 * numactl --membind), and the CPUs it may use with --affinity; each empty
 * when it is the whole host. */
static void
started_inside(const QpHost *host, const QpPlacementOptions *p,
               hwloc_bitmap_t *nodes, hwloc_bitmap_t *cpus)
{
  g_auto(hwloc_bitmap_t) all_nodes = hwloc_bitmap_alloc();
  for (guint i = 0; i < host->n_nodes; i++)
    hwloc_bitmap_set(all_nodes, (unsigned)host->nodes[i].id);
  *nodes = hwloc_bitmap_dup(all_nodes);
  if (p->hostnodes != NULL)
    hwloc_bitmap_and(*nodes, *nodes, p->hostnodes);
  if (host->allowed_nodes != NULL && !hwloc_bitmap_iszero(host->allowed_nodes))
    hwloc_bitmap_and(*nodes, *nodes, host->allowed_nodes);
  if (hwloc_bitmap_isequal(*nodes, all_nodes))
    hwloc_bitmap_zero(*nodes);
  /* Isolated CPUs are out of allowed on every launch: only a cgroup, a
   * start affinity or --affinity restrict the VM. */
  *cpus = hwloc_bitmap_dup(host->allowed);
  if (p->affinity != NULL)
    hwloc_bitmap_and(*cpus, *cpus, p->affinity);
  else if (host->beyond_affinity == NULL ||
           hwloc_bitmap_iszero(host->beyond_affinity))
    hwloc_bitmap_zero(*cpus);
}

/* The host reserve the VM is started with on each node of HOST (its
 * reserve-mib and node-reserve-mib, from wherever the settings came), into
 * RESERVE (of QpNodeAmount), the nodes where it is not 0: for its record,
 * as its keeper plans a move with it and `rebalance` checks each move
 * against it. */
static void
started_reserve(const QpHost *host, const QpPlacementOptions *p,
                GArray *reserve)
{
  for (guint i = 0; i < host->n_nodes; i++) {
    guint64 mib = qp_node_reserve_mib(p, host->nodes[i].id);
    if (mib > 0)
      g_array_append_val(reserve, ((QpNodeAmount){host->nodes[i].id, mib}));
  }
}

/* The claim's critical section (the ledger locked, its live records
 * read): plans, rewrites QEMU's command line, starts the keeper (or
 * configures the one started ahead) and makes the record, which names the
 * keeper. */
static QpClaim *
make_claim(const QpClaims *claims, gpointer data, GError **error)
{
  Launch *l = data;
  QpQemuArgs *args = l->args;
  qp_timing("locked, ledger read");
  l->plan = plan_on(l->opts, args, l->host, claims, error);
  qp_timing("planned");
  if (l->plan == NULL)
    return NULL;
  const QpPlan *plan = l->plan;
  print_warnings(plan->warnings);
  /* -v: what the plan chose, before the keeper's steps. */
  for (guint i = 0; plan->reasons != NULL && i < plan->reasons->len; i++)
    qp_info("plan: %s", (const char *)plan->reasons->pdata[i]);
  g_autofree char *crossing = qp_device_buses_warning(args, plan);
  if (crossing != NULL)
    qp_warning("%s", crossing);
  g_auto(hwloc_bitmap_t) started_nodes = NULL, started_cpus = NULL;
  started_inside(l->host, &l->opts->placement, &started_nodes, &started_cpus);
  g_autoptr(GArray) reserve = g_array_new(FALSE, FALSE, sizeof(QpNodeAmount));
  started_reserve(l->host, &l->opts->placement, reserve);
  /* The keeper needs little of the host: the rest is freed before it
   * starts. */
  l->caller_host =
      qp_caller_host_new(l->host, plan, l->opts->placement.affinity);
  g_clear_pointer(&l->host, qp_host_free);

  if (l->monitor[1] < 0 && !open_monitor(l, error))
    return NULL;
  int qemu_fd = l->monitor[1];
  l->qemu_argv = qp_qemu_args_rewrite(args, l->argv0, plan, qemu_fd, error);
  if (l->qemu_argv == NULL)
    return NULL;
  g_autofree char *prealloc_note = qp_qemu_args_prealloc_note(args, plan);
  if (prealloc_note != NULL)
    qp_info("%s", prealloc_note);

  g_autofree char *id = qp_ledger_new_id();
  g_autoptr(QpClaim) claim = qp_claim_from_plan(plan, id, args->name);
  hwloc_bitmap_copy(claim->started_nodes, started_nodes);
  hwloc_bitmap_copy(claim->started_cpus, started_cpus);
  g_array_append_vals(claim->started_reserve, reserve->data, reserve->len);
  if (args->uuid != NULL)
    claim->uuid = g_utf8_make_valid(args->uuid, -1);
  if (args->daemonize) {
    if (pipe2(l->status_pipe, O_CLOEXEC) < 0) {
      g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
                  "cannot create a pipe: %s", g_strerror(errno));
      return NULL;
    }
    claim->launcher_pid = getpid();
    claim->launcher_start = qp_proc_start_time(getpid());
  } else {
    claim->qemu_pid = getpid();
    claim->qemu_start = qp_proc_start_time(getpid());
  }

  l->paused = plan->pause && !args->has_S && args->incoming == NULL;
  if (l->paused && !args->daemonize && l->guard[1] < 0 &&
      !open_guard_pipe(l, error))
    return NULL;
  struct stat qemu_end;
  fstat(qemu_fd, &qemu_end);
  l->start_backends = start_backends(args);
  QpKeeperConfig cfg = {
      .qemu_end_ino = qemu_end.st_ino,
      .plan = plan,
      .req = args->req,
      .host = l->caller_host,
      .state_dir = l->state_dir,
      .claim = claim,
      .qmp_fd = l->monitor[0],
      .qemu_pid = args->daemonize ? 0 : getpid(),
      .daemonize = args->daemonize,
      .paused = l->paused,
      .status_fd = l->status_pipe[1],
      .guard_fd = l->paused && !args->daemonize ? l->guard[1] : -1,
      .qmp_timeout_ms = l->opts->qmp_timeout_ms,
      .start_timeout_ms = l->opts->start_timeout_ms,
      .verbose = l->opts->verbose,
      .mem_hotplug = memory_may_change(args->req),
      .start_backends = (const char *const *)l->start_backends,
      .mem_lock = args->mem_lock,
      .topology = l->opts->topology,
      .placement = &l->opts->placement,
  };
  qp_timing("keeper config");
  /* What CFG points to lives until the exec: the keeper shares it. */
  if (l->keeper != NULL) {
    if (!qp_keeper_spawn_configure(l->keeper, &cfg, error))
      g_clear_pointer(&l->keeper, qp_keeper_spawn_free);
  } else {
    l->keeper = qp_keeper_spawn(&cfg, qemu_fd, error);
    qp_timing("keeper started");
  }
  /* The keeper has its copy of its end of the monitor: ours goes. */
  close(l->monitor[0]);
  l->monitor[0] = -1;
  if (l->status_pipe[1] >= 0)
    close(l->status_pipe[1]);
  if (l->keeper == NULL)
    return NULL;
  /* If the record cannot be written, the launch fails and the keeper
   * leaves (launch_clear()). */
  claim->keeper_pid = qp_keeper_spawn_pid(l->keeper);
  return g_steal_pointer(&claim);
}

/* -daemonize: QEMU runs as our child, under the plan's startup CPUs and
 * memory policy; we wait for it and the keeper. */
static int
start_daemon(Launch *l, const char *binary, QpHeldClaim *held, GError **error)
{
  pid_t self = getpid();
  /* QEMU's daemon, once its first process has let it go, is ours to
   * reap and to stop if the launch fails (kill_daemon()); after us, it is
   * init's as it would be without qemu-pin. */
  (void)prctl(PR_SET_CHILD_SUBREAPER, 1);
  pid_t child = fork();
  if (child < 0) {
    g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
                "cannot fork QEMU: %s", g_strerror(errno));
    release_claim(held);
    return -1;
  }
  if (child == 0) {
    /* QEMU's first process goes with us, as it would go with its caller
     * without qemu-pin: a daemon not yet ready then fails to tell it so
     * and exits, so that a launch killed half-way leaves no VM. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != self)
      _exit(128 + SIGKILL);
    /* The child that becomes QEMU says itself why it could not. */
    g_autoptr(GError) local = NULL;
    if (apply_process_plan(l->plan, &local)) {
      fcntl(l->monitor[1], F_SETFD, 0);
      qp_exec(binary, l->qemu_argv, &local);
    }
    qp_error("%s", local->message);
    _exit(qp_error_exit_status(local));
  }
  close(l->monitor[1]);
  return wait_daemonized(child, l->status_pipe[0], held, error);
}

/* A paused QEMU that the keeper dies before resuming (SIGKILL, the OOM
 * killer) would stay paused for good, unclaimed once the record is pruned:
 * with -daemonize the launcher is the daemon's subreaper and kills it, but
 * without it QEMU is the launcher's own process. So a guard waits on a
 * pipe whose write ends are the keeper's, from the keeper's first
 * instruction (made before it: open_guard_pipe()), and the launcher's
 * until its exec (O_CLOEXEC). A byte means the guest runs, QEMU is gone or
 * the launch failed; the end of the pipe without one, that the keeper died
 * first, at any moment from its start on: the guard then kills QEMU (the
 * launcher's process: its start time, whether it has reached its exec or
 * not) and releases the claim, as a failing keeper does. The guard is the
 * launcher's grandchild, forked twice and its parent reaped before the
 * exec, so that it is never a zombie under QEMU; it costs only a launch
 * that pauses. */
static void
start_guard(Launch *l, QpHeldClaim *held)
{
  pid_t qemu = getpid();
  guint64 start = qp_proc_start_time(qemu);
  pid_t mid = fork();
  if (mid < 0)
    return;
  if (mid > 0) {
    while (waitpid(mid, NULL, 0) < 0 && errno == EINTR)
      ;
    return;
  }
  if (fork() != 0)
    _exit(0);
  prctl(PR_SET_NAME, "qemu-pin-guard", 0, 0, 0);
  signal(SIGINT, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  /* Nothing of the launcher's but stdio and the pipe's read end: our copy
   * of its write end would keep the pipe open, one of QEMU's monitor or of
   * the ledger would outlive them. */
  int fd = l->guard[0];
  if (fd != 3 && dup2(fd, 3) < 0)
    _exit(1);
  if (close_range(4, ~0U, 0) < 0)
    for (int i = 4; i < 1024; i++)
      close(i);
  char byte;
  ssize_t n;
  while ((n = read(3, &byte, 1)) < 0 && errno == EINTR)
    ;
  if (n == 0 && start != 0 && qp_proc_start_time(qemu) == start &&
      kill(qemu, SIGKILL) == 0) {
    qp_error("QEMU was stopped: its keeper died before it resumed the guest");
    release_claim(held);
  }
  _exit(0);
}

/* The launch failed after start_guard(): the guard may go. */
static void
stop_guard(Launch *l)
{
  if (l->guard[1] >= 0) {
    (void)!write(l->guard[1], "r", 1);
    close(l->guard[1]);
    l->guard[1] = -1;
  }
}

/* This process takes the plan's startup CPUs and memory policy and becomes
 * QEMU; returns only when that failed, with the claim released. */
static int
exec_in_place(Launch *l, const char *binary, QpHeldClaim *held, GError **error)
{
  if (l->paused && l->guard[0] >= 0)
    start_guard(l, held);
  if (apply_process_plan(l->plan, error)) {
    test_stop("QEMU_PIN_TEST_STOP_BEFORE_EXEC");
    fcntl(l->monitor[1], F_SETFD, 0);
    qp_exec(binary, l->qemu_argv, error);
  }
  stop_guard(l);
  release_claim(held);
  return -1;
}

int
qp_launch(QpOptions *opts, const char *binary, const char *argv0,
          QpQemuArgs *args, QpMakeRoom make_room, GError **error)
{
  g_autofree char *dir = qp_launch_state_dir(opts);
  Launch l = {opts,
              args,
              argv0,
              dir,
              .monitor = {-1, -1},
              .status_pipe = {-1, -1},
              .guard = {-1, -1}};
  qp_timing("options");
  l.host = load_host(opts, args, dir, error);
  qp_timing("host");
  if (l.host != NULL && opts->make_room && make_room != NULL &&
      make_room(opts, args, l.host, dir)) {
    qp_timing("made room");
    g_clear_pointer(&l.host, qp_host_free);
    l.host = load_host(opts, args, dir, error);
  }
  g_autoptr(QpHeldClaim) held = NULL;
  if (l.host != NULL && (args->daemonize || spawn_keeper_ahead(&l, error)))
    held = qp_held_claim_take(dir, l.host, make_claim, &l, error);
  qp_timing("claim");
  int rc = -1;
  if (held != NULL)
    rc = args->daemonize ? start_daemon(&l, binary, held, error)
                         : exec_in_place(&l, binary, held, error);
  launch_clear(&l);
  return rc;
}
