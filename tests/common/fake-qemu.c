/* fake-qemu: a stand-in QEMU binary for launcher fault tests.
 *
 * It understands just enough of QEMU's command line to play QEMU's part for
 * qemu-pin and ignores every other argument:
 *   -chardev ...,fd=N   the private monitor: QMP is spoken on fd N (the one
 *                       with id=qemu-pin-qmp, else the last with fd=: qemu-pin
 *                       appends its own after the caller's)
 *   -S                  query-status says "prelaunch" until "cont"
 *   -smp N / cpus=N     number of vCPU threads (unless FAKE_QEMU_VCPUS)
 *   -object iothread,id=X  one iothread thread per object
 *   -pidfile F          writes its PID to F
 *   -daemonize          the first process exits 0 once the daemon is ready
 *                       (1 if the daemon dies first), like QEMU
 *   -version/--version  prints a version line and exits 0
 *
 * Environment:
 *   FAKE_QEMU_SCRIPT    behaviour[:command], e.g. "normal" (default),
 *                       "no-greeting", "garbage" (instead of the greeting),
 *                       "garbage:query-cpus-fast" (instead of that reply),
 *                       "command-error:cont", "never-reply:query-cpus-fast",
 *                       "close-after-greeting", "vanish-threads",
 *                       "exit-during-startup" (greeting, then exit 1),
 *                       "exit-before-greeting" (exit 1 at once, a child
 *                       holding the monitor for a second),
 *                       "exit-at:query-memdev" (exit 0 on it, no reply),
 *                       "memdev-race" (a DIMM plugged later whose backend
 *                       QOM has not at the first qom-get, then has)
 *   FAKE_QEMU_VCPUS     number of vCPU threads (default: -smp, else 1);
 *                       their real tids are what query-cpus-fast reports
 *   FAKE_QEMU_VCPU_TID  "N:TID": query-cpus-fast reports thread TID (say, of
 *                       a process the caller may not touch) for vCPU N
 *   FAKE_QEMU_LOG       file to append each QMP command name to, one a line
 *   FAKE_QEMU_LIFETIME  seconds before it gives up and exits 3 (default 120),
 *                       so a test that forgets it leaves nothing behind
 *   FAKE_QEMU_EXIT_HANG 1: the first SIGTERM/SIGINT/SIGHUP only emits
 *                       SHUTDOWN (reason host-signal) and it stays, as QEMU
 *                       7.2 does when it hangs in its monitor cleanup; the
 *                       second ends it
 *
 * FAKE_QEMU_USR2 "malformed" or "huge": SIGUSR2 sends a line that is not
 * JSON, or an event of 17 MiB (beyond what qemu-pin reads as one message),
 * then a RESUME event.
 *
 * SIGUSR1 emits SHUTDOWN (guest-shutdown) and STOP, and it stays: a guest
 * that powered off under -no-shutdown. Events are written from the signal
 * handler: send signals while the monitor is idle.
 *
 * Otherwise it lives like a VM: after "quit" it exits 0; on SIGTERM, SIGINT
 * or SIGHUP it prints QEMU's "terminating on signal" line and exits 0; when
 * the monitor's peer goes away it keeps running. "cont" emits RESUME. */
#include "tests/common/fake-qmp.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int monitor_fd = -1;
static gboolean exit_hang;
static char *usr2_text; /* FAKE_QEMU_USR2's message, then a RESUME */
static gsize usr2_len;
static volatile sig_atomic_t terms;

static void
emit(const char *event)
{
  if (monitor_fd >= 0 && write(monitor_fd, event, strlen(event)) < 0) {
  }
}

static void
on_signal(int sig)
{
  char msg[80];
  int n;

  if (sig == SIGUSR2 && usr2_text != NULL) {
    for (gsize off = 0; monitor_fd >= 0 && off < usr2_len;) {
      ssize_t w = write(monitor_fd, usr2_text + off, usr2_len - off);
      if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
        struct pollfd p = {monitor_fd, POLLOUT, 0};
        (void)poll(&p, 1, 1000);
        continue;
      }
      if (w <= 0)
        break;
      off += (gsize)w;
    }
    return;
  }
  if (sig == SIGUSR1) {
    emit("{\"event\": \"SHUTDOWN\", \"data\": {\"guest\": true, "
         "\"reason\": \"guest-shutdown\"}, \"timestamp\": {\"seconds\": 0, "
         "\"microseconds\": 0}}\r\n"
         "{\"event\": \"STOP\", \"timestamp\": {\"seconds\": 0, "
         "\"microseconds\": 0}}\r\n");
    return;
  }
  if (sig != SIGALRM && exit_hang && terms++ == 0) {
    emit("{\"event\": \"SHUTDOWN\", \"data\": {\"guest\": false, "
         "\"reason\": \"host-signal\"}, \"timestamp\": {\"seconds\": 0, "
         "\"microseconds\": 0}}\r\n");
    return;
  }
  if (sig == SIGALRM) {
    static const char m[] = "fake-qemu: lifetime over (FAKE_QEMU_LIFETIME)\n";
    if (write(2, m, sizeof m - 1) < 0) {
    }
    _exit(3);
  }
  n = snprintf(msg, sizeof msg, "fake-qemu: terminating on signal %d\n", sig);
  if (n > 0 && write(2, msg, (size_t)n) < 0) {
  }
  _exit(0);
}

/* Value of KEY in a QEMU "k=v,k=v" option string (a bare first value is the
 * implied key's; ",," escapes are not needed here). */
static char *
opt_value(const char *opts, const char *key)
{
  g_auto(GStrv) parts = g_strsplit(opts, ",", -1);
  gsize klen = strlen(key);

  for (gsize i = 0; parts[i] != NULL; i++) {
    if (strncmp(parts[i], key, klen) == 0 && parts[i][klen] == '=')
      return g_strdup(parts[i] + klen + 1);
  }
  return NULL;
}

static gboolean
is_opt(const char *arg, const char *name)
{
  if (arg[0] != '-')
    return FALSE;
  if (arg[1] == '-')
    arg++;
  return g_str_equal(arg + 1, name);
}

static guint
smp_count(const char *smp)
{
  g_autofree char *cpus = opt_value(smp, "cpus");
  const char *s = cpus != NULL ? cpus : smp;
  guint64 n = g_ascii_strtoull(s, NULL, 10);

  return n > 0 && n < 1024 ? (guint)n : 1;
}

static void
write_pidfile(const char *path)
{
  g_autofree char *text = g_strdup_printf("%d\n", (int)getpid());
  g_autoptr(GError) error = NULL;

  if (!g_file_set_contents(path, text, -1, &error)) {
    fprintf(stderr, "fake-qemu: pidfile: %s\n", error->message);
    exit(1);
  }
}

/* QEMU's -daemonize: the caller's process waits until the daemon is ready.
 * Returns the fd to write one byte to when ready. */
static int
daemonize(void)
{
  int p[2];
  pid_t pid;

  if (pipe(p) < 0) {
    perror("fake-qemu: pipe");
    exit(1);
  }
  pid = fork();
  if (pid < 0) {
    perror("fake-qemu: fork");
    exit(1);
  }
  if (pid > 0) {
    char c;
    ssize_t n;

    close(p[1]);
    do
      n = read(p[0], &c, 1);
    while (n < 0 && errno == EINTR);
    _exit(n == 1 ? 0 : 1);
  }
  close(p[0]);
  setsid();
  pid = fork();
  if (pid < 0)
    _exit(1);
  if (pid > 0)
    _exit(0); /* the daemon is reparented; the first process waits on p */
  return p[1];
}

/* QEMU exiting before its monitor greets while a process it started still
 * holds the monitor's socket: whoever waits for the greeting learns of the
 * exit from QEMU's pidfd, not from the monitor closing. The holder lets go
 * after a second. */
G_GNUC_NORETURN static void
exit_before_greeting(int fd, int ready_fd)
{
  if (fork() == 0) {
    int null = open("/dev/null", O_RDWR);
    for (int i = 0; i < 3; i++)
      dup2(null, i);
    if (ready_fd >= 0)
      close(ready_fd);
    sleep(1);
    close(fd);
    _exit(0);
  }
  fprintf(stderr, "fake-qemu: exiting before its monitor greets "
                  "(FAKE_QEMU_SCRIPT=exit-before-greeting)\n");
  exit(1);
}

int
main(int argc, char **argv)
{
  const char *script_env = g_getenv("FAKE_QEMU_SCRIPT");
  const char *vcpus_env = g_getenv("FAKE_QEMU_VCPUS");
  const char *log_env = g_getenv("FAKE_QEMU_LOG");
  const char *life_env = g_getenv("FAKE_QEMU_LIFETIME");
  const char *tid_env = g_getenv("FAKE_QEMU_VCPU_TID");
  g_autoptr(GPtrArray) iothreads = g_ptr_array_new_with_free_func(g_free);
  g_auto(GStrv) script_parts = NULL;
  FakeQmpScript script = {0};
  const char *pidfile = NULL;
  gboolean do_daemonize = FALSE;
  int fd = -1, ready_fd = -1;
  gboolean fd_is_ours = FALSE;
  guint n_vcpus = 1;
  unsigned lifetime;
  FakeQmp *peer;
  FakeQmpEnd end;
  struct sigaction sa = {.sa_handler = on_signal};

  for (int i = 1; i < argc; i++) {
    const char *next = i + 1 < argc ? argv[i + 1] : NULL;

    if (is_opt(argv[i], "version")) {
      printf("QEMU emulator version 7.2.0 (fake-qemu)\n"
             "Copyright (c) 2003-2022 Fabrice Bellard and the QEMU Project "
             "developers\n");
      return 0;
    } else if (is_opt(argv[i], "S")) {
      script.paused = TRUE;
    } else if (is_opt(argv[i], "daemonize")) {
      do_daemonize = TRUE;
    } else if (next != NULL && is_opt(argv[i], "pidfile")) {
      pidfile = next;
      i++;
    } else if (next != NULL && is_opt(argv[i], "smp")) {
      n_vcpus = smp_count(next);
      i++;
    } else if (next != NULL && is_opt(argv[i], "chardev")) {
      g_autofree char *v = opt_value(next, "fd");
      g_autofree char *id = opt_value(next, "id");
      gboolean ours = g_strcmp0(id, "qemu-pin-qmp") == 0;

      if (v != NULL && (!fd_is_ours || ours)) {
        gint64 n = g_ascii_strtoll(v, NULL, 10);
        fd = n >= 0 && n < G_MAXINT ? (int)n : -1;
        fd_is_ours = ours;
      }
      i++;
    } else if (next != NULL && is_opt(argv[i], "object")) {
      if (g_str_has_prefix(next, "iothread,")) {
        char *id = opt_value(next, "id");
        if (id != NULL)
          g_ptr_array_add(iothreads, id);
      }
      i++;
    }
  }

  if (vcpus_env != NULL)
    n_vcpus = smp_count(vcpus_env);
  script.n_vcpus = n_vcpus;
  g_ptr_array_add(iothreads, NULL);
  script.iothreads = (const char *const *)iothreads->pdata;

  script_parts = g_strsplit(script_env != NULL ? script_env : "normal", ":", 2);
  if (g_strcmp0(script_parts[0], "exit-before-greeting") == 0)
    script.behaviour = FAKE_QMP_NO_GREETING; /* never served */
  else if (!fake_qmp_behaviour_from_name(script_parts[0], &script.behaviour)) {
    fprintf(stderr, "fake-qemu: unknown FAKE_QEMU_SCRIPT '%s'\n",
            script_parts[0]);
    return 2;
  }
  script.command = script_parts[1];

  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
  sigaction(SIGALRM, &sa, NULL);
  sigaction(SIGUSR1, &sa, NULL);
  {
    const char *kind = g_getenv("FAKE_QEMU_USR2");
    static const char resume[] =
        "{\"event\": \"RESUME\", \"timestamp\": {\"seconds\": 0, "
        "\"microseconds\": 0}}\r\n";
    GString *t = NULL;
    if (g_strcmp0(kind, "malformed") == 0) {
      t = g_string_new("{\"event\": \"RESUME\", \"timestamp\": {{{\r\n");
    } else if (g_strcmp0(kind, "huge") == 0) {
      t = g_string_new("{\"event\": \"X-HUGE\", \"data\": {\"s\": \"");
      gsize at = t->len;
      g_string_set_size(t, at + 17 * 1024 * 1024);
      memset(t->str + at, 'x', 17 * 1024 * 1024);
      g_string_append(t, "\"}, \"timestamp\": {\"seconds\": 0, "
                         "\"microseconds\": 0}}\r\n");
    }
    if (t != NULL) {
      g_string_append(t, resume);
      usr2_len = t->len;
      usr2_text = g_string_free(t, FALSE);
      sigaction(SIGUSR2, &sa, NULL);
    }
  }
  exit_hang = g_strcmp0(g_getenv("FAKE_QEMU_EXIT_HANG"), "1") == 0;
  monitor_fd = fd;
  signal(SIGPIPE, SIG_IGN);
  lifetime =
      life_env != NULL ? (unsigned)g_ascii_strtoull(life_env, NULL, 10) : 120;
  alarm(lifetime);

  if (log_env != NULL) {
    script.log_fd =
        open(log_env, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (script.log_fd < 0) {
      fprintf(stderr, "fake-qemu: FAKE_QEMU_LOG '%s': %s\n", log_env,
              g_strerror(errno));
      return 1;
    }
  }

  if (do_daemonize) {
    ready_fd = daemonize();
    alarm(lifetime); /* fork() does not pass pending alarms on */
  }
  if (pidfile != NULL)
    write_pidfile(pidfile);
  if (g_strcmp0(script_parts[0], "exit-before-greeting") == 0)
    exit_before_greeting(fd, ready_fd);

  peer = fake_qmp_new_peer(&script, fd);
  if (tid_env != NULL) {
    guint64 index = 0;
    gint64 tid = 0;
    g_auto(GStrv) it = g_strsplit(tid_env, ":", 2);

    if (it[1] == NULL ||
        !g_ascii_string_to_unsigned(it[0], 10, 0, n_vcpus - 1, &index, NULL) ||
        !g_ascii_string_to_signed(it[1], 10, 1, G_MAXINT, &tid, NULL)) {
      fprintf(stderr,
              "fake-qemu: FAKE_QEMU_VCPU_TID '%s': expected N:TID "
              "with N below %u\n",
              tid_env, n_vcpus);
      return 2;
    }
    fake_qmp_set_vcpu_tid(peer, (guint)index, (int)tid);
  }
  /* Startup failure must reach -daemonize's waiting parent as exit 1. */
  if (ready_fd >= 0 && script.behaviour != FAKE_QMP_EXIT_DURING_STARTUP) {
    if (write(ready_fd, "", 1) < 0) {
    }
    close(ready_fd);
  }

  end = fd >= 0 ? fake_qmp_serve(peer, -1) : FAKE_QMP_END_CLOSED;
  if (end == FAKE_QMP_END_EXIT) {
    fprintf(stderr, "fake-qemu: exiting during startup "
                    "(FAKE_QEMU_SCRIPT=exit-during-startup)\n");
    exit(1);
  }
  if (end == FAKE_QMP_END_QUIT) {
    if (fd >= 0)
      close(fd);
    fake_qmp_free_peer(peer);
    return 0;
  }
  /* The monitor's peer is gone (or there was none): QEMU keeps running. */
  for (;;)
    pause();
}
