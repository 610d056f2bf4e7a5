/* The command line edge both modules share (edge.h). */
#include "launcher/edge.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "launcher/front/front.h"
#include "launcher/hand-over.h"
#include "launcher/launch.h"
#include "launcher/log.h"
#include "launcher/qemu/daemonize.h"
#include "launcher/qemu/vm-ids.h"

char *
qp_find_real_qemu(const char *argv0, GError **error)
{
  int no_self = 0;
  char *found = qp_front_find_qemu(argv0, g_getenv("PATH"), &no_self);
  if (found != NULL)
    return found;
  if (no_self) {
    g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
                "cannot stat /proc/self/exe: %s", g_strerror(errno));
    return NULL;
  }
  g_autofree char *base = g_path_get_basename(argv0);
  g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_NO_BINARY,
              "no real QEMU binary named '%s' on PATH other than qemu-pin "
              "itself: set QEMU_PIN_QEMU or the config key 'qemu'",
              base);
  return NULL;
}

/* QEMU exactly as the caller asked (help, probes, mode none): returns only
 * if the exec failed. */
static int
exec_straight(const char *binary, const char *argv0, int argc, char **argv,
              GError **error)
{
  g_autofree char **full = g_new0(char *, (gsize)argc + 2);
  full[0] = (char *)argv0;
  for (int i = 0; i < argc; i++)
    full[i + 1] = argv[i];
  qp_exec(binary, full, error);
  return -1;
}

gboolean
qp_edge_settings(QpOptions *opts, int argc, char ***argv, char ***safe,
                 char **dropped, GError **error)
{
  *safe = qp_argv_daemonize_safe((guint)argc, *argv, dropped);
  if (*safe != NULL)
    *argv = *safe;
  g_autoptr(QpVmIds) vm = qp_vm_ids_from_argv((guint)argc, *argv);
  if (!qp_options_parse_env(opts, error) ||
      !qp_options_load_config(opts, vm, error))
    return FALSE;
  qp_log_init(opts->verbose);
  qp_log_set_vm(vm->name);
  return TRUE;
}

/* A launch runs on this host: a plan of a recorded one (--topology, or
 * QEMU_PIN_TOPOLOGY, known once the settings are read) pins to CPUs that
 * may not exist here. (The fault tests launch on one to make the kernel
 * refuse a pin: they set QEMU_PIN_TEST_LAUNCH_ON_TOPOLOGY.) */
static gboolean
check_launch_host(const QpOptions *opts, GError **error)
{
  if (opts->topology == NULL ||
      g_strcmp0(g_getenv("QEMU_PIN_TEST_LAUNCH_ON_TOPOLOGY"), "1") == 0)
    return TRUE;
  g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_USAGE,
              "option '--topology' (or QEMU_PIN_TOPOLOGY) is for qemu-pin "
              "plan, topology and status, not for a launch, which runs on "
              "this host: see qemu-pin --help");
  return FALSE;
}

/* Resolves settings, parses the QEMU command and launches or plans. The
 * mode comes first: in mode none QEMU runs as the caller asked, whatever
 * qemu-pin would have made of its command line. */
static int
run_qemu(const QpEdge *edge, QpOptions *opts, const char *binary,
         const char *argv0, int argc, char **argv, gboolean plan_only,
         GError **error)
{
  g_autofree char *dropped = NULL;
  g_auto(GStrv) safe = NULL;
  if (!qp_edge_settings(opts, argc, &argv, &safe, &dropped, error))
    return -1;
  if (dropped != NULL)
    qp_info("-daemonize: prealloc-context taken off memory backend%s %s "
            "(QEMU starts a thread-context's thread before its fork, and "
            "the daemon would wait for it forever)",
            strchr(dropped, ',') ? "s" : "", dropped);
  g_autoptr(GError) local = NULL;
  g_autoptr(QpQemuArgs) args = qp_launch_read(opts, (guint)argc, argv, &local);
  if (args == NULL && local == NULL) {
    if (!plan_only && !opts->dry_run)
      return exec_straight(binary, argv0, argc, argv, error);
    return edge->plan(opts, NULL, plan_only, error);
  }
  if (args == NULL) {
    g_propagate_error(error, g_steal_pointer(&local));
    return -1;
  }
  if (args->passthrough && !plan_only)
    return exec_straight(binary, argv0, argc, argv, error);
  if (plan_only || opts->dry_run)
    return edge->plan(opts, args, plan_only, error);
  if (!check_launch_host(opts, error))
    return -1;
  if (opts->make_room && edge->make_room == NULL)
    return qp_hand_over(error);
  return qp_launch(opts, binary, argv0, args, edge->make_room, error);
}

/* Installed or linked under a QEMU binary's name: every argument is
 * QEMU's; qemu-pin's settings come from the environment and config. */
static int
run_drop_in(const QpEdge *edge, QpOptions *opts, int argc, char **argv,
            GError **error)
{
  /* The config may name the binary, for every VM or this one's group:
   * read it before looking on PATH. */
  g_autoptr(QpVmIds) vm = qp_vm_ids_from_argv((guint)argc - 1, argv + 1);
  if (!qp_options_parse_env(opts, error) ||
      !qp_options_load_config(opts, vm, error))
    return -1;
  g_autofree char *real =
      opts->qemu ? g_strdup(opts->qemu) : qp_find_real_qemu(argv[0], error);
  if (real == NULL)
    return -1;
  return run_qemu(edge, opts, real, argv[0], argc - 1, argv + 1, FALSE, error);
}

/* An output option of another command given to a launch (SHIFT 0) or to
 * plan (1): refused, not ignored, since a launch with --human would start
 * the VM its caller meant only to see planned. A launch with --dry-run
 * prints its plan as plan does, --human and --json included. */
static gboolean
check_output_options(const QpOptions *opts, int shift, GError **error)
{
  gboolean prints_plan = shift == 1 || opts->dry_run;
  const char *name = NULL, *owners = "qemu-pin status";
  if (opts->human && !prints_plan) {
    name = "--human";
    owners = "qemu-pin plan";
  } else if (opts->json && !prints_plan) {
    name = "--json";
    owners = "qemu-pin plan, topology, status, move and rebalance";
  } else if (opts->metrics) {
    name = "--metrics";
  } else if (opts->prune) {
    name = "--prune";
  } else if (opts->picture != NULL) {
    name = "--picture";
  }
  if (name == NULL)
    return TRUE;
  g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_USAGE,
              "option '%s' is for %s, not for %s: see qemu-pin --help", name,
              owners, shift == 1 ? "plan" : "a launch");
  return FALSE;
}

int
qp_edge_qemu_command(const QpEdge *edge, QpOptions *opts, int argc, char **argv,
                     int shift, GError **error)
{
  int qemu_index;
  if (!qp_options_parse_cli(opts, argc - shift, argv + shift, TRUE, &qemu_index,
                            error) ||
      !check_output_options(opts, shift, error))
    return -1;
  qemu_index += shift;
  if (qemu_index >= argc) {
    g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_USAGE,
                "no QEMU binary given: usage: qemu-pin %s[OPTIONS] "
                "[--] QEMU_BINARY [QEMU_ARGS...] (see --help)",
                shift == 1 ? "plan " : "");
    return -1;
  }
  /* "qemu-pin -v move ...": one of qemu-pin's commands after options,
   * which go after it; said before anything is planned for a "QEMU". */
  if (qp_front_is_command(argv[qemu_index]) &&
      strcmp(argv[qemu_index - 1], "--") != 0) {
    g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_USAGE,
                "'%s' is a command of qemu-pin's, given after options: "
                "expected qemu-pin %s [OPTIONS] (see qemu-pin --help)",
                argv[qemu_index], argv[qemu_index]);
    return -1;
  }
  return run_qemu(edge, opts, argv[qemu_index], argv[qemu_index],
                  argc - qemu_index - 1, argv + qemu_index + 1, shift == 1,
                  error);
}

/* The front's decision first (launcher/front/front.h): help, probes and
 * mode none run QEMU straight, as they do before this program is loaded. */
static int
run_straight(int argc, char **argv, GError **error)
{
  QpFrontExec e;
  if (!qp_front_decide(argc, argv, environ, &e))
    return 0;
  qp_exec(e.binary, e.argv, error);
  qp_front_exec_clear(&e);
  return -1;
}

/* Longest a failed run waits for its caller to connect (hold_listeners()). */
#define HOLD_LISTENERS_MS 2000
#define HOLD_LISTENERS_MAX 16

/* A failed run ends, its one line said. QEMU holds every listening socket
 * its caller passed it (libvirt's monitor: -chardev socket,fd=N,server=on,
 * the caller's copy closed) until it exits, so the caller's connect()
 * succeeds and reads the end of the monitor: libvirt then reports the
 * reason from the log ("qemu unexpectedly closed the monitor: LINE"). A
 * refusal before QEMU runs is quicker than QEMU's own start, and gone
 * before libvirt connects: it said only "failed to connect to monitor
 * socket: Connection refused" (docs/robustness.md, finding 30). So wait,
 * at most HOLD_LISTENERS_MS, until a caller connects to one of the
 * listening sockets this process would have handed QEMU (inherited
 * without close-on-exec); none: no wait. */
static void
hold_listeners(void)
{
  struct pollfd fds[HOLD_LISTENERS_MAX];
  nfds_t n = 0;
  DIR *d = opendir("/proc/self/fd");
  if (d == NULL)
    return;
  int own = dirfd(d);
  struct dirent *e;
  while ((e = readdir(d)) != NULL && n < HOLD_LISTENERS_MAX) {
    char *end;
    long fd = strtol(e->d_name, &end, 10);
    if (*end != '\0' || end == e->d_name || fd < 3 || fd == own)
      continue;
    int flags = fcntl((int)fd, F_GETFD);
    int listening = 0;
    socklen_t len = sizeof(listening);
    if (flags < 0 || (flags & FD_CLOEXEC) ||
        getsockopt((int)fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) < 0 ||
        !listening)
      continue;
    fds[n].fd = (int)fd;
    fds[n].events = POLLIN;
    fds[n].revents = 0;
    n++;
  }
  closedir(d);
  if (n == 0)
    return;
  gint64 deadline = g_get_monotonic_time() + HOLD_LISTENERS_MS * 1000;
  for (;;) {
    gint64 left = (deadline - g_get_monotonic_time()) / 1000;
    if (left <= 0)
      return;
    int r = poll(fds, n, (int)left);
    if (r > 0 || (r < 0 && errno != EINTR))
      return;
  }
}

/* The edge: the only place that says an error and chooses the exit status
 * (qp_error_exit_status()). */
int
qp_edge_main(int argc, char **argv, const struct timespec *t0,
             const QpEdge *edge)
{
  qp_timing_start(t0);
  qp_timing("loaded");
  qp_hand_over_init(argc, argv, t0);
  g_autoptr(GError) error = NULL;
  QpOptions opts;
  qp_options_init(&opts);
  qp_log_init(0);
  g_autofree char *self = g_path_get_basename(argv[0]);
  int rc = run_straight(argc, argv, &error);
  if (rc == 0 && error == NULL)
    rc = qp_is_qemu_name(self) ? run_drop_in(edge, &opts, argc, argv, &error)
                               : edge->command(&opts, argc, argv, &error);
  if (rc < 0) {
    qp_error("%s", error->message);
    rc = qp_error_exit_status(error);
    hold_listeners();
  }
  qp_options_clear(&opts);
  return rc;
}
