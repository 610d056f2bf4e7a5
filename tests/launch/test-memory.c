/* Guest memory beyond plain RAM, launched with real QEMU (TCG): pc-dimm
 * with -m slots/maxmem, virtio-mem's requested-size, hugetlb backends next
 * to ordinary RAM. Each launch must run, claim in the ledger record what
 * the plan says per node and page size, and bind the backends where the
 * plan says (/proc/PID/numa_maps). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "tests/common/qp-test.h"

typedef struct {
  char *dir;
  char *state;
  char *fw;
  char *qmp;
  char *marker;
  /* hugepages reserved for the test, restored in teardown */
  char *nr_path;
  gint64 nr_before; /* -1: untouched */
  int lock_fd;
} Fixture;

static void
setup(Fixture *f, gconstpointer data)
{
  f->dir = qp_test_tmpdir();
  f->state = g_build_filename(f->dir, "state", NULL);
  f->fw = qp_test_firmware(f->dir, QP_TEST_FW_HALT);
  f->qmp = g_build_filename(f->dir, "qmp.sock", NULL);
  f->marker = g_path_get_basename(f->dir);
  f->nr_before = -1;
  f->lock_fd = -1;
}

/* A failed assertion aborts without teardown: the hugepages reserved for
 * the test are given back from the signal handler then. */
static char restore_text[32];
static int restore_fd = -1;

static void
restore_on_abort(int sig)
{
  if (restore_fd >= 0 && write(restore_fd, restore_text, strlen(restore_text)))
    restore_fd = -1;
  signal(sig, SIG_DFL);
  raise(sig);
}

static void
teardown(Fixture *f, gconstpointer data)
{
  g_autoptr(GArray) left = qp_test_pids_with(f->marker);
  for (guint i = 0; i < left->len; i++)
    kill(g_array_index(left, int, i), SIGKILL);
  qp_test_wait_no_process(f->marker, 10000);
  if (f->nr_before >= 0)
    qp_test_write_number(f->nr_path, f->nr_before);
  if (restore_fd >= 0)
    close(restore_fd);
  restore_fd = -1;
  if (f->lock_fd >= 0)
    close(f->lock_fd);
  qp_test_rmtree(f->dir);
  g_free(f->dir);
  g_free(f->state);
  g_free(f->fw);
  g_free(f->qmp);
  g_free(f->marker);
  g_free(f->nr_path);
}

/* qemu-pin --state-dir=S OPTS -- QEMU (TCG, q35, halting firmware, the
 * caller's QMP socket) EXTRA */
static GPtrArray *
command(Fixture *f, const char *const *opts, const char *const *extra)
{
  GPtrArray *a = g_ptr_array_new_with_free_func(g_free);
  g_ptr_array_add(a, g_strdup(qp_test_binary()));
  g_ptr_array_add(a, g_strdup_printf("--state-dir=%s", f->state));
  for (guint i = 0; opts != NULL && opts[i] != NULL; i++)
    g_ptr_array_add(a, g_strdup(opts[i]));
  const char *common[] = {
      "--",  qp_test_qemu(), "-accel", "tcg",         "-machine",
      "q35", "-display",     "none",   "-nodefaults", NULL};
  for (guint i = 0; common[i] != NULL; i++)
    g_ptr_array_add(a, g_strdup(common[i]));
  g_ptr_array_add(a, g_strdup("-bios"));
  g_ptr_array_add(a, g_strdup(f->fw));
  g_ptr_array_add(a, g_strdup("-name"));
  g_ptr_array_add(a, g_strdup_printf("%s,debug-threads=on", f->marker));
  g_ptr_array_add(a, g_strdup("-qmp"));
  g_ptr_array_add(a, g_strdup_printf("unix:%s,server=on,wait=off", f->qmp));
  for (guint i = 0; extra[i] != NULL; i++)
    g_ptr_array_add(a, g_strdup(extra[i]));
  g_ptr_array_add(a, NULL);
  return a;
}

static JsonObject *
record(Fixture *f)
{
  g_autoptr(GDir) d = g_dir_open(f->state, 0, NULL);
  const char *name;
  JsonObject *rec = NULL;
  while (d != NULL && (name = g_dir_read_name(d)) != NULL) {
    if (!g_str_has_suffix(name, ".json"))
      continue;
    g_autofree char *path = g_build_filename(f->state, name, NULL);
    g_autoptr(JsonParser) p = json_parser_new();
    g_assert_true(json_parser_load_from_file(p, path, NULL));
    g_assert_null(rec);
    rec = json_object_ref(json_node_get_object(json_parser_get_root(p)));
  }
  g_assert_nonnull(rec);
  return rec;
}

/* MiB the record claims on NODE ("0"). */
static gint64
record_mib(JsonObject *rec, const char *node)
{
  JsonObject *m = json_object_get_object_member(rec, "memory-mib");
  return json_object_get_int_member_with_default(m, node, 0);
}

/* Pages of PAGE_KIB the record claims on NODE. */
static gint64
record_pages(JsonObject *rec, gint64 node, gint64 page_kib)
{
  JsonArray *a = json_object_get_array_member(rec, "hugepages");
  gint64 pages = 0;
  for (guint i = 0; i < json_array_get_length(a); i++) {
    JsonObject *h = json_array_get_object_element(a, i);
    if (json_object_get_int_member(h, "node") == node &&
        json_object_get_int_member(h, "page-kib") == page_kib)
      pages += json_object_get_int_member(h, "pages");
  }
  return pages;
}

/* The plan's entry for MEMDEV. */
static JsonObject *
plan_entry(JsonObject *plan, const char *memdev)
{
  JsonArray *mem = json_object_get_array_member(plan, "memory");
  for (guint i = 0; i < json_array_get_length(mem); i++) {
    JsonObject *m = json_array_get_object_element(mem, i);
    if (g_strcmp0(json_object_get_string_member(m, "memdev"), memdev) == 0)
      return m;
  }
  return NULL;
}

static GPid
launch(Fixture *f, GPtrArray *cmd)
{
  GPid pid = qp_test_spawn((char **)cmd->pdata, NULL, f->dir);
  if (!qp_test_wait_status(f->qmp, "running", 30000)) {
    g_autofree char *path = g_build_filename(f->dir, "stderr", NULL);
    g_autofree char *err = NULL;
    g_file_get_contents(path, &err, NULL, NULL);
    g_test_message("qemu-pin's stderr: %s", err ? err : "");
    g_assert_not_reached();
  }
  return pid;
}

static void
stop(Fixture *f, GPid pid)
{
  kill(pid, SIGTERM);
  g_assert_cmpint(qp_test_wait(pid, 20000), >=, 0);
  g_assert_true(qp_test_wait_no_process(f->marker, 20000));
  g_assert_cmpuint(qp_test_count_records(f->state), ==, 0);
}

/* The one mapping of SIZE_MIB in PID has policy WANT ("bind:0"). */
static void
assert_bound(GPid pid, guint64 size_mib, const char *want)
{
  g_auto(GStrv) pol = qp_test_policies_of_mappings(pid, size_mib * 1024);
  g_test_message("%" G_GUINT64_FORMAT " MiB mappings: %s", size_mib,
                 pol[0] ? pol[0] : "(none)");
  g_assert_cmpuint(g_strv_length(pol), ==, 1);
  g_assert_cmpstr(pol[0], ==, want);
}

/* The one hugetlb mapping of PID (numa_maps says "huge") has policy WANT. */
static void
assert_hugetlb_bound(GPid pid, const char *want)
{
  g_autofree char *path = g_strdup_printf("/proc/%d/numa_maps", pid);
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  guint found = 0;
  for (guint i = 0; lines[i] != NULL; i++) {
    g_auto(GStrv) f = g_strsplit(lines[i], " ", -1);
    if (g_strv_length(f) < 2 ||
        !g_strv_contains((const char *const *)f, "huge"))
      continue;
    g_test_message("hugetlb mapping: %s", lines[i]);
    g_assert_cmpstr(f[1], ==, want);
    found++;
  }
  g_assert_cmpuint(found, ==, 1);
}

static char *
bound_as(JsonObject *entry)
{
  return g_strdup_printf("%s:%s",
                         json_object_get_string_member(entry, "policy"),
                         json_object_get_string_member(entry, "host-nodes"));
}

/* A pc-dimm plugged at start (-m slots, maxmem): claimed with the RAM and
 * its backend bound where the plan says. */
static void
test_pc_dimm(Fixture *f, gconstpointer data)
{
  const char *extra[] = {"-smp",    "1",
                         "-m",      "64,slots=2,maxmem=1G",
                         "-object", "memory-backend-ram,id=d0,size=40M",
                         "-device", "pc-dimm,id=dimm0,memdev=d0",
                         NULL};
  const char *opts[] = {"--mode=balanced", NULL};
  g_autoptr(GPtrArray) cmd = command(f, opts, extra);
  g_autoptr(JsonObject) plan = qp_test_plan((char **)cmd->pdata + 1);
  JsonObject *d0 = plan_entry(plan, "d0");
  g_assert_nonnull(d0);
  g_assert_cmpstr(json_object_get_string_member(d0, "kind"), ==, "pc-dimm");
  g_assert_cmpstr(json_object_get_string_member(d0, "device"), ==, "dimm0");
  const char *node = json_object_get_string_member(d0, "host-nodes");

  GPid pid = launch(f, cmd);
  g_autoptr(JsonObject) rec = record(f);
  g_assert_cmpint(record_mib(rec, node), ==, 64 + 40);
  g_autofree char *want = bound_as(d0);
  assert_bound(pid, 40, want);
  /* QEMU has the dimm. */
  g_autoptr(JsonNode) devs =
      qp_test_qmp_command(f->qmp, "query-memory-devices");
  g_assert_nonnull(devs);
  JsonArray *a = json_node_get_array(devs);
  g_assert_cmpuint(json_array_get_length(a), ==, 1);
  JsonObject *dimm = json_object_get_object_member(
      json_array_get_object_element(a, 0), "data");
  g_assert_cmpint(json_object_get_int_member(dimm, "size"), ==, 40 << 20);
  stop(f, pid);
}

/* virtio-mem: what the guest may plug now is claimed, not the backend's
 * maximum. */
static void
test_virtio_mem(Fixture *f, gconstpointer data)
{
  const char *extra[] = {
      "-smp",    "1",
      "-m",      "64,maxmem=1G",
      "-object", "memory-backend-ram,id=v0,size=128M",
      "-device", "virtio-mem-pci,id=vm0,memdev=v0,requested-size=32M",
      NULL};
  g_autoptr(GPtrArray) cmd = command(f, NULL, extra);
  g_autoptr(JsonObject) plan = qp_test_plan((char **)cmd->pdata + 1);
  JsonObject *v0 = plan_entry(plan, "v0");
  g_assert_nonnull(v0);
  g_assert_cmpint(json_object_get_int_member(v0, "size-mib"), ==, 32);
  const char *node = json_object_get_string_member(v0, "host-nodes");

  GPid pid = launch(f, cmd);
  g_autoptr(JsonObject) rec = record(f);
  g_assert_cmpint(record_mib(rec, node), ==, 64 + 32);
  g_autofree char *want = bound_as(v0);
  assert_bound(pid, 128, want);
  stop(f, pid);
}

/* Reserves COUNT more 2 MiB pages on the first node for the test (root
 * only), under a lock so that tests in parallel do not undo each other.
 * FALSE, with the test skipped, when that cannot be done. */
static gboolean
reserve_hugepages(Fixture *f, gint64 count)
{
  if (geteuid() != 0) {
    g_test_skip("reserving hugepages needs root (the planner tests cover "
                "hugepages on recorded hosts)");
    return FALSE;
  }
  f->nr_path = g_strdup("/sys/devices/system/node/node0/hugepages/"
                        "hugepages-2048kB/nr_hugepages");
  f->lock_fd =
      open("/tmp/qp-hugepages.lock", O_CREAT | O_RDWR | O_CLOEXEC, 0600);
  g_assert_cmpint(f->lock_fd, >=, 0);
  g_assert_cmpint(flock(f->lock_fd, LOCK_EX), ==, 0);
  gint64 before = qp_test_read_number(f->nr_path);
  if (before < 0) {
    g_test_skip("this host has no 2 MiB hugepages on node 0");
    return FALSE;
  }
  f->nr_before = before;
  g_snprintf(restore_text, sizeof(restore_text), "%" G_GINT64_FORMAT "\n",
             before);
  restore_fd = open(f->nr_path, O_WRONLY | O_CLOEXEC);
  signal(SIGABRT, restore_on_abort);
  signal(SIGTERM, restore_on_abort);
  qp_test_write_number(f->nr_path, before + count);
  g_autofree char *free_path =
      g_strdup("/sys/devices/system/node/node0/hugepages/hugepages-2048kB/"
               "free_hugepages");
  if (qp_test_read_number(free_path) < count) {
    g_test_skip("the kernel did not give the test 2 MiB hugepages");
    return FALSE;
  }
  return TRUE;
}

/* One unused 2 MiB hugetlb backend beside ordinary RAM. The RAM stays
 * ordinary memory; the backend's page (reserved by the kernel when QEMU
 * maps it) is claimed on the same node. */
static void
test_hugetlb_backend_beside_ram(Fixture *f, gconstpointer data)
{
  const char *extra[] = {
      "-m",      "64",
      "-smp",    "1",
      "-object", "memory-backend-memfd,id=x,hugetlb=on,hugetlbsize=2M,size=2M",
      NULL};
  g_autoptr(GPtrArray) cmd = command(f, NULL, extra);

  /* Without hugepages on the host: QEMU cannot map it ("unable to map
   * backing store for guest RAM"); qemu-pin says so in one line before
   * QEMU starts, for lack of room. */
  const char *nr0 = "/sys/devices/system/node/node0/hugepages/"
                    "hugepages-2048kB/free_hugepages";
  if (qp_test_read_number(nr0) == 0) {
    QpTestRun r;
    qp_test_run((char **)cmd->pdata, NULL, &r);
    g_test_message("without hugepages: %s", r.err);
    g_assert_cmpint(r.status, ==, 1);
    g_assert_nonnull(strstr(r.err, "does not fit"));
    g_assert_nonnull(strstr(r.err, "2 MiB of 2048 KiB hugepages (1 page)"));
    g_auto(GStrv) lines = g_strsplit(r.err, "\n", -1);
    g_assert_cmpuint(g_strv_length(lines), ==, 2); /* one line */
    g_assert_cmpuint(qp_test_count_records(f->state), ==, 0);
    qp_test_run_clear(&r);
  }

  if (!reserve_hugepages(f, 2))
    return;
  g_autoptr(JsonObject) plan = qp_test_plan((char **)cmd->pdata + 1);
  JsonObject *x = plan_entry(plan, "x");
  g_assert_nonnull(x);
  g_assert_cmpstr(json_object_get_string_member(x, "kind"), ==, "unused");
  g_assert_cmpint(json_object_get_int_member(x, "page-kib"), ==, 2048);
  GPid pid = launch(f, cmd);
  g_autoptr(JsonObject) rec = record(f);
  g_assert_cmpint(record_mib(rec, "0"), ==, 64);
  g_assert_cmpint(record_pages(rec, 0, 2048), ==, 1);
  g_autofree char *want = bound_as(x);
  assert_hugetlb_bound(pid, want);
  stop(f, pid);
}

/* -overcommit mem-lock=on: QEMU's mlockall() makes every mapping resident
 * as it is made, a backend no device uses as well as the RAM. That backend
 * is claimed like a preallocated one; the last -overcommit says. */
static void
test_mem_lock_unused_backend(Fixture *f, gconstpointer data)
{
  const char *extra[] = {
      "-m",          "64",         "-smp",
      "1",           "-object",    "memory-backend-ram,id=x,size=48M",
      "-overcommit", "cpu-pm=off", "-overcommit",
      "mem-lock=on", NULL};
  g_autoptr(GPtrArray) cmd = command(f, NULL, extra);
  g_autoptr(JsonObject) plan = qp_test_plan((char **)cmd->pdata + 1);
  JsonObject *x = plan_entry(plan, "x");
  g_assert_nonnull(x);
  g_assert_cmpstr(json_object_get_string_member(x, "kind"), ==, "unused");
  g_assert_cmpint(json_object_get_int_member(x, "size-mib"), ==, 48);
  GPid pid = launch(f, cmd);
  /* QEMU made it resident: all 48 MiB, where the plan binds them. */
  g_auto(GStrv) lines = qp_test_numa_maps_of_mappings(pid, 48 * 1024);
  g_assert_cmpuint(g_strv_length(lines), ==, 1);
  g_test_message("48 MiB mapping: %s", lines[0]);
  gboolean on_policy = FALSE;
  g_assert_cmpuint(qp_test_numa_maps_resident_kib(lines[0], &on_policy), ==,
                   48 * 1024);
  g_assert_true(on_policy);
  g_autoptr(JsonObject) rec = record(f);
  g_assert_cmpint(record_mib(rec, "0"), ==, 64 + 48);
  stop(f, pid);

  /* mem-lock=on then cpu-pm=off: the last -overcommit has it off, and the
   * backend takes nothing at start. */
  const char *off[] = {
      "-m",          "64",          "-smp",
      "1",           "-object",     "memory-backend-ram,id=x,size=48M",
      "-overcommit", "mem-lock=on", "-overcommit",
      "cpu-pm=off",  NULL};
  g_autoptr(GPtrArray) cmd_off = command(f, NULL, off);
  g_autoptr(JsonObject) plan_off = qp_test_plan((char **)cmd_off->pdata + 1);
  g_assert_cmpint(
      json_object_get_int_member(plan_entry(plan_off, "x"), "size-mib"), ==, 0);
}

/* Guest node 0 on ordinary memory, guest node 1 on 2 MiB pages: each
 * claimed in its own kind, and nothing of the other. */
static void
test_hugetlb_guest_node(Fixture *f, gconstpointer data)
{
  if (!reserve_hugepages(f, 16))
    return;
  const char *extra[] = {
      "-m",
      "96",
      "-smp",
      "2",
      "-object",
      "memory-backend-ram,id=m0,size=64M",
      "-object",
      "memory-backend-memfd,id=m1,hugetlb=on,hugetlbsize=2M,size=32M",
      "-numa",
      "node,nodeid=0,cpus=0,memdev=m0",
      "-numa",
      "node,nodeid=1,cpus=1,memdev=m1",
      NULL};
  const char *opts[] = {"--mode=numa", NULL};
  g_autoptr(GPtrArray) cmd = command(f, opts, extra);
  g_autoptr(JsonObject) plan = qp_test_plan((char **)cmd->pdata + 1);
  JsonObject *m0 = plan_entry(plan, "m0"), *m1 = plan_entry(plan, "m1");
  gint64 n0 = g_ascii_strtoll(json_object_get_string_member(m0, "host-nodes"),
                              NULL, 10);
  gint64 n1 = g_ascii_strtoll(json_object_get_string_member(m1, "host-nodes"),
                              NULL, 10);
  GPid pid = launch(f, cmd);
  g_autoptr(JsonObject) rec = record(f);
  g_autofree char *k0 = g_strdup_printf("%" G_GINT64_FORMAT, n0);
  g_autofree char *k1 = g_strdup_printf("%" G_GINT64_FORMAT, n1);
  g_assert_cmpint(record_mib(rec, k0), ==, 64);
  g_assert_cmpint(record_pages(rec, n1, 2048), ==, 16);
  if (n0 != n1) {
    g_assert_cmpint(record_mib(rec, k1), ==, 0);
    g_assert_cmpint(record_pages(rec, n0, 2048), ==, 0);
  }
  g_autofree char *w0 = bound_as(m0), *w1 = bound_as(m1);
  assert_bound(pid, 64, w0);
  assert_hugetlb_bound(pid, w1);
  stop(f, pid);
}

/* What QEMU 7.2 refuses itself reaches QEMU: the same exit status and the
 * same message as without qemu-pin, and nothing left behind. */
static void
test_qemu_refuses_itself(Fixture *f, gconstpointer data)
{
  static const char *const lines[][9] = {
      /* no slots */
      {"-m", "64", "-object", "memory-backend-ram,id=m1,size=32M", "-device",
       "pc-dimm,memdev=m1", NULL},
      /* no such backend */
      {"-m", "64,slots=2,maxmem=1G", "-device", "pc-dimm,memdev=nosuch", NULL},
      /* a node the guest does not have */
      {"-m", "64,slots=2,maxmem=1G", "-object",
       "memory-backend-ram,id=m1,size=32M", "-device",
       "pc-dimm,memdev=m1,node=1", NULL},
      /* a backend used twice */
      {"-m", "64,slots=2,maxmem=1G", "-object",
       "memory-backend-ram,id=m0,size=64M", "-machine", "memory-backend=m0",
       "-device", "pc-dimm,memdev=m0"},
  };
  for (guint i = 0; i < G_N_ELEMENTS(lines); i++) {
    g_autoptr(GPtrArray) cmd = command(f, NULL, lines[i]);
    guint dash = 0;
    while (strcmp(cmd->pdata[dash], "--") != 0)
      dash++;
    QpTestRun direct, pinned;
    qp_test_run((char **)cmd->pdata + dash + 1, NULL, &direct);
    qp_test_run((char **)cmd->pdata, NULL, &pinned);
    g_test_message("QEMU: %s", direct.err);
    g_assert_cmpint(direct.status, ==, 1);
    g_assert_cmpint(pinned.status, ==, direct.status);
    g_assert_cmpstr(pinned.err, ==, direct.err);
    g_assert_true(qp_test_wait_no_process(f->marker, 20000));
    g_assert_cmpuint(qp_test_count_records(f->state), ==, 0);
    qp_test_run_clear(&direct);
    qp_test_run_clear(&pinned);
  }

  /* A requested-size above the backend: QEMU starts, the guest can have
   * the backend at most, and that is claimed. */
  const char *accepted[] = {
      "-m",      "64,maxmem=1G",
      "-object", "memory-backend-ram,id=v0,size=32M",
      "-device", "virtio-mem-pci,id=vm0,memdev=v0,requested-size=96M",
      NULL};
  g_autoptr(GPtrArray) cmd = command(f, NULL, accepted);
  GPid pid = launch(f, cmd);
  g_autoptr(JsonObject) rec = record(f);
  g_assert_cmpint(record_mib(rec, "0"), ==, 64 + 32);
  stop(f, pid);
}

/* A file backend with readonly=on (Kata Containers' guest image on an
 * nvdimm): the file's own page cache, one copy for every VM that maps it,
 * which no guest can dirty. The VM runs with the nvdimm; only its RAM is
 * claimed, and the image's backend reaches QEMU as the caller wrote it
 * (outside check, stop 55: each VM claimed the image's 256 MiB again and
 * had it bound). */
static void
test_readonly_file_backend(Fixture *f, gconstpointer data)
{
  g_autofree char *image = g_build_filename(f->dir, "image.img", NULL);
  g_autofree char *zeros = g_malloc0(16 << 20);
  g_assert_true(g_file_set_contents(image, zeros, 16 << 20, NULL));
  g_autofree char *backend = g_strdup_printf(
      "memory-backend-file,id=img,mem-path=%s,size=16M,readonly=on", image);
  const char *extra[] = {"-smp",     "1",
                         "-machine", "nvdimm=on",
                         "-m",       "64,slots=2,maxmem=1G",
                         "-object",  backend,
                         "-device",  "nvdimm,id=nv0,memdev=img,unarmed=on",
                         NULL};
  const char *opts[] = {"--mode=balanced", NULL};
  g_autoptr(GPtrArray) cmd = command(f, opts, extra);
  g_autoptr(JsonObject) plan = qp_test_plan((char **)cmd->pdata + 1);
  g_assert_null(plan_entry(plan, "img"));

  GPid pid = launch(f, cmd);
  g_autoptr(JsonObject) rec = record(f);
  g_assert_cmpint(record_mib(rec, "0"), ==, 64);
  g_autofree char *path = g_strdup_printf("/proc/%d/cmdline", pid);
  g_autofree char *argv = NULL;
  gsize len = 0;
  g_assert_true(g_file_get_contents(path, &argv, &len, NULL));
  gboolean seen = FALSE;
  for (const char *a = argv; a < argv + len; a += strlen(a) + 1)
    seen = seen || strcmp(a, backend) == 0;
  g_assert_true(seen);
  g_autoptr(JsonNode) devs =
      qp_test_qmp_command(f->qmp, "query-memory-devices");
  g_assert_nonnull(devs);
  JsonArray *a = json_node_get_array(devs);
  g_assert_cmpuint(json_array_get_length(a), ==, 1);
  g_assert_cmpstr(json_object_get_string_member(
                      json_array_get_object_element(a, 0), "type"),
                  ==, "nvdimm");
  stop(f, pid);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
#define ADD(path, fn) g_test_add(path, Fixture, NULL, setup, fn, teardown)
  ADD("/launch/memory/pc-dimm-claimed-and-bound", test_pc_dimm);
  ADD("/launch/memory/virtio-mem-requested-size-claimed", test_virtio_mem);
  ADD("/launch/memory/hugetlb-backend-beside-ordinary-ram",
      test_hugetlb_backend_beside_ram);
  ADD("/launch/memory/hugetlb-guest-node-beside-ordinary-node",
      test_hugetlb_guest_node);
  ADD("/launch/memory/mem-lock-unused-backend-claimed",
      test_mem_lock_unused_backend);
  ADD("/launch/memory/readonly-file-backend-not-claimed",
      test_readonly_file_backend);
  ADD("/launch/memory/what-qemu-refuses-reaches-qemu",
      test_qemu_refuses_itself);
  return g_test_run();
}
