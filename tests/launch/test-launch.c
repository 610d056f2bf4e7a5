/* The launch spine with real QEMU (TCG): pinning, memory binding, -S,
 * -daemonize, signals, pass-through and failing launches. Affinity is read
 * from /proc/PID/task/TID/status, memory policy from /proc/PID/numa_maps. */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/common/qp-test.h"

#include <hwloc.h>
#include "topology/base/cpulist.h"

typedef struct {
  char *dir;   /* per-test directory; its name marks our processes */
  char *state; /* ledger directory */
  char *halt_fw;
  char *exit_fw;
  char *qmp; /* the caller's own monitor socket */
  char *marker;
} Fixture;

static void
setup(Fixture *f, gconstpointer data)
{
  f->dir = qp_test_tmpdir();
  f->state = g_build_filename(f->dir, "state", NULL);
  f->halt_fw = qp_test_firmware(f->dir, QP_TEST_FW_HALT);
  f->exit_fw = qp_test_firmware(f->dir, QP_TEST_FW_EXIT);
  f->qmp = g_build_filename(f->dir, "qmp.sock", NULL);
  f->marker = g_path_get_basename(f->dir);
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
  g_free(f->exit_fw);
  g_free(f->qmp);
  g_free(f->marker);
}

/* argv: qemu-pin --state-dir=S OPTS... -- QEMU common-args EXTRA... */
static GPtrArray *
command(Fixture *f, const char *const *opts, const char *fw,
        const char *const *extra)
{
  GPtrArray *a = g_ptr_array_new_with_free_func(g_free);
  g_ptr_array_add(a, g_strdup(qp_test_binary()));
  g_ptr_array_add(a, g_strdup_printf("--state-dir=%s", f->state));
  for (guint i = 0; opts && opts[i]; i++)
    g_ptr_array_add(a, g_strdup(opts[i]));
  g_ptr_array_add(a, g_strdup("--"));
  const char *common[] = {
      "-accel", "tcg",         "-machine",
      "q35",    "-nodefaults", "-display",
      "none",   "-device",     "isa-debug-exit,iobase=0xf4,iosize=4",
      NULL};
  g_ptr_array_add(a, g_strdup(qp_test_qemu()));
  for (guint i = 0; common[i]; i++)
    g_ptr_array_add(a, g_strdup(common[i]));
  g_ptr_array_add(a, g_strdup("-bios"));
  g_ptr_array_add(a, g_strdup(fw));
  g_ptr_array_add(a, g_strdup("-name"));
  g_ptr_array_add(a, g_strdup_printf("%s,debug-threads=on", f->marker));
  for (guint i = 0; extra && extra[i]; i++)
    g_ptr_array_add(a, g_strdup(extra[i]));
  g_ptr_array_add(a, NULL);
  return a;
}

/* The plan qemu-pin would make for CMD (same options and QEMU args). */
static JsonObject *
plan_of(GPtrArray *cmd)
{
  return qp_test_plan((char **)cmd->pdata + 1);
}

/* Waits up to TIMEOUT_MS for the caller's monitor to say WANT; else says
 * what the monitor says, whether qemu-pin (PID) still runs and what it
 * wrote, and fails. */
static void
assert_status(Fixture *f, GPid pid, const char *want, guint timeout_ms)
{
  if (qp_test_wait_status(f->qmp, want, timeout_ms))
    return;
  g_autofree char *now = qp_test_query_status(f->qmp);
  g_autofree char *err = qp_test_file_text(f->dir, "stderr");
  int status = 0;
  g_autofree char *state =
      waitpid(pid, &status, WNOHANG) == pid
          ? g_strdup_printf("ended (wait status %d)", status)
          : g_strdup("runs");
  g_test_message("no status '%s' within %u ms: the monitor says %s; "
                 "qemu-pin %s; its stderr: %s",
                 want, timeout_ms, now != NULL ? now : "nothing", state,
                 err != NULL ? err : "");
  g_assert_not_reached();
}

static void
stop_and_check_released(Fixture *f, GPid pid)
{
  kill(pid, SIGTERM);
  g_assert_cmpint(qp_test_wait(pid, 20000), >=, 0);
  g_assert_true(qp_test_wait_no_process(f->marker, 20000));
  g_assert_cmpuint(qp_test_count_records(f->state), ==, 0);
}

static void
test_one_to_one_pins(Fixture *f, gconstpointer data)
{
  g_autofree char *qmparg =
      g_strdup_printf("unix:%s,server=on,wait=off", f->qmp);
  const char *opts[] = {"--mode=one-to-one", NULL};
  const char *extra[] = {"-smp", "2", "-m", "64", "-qmp", qmparg, NULL};
  g_autoptr(GPtrArray) cmd = command(f, opts, f->halt_fw, extra);

  g_autoptr(JsonObject) plan = plan_of(cmd);
  g_assert_cmpstr(json_object_get_string_member(plan, "mode"), ==,
                  "one-to-one");
  g_auto(GStrv) want = qp_test_plan_vcpu_sets(plan);
  g_assert_cmpuint(g_strv_length(want), ==, 2);
  /* One CPU each, not the same one. */
  g_assert_null(strpbrk(want[0], ",-"));
  g_assert_null(strpbrk(want[1], ",-"));
  g_assert_cmpstr(want[0], !=, want[1]);

  GPid pid = qp_test_spawn((char **)cmd->pdata, NULL, f->dir);
  g_assert_true(
      qp_test_wait_vcpu_affinity(pid, (const char *const *)want, 30000));
  g_assert_true(qp_test_wait_status(f->qmp, "running", 10000));
  g_assert_cmpuint(qp_test_count_records(f->state), ==, 1);
  /* QEMU is the process the caller started: exec in place. */
  g_autofree char *exe_path = g_strdup_printf("/proc/%d/exe", pid);
  g_autofree char *exe = g_file_read_link(exe_path, NULL);
  g_autofree char *real = realpath(qp_test_qemu(), NULL);
  g_assert_cmpstr(exe, ==, real);
  stop_and_check_released(f, pid);
}

/* A vCPU plugged with -device at start in a later slot (cpu-index 2 of
 * -smp 1,maxcpus=3; libvirt's hot-pluggable vCPUs enabled at boot) is a
 * boot vCPU: one-to-one gives it a core of its own, as vCPU 0, and none to
 * the empty slot 1. It shared the VM's cores, with a warning, while the
 * core planned for vCPU 1 stayed idle. */
static void
test_one_to_one_boot_after_hole(Fixture *f, gconstpointer data)
{
  g_autofree char *qmparg =
      g_strdup_printf("unix:%s,server=on,wait=off", f->qmp);
  const char *opts[] = {"--mode=one-to-one", NULL};
  const char *extra[] = {
      "-smp",    "1,maxcpus=3",
      "-device", "qemu64-x86_64-cpu,socket-id=0,core-id=2,thread-id=0",
      "-m",      "64",
      "-qmp",    qmparg,
      NULL};
  g_autoptr(GPtrArray) cmd = command(f, opts, f->halt_fw, extra);

  g_autoptr(JsonObject) plan = plan_of(cmd);
  g_auto(GStrv) sets = qp_test_plan_vcpu_sets(plan);
  g_assert_cmpuint(g_strv_length(sets), ==, 3);
  g_assert_cmpint(json_object_get_int_member(plan, "boot-vcpus"), ==, 2);
  /* One CPU each for vCPUs 0 and 2, not the same one. */
  g_assert_null(strpbrk(sets[0], ",-"));
  g_assert_null(strpbrk(sets[2], ",-"));
  g_assert_cmpstr(sets[0], !=, sets[2]);
  const char *all = json_object_get_string_member(
      json_object_get_object_member(plan, "claims"), "dedicated-cpus");

  GPid pid = qp_test_spawn((char **)cmd->pdata, NULL, f->dir);
  const char *want[] = {sets[0], "", sets[2], NULL};
  g_assert_true(qp_test_wait_vcpu_affinity(pid, want, 30000));
  g_assert_true(qp_test_wait_status(f->qmp, "running", 10000));
  g_assert_true(
      qp_test_wait_record_string(f->state, "dedicated-cpus", all, 10000));
  g_autofree char *err_path = g_build_filename(f->dir, "stderr", NULL);
  g_autofree char *err = NULL;
  g_assert_true(g_file_get_contents(err_path, &err, NULL, NULL));
  g_assert_cmpstr(err, ==, "");
  stop_and_check_released(f, pid);
}

static void
test_guest_exit_status(Fixture *f, gconstpointer data)
{
  const char *opts[] = {"--mode=one-to-one", NULL};
  const char *extra[] = {"-smp", "2", "-m", "64", NULL};
  g_autoptr(GPtrArray) cmd = command(f, opts, f->exit_fw, extra);
  QpTestRun direct, pinned;

  /* The same command without qemu-pin: everything after "--". */
  guint dash = 0;
  while (strcmp(cmd->pdata[dash], "--") != 0)
    dash++;
  qp_test_run((char **)cmd->pdata + dash + 1, NULL, &direct);
  qp_test_run((char **)cmd->pdata, NULL, &pinned);
  g_assert_cmpint(direct.status, ==, 1); /* isa-debug-exit: (0 << 1) | 1 */
  g_assert_cmpint(pinned.status, ==, direct.status);
  g_assert_cmpstr(pinned.err, ==, direct.err);
  g_assert_true(qp_test_wait_no_process(f->marker, 20000));
  g_assert_cmpuint(qp_test_count_records(f->state), ==, 0);
  qp_test_run_clear(&direct);
  qp_test_run_clear(&pinned);
}

typedef struct {
  const char *name;
  const char *mode;
  guint64 sizes_mib[2]; /* guest RAM mappings to find */
  const char *extra[16];
} MemCase;

static const MemCase mem_cases[] = {
    {"balanced-without-numa",
     "--mode=balanced",
     {64, 0},
     {"-smp", "2", "-m", "64", NULL}},
    {"balanced-machine-memory-backend",
     "--mode=balanced",
     {96, 0},
     {"-smp", "2", "-m", "96", "-object",
      "memory-backend-ram,id=pc.ram,size=96M", "-machine",
      "memory-backend=pc.ram", NULL}},
    {"numa-caller-backends-keyvalue",
     "--mode=auto",
     {48, 80},
     {"-smp", "2", "-m", "128", "-object", "memory-backend-ram,id=m0,size=48M",
      "-object", "memory-backend-ram,id=m1,size=80M", "-numa",
      "node,nodeid=0,cpus=0,memdev=m0", "-numa",
      "node,nodeid=1,cpus=1,memdev=m1", NULL}},
    {"numa-caller-backends-json",
     "--mode=numa",
     {48, 80},
     {"-smp", "2", "-m", "128", "-object",
      "{\"qom-type\":\"memory-backend-ram\",\"id\":\"m0\",\"size\":50331648}",
      "-object",
      "{\"qom-type\":\"memory-backend-ram\",\"id\":\"m1\",\"size\":83886080}",
      "-numa", "node,nodeid=0,cpus=0,memdev=m0", "-numa",
      "node,nodeid=1,cpus=1,memdev=m1", NULL}},
};

static void
test_memory_bound(Fixture *f, gconstpointer data)
{
  const MemCase *c = data;
  g_autofree char *qmparg =
      g_strdup_printf("unix:%s,server=on,wait=off", f->qmp);
  g_autoptr(GPtrArray) extra = g_ptr_array_new();
  for (guint i = 0; c->extra[i]; i++)
    g_ptr_array_add(extra, (char *)c->extra[i]);
  g_ptr_array_add(extra, "-qmp");
  g_ptr_array_add(extra, qmparg);
  g_ptr_array_add(extra, NULL);
  const char *opts[] = {c->mode, NULL};
  g_autoptr(GPtrArray) cmd =
      command(f, opts, f->halt_fw, (const char *const *)extra->pdata);

  /* Where the plan binds memory: the expected policy string. */
  g_autoptr(JsonObject) plan = plan_of(cmd);
  JsonArray *mem = json_object_get_array_member(plan, "memory");
  g_assert_cmpuint(json_array_get_length(mem), >=, 1);
  JsonObject *m0 = json_array_get_object_element(mem, 0);
  g_autofree char *want =
      g_strdup_printf("%s:%s", json_object_get_string_member(m0, "policy"),
                      json_object_get_string_member(m0, "host-nodes"));

  GPid pid = qp_test_spawn((char **)cmd->pdata, NULL, f->dir);
  g_assert_true(qp_test_wait_status(f->qmp, "running", 30000));
  for (guint i = 0; i < G_N_ELEMENTS(c->sizes_mib) && c->sizes_mib[i]; i++) {
    g_auto(GStrv) pol =
        qp_test_policies_of_mappings(pid, c->sizes_mib[i] * 1024);
    g_test_message("%s: %" G_GUINT64_FORMAT " MiB mappings: %s", c->name,
                   c->sizes_mib[i], pol[0] ? pol[0] : "(none)");
    g_assert_cmpuint(g_strv_length(pol), ==, 1);
    g_assert_cmpstr(pol[0], ==, want);
  }
  stop_and_check_released(f, pid);
}

static void
test_caller_S_replan_on_cont(Fixture *f, gconstpointer data)
{
  g_autofree char *qmparg =
      g_strdup_printf("unix:%s,server=on,wait=off", f->qmp);
  const char *opts[] = {"--mode=one-to-one", NULL};
  const char *extra[] = {"-smp", "2", "-m", "64", "-S", "-qmp", qmparg, NULL};
  g_autoptr(GPtrArray) cmd = command(f, opts, f->halt_fw, extra);
  g_autoptr(JsonObject) plan = plan_of(cmd);
  g_auto(GStrv) want = qp_test_plan_vcpu_sets(plan);

  GPid pid = qp_test_spawn((char **)cmd->pdata, NULL, f->dir);
  g_assert_true(
      qp_test_wait_vcpu_affinity(pid, (const char *const *)want, 30000));
  /* The caller asked for -S: qemu-pin must not have resumed. */
  g_usleep(300000);
  g_autofree char *st = qp_test_query_status(f->qmp);
  g_assert_cmpstr(st, ==, "prelaunch");

  /* Someone else (libvirt does this) resets vCPU 0 to every CPU. */
  g_autoptr(GArray) tids = qp_test_vcpu_threads(pid);
  cpu_set_t all;
  CPU_ZERO(&all);
  for (int c = 0; c < 2; c++)
    CPU_SET(c, &all);
  g_assert_cmpint(
      sched_setaffinity(g_array_index(tids, int, 0), sizeof(all), &all), ==, 0);
  g_autofree char *changed =
      qp_test_task_field(pid, g_array_index(tids, int, 0), "Cpus_allowed_list");
  g_assert_cmpstr(changed, ==, "0-1");

  gint64 t0 = g_get_monotonic_time();
  g_autoptr(JsonNode) r = qp_test_qmp_command(f->qmp, "cont");
  g_assert_nonnull(r);
  g_assert_true(
      qp_test_wait_vcpu_affinity(pid, (const char *const *)want, 10000));
  g_test_message("plan back %.1f ms after the caller's cont",
                 (double)(g_get_monotonic_time() - t0) / 1000.0);
  g_assert_true(qp_test_wait_status(f->qmp, "running", 5000));
  stop_and_check_released(f, pid);
}

/* --preconfig (QEMU's qtests, numa-test.c): QEMU answers no query of its
 * vCPUs until the caller's x-exit-preconfig, which may come at any time.
 * The keeper waits for it, then pins and resumes as for any paused plan;
 * it used to stop QEMU at its first look ("permitted only after machine
 * initialization"). */
static void
test_preconfig(Fixture *f, gconstpointer data)
{
  g_autofree char *qmparg =
      g_strdup_printf("unix:%s,server=on,wait=off", f->qmp);
  const char *opts[] = {"--mode=one-to-one", NULL};
  const char *extra[] = {"-smp",        "2",    "-m",   "64",
                         "--preconfig", "-qmp", qmparg, NULL};
  g_autoptr(GPtrArray) cmd = command(f, opts, f->halt_fw, extra);
  g_autoptr(JsonObject) plan = plan_of(cmd);
  g_auto(GStrv) want = qp_test_plan_vcpu_sets(plan);

  GPid pid = qp_test_spawn((char **)cmd->pdata, NULL, f->dir);
  assert_status(f, pid, "prelaunch", 30000);
  /* The caller takes its time: QEMU still waits for it. */
  g_usleep(500000);
  g_autofree char *st = qp_test_query_status(f->qmp);
  g_assert_cmpstr(st, ==, "prelaunch");

  g_autoptr(JsonNode) r = qp_test_qmp_command(f->qmp, "x-exit-preconfig");
  g_assert_nonnull(r);
  g_assert_true(
      qp_test_wait_vcpu_affinity(pid, (const char *const *)want, 10000));
  g_assert_true(qp_test_wait_status(f->qmp, "running", 10000));
  g_assert_cmpuint(qp_test_count_records(f->state), ==, 1);
  g_autofree char *err = qp_test_file_text(f->dir, "stderr");
  g_assert_cmpstr(err, ==, "");
  stop_and_check_released(f, pid);
}

/* --preconfig with the guest's NUMA nodes given over QMP, as QEMU's
 * numa-test.c does (pc_dynamic_cpu_cfg): the guest RAM made a backend of
 * qemu-pin's (-machine memory-backend=) made QEMU refuse the memdev= of a
 * node at x-exit-preconfig ("'-machine memory-backend' and '-numa memdev'
 * properties are mutually exclusive"), and it exited. */
static void
test_preconfig_numa_over_qmp(Fixture *f, gconstpointer data)
{
  g_autofree char *qmparg =
      g_strdup_printf("unix:%s,server=on,wait=off", f->qmp);
  const char *opts[] = {"--mode=balanced", NULL};
  const char *extra[] = {"-object",     "memory-backend-ram,id=ram,size=128M",
                         "-machine",    "smp.cpus=2,smp.sockets=2",
                         "--preconfig", "-qmp",
                         qmparg,        NULL};
  g_autoptr(GPtrArray) cmd = command(f, opts, f->halt_fw, extra);
  GPid pid = qp_test_spawn((char **)cmd->pdata, NULL, f->dir);
  assert_status(f, pid, "prelaunch", 30000);
  const char *const steps[] = {
      "{\"type\":\"node\",\"nodeid\":0,\"memdev\":\"ram\"}",
      "{\"type\":\"node\",\"nodeid\":1}",
      "{\"type\":\"cpu\",\"node-id\":0,\"socket-id\":1}",
      "{\"type\":\"cpu\",\"node-id\":1,\"socket-id\":0}", NULL};
  for (guint i = 0; steps[i] != NULL; i++) {
    g_autoptr(JsonNode) r =
        qp_test_qmp_execute(f->qmp, "set-numa-node", steps[i]);
    g_assert_nonnull(r);
  }
  g_autoptr(JsonNode) r = qp_test_qmp_command(f->qmp, "x-exit-preconfig");
  g_assert_nonnull(r);
  g_assert_true(qp_test_wait_status(f->qmp, "running", 10000));
  g_autofree char *err = qp_test_file_text(f->dir, "stderr");
  g_assert_cmpstr(err, ==, "");
  stop_and_check_released(f, pid);
}

/* --preconfig with -daemonize: QEMU's first process returns at once, its
 * daemon waiting for the caller's x-exit-preconfig, which the caller sends
 * once the launch returned. qemu-pin returns as QEMU alone does (it used to
 * stop QEMU with "permitted only after machine initialization"), its claim
 * naming the daemon; a plan that pauses keeps the guest paused until the
 * vCPUs that x-exit-preconfig makes are pinned. */
static void
test_preconfig_daemonize(Fixture *f, gconstpointer data)
{
  g_autofree char *qmparg =
      g_strdup_printf("unix:%s,server=on,wait=off", f->qmp);
  g_autofree char *pidfile = g_build_filename(f->dir, "vm.pid", NULL);
  const char *opts[] = {"--mode=one-to-one", NULL};
  const char *extra[] = {"-smp",        "2",          "-m",       "64",
                         "--preconfig", "-daemonize", "-pidfile", pidfile,
                         "-qmp",        qmparg,       NULL};
  g_autoptr(GPtrArray) cmd = command(f, opts, f->halt_fw, extra);
  g_autoptr(JsonObject) plan = plan_of(cmd);
  g_auto(GStrv) want = qp_test_plan_vcpu_sets(plan);

  int pid = qp_test_launch_daemon((char **)cmd->pdata, pidfile);
  g_assert_cmpint(kill(pid, 0), ==, 0);
  g_autofree char *st = qp_test_query_status(f->qmp);
  g_assert_cmpstr(st, ==, "prelaunch");
  /* The claim is held, by a record that names the daemon. */
  g_assert_cmpuint(qp_test_count_records(f->state), ==, 1);
  g_autoptr(JsonObject) rec = qp_test_record(f->state);
  g_assert_nonnull(rec);
  g_assert_cmpint(json_object_get_int_member(rec, "qemu-pid"), ==, pid);

  /* The caller takes its time, then goes on. */
  g_usleep(500000);
  g_autoptr(JsonNode) x = qp_test_qmp_command(f->qmp, "x-exit-preconfig");
  g_assert_nonnull(x);
  g_assert_true(
      qp_test_wait_vcpu_affinity(pid, (const char *const *)want, 10000));
  g_assert_true(qp_test_wait_status(f->qmp, "running", 10000));

  kill(pid, SIGTERM);
  g_assert_true(qp_test_wait_no_process(f->marker, 20000));
  g_assert_cmpuint(qp_test_count_records(f->state), ==, 0);
}

static void
test_daemonize(Fixture *f, gconstpointer data)
{
  g_autofree char *qmparg =
      g_strdup_printf("unix:%s,server=on,wait=off", f->qmp);
  g_autofree char *pidfile = g_build_filename(f->dir, "vm.pid", NULL);
  const char *opts[] = {"--mode=one-to-one", NULL};
  const char *extra[] = {"-smp",     "2",     "-m",   "64",   "-daemonize",
                         "-pidfile", pidfile, "-qmp", qmparg, NULL};
  g_autoptr(GPtrArray) cmd = command(f, opts, f->halt_fw, extra);
  g_autoptr(JsonObject) plan = plan_of(cmd);
  g_auto(GStrv) want = qp_test_plan_vcpu_sets(plan);

  int pid = qp_test_launch_daemon((char **)cmd->pdata, pidfile);
  /* When the first process has exited, the plan is already in force. */
  g_assert_true(qp_test_wait_vcpu_affinity(pid, (const char *const *)want, 0));
  g_autofree char *cmdline_path = g_strdup_printf("/proc/%d/cmdline", pid);
  g_autofree char *cmdline = NULL;
  g_assert_true(g_file_get_contents(cmdline_path, &cmdline, NULL, NULL));
  g_assert_cmpstr(cmdline, ==,
                  qp_test_qemu()); /* argv[0] as the caller gave it */
  g_autofree char *st = qp_test_query_status(f->qmp);
  g_assert_cmpstr(st, ==, "running");
  g_assert_cmpuint(qp_test_count_records(f->state), ==, 1);

  kill(pid, SIGTERM);
  g_assert_true(qp_test_wait_no_process(f->marker, 20000));
  g_assert_cmpuint(qp_test_count_records(f->state), ==, 0);
}

/* Preallocated guest memory in every mode, with and without -daemonize.
 * QEMU creates the thread of a command line thread-context before the fork
 * of -daemonize; preallocating through such a context then waits forever
 * and the first process never exits. So each launch must simply start: a
 * hang fails on qemu-pin's start timeout (daemonized) or on the wait for the
 * guest to run. Then /proc says where the memory is and that it is all
 * there: each 128 MiB backend has the planned policy, the preallocated ones
 * are wholly resident on their bound nodes, the vCPUs have their planned
 * CPUs. */
typedef enum {
  SHAPE_NUMA,    /* a preallocated backend per guest node (-numa memdev=) */
  SHAPE_MACHINE, /* one preallocated backend as -machine memory-backend= */
  SHAPE_ISSUE,   /* the caller's own thread-context on one of two backends */
} PreallocShape;

typedef struct {
  char *name;
  PreallocShape shape;
  char *mode; /* --mode=... */
  gboolean daemonize;
  gboolean verbose;
} PreallocCase;

static void
prealloc_case_free(PreallocCase *c)
{
  g_free(c->name);
  g_free(c->mode);
  g_free(c);
}

static const char *const prealloc_shapes[][16] = {
    [SHAPE_NUMA] = {"-smp", "2", "-m", "256", "-object",
                    "memory-backend-ram,id=m0,size=128M,prealloc=on", "-object",
                    "memory-backend-ram,id=m1,size=128M,prealloc=on", "-numa",
                    "node,nodeid=0,cpus=0,memdev=m0", "-numa",
                    "node,nodeid=1,cpus=1,memdev=m1", NULL},
    [SHAPE_MACHINE] = {"-smp", "2", "-m", "128", "-object",
                       "memory-backend-ram,id=mem,size=128M,prealloc=on",
                       "-machine", "memory-backend=mem", NULL},
    [SHAPE_ISSUE] = {"-smp", "2", "-m", "256", "-object",
                     "thread-context,id=tc0,node-affinity=0", "-object",
                     "memory-backend-ram,id=m0,size=128M,prealloc=on,"
                     "prealloc-context=tc0",
                     "-object", "memory-backend-ram,id=m1,size=128M", "-numa",
                     "node,nodeid=0,cpus=0,memdev=m0", "-numa",
                     "node,nodeid=1,cpus=1,memdev=m1", NULL},
};
/* Backends of 128 MiB, and how many of them preallocate. */
static const guint prealloc_backends[][2] = {
    [SHAPE_NUMA] = {2, 2}, [SHAPE_MACHINE] = {1, 1}, [SHAPE_ISSUE] = {2, 1}};

static void
test_prealloc(Fixture *f, gconstpointer data)
{
  const PreallocCase *c = data;
  gboolean none = strcmp(c->mode, "--mode=none") == 0;
  g_autofree char *qmparg =
      g_strdup_printf("unix:%s,server=on,wait=off", f->qmp);
  g_autofree char *pidfile = g_build_filename(f->dir, "vm.pid", NULL);
  g_autoptr(GPtrArray) extra = g_ptr_array_new();
  const char *const *shape = prealloc_shapes[c->shape];
  for (guint i = 0; shape[i] != NULL; i++)
    g_ptr_array_add(extra, (char *)shape[i]);
  g_ptr_array_add(extra, "-qmp");
  g_ptr_array_add(extra, qmparg);
  if (c->daemonize) {
    g_ptr_array_add(extra, "-daemonize");
    g_ptr_array_add(extra, "-pidfile");
    g_ptr_array_add(extra, pidfile);
  }
  g_ptr_array_add(extra, NULL);
  const char *opts[] = {c->mode, "--start-timeout=30000",
                        c->verbose ? "-v" : NULL, NULL};
  g_autoptr(GPtrArray) cmd =
      command(f, opts, f->halt_fw, (const char *const *)extra->pdata);

  /* What the plan binds: "policy:host-nodes" per memory entry that is
   * bound (host-nodes null: claimed, not bound). */
  g_autoptr(JsonObject) plan = none ? NULL : plan_of(cmd);
  g_autoptr(GPtrArray) bound = g_ptr_array_new_with_free_func(g_free);
  JsonArray *mem = plan ? json_object_get_array_member(plan, "memory") : NULL;
  for (guint i = 0; mem != NULL && i < json_array_get_length(mem); i++) {
    JsonObject *m = json_array_get_object_element(mem, i);
    if (json_object_get_null_member(m, "host-nodes"))
      continue;
    g_ptr_array_add(
        bound,
        g_strdup_printf("%s:%s", json_object_get_string_member(m, "policy"),
                        json_object_get_string_member(m, "host-nodes")));
  }
  /* Mode none, or a plan that binds no memory (one-to-one without vNUMA):
   * QEMU's default policy. */
  gboolean binds = bound->len > 0;
  g_ptr_array_add(bound, NULL);

  GPid pid = qp_test_spawn((char **)cmd->pdata, NULL, f->dir);
  int qemu = pid;
  if (c->daemonize) {
    int status = qp_test_wait(pid, 60000);
    g_test_message("%s: first process: %d", c->name, status);
    g_assert_cmpint(status, ==, 0);
    qemu = qp_test_pidfile(pidfile);
  }
  g_assert_true(qp_test_wait_status(f->qmp, "running", 60000));

  /* Nothing about it on stderr unless -v, then one line. */
  g_autofree char *err_path = g_build_filename(f->dir, "stderr", NULL);
  g_autofree char *err = NULL;
  g_assert_true(g_file_get_contents(err_path, &err, NULL, NULL));
  g_test_message("%s: stderr: %s", c->name, err);
  guint notes = 0;
  for (const char *p = err; (p = strstr(p, "-daemonize: ")) != NULL; p++)
    notes++;
  /* -v: the caller's context taken off (the issue's line), and qemu-pin's
   * own left out. */
  g_assert_cmpuint(notes, ==,
                   c->verbose ? (c->shape == SHAPE_ISSUE ? 2 : 1) : 0);
  if (c->verbose && c->shape == SHAPE_ISSUE)
    g_assert_nonnull(strstr(err, "taken off memory backend m0 "));

  g_auto(GStrv) maps = qp_test_wait_mappings(
      qemu, 128 * 1024, prealloc_backends[c->shape][0], 5000);
  g_assert_cmpuint(g_strv_length(maps), ==, prealloc_backends[c->shape][0]);
  guint whole = 0;
  for (guint i = 0; maps[i] != NULL; i++) {
    gboolean on_bound = FALSE;
    guint64 kib = qp_test_numa_maps_resident_kib(maps[i], &on_bound);
    g_test_message("%s: %s", c->name, maps[i]);
    g_autofree char *policy = g_strndup(maps[i], strcspn(maps[i], " "));
    if (!binds) {
      g_assert_cmpstr(policy, ==, "default");
    } else {
      g_assert_true(g_strv_contains((const char *const *)bound->pdata, policy));
      /* Resident pages are on the bound nodes only. */
      g_assert_true(on_bound);
    }
    whole += kib == 128 * 1024;
  }
  g_assert_cmpuint(whole, ==, prealloc_backends[c->shape][1]);

  if (!none) {
    g_auto(GStrv) want = qp_test_plan_vcpu_sets(plan);
    g_assert_true(
        qp_test_wait_vcpu_affinity(qemu, (const char *const *)want, 30000));
    g_assert_cmpuint(qp_test_count_records(f->state), ==, 1);
  }
  kill(qemu, SIGTERM);
  if (!c->daemonize)
    g_assert_cmpint(qp_test_wait(pid, 20000), >=, 0);
  g_assert_true(qp_test_wait_no_process(f->marker, 20000));
  g_assert_cmpuint(qp_test_count_records(f->state), ==, 0);
}

static int
sigterm_status(GPtrArray *cmd, const char *dir, gboolean via_qemu_pin,
               const char *qmp)
{
  guint start = 0;
  if (!via_qemu_pin)
    while (strcmp(cmd->pdata[start++], "--") != 0)
      ;
  GPid pid = qp_test_spawn((char **)cmd->pdata + start, NULL, dir);
  g_assert_true(qp_test_wait_status(qmp, "running", 30000));
  kill(pid, SIGTERM);
  return qp_test_wait(pid, 20000);
}

static void
test_sigterm_status(Fixture *f, gconstpointer data)
{
  g_autofree char *qmparg =
      g_strdup_printf("unix:%s,server=on,wait=off", f->qmp);
  const char *extra[] = {"-smp", "2", "-m", "64", "-qmp", qmparg, NULL};
  const char *opts[] = {"--mode=one-to-one", NULL};
  g_autoptr(GPtrArray) cmd = command(f, opts, f->halt_fw, extra);
  int direct = sigterm_status(cmd, f->dir, FALSE, f->qmp);
  int pinned = sigterm_status(cmd, f->dir, TRUE, f->qmp);
  g_assert_cmpint(direct, >=, 0);
  g_assert_cmpint(pinned, ==, direct);
  g_assert_true(qp_test_wait_no_process(f->marker, 20000));
  g_assert_cmpuint(qp_test_count_records(f->state), ==, 0);
}

static const char *const passthrough_cases[][4] = {
    {"-version", NULL},
    {"-machine", "help", NULL},
    {"-device", "help", NULL},
    {"-cpu", "help", NULL},
    {"-device", "virtio-net-pci,help", NULL},
    {"-M", "none", "-version"},
};

static void
test_passthrough(Fixture *f, gconstpointer data)
{
  const char *const *args = data;
  g_autofree char *link = g_build_filename(f->dir, "qemu-system-x86_64", NULL);
  g_assert_cmpint(symlink(qp_test_binary(), link), ==, 0);
  g_autofree char *path_env =
      g_strdup_printf("PATH=%s:/usr/local/bin:/usr/bin:/bin", f->dir);
  char *env[] = {path_env, NULL};

  GPtrArray *forms[3];
  for (int i = 0; i < 3; i++)
    forms[i] = g_ptr_array_new();
  g_ptr_array_add(forms[0], (char *)qp_test_qemu());   /* QEMU itself */
  g_ptr_array_add(forms[1], (char *)qp_test_binary()); /* prefix form */
  g_ptr_array_add(forms[1], (char *)qp_test_qemu());
  g_ptr_array_add(forms[2], link); /* drop-in */
  for (int i = 0; i < 3; i++) {
    for (guint j = 0; args[j]; j++)
      g_ptr_array_add(forms[i], (char *)args[j]);
    g_ptr_array_add(forms[i], NULL);
  }
  QpTestRun r[3];
  for (int i = 0; i < 3; i++)
    qp_test_run((char **)forms[i]->pdata, env, &r[i]);
  g_assert_cmpuint(strlen(r[0].out) + strlen(r[0].err), >, 0);
  for (int i = 1; i < 3; i++) {
    g_assert_cmpint(r[i].status, ==, r[0].status);
    g_assert_cmpstr(r[i].out, ==, r[0].out);
    g_assert_cmpstr(r[i].err, ==, r[0].err);
  }
  /* Nothing planned, nothing claimed. */
  g_assert_false(g_file_test(f->state, G_FILE_TEST_EXISTS));
  for (int i = 0; i < 3; i++) {
    qp_test_run_clear(&r[i]);
    g_ptr_array_unref(forms[i]);
  }
}

/* qemu-pin as a drop-in (linked as qemu-kvm): without a real QEMU on PATH
 * it exits 127, as a shell does for a missing command, in one line; a VM's
 * own config group may name the real binary, for its probes and its launch
 * alike (outside check, stop 43: 1, and the group's key was ignored). */
static void
test_drop_in_binary(Fixture *f, gconstpointer data)
{
  g_autofree char *bin = g_build_filename(f->dir, "bin", NULL);
  g_assert_cmpint(mkdir(bin, 0700), ==, 0);
  g_autofree char *link = g_build_filename(bin, "qemu-kvm", NULL);
  g_assert_cmpint(symlink(qp_test_binary(), link), ==, 0);
  g_autofree char *conf = g_build_filename(f->dir, "qp.conf", NULL);
  g_autofree char *text =
      g_strdup_printf("[name:%s]\nqemu = %s\n", f->marker, qp_test_qemu());
  g_assert_true(g_file_set_contents(conf, text, -1, NULL));
  g_autofree char *path_env = g_strdup_printf("PATH=%s", bin);
  g_autofree char *conf_env = g_strdup_printf("QEMU_PIN_CONFIG=%s", conf);
  g_autofree char *state_env =
      g_strdup_printf("QEMU_PIN_STATE_DIR=%s", f->state);
  char *env[] = {path_env, conf_env, state_env, NULL};

  char *other[] = {link, "-name", "another-vm", "-version", NULL};
  QpTestRun r;
  qp_test_run(other, env, &r);
  g_assert_cmpint(r.status, ==, 127);
  g_assert_nonnull(strstr(r.err, "no real QEMU binary named 'qemu-kvm'"));
  g_assert_cmpuint(qp_test_count_lines(r.err), ==, 1);
  qp_test_run_clear(&r);

  char *probe[] = {link, "-name", f->marker, "-version", NULL};
  qp_test_run(probe, env, &r);
  g_assert_cmpint(r.status, ==, 0);
  g_assert_nonnull(strstr(r.out, "QEMU emulator version"));
  qp_test_run_clear(&r);

  char *vm[] = {link,      "-name",
                f->marker, "-accel",
                "tcg",     "-m",
                "64",      "-display",
                "none",    "-nodefaults",
                "-bios",   f->exit_fw,
                "-device", "isa-debug-exit,iobase=0xf4,iosize=4",
                NULL};
  qp_test_run(vm, env, &r);
  g_assert_cmpint(r.status, ==, 1); /* the guest's exit: QEMU ran */
  g_assert_cmpstr(r.err, ==, "");
  qp_test_run_clear(&r);
}

typedef struct {
  const char *name;
  const char *opt;      /* a qemu-pin option, or NULL */
  const char *extra[4]; /* QEMU arguments */
  const char *needle;   /* the one line names this */
} FailCase;

static const FailCase fail_cases[] = {
    {"unknown-qemu-option", NULL, {"-bogus-option", NULL}, "-bogus-option"},
    {"bad-smp",
     NULL,
     {"-smp", "4,sockets=3,cores=1", NULL},
     "4,sockets=3,cores=1"},
    {"bad-affinity", "--affinity=3-1", {NULL}, "3-1"},
    {"affinity-outside-host", "--affinity=4000", {NULL}, "4000"},
};

static void
test_failing_launch(Fixture *f, gconstpointer data)
{
  const FailCase *c = data;
  const char *opts[] = {"--mode=one-to-one", c->opt, NULL};
  g_autoptr(GPtrArray) extra = g_ptr_array_new();
  g_ptr_array_add(extra, "-m");
  g_ptr_array_add(extra, "64");
  for (guint i = 0; c->extra[i]; i++)
    g_ptr_array_add(extra, (char *)c->extra[i]);
  g_ptr_array_add(extra, NULL);
  g_autoptr(GPtrArray) cmd =
      command(f, opts, f->halt_fw, (const char *const *)extra->pdata);
  QpTestRun r;
  qp_test_run((char **)cmd->pdata, NULL, &r);
  g_test_message("%s: status %d, stderr: %s", c->name, r.status, r.err);
  g_assert_cmpint(r.status, !=, 0);
  /* Exactly one line, naming the problem. */
  g_assert_true(g_str_has_suffix(r.err, "\n"));
  guint lines = 0;
  for (const char *p = r.err; *p; p++)
    lines += *p == '\n';
  g_assert_cmpuint(lines, ==, 1);
  g_assert_nonnull(strstr(r.err, c->needle));
  /* Nothing left: no QEMU (paused or not), no keeper, no claim. */
  g_assert_true(qp_test_wait_no_process(f->marker, 10000));
  g_assert_cmpuint(qp_test_count_records(f->state), ==, 0);
  qp_test_run_clear(&r);
}

/* ---- Text that is not ASCII ---------------------------------------------- */

static JsonObject *status_of(Fixture *f);

/* A VM named in UTF-8 beyond ASCII, with a disk whose file name is not
 * UTF-8 (a Latin-1 name, which Linux takes): status --json gives the name
 * as it is, and the device's words with U+FFFD for the bad byte; the
 * record stays readable. Before, the JSON answers said "?" for the "é"
 * (g_print() converted to the charset of a locale qemu-pin never sets),
 * plan --json began with "[Invalid UTF-8]", and the record held the raw
 * byte: every reader refused it as JSON, moved it aside as corrupt and held
 * its node whole until an operator removed it, so no later VM fitted. */
static void
test_text_beyond_ascii(Fixture *f, gconstpointer data)
{
  g_autofree char *disk = g_build_filename(f->dir, "d\xff.img", NULL);
  g_assert_true(g_file_set_contents(disk, "", 0, NULL));
  g_assert_cmpint(truncate(disk, 1 << 20), ==, 0);
  g_autofree char *drive =
      g_strdup_printf("file=%s,if=virtio,format=raw", disk);
  g_autofree char *name = g_strdup_printf("%s\xc3\xa9", f->marker);
  const char *opts[] = {"--mode=balanced", NULL};
  const char *extra[] = {"-m", "64", "-name", name, "-drive", drive, NULL};
  g_autoptr(GPtrArray) cmd = command(f, opts, f->halt_fw, extra);

  /* The plan is JSON, whether or not the disk's PCI device is found. */
  g_autoptr(JsonObject) plan = plan_of(cmd);
  JsonArray *devices = json_object_get_array_member(plan, "devices");
  for (guint i = 0; i < json_array_get_length(devices); i++) {
    const char *what = json_object_get_string_member(
        json_array_get_object_element(devices, i), "device");
    g_test_message("plan: device %s", what);
    g_assert_true(g_utf8_validate(what, -1, NULL));
    g_assert_nonnull(strstr(what, "d\xef\xbf\xbd.img"));
  }

  GPid pid = qp_test_spawn((char **)cmd->pdata, NULL, f->dir);
  g_assert_true(
      qp_test_wait_record_string(f->state, "mode", "balanced", 20000));
  g_autoptr(JsonObject) st = status_of(f);
  JsonArray *vms = json_object_get_array_member(st, "vms");
  g_assert_cmpuint(json_array_get_length(vms), ==, 1);
  JsonObject *vm = json_array_get_object_element(vms, 0);
  g_assert_cmpstr(json_object_get_string_member(vm, "name"), ==, name);
  g_assert_cmpint(json_object_get_int_member(vm, "qemu-pid"), ==, pid);
  /* Nothing was moved aside: the record reads. */
  g_autoptr(GDir) d = g_dir_open(f->state, 0, NULL);
  for (const char *e; (e = g_dir_read_name(d)) != NULL;)
    g_assert_false(g_str_has_suffix(e, ".corrupt"));
  stop_and_check_released(f, pid);
}

/* ---- Mode auto places best-effort what does not fit the CPUs ------------ */

/* CPUs this process may use (as qemu-pin sees them: same cgroup). */
static hwloc_bitmap_t
own_cpus(void)
{
  g_autofree char *list =
      qp_test_task_field(getpid(), getpid(), "Cpus_allowed_list");
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  g_assert_cmpint(hwloc_bitmap_list_sscanf(set, list), ==, 0);
  return set;
}

/* -smp for a guest that outnumbers this host's CPUs four times (QEMU's q35
 * under TCG takes up to 255 vCPUs); 0 when the host is too large. */
static guint
crowded_smp(void)
{
  g_auto(hwloc_bitmap_t) cpus = own_cpus();
  guint n = 4 * (guint)hwloc_bitmap_weight(cpus);
  return n <= 255 ? n : 0;
}

/* QEMU arguments of the crowded guests: without vNUMA, or two guest nodes
 * of half the vCPUs each with 64 MiB of their own. */
static GPtrArray *
crowded_args(guint smp, gboolean vnuma, const char *qmp)
{
  GPtrArray *a = g_ptr_array_new_with_free_func(g_free);
  g_ptr_array_add(a, g_strdup("-smp"));
  g_ptr_array_add(a, g_strdup_printf("%u", smp));
  g_ptr_array_add(a, g_strdup("-m"));
  if (!vnuma) {
    g_ptr_array_add(a, g_strdup("64"));
  } else {
    g_ptr_array_add(a, g_strdup("128"));
    for (guint g = 0; g < 2; g++) {
      g_ptr_array_add(a, g_strdup("-object"));
      g_ptr_array_add(a,
                      g_strdup_printf("memory-backend-ram,id=m%u,size=64M", g));
      g_ptr_array_add(a, g_strdup("-numa"));
      g_ptr_array_add(a,
                      g_strdup_printf("node,nodeid=%u,cpus=%u-%u,memdev=m%u", g,
                                      g * smp / 2, (g + 1) * smp / 2 - 1, g));
    }
  }
  if (qmp != NULL) {
    g_ptr_array_add(a, g_strdup("-qmp"));
    g_ptr_array_add(a, g_strdup_printf("unix:%s,server=on,wait=off", qmp));
  }
  g_ptr_array_add(a, NULL);
  return a;
}

/* `qemu-pin status --json` of the fixture's ledger. */
static JsonObject *
status_of(Fixture *f)
{
  g_autofree char *sd = g_strdup_printf("--state-dir=%s", f->state);
  char *argv[] = {(char *)qp_test_binary(), "status", "--json", sd, NULL};
  QpTestRun r;
  qp_test_run(argv, NULL, &r);
  g_assert_cmpint(r.status, ==, 0);
  g_autoptr(JsonParser) p = json_parser_new();
  g_assert_true(json_parser_load_from_data(p, r.out, -1, NULL));
  qp_test_run_clear(&r);
  return json_object_ref(json_node_get_object(json_parser_get_root(p)));
}

/* Auto starts a guest with more vCPUs than CPUs: every vCPU thread on the
 * CPUs the plan gives (together every usable CPU), memory bound, one
 * warning line, and the overcommit in the ledger. */
static void
test_best_effort_starts(Fixture *f, gconstpointer data)
{
  gboolean vnuma = GPOINTER_TO_INT(data);
  guint smp = crowded_smp();
  if (smp == 0) {
    g_test_skip("this host has more than 63 CPUs: no guest outnumbers them");
    return;
  }
  g_autoptr(GPtrArray) extra = crowded_args(smp, vnuma, f->qmp);
  g_autoptr(GPtrArray) cmd =
      command(f, NULL, f->halt_fw, (const char *const *)extra->pdata);

  g_autoptr(JsonObject) plan = plan_of(cmd);
  g_assert_true(json_object_get_boolean_member(plan, "best-effort"));
  g_assert_cmpstr(json_object_get_string_member(plan, "mode"), ==,
                  vnuma ? "numa" : "balanced");
  g_auto(GStrv) want = qp_test_plan_vcpu_sets(plan);
  g_assert_cmpuint(g_strv_length(want), ==, smp);
  /* Pinned as well as possible: together the vCPUs use every usable CPU. */
  g_auto(hwloc_bitmap_t) cpus = own_cpus();
  g_auto(hwloc_bitmap_t) used = hwloc_bitmap_alloc();
  for (guint v = 0; v < smp; v++) {
    g_auto(hwloc_bitmap_t) set = hwloc_bitmap_alloc();
    g_assert_cmpint(hwloc_bitmap_list_sscanf(set, want[v]), ==, 0);
    hwloc_bitmap_or(used, used, set);
  }
  g_assert_true(hwloc_bitmap_isequal(used, cpus));

  GPid pid = qp_test_spawn((char **)cmd->pdata, NULL, f->dir);
  g_assert_true(
      qp_test_wait_vcpu_affinity(pid, (const char *const *)want, 60000));
  g_assert_true(qp_test_wait_status(f->qmp, "running", 20000));

  /* Exactly one line on stderr: the warning naming what was not given. */
  g_autofree char *errpath = g_build_filename(f->dir, "stderr", NULL);
  g_autofree char *err = NULL;
  g_assert_true(g_file_get_contents(errpath, &err, NULL, NULL));
  g_test_message("stderr: %s", err);
  g_assert_cmpuint(qp_test_count_lines(err), ==, 1);
  g_assert_true(
      g_str_has_prefix(err, "qemu-pin: warning: best effort (mode auto): "));
  g_autofree char *share = g_strdup_printf("%u vCPUs share %d usable CPUs", smp,
                                           hwloc_bitmap_weight(cpus));
  g_assert_nonnull(strstr(err, share));

  /* Each guest node's memory is bound where the plan says. */
  if (vnuma) {
    JsonArray *mem = json_object_get_array_member(plan, "memory");
    g_assert_cmpuint(json_array_get_length(mem), ==, 2);
    g_auto(GStrv) pol = qp_test_policies_of_mappings(pid, 64 * 1024);
    g_assert_cmpuint(g_strv_length(pol), ==, 2);
    for (guint g = 0; g < 2; g++) {
      JsonObject *m = json_array_get_object_element(mem, g);
      g_autofree char *bound = g_strdup_printf(
          "bind:%s", json_object_get_string_member(m, "host-nodes"));
      g_assert_true(g_strv_contains((const char *const *)pol, bound));
    }
  }

  /* The ledger holds the VM as best effort, its CPUs overcommitted. */
  g_assert_cmpuint(qp_test_count_records(f->state), ==, 1);
  g_autoptr(JsonObject) st = status_of(f);
  JsonObject *vm =
      json_array_get_object_element(json_object_get_array_member(st, "vms"), 0);
  g_assert_true(json_object_get_boolean_member(vm, "best-effort"));
  JsonArray *vcl = json_object_get_array_member(vm, "cpu-load");
  guint64 sum = 0;
  for (guint i = 0; i < json_array_get_length(vcl); i++)
    sum += (guint64)json_object_get_int_member(
        json_array_get_object_element(vcl, i), "vcpus");
  g_assert_cmpuint(sum, ==, smp);
  g_auto(hwloc_bitmap_t) over = hwloc_bitmap_alloc();
  JsonArray *nodes = json_object_get_array_member(st, "nodes");
  for (guint i = 0; i < json_array_get_length(nodes); i++) {
    const char *l = json_object_get_string_member(
        json_array_get_object_element(nodes, i), "overcommitted-cpus");
    g_auto(hwloc_bitmap_t) set = hwloc_bitmap_alloc();
    g_assert_cmpint(hwloc_bitmap_list_sscanf(set, l), ==, 0);
    hwloc_bitmap_or(over, over, set);
  }
  g_assert_true(hwloc_bitmap_isequal(over, cpus));
  stop_and_check_released(f, pid);
}

static GStrv
env_with(const char *name, const char *value)
{
  return g_environ_setenv(g_get_environ(), name, value, TRUE);
}

/* The same guests in balanced, numa and one-to-one given explicitly (command
 * line, environment, config file): one line, nothing started or claimed. */
static void
test_best_effort_explicit_refuse(Fixture *f, gconstpointer data)
{
  guint smp = crowded_smp();
  if (smp == 0) {
    g_test_skip("this host has more than 63 CPUs: no guest outnumbers them");
    return;
  }
  const char *modes[] = {"balanced", "numa", "one-to-one"};
  g_autofree char *conf = g_build_filename(f->dir, "qemu-pin.conf", NULL);
  for (int vnuma = 0; vnuma <= 1; vnuma++)
    for (gsize m = 0; m < G_N_ELEMENTS(modes); m++)
      for (int source = 0; source < 3; source++) {
        g_autofree char *opt = g_strdup_printf("--mode=%s", modes[m]);
        g_autofree char *copt = g_strdup_printf("--config=%s", conf);
        g_autofree char *text =
            g_strdup_printf("[defaults]\nmode = %s\n", modes[m]);
        g_assert_true(g_file_set_contents(conf, text, -1, NULL));
        const char *opts[] = {source == 0   ? opt
                              : source == 2 ? copt
                                            : NULL,
                              NULL};
        g_auto(GStrv) env =
            source == 1 ? env_with("QEMU_PIN_MODE", modes[m]) : NULL;
        g_autoptr(GPtrArray) extra = crowded_args(smp, vnuma, NULL);
        /* A guest that started by mistake exits at once (and says so). */
        g_autoptr(GPtrArray) cmd =
            command(f, opts, f->exit_fw, (const char *const *)extra->pdata);
        QpTestRun r;
        qp_test_run((char **)cmd->pdata, env, &r);
        g_test_message("%s from %s, %s: status %d, stderr: %s", modes[m],
                       source == 0   ? "the command line"
                       : source == 1 ? "the environment"
                                     : "the config file",
                       vnuma ? "2 guest nodes" : "no vNUMA", r.status, r.err);
        g_assert_cmpint(r.status, ==, 1);
        g_assert_cmpuint(qp_test_count_lines(r.err), ==, 1);
        g_assert_true(g_str_has_prefix(r.err, "qemu-pin: VM does not fit: "));
        g_assert_null(strstr(r.err, "best effort"));
        g_assert_true(qp_test_wait_no_process(f->marker, 10000));
        g_assert_cmpuint(qp_test_count_records(f->state), ==, 0);
        qp_test_run_clear(&r);
      }
}

/* MemTotal of node 0 in MiB, from sysfs. */
static guint64
node0_total_mib(void)
{
  g_autofree char *text = NULL;
  if (!g_file_get_contents("/sys/devices/system/node/node0/meminfo", &text,
                           NULL, NULL))
    return 0;
  const char *p = strstr(text, "MemTotal:");
  return p != NULL ? g_ascii_strtoull(p + strlen("MemTotal:"), NULL, 10) / 1024
                   : 0;
}

/* Memory that does not fit is refused in every mode, auto included, and
 * also when the vCPUs do not fit either. */
static void
test_best_effort_memory_refused(Fixture *f, gconstpointer data)
{
  guint64 total = node0_total_mib();
  if (total == 0) {
    g_test_skip("no /sys/devices/system/node/node0/meminfo");
    return;
  }
  g_autofree char *big = g_strdup_printf("%" G_GUINT64_FORMAT, total + 1024);
  const char *modes[] = {"--mode=auto", "--mode=balanced", "--mode=numa",
                         "--mode=one-to-one", NULL};
  g_autofree char *smp_crowded = g_strdup_printf("%u", MAX(crowded_smp(), 2));
  const char *smps[] = {"1", smp_crowded};
  for (guint m = 0; modes[m] != NULL; m++)
    for (guint s = 0; s < G_N_ELEMENTS(smps); s++) {
      /* auto also as the default, without --mode */
      const char *opts[] = {m == 0 && s == 0 ? NULL : modes[m], NULL};
      const char *extra[] = {"-smp", smps[s], "-m", big, NULL};
      g_autoptr(GPtrArray) cmd = command(f, opts, f->exit_fw, extra);
      QpTestRun r;
      qp_test_run((char **)cmd->pdata, NULL, &r);
      g_test_message("%s -smp %s -m %s: status %d, stderr: %s",
                     opts[0] ? opts[0] : "(default)", smps[s], big, r.status,
                     r.err);
      g_assert_cmpint(r.status, ==, 1);
      g_assert_cmpuint(qp_test_count_lines(r.err), ==, 1);
      g_assert_true(g_str_has_prefix(r.err, "qemu-pin: VM does not fit: "));
      if (m == 0 || s == 0) {
        /* The shortfall named is memory. */
        g_autofree char *needs = g_strdup_printf("needs %s MiB", big);
        g_assert_nonnull(strstr(r.err, needs));
        g_assert_nonnull(strstr(r.err, "uncommitted"));
      }
      g_assert_true(qp_test_wait_no_process(f->marker, 10000));
      g_assert_cmpuint(qp_test_count_records(f->state), ==, 0);
      qp_test_run_clear(&r);
    }
}

/* One-to-one, 2 vCPUs, -S: the caller pins vCPU 0 where the plan puts
 * vCPU 1 before its cont (as libvirt applies <vcpupin>) and resets vCPU 1
 * to every CPU (as libvirt does without <vcpupin>). After the cont the
 * keeper puts vCPU 1 back on the plan, keeps vCPU 0 where the caller put it
 * and gives back vCPU 0's core; a later reset of vCPU 0, seen by the
 * keeper's own look, brings the plan and the core back. Nothing on stderr. */
static void
test_caller_pin_kept(Fixture *f, gconstpointer data)
{
  g_autofree char *qmparg =
      g_strdup_printf("unix:%s,server=on,wait=off", f->qmp);
  const char *opts[] = {"--mode=one-to-one", NULL};
  const char *extra[] = {"-smp", "2", "-m", "64", "-S", "-qmp", qmparg, NULL};
  g_autoptr(GPtrArray) cmd = command(f, opts, f->halt_fw, extra);
  g_autoptr(JsonObject) plan = plan_of(cmd);
  g_auto(GStrv) want = qp_test_plan_vcpu_sets(plan);
  g_assert_cmpuint(g_strv_length(want), ==, 2);
  g_assert_cmpstr(want[0], !=, want[1]);
  const char *all = json_object_get_string_member(
      json_object_get_object_member(plan, "claims"), "dedicated-cpus");
  g_autofree char *left = qp_test_cpus_without_core_of(all, want[0]);
  g_autofree char *own =
      qp_test_task_field(getpid(), getpid(), "Cpus_allowed_list");

  GPid pid = qp_test_spawn((char **)cmd->pdata, NULL, f->dir);
  g_assert_true(
      qp_test_wait_vcpu_affinity(pid, (const char *const *)want, 30000));
  g_assert_true(
      qp_test_wait_record_string(f->state, "dedicated-cpus", all, 10000));
  g_autoptr(GArray) tids = qp_test_vcpu_threads(pid);
  g_assert_cmpuint(tids->len, ==, 2);
  qp_test_set_affinity(g_array_index(tids, int, 0), want[1]);
  qp_test_set_affinity(g_array_index(tids, int, 1), own);

  g_autoptr(JsonNode) r = qp_test_qmp_command(f->qmp, "cont");
  g_assert_nonnull(r);
  const char *caller[] = {want[1], want[1], NULL};
  g_assert_true(qp_test_wait_vcpu_affinity(pid, caller, 10000));
  g_assert_true(
      qp_test_wait_record_string(f->state, "dedicated-cpus", left, 10000));
  g_assert_true(qp_test_wait_status(f->qmp, "running", 5000));

  qp_test_set_affinity(g_array_index(tids, int, 0), own);
  g_assert_true(
      qp_test_wait_vcpu_affinity(pid, (const char *const *)want, 30000));
  g_assert_true(
      qp_test_wait_record_string(f->state, "dedicated-cpus", all, 10000));

  g_autofree char *err_path = g_build_filename(f->dir, "stderr", NULL);
  g_autofree char *err = NULL;
  g_assert_true(g_file_get_contents(err_path, &err, NULL, NULL));
  g_assert_cmpstr(err, ==, "");
  stop_and_check_released(f, pid);
}

/* The VM started on fewer CPUs than it may use: libvirt starts QEMU on a
 * domain's <emulatorpin> and then, before its cont, sets each vCPU without
 * <vcpupin> to every online CPU, beyond what QEMU was started on; and
 * `virsh vcpupin` may go beyond a <vcpu cpuset>. With QEMU alone the vCPU
 * floats there; the keeper took it for a reset and put it back on the plan
 * (every vCPU then on the emulator's CPUs). Now it is the caller's: kept,
 * and the claim follows. */
static void
test_caller_pin_beyond_start(Fixture *f, gconstpointer data)
{
  g_autofree char *own =
      qp_test_task_field(getpid(), getpid(), "Cpus_allowed_list");
  g_auto(GStrv) parts = g_strsplit_set(own, ",-", 2);
  if (g_strcmp0(parts[0], own) == 0) {
    g_test_skip("needs at least 2 CPUs");
    return;
  }
  const char *first = parts[0];
  g_autofree char *qmparg =
      g_strdup_printf("unix:%s,server=on,wait=off", f->qmp);
  const char *opts[] = {"--mode=auto", NULL};
  const char *extra[] = {"-smp", "1", "-m", "64", "-S", "-qmp", qmparg, NULL};
  g_autoptr(GPtrArray) cmd = command(f, opts, f->halt_fw, extra);

  qp_test_set_affinity(getpid(), first); /* as libvirt's <emulatorpin> */
  GPid pid = qp_test_spawn((char **)cmd->pdata, NULL, f->dir);
  qp_test_set_affinity(getpid(), own);
  const char *planned[] = {first, NULL};
  g_assert_true(qp_test_wait_vcpu_affinity(pid, planned, 30000));
  g_assert_true(
      qp_test_wait_record_string(f->state, "mode", "balanced", 10000));
  g_autoptr(GArray) tids = qp_test_vcpu_threads(pid);
  g_assert_cmpuint(tids->len, ==, 1);
  qp_test_set_affinity(g_array_index(tids, int, 0), own);
  g_autoptr(JsonNode) r = qp_test_qmp_command(f->qmp, "cont");
  g_assert_nonnull(r);
  g_assert_true(qp_test_wait_status(f->qmp, "running", 5000));

  /* The keeper's look on RESUME: the claim follows the caller's CPUs. */
  gboolean followed = FALSE;
  for (int i = 0; i < 200 && !followed; i++) {
    g_autoptr(JsonObject) rec = qp_test_record(f->state);
    JsonArray *load = rec != NULL && json_object_has_member(rec, "cpu-load")
                          ? json_object_get_array_member(rec, "cpu-load")
                          : NULL;
    followed = load != NULL && json_array_get_length(load) == 1 &&
               g_strcmp0(json_object_get_string_member(
                             json_array_get_object_element(load, 0), "cpus"),
                         own) == 0;
    if (!followed)
      g_usleep(25000);
  }
  g_assert_true(followed);
  const char *kept[] = {own, NULL};
  g_assert_true(qp_test_wait_vcpu_affinity(pid, kept, 1000));

  g_autofree char *err_path = g_build_filename(f->dir, "stderr", NULL);
  g_autofree char *err = NULL;
  g_assert_true(g_file_get_contents(err_path, &err, NULL, NULL));
  g_assert_cmpstr(err, ==, "");
  stop_and_check_released(f, pid);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
#define ADD(path, fn, data) g_test_add(path, Fixture, data, setup, fn, teardown)
  ADD("/launch/one-to-one/pins-each-vcpu-to-its-planned-cpu",
      test_one_to_one_pins, NULL);
  ADD("/launch/one-to-one/boot-vcpu-after-hole-has-its-core",
      test_one_to_one_boot_after_hole, NULL);
  ADD("/launch/exit-status/is-the-guest-s", test_guest_exit_status, NULL);
  ADD("/launch/text/beyond-ascii", test_text_beyond_ascii, NULL);
  for (gsize i = 0; i < G_N_ELEMENTS(mem_cases); i++) {
    g_autofree char *p =
        g_strdup_printf("/launch/memory/%s", mem_cases[i].name);
    ADD(p, test_memory_bound, &mem_cases[i]);
  }
  ADD("/launch/caller-S/stays-paused-and-replans-on-cont",
      test_caller_S_replan_on_cont, NULL);
  ADD("/launch/caller-pin/kept-and-claim-follows", test_caller_pin_kept, NULL);
  ADD("/launch/caller-pin/beyond-start-affinity-kept",
      test_caller_pin_beyond_start, NULL);
  ADD("/launch/preconfig/waits-for-x-exit-preconfig", test_preconfig, NULL);
  ADD("/launch/preconfig/daemonize-returns-as-qemu", test_preconfig_daemonize,
      NULL);
  ADD("/launch/preconfig/numa-over-qmp", test_preconfig_numa_over_qmp, NULL);
  ADD("/launch/daemonize/returns-after-pinning-with-pidfile", test_daemonize,
      NULL);
  ADD("/launch/sigterm/same-status-as-plain-qemu", test_sigterm_status, NULL);
  static const char *const shape_names[] = {
      "numa-memdev", "machine-memory-backend", "issue-18-thread-context"};
  static const char *const modes[] = {"auto", "balanced", "numa", "one-to-one",
                                      "none"};
  g_autoptr(GPtrArray) prealloc =
      g_ptr_array_new_with_free_func((GDestroyNotify)prealloc_case_free);
  for (guint s = 0; s < G_N_ELEMENTS(shape_names); s++)
    for (guint m = 0; m < G_N_ELEMENTS(modes); m++)
      for (int d = 0; d < 2; d++) {
        PreallocCase *c = g_new0(PreallocCase, 1);
        c->shape = (PreallocShape)s;
        c->mode = g_strdup_printf("--mode=%s", modes[m]);
        c->daemonize = d;
        c->name = g_strdup_printf("/launch/prealloc/%s/%s/%s", shape_names[s],
                                  modes[m], d ? "daemonize" : "foreground");
        g_ptr_array_add(prealloc, c);
        ADD(c->name, test_prealloc, c);
      }
  /* The -v line: said once, and only with -v (the cases above have none). */
  PreallocCase *v = g_new0(PreallocCase, 1);
  v->shape = SHAPE_ISSUE;
  v->mode = g_strdup("--mode=numa");
  v->daemonize = v->verbose = TRUE;
  v->name = g_strdup("/launch/prealloc/issue-18-thread-context/numa/"
                     "daemonize-verbose");
  g_ptr_array_add(prealloc, v);
  ADD(v->name, test_prealloc, v);
  ADD("/launch/drop-in/real-binary-missing-or-in-the-vm-s-group",
      test_drop_in_binary, NULL);
  for (gsize i = 0; i < G_N_ELEMENTS(passthrough_cases); i++) {
    g_autofree char *joined = g_strjoinv("_", (char **)passthrough_cases[i]);
    g_autofree char *p = g_strdup_printf("/launch/passthrough/%s", joined);
    ADD(p, test_passthrough, passthrough_cases[i]);
  }
  for (gsize i = 0; i < G_N_ELEMENTS(fail_cases); i++) {
    g_autofree char *p =
        g_strdup_printf("/launch/failing/%s", fail_cases[i].name);
    ADD(p, test_failing_launch, &fail_cases[i]);
  }
  ADD("/launch/best-effort/auto-more-vcpus-than-cpus-starts",
      test_best_effort_starts, GINT_TO_POINTER(FALSE));
  ADD("/launch/best-effort/auto-two-guest-nodes-start", test_best_effort_starts,
      GINT_TO_POINTER(TRUE));
  ADD("/launch/best-effort/explicit-modes-refuse",
      test_best_effort_explicit_refuse, NULL);
  ADD("/launch/best-effort/memory-refused-in-every-mode",
      test_best_effort_memory_refused, NULL);
  return g_test_run();
}
