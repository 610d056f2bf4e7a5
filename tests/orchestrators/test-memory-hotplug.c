/* Memory plugged by the caller (object-add, device_add, qom-set and
 * object-del on the caller's own monitor) into a VM launched by qemu-pin,
 * real QEMU (TCG):
 *  - a pc-dimm plugged later is claimed in the VM's ledger record, where
 *    its backend is bound, else where the guest's RAM is;
 *  - virtio-mem's requested-size raised and lowered moves the claim;
 *  - a preallocating backend added and deleted is claimed and given back;
 *  - under -overcommit mem-lock=on, any backend added is (it is resident
 *    at once), with or without maxmem, and one that does not fit is said
 *    in the log;
 *  - memory that does not fit is said in the keeper's log, the VM runs on,
 *    and it is claimed once another VM's leaving makes room;
 *  - a backend of hugepages is claimed in hugepages;
 *  - the caller's pinning and memory plugged later both reach the record.
 * The guest is a halting firmware: nothing here needs its cooperation. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/orchestrators/orch-common.h"
#include "topology/base/cpulist.h"

typedef struct {
  char *dir;
  char *marker;
  char *state;
  char *qmp;
  char *fw;
  GPid pid;
} Fixture;

static void
setup(Fixture *f, gconstpointer data)
{
  f->dir = qp_test_tmpdir();
  f->marker = g_path_get_basename(f->dir);
  orch_cleanup_on_abort(f->marker, NULL, NULL);
  f->state = g_build_filename(f->dir, "state", NULL);
  f->qmp = g_build_filename(f->dir, "qmp.sock", NULL);
  f->fw = qp_test_firmware(f->dir, QP_TEST_FW_HALT);
}

static void
teardown(Fixture *f, gconstpointer data)
{
  orch_cleanup_on_abort(NULL, NULL, NULL);
  g_autoptr(GArray) left = qp_test_pids_with(f->marker);
  for (guint i = 0; i < left->len; i++)
    kill(g_array_index(left, int, i), SIGKILL);
  if (f->pid > 0)
    qp_test_wait(f->pid, 10000);
  qp_test_wait_no_process(f->marker, 10000);
  qp_test_rmtree(f->dir);
  g_free(f->dir);
  g_free(f->marker);
  g_free(f->state);
  g_free(f->qmp);
  g_free(f->fw);
}

static char *
stderr_text(Fixture *f)
{
  g_autofree char *path = g_build_filename(f->dir, "stderr", NULL);
  char *text = NULL;
  g_file_get_contents(path, &text, NULL, NULL);
  return text ? text : g_strdup("");
}

/* Launches qemu-pin OPTS -- QEMU ... -m MEM EXTRA, and waits until the
 * guest runs. */
static void
launch(Fixture *f, const char *const *opts, const char *mem,
       const char *const *extra)
{
  g_autoptr(GPtrArray) a = g_ptr_array_new_with_free_func(g_free);
  g_ptr_array_add(a, g_strdup(qp_test_binary()));
  g_ptr_array_add(a, g_strdup_printf("--state-dir=%s", f->state));
  for (guint i = 0; opts != NULL && opts[i] != NULL; i++)
    g_ptr_array_add(a, g_strdup(opts[i]));
  const char *common[] = {"--",       qp_test_qemu(), "-accel",      "tcg",
                          "-machine", "q35",          "-nodefaults", "-display",
                          "none",     "-smp",         "1",           NULL};
  for (guint i = 0; common[i] != NULL; i++)
    g_ptr_array_add(a, g_strdup(common[i]));
  g_ptr_array_add(a, g_strdup("-m"));
  g_ptr_array_add(a, g_strdup(mem));
  g_ptr_array_add(a, g_strdup("-bios"));
  g_ptr_array_add(a, g_strdup(f->fw));
  g_ptr_array_add(a, g_strdup("-name"));
  g_ptr_array_add(a, g_strdup_printf("%s,debug-threads=on", f->marker));
  g_ptr_array_add(a, g_strdup("-qmp"));
  g_ptr_array_add(a, g_strdup_printf("unix:%s,server=on,wait=off", f->qmp));
  for (guint i = 0; extra != NULL && extra[i] != NULL; i++)
    g_ptr_array_add(a, g_strdup(extra[i]));
  g_ptr_array_add(a, NULL);
  f->pid = qp_test_spawn((char **)a->pdata, NULL, f->dir);
  if (!orch_wait_status(f->qmp, "running", 30000)) {
    g_autofree char *err = stderr_text(f);
    g_test_message("qemu-pin's stderr:\n%s", err);
    g_assert_not_reached();
  }
}

static void
qmp(Fixture *f, const char *command)
{
  g_autofree char *err = NULL;
  g_autoptr(JsonNode) r = orch_qmp(f->qmp, command, &err);
  if (r == NULL)
    g_test_message("%s: %s", command, err);
  g_assert_nonnull(r);
}

/* MiB of ordinary memory and pages of PAGE_KIB the record claims, over all
 * nodes. */
static gint64
claimed(Fixture *f, gint64 page_kib)
{
  g_autoptr(JsonObject) rec = orch_record(f->state);
  g_assert_nonnull(rec);
  gint64 sum = 0;
  if (page_kib == 0) {
    JsonObject *m = json_object_get_object_member(rec, "memory-mib");
    g_autoptr(GList) keys = json_object_get_members(m);
    for (GList *l = keys; l != NULL; l = l->next)
      sum += json_object_get_int_member(m, l->data);
    return sum;
  }
  JsonArray *h = json_object_get_array_member(rec, "hugepages");
  for (guint i = 0; i < json_array_get_length(h); i++) {
    JsonObject *o = json_array_get_object_element(h, i);
    if (json_object_get_int_member(o, "page-kib") == page_kib)
      sum += json_object_get_int_member(o, "pages");
  }
  return sum;
}

static gboolean
wait_claimed(Fixture *f, gint64 page_kib, gint64 want, guint timeout_ms)
{
  gint64 deadline = g_get_monotonic_time() + (gint64)timeout_ms * 1000;
  gint64 have;
  do {
    have = claimed(f, page_kib);
    if (have == want)
      return TRUE;
    g_usleep(20000);
  } while (g_get_monotonic_time() < deadline);
  g_test_message("the record claims %" G_GINT64_FORMAT
                 ", not %" G_GINT64_FORMAT,
                 have, want);
  return FALSE;
}

/* MiB claimed on NODE ("0"). */
static gint64
claimed_on(Fixture *f, const char *node)
{
  g_autoptr(JsonObject) rec = orch_record(f->state);
  return json_object_get_int_member_with_default(
      json_object_get_object_member(rec, "memory-mib"), node, 0);
}

static void
test_dimm_plugged(Fixture *f, gconstpointer data)
{
  launch(f, NULL, "64,slots=4,maxmem=1G", NULL);
  g_assert_true(wait_claimed(f, 0, 64, 5000));
  qmp(f, "{\"execute\":\"object-add\",\"arguments\":{\"qom-type\":"
         "\"memory-backend-ram\",\"id\":\"m1\",\"size\":67108864}}");
  qmp(f, "{\"execute\":\"device_add\",\"arguments\":{\"driver\":\"pc-dimm\","
         "\"id\":\"dimm1\",\"memdev\":\"m1\"}}");
  g_assert_true(wait_claimed(f, 0, 128, 5000));
  /* A backend the caller bound: claimed on its node. */
  qmp(f, "{\"execute\":\"object-add\",\"arguments\":{\"qom-type\":"
         "\"memory-backend-ram\",\"id\":\"m2\",\"size\":33554432,"
         "\"host-nodes\":[0],\"policy\":\"bind\"}}");
  qmp(f, "{\"execute\":\"device_add\",\"arguments\":{\"driver\":\"pc-dimm\","
         "\"id\":\"dimm2\",\"memdev\":\"m2\"}}");
  g_assert_true(wait_claimed(f, 0, 160, 5000));
  g_assert_cmpint(claimed_on(f, "0"), >=, 32);
  g_autofree char *status = orch_status(f->qmp);
  g_assert_cmpstr(status, ==, "running");
}

/* Plugs a pc-dimm DEVICE on a file backend ID of 16 MiB at PATH, mapped
 * read-only or shared. */
static void
plug_file_dimm(Fixture *f, const char *id, const char *path, gboolean readonly)
{
  g_autofree char *zeros = g_malloc0(16 << 20);
  g_assert_true(g_file_set_contents(path, zeros, 16 << 20, NULL));
  g_autofree char *add =
      g_strdup_printf("{\"execute\":\"object-add\",\"arguments\":{\"qom-type\":"
                      "\"memory-backend-file\",\"id\":\"%s\",\"size\":16777216,"
                      "\"mem-path\":\"%s\",\"%s\":true}}",
                      id, path, readonly ? "readonly" : "share");
  qmp(f, add);
  g_autofree char *dev = g_strdup_printf(
      "{\"execute\":\"device_add\",\"arguments\":{\"driver\":\"pc-dimm\","
      "\"id\":\"d-%s\",\"memdev\":\"%s\"}}",
      id, id);
  qmp(f, dev);
}

/* A dimm on a file mapped read-only (readonly=on) plugged later is not
 * claimed: its pages are the file's own page cache, shared and never
 * dirtied (docs/design.md). The dimms around it are: the claim goes
 * 64, 80, 88, never through 96. */
static void
test_readonly_dimm_plugged(Fixture *f, gconstpointer data)
{
  g_autofree char *rw = g_build_filename(f->dir, "rw.img", NULL);
  g_autofree char *ro = g_build_filename(f->dir, "ro.img", NULL);
  launch(f, NULL, "64,slots=4,maxmem=1G", NULL);
  g_assert_true(wait_claimed(f, 0, 64, 5000));
  plug_file_dimm(f, "rw", rw, FALSE);
  g_assert_true(wait_claimed(f, 0, 80, 5000));
  plug_file_dimm(f, "ro", ro, TRUE);
  qmp(f, "{\"execute\":\"object-add\",\"arguments\":{\"qom-type\":"
         "\"memory-backend-ram\",\"id\":\"m8\",\"size\":8388608}}");
  qmp(f, "{\"execute\":\"device_add\",\"arguments\":{\"driver\":\"pc-dimm\","
         "\"id\":\"d-8\",\"memdev\":\"m8\"}}");
  g_assert_true(wait_claimed(f, 0, 88, 5000));
  g_autoptr(JsonNode) devs =
      orch_qmp(f->qmp, "{\"execute\":\"query-memory-devices\"}", NULL);
  g_assert_cmpuint(json_array_get_length(json_node_get_array(devs)), ==, 3);
}

static void
test_virtio_mem_resized(Fixture *f, gconstpointer data)
{
  const char *extra[] = {
      "-object", "memory-backend-ram,id=v0,size=256M", "-device",
      "virtio-mem-pci,id=vm0,memdev=v0,requested-size=32M", NULL};
  launch(f, NULL, "64,maxmem=1G", extra);
  g_assert_true(wait_claimed(f, 0, 96, 5000));
  qmp(f, "{\"execute\":\"qom-set\",\"arguments\":{\"path\":"
         "\"/machine/peripheral/vm0\",\"property\":\"requested-size\","
         "\"value\":134217728}}");
  g_assert_true(wait_claimed(f, 0, 64 + 128, 5000));
  qmp(f, "{\"execute\":\"qom-set\",\"arguments\":{\"path\":"
         "\"/machine/peripheral/vm0\",\"property\":\"requested-size\","
         "\"value\":0}}");
  g_assert_true(wait_claimed(f, 0, 64, 5000));
}

static void
test_backend_deleted(Fixture *f, gconstpointer data)
{
  launch(f, NULL, "64,slots=2,maxmem=1G", NULL);
  g_assert_true(wait_claimed(f, 0, 64, 5000));
  /* It preallocates: its memory is taken as soon as it exists. */
  qmp(f, "{\"execute\":\"object-add\",\"arguments\":{\"qom-type\":"
         "\"memory-backend-ram\",\"id\":\"p1\",\"size\":16777216,"
         "\"prealloc\":true}}");
  g_assert_true(wait_claimed(f, 0, 80, 5000));
  qmp(f, "{\"execute\":\"object-del\",\"arguments\":{\"id\":\"p1\"}}");
  g_assert_true(wait_claimed(f, 0, 64, 5000));
  /* A plain one takes nothing until a device uses it. */
  qmp(f, "{\"execute\":\"object-add\",\"arguments\":{\"qom-type\":"
         "\"memory-backend-ram\",\"id\":\"r1\",\"size\":16777216}}");
  g_usleep(1500000);
  g_assert_cmpint(claimed(f, 0), ==, 64);
  /* Deleted and made again, bigger and preallocating, under the same id
   * (at once, most likely between two of the keeper's looks): claimed as
   * the new backend it is (outside check, stop 42: the claim stayed at
   * the old size). */
  qmp(f, "{\"execute\":\"object-del\",\"arguments\":{\"id\":\"r1\"}}");
  qmp(f, "{\"execute\":\"object-add\",\"arguments\":{\"qom-type\":"
         "\"memory-backend-ram\",\"id\":\"r1\",\"size\":33554432,"
         "\"prealloc\":true}}");
  g_assert_true(wait_claimed(f, 0, 96, 5000));
  qmp(f, "{\"execute\":\"object-del\",\"arguments\":{\"id\":\"r1\"}}");
  qmp(f, "{\"execute\":\"object-add\",\"arguments\":{\"qom-type\":"
         "\"memory-backend-ram\",\"id\":\"r1\",\"size\":16777216,"
         "\"prealloc\":true}}");
  g_assert_true(wait_claimed(f, 0, 80, 5000));
}

/* Without maxmem or virtio-mem nothing can be plugged into the guest, but
 * a preallocating backend object-add'ed on the caller's monitor still
 * takes its memory from the host: it is claimed (looked for with the
 * resident measure, every 10 s) and given back once deleted (outside
 * check, stop 42: it was never claimed). */
static void
test_unplugged_without_maxmem(Fixture *f, gconstpointer data)
{
  launch(f, NULL, "64", NULL);
  g_assert_true(wait_claimed(f, 0, 64, 5000));
  qmp(f, "{\"execute\":\"object-add\",\"arguments\":{\"qom-type\":"
         "\"memory-backend-ram\",\"id\":\"p1\",\"size\":16777216,"
         "\"prealloc\":true}}");
  g_assert_true(wait_claimed(f, 0, 80, 25000));
  qmp(f, "{\"execute\":\"object-del\",\"arguments\":{\"id\":\"p1\"}}");
  g_assert_true(wait_claimed(f, 0, 64, 25000));
  g_autofree char *err = stderr_text(f);
  g_assert_cmpstr(err, ==, "");
}

/* KiB QEMU (F's pid: qemu-pin execs it) has locked in memory. */
static gint64
locked_kib(Fixture *f)
{
  g_autofree char *v = qp_test_task_field(f->pid, f->pid, "VmLck");
  g_assert_nonnull(v);
  return g_ascii_strtoll(v, NULL, 10);
}

/* -overcommit mem-lock=on: QEMU's mlockall(MCL_FUTURE) makes a backend
 * object-add'ed later resident as it is made, though it does not
 * preallocate and no device uses it: it is claimed as a preallocating one
 * (outside check, finding 53: 48 MiB more locked in, the record stayed at
 * the RAM's 64). A pc-dimm plugged on it claims nothing more; deleted, it
 * is given back. */
static void
test_mem_lock_backend(Fixture *f, gconstpointer data)
{
  const char *extra[] = {"-overcommit", "mem-lock=on", NULL};
  launch(f, NULL, "64,slots=2,maxmem=1G", extra);
  g_assert_true(wait_claimed(f, 0, 64, 5000));
  gint64 before = locked_kib(f);
  qmp(f, "{\"execute\":\"object-add\",\"arguments\":{\"qom-type\":"
         "\"memory-backend-ram\",\"id\":\"m1\",\"size\":50331648}}");
  g_assert_cmpint(locked_kib(f) - before, >=, 48 * 1024);
  g_assert_true(wait_claimed(f, 0, 64 + 48, 5000));
  /* A dimm on it: its memory was claimed already. Another backend after
   * it is claimed alone (the dimm's 48 MiB again would make 176). */
  qmp(f, "{\"execute\":\"device_add\",\"arguments\":{\"driver\":\"pc-dimm\","
         "\"id\":\"dimm1\",\"memdev\":\"m1\"}}");
  qmp(f, "{\"execute\":\"object-add\",\"arguments\":{\"qom-type\":"
         "\"memory-backend-ram\",\"id\":\"m2\",\"size\":16777216}}");
  g_assert_true(wait_claimed(f, 0, 64 + 48 + 16, 5000));
  qmp(f, "{\"execute\":\"object-del\",\"arguments\":{\"id\":\"m2\"}}");
  g_assert_true(wait_claimed(f, 0, 64 + 48, 5000));
  g_autofree char *status = orch_status(f->qmp);
  g_assert_cmpstr(status, ==, "running");
  g_autofree char *err = stderr_text(f);
  g_assert_cmpstr(err, ==, "");
}

/* Under mem-lock the guest's RAM is resident as QEMU starts, as a
 * preallocated one is: the keeper measures it as it starts holding the VM,
 * before anything it claims later (it waited 10 s, the RAM counted both as
 * used by the kernel and as outstanding for that long). */
static void
test_mem_lock_resident_at_once(Fixture *f, gconstpointer data)
{
  const char *extra[] = {"-overcommit", "mem-lock=on", NULL};
  launch(f, NULL, "64,slots=2,maxmem=1G", extra);
  qmp(f, "{\"execute\":\"object-add\",\"arguments\":{\"qom-type\":"
         "\"memory-backend-ram\",\"id\":\"m1\",\"size\":16777216}}");
  g_assert_true(wait_claimed(f, 0, 64 + 16, 5000));
  g_autoptr(JsonObject) rec = orch_record(f->state);
  g_assert_nonnull(rec);
  g_assert_true(json_object_has_member(rec, "resident-mib"));
  JsonObject *m = json_object_get_object_member(rec, "resident-mib");
  g_autoptr(GList) keys = json_object_get_members(m);
  gint64 sum = 0;
  for (GList *l = keys; l != NULL; l = l->next)
    sum += json_object_get_int_member(m, l->data);
  g_assert_cmpint(sum, >=, 64);
}

/* The same without maxmem (nothing can be plugged into the guest, the
 * keeper looks with each resident measure, every 10 s). */
static void
test_mem_lock_backend_without_maxmem(Fixture *f, gconstpointer data)
{
  const char *extra[] = {"-overcommit", "mem-lock=on", NULL};
  launch(f, NULL, "64", extra);
  g_assert_true(wait_claimed(f, 0, 64, 5000));
  qmp(f, "{\"execute\":\"object-add\",\"arguments\":{\"qom-type\":"
         "\"memory-backend-ram\",\"id\":\"m1\",\"size\":16777216}}");
  g_assert_true(wait_claimed(f, 0, 80, 25000));
  qmp(f, "{\"execute\":\"object-del\",\"arguments\":{\"id\":\"m1\"}}");
  g_assert_true(wait_claimed(f, 0, 64, 25000));
  g_autofree char *err = stderr_text(f);
  g_assert_cmpstr(err, ==, "");
}

/* The first node with at least 400 MiB uncommitted (a fresh ledger), and
 * that amount; -1 when none. */
static int
roomy_node(Fixture *f, gint64 *uncommitted)
{
  g_autofree char *state = g_strdup_printf("--state-dir=%s", f->state);
  char *argv[] = {(char *)qp_test_binary(), "status", "--json", state, NULL};
  QpTestRun r;
  qp_test_run(argv, NULL, &r);
  g_assert_cmpint(r.status, ==, 0);
  g_autoptr(JsonParser) p = json_parser_new();
  g_assert_true(json_parser_load_from_data(p, r.out, -1, NULL));
  qp_test_run_clear(&r);
  JsonArray *nodes = json_object_get_array_member(
      json_node_get_object(json_parser_get_root(p)), "nodes");
  for (guint i = 0; i < json_array_get_length(nodes); i++) {
    JsonObject *n = json_array_get_object_element(nodes, i);
    JsonObject *m = json_object_get_object_member(n, "memory-mib");
    gint64 u = json_object_get_int_member(m, "uncommitted");
    if (u >= 400 && *json_object_get_string_member(n, "cpus") != '\0') {
      /* The node's room by total less claims: a reserve set from it is
       * what binds, whatever the kernel can give beyond. */
      *uncommitted = json_object_get_int_member(m, "total") -
                     json_object_get_int_member(m, "hugepage-pools") -
                     json_object_get_int_member(m, "claimed");
      return (int)json_object_get_int_member(n, "id");
    }
  }
  return -1;
}

/* qemu-pin's stderr once it names WORD, or after 5 s. */
static char *
stderr_naming(Fixture *f, const char *word)
{
  gint64 deadline = g_get_monotonic_time() + 5 * G_USEC_PER_SEC;
  char *err = NULL;
  do {
    g_free(err);
    err = stderr_text(f);
    if (strstr(err, word) != NULL)
      break;
    g_usleep(20000);
  } while (g_get_monotonic_time() < deadline);
  g_test_message("qemu-pin's stderr:\n%s", err);
  return err;
}

/* Plugs a 128 MiB pc-dimm "bigdimm" (memory backend "big") on F's
 * monitor; returns qemu-pin's stderr once it names the dimm, or after 5 s. */
static char *
plug_big_dimm(Fixture *f)
{
  qmp(f, "{\"execute\":\"object-add\",\"arguments\":{\"qom-type\":"
         "\"memory-backend-ram\",\"id\":\"big\",\"size\":134217728}}");
  qmp(f, "{\"execute\":\"device_add\",\"arguments\":{\"driver\":\"pc-dimm\","
         "\"id\":\"bigdimm\",\"memdev\":\"big\"}}");
  return stderr_naming(f, "bigdimm");
}

/* Launches a 64 MiB VM (maxmem 1G) with EXTRA on a node whose host reserve
 * leaves it the RAM and 32 MiB more, claimed once it runs; FALSE (the test
 * skipped) when no node has 400 MiB uncommitted. */
static gboolean
launch_with_32_mib_left(Fixture *f, const char *const *extra)
{
  gint64 uncommitted = 0;
  int node = roomy_node(f, &uncommitted);
  if (node < 0) {
    g_test_skip("no host node has 400 MiB uncommitted");
    return FALSE;
  }
  g_autofree char *hostnodes = g_strdup_printf("--hostnodes=%d", node);
  g_autofree char *reserve = g_strdup_printf(
      "--node-reserve-mib=%d:%" G_GINT64_FORMAT, node, uncommitted - 64 - 32);
  const char *opts[] = {hostnodes, reserve, NULL};
  launch(f, opts, "64,slots=2,maxmem=1G", extra);
  g_assert_true(wait_claimed(f, 0, 64, 5000));
  return TRUE;
}

static void
test_no_room_said_in_log(Fixture *f, gconstpointer data)
{
  if (!launch_with_32_mib_left(f, NULL))
    return;
  g_autofree char *err = plug_big_dimm(f);
  g_assert_nonnull(strstr(err, "warning: dimm bigdimm (memory backend big) "
                               "was plugged but its 128 MiB could not be "
                               "claimed"));
  g_assert_nonnull(strstr(err, "only 32 MiB uncommitted"));
  /* Said once, however often the keeper looks. */
  g_usleep(1200000);
  g_free(err);
  err = stderr_text(f);
  g_assert_null(strstr(strstr(err, "bigdimm") + 1, "bigdimm"));
  g_assert_cmpint(claimed(f, 0), ==, 64);
  g_autofree char *status = orch_status(f->qmp);
  g_assert_cmpstr(status, ==, "running");
}

/* A backend locked in by mem-lock that does not fit is said in the log as
 * a preallocating one is, once, and the VM runs on. */
static void
test_mem_lock_no_room(Fixture *f, gconstpointer data)
{
  const char *extra[] = {"-overcommit", "mem-lock=on", NULL};
  if (!launch_with_32_mib_left(f, extra))
    return;
  qmp(f, "{\"execute\":\"object-add\",\"arguments\":{\"qom-type\":"
         "\"memory-backend-ram\",\"id\":\"big\",\"size\":134217728}}");
  g_autofree char *err = stderr_naming(f, "backend big");
  g_assert_nonnull(strstr(err, "warning: memory backend big was plugged but "
                               "its 128 MiB could not be claimed"));
  g_assert_nonnull(strstr(err, "only 32 MiB uncommitted"));
  g_assert_cmpint(claimed(f, 0), ==, 64);
  g_autofree char *status = orch_status(f->qmp);
  g_assert_cmpstr(status, ==, "running");
}

/* Memory that did not fit is claimed once room frees up: here another VM
 * holds the room the dimm needs, and leaves (outside check, stop 42: the
 * dimm stayed unclaimed for good). */
static void
test_claimed_when_room_frees(Fixture *f, gconstpointer data)
{
  gint64 uncommitted = 0;
  int node = roomy_node(f, &uncommitted);
  if (node < 0) {
    g_test_skip("no host node has 400 MiB uncommitted");
    return;
  }
  g_autofree char *hostnodes = g_strdup_printf("--hostnodes=%d", node);
  g_autofree char *state = g_strdup_printf("--state-dir=%s", f->state);
  g_autofree char *other_dir = g_build_filename(f->dir, "other", NULL);
  g_assert_cmpint(mkdir(other_dir, 0700), ==, 0);
  g_autofree char *other_name = g_strdup_printf("%s-other", f->marker);
  char *other[] = {(char *)qp_test_binary(),
                   state,
                   hostnodes,
                   "--",
                   (char *)qp_test_qemu(),
                   "-accel",
                   "tcg",
                   "-machine",
                   "q35",
                   "-nodefaults",
                   "-display",
                   "none",
                   "-m",
                   "128",
                   "-bios",
                   f->fw,
                   "-name",
                   other_name,
                   NULL};
  GPid other_pid = qp_test_spawn(other, NULL, other_dir);
  g_assert_true(orch_wait_records(f->state, 1, 30000));
  /* This VM's reserve leaves its RAM and 32 MiB on the node, beside the
   * other VM's 128 MiB. */
  g_autofree char *reserve =
      g_strdup_printf("--node-reserve-mib=%d:%" G_GINT64_FORMAT, node,
                      uncommitted - 64 - 128 - 32);
  const char *opts[] = {hostnodes, reserve, NULL};
  launch(f, opts, "64,slots=2,maxmem=1G", NULL);
  g_assert_true(orch_wait_records(f->state, 2, 10000));
  g_autofree char *err = plug_big_dimm(f);
  g_assert_nonnull(strstr(err, "could not be claimed"));
  /* The other VM leaves: its 128 MiB are room again. */
  kill(other_pid, SIGTERM);
  g_assert_cmpint(qp_test_wait(other_pid, 20000), >=, 0);
  g_assert_true(orch_wait_records(f->state, 1, 10000));
  g_assert_true(wait_claimed(f, 0, 64 + 128, 15000));
  g_autofree char *node_name = g_strdup_printf("%d", node);
  g_assert_cmpint(claimed_on(f, node_name), ==, 192);
}

/* A dimm on 2 MiB hugepages (reserve=off: QEMU maps it without pages) is
 * claimed in hugepages: on a host without free pages that fails, and the
 * log says it in pages. */
static void
test_hugetlb_dimm(Fixture *f, gconstpointer data)
{
  const char *free_path = "/sys/devices/system/node/node0/hugepages/"
                          "hugepages-2048kB/free_hugepages";
  g_autofree char *free_text = NULL;
  if (!g_file_get_contents(free_path, &free_text, NULL, NULL)) {
    g_test_skip("this host has no 2 MiB hugepages");
    return;
  }
  gint64 free_pages = g_ascii_strtoll(free_text, NULL, 10);
  launch(f, NULL, "64,slots=2,maxmem=1G", NULL);
  qmp(f, "{\"execute\":\"object-add\",\"arguments\":{\"qom-type\":"
         "\"memory-backend-memfd\",\"id\":\"h1\",\"size\":8388608,"
         "\"hugetlb\":true,\"hugetlbsize\":2097152,\"reserve\":false}}");
  qmp(f, "{\"execute\":\"device_add\",\"arguments\":{\"driver\":\"pc-dimm\","
         "\"id\":\"hdimm\",\"memdev\":\"h1\"}}");
  if (free_pages >= 4) {
    g_assert_true(wait_claimed(f, 2048, 4, 5000));
  } else {
    gint64 deadline = g_get_monotonic_time() + 5 * G_USEC_PER_SEC;
    g_autofree char *err = NULL;
    do {
      g_free(err);
      err = stderr_text(f);
      if (strstr(err, "hdimm") != NULL)
        break;
      g_usleep(20000);
    } while (g_get_monotonic_time() < deadline);
    g_test_message("qemu-pin's stderr:\n%s", err);
    g_assert_nonnull(strstr(err, "its 4 x 2048 KiB hugepages could not be "
                                 "claimed"));
    g_assert_cmpint(claimed(f, 2048), ==, 0);
  }
  /* The ordinary memory did not grow. */
  g_assert_cmpint(claimed(f, 0), ==, 64);
}

/* The record's shared vCPUs by CPU set ("CPUS:VCPUS ..."). */
static char *
record_cpu_load(Fixture *f)
{
  g_autoptr(JsonObject) rec = orch_record(f->state);
  g_assert_nonnull(rec);
  JsonArray *a = json_object_get_array_member(rec, "cpu-load");
  GString *s = g_string_new(NULL);
  for (guint i = 0; i < json_array_get_length(a); i++) {
    JsonObject *o = json_array_get_object_element(a, i);
    g_string_append_printf(s, "%s%s:%" G_GINT64_FORMAT, i ? " " : "",
                           json_object_get_string_member(o, "cpus"),
                           json_object_get_int_member(o, "vcpus"));
  }
  return g_string_free(s, FALSE);
}

static gboolean
wait_cpu_load(Fixture *f, const char *want, guint timeout_ms)
{
  gint64 deadline = g_get_monotonic_time() + (gint64)timeout_ms * 1000;
  g_autofree char *have = NULL;
  do {
    g_free(have);
    have = record_cpu_load(f);
    if (strcmp(have, want) == 0)
      return TRUE;
    g_usleep(50000);
  } while (g_get_monotonic_time() < deadline);
  g_test_message("the record's cpu-load is \"%s\", not \"%s\"", have, want);
  return FALSE;
}

/* The caller pins the vCPU (the keeper's look, every 5 s) and plugs memory
 * (the keeper's memory watch, every 500 ms): both change the VM's record,
 * and neither change undoes the other. */
static void
test_caller_pin_and_memory(Fixture *f, gconstpointer data)
{
  g_autofree char *own =
      qp_test_task_field(getpid(), getpid(), "Cpus_allowed_list");
  g_auto(hwloc_bitmap_t) cpus = hwloc_bitmap_alloc();
  g_assert_cmpint(hwloc_bitmap_list_sscanf(cpus, own), ==, 0);
  if (hwloc_bitmap_weight(cpus) < 2) {
    g_test_skip("one usable CPU: the caller cannot pin narrower");
    return;
  }
  g_autofree char *first = g_strdup_printf("%d", hwloc_bitmap_first(cpus));
  g_autofree char *last = g_strdup_printf("%d", hwloc_bitmap_last(cpus));
  const char *opts[] = {"--mode=balanced", NULL};
  launch(f, opts, "64,slots=4,maxmem=1G", NULL);
  g_assert_true(wait_claimed(f, 0, 64, 5000));
  g_autoptr(GArray) tids = qp_test_vcpu_threads(f->pid);
  g_assert_cmpuint(tids->len, ==, 1);

  qp_test_set_affinity(g_array_index(tids, int, 0), first);
  g_autofree char *on_first = g_strdup_printf("%s:1", first);
  g_assert_true(wait_cpu_load(f, on_first, 15000));

  qmp(f, "{\"execute\":\"object-add\",\"arguments\":{\"qom-type\":"
         "\"memory-backend-ram\",\"id\":\"m1\",\"size\":67108864}}");
  qmp(f, "{\"execute\":\"device_add\",\"arguments\":{\"driver\":\"pc-dimm\","
         "\"id\":\"dimm1\",\"memdev\":\"m1\"}}");
  g_assert_true(wait_claimed(f, 0, 128, 5000));
  g_autofree char *after_memory = record_cpu_load(f);
  g_assert_cmpstr(after_memory, ==, on_first);

  qp_test_set_affinity(g_array_index(tids, int, 0), last);
  g_autofree char *on_last = g_strdup_printf("%s:1", last);
  g_assert_true(wait_cpu_load(f, on_last, 15000));
  g_assert_cmpint(claimed(f, 0), ==, 128);
  g_autofree char *err = stderr_text(f);
  g_assert_cmpstr(err, ==, "");
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
#define ADD(path, fn) g_test_add(path, Fixture, NULL, setup, fn, teardown)
  ADD("/orchestrators/hotplug/memory/dimm-plugged-is-claimed",
      test_dimm_plugged);
  ADD("/orchestrators/hotplug/memory/readonly-dimm-is-not-claimed",
      test_readonly_dimm_plugged);
  ADD("/orchestrators/hotplug/memory/virtio-mem-resize-moves-the-claim",
      test_virtio_mem_resized);
  ADD("/orchestrators/hotplug/memory/backend-deleted-is-given-back",
      test_backend_deleted);
  ADD("/orchestrators/hotplug/memory/unplugged-backend-without-maxmem",
      test_unplugged_without_maxmem);
  ADD("/orchestrators/hotplug/memory/mem-lock-backend-is-claimed",
      test_mem_lock_backend);
  ADD("/orchestrators/hotplug/memory/mem-lock-ram-measured-at-once",
      test_mem_lock_resident_at_once);
  ADD("/orchestrators/hotplug/memory/mem-lock-backend-without-maxmem",
      test_mem_lock_backend_without_maxmem);
  ADD("/orchestrators/hotplug/memory/no-room-said-in-the-log",
      test_no_room_said_in_log);
  ADD("/orchestrators/hotplug/memory/mem-lock-no-room-said-in-the-log",
      test_mem_lock_no_room);
  ADD("/orchestrators/hotplug/memory/claimed-when-room-frees",
      test_claimed_when_room_frees);
  ADD("/orchestrators/hotplug/memory/hugetlb-dimm-claimed-in-pages",
      test_hugetlb_dimm);
  ADD("/orchestrators/hotplug/memory/caller-pinning-and-memory-both-kept",
      test_caller_pin_and_memory);
  return g_test_run();
}
