/* Incoming migration between two QEMUs both launched by qemu-pin on this
 * machine (real QEMU, TCG). Each side has a ledger of its own, as two hosts
 * would. The destination is started the way libvirt and Proxmox start one:
 * with -incoming (defer, or a tcp: URI) and, for the caller's own `cont`,
 * -S. qemu-pin must never send `cont` itself (a `cont` during -incoming makes
 * QEMU start the guest as soon as the migration ends, against the caller's
 * -S), must pin at start, and must have its plan in force again after the
 * caller's `cont`, even when the caller re-pinned the vCPUs meanwhile. */
#include <glib/gstdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/orchestrators/orch-common.h"

typedef struct {
  char *dir;
  char *marker;
  char *fw;
  char *src_state;
  char *dst_state;
  char *src_qmp;
  char *dst_qmp;
  GPid src;
  GPid dst;
} Fixture;

static void
setup(Fixture *f, gconstpointer data)
{
  f->dir = qp_test_tmpdir();
  f->marker = g_path_get_basename(f->dir);
  orch_cleanup_on_abort(f->marker, NULL, NULL);
  f->fw = qp_test_firmware(f->dir, QP_TEST_FW_HALT);
  f->src_state = g_build_filename(f->dir, "src-state", NULL);
  f->dst_state = g_build_filename(f->dir, "dst-state", NULL);
  f->src_qmp = g_build_filename(f->dir, "src.qmp", NULL);
  f->dst_qmp = g_build_filename(f->dir, "dst.qmp", NULL);
}

static void
teardown(Fixture *f, gconstpointer data)
{
  orch_cleanup_on_abort(NULL, NULL, NULL);
  g_autoptr(GArray) left = qp_test_pids_with(f->marker);
  for (guint i = 0; i < left->len; i++)
    kill(g_array_index(left, int, i), SIGKILL);
  if (f->src > 0)
    qp_test_wait(f->src, 10000);
  if (f->dst > 0)
    qp_test_wait(f->dst, 10000);
  qp_test_wait_no_process(f->marker, 10000);
  qp_test_rmtree(f->dir);
  g_free(f->dir);
  g_free(f->marker);
  g_free(f->fw);
  g_free(f->src_state);
  g_free(f->dst_state);
  g_free(f->src_qmp);
  g_free(f->dst_qmp);
}

/* qemu-pin --state-dir=STATE --mode=one-to-one -- QEMU ... -name
 * MARKER-ROLE,debug-threads=on -qmp unix:QMP,server=on,wait=off EXTRA...
 * (with "plan" after qemu-pin when PLAN). */
static GPtrArray *
command(Fixture *f, gboolean plan, const char *role, const char *state,
        const char *qmp, const char *const *extra)
{
  GPtrArray *a = g_ptr_array_new_with_free_func(g_free);
  g_ptr_array_add(a, g_strdup(qp_test_binary()));
  if (plan)
    g_ptr_array_add(a, g_strdup("plan"));
  g_ptr_array_add(a, g_strdup_printf("--state-dir=%s", state));
  g_ptr_array_add(a, g_strdup("--mode=one-to-one"));
  g_ptr_array_add(a, g_strdup("--"));
  const char *common[] = {"-accel",      "tcg",      "-machine", "q35",
                          "-nodefaults", "-display", "none",     "-smp",
                          "2",           "-m",       "64",       NULL};
  g_ptr_array_add(a, g_strdup(qp_test_qemu()));
  for (guint i = 0; common[i]; i++)
    g_ptr_array_add(a, g_strdup(common[i]));
  g_ptr_array_add(a, g_strdup("-bios"));
  g_ptr_array_add(a, g_strdup(f->fw));
  g_ptr_array_add(a, g_strdup("-name"));
  g_ptr_array_add(a,
                  g_strdup_printf("%s-%s,debug-threads=on", f->marker, role));
  g_ptr_array_add(a, g_strdup("-qmp"));
  g_ptr_array_add(a, g_strdup_printf("unix:%s,server=on,wait=off", qmp));
  for (guint i = 0; extra && extra[i]; i++)
    g_ptr_array_add(a, g_strdup(extra[i]));
  g_ptr_array_add(a, NULL);
  return a;
}

static char **
planned(Fixture *f, const char *role, const char *qmp, const char *const *extra)
{
  g_autofree char *empty = g_build_filename(f->dir, "plan-state", NULL);
  g_autoptr(GPtrArray) cmd = command(f, TRUE, role, empty, qmp, extra);
  g_autoptr(JsonObject) plan = qp_test_plan((char **)cmd->pdata + 2);
  char **sets = qp_test_plan_vcpu_sets(plan);
  g_assert_cmpuint(g_strv_length(sets), ==, 2);
  /* One CPU each, not the same one: unlike what anyone else would set. */
  g_assert_null(strpbrk(sets[0], ",-"));
  g_assert_null(strpbrk(sets[1], ",-"));
  g_assert_cmpstr(sets[0], !=, sets[1]);
  return sets;
}

static void
qmp_ok(const char *sock, const char *command)
{
  g_autofree char *err = NULL;
  g_autoptr(JsonNode) r = orch_qmp(sock, command, &err);
  if (r == NULL)
    g_test_message("%s over %s: %s", command, sock, err);
  g_assert_nonnull(r);
}

static void
show_logs(Fixture *f)
{
  g_autofree char *err = g_build_filename(f->dir, "stderr", NULL);
  orch_show_file("stderr of the last process started", err);
}

static void
wait_pinned(Fixture *f, GPid pid, char **want, const char *what)
{
  if (qp_test_wait_vcpu_affinity(pid, (const char *const *)want, 30000))
    return;
  g_auto(GStrv) have = orch_vcpu_affinities(pid);
  g_autofree char *h = g_strjoinv(" ", have);
  g_autofree char *w = g_strjoinv(" ", want);
  g_test_message("%s: vCPU affinities %s, plan %s", what, h, w);
  show_logs(f);
  g_assert_not_reached();
}

/* Starts the source and waits until it runs pinned. */
static void
start_source(Fixture *f)
{
  g_auto(GStrv) want = planned(f, "src", f->src_qmp, NULL);
  g_autoptr(GPtrArray) cmd =
      command(f, FALSE, "src", f->src_state, f->src_qmp, NULL);
  g_autofree char *dir = g_build_filename(f->dir, "src", NULL);
  g_mkdir(dir, 0700);
  f->src = qp_test_spawn((char **)cmd->pdata, NULL, dir);
  wait_pinned(f, f->src, want, "source");
  g_assert_true(orch_wait_status(f->src_qmp, "running", 30000));
}

static void
migrate_and_wait(Fixture *f, const char *uri)
{
  g_autofree char *cmd = g_strdup_printf(
      "{\"execute\":\"migrate\",\"arguments\":{\"uri\":\"%s\"}}", uri);
  qmp_ok(f->src_qmp, cmd);
  orch_wait_migrated(f->src_qmp);
}

static void
check_dst_claim(Fixture *f)
{
  g_autoptr(JsonObject) rec = orch_record(f->dst_state);
  g_assert_nonnull(rec);
  g_assert_cmpint(json_object_get_int_member(rec, "qemu-pid"), ==, f->dst);
  g_assert_cmpstr(json_object_get_string_member(rec, "mode"), ==, "one-to-one");
}

static void
stop_all(Fixture *f)
{
  kill(f->src, SIGTERM);
  kill(f->dst, SIGTERM);
  g_assert_cmpint(qp_test_wait(f->src, 20000), >=, 0);
  g_assert_cmpint(qp_test_wait(f->dst, 20000), >=, 0);
  f->src = f->dst = 0;
  g_assert_true(qp_test_wait_no_process(f->marker, 20000));
  g_assert_true(orch_wait_records(f->src_state, 0, 20000));
  g_assert_true(orch_wait_records(f->dst_state, 0, 20000));
}

/* -S -incoming defer: the caller's migrate-incoming, the source's migrate,
 * then the caller's cont after re-pinning the vCPUs to all CPUs. */
static void
test_defer_caller_cont(Fixture *f, gconstpointer data)
{
  if (g_get_num_processors() < 2) {
    g_test_skip("one-to-one with 2 vCPUs needs at least 2 host CPUs");
    return;
  }
  start_source(f);
  const char *extra[] = {"-S", "-incoming", "defer", NULL};
  g_auto(GStrv) want = planned(f, "dst", f->dst_qmp, extra);
  g_autoptr(GPtrArray) cmd =
      command(f, FALSE, "dst", f->dst_state, f->dst_qmp, extra);
  g_autofree char *dir = g_build_filename(f->dir, "dst", NULL);
  g_mkdir(dir, 0700);
  f->dst = qp_test_spawn((char **)cmd->pdata, NULL, dir);

  /* Pinned while it waits for the migration, and still waiting. */
  wait_pinned(f, f->dst, want, "destination before migrate-incoming");
  g_autofree char *before = orch_status(f->dst_qmp);
  g_assert_cmpstr(before, ==, "inmigrate");
  check_dst_claim(f);

  int port = orch_free_port();
  g_autofree char *uri = g_strdup_printf("tcp:127.0.0.1:%d", port);
  g_autofree char *incoming = g_strdup_printf(
      "{\"execute\":\"migrate-incoming\",\"arguments\":{\"uri\":\"%s\"}}", uri);
  qmp_ok(f->dst_qmp, incoming);
  migrate_and_wait(f, uri);

  /* The caller gave -S: the guest must wait for the caller's cont. Had
   * anyone sent cont during -incoming, QEMU would start it right after the
   * migration ("running"). */
  g_assert_true(orch_wait_status(f->dst_qmp, "paused", 30000));
  g_autofree char *src_status = orch_status(f->src_qmp);
  g_assert_cmpstr(src_status, ==, "postmigrate");

  /* The caller re-pins (as libvirt does before its cont), then resumes:
   * the keeper's re-check on RESUME puts the plan back. */
  g_autofree char *all = orch_own_cpus();
  orch_set_vcpu_affinities(f->dst, all);
  g_auto(GStrv) moved = orch_vcpu_affinities(f->dst);
  g_assert_cmpstr(moved[0], ==, all);
  qmp_ok(f->dst_qmp, "{\"execute\":\"cont\"}");
  g_assert_true(orch_wait_status(f->dst_qmp, "running", 10000));
  wait_pinned(f, f->dst, want, "destination after the caller's cont");
  check_dst_claim(f);
  stop_all(f);
}

/* -incoming tcp:URI without -S: QEMU starts the guest when the migration
 * ends, with the plan in force; qemu-pin sent no cont before that (the
 * destination still waits while nobody migrates to it). */
static void
test_uri_autostart(Fixture *f, gconstpointer data)
{
  if (g_get_num_processors() < 2) {
    g_test_skip("one-to-one with 2 vCPUs needs at least 2 host CPUs");
    return;
  }
  start_source(f);
  int port = orch_free_port();
  g_autofree char *uri = g_strdup_printf("tcp:127.0.0.1:%d", port);
  const char *extra[] = {"-incoming", uri, NULL};
  g_auto(GStrv) want = planned(f, "dst", f->dst_qmp, extra);
  g_autoptr(GPtrArray) cmd =
      command(f, FALSE, "dst", f->dst_state, f->dst_qmp, extra);
  g_autofree char *dir = g_build_filename(f->dir, "dst", NULL);
  g_mkdir(dir, 0700);
  f->dst = qp_test_spawn((char **)cmd->pdata, NULL, dir);
  wait_pinned(f, f->dst, want, "destination before the migration");
  g_autofree char *before = orch_status(f->dst_qmp);
  g_assert_cmpstr(before, ==, "inmigrate");
  check_dst_claim(f);

  migrate_and_wait(f, uri);
  g_assert_true(orch_wait_status(f->dst_qmp, "running", 30000));
  wait_pinned(f, f->dst, want, "destination after the migration");
  check_dst_claim(f);
  stop_all(f);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add(
      "/orchestrators/migration/incoming-defer/no-cont-plan-after-caller-cont",
      Fixture, NULL, setup, test_defer_caller_cont, teardown);
  g_test_add(
      "/orchestrators/migration/incoming-uri/runs-pinned-after-migration",
      Fixture, NULL, setup, test_uri_autostart, teardown);
  return g_test_run();
}
