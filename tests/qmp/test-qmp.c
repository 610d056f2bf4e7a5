/* The QMP client against real QEMU, against fake-qemu, against the scripted
 * fake peer (fault rows), and against bytes written by hand. */
#include "qmp/qmp.h"
#include "tests/common/fake-qmp.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define QEMU "qemu-system-x86_64"

/* ---- helpers ---------------------------------------------------------- */

static gboolean
exists(const char *path)
{
  struct stat st;

  return stat(path, &st) == 0;
}

/* Tgid: of thread TID (-1 if it is gone). */
static int
tgid_of(int tid)
{
  g_autofree char *path = g_strdup_printf("/proc/%d/status", tid);
  g_autofree char *text = NULL;
  const char *p;

  if (!g_file_get_contents(path, &text, NULL, NULL))
    return -1;
  p = strstr(text, "\nTgid:");
  g_assert_nonnull(p);
  return atoi(p + strlen("\nTgid:"));
}

static gboolean
is_thread_of(int pid, int tid)
{
  g_autofree char *path = g_strdup_printf("/proc/%d/task/%d", pid, tid);

  return exists(path);
}

static void
keep_fd_open(gpointer data)
{
  int fd = GPOINTER_TO_INT(data);

  /* In the child between fork and exec: only async-signal-safe calls. */
  fcntl(fd, F_SETFD, 0);
}

typedef struct {
  GPid pid;
  QpQmp *qmp;
} Child;

/* Spawns ARGV with one end of a socketpair kept open across exec; every
 * "@FD@" in ARGV becomes that fd's number. ENVP may be NULL. */
static Child
spawn_monitored(const char *const *argv, char **envp, guint timeout_ms)
{
  g_autoptr(GPtrArray) args = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GError) error = NULL;
  g_autofree char *fdstr = NULL;
  Child c = {0};
  int sv[2];

  g_assert_no_errno(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
  fdstr = g_strdup_printf("%d", sv[1]);
  for (gsize i = 0; argv[i] != NULL; i++) {
    g_auto(GStrv) parts = g_strsplit(argv[i], "@FD@", -1);
    g_ptr_array_add(args, g_strjoinv(fdstr, parts));
  }
  g_ptr_array_add(args, NULL);

  g_spawn_async(NULL, (char **)args->pdata, envp,
                G_SPAWN_SEARCH_PATH | G_SPAWN_DO_NOT_REAP_CHILD, keep_fd_open,
                GINT_TO_POINTER(sv[1]), &c.pid, &error);
  g_assert_no_error(error);
  close(sv[1]);
  c.qmp = qp_qmp_new(sv[0], timeout_ms);
  return c;
}

/* Waits for the child; its exit status, or 128 + signal. */
static int
child_wait(Child *c)
{
  int status;

  while (waitpid(c->pid, &status, 0) < 0)
    g_assert_cmpint(errno, ==, EINTR);
  c->pid = 0;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void
child_kill(Child *c)
{
  g_clear_pointer(&c->qmp, qp_qmp_free);
  if (c->pid > 0) {
    kill(c->pid, SIGKILL);
    child_wait(c);
  }
}

static Child
spawn_qemu(const char *extra_object)
{
  const char *argv[] = {
      QEMU,
      "-accel",
      "tcg",
      "-display",
      "none",
      "-S",
      "-machine",
      "q35",
      "-smp",
      "2",
      "-m",
      "64",
      "-nodefaults",
      "-chardev",
      "socket,id=m,fd=@FD@",
      "-mon",
      "chardev=m,mode=control",
      extra_object != NULL ? "-object" : NULL,
      extra_object,
      NULL,
  };

  return spawn_monitored(argv, NULL, 10000);
}

static char *
fake_qemu_path(void)
{
  const char *root = g_getenv("QP_BUILD_ROOT");

  g_assert_nonnull(root);
  return g_build_filename(root, "tests", "qmp", "fake-qemu", NULL);
}

/* fake-qemu with FAKE_QEMU_SCRIPT=SCRIPT and FAKE_QEMU_VCPUS=VCPUS (NULL:
 * unset), plus EXTRA arguments. */
static Child
spawn_fake_qemu_env(const char *script, const char *vcpus,
                    const char *const *extra, guint timeout_ms, const char *var,
                    const char *value)
{
  g_autofree char *path = fake_qemu_path();
  g_auto(GStrv) envp = g_get_environ();
  g_autoptr(GPtrArray) argv = g_ptr_array_new();

  envp = g_environ_setenv(envp, "FAKE_QEMU_SCRIPT", script, TRUE);
  envp = g_environ_setenv(envp, "FAKE_QEMU_LIFETIME", "60", TRUE);
  if (vcpus != NULL)
    envp = g_environ_setenv(envp, "FAKE_QEMU_VCPUS", vcpus, TRUE);
  else
    envp = g_environ_unsetenv(envp, "FAKE_QEMU_VCPUS");
  if (var != NULL)
    envp = g_environ_setenv(envp, var, value, TRUE);
  g_ptr_array_add(argv, path);
  /* Arguments fake-qemu must ignore, and the one it must find. */
  g_ptr_array_add(argv, "-accel");
  g_ptr_array_add(argv, "tcg");
  g_ptr_array_add(argv, "-chardev");
  g_ptr_array_add(argv, "stdio,id=other");
  g_ptr_array_add(argv, "-chardev");
  g_ptr_array_add(argv, "socket,id=callers,fd=0");
  g_ptr_array_add(argv, "-chardev");
  g_ptr_array_add(argv, "socket,id=qemu-pin-qmp,fd=@FD@");
  g_ptr_array_add(argv, "-mon");
  g_ptr_array_add(argv, "chardev=qemu-pin-qmp,mode=control");
  for (gsize i = 0; extra != NULL && extra[i] != NULL; i++)
    g_ptr_array_add(argv, (gpointer)extra[i]);
  g_ptr_array_add(argv, NULL);
  return spawn_monitored((const char *const *)argv->pdata, envp, timeout_ms);
}

static Child
spawn_fake_qemu(const char *script, const char *vcpus, const char *const *extra,
                guint timeout_ms)
{
  return spawn_fake_qemu_env(script, vcpus, extra, timeout_ms, NULL, NULL);
}

/* A client of the fake peer. */
static QpQmp *
fake_client(const FakeQmpScript *script, guint timeout_ms, FakeQmp **fake)
{
  int fd;

  *fake = fake_qmp_start(script, &fd);
  return qp_qmp_new(fd, timeout_ms);
}

/* A client whose peer already wrote TEXT and does nothing else; *PEER gets
 * the peer's end to read requests from. */
static QpQmp *
raw_client(const char *text, guint timeout_ms, int *peer)
{
  int sv[2];

  g_assert_no_errno(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
  g_assert_cmpint(write(sv[0], text, strlen(text)), ==, (gssize)strlen(text));
  *peer = sv[0];
  return qp_qmp_new(sv[1], timeout_ms);
}

/* Everything the client has sent so far, as lines. */
static char **
sent_lines(int peer)
{
  g_autoptr(GString) all = g_string_new(NULL);
  char buf[4096];
  ssize_t n;

  while ((n = recv(peer, buf, sizeof buf, MSG_DONTWAIT)) > 0)
    g_string_append_len(all, buf, n);
  g_assert_true(all->len > 0 && all->str[all->len - 1] == '\n');
  g_string_truncate(all, all->len - 1);
  return g_strsplit(all->str, "\n", -1);
}

static const char greeting[] =
    "{\"QMP\": {\"version\": {\"qemu\": {\"micro\": 0, \"minor\": 2, "
    "\"major\": 7}, \"package\": \"\"}, \"capabilities\": [\"oob\"]}}\r\n";

static void
assert_one_line(const GError *error)
{
  g_assert_nonnull(error);
  g_assert_null(strchr(error->message, '\n'));
  g_assert_null(strchr(error->message, '\r'));
}

static const char *
event_name(const QpJv *ev)
{
  return qp_jv_get_string_or(ev, "event", NULL);
}

/* Member NAME of the object V, a string. */
static const char *
member_string(const QpJv *v, const char *name)
{
  g_assert_true(qp_jv_is(v, QP_JV_OBJECT));
  return qp_jv_get_string_or(v, name, NULL);
}

/* ---- real QEMU -------------------------------------------------------- */

static void
test_qemu_cpus(void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GArray) cpus = NULL;
  Child c = spawn_qemu(NULL);
  QpVcpu *v;

  g_assert_true(qp_qmp_handshake(c.qmp, &error));
  g_assert_no_error(error);
  cpus = qp_qmp_query_cpus(c.qmp, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(cpus->len, ==, 2);
  for (guint i = 0; i < 2; i++) {
    v = &g_array_index(cpus, QpVcpu, i);
    g_assert_cmpint(v->cpu_index, ==, (int)i);
    g_assert_true(is_thread_of(c.pid, v->thread_id));
    /* The keeper learns QEMU's PID this way. */
    g_assert_cmpint(tgid_of(v->thread_id), ==, c.pid);
    g_assert_cmpint(v->socket_id, ==, 0);
    g_assert_cmpint(v->core_id, ==, (int)i);
    g_assert_cmpint(v->smt_id, ==, 0);
    g_assert_cmpint(v->node_id, ==, -1); /* no -numa */
    g_assert_cmpint(v->die_id, ==, -1);
    g_assert_nonnull(v->qom_path);
    g_assert_true(g_str_has_prefix(v->qom_path, "/machine/"));
  }
  g_assert_cmpint(g_array_index(cpus, QpVcpu, 0).thread_id, !=,
                  g_array_index(cpus, QpVcpu, 1).thread_id);
  child_kill(&c);
}

static void
test_qemu_iothreads(void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GArray) threads = NULL;
  Child c = spawn_qemu("iothread,id=io0");

  g_assert_true(qp_qmp_handshake(c.qmp, &error));
  threads = qp_qmp_query_iothreads(c.qmp, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(threads->len, ==, 1);
  g_assert_cmpstr(g_array_index(threads, QpIothread, 0).id, ==, "io0");
  g_assert_true(
      is_thread_of(c.pid, g_array_index(threads, QpIothread, 0).thread_id));
  child_kill(&c);
}

static void
test_qemu_no_iothreads(void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GArray) threads = NULL;
  Child c = spawn_qemu(NULL);

  g_assert_true(qp_qmp_handshake(c.qmp, &error));
  threads = qp_qmp_query_iothreads(c.qmp, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(threads->len, ==, 0);
  child_kill(&c);
}

/* The first look's queries sent with qmp_capabilities, as the keeper does:
 * QEMU answers them in order once capabilities are negotiated. */
static void
test_qemu_ahead(void)
{
  static const char *const ahead[] = {"query-cpus-fast", "query-iothreads",
                                      NULL};
  g_autoptr(GError) error = NULL;
  Child c = spawn_qemu("iothread,id=io0");

  g_assert_true(qp_qmp_handshake_ahead(c.qmp, ahead, &error));
  g_assert_no_error(error);
  g_autoptr(GArray) cpus = qp_qmp_query_cpus(c.qmp, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(cpus->len, ==, 2);
  g_assert_cmpint(tgid_of(g_array_index(cpus, QpVcpu, 0).thread_id), ==, c.pid);
  g_autoptr(GArray) threads = qp_qmp_query_iothreads(c.qmp, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(threads->len, ==, 1);
  g_assert_cmpstr(g_array_index(threads, QpIothread, 0).id, ==, "io0");
  g_autoptr(QpJv) r = qp_qmp_execute(c.qmp, "cont", NULL, &error);
  g_assert_no_error(error);
  g_assert_nonnull(r);
  child_kill(&c);
}

/* Sent ahead means sent in the handshake's write, before any of them is
 * asked for; one asked for out of order drops the replies of the others. */
static void
test_raw_ahead(void)
{
  static const char *const ahead[] = {"query-iothreads", "query-cpus-fast",
                                      NULL};
  g_autofree char *text = g_strconcat(
      greeting, "{\"return\": {}, \"id\": 1}\r\n",
      "{\"return\": [{\"id\": \"a\", \"thread-id\": 11}], \"id\": 2}\r\n",
      "{\"return\": \"dropped\", \"id\": 3}\r\n",
      "{\"return\": [{\"id\": \"b\", \"thread-id\": 22}], \"id\": 4}\r\n",
      NULL);
  g_autoptr(GError) error = NULL;
  int peer;
  g_autoptr(QpQmp) qmp = raw_client(text, 2000, &peer);

  g_assert_true(qp_qmp_handshake_ahead(qmp, ahead, &error));
  g_assert_no_error(error);
  g_auto(GStrv) first = sent_lines(peer);
  g_assert_cmpuint(g_strv_length(first), ==, 3);
  g_assert_nonnull(strstr(first[0], "qmp_capabilities"));
  g_assert_nonnull(strstr(first[1], "query-iothreads"));
  g_assert_nonnull(strstr(first[2], "query-cpus-fast"));

  g_autoptr(GArray) a = qp_qmp_query_iothreads(qmp, &error);
  g_assert_no_error(error);
  g_assert_cmpstr(g_array_index(a, QpIothread, 0).id, ==, "a");
  g_autoptr(GArray) b = qp_qmp_query_iothreads(qmp, &error);
  g_assert_no_error(error);
  g_assert_cmpstr(g_array_index(b, QpIothread, 0).id, ==, "b");
  g_auto(GStrv) second = sent_lines(peer);
  g_assert_cmpuint(g_strv_length(second), ==, 1);
  g_assert_nonnull(strstr(second[0], "\"id\":4"));
  close(peer);
}

/* Replies to commands sent ahead may come in another order: each is kept
 * for its turn. */
static void
test_raw_ahead_out_of_order(void)
{
  static const char *const ahead[] = {"query-cpus-fast", "query-iothreads",
                                      NULL};
  g_autofree char *text = g_strconcat(
      greeting, "{\"return\": {}, \"id\": 1}\r\n",
      "{\"return\": [{\"id\": \"io\", \"thread-id\": 33}], \"id\": 3}\r\n",
      "{\"return\": [{\"cpu-index\": 0, \"thread-id\": 44}], \"id\": 2}\r\n",
      NULL);
  g_autoptr(GError) error = NULL;
  int peer;
  g_autoptr(QpQmp) qmp = raw_client(text, 2000, &peer);

  g_assert_true(qp_qmp_handshake_ahead(qmp, ahead, &error));
  g_autoptr(GArray) cpus = qp_qmp_query_cpus(qmp, &error);
  g_assert_no_error(error);
  g_assert_cmpint(g_array_index(cpus, QpVcpu, 0).thread_id, ==, 44);
  g_autoptr(GArray) io = qp_qmp_query_iothreads(qmp, &error);
  g_assert_no_error(error);
  g_assert_cmpint(g_array_index(io, QpIothread, 0).thread_id, ==, 33);
  close(peer);
}

static void
test_qemu_cont_resume(void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(QpJv) ret = NULL;
  g_autoptr(QpJv) status = NULL;
  g_autoptr(QpJv) ev = NULL;
  Child c = spawn_qemu(NULL);

  g_assert_true(qp_qmp_handshake(c.qmp, &error));
  status = qp_qmp_execute(c.qmp, "query-status", NULL, &error);
  g_assert_no_error(error);
  g_assert_cmpstr(member_string(status, "status"), ==, "prelaunch");
  g_assert_false(qp_qmp_has_event(c.qmp));
  ret = qp_qmp_execute(c.qmp, "cont", NULL, &error);
  g_assert_no_error(error);
  g_assert_true(qp_jv_is(ret, QP_JV_OBJECT));
  /* QEMU sends RESUME before cont's reply: it was queued meanwhile. */
  g_assert_true(qp_qmp_has_event(c.qmp));
  ev = qp_qmp_next_event(c.qmp, 5000, &error);
  g_assert_no_error(error);
  g_assert_nonnull(ev);
  g_assert_cmpstr(event_name(ev), ==, "RESUME");
  g_assert_nonnull(qp_jv_get(ev, "timestamp"));
  child_kill(&c);
}

static void
test_qemu_quit_closes(void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(QpJv) ret = NULL;
  g_autoptr(QpJv) ev = NULL;
  QpJv *none;
  Child c = spawn_qemu(NULL);

  g_assert_true(qp_qmp_handshake(c.qmp, &error));
  ret = qp_qmp_execute(c.qmp, "quit", NULL, &error);
  g_assert_no_error(error);
  ev = qp_qmp_next_event(c.qmp, 10000, &error);
  g_assert_no_error(error);
  g_assert_cmpstr(event_name(ev), ==, "SHUTDOWN");
  none = qp_qmp_next_event(c.qmp, 10000, &error);
  g_assert_null(none);
  g_assert_error(error, QP_QMP_ERROR, QP_QMP_ERROR_IO);
  g_assert_cmpstr(error->message, ==, "QMP events: peer closed the connection");
  g_assert_cmpint(child_wait(&c), ==, 0);
  child_kill(&c);
}

static void
test_qemu_command_error(void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(QpJv) args = qp_jv_object();
  QpJv *ret;
  Child c = spawn_qemu(NULL);

  g_assert_true(qp_qmp_handshake(c.qmp, &error));
  ret = qp_qmp_execute(c.qmp, "no-such-command", NULL, &error);
  g_assert_null(ret);
  g_assert_error(error, QP_QMP_ERROR, QP_QMP_ERROR_COMMAND);
  g_assert_cmpstr(error->message, ==,
                  "no-such-command: CommandNotFound: "
                  "The command no-such-command has not been found");
  g_clear_error(&error);

  /* Arguments reach QEMU: a wrong one is QEMU's error, not ours. */
  qp_jv_set(args, "path", qp_jv_string("/machine"));
  qp_jv_set(args, "property", qp_jv_string("no-such-property"));
  ret = qp_qmp_execute(c.qmp, "qom-get", args, &error);
  g_assert_null(ret);
  g_assert_error(error, QP_QMP_ERROR, QP_QMP_ERROR_COMMAND);
  g_assert_true(g_str_has_prefix(error->message, "qom-get: GenericError: "));
  g_assert_nonnull(strstr(error->message, "no-such-property"));
  assert_one_line(error);
  g_clear_error(&error);

  /* And the connection is still in step afterwards. */
  ret = qp_qmp_execute(c.qmp, "query-status", NULL, &error);
  g_assert_no_error(error);
  qp_jv_free(ret);
  child_kill(&c);
}

/* ---- fake peer: fault rows -------------------------------------------- */

static void
test_fake_no_greeting(void)
{
  FakeQmpScript s = {.behaviour = FAKE_QMP_NO_GREETING};
  g_autoptr(GError) error = NULL;
  g_autoptr(FakeQmp) fake = NULL;
  g_autoptr(QpQmp) qmp = fake_client(&s, 300, &fake);

  g_assert_false(qp_qmp_handshake(qmp, &error));
  g_assert_error(error, QP_QMP_ERROR, QP_QMP_ERROR_TIMEOUT);
  g_assert_cmpstr(error->message, ==,
                  "QMP greeting: nothing received within 300 ms");
}

static void
test_fake_garbage_greeting(void)
{
  FakeQmpScript s = {.behaviour = FAKE_QMP_GARBAGE};
  g_autoptr(GError) error = NULL;
  g_autoptr(FakeQmp) fake = NULL;
  g_autoptr(QpQmp) qmp = fake_client(&s, 5000, &fake);

  g_assert_false(qp_qmp_handshake(qmp, &error));
  g_assert_error(error, QP_QMP_ERROR, QP_QMP_ERROR_PROTOCOL);
  g_assert_cmpstr(error->message, ==,
                  "QMP greeting: expected a JSON object, got "
                  "'this is not JSON {\"QMP\": oops'");
}

static void
test_fake_close_after_greeting(void)
{
  FakeQmpScript s = {.behaviour = FAKE_QMP_CLOSE_AFTER_GREETING};
  g_autoptr(GError) error = NULL;
  g_autoptr(FakeQmp) fake = NULL;
  g_autoptr(QpQmp) qmp = fake_client(&s, 5000, &fake);

  g_assert_false(qp_qmp_handshake(qmp, &error));
  g_assert_error(error, QP_QMP_ERROR, QP_QMP_ERROR_IO);
  /* Writing may already see EPIPE, or reading sees the end. */
  g_assert_true(g_str_has_prefix(
      error->message, "qmp_capabilities: peer closed the connection"));
  assert_one_line(error);
}

static void
test_fake_exit_during_startup(void)
{
  FakeQmpScript s = {.behaviour = FAKE_QMP_EXIT_DURING_STARTUP};
  g_autoptr(GError) error = NULL;
  g_autoptr(FakeQmp) fake = NULL;
  g_autoptr(QpQmp) qmp = fake_client(&s, 5000, &fake);

  g_assert_false(qp_qmp_handshake(qmp, &error));
  g_assert_error(error, QP_QMP_ERROR, QP_QMP_ERROR_IO);
  g_assert_true(g_str_has_prefix(
      error->message, "qmp_capabilities: peer closed the connection"));
}

static void
test_fake_command_error(void)
{
  FakeQmpScript s = {.behaviour = FAKE_QMP_COMMAND_ERROR,
                     .command = "query-cpus-fast",
                     .error_class = "GenericError",
                     .error_desc = "no vCPUs\nfor you"};
  g_autoptr(GError) error = NULL;
  g_autoptr(FakeQmp) fake = NULL;
  g_autoptr(QpQmp) qmp = fake_client(&s, 5000, &fake);
  g_autoptr(GArray) cpus = NULL;

  g_assert_true(qp_qmp_handshake(qmp, &error));
  cpus = qp_qmp_query_cpus(qmp, &error);
  g_assert_null(cpus);
  g_assert_error(error, QP_QMP_ERROR, QP_QMP_ERROR_COMMAND);
  g_assert_cmpstr(error->message, ==,
                  "query-cpus-fast: GenericError: no vCPUs for you");
}

static void
test_fake_never_reply(void)
{
  FakeQmpScript s = {.behaviour = FAKE_QMP_NEVER_REPLY,
                     .command = "query-cpus-fast"};
  g_autoptr(GError) error = NULL;
  g_autoptr(FakeQmp) fake = NULL;
  g_autoptr(QpQmp) qmp = fake_client(&s, 300, &fake);
  g_autoptr(GArray) cpus = NULL;
  g_autoptr(GArray) threads = NULL;

  g_assert_true(qp_qmp_handshake(qmp, &error));
  cpus = qp_qmp_query_cpus(qmp, &error);
  g_assert_null(cpus);
  g_assert_error(error, QP_QMP_ERROR, QP_QMP_ERROR_TIMEOUT);
  g_assert_cmpstr(error->message, ==,
                  "no reply to 'query-cpus-fast' within 300 ms");
  g_clear_error(&error);

  /* The next command still gets its own reply. */
  threads = qp_qmp_query_iothreads(qmp, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(threads->len, ==, 0);
}

static void
test_fake_garbage_reply(void)
{
  FakeQmpScript s = {.behaviour = FAKE_QMP_GARBAGE,
                     .command = "query-iothreads"};
  g_autoptr(GError) error = NULL;
  g_autoptr(FakeQmp) fake = NULL;
  g_autoptr(QpQmp) qmp = fake_client(&s, 5000, &fake);
  g_autoptr(GArray) threads = NULL;

  g_assert_true(qp_qmp_handshake(qmp, &error));
  threads = qp_qmp_query_iothreads(qmp, &error);
  g_assert_null(threads);
  g_assert_error(error, QP_QMP_ERROR, QP_QMP_ERROR_PROTOCOL);
  g_assert_cmpstr(error->message, ==,
                  "query-iothreads: expected a JSON object, got "
                  "'this is not JSON {\"QMP\": oops'");
}

static void
test_fake_vanish_threads(void)
{
  FakeQmpScript s = {.behaviour = FAKE_QMP_VANISH_THREADS, .n_vcpus = 2};
  g_autoptr(GError) error = NULL;
  g_autoptr(FakeQmp) fake = NULL;
  g_autoptr(QpQmp) qmp = fake_client(&s, 5000, &fake);
  g_autoptr(GArray) cpus = NULL;

  g_assert_true(qp_qmp_handshake(qmp, &error));
  cpus = qp_qmp_query_cpus(qmp, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(cpus->len, ==, 2);
  for (guint i = 0; i < cpus->len; i++) {
    int tid = g_array_index(cpus, QpVcpu, i).thread_id;
    g_assert_cmpint(tid, >, 0);
    g_assert_false(is_thread_of(getpid(), tid));
  }
}

static void
test_fake_real_threads(void)
{
  const char *const io[] = {"io0", "io1", NULL};
  FakeQmpScript s = {.n_vcpus = 3, .iothreads = io};
  g_autoptr(GError) error = NULL;
  g_autoptr(FakeQmp) fake = NULL;
  g_autoptr(QpQmp) qmp = fake_client(&s, 5000, &fake);
  g_autoptr(GArray) cpus = NULL;
  g_autoptr(GArray) threads = NULL;
  const int *tids;
  guint n;

  g_assert_true(qp_qmp_handshake(qmp, &error));
  cpus = qp_qmp_query_cpus(qmp, &error);
  g_assert_no_error(error);
  tids = fake_qmp_get_vcpu_tids(fake, &n);
  g_assert_cmpuint(cpus->len, ==, 3);
  g_assert_cmpuint(n, ==, 3);
  for (guint i = 0; i < cpus->len; i++) {
    QpVcpu *v = &g_array_index(cpus, QpVcpu, i);
    g_assert_cmpint(v->cpu_index, ==, (int)i);
    g_assert_cmpint(v->thread_id, ==, tids[i]);
    g_assert_true(is_thread_of(getpid(), v->thread_id));
  }
  threads = qp_qmp_query_iothreads(qmp, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(threads->len, ==, 2);
  g_assert_cmpstr(g_array_index(threads, QpIothread, 1).id, ==, "io1");
  g_assert_true(
      is_thread_of(getpid(), g_array_index(threads, QpIothread, 1).thread_id));
}

static void
test_fake_given_thread_ids(void)
{
  const int ids[] = {4242, 4343};
  FakeQmpScript s = {.n_vcpus = 2, .thread_ids = ids};
  g_autoptr(GError) error = NULL;
  g_autoptr(FakeQmp) fake = NULL;
  g_autoptr(QpQmp) qmp = fake_client(&s, 5000, &fake);
  g_autoptr(GArray) cpus = NULL;

  g_assert_true(qp_qmp_handshake(qmp, &error));
  cpus = qp_qmp_query_cpus(qmp, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(cpus->len, ==, 2);
  g_assert_cmpint(g_array_index(cpus, QpVcpu, 0).thread_id, ==, 4242);
  g_assert_cmpint(g_array_index(cpus, QpVcpu, 1).thread_id, ==, 4343);
}

static void
test_fake_events_queued_in_order(void)
{
  const char *const evs[] = {"STOP", "RESUME", "MY_EVENT", NULL};
  FakeQmpScript s = {.events_before = "query-cpus-fast", .events = evs};
  g_autoptr(GError) error = NULL;
  g_autoptr(FakeQmp) fake = NULL;
  g_autoptr(QpQmp) qmp = fake_client(&s, 5000, &fake);
  g_autoptr(GArray) cpus = NULL;
  g_auto(GStrv) commands = NULL;

  g_assert_true(qp_qmp_handshake(qmp, &error));
  g_assert_false(qp_qmp_has_event(qmp));
  cpus = qp_qmp_query_cpus(qmp, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(cpus->len, ==, 1);
  g_assert_true(qp_qmp_has_event(qmp));
  for (guint i = 0; evs[i] != NULL; i++) {
    g_autoptr(QpJv) ev = qp_qmp_next_event(qmp, 0, &error);
    g_assert_no_error(error);
    g_assert_nonnull(ev);
    g_assert_cmpstr(event_name(ev), ==, evs[i]);
  }
  g_assert_false(qp_qmp_has_event(qmp));
  /* Nothing more: a timeout is not an error. */
  g_assert_null(qp_qmp_next_event(qmp, 50, &error));
  g_assert_no_error(error);

  commands = fake_qmp_dup_commands(fake);
  g_assert_cmpuint(g_strv_length(commands), ==, 2);
  g_assert_cmpstr(commands[0], ==, "qmp_capabilities");
  g_assert_cmpstr(commands[1], ==, "query-cpus-fast");
}

static void
test_fake_event_on_demand(void)
{
  FakeQmpScript s = {.paused = TRUE};
  g_autoptr(GError) error = NULL;
  g_autoptr(FakeQmp) fake = NULL;
  g_autoptr(QpQmp) qmp = fake_client(&s, 5000, &fake);
  g_autoptr(QpJv) ev = NULL;

  g_assert_true(qp_qmp_handshake(qmp, &error));
  fake_qmp_emit_event(fake, "RESUME");
  ev = qp_qmp_next_event(qmp, 10000, &error);
  g_assert_no_error(error);
  g_assert_nonnull(ev);
  g_assert_cmpstr(event_name(ev), ==, "RESUME");
}

static void
test_fake_cont_and_quit(void)
{
  FakeQmpScript s = {.paused = TRUE};
  g_autoptr(GError) error = NULL;
  g_autoptr(FakeQmp) fake = NULL;
  g_autoptr(QpQmp) qmp = fake_client(&s, 5000, &fake);
  g_autoptr(QpJv) st1 = NULL, st2 = NULL, ret = NULL, q = NULL;
  g_autoptr(QpJv) ev1 = NULL, ev2 = NULL;

  g_assert_true(qp_qmp_handshake(qmp, &error));
  st1 = qp_qmp_execute(qmp, "query-status", NULL, &error);
  g_assert_no_error(error);
  g_assert_cmpstr(member_string(st1, "status"), ==, "prelaunch");
  ret = qp_qmp_execute(qmp, "cont", NULL, &error);
  g_assert_no_error(error);
  st2 = qp_qmp_execute(qmp, "query-status", NULL, &error);
  g_assert_cmpstr(member_string(st2, "status"), ==, "running");
  q = qp_qmp_execute(qmp, "quit", NULL, &error);
  g_assert_no_error(error);
  ev1 = qp_qmp_next_event(qmp, 5000, &error);
  ev2 = qp_qmp_next_event(qmp, 5000, &error);
  g_assert_cmpstr(event_name(ev1), ==, "RESUME");
  g_assert_cmpstr(event_name(ev2), ==, "SHUTDOWN");
  g_assert_null(qp_qmp_next_event(qmp, 5000, &error));
  g_assert_error(error, QP_QMP_ERROR, QP_QMP_ERROR_IO);
  g_assert_cmpstr(error->message, ==, "QMP events: peer closed the connection");
}

static void
test_fake_unknown_command(void)
{
  FakeQmpScript s = {0};
  g_autoptr(GError) error = NULL;
  g_autoptr(FakeQmp) fake = NULL;
  g_autoptr(QpQmp) qmp = fake_client(&s, 5000, &fake);

  g_assert_true(qp_qmp_handshake(qmp, &error));
  g_assert_null(qp_qmp_execute(qmp, "frobnicate", NULL, &error));
  g_assert_error(error, QP_QMP_ERROR, QP_QMP_ERROR_COMMAND);
  g_assert_cmpstr(error->message, ==,
                  "frobnicate: CommandNotFound: "
                  "The command frobnicate has not been found");
}

/* ---- fake-qemu -------------------------------------------------------- */

static void
test_fake_qemu_normal(void)
{
  const char *const extra[] = {
      "-S",    "-smp",    "2,sockets=1", "-object", "iothread,id=io7",
      "-name", "guest=x", "-nodefaults", NULL};
  g_autoptr(GError) error = NULL;
  g_autoptr(GArray) cpus = NULL;
  g_autoptr(GArray) threads = NULL;
  g_autoptr(QpJv) st = NULL, ret = NULL, q = NULL;
  g_autoptr(QpJv) ev = NULL;
  Child c = spawn_fake_qemu("normal", NULL, extra, 10000);

  g_assert_true(qp_qmp_handshake(c.qmp, &error));
  g_assert_no_error(error);
  cpus = qp_qmp_query_cpus(c.qmp, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(cpus->len, ==, 2);
  for (guint i = 0; i < 2; i++) {
    int tid = g_array_index(cpus, QpVcpu, i).thread_id;
    g_assert_true(is_thread_of(c.pid, tid));
    g_assert_cmpint(tgid_of(tid), ==, c.pid);
  }
  threads = qp_qmp_query_iothreads(c.qmp, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(threads->len, ==, 1);
  g_assert_cmpstr(g_array_index(threads, QpIothread, 0).id, ==, "io7");
  st = qp_qmp_execute(c.qmp, "query-status", NULL, &error);
  g_assert_cmpstr(member_string(st, "status"), ==, "prelaunch");
  ret = qp_qmp_execute(c.qmp, "cont", NULL, &error);
  g_assert_no_error(error);
  ev = qp_qmp_next_event(c.qmp, 5000, &error);
  g_assert_cmpstr(event_name(ev), ==, "RESUME");
  q = qp_qmp_execute(c.qmp, "quit", NULL, &error);
  g_assert_no_error(error);
  g_assert_cmpint(child_wait(&c), ==, 0);
  child_kill(&c);
}

static void
test_fake_qemu_vcpus(void)
{
  const char *const smp[] = {"-smp", "cpus=2,cores=2", NULL};
  g_autoptr(GError) error = NULL;
  g_autoptr(GArray) none = NULL, env = NULL, from_smp = NULL;
  Child c;

  /* Default one; FAKE_QEMU_VCPUS wins over -smp. */
  c = spawn_fake_qemu("normal", NULL, NULL, 5000);
  g_assert_true(qp_qmp_handshake(c.qmp, &error));
  none = qp_qmp_query_cpus(c.qmp, &error);
  g_assert_cmpuint(none->len, ==, 1);
  child_kill(&c);

  c = spawn_fake_qemu("normal", "3", smp, 5000);
  g_assert_true(qp_qmp_handshake(c.qmp, &error));
  env = qp_qmp_query_cpus(c.qmp, &error);
  g_assert_cmpuint(env->len, ==, 3);
  child_kill(&c);

  c = spawn_fake_qemu("normal", NULL, smp, 5000);
  g_assert_true(qp_qmp_handshake(c.qmp, &error));
  from_smp = qp_qmp_query_cpus(c.qmp, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(from_smp->len, ==, 2);
  child_kill(&c);
}

static void
test_fake_qemu_sigterm(void)
{
  g_autoptr(GError) error = NULL;
  Child c = spawn_fake_qemu("normal", NULL, NULL, 5000);

  g_assert_true(qp_qmp_handshake(c.qmp, &error));
  kill(c.pid, SIGTERM);
  g_assert_cmpint(child_wait(&c), ==, 0);
  child_kill(&c);
}

static void
test_fake_qemu_exit_during_startup(void)
{
  g_autoptr(GError) error = NULL;
  Child c = spawn_fake_qemu("exit-during-startup", NULL, NULL, 5000);

  g_assert_false(qp_qmp_handshake(c.qmp, &error));
  g_assert_error(error, QP_QMP_ERROR, QP_QMP_ERROR_IO);
  g_assert_cmpint(child_wait(&c), ==, 1);
  child_kill(&c);
}

/* The keeper shortens its wait once the plan is in force. */
static void
test_set_timeout(void)
{
  g_autoptr(GError) error = NULL;
  Child c = spawn_fake_qemu("never-reply:query-cpus-fast", NULL, NULL, 60000);

  g_assert_true(qp_qmp_handshake(c.qmp, &error));
  qp_qmp_set_timeout(c.qmp, 200);
  gint64 t0 = g_get_monotonic_time();
  g_autoptr(GArray) cpus = qp_qmp_query_cpus(c.qmp, &error);
  g_test_message("gave up after %.0f ms",
                 (double)(g_get_monotonic_time() - t0) / 1000.0);
  g_assert_null(cpus);
  g_assert_error(error, QP_QMP_ERROR, QP_QMP_ERROR_TIMEOUT);
  g_assert_cmpstr(error->message, ==,
                  "no reply to 'query-cpus-fast' within 200 ms");
  child_kill(&c);
}

static void
test_fake_qemu_never_reply(void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GArray) cpus = NULL;
  Child c = spawn_fake_qemu("never-reply:query-cpus-fast", NULL, NULL, 300);

  g_assert_true(qp_qmp_handshake(c.qmp, &error));
  cpus = qp_qmp_query_cpus(c.qmp, &error);
  g_assert_null(cpus);
  g_assert_error(error, QP_QMP_ERROR, QP_QMP_ERROR_TIMEOUT);
  g_assert_cmpstr(error->message, ==,
                  "no reply to 'query-cpus-fast' within 300 ms");
  child_kill(&c);
}

static void
test_fake_qemu_command_error(void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(QpJv) ret = NULL;
  g_autofree char *dir = g_dir_make_tmp("fake-qemu-XXXXXX", NULL);
  g_autofree char *log = g_build_filename(dir, "log", NULL);
  g_autofree char *text = NULL;
  Child c;

  c = spawn_fake_qemu_env("command-error:cont", NULL, NULL, 5000,
                          "FAKE_QEMU_LOG", log);
  g_assert_true(qp_qmp_handshake(c.qmp, &error));
  ret = qp_qmp_execute(c.qmp, "cont", NULL, &error);
  g_assert_null(ret);
  g_assert_error(error, QP_QMP_ERROR, QP_QMP_ERROR_COMMAND);
  g_assert_cmpstr(error->message, ==, "cont: GenericError: injected failure");
  child_kill(&c);
  g_assert_true(g_file_get_contents(log, &text, NULL, NULL));
  g_assert_cmpstr(text, ==, "qmp_capabilities\ncont\n");
  g_unlink(log);
  g_rmdir(dir);
}

static void
test_fake_qemu_vanish_threads(void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GArray) cpus = NULL;
  Child c = spawn_fake_qemu("vanish-threads", "2", NULL, 5000);

  g_assert_true(qp_qmp_handshake(c.qmp, &error));
  cpus = qp_qmp_query_cpus(c.qmp, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(cpus->len, ==, 2);
  for (guint i = 0; i < 2; i++) {
    int tid = g_array_index(cpus, QpVcpu, i).thread_id;
    g_assert_cmpint(tid, >, 0);
    g_assert_false(is_thread_of(c.pid, tid));
  }
  child_kill(&c);
}

static void
test_fake_qemu_daemonize(void)
{
  g_autofree char *dir = g_dir_make_tmp("fake-qemu-XXXXXX", NULL);
  g_autofree char *pidfile = g_build_filename(dir, "pid", NULL);
  const char *const extra[] = {"-daemonize", "-pidfile", pidfile, NULL};
  g_autoptr(GError) error = NULL;
  g_autoptr(GArray) cpus = NULL;
  g_autoptr(QpJv) q = NULL;
  g_autofree char *text = NULL;
  Child c = spawn_fake_qemu("normal", NULL, extra, 10000);
  int daemon_pid, tid;

  /* The first process exits 0 once the daemon is ready... */
  g_assert_cmpint(child_wait(&c), ==, 0);
  g_assert_true(g_file_get_contents(pidfile, &text, NULL, NULL));
  daemon_pid = atoi(text);
  g_assert_cmpint(daemon_pid, >, 0);
  /* ...and the monitor survives into the daemon. */
  g_assert_true(qp_qmp_handshake(c.qmp, &error));
  g_assert_no_error(error);
  cpus = qp_qmp_query_cpus(c.qmp, &error);
  g_assert_no_error(error);
  tid = g_array_index(cpus, QpVcpu, 0).thread_id;
  g_assert_cmpint(tgid_of(tid), ==, daemon_pid);
  q = qp_qmp_execute(c.qmp, "quit", NULL, &error);
  g_assert_no_error(error);
  child_kill(&c);
  g_unlink(pidfile);
  g_rmdir(dir);
}

static void
test_fake_qemu_daemonize_startup_failure(void)
{
  const char *const extra[] = {"-daemonize", NULL};
  Child c = spawn_fake_qemu("exit-during-startup", NULL, extra, 5000);

  /* The caller of a -daemonize QEMU learns of the failure by exit status. */
  g_assert_cmpint(child_wait(&c), ==, 1);
  child_kill(&c);
}

static void
test_fake_qemu_lifetime(void)
{
  g_autoptr(GError) error = NULL;
  Child c = spawn_fake_qemu_env("normal", NULL, NULL, 5000,
                                "FAKE_QEMU_LIFETIME", "1");

  g_assert_true(qp_qmp_handshake(c.qmp, &error));
  /* A forgotten fake-qemu ends by itself, distinctly. */
  g_assert_cmpint(child_wait(&c), ==, 3);
  child_kill(&c);
}

/* ---- bytes by hand ---------------------------------------------------- */

static void
test_raw_requests_carry_ids(void)
{
  g_autofree char *text = g_strconcat(
      greeting, "{\"return\": {}, \"id\": 1}\r\n", "\r\n",
      "{\"return\": {\"a\": 1}, \"id\": 2}\n", "  {\"event\": \"X\"}  \r\n",
      "{\"id\": 3, \"return\": [1]}\r\n", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(QpJv) args = qp_jv_object();
  g_autoptr(QpJv) r2 = NULL, r3 = NULL;
  g_auto(GStrv) lines = NULL;
  int peer;
  g_autoptr(QpQmp) qmp = raw_client(text, 2000, &peer);

  g_assert_true(qp_qmp_handshake(qmp, &error));
  qp_jv_set(args, "path", qp_jv_string("/machine"));
  r2 = qp_qmp_execute(qmp, "first", args, &error);
  g_assert_no_error(error);
  g_assert_cmpint(qp_jv_get_int_or(r2, "a", -1), ==, 1);
  r3 = qp_qmp_execute(qmp, "second", NULL, &error);
  g_assert_no_error(error);
  g_assert_true(qp_jv_is(r3, QP_JV_ARRAY));
  g_assert_true(qp_qmp_has_event(qmp));

  lines = sent_lines(peer);
  g_assert_cmpuint(g_strv_length(lines), ==, 3);
  g_assert_cmpstr(lines[0], ==, "{\"execute\":\"qmp_capabilities\",\"id\":1}");
  g_assert_cmpstr(
      lines[1], ==,
      "{\"execute\":\"first\",\"arguments\":{\"path\":\"/machine\"},"
      "\"id\":2}");
  g_assert_cmpstr(lines[2], ==, "{\"execute\":\"second\",\"id\":3}");
  close(peer);
}

typedef struct {
  const char *name;
  const char *reply; /* what the peer sends after the handshake */
  int code;
  const char *message; /* the whole expected message */
} RawRow;

static const RawRow raw_rows[] = {
    {"wrong-id", "{\"return\": [], \"id\": 7}\r\n", QP_QMP_ERROR_PROTOCOL,
     "query-cpus-fast: expected a reply with id 2, got id 7"},
    {"missing-id", "{\"return\": []}\r\n", QP_QMP_ERROR_PROTOCOL,
     "query-cpus-fast: expected a reply with id 2, got one without an integer "
     "id: '{\"return\":[]}'"},
    {"string-id", "{\"return\": [], \"id\": \"2\"}\r\n", QP_QMP_ERROR_PROTOCOL,
     "query-cpus-fast: expected a reply with id 2, got one without an integer "
     "id: '{\"return\":[],\"id\":\"2\"}'"},
    {"array-not-object", "[1, 2]\r\n", QP_QMP_ERROR_PROTOCOL,
     "query-cpus-fast: expected a JSON object, got '[1, 2]'"},
    {"not-a-reply", "{\"hello\": 1}\r\n", QP_QMP_ERROR_PROTOCOL,
     "query-cpus-fast: expected a reply or an event, got '{\"hello\":1}'"},
    {"event-name-not-string", "{\"event\": 5}\r\n", QP_QMP_ERROR_PROTOCOL,
     "query-cpus-fast: expected an event name string, got '{\"event\":5}'"},
    {"error-without-desc", "{\"error\": {\"class\": \"X\"}, \"id\": 2}\r\n",
     QP_QMP_ERROR_PROTOCOL,
     "query-cpus-fast: expected an error with 'class' and 'desc', got "
     "'{\"error\":{\"class\":\"X\"},\"id\":2}'"},
    {"return-not-array", "{\"return\": {}, \"id\": 2}\r\n",
     QP_QMP_ERROR_PROTOCOL, "query-cpus-fast: expected an array, got '{}'"},
    {"thread-id-missing", "{\"return\": [{\"cpu-index\": 0}], \"id\": 2}\r\n",
     QP_QMP_ERROR_PROTOCOL,
     "query-cpus-fast: element 0: expected member 'thread-id', found none"},
    {"thread-id-string",
     "{\"return\": [{\"cpu-index\": 0, \"thread-id\": \"12\"}], \"id\": 2}\r\n",
     QP_QMP_ERROR_PROTOCOL,
     "query-cpus-fast: element 0: expected an integer for 'thread-id', got "
     "'\"12\"'"},
    {"thread-id-zero",
     "{\"return\": [{\"cpu-index\": 0, \"thread-id\": 0}], \"id\": 2}\r\n",
     QP_QMP_ERROR_PROTOCOL,
     "query-cpus-fast: element 0: expected 'thread-id' in 1..2147483647, got "
     "0"},
    {"props-not-object",
     "{\"return\": [{\"cpu-index\": 0, \"thread-id\": 9, \"props\": 1}], "
     "\"id\": 2}\r\n",
     QP_QMP_ERROR_PROTOCOL,
     "query-cpus-fast: element 0: expected an object for 'props'"},
    {"closed-mid-message", "{\"return\": [", QP_QMP_ERROR_IO,
     "query-cpus-fast: peer closed the connection in the middle of a message"},
    {"invalid-utf8", "{\"return\": \"\xff\xfe\"}\r\n", QP_QMP_ERROR_PROTOCOL,
     "query-cpus-fast: expected a JSON object, got invalid UTF-8 "
     "'{\"return\": \"\\xff\\xfe\"}'"},
};

static void
test_raw_row(gconstpointer data)
{
  const RawRow *row = data;
  g_autofree char *text = g_strconcat(
      greeting, "{\"return\": {}, \"id\": 1}\r\n", row->reply, NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(GArray) cpus = NULL;
  int peer;
  g_autoptr(QpQmp) qmp = raw_client(text, 2000, &peer);

  g_assert_true(qp_qmp_handshake(qmp, &error));
  g_assert_no_error(error);
  shutdown(peer, SHUT_WR); /* the peer says nothing more */
  cpus = qp_qmp_query_cpus(qmp, &error);
  g_assert_null(cpus);
  g_assert_error(error, QP_QMP_ERROR, row->code);
  g_assert_cmpstr(error->message, ==, row->message);
  assert_one_line(error);
  close(peer);
}

static void
test_raw_late_reply_dropped(void)
{
  /* A reply to a command that timed out comes late, then the right one. */
  g_autoptr(GError) error = NULL;
  g_autoptr(GArray) cpus = NULL;
  g_autoptr(QpJv) ev = NULL;
  int peer;
  g_autofree char *text =
      g_strconcat(greeting, "{\"return\": {}, \"id\": 1}\r\n", NULL);
  g_autoptr(QpQmp) quick = raw_client(text, 200, &peer);
  const char late[] = "{\"return\": {}, \"id\": 2}\r\n"
                      "{\"event\": \"RESUME\"}\r\n"
                      "{\"return\": [{\"cpu-index\": 0, \"thread-id\": 77}],"
                      " \"id\": 3}\r\n";

  g_assert_true(qp_qmp_handshake(quick, &error));
  g_assert_null(qp_qmp_execute(quick, "slow", NULL, &error));
  g_assert_error(error, QP_QMP_ERROR, QP_QMP_ERROR_TIMEOUT);
  g_assert_cmpstr(error->message, ==, "no reply to 'slow' within 200 ms");
  g_clear_error(&error);
  g_assert_cmpint(write(peer, late, strlen(late)), ==, (gssize)strlen(late));
  cpus = qp_qmp_query_cpus(quick, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(cpus->len, ==, 1);
  g_assert_cmpint(g_array_index(cpus, QpVcpu, 0).thread_id, ==, 77);
  ev = qp_qmp_next_event(quick, 0, &error);
  g_assert_no_error(error);
  g_assert_cmpstr(event_name(ev), ==, "RESUME");
  close(peer);
}

typedef struct {
  int fd;
  gsize bytes;
} Flood;

static gpointer
flood_thread(gpointer data)
{
  Flood *f = data;
  char buf[65536];

  memset(buf, 'x', sizeof buf);
  while (f->bytes > 0) {
    ssize_t n = send(f->fd, buf, MIN(sizeof buf, f->bytes), MSG_NOSIGNAL);
    if (n <= 0)
      break;
    f->bytes -= (gsize)n;
  }
  return NULL;
}

static void
test_raw_line_too_long(void)
{
  g_autoptr(GError) error = NULL;
  int peer;
  g_autoptr(QpQmp) qmp = raw_client("", 5000, &peer);
  Flood f = {.fd = peer, .bytes = 17 * 1024 * 1024};
  GThread *t = g_thread_new("flood", flood_thread, &f);

  g_assert_false(qp_qmp_handshake(qmp, &error));
  g_assert_error(error, QP_QMP_ERROR, QP_QMP_ERROR_PROTOCOL);
  g_assert_true(g_str_has_prefix(error->message,
                                 "QMP greeting: expected a message of at most "
                                 "16777216 bytes, got more: 'xxxx"));
  assert_one_line(error);
  shutdown(peer, SHUT_RDWR);
  g_thread_join(t);
  close(peer);
}

static void
test_parse_deep_nesting(void)
{
  gsize n = 200000;
  g_autofree char *deep = g_malloc(n + 1);
  g_autoptr(GError) error = NULL;
  g_autoptr(QpJv) ok = NULL;
  QpJv *obj;

  memset(deep, '[', n);
  deep[n] = '\0';
  obj = qp_qmp_parse_line(deep, n, &error);
  g_assert_null(obj);
  g_assert_error(error, QP_QMP_ERROR, QP_QMP_ERROR_PROTOCOL);
  g_assert_true(g_str_has_prefix(error->message,
                                 "expected a JSON object nested at most 64 "
                                 "deep, got '[[[["));
  g_clear_error(&error);

  /* Brackets inside strings do not count. */
  memset(deep, '[', n);
  deep[0] = '{';
  memcpy(deep + 1, "\"a\": \"", 6);
  memcpy(deep + n - 2, "\"}", 2);
  ok = qp_qmp_parse_line(deep, n, &error);
  g_assert_no_error(error);
  g_assert_nonnull(ok);
}

static void
test_parse_cpus_props(void)
{
  const char *text =
      "[{\"cpu-index\": 1, \"thread-id\": 100, \"qom-path\": \"/p\","
      "  \"target\": \"x86_64\", \"props\": {\"node-id\": 1, \"socket-id\": 2,"
      "  \"die-id\": 3, \"cluster-id\": 4, \"core-id\": 5, \"thread-id\": 6,"
      "  \"book-id\": 9, \"drawer-id\": 8}},"
      " {\"cpu-index\": 0, \"thread-id\": 101}]";
  g_autoptr(QpJv) node = qp_jv_parse(text, -1, NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(GArray) cpus = qp_qmp_parse_cpus(node, &error);
  QpVcpu *a, *b;

  g_assert_no_error(error);
  g_assert_cmpuint(cpus->len, ==, 2);
  a = &g_array_index(cpus, QpVcpu, 0);
  b = &g_array_index(cpus, QpVcpu, 1);
  g_assert_cmpint(a->cpu_index, ==, 1);
  g_assert_cmpint(a->thread_id, ==, 100);
  g_assert_cmpstr(a->qom_path, ==, "/p");
  g_assert_cmpint(a->node_id, ==, 1);
  g_assert_cmpint(a->socket_id, ==, 2);
  g_assert_cmpint(a->die_id, ==, 3);
  g_assert_cmpint(a->cluster_id, ==, 4);
  g_assert_cmpint(a->core_id, ==, 5);
  g_assert_cmpint(a->smt_id, ==, 6);
  g_assert_cmpint(b->cpu_index, ==, 0);
  g_assert_null(b->qom_path);
  g_assert_cmpint(b->node_id, ==, -1);
  g_assert_cmpint(b->socket_id, ==, -1);
  g_assert_cmpint(b->die_id, ==, -1);
  g_assert_cmpint(b->cluster_id, ==, -1);
  g_assert_cmpint(b->core_id, ==, -1);
  g_assert_cmpint(b->smt_id, ==, -1);
}

static void
test_parse_iothreads(void)
{
  g_autoptr(QpJv) good = qp_jv_parse(
      "[{\"id\": \"a\", \"thread-id\": 5, \"poll-max-ns\": 0}]", -1, NULL);
  g_autoptr(QpJv) bad =
      qp_jv_parse("[{\"id\": 3, \"thread-id\": 5}]", -1, NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(GArray) t = qp_qmp_parse_iothreads(good, &error);
  GArray *none;

  g_assert_no_error(error);
  g_assert_cmpuint(t->len, ==, 1);
  g_assert_cmpstr(g_array_index(t, QpIothread, 0).id, ==, "a");
  g_assert_cmpint(g_array_index(t, QpIothread, 0).thread_id, ==, 5);
  none = qp_qmp_parse_iothreads(bad, &error);
  g_assert_null(none);
  g_assert_error(error, QP_QMP_ERROR, QP_QMP_ERROR_PROTOCOL);
  g_assert_cmpstr(error->message, ==,
                  "query-iothreads: element 0: expected a string for 'id', "
                  "got '3'");
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);

  g_test_add_func("/qmp/qemu/query-cpus-fast/two-vcpus-are-qemu-threads",
                  test_qemu_cpus);
  g_test_add_func("/qmp/qemu/query-iothreads/one-iothread",
                  test_qemu_iothreads);
  g_test_add_func("/qmp/qemu/query-iothreads/none", test_qemu_no_iothreads);
  g_test_add_func("/qmp/qemu/cont/resume-event-queued", test_qemu_cont_resume);
  g_test_add_func("/qmp/qemu/handshake/queries-ahead", test_qemu_ahead);
  g_test_add_func("/qmp/raw/handshake/queries-ahead", test_raw_ahead);
  g_test_add_func("/qmp/raw/handshake/ahead-out-of-order",
                  test_raw_ahead_out_of_order);
  g_test_add_func("/qmp/qemu/quit/peer-close-is-io-error",
                  test_qemu_quit_closes);
  g_test_add_func("/qmp/qemu/error/class-and-desc", test_qemu_command_error);

  g_test_add_func("/qmp/fault/no-greeting/times-out", test_fake_no_greeting);
  g_test_add_func("/qmp/fault/garbage/greeting", test_fake_garbage_greeting);
  g_test_add_func("/qmp/fault/garbage/reply", test_fake_garbage_reply);
  g_test_add_func("/qmp/fault/peer-closes/after-greeting",
                  test_fake_close_after_greeting);
  g_test_add_func("/qmp/fault/peer-closes/exit-during-startup",
                  test_fake_exit_during_startup);
  g_test_add_func("/qmp/fault/command-error/one-line", test_fake_command_error);
  g_test_add_func("/qmp/timeout/set-timeout-applies-to-the-next-command",
                  test_set_timeout);
  g_test_add_func("/qmp/fault/never-reply/times-out-then-recovers",
                  test_fake_never_reply);
  g_test_add_func("/qmp/fault/vanish-threads/tids-are-gone",
                  test_fake_vanish_threads);
  g_test_add_func("/qmp/fake/real-threads", test_fake_real_threads);
  g_test_add_func("/qmp/fake/given-thread-ids", test_fake_given_thread_ids);
  g_test_add_func("/qmp/fake/events/queued-in-order",
                  test_fake_events_queued_in_order);
  g_test_add_func("/qmp/fake/events/on-demand", test_fake_event_on_demand);
  g_test_add_func("/qmp/fake/cont-then-quit", test_fake_cont_and_quit);
  g_test_add_func("/qmp/fake/unknown-command", test_fake_unknown_command);

  g_test_add_func("/qmp/fake-qemu/normal", test_fake_qemu_normal);
  g_test_add_func("/qmp/fake-qemu/vcpus-from-env-or-smp", test_fake_qemu_vcpus);
  g_test_add_func("/qmp/fake-qemu/command-error-and-log",
                  test_fake_qemu_command_error);
  g_test_add_func("/qmp/fake-qemu/vanish-threads",
                  test_fake_qemu_vanish_threads);
  g_test_add_func("/qmp/fake-qemu/sigterm-exits-0", test_fake_qemu_sigterm);
  g_test_add_func("/qmp/fake-qemu/exit-during-startup",
                  test_fake_qemu_exit_during_startup);
  g_test_add_func("/qmp/fake-qemu/never-reply", test_fake_qemu_never_reply);
  g_test_add_func("/qmp/fake-qemu/daemonize", test_fake_qemu_daemonize);
  g_test_add_func("/qmp/fake-qemu/daemonize-startup-failure",
                  test_fake_qemu_daemonize_startup_failure);
  g_test_add_func("/qmp/fake-qemu/lifetime-ends-it", test_fake_qemu_lifetime);

  g_test_add_func("/qmp/reader/requests-carry-increasing-ids",
                  test_raw_requests_carry_ids);
  for (gsize i = 0; i < G_N_ELEMENTS(raw_rows); i++) {
    g_autofree char *path = g_strdup_printf("/qmp/reader/%s", raw_rows[i].name);
    g_test_add_data_func(path, &raw_rows[i], test_raw_row);
  }
  g_test_add_func("/qmp/reader/late-reply-dropped",
                  test_raw_late_reply_dropped);
  g_test_add_func("/qmp/reader/line-too-long", test_raw_line_too_long);
  g_test_add_func("/qmp/parse/deep-nesting-refused", test_parse_deep_nesting);
  g_test_add_func("/qmp/parse/cpus-props", test_parse_cpus_props);
  g_test_add_func("/qmp/parse/iothreads", test_parse_iothreads);

  return g_test_run();
}
