/* The keeper's life under valgrind (memcheck): qemu-pin runs under
 * valgrind --trace-children=no, so the process that execs QEMU stops being
 * checked at the exec while the keeper, a fork, stays under valgrind for its
 * whole life: greeting, pinning, cont, holding the claim, a RESUME it must
 * answer by re-applying the plan, QEMU's exit and the release. Every
 * valgrind log (one per process, --log-file=DIR/vg.%p) must report no error
 * and no definitely lost block.
 *
 * valgrind before 3.20 does not know pidfd_open(2): under it the keeper
 * watches QEMU by its start time instead (the test says which path ran). */
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "tests/robustness/rb-common.h"

static char *valgrind;

static gboolean
valgrind_has_pidfd(void)
{
  g_autofree char *probe = g_build_filename(g_getenv("QP_BUILD_ROOT"), "tests",
                                            "robustness", "pidfd-probe", NULL);
  char *argv[] = {valgrind, "-q", probe, NULL};
  QpTestRun r;
  qp_test_run(argv, NULL, &r);
  gboolean ok = r.status == 0;
  qp_test_run_clear(&r);
  return ok;
}

/* valgrind follows the heap of a program linked with the shared C
 * library only: the launcher's dynamic build (QP_BINARY_DYNAMIC), the
 * same code as the static one. */
static const char *
launcher(void)
{
  const char *dynamic = g_getenv("QP_BINARY_DYNAMIC");
  return dynamic != NULL && dynamic[0] != '\0' ? dynamic : qp_test_binary();
}

/* valgrind ... qemu-pin -v --state-dir=S --mode=one-to-one -- QEMU ... */
static GPtrArray *
command(RbFixture *f, const char *qmp)
{
  GPtrArray *a = g_ptr_array_new_with_free_func(g_free);
  const char *vg[] = {"--leak-check=full",
                      "--errors-for-leak-kinds=definite",
                      "--error-exitcode=99",
                      "--trace-children=no",
                      "--child-silent-after-fork=no",
                      NULL};
  g_ptr_array_add(a, g_strdup(valgrind));
  for (guint i = 0; vg[i] != NULL; i++)
    g_ptr_array_add(a, g_strdup(vg[i]));
  g_ptr_array_add(a, g_strdup_printf("--log-file=%s/vg.%%p", f->dir));
  g_ptr_array_add(a, g_strdup(launcher()));
  g_ptr_array_add(a, g_strdup("-v"));
  g_ptr_array_add(a, g_strdup_printf("--state-dir=%s", f->state));
  g_ptr_array_add(a, g_strdup("--mode=one-to-one"));
  g_ptr_array_add(a, g_strdup("--"));
  const char *q[] = {"-accel",      "tcg",      "-machine", "q35",
                     "-nodefaults", "-display", "none",     "-smp",
                     "2",           "-m",       "64",       NULL};
  g_ptr_array_add(a, g_strdup(qp_test_qemu()));
  for (guint i = 0; q[i] != NULL; i++)
    g_ptr_array_add(a, g_strdup(q[i]));
  g_ptr_array_add(a, g_strdup("-bios"));
  g_ptr_array_add(a, g_strdup(f->halt_fw));
  g_ptr_array_add(a, g_strdup("-name"));
  g_ptr_array_add(a, g_strdup_printf("%s,debug-threads=on", f->marker));
  g_ptr_array_add(a, g_strdup("-qmp"));
  g_ptr_array_add(a, g_strdup_printf("unix:%s,server=on,wait=off", qmp));
  g_ptr_array_add(a, NULL);
  return a;
}

/* Every vg.* log in DIR: no error, and a leak check ran in at least
 * MIN_CHECKED of them (the processes that exit under valgrind: the keeper
 * and the intermediate child of its double fork). */
static void
assert_logs_clean(RbFixture *f, guint min_checked)
{
  g_autoptr(GDir) d = g_dir_open(f->dir, 0, NULL);
  const char *name;
  guint logs = 0, checked = 0;
  while ((name = g_dir_read_name(d)) != NULL) {
    if (!g_str_has_prefix(name, "vg."))
      continue;
    g_autofree char *path = g_build_filename(f->dir, name, NULL);
    g_autofree char *text = NULL;
    g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
    logs++;
    if (strstr(text, "HEAP SUMMARY") != NULL)
      checked++;
    const char *sum = strstr(text, "ERROR SUMMARY: ");
    if (sum != NULL && !g_str_has_prefix(sum, "ERROR SUMMARY: 0 errors"))
      g_test_fail_printf("valgrind found errors (%s):\n%s", name, text);
    if (strstr(text, "definitely lost: ") != NULL &&
        strstr(text, "definitely lost: 0 bytes") == NULL)
      g_test_fail_printf("valgrind found a leak (%s):\n%s", name, text);
    g_autofree char *line = sum ? g_strndup(sum, strcspn(sum, "\n")) : NULL;
    g_test_message("%s: %s", name, line ? line : "no summary");
  }
  g_assert_cmpuint(logs, >=, min_checked);
  g_assert_cmpuint(checked, >=, min_checked);
}

static void
test_full_life(RbFixture *f, gconstpointer data)
{
  /* Where valgrind lacks pidfd_open (before 3.20) the keeper watches QEMU
   * by its start time instead: the same life, the other code path. */
  g_test_message("valgrind %s pidfd_open",
                 valgrind_has_pidfd() ? "knows" : "lacks");
  g_autofree char *qmp = g_build_filename(f->dir, "qmp.sock", NULL);
  g_autoptr(GPtrArray) cmd = command(f, qmp);
  /* The plan qemu-pin makes (same options, without valgrind). */
  guint dash = 0;
  while (strcmp(cmd->pdata[dash], launcher()) != 0)
    dash++;
  g_autoptr(JsonObject) plan = qp_test_plan((char **)cmd->pdata + dash + 2);
  g_auto(GStrv) want = qp_test_plan_vcpu_sets(plan);

  GPid pid = qp_test_spawn((char **)cmd->pdata, NULL, f->dir);
  /* Pinned and running, under valgrind's pace. */
  g_assert_true(
      qp_test_wait_vcpu_affinity(pid, (const char *const *)want, 180000));
  g_assert_cmpuint(qp_test_count_records(f->state), ==, 1);

  /* Once the keeper has sent its own cont (so that the RESUME below is not
   * taken for the one of its cont), move vCPU 0 away, stop and resume the
   * guest: the keeper must see the RESUME and put vCPU 0 back. */
  g_autofree char *errpath = g_build_filename(f->dir, "stderr", NULL);
  gint64 deadline = g_get_monotonic_time() + 120 * G_USEC_PER_SEC;
  gboolean resumed = FALSE;
  while (!resumed && g_get_monotonic_time() < deadline) {
    g_autofree char *err = NULL;
    g_file_get_contents(errpath, &err, NULL, NULL);
    resumed = err != NULL && strstr(err, ": cont\n") != NULL;
    if (!resumed)
      g_usleep(100000);
  }
  g_assert_true(resumed);
  g_autoptr(GArray) tids = qp_test_vcpu_threads(pid);
  g_assert_cmpuint(tids->len, ==, 2);
  cpu_set_t all;
  CPU_ZERO(&all);
  for (int i = 0; i < CPU_SETSIZE && i < (int)sysconf(_SC_NPROCESSORS_ONLN);
       i++)
    CPU_SET(i, &all);
  g_assert_cmpint(
      sched_setaffinity(g_array_index(tids, int, 0), sizeof(all), &all), ==, 0);
  g_autoptr(JsonNode) r1 = qp_test_qmp_command(qmp, "stop");
  g_assert_nonnull(r1);
  g_autoptr(JsonNode) r2 = qp_test_qmp_command(qmp, "cont");
  g_assert_nonnull(r2);
  g_assert_true(
      qp_test_wait_vcpu_affinity(pid, (const char *const *)want, 120000));

  /* QEMU leaves: the keeper releases the claim and exits. */
  kill(pid, SIGTERM);
  g_assert_cmpint(qp_test_wait(pid, 60000), >=, 0);
  g_assert_true(qp_test_wait_no_process(f->marker, 120000));
  g_assert_cmpuint(qp_test_count_records(f->state), ==, 0);
  assert_logs_clean(f, 2);
}

/* The keeper's failure path: fake-qemu answers cont with an error; the keeper
 * kills it, releases the claim, says why and exits, all under valgrind. */
static void
test_failure(RbFixture *f, gconstpointer data)
{
  g_autofree char *fake = rb_fake_qemu();
  g_autofree char *logs = g_strdup_printf("--log-file=%s/vg.%%p", f->dir);
  g_autofree char *state = g_strdup_printf("--state-dir=%s", f->state);
  g_autofree char *name = g_strdup_printf("%s", f->marker);
  char *argv[] = {valgrind,
                  "--leak-check=full",
                  "--errors-for-leak-kinds=definite",
                  "--trace-children=no",
                  "--child-silent-after-fork=no",
                  logs,
                  (char *)launcher(),
                  state,
                  "--mode=one-to-one",
                  "--",
                  fake,
                  "-smp",
                  "2",
                  "-name",
                  name,
                  NULL};
  g_auto(GStrv) envp = g_get_environ();
  envp = g_environ_setenv(envp, "FAKE_QEMU_SCRIPT", "command-error:cont", TRUE);
  envp = g_environ_setenv(envp, "FAKE_QEMU_LIFETIME", "120", TRUE);
  g_autofree char *err = NULL;
  int status = rb_run(f, argv, envp, 180000, &err);
  g_test_message("status %d, stderr: %s", status, err ? err : "(none)");
  g_assert_cmpint(status, ==, 137);
  g_assert_nonnull(strstr(err, "cont"));
  rb_assert_nothing_left(f, 30000);
  assert_logs_clean(f, 2);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_set_nonfatal_assertions();
  valgrind = g_find_program_in_path("valgrind");
  if (valgrind == NULL) {
    g_test_message("valgrind not found");
    return 77;
  }
  g_test_add("/valgrind/keeper/life", RbFixture, NULL, rb_setup, test_full_life,
             rb_teardown);
  g_test_add("/valgrind/keeper/failure", RbFixture, NULL, rb_setup,
             test_failure, rb_teardown);
  int rc = g_test_run();
  g_free(valgrind);
  return rc;
}
