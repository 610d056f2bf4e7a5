/* How QEMU starts under qemu-pin (docs/design.md, "Which plans pause", "The
 * front"), with real QEMU (TCG):
 *   - a plan that pins no thread of its own (balanced) starts QEMU
 *     unpaused: every thread inside the VM's CPUs and the guest RAM bound
 *     from the first look at the process, no -S, no cont from the keeper,
 *     which still holds the claim and claims memory plugged later;
 *   - a plan that pins (one-to-one) starts QEMU paused until pinned;
 *   - mode none and pass-through run QEMU exactly as the caller asked
 *     (argv with argv[0], environment, descriptors, signals), with nothing
 *     loaded before by the static launcher, and neither json-glib nor the
 *     full program by a launcher linked with the shared libraries (a
 *     sanitizer build). */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/common/qp-test.h"

typedef struct {
  char *dir;
  char *state;
  char *halt_fw;
  char *qmp;
  char *marker;
  char *config; /* an empty config file, never the host's */
} Fixture;

static void
setup(Fixture *f, gconstpointer data)
{
  f->dir = qp_test_tmpdir();
  f->state = g_build_filename(f->dir, "state", NULL);
  f->halt_fw = qp_test_firmware(f->dir, QP_TEST_FW_HALT);
  f->qmp = g_build_filename(f->dir, "qmp.sock", NULL);
  f->marker = g_path_get_basename(f->dir);
  f->config = g_build_filename(f->dir, "qemu-pin.conf", NULL);
  g_assert_true(g_file_set_contents(f->config, "", 0, NULL));
}

static void
teardown(Fixture *f, gconstpointer data)
{
  g_autoptr(GArray) left = qp_test_pids_with(f->marker);
  for (guint i = 0; i < left->len; i++)
    kill(g_array_index(left, int, i), SIGKILL);
  qp_test_rmtree(f->dir);
  g_free(f->dir);
  g_free(f->state);
  g_free(f->halt_fw);
  g_free(f->qmp);
  g_free(f->marker);
  g_free(f->config);
}

/* The environment of a launch: the fixture's config, no QEMU_PIN_* of the
 * caller's. */
static char **
launch_env(Fixture *f)
{
  char **env = g_get_environ();
  for (char **e = env; *e != NULL;) {
    if (g_str_has_prefix(*e, "QEMU_PIN_")) {
      g_autofree char *name = g_strndup(*e, strcspn(*e, "="));
      env = g_environ_unsetenv(env, name);
      e = env;
    } else {
      e++;
    }
  }
  return g_environ_setenv(env, "QEMU_PIN_CONFIG", f->config, TRUE);
}

/* qemu-pin -v --state-dir=S MODE AFFINITY -- QEMU ... EXTRA */
static GPtrArray *
command(Fixture *f, const char *mode, const char *affinity,
        const char *const *extra)
{
  GPtrArray *a = g_ptr_array_new_with_free_func(g_free);
  g_ptr_array_add(a, g_strdup(qp_test_binary()));
  g_ptr_array_add(a, g_strdup("-v"));
  g_ptr_array_add(a, g_strdup_printf("--state-dir=%s", f->state));
  g_ptr_array_add(a, g_strdup(mode));
  if (affinity != NULL)
    g_ptr_array_add(a, g_strdup_printf("--affinity=%s", affinity));
  g_ptr_array_add(a, g_strdup("--"));
  const char *qemu[] = {"-accel",   "tcg",  "-machine",    "q35",
                        "-display", "none", "-nodefaults", NULL};
  g_ptr_array_add(a, g_strdup(qp_test_qemu()));
  for (guint i = 0; qemu[i] != NULL; i++)
    g_ptr_array_add(a, g_strdup(qemu[i]));
  g_ptr_array_add(a, g_strdup("-bios"));
  g_ptr_array_add(a, g_strdup(f->halt_fw));
  g_ptr_array_add(a, g_strdup("-name"));
  g_ptr_array_add(a, g_strdup_printf("%s,debug-threads=on", f->marker));
  g_ptr_array_add(a, g_strdup("-qmp"));
  g_ptr_array_add(a, g_strdup_printf("unix:%s,server=on,wait=off", f->qmp));
  for (guint i = 0; extra != NULL && extra[i] != NULL; i++)
    g_ptr_array_add(a, g_strdup(extra[i]));
  g_ptr_array_add(a, NULL);
  return a;
}

/* The last CPU this process may run on. */
static char *
last_cpu(void)
{
  cpu_set_t set;
  g_assert_cmpint(sched_getaffinity(0, sizeof(set), &set), ==, 0);
  int last = -1;
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, &set))
      last = c;
  g_assert_cmpint(last, >=, 0);
  return g_strdup_printf("%d", last);
}

static char *
stderr_of(Fixture *f)
{
  return qp_test_file_text(f->dir, "stderr");
}

/* Waits until PID runs QEMU's binary (the exec is done). */
static gboolean
wait_exec(int pid, guint timeout_ms)
{
  g_autofree char *qemu = realpath(qp_test_qemu(), NULL);
  g_autofree char *link = g_strdup_printf("/proc/%d/exe", pid);
  gint64 deadline = g_get_monotonic_time() + (gint64)timeout_ms * 1000;
  while (g_get_monotonic_time() < deadline) {
    g_autofree char *exe = g_file_read_link(link, NULL);
    if (exe != NULL && g_strcmp0(exe, qemu) == 0)
      return TRUE;
    g_usleep(200);
  }
  return FALSE;
}

/* Every thread of PID allowed exactly CPUS: the number of threads seen. */
static guint
assert_threads_on(int pid, const char *cpus)
{
  g_autofree char *task = g_strdup_printf("/proc/%d/task", pid);
  g_autoptr(GDir) d = g_dir_open(task, 0, NULL);
  g_assert_nonnull(d);
  const char *name;
  guint n = 0;
  while ((name = g_dir_read_name(d)) != NULL) {
    g_autofree char *have =
        qp_test_task_field(pid, atoi(name), "Cpus_allowed_list");
    if (have == NULL)
      continue; /* a worker that came and went */
    g_assert_cmpstr(have, ==, cpus);
    n++;
  }
  return n;
}

/* Whether PID's command line has the argument ARG. */
static gboolean
cmdline_has(int pid, const char *arg)
{
  g_autofree char *path = g_strdup_printf("/proc/%d/cmdline", pid);
  g_autofree char *text = NULL;
  gsize len = 0;
  g_assert_true(g_file_get_contents(path, &text, &len, NULL));
  for (gsize i = 0; i < len; i += strlen(text + i) + 1)
    if (strcmp(text + i, arg) == 0)
      return TRUE;
  return FALSE;
}

/* Waits until the keeper's -v log has a line with NEEDLE. */
static gboolean
wait_log(Fixture *f, const char *needle, guint timeout_ms)
{
  gint64 deadline = g_get_monotonic_time() + (gint64)timeout_ms * 1000;
  do {
    g_autofree char *err = stderr_of(f);
    if (strstr(err, needle) != NULL)
      return TRUE;
    g_usleep(10000);
  } while (g_get_monotonic_time() < deadline);
  return FALSE;
}

static void
stop(Fixture *f, GPid pid)
{
  qp_test_stop_released(pid, f->marker, f->state);
}

/* ---- A plan that pins nothing of its own --------------------------------- */

static void
test_balanced_unpaused(Fixture *f, gconstpointer data)
{
  g_autofree char *cpu = last_cpu();
  const char *extra[] = {"-smp", "1", "-m", "64", NULL};
  g_autoptr(GPtrArray) cmd = command(f, "--mode=balanced", cpu, extra);
  g_autoptr(JsonObject) plan = qp_test_plan((char **)cmd->pdata + 1);
  g_assert_false(json_object_get_boolean_member(plan, "pause"));
  g_assert_cmpstr(json_object_get_string_member(plan, "startup-cpus"), ==, cpu);
  const char *nodes = json_object_get_string_member(plan, "memory-nodes");
  g_assert_nonnull(nodes);
  g_autofree char *bound = g_strdup_printf("bind:%s", nodes);

  g_auto(GStrv) env = launch_env(f);
  GPid pid = qp_test_spawn((char **)cmd->pdata, env, f->dir);
  /* From the first look after the exec: every thread on the plan's CPU,
   * and it stays so while the vCPU thread comes (nobody moves threads). */
  g_assert_true(wait_exec(pid, 30000));
  guint seen = 0;
  gint64 deadline = g_get_monotonic_time() + 30 * G_USEC_PER_SEC;
  for (;;) {
    g_autoptr(GArray) vcpus = qp_test_vcpu_threads(pid);
    if (vcpus->len > 0 || g_get_monotonic_time() > deadline)
      break;
    seen = MAX(seen, assert_threads_on(pid, cpu));
  }
  seen = MAX(seen, assert_threads_on(pid, cpu));
  g_assert_cmpuint(seen, >=, 2);
  /* The guest RAM is bound there (on the command line, before QEMU
   * allocated it). */
  g_auto(GStrv) maps = qp_test_wait_mappings(pid, 64 * 1024, 1, 10000);
  g_assert_cmpuint(g_strv_length(maps), ==, 1);
  g_assert_true(g_str_has_prefix(maps[0], bound));
  /* Running without anyone's cont: no -S, and the keeper sent none. */
  g_assert_true(qp_test_wait_status(f->qmp, "running", 10000));
  g_assert_true(cmdline_has(pid, "-nodefaults"));
  g_assert_false(cmdline_has(pid, "-S"));
  g_assert_true(wait_log(f, "pinned 0 threads", 30000));
  g_autofree char *err = stderr_of(f);
  g_test_message("%s", err);
  g_assert_null(strstr(err, ": cont\n"));
  /* -v says the plan's choice first, as plan --json's reasons (the keeper
   * alone said nothing of a guest gone before its greeting). */
  JsonArray *reasons = json_object_get_array_member(plan, "reasons");
  g_assert_cmpuint(json_array_get_length(reasons), >=, 1);
  /* Up to the room figures, which the other tests' VMs may change. */
  const char *reason = json_array_get_string_element(reasons, 0);
  g_autofree char *said = g_strdup_printf("qemu-pin: plan: %.*s",
                                          (int)strcspn(reason, "("), reason);
  g_assert_nonnull(strstr(said, "balanced: host node "));
  g_assert_true(g_str_has_prefix(err, said));
  g_assert_cmpuint(qp_test_count_records(f->state), ==, 1);
  assert_threads_on(pid, cpu);
  stop(f, pid);
}

/* A QMP command with ARGS (JSON) over the caller's monitor: TRUE when it
 * returned. */
static gboolean
qmp_with_args(const char *path, const char *command, const char *args)
{
  g_autoptr(JsonNode) ret = qp_test_qmp_execute(path, command, args);
  return ret != NULL;
}

/* The MiB the VM's record claims on every node. */
static gint64
claimed_mib(Fixture *f)
{
  g_autoptr(JsonObject) rec = qp_test_record(f->state);
  if (rec == NULL)
    return -1;
  JsonObject *m = json_object_get_object_member(rec, "memory-mib");
  gint64 sum = 0;
  g_autoptr(GList) nodes = json_object_get_members(m);
  for (GList *l = nodes; l != NULL; l = l->next)
    sum += json_object_get_int_member(m, l->data);
  return sum;
}

/* How many processes have PID for parent (each one named in the log). */
static guint
children_of(GPid pid)
{
  g_autoptr(GDir) d = g_dir_open("/proc", 0, NULL);
  g_assert_nonnull(d);
  g_autofree char *want = g_strdup_printf("%d", (int)pid);
  guint n = 0;
  const char *name;
  while ((name = g_dir_read_name(d)) != NULL) {
    int kid = atoi(name);
    if (kid <= 0)
      continue;
    g_autofree char *ppid = qp_test_task_field(kid, kid, "PPid");
    if (g_strcmp0(ppid, want) == 0) { /* NULL: gone meanwhile */
      g_test_message("process %d is a child of %d", kid, (int)pid);
      n++;
    }
  }
  return n;
}

static void
test_balanced_keeper_holds(Fixture *f, gconstpointer data)
{
  const char *extra[] = {"-smp", "1", "-m", "64,slots=2,maxmem=512M", NULL};
  g_autoptr(GPtrArray) cmd = command(f, "--mode=balanced", NULL, extra);
  g_autoptr(JsonObject) plan = qp_test_plan((char **)cmd->pdata + 1);
  g_assert_false(json_object_get_boolean_member(plan, "pause"));
  g_auto(GStrv) env = launch_env(f);
  GPid pid = qp_test_spawn((char **)cmd->pdata, env, f->dir);
  g_assert_true(qp_test_wait_status(f->qmp, "running", 30000));
  g_assert_true(wait_log(f, "pinned 0 threads", 30000));
  g_assert_cmpint(claimed_mib(f), ==, 64);
  /* The keeper the record names runs, and is no child of QEMU's: QEMU
   * (the launcher's PID) has no child at all, neither the keeper nor the
   * intermediate one that made it, which the launcher reaped before its
   * exec. */
  g_autoptr(JsonObject) rec = qp_test_record(f->state);
  g_assert_nonnull(rec);
  gint64 keeper = json_object_get_int_member(rec, "keeper-pid");
  g_assert_cmpint(keeper, >, 0);
  g_assert_cmpint(kill((pid_t)keeper, 0), ==, 0);
  g_assert_cmpuint(children_of(pid), ==, 0);

  /* Plugged while the guest runs: the keeper claims it. */
  g_assert_true(qmp_with_args(
      f->qmp, "object-add",
      "{\"qom-type\":\"memory-backend-ram\",\"id\":\"hp0\",\"size\":"
      "67108864}"));
  g_assert_true(qmp_with_args(
      f->qmp, "device_add",
      "{\"driver\":\"pc-dimm\",\"id\":\"dimm0\",\"memdev\":\"hp0\"}"));
  gint64 deadline = g_get_monotonic_time() + 20 * G_USEC_PER_SEC;
  while (claimed_mib(f) != 128 && g_get_monotonic_time() < deadline)
    g_usleep(50000);
  g_assert_cmpint(claimed_mib(f), ==, 128);
  stop(f, pid);
}

/* ---- A plan that pins ---------------------------------------------------- */

static void
test_one_to_one_paused(Fixture *f, gconstpointer data)
{
  cpu_set_t set;
  g_assert_cmpint(sched_getaffinity(0, sizeof(set), &set), ==, 0);
  if (CPU_COUNT(&set) < 2) {
    g_test_skip("one-to-one needs 2 CPUs here to pin a vCPU apart");
    return;
  }
  const char *extra[] = {"-smp", "1", "-m", "64", NULL};
  g_autoptr(GPtrArray) cmd = command(f, "--mode=one-to-one", NULL, extra);
  g_autoptr(JsonObject) plan = qp_test_plan((char **)cmd->pdata + 1);
  g_assert_true(json_object_get_boolean_member(plan, "pause"));
  g_auto(GStrv) want = qp_test_plan_vcpu_sets(plan);
  g_auto(GStrv) env = launch_env(f);
  GPid pid = qp_test_spawn((char **)cmd->pdata, env, f->dir);
  g_assert_true(qp_test_wait_status(f->qmp, "running", 30000));
  g_assert_true(cmdline_has(pid, "-nodefaults"));
  g_assert_true(cmdline_has(pid, "-S"));
  g_assert_true(
      qp_test_wait_vcpu_affinity(pid, (const char *const *)want, 10000));
  g_assert_true(wait_log(f, ": cont\n", 10000));
  stop(f, pid);
}

/* ---- Mode none and pass-through ----------------------------------------- */

typedef struct {
  const char *name;
  gboolean drop_in;
  const char *opts[3]; /* qemu-pin's own options */
  const char *env[3];
  const char *config;
  const char *args[4]; /* the program's arguments */
} NoneCase;

static const NoneCase none_cases[] = {
    {"cli", FALSE, {"--mode=none", "--"}, {NULL}, "", {"a", "b c", NULL}},
    {"env", FALSE, {NULL}, {"QEMU_PIN_MODE=none", NULL}, "", {"a", NULL}},
    {"config-name-group",
     FALSE,
     {NULL},
     {NULL},
     "[defaults]\nmode = numa\n[name:vm]\nmode = none\n",
     {"-name", "guest=vm", "-smp", NULL}},
    {"drop-in",
     TRUE,
     {NULL},
     {"QEMU_PIN_MODE=none", NULL},
     "",
     {"-m", "64", NULL}},
    {"pass-through-version",
     FALSE,
     {"--"},
     {NULL},
     "[defaults]\nmode=numa\n",
     {"-version", NULL}},
};

typedef struct {
  char *out;
  int status;
} Dump;

/* Runs FILE with ARGV (ARGV[0] as given) and ENV, every descriptor of ours
 * left open; its stdout and exit status. */
static void
run_dump(const char *file, char **argv, char **env, Dump *d)
{
  g_autoptr(GError) error = NULL;
  char *err = NULL;
  g_autoptr(GPtrArray) full = g_ptr_array_new();
  g_ptr_array_add(full, (char *)file);
  for (guint i = 0; argv[i] != NULL; i++)
    g_ptr_array_add(full, argv[i]);
  g_ptr_array_add(full, NULL);
  g_assert_true(
      g_spawn_sync(NULL, (char **)full->pdata, env,
                   G_SPAWN_FILE_AND_ARGV_ZERO | G_SPAWN_LEAVE_DESCRIPTORS_OPEN,
                   NULL, NULL, &d->out, &err, &d->status, &error));
  g_assert_no_error(error);
  g_free(err);
}

static void
test_none_exact(Fixture *f, gconstpointer data)
{
  const NoneCase *c = data;
  g_autofree char *dump =
      g_test_build_filename(G_TEST_BUILT, "launch", "exec-dump", NULL);
  g_assert_true(g_file_set_contents(f->config, c->config, -1, NULL));
  g_auto(GStrv) env = launch_env(f);
  for (guint i = 0; c->env[i] != NULL; i++) {
    g_auto(GStrv) kv = g_strsplit(c->env[i], "=", 2);
    env = g_environ_setenv(env, kv[0], kv[1], TRUE);
  }
  g_autofree char *name_link =
      g_build_filename(f->dir, "qemu-system-x86_64", NULL);
  if (c->drop_in) {
    g_assert_cmpint(symlink(qp_test_binary(), name_link), ==, 0);
    env = g_environ_setenv(env, "QEMU_PIN_QEMU", dump, TRUE);
  }
  /* Inherited by both runs, as an orchestrator's descriptors are. */
  int extra = open("/dev/null", O_RDONLY);
  g_assert_cmpint(extra, >, 2);

  /* Directly: the program, the caller's argv[0] (what qemu-pin keeps). */
  g_autoptr(GPtrArray) direct = g_ptr_array_new();
  g_ptr_array_add(direct, (char *)(c->drop_in ? name_link : dump));
  /* Through qemu-pin: as the launcher, or under QEMU's name. */
  g_autoptr(GPtrArray) via = g_ptr_array_new();
  g_ptr_array_add(via, (char *)(c->drop_in ? name_link : qp_test_binary()));
  for (guint i = 0; !c->drop_in && c->opts[i] != NULL; i++)
    g_ptr_array_add(via, (char *)c->opts[i]);
  if (!c->drop_in)
    g_ptr_array_add(via, (char *)dump);
  for (guint i = 0; c->args[i] != NULL; i++) {
    g_ptr_array_add(direct, (char *)c->args[i]);
    g_ptr_array_add(via, (char *)c->args[i]);
  }
  g_ptr_array_add(direct, NULL);
  g_ptr_array_add(via, NULL);

  Dump d = {0}, q = {0};
  run_dump(dump, (char **)direct->pdata, env, &d);
  run_dump(via->pdata[0], (char **)via->pdata, env, &q);
  close(extra);
  g_test_message("direct:\n%s", d.out);
  g_assert_cmpstr(q.out, ==, d.out);
  g_assert_true(WIFEXITED(q.status));
  g_assert_cmpint(WEXITSTATUS(q.status), ==, 3);
  g_assert_cmpint(q.status, ==, d.status);
  g_free(d.out);
  g_free(q.out);
}

/* The dynamic loader's word (LD_DEBUG=libs) on what a run of qemu-pin
 * loads, up to and after the exec of the program it runs. */
static char *
loaded_by(Fixture *f, char **argv)
{
  g_auto(GStrv) env = launch_env(f);
  env = g_environ_setenv(env, "LD_DEBUG", "libs", TRUE);
  QpTestRun r;
  qp_test_run(argv, env, &r);
  char *err = g_strdup(r.err);
  qp_test_run_clear(&r);
  return err;
}

static void
test_none_loads_libc_only(Fixture *f, gconstpointer data)
{
  g_autofree char *dump =
      g_test_build_filename(G_TEST_BUILT, "launch", "exec-dump", NULL);
  char *none[] = {(char *)qp_test_binary(), "--mode=none", "--", dump, NULL};
  char *version[] = {(char *)qp_test_binary(), "--version", NULL};
  gboolean is_static = g_strcmp0(g_getenv("QP_LAUNCHER_STATIC"), "1") == 0;
  /* (libnuma is loaded by neither program: qemu-pin makes its two NUMA
   * system calls itself, launcher/numa-sys.h.) The static launcher loads
   * nothing at all; one linked with the shared libraries loads glib and
   * hwloc, the launch path's, but never the full program's. */
  static const char *const full[] = {"libglib-2.0", "libjson-glib", "libhwloc",
                                     "qemu-pin-full"};
  g_autofree char *straight = loaded_by(f, none);
  g_autofree char *loaded = loaded_by(f, version);
  /* The check can fail: qemu-pin's own --version, the full program's,
   * loads them all (the program under its caller's argv[0]). */
  g_assert_nonnull(strstr(straight, "libc.so"));
  for (gsize i = 0; i < G_N_ELEMENTS(full); i++) {
    if (!g_str_equal(full[i], "qemu-pin-full"))
      g_assert_nonnull(strstr(loaded, full[i]));
    gboolean launch_path =
        g_str_equal(full[i], "libglib-2.0") || g_str_equal(full[i], "libhwloc");
    if ((is_static || !launch_path) && strstr(straight, full[i]) != NULL)
      g_error("mode none loaded %s before QEMU:\n%s", full[i], straight);
  }
  /* What the loader loaded before the exec it loaded for the launcher: in
   * the static one, the loader never ran before exec-dump's. */
  g_autofree char *self = g_strdup_printf("needed by %s", qp_test_binary());
  if (is_static && strstr(straight, self) != NULL)
    g_error("the static launcher loaded libraries:\n%s", straight);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
#define ADD(path, fn, data) g_test_add(path, Fixture, data, setup, fn, teardown)
  ADD("/start/balanced/unpaused-every-thread-placed-from-the-start",
      test_balanced_unpaused, NULL);
  ADD("/start/balanced/keeper-holds-and-claims-plugged-memory",
      test_balanced_keeper_holds, NULL);
  ADD("/start/one-to-one/paused-until-pinned", test_one_to_one_paused, NULL);
  for (gsize i = 0; i < G_N_ELEMENTS(none_cases); i++) {
    g_autofree char *p =
        g_strdup_printf("/start/none/exact-exec/%s", none_cases[i].name);
    ADD(p, test_none_exact, &none_cases[i]);
  }
  ADD("/start/none/only-the-c-library-before-exec", test_none_loads_libc_only,
      NULL);
  return g_test_run();
}
