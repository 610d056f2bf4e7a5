/* The keeper's watch over QEMU's process: its pidfd (or, where the kernel
 * or valgrind has none, its start time), whether it is gone, signals to
 * it, the wait for its monitor's greeting, and, with -daemonize before the
 * daemon's PID is known, finding it by the monitor socket it holds. */
#include "launcher/keeper/state.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <unistd.h>

int
qp_keeper_tgid_of(int tid)
{
  g_autofree char *path = g_strdup_printf("/proc/%d/status", tid);
  g_autofree char *text = NULL;
  if (!g_file_get_contents(path, &text, NULL, NULL))
    return -1;
  const char *p = strstr(text, "\nTgid:");
  return p ? atoi(p + 6) : -1;
}

gboolean
qp_keeper_watch_qemu(Keeper *k, int pid)
{
  k->qemu_pid = pid;
  k->qemu_start = qp_proc_start_time(pid);
  k->pidfd = pidfd_open(pid, 0);
  return k->pidfd >= 0 || k->qemu_start != 0;
}

gboolean
qp_keeper_watching(const Keeper *k)
{
  return k->pidfd >= 0 || k->qemu_start != 0;
}

gboolean
qp_keeper_qemu_gone(Keeper *k, int timeout_ms)
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

void
qp_keeper_signal_qemu(Keeper *k, int sig)
{
  if (k->pidfd >= 0)
    pidfd_send_signal(k->pidfd, sig, NULL, 0);
  else if (!qp_keeper_qemu_gone(k, 0))
    kill(k->qemu_pid, sig);
}

gboolean
qp_keeper_wait_for_greeting(Keeper *k, GError **error)
{
  struct pollfd p[2] = {{qp_qmp_get_fd(k->qmp), POLLIN, 0},
                        {k->pidfd, POLLIN, 0}};
  int n = k->pidfd >= 0 ? 2 : 1;
  /* Without a pidfd, look at /proc between short waits. */
  int slice = k->pidfd < 0 && qp_keeper_watching(k) ? 100 : G_MAXINT;
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
    if (r == 0 && k->pidfd < 0 && qp_keeper_watching(k) &&
        qp_keeper_qemu_gone(k, 0)) {
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

/* PIDs of the processes (this one aside) that hold QEMU's end of the
 * monitor's socket pair; NULL when its inode is not known. */
static GArray *
monitor_holders(const Keeper *k)
{
  if (k->cfg->qemu_end_ino == 0)
    return NULL;
  GArray *pids = g_array_new(FALSE, FALSE, sizeof(int));
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
    if (holds)
      g_array_append_val(pids, pid);
  }
  return pids;
}

gboolean
qp_keeper_monitor_peers(Keeper *k, gboolean and_kill)
{
  g_autoptr(GArray) pids = monitor_holders(k);
  if (pids == NULL)
    return FALSE;
  for (guint i = 0; and_kill && i < pids->len; i++) {
    int pfd = pidfd_open(g_array_index(pids, int, i), 0);
    if (pfd < 0)
      continue;
    pidfd_send_signal(pfd, SIGKILL, NULL, 0);
    struct pollfd p = {pfd, POLLIN, 0};
    poll(&p, 1, 5000);
    close(pfd);
  }
  return pids->len > 0;
}

int
qp_keeper_monitor_daemon(Keeper *k, guint timeout_ms, GError **error)
{
  gint64 deadline = g_get_monotonic_time() + (gint64)timeout_ms * 1000;
  for (;;) {
    g_autoptr(GArray) pids = monitor_holders(k);
    guint n = pids != NULL ? pids->len : 0;
    if (n == 1)
      return g_array_index(pids, int, 0);
    if (n == 0) {
      g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_QEMU_EXITED,
                  "QEMU's daemon is gone: no process holds its monitor");
      return 0;
    }
    if (g_get_monotonic_time() >= deadline) {
      g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
                  "QEMU's daemon not told apart within %u ms: %u processes "
                  "hold its monitor",
                  timeout_ms, n);
      return 0;
    }
    g_usleep(10000);
  }
}
