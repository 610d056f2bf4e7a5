/* Faults after QEMU has started, through the real qemu-pin: a QMP peer that
 * never greets, talks garbage, answers with an error or not at all, vCPU
 * threads that vanish, sched_setaffinity failing with EINVAL or EPERM, and
 * QEMU exiting during startup. The target is fake-qemu (tests/common/
 * fake-qemu.c, FAKE_QEMU_SCRIPT) or, where the fault can be made real, real
 * QEMU. Each row asserts: exactly one line on stderr naming the problem, the
 * exit status (QEMU's own when QEMU runs in place: 137 when it was killed;
 * with -daemonize, 1 from the first process), QEMU gone, no keeper left,
 * and nothing in the ledger directory.
 *
 * Paths: /faults/exec/... QEMU in place of qemu-pin, /faults/daemonize/...
 * the same with -daemonize (registered as separate meson tests with
 * --only=exec and --only=daemonize). */
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/robustness/rb-common.h"

typedef enum {
  FAKE, /* fake-qemu */
  REAL, /* real QEMU (TCG) */
} Target;

typedef enum {
  NO_SPECIAL,
  EPERM_FOREIGN_TID, /* run as nobody; vCPU 1 is a thread of a root process */
  FIFO_CHARDEV,      /* QEMU blocks opening a FIFO before its monitor is up */
} Special;

typedef struct {
  const char *name;
  Target target;
  const char *script;  /* FAKE_QEMU_SCRIPT */
  const char *opts[4]; /* qemu-pin's options */
  const char *qemu[8]; /* QEMU arguments after the common ones */
  Special special;
  int status;          /* exec in place; -daemonize always expects 1 */
  const char *want[4]; /* substrings of the one line */
} Row;

/* A recorded 16-core host: its CPU 16 (and 2, 3, ...) do not exist on a
 * 2-CPU machine, so the kernel refuses a vCPU pinned there with EINVAL. */
#define TOPO_EPYC "--topology=@/epyc-7351p.xml"

static const Row rows[] = {
    {"fake/no-greeting",
     FAKE,
     "no-greeting",
     {"--start-timeout=1000"},
     {"-smp", "2"},
     NO_SPECIAL,
     137,
     {"QEMU was stopped", "did not greet within 1000 ms"}},
    {"fake/garbage-greeting",
     FAKE,
     "garbage",
     {NULL},
     {"-smp", "2"},
     NO_SPECIAL,
     137,
     {"QEMU was stopped", "greeting", "not JSON"}},
    {"fake/garbage-reply",
     FAKE,
     "garbage:query-cpus-fast",
     {NULL},
     {"-smp", "2"},
     NO_SPECIAL,
     137,
     {"QEMU was stopped", "query-cpus-fast"}},
    {"fake/error-capabilities",
     FAKE,
     "command-error:qmp_capabilities",
     {NULL},
     {"-smp", "2"},
     NO_SPECIAL,
     137,
     {"qmp_capabilities", "injected failure"}},
    {"fake/error-query-cpus",
     FAKE,
     "command-error:query-cpus-fast",
     {NULL},
     {"-smp", "2"},
     NO_SPECIAL,
     137,
     {"query-cpus-fast", "GenericError", "injected failure"}},
    /* The first look asks for iothreads only when the command line has
     * one (launcher/keeper/keeper.c, first_look_iothreads()). */
    {"fake/error-query-iothreads",
     FAKE,
     "command-error:query-iothreads",
     {NULL},
     {"-smp", "2", "-object", "iothread,id=io0"},
     NO_SPECIAL,
     137,
     {"query-iothreads", "injected failure"}},
    /* cont is sent only to a QEMU qemu-pin started paused: one-to-one
     * pins each vCPU apart from the process's CPUs. */
    {"fake/error-cont",
     FAKE,
     "command-error:cont",
     {"--mode=one-to-one"},
     {"-smp", "2"},
     NO_SPECIAL,
     137,
     {"cont", "injected failure"}},
    {"fake/no-reply-query-cpus",
     FAKE,
     "never-reply:query-cpus-fast",
     {"--qmp-timeout=500"},
     {"-smp", "2"},
     NO_SPECIAL,
     137,
     {"no reply to 'query-cpus-fast' within 500 ms"}},
    {"fake/no-reply-cont",
     FAKE,
     "never-reply:cont",
     {"--qmp-timeout=500", "--mode=one-to-one"},
     {"-smp", "2"},
     NO_SPECIAL,
     137,
     {"no reply to 'cont' within 500 ms"}},
    {"fake/close-after-greeting",
     FAKE,
     "close-after-greeting",
     {NULL},
     {"-smp", "2"},
     NO_SPECIAL,
     137,
     {"QEMU was stopped", "closed"}},
    {"fake/vanished-threads",
     FAKE,
     "vanish-threads",
     {NULL},
     {"-smp", "2"},
     NO_SPECIAL,
     137,
     {"QEMU was stopped", "is gone"}},
    {"fake/einval",
     FAKE,
     "normal",
     {"--mode=one-to-one", TOPO_EPYC},
     {"-smp", "2,threads=2", "-m", "64"},
     NO_SPECIAL,
     137,
     {"vCPU 1", "CPUs 16", "Invalid argument"}},
    {"fake/eperm",
     FAKE,
     "normal",
     {"--mode=one-to-one"},
     {"-smp", "2"},
     EPERM_FOREIGN_TID,
     137,
     {"vCPU 1", "Operation not permitted"}},
    {"fake/exit-during-startup",
     FAKE,
     "exit-during-startup",
     {NULL},
     {"-smp", "2"},
     NO_SPECIAL,
     1,
     {"exiting during startup"}},
    /* QEMU gone while its monitor stays open: the keeper knows from its
     * pidfd that QEMU left on its own, and adds no line to QEMU's. */
    {"fake/exit-before-greeting",
     FAKE,
     "exit-before-greeting",
     {NULL},
     {"-smp", "2"},
     NO_SPECIAL,
     1,
     {"exiting before its monitor greets"}},
    /* Real QEMU */
    {"qemu/no-greeting",
     REAL,
     NULL,
     {"--start-timeout=1000"},
     {"-smp", "2", "-m", "64"},
     FIFO_CHARDEV,
     137,
     {"QEMU was stopped", "did not greet within 1000 ms"}},
    {"qemu/einval",
     REAL,
     NULL,
     {"--mode=one-to-one", TOPO_EPYC},
     {"-smp", "4", "-m", "64"},
     NO_SPECIAL,
     137,
     {"vCPU 2", "CPUs 2", "Invalid argument"}},
    {"qemu/exit-during-startup",
     REAL,
     NULL,
     {NULL},
     {"-smp", "2", "-m", "64", "-device", "no-such-device"},
     NO_SPECIAL,
     1,
     {"no-such-device"}},
};

typedef struct {
  const Row *row;
  gboolean daemonize;
} Case;

static void
test_row(RbFixture *f, gconstpointer data)
{
  const Case *c = data;
  const Row *row = c->row;
  g_autoptr(GPtrArray) argv = g_ptr_array_new_with_free_func(g_free);
  g_auto(GStrv) envp = g_get_environ();
  g_autofree char *fake = rb_fake_qemu();

  if (row->special == EPERM_FOREIGN_TID && geteuid() != 0) {
    g_test_skip("needs root: qemu-pin runs as nobody against a root thread");
    return;
  }
  g_auto(GStrv) names = g_listenv();
  for (guint i = 0; names[i] != NULL; i++)
    if (g_str_has_prefix(names[i], "QEMU_PIN_") ||
        g_str_has_prefix(names[i], "FAKE_QEMU_"))
      envp = g_environ_unsetenv(envp, names[i]);
  g_autofree char *conf = g_build_filename(f->dir, "empty.conf", NULL);
  g_assert_true(g_file_set_contents(conf, "", 0, NULL));
  envp = g_environ_setenv(envp, "QEMU_PIN_CONFIG", conf, TRUE);
  /* TOPO_EPYC's rows launch on a recorded host, which only this lets. */
  envp = g_environ_setenv(envp, "QEMU_PIN_TEST_LAUNCH_ON_TOPOLOGY", "1", TRUE);
  if (row->target == FAKE) {
    envp = g_environ_setenv(envp, "FAKE_QEMU_SCRIPT", row->script, TRUE);
    envp = g_environ_setenv(envp, "FAKE_QEMU_LIFETIME", "60", TRUE);
  }

  if (row->special == EPERM_FOREIGN_TID) {
    /* qemu-pin (and so fake-qemu and the keeper) as nobody, with a state
     * directory it owns; vCPU 1 is reported as this (root) test process. */
    g_assert_cmpint(g_mkdir_with_parents(f->state, 0755), ==, 0);
    g_assert_cmpint(chown(f->state, 65534, 65534), ==, 0);
    g_autofree char *tid = g_strdup_printf("1:%d", (int)getpid());
    envp = g_environ_setenv(envp, "FAKE_QEMU_VCPU_TID", tid, TRUE);
    char *setpriv = g_find_program_in_path("setpriv");
    if (setpriv == NULL) {
      g_test_skip("needs setpriv (util-linux)");
      return;
    }
    g_ptr_array_add(argv, setpriv);
    const char *args[] = {"--reuid=65534", "--regid=65534", "--clear-groups",
                          NULL};
    for (guint i = 0; args[i] != NULL; i++)
      g_ptr_array_add(argv, g_strdup(args[i]));
  }
  g_ptr_array_add(argv, g_strdup(qp_test_binary()));
  g_ptr_array_add(argv, g_strdup_printf("--state-dir=%s", f->state));
  for (guint i = 0; row->opts[i] != NULL; i++) {
    const char *at = strchr(row->opts[i], '@');
    if (at != NULL)
      g_ptr_array_add(argv,
                      g_strdup_printf("%.*s%s%s", (int)(at - row->opts[i]),
                                      row->opts[i], g_getenv("QP_TOPOLOGIES"),
                                      at + 1));
    else
      g_ptr_array_add(argv, g_strdup(row->opts[i]));
  }
  g_ptr_array_add(argv, g_strdup("--"));
  if (row->target == FAKE) {
    g_ptr_array_add(argv, g_strdup(fake));
  } else {
    g_ptr_array_add(argv, g_strdup(f->qemu));
    rb_add_guest_args(f, argv);
  }
  g_ptr_array_add(argv, g_strdup("-name"));
  g_ptr_array_add(argv, g_strdup_printf("%s,debug-threads=on", f->marker));
  for (guint i = 0; row->qemu[i] != NULL; i++)
    g_ptr_array_add(argv, g_strdup(row->qemu[i]));
  if (row->special == FIFO_CHARDEV) {
    g_autofree char *fifo = g_build_filename(f->dir, "fifo", NULL);
    g_assert_cmpint(mkfifo(fifo, 0600), ==, 0);
    g_ptr_array_add(argv, g_strdup("-chardev"));
    g_ptr_array_add(argv, g_strdup_printf("file,id=blocked,path=%s", fifo));
  }
  if (c->daemonize) {
    g_ptr_array_add(argv, g_strdup("-daemonize"));
    g_ptr_array_add(argv, g_strdup("-pidfile"));
    /* Where QEMU (nobody, in the EPERM row) may write. */
    g_ptr_array_add(
        argv,
        g_build_filename(row->special == EPERM_FOREIGN_TID ? f->state : f->dir,
                         "qemu.pid", NULL));
  }
  g_ptr_array_add(argv, NULL);

  g_autofree char *err = NULL;
  int status = rb_run(f, (char **)argv->pdata, envp, 30000, &err);
  g_test_message("status %d, stderr: %s", status, err ? err : "(none)");
  if (status < 0)
    return;
  g_assert_cmpint(status, ==, c->daemonize ? 1 : row->status);
  rb_assert_one_line(err);
  for (guint i = 0; row->want[i] != NULL; i++)
    if (strstr(err, row->want[i]) == NULL)
      g_test_fail_printf("the line does not name \"%s\": %s", row->want[i],
                         err);
  rb_assert_nothing_left(f, 5000);
}

int
main(int argc, char **argv)
{
  static Case cases[G_N_ELEMENTS(rows) * 2];
  /* --only=exec or --only=daemonize (for meson: two tests, one program). */
  int only = -1;
  if (argc > 1 && g_str_has_prefix(argv[1], "--only=")) {
    only = strcmp(argv[1] + 7, "daemonize") == 0;
    argv[1] = argv[0];
    argv++;
    argc--;
  }

  g_test_init(&argc, &argv, NULL);
  /* A row that fails says why and the table goes on. */
  g_test_set_nonfatal_assertions();
  g_assert_nonnull(g_getenv("QP_TOPOLOGIES"));
  for (gsize i = 0; i < G_N_ELEMENTS(rows); i++) {
    for (int d = 0; d < 2; d++) {
      if (only >= 0 && d != only)
        continue;
      Case *c = &cases[i * 2 + (gsize)d];
      c->row = &rows[i];
      c->daemonize = d;
      g_autofree char *path = g_strdup_printf(
          "/faults/%s/%s", d ? "daemonize" : "exec", rows[i].name);
      g_test_add(path, RbFixture, c, rb_setup, test_row, rb_teardown);
    }
  }
  return g_test_run();
}
