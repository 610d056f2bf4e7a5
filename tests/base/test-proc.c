/* Process identity from /proc/PID/stat, with real processes: this one, a
 * child whose name holds the characters that end comm, a zombie and a
 * process that is gone. */
#include "topology/base/proc.h"

#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* A child that names itself NAME and waits for a byte on a pipe; its PID,
 * *TO_CHILD the pipe's write end. */
static pid_t
named_child(const char *name, int *to_child)
{
  int p[2], ready[2];
  g_assert_cmpint(pipe(p), ==, 0);
  g_assert_cmpint(pipe(ready), ==, 0);
  pid_t pid = fork();
  g_assert_cmpint(pid, >=, 0);
  if (pid == 0) {
    close(p[1]);
    close(ready[0]);
    prctl(PR_SET_NAME, name, 0, 0, 0);
    (void)!write(ready[1], "r", 1);
    char b;
    (void)!read(p[0], &b, 1);
    _exit(0);
  }
  close(p[0]);
  close(ready[1]);
  char b;
  g_assert_cmpint(read(ready[0], &b, 1), ==, 1);
  close(ready[0]);
  *to_child = p[1];
  return pid;
}

static void
test_self(void)
{
  g_assert_cmpint(qp_proc_parent(getpid()), ==, getppid());
  g_assert_cmpuint(qp_proc_start_time(getpid()), >, 0);
  guint64 rss = 0;
  g_assert_cmpuint(qp_proc_start_and_rss(getpid(), &rss), ==,
                   qp_proc_start_time(getpid()));
  g_assert_cmpuint(rss, >, 0);
}

/* comm may hold ") (" and digits: the fields resume after its last ')'. */
static void
test_odd_name(void)
{
  int to_child;
  pid_t pid = named_child(") 1 (x) 2", &to_child);
  g_assert_cmpint(qp_proc_parent(pid), ==, getpid());
  guint64 start = qp_proc_start_time(pid);
  g_assert_cmpuint(start, >=, qp_proc_start_time(getpid()));
  close(to_child);
  /* Exited, not reaped: a zombie has no start time, and still a parent. */
  siginfo_t info;
  g_assert_cmpint(waitid(P_PID, pid, &info, WEXITED | WNOWAIT), ==, 0);
  g_assert_cmpuint(qp_proc_start_time(pid), ==, 0);
  g_assert_cmpint(qp_proc_parent(pid), ==, getpid());
  g_assert_cmpint(waitpid(pid, NULL, 0), ==, pid);
  /* Reaped: gone. */
  g_assert_cmpint(qp_proc_parent(pid), ==, -1);
  g_assert_cmpuint(qp_proc_start_time(pid), ==, 0);
  g_assert_false(qp_proc_exists(pid));
}

static void
test_no_process(void)
{
  g_assert_cmpint(qp_proc_parent(0), ==, -1);
  g_assert_cmpint(qp_proc_parent(-5), ==, -1);
  g_assert_cmpuint(qp_proc_start_time(0), ==, 0);
}

/* A field of /proc/PID/status: its value, from the start of a line only. */
static void
test_status_field(void)
{
  const char *status = "Name:\tqemu\nX_Mems_allowed_list:\t9\n"
                       "Cpus_allowed_list:\t0-1\nMems_allowed_list:\t0,2-3\n";
  g_autofree char *mems = qp_proc_status_field(status, "Mems_allowed_list");
  g_assert_cmpstr(mems, ==, "0,2-3");
  g_autofree char *name = qp_proc_status_field(status, "Name");
  g_assert_cmpstr(name, ==, "qemu");
  g_assert_null(qp_proc_status_field(status, "Mems_allowed"));
  g_assert_null(qp_proc_status_field("", "Name"));
  /* This process's own, as the kernel writes it. */
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents("/proc/self/status", &text, NULL, NULL));
  g_autofree char *cpus = qp_proc_status_field(text, "Cpus_allowed_list");
  g_assert_nonnull(cpus);
  g_assert_true(g_ascii_isdigit(cpus[0]));
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/proc/self", test_self);
  g_test_add_func("/proc/odd-name", test_odd_name);
  g_test_add_func("/proc/no-process", test_no_process);
  g_test_add_func("/proc/status-field", test_status_field);
  return g_test_run();
}
