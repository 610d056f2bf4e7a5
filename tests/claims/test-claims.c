/* Acceptance tests of the ledger (issue 3) with the real qemu-pin and real
 * QEMU (TCG): 32 concurrent launches of which exactly as many start as fit,
 * with `qemu-pin status --json` sampled while they start; faults (keeper,
 * QEMU or qemu-pin killed, a truncated record, a symlinked state directory,
 * -daemonize); the status views of running VMs. Every check reads /proc,
 * the state directory or qemu-pin's own JSON. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/common/qp-test.h"

/* ---- Fixture ------------------------------------------------------------- */

#define GUEST_MIB 64 /* the guests of the fault and status tests */

/* A failed assertion aborts before teardown: the abort handler then kills
 * what the test started (QEMUs, keepers, a stopped qemu-pin), so that they
 * do not outlive it on a small shared machine. Only system calls here. */
static char abort_marker[64];

static void
kill_marked(const char *marker)
{
  size_t mlen = strlen(marker);
  int dfd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (mlen == 0 || dfd < 0)
    return;
  char buf[8192];
  long n;
  while ((n = syscall(SYS_getdents64, dfd, buf, sizeof buf)) > 0) {
    for (long off = 0; off < n;) {
      struct dirent64 *e = (struct dirent64 *)(buf + off);
      off += e->d_reclen;
      int pid = 0;
      const char *c = e->d_name;
      for (; *c >= '0' && *c <= '9'; c++)
        pid = pid * 10 + (*c - '0');
      if (*c != '\0' || pid <= 0 || pid == getpid())
        continue;
      char path[64] = "/proc/";
      size_t len = 6;
      for (const char *d = e->d_name; *d && len < 40; d++)
        path[len++] = *d;
      memcpy(path + len, "/cmdline", sizeof "/cmdline");
      int fd = open(path, O_RDONLY | O_CLOEXEC);
      if (fd < 0)
        continue;
      char cmd[4096];
      ssize_t r = read(fd, cmd, sizeof cmd);
      close(fd);
      for (ssize_t i = 0; i < r; i++)
        if (cmd[i] == '\0')
          cmd[i] = ' ';
      if (r > 0 && memmem(cmd, (size_t)r, marker, mlen) != NULL)
        kill(pid, SIGKILL);
    }
  }
  close(dfd);
}

static void
on_abort(int sig)
{
  kill_marked(abort_marker);
  signal(sig, SIG_DFL);
  raise(sig);
}

typedef struct {
  char *dir;   /* per-test directory; its name marks our processes */
  char *state; /* ledger directory */
  char *halt_fw;
  char *qmp; /* the caller's own monitor socket */
  char *marker;
} Fixture;

static void
setup(Fixture *f, gconstpointer data)
{
  f->dir = qp_test_tmpdir();
  f->state = g_build_filename(f->dir, "state", NULL);
  f->halt_fw = qp_test_firmware(f->dir, QP_TEST_FW_HALT);
  f->qmp = g_build_filename(f->dir, "qmp.sock", NULL);
  f->marker = g_path_get_basename(f->dir);
  g_assert_cmpuint(strlen(f->marker), <, sizeof abort_marker);
  g_strlcpy(abort_marker, f->marker, sizeof abort_marker);
}

static void
teardown(Fixture *f, gconstpointer data)
{
  /* Stopped processes (keepers, qemu-pin before exec) die of SIGKILL too. */
  g_autoptr(GArray) left = qp_test_pids_with(f->marker);
  for (guint i = 0; i < left->len; i++)
    kill(g_array_index(left, int, i), SIGKILL);
  qp_test_wait_no_process(f->marker, 10000);
  abort_marker[0] = '\0';
  qp_test_rmtree(f->dir);
  g_free(f->dir);
  g_free(f->state);
  g_free(f->halt_fw);
  g_free(f->qmp);
  g_free(f->marker);
}

/* argv: qemu-pin --state-dir=STATE OPTS... -- QEMU ... -name NAME,... -m MIB
 * EXTRA... */
static GPtrArray *
command(Fixture *f, const char *state, const char *name, guint mib,
        const char *const *opts, const char *const *extra)
{
  GPtrArray *a = g_ptr_array_new_with_free_func(g_free);
  g_ptr_array_add(a, g_strdup(qp_test_binary()));
  g_ptr_array_add(a, g_strdup_printf("--state-dir=%s", state));
  for (guint i = 0; opts && opts[i]; i++)
    g_ptr_array_add(a, g_strdup(opts[i]));
  g_ptr_array_add(a, g_strdup("--"));
  const char *common[] = {"-accel",      "tcg",      "-machine", "q35",
                          "-nodefaults", "-display", "none",     NULL};
  g_ptr_array_add(a, g_strdup(qp_test_qemu()));
  for (guint i = 0; common[i]; i++)
    g_ptr_array_add(a, g_strdup(common[i]));
  g_ptr_array_add(a, g_strdup("-m"));
  g_ptr_array_add(a, g_strdup_printf("%u", mib));
  g_ptr_array_add(a, g_strdup("-bios"));
  g_ptr_array_add(a, g_strdup(f->halt_fw));
  g_ptr_array_add(a, g_strdup("-name"));
  g_ptr_array_add(a, g_strdup_printf("%s,debug-threads=on", name));
  for (guint i = 0; extra && extra[i]; i++)
    g_ptr_array_add(a, g_strdup(extra[i]));
  g_ptr_array_add(a, NULL);
  return a;
}

/* A VM of the fixture: balanced (or OPT), its own -qmp socket. */
static GPtrArray *
vm_command(Fixture *f, const char *opt)
{
  g_autofree char *qmparg =
      g_strdup_printf("unix:%s,server=on,wait=off", f->qmp);
  const char *opts[] = {opt ? opt : "--mode=balanced", NULL};
  const char *extra[] = {"-qmp", qmparg, NULL};
  return command(f, f->state, f->marker, GUEST_MIB, opts, extra);
}

/* ---- Reading the world ------------------------------------------------------
 */

static JsonObject *
parse_object(const char *text)
{
  g_autoptr(JsonParser) p = json_parser_new();
  GError *error = NULL;
  json_parser_load_from_data(p, text, -1, &error);
  g_assert_no_error(error);
  JsonNode *root = json_parser_get_root(p);
  g_assert_true(JSON_NODE_HOLDS_OBJECT(root));
  return json_object_ref(json_node_get_object(root));
}

/* `qemu-pin status --json --state-dir=STATE [OPT]`, which must succeed. */
static JsonObject *
status_json(const char *state, const char *opt)
{
  g_autofree char *sd = g_strdup_printf("--state-dir=%s", state);
  char *argv[] = {
      (char *)qp_test_binary(), "status", "--json", sd, (char *)opt, NULL};
  QpTestRun r;
  qp_test_run(argv, NULL, &r);
  if (r.status != 0)
    g_test_message("qemu-pin status: %s", r.err);
  g_assert_cmpint(r.status, ==, 0);
  JsonObject *o = parse_object(r.out);
  qp_test_run_clear(&r);
  return o;
}

static JsonObject *
node0(JsonObject *status)
{
  JsonArray *nodes = json_object_get_array_member(status, "nodes");
  g_assert_cmpuint(json_array_get_length(nodes), >=, 1);
  JsonObject *n = json_array_get_object_element(nodes, 0);
  g_assert_cmpint(json_object_get_int_member(n, "id"), ==, 0);
  return n;
}

static gint64
node0_mem(JsonObject *status, const char *what)
{
  JsonObject *m = json_object_get_object_member(node0(status), "memory-mib");
  return json_object_get_int_member(m, what);
}

/* Node 0's memory that claims come from: its total less its hugepage
 * pools (an admin's, or a test's left over), as status --json counts it. */
static gint64
node0_plain(JsonObject *status)
{
  return node0_mem(status, "total") - node0_mem(status, "hugepage-pools");
}

/* What node 0 can take by the view's own figures: total less pools,
 * reserve and claims, and on a live host at most what the kernel can give
 * less the claims not yet resident (docs/ledger.md). */
static gint64
node0_room(JsonObject *status)
{
  gint64 room = MAX(0, node0_plain(status) - node0_mem(status, "reserve") -
                           node0_mem(status, "claimed"));
  JsonObject *m = json_object_get_object_member(node0(status), "memory-mib");
  if (json_object_has_member(m, "kernel-can-give"))
    room = MIN(room, MAX(0, node0_mem(status, "kernel-can-give") -
                                node0_mem(status, "outstanding")));
  return room;
}

static guint
n_vms(JsonObject *status)
{
  return json_array_get_length(json_object_get_array_member(status, "vms"));
}

static guint
n_warnings(JsonObject *status)
{
  return json_array_get_length(
      json_object_get_array_member(status, "warnings"));
}

/* Node 0 of `qemu-pin topology --json`, qemu-pin's model of this host;
 * *TOPOLOGY holds it (the caller frees it). */
static JsonObject *
host_node0(JsonObject **topology)
{
  char *argv[] = {(char *)qp_test_binary(), "topology", "--json", NULL};
  QpTestRun r;
  qp_test_run(argv, NULL, &r);
  g_assert_cmpint(r.status, ==, 0);
  *topology = parse_object(r.out);
  qp_test_run_clear(&r);
  JsonObject *n = json_array_get_object_element(
      json_object_get_array_member(*topology, "nodes"), 0);
  g_assert_cmpint(json_object_get_int_member(n, "id"), ==, 0);
  return n;
}

/* Node 0's memory as qemu-pin sees it: its total (TOTAL_MIB, when not
 * NULL) and the part that is not in hugepage pools (returned), which is
 * what claims of ordinary memory come from. */
static gint64
host_plain_mib(gint64 *total_mib)
{
  g_autoptr(JsonObject) t = NULL;
  JsonObject *n = host_node0(&t);
  gint64 total = json_object_get_int_member(n, "total_mib"), pools = 0;
  JsonArray *huge = json_object_get_array_member(n, "hugepages");
  for (guint i = 0; huge != NULL && i < json_array_get_length(huge); i++) {
    JsonObject *h = json_array_get_object_element(huge, i);
    pools += json_object_get_int_member(h, "total") *
             json_object_get_int_member(h, "page_kib") / 1024;
  }
  if (total_mib != NULL)
    *total_mib = total;
  return total - pools;
}

/* The cache domains (shared L3 or L2) of node 0 as qemu-pin's model of
 * this host has them: each as its level and CPU list ("L3 0-1"). */
static GPtrArray *
host_cache_domains_node0(void)
{
  g_autoptr(JsonObject) t = NULL;
  JsonObject *n = host_node0(&t);
  JsonArray *domains = json_object_get_array_member(n, "cache_domains");
  g_assert_nonnull(domains);
  GPtrArray *out = g_ptr_array_new_with_free_func(g_free);
  for (guint i = 0; i < json_array_get_length(domains); i++) {
    JsonObject *d = json_array_get_object_element(domains, i);
    g_ptr_array_add(
        out, g_strdup_printf("%s %s", json_object_get_string_member(d, "level"),
                             json_object_get_string_member(d, "cpus")));
  }
  return out;
}

/* The file name (without .json) of the only record in STATE. */
static char *
only_record_id(const char *state)
{
  g_assert_cmpuint(qp_test_count_records(state), ==, 1);
  g_autoptr(GDir) d = g_dir_open(state, 0, NULL);
  g_assert_nonnull(d);
  const char *name;
  while ((name = g_dir_read_name(d)) != NULL)
    if (name[0] != '.' && g_str_has_suffix(name, ".json"))
      return g_strndup(name, strlen(name) - strlen(".json"));
  g_assert_not_reached();
}

static char *
record_path(const char *state, const char *id, const char *suffix)
{
  g_autofree char *name = g_strconcat(id, suffix, NULL);
  return g_build_filename(state, name, NULL);
}

static JsonObject *
read_record(const char *state, const char *id)
{
  g_autofree char *path = record_path(state, id, ".json");
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
  return parse_object(text);
}

/* /proc/PID/stat: the state letter (0 when gone) and field 22. */
static char
proc_state(int pid, guint64 *start)
{
  g_autofree char *path = g_strdup_printf("/proc/%d/stat", pid);
  g_autofree char *text = NULL;
  if (start)
    *start = 0;
  if (!g_file_get_contents(path, &text, NULL, NULL))
    return 0;
  const char *p = strrchr(text, ')');
  g_assert_nonnull(p);
  g_auto(GStrv) f = g_strsplit(p + 2, " ", -1);
  g_assert_cmpuint(g_strv_length(f), >=, 20);
  if (start)
    *start = g_ascii_strtoull(f[19], NULL, 10); /* field 22 = 3 + 19 */
  return f[0][0];
}

/* Stops KEEPER where it holds no lock on the ledger in STATE: a keeper
 * writes its record now and then (its QEMU's resident memory), and one
 * stopped inside that write would keep the ledger locked for good. */
static void
stop_keeper_unlocked(int keeper, const char *state)
{
  g_autofree char *lock = g_build_filename(state, "lock", NULL);
  for (int attempt = 0; attempt < 200; attempt++) {
    kill(keeper, SIGSTOP);
    g_assert_true(qp_test_wait_state(keeper, 'T', 10000));
    int fd = open(lock, O_RDWR | O_CLOEXEC);
    g_assert_cmpint(fd, >=, 0);
    gboolean unlocked = flock(fd, LOCK_EX | LOCK_NB) == 0;
    close(fd); /* and the lock with it */
    if (unlocked)
      return;
    kill(keeper, SIGCONT);
    g_usleep(20000);
  }
  g_assert_not_reached();
}

static char *
proc_comm(int pid)
{
  g_autofree char *path = g_strdup_printf("/proc/%d/comm", pid);
  char *text = NULL;
  if (!g_file_get_contents(path, &text, NULL, NULL))
    return g_strdup("");
  return g_strchomp(text);
}

/* Processes with MARKER in their command line whose comm is (IS_KEEPER) or
 * is not "qemu-pin-keeper". */
static GArray *
pids_of_kind(const char *marker, gboolean is_keeper)
{
  g_autoptr(GArray) all = qp_test_pids_with(marker);
  GArray *out = g_array_new(FALSE, FALSE, sizeof(int));
  for (guint i = 0; i < all->len; i++) {
    int pid = g_array_index(all, int, i);
    g_autofree char *comm = proc_comm(pid);
    if ((strcmp(comm, "qemu-pin-keeper") == 0) == is_keeper)
      g_array_append_val(out, pid);
  }
  return out;
}

/* The one keeper of MARKER. A keeper names itself (comm) first thing after
 * the fork, so it may still be "qemu-pin" for a moment. */
static int
the_keeper(const char *marker)
{
  gint64 deadline = g_get_monotonic_time() + 10 * G_USEC_PER_SEC;
  for (;;) {
    g_autoptr(GArray) k = pids_of_kind(marker, TRUE);
    if (k->len == 1 || g_get_monotonic_time() > deadline) {
      g_assert_cmpuint(k->len, ==, 1);
      return g_array_index(k, int, 0);
    }
    g_usleep(5000);
  }
}

static gboolean
wait_gone(int pid, guint timeout_ms)
{
  gint64 deadline = g_get_monotonic_time() + (gint64)timeout_ms * 1000;
  do {
    char s = proc_state(pid, NULL);
    if (s == 0 || s == 'Z' || s == 'X')
      return TRUE;
    g_usleep(5000);
  } while (g_get_monotonic_time() < deadline);
  return FALSE;
}

static gboolean
wait_records(const char *state, guint n, guint timeout_ms)
{
  gint64 deadline = g_get_monotonic_time() + (gint64)timeout_ms * 1000;
  do {
    if (qp_test_count_records(state) == n)
      return TRUE;
    g_usleep(10000);
  } while (g_get_monotonic_time() < deadline);
  return FALSE;
}

static char *
file_text(const char *dir, const char *name)
{
  g_autofree char *path = g_build_filename(dir, name, NULL);
  char *text = NULL;
  g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
  return text;
}

/* Starts the fixture's VM and waits until the guest runs; returns QEMU's
 * PID (the spawned process: qemu-pin execs QEMU in place). */
static GPid
start_vm(Fixture *f, const char *opt)
{
  g_autoptr(GPtrArray) cmd = vm_command(f, opt);
  GPid pid = qp_test_spawn((char **)cmd->pdata, NULL, f->dir);
  if (!qp_test_wait_status(f->qmp, "running", 60000)) {
    g_autofree char *err = file_text(f->dir, "stderr");
    g_test_message("launch stderr: %s", err);
    g_assert_not_reached();
  }
  return pid;
}

/* No process of the launch is left, and status shows no VM and nothing
 * claimed. */
static void
assert_nothing_left(Fixture *f)
{
  g_assert_true(qp_test_wait_no_process(f->marker, 10000));
  g_autoptr(JsonObject) st = status_json(f->state, NULL);
  g_assert_cmpuint(n_vms(st), ==, 0);
  g_assert_cmpint(node0_mem(st, "claimed"), ==, 0);
}

/* PID (QEMU, or qemu-pin before its exec) killed: its KEEPER removes the
 * record and leaves, and nothing is left. */
static void
kill_and_released(Fixture *f, GPid pid, int keeper)
{
  kill(pid, SIGKILL);
  g_assert_cmpint(qp_test_wait(pid, 10000), ==, 128 + SIGKILL);
  g_assert_true(wait_records(f->state, 0, 20000));
  g_assert_true(wait_gone(keeper, 20000));
  assert_nothing_left(f);
}

/* The record of a just-started VM names QEMU and its keeper. */
static char *
check_record_names(Fixture *f, int qemu_pid, int keeper_pid)
{
  char *id = only_record_id(f->state);
  g_autoptr(JsonObject) rec = read_record(f->state, id);
  guint64 start = 0;
  g_assert_cmpint(proc_state(qemu_pid, &start), !=, 0);
  g_assert_cmpstr(json_object_get_string_member(rec, "id"), ==, id);
  g_assert_cmpint(json_object_get_int_member(rec, "qemu-pid"), ==, qemu_pid);
  g_assert_cmpint(json_object_get_int_member(rec, "qemu-start"), ==,
                  (gint64)start);
  g_assert_cmpint(json_object_get_int_member(rec, "keeper-pid"), ==,
                  keeper_pid);
  return id;
}

/* ---- 1. Concurrency ------------------------------------------------------ */

/* The claims are bookkeeping: a halted TCG guest touches little of its
 * RAM, so big guests cost the machine nothing. Big they are because this
 * machine's node 0 grows while the tests run (memory is hot-added in 128
 * MiB steps): with a 512 MiB margin above the last guest that fits, exactly
 * as many fit even when the node grows by 384 MiB or shrinks by 512 during
 * the test. How many fit comes from the size of node 0: up to MAX_FIT, at
 * least 2 (else the test is skipped). */
#define N_LAUNCHES 32
#define MAX_FIT 5
#define BIG_MIB 1024

typedef struct {
  char *state;
  char *reserve_opt;
  gint64 reserve; /* --reserve-mib */
  gint stop;
  gint samples; /* status samples taken (atomic) */
  GMutex lock;  /* the rest */
  guint scans;
  guint max_records;
  guint max_dedicated; /* CPUs */
  gint64 max_scanned_mib;
  GHashTable *seen; /* claimed MiB -> number of status samples */
  GPtrArray *violations;
} Sampler;

static void
violation(Sampler *s, char *text)
{
  g_mutex_lock(&s->lock);
  g_ptr_array_add(s->violations, text);
  g_mutex_unlock(&s->lock);
}

/* A CPU list of this small host ("", "1", "0-1") as a bit mask. */
static guint64
cpu_mask(const char *list)
{
  guint64 mask = 0;
  g_auto(GStrv) parts = g_strsplit(list, ",", -1);
  for (guint i = 0; parts[i] && parts[i][0]; i++) {
    char *end = NULL;
    guint64 a = g_ascii_strtoull(parts[i], &end, 10);
    guint64 b = *end == '-' ? g_ascii_strtoull(end + 1, NULL, 10) : a;
    g_assert_cmpuint(b, <, 64);
    for (guint64 c = a; c <= b; c++)
      mask |= G_GUINT64_CONSTANT(1) << c;
  }
  return mask;
}

/* Sum of memory-mib over the record files, read without the lock: records
 * are renamed into place, so a reader sees whole ones. Returns -1 for a
 * partial record, -2 when two records dedicate the same CPU. */
static gint64
scan_records(const char *state, guint *n_records, guint64 *dedicated)
{
  gint64 sum = 0;
  guint n = 0;
  *dedicated = 0;
  g_autoptr(GDir) d = g_dir_open(state, 0, NULL);
  const char *name;
  while (d != NULL && (name = g_dir_read_name(d)) != NULL) {
    if (name[0] == '.' || !g_str_has_suffix(name, ".json"))
      continue;
    g_autofree char *path = g_build_filename(state, name, NULL);
    g_autofree char *text = NULL;
    if (!g_file_get_contents(path, &text, NULL, NULL))
      continue; /* pruned or released meanwhile */
    g_autoptr(JsonParser) p = json_parser_new();
    if (!json_parser_load_from_data(p, text, -1, NULL))
      return -1; /* a partial record: never expected */
    JsonObject *rec = json_node_get_object(json_parser_get_root(p));
    JsonObject *mem = json_object_get_object_member(rec, "memory-mib");
    sum += json_object_get_int_member_with_default(mem, "0", 0);
    guint64 ded =
        cpu_mask(json_object_get_string_member(rec, "dedicated-cpus"));
    if (*dedicated & ded)
      return -2;
    *dedicated |= ded;
    n++;
  }
  *n_records = n;
  return sum;
}

/* Node 0's MemTotal from the kernel, in MiB as qemu-pin counts it. */
static gint64
node0_total_mib(void)
{
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents("/sys/devices/system/node/node0/meminfo",
                                    &text, NULL, NULL));
  const char *p = strstr(text, "MemTotal:");
  g_assert_nonnull(p);
  return g_ascii_strtoll(p + strlen("MemTotal:"), NULL, 10) / 1024;
}

/* Reads the record files directly, as often as it can, and compares them
 * with the node's capacity at that moment. */
static gpointer
scan_thread(gpointer data)
{
  Sampler *s = data;
  while (!g_atomic_int_get(&s->stop)) {
    guint nrec = 0;
    guint64 ded = 0;
    gint64 before = node0_total_mib();
    gint64 scanned = scan_records(s->state, &nrec, &ded);
    gint64 capacity = MIN(before, node0_total_mib()) - s->reserve;
    if (scanned < 0 || scanned > capacity)
      violation(s, g_strdup_printf("record files hold %" G_GINT64_FORMAT
                                   " MiB, capacity %" G_GINT64_FORMAT,
                                   scanned, capacity));
    g_mutex_lock(&s->lock);
    s->scans++;
    s->max_scanned_mib = MAX(s->max_scanned_mib, scanned);
    s->max_records = MAX(s->max_records, nrec);
    s->max_dedicated = MAX(s->max_dedicated, (guint)__builtin_popcountll(ded));
    g_mutex_unlock(&s->lock);
    g_usleep(1000);
  }
  return NULL;
}

/* Runs `qemu-pin status --json` in a loop: claimed never exceeds total -
 * reserve, and equals what the listed VMs hold. */
static gpointer
status_thread(gpointer data)
{
  Sampler *s = data;
  g_autofree char *sd = g_strdup_printf("--state-dir=%s", s->state);
  while (!g_atomic_int_get(&s->stop)) {
    char *argv[] = {(char *)qp_test_binary(), "status", "--json", sd,
                    s->reserve_opt,           NULL};
    g_autofree char *out = NULL, *err = NULL;
    int ws = 0;
    if (!g_spawn_sync(NULL, argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &err,
                      &ws, NULL) ||
        !g_spawn_check_wait_status(ws, NULL)) {
      violation(s, g_strdup_printf("status failed: %s", err ? err : ""));
      continue;
    }
    g_autoptr(JsonParser) p = json_parser_new();
    if (!json_parser_load_from_data(p, out, -1, NULL)) {
      violation(s, g_strdup_printf("bad JSON: %s", out));
      continue;
    }
    JsonObject *st = json_node_get_object(json_parser_get_root(p));
    JsonObject *n = json_array_get_object_element(
        json_object_get_array_member(st, "nodes"), 0);
    JsonObject *m = json_object_get_object_member(n, "memory-mib");
    gint64 total = json_object_get_int_member(m, "total") -
                   json_object_get_int_member(m, "hugepage-pools");
    gint64 reserve = json_object_get_int_member(m, "reserve");
    gint64 claimed = json_object_get_int_member(m, "claimed");
    gint64 uncommitted = json_object_get_int_member(m, "uncommitted");
    JsonArray *vms = json_object_get_array_member(st, "vms");
    gint64 vm_sum = 0;
    guint64 vm_ded = 0;
    gboolean overlap = FALSE;
    for (guint i = 0; i < json_array_get_length(vms); i++) {
      JsonObject *vm = json_array_get_object_element(vms, i);
      JsonObject *mem = json_object_get_object_member(vm, "memory-mib");
      vm_sum += json_object_get_int_member_with_default(mem, "0", 0);
      guint64 ded =
          cpu_mask(json_object_get_string_member(vm, "dedicated-cpus"));
      overlap |= (vm_ded & ded) != 0;
      vm_ded |= ded;
    }
    if (overlap ||
        vm_ded != cpu_mask(json_object_get_string_member(n, "dedicated-cpus")))
      violation(
          s, g_strdup_printf("dedicated CPUs: node says %s, VMs %s",
                             json_object_get_string_member(n, "dedicated-cpus"),
                             overlap ? "overlap" : "differ"));
    /* Room is total less reserve less claims, and on a live host at most
     * what the kernel can give less the claims not yet resident. */
    gint64 room = total - reserve - claimed;
    if (json_object_has_member(m, "kernel-can-give"))
      room =
          MIN(room, MAX(0, json_object_get_int_member(m, "kernel-can-give") -
                               json_object_get_int_member(m, "outstanding")));
    if (claimed > total - reserve || reserve != s->reserve ||
        claimed != vm_sum || uncommitted != room)
      violation(s, g_strdup_printf(
                       "plain %" G_GINT64_FORMAT ", reserve %" G_GINT64_FORMAT
                       ", claimed %" G_GINT64_FORMAT
                       ", uncommitted %" G_GINT64_FORMAT
                       ", VMs hold %" G_GINT64_FORMAT,
                       total, reserve, claimed, uncommitted, vm_sum));
    g_mutex_lock(&s->lock);
    gpointer key = GINT_TO_POINTER((int)claimed);
    g_hash_table_insert(
        s->seen, key,
        GUINT_TO_POINTER(GPOINTER_TO_UINT(g_hash_table_lookup(s->seen, key)) +
                         1));
    g_mutex_unlock(&s->lock);
    g_atomic_int_inc(&s->samples);
  }
  return NULL;
}

typedef struct {
  GPid pid;
  char *dir; /* stdout, stderr */
  char *sock;
  char *name;      /* -name value, unique: "<marker>-vmNN" */
  char *tag;       /* "<name>,": matches this VM's processes only */
  int cpu;         /* --affinity */
  int exit_status; /* -1 while running or unknown */
  gboolean running;
} Launch;

static void
sampler_init(Sampler *s, const char *state, const char *reserve_opt,
             gint64 reserve)
{
  *s = (Sampler){.state = (char *)state,
                 .reserve_opt = (char *)reserve_opt,
                 .reserve = reserve,
                 .seen = g_hash_table_new(g_direct_hash, g_direct_equal),
                 .violations = g_ptr_array_new_with_free_func(g_free)};
  g_mutex_init(&s->lock);
}

static void
sampler_clear(Sampler *s)
{
  g_ptr_array_unref(s->violations);
  g_hash_table_unref(s->seen);
  g_mutex_clear(&s->lock);
}

/* Two threads sample `status --json`, a third reads the record files. */
static void
samplers_start(Sampler *s, GThread **threads)
{
  threads[0] = g_thread_new("status1", status_thread, s);
  threads[1] = g_thread_new("status2", status_thread, s);
  threads[2] = g_thread_new("scan", scan_thread, s);
}

/* Takes a few more samples of the settled ledger, then stops. */
static void
samplers_stop(Sampler *s, GThread **threads)
{
  gint settled = g_atomic_int_get(&s->samples) + 3;
  while (g_atomic_int_get(&s->samples) < settled)
    g_usleep(10000);
  g_atomic_int_set(&s->stop, 1);
  for (guint t = 0; t < 3; t++)
    g_thread_join(threads[t]);
  for (guint i = 0; i < s->violations->len; i++)
    g_test_message("violation: %s", (char *)s->violations->pdata[i]);
}

/* N launches, each VM with its own name, directory and monitor socket. */
static void
launches_init(Fixture *f, Launch *l, guint n)
{
  for (guint i = 0; i < n; i++) {
    l[i] = (Launch){.cpu = (int)(i % 2), .exit_status = -1};
    l[i].name = g_strdup_printf("%s-vm%02u", f->marker, i);
    l[i].tag = g_strdup_printf("%s,", l[i].name);
    l[i].dir = g_build_filename(f->dir, l[i].name, NULL);
    g_assert_cmpint(mkdir(l[i].dir, 0700), ==, 0);
    l[i].sock = g_build_filename(l[i].dir, "qmp.sock", NULL);
  }
}

static void
launches_clear(Launch *l, guint n)
{
  for (guint i = 0; i < n; i++) {
    g_free(l[i].dir);
    g_free(l[i].sock);
    g_free(l[i].name);
    g_free(l[i].tag);
  }
}

/* Waits until each launch has exited or its guest runs; returns how many
 * did either. */
static guint
launches_resolve(Launch *l, guint n)
{
  guint resolved = 0;
  gint64 deadline = g_get_monotonic_time() + 600 * G_USEC_PER_SEC;
  while (resolved < n && g_get_monotonic_time() < deadline) {
    for (guint i = 0; i < n; i++) {
      if (l[i].exit_status >= 0 || l[i].running)
        continue;
      int st = qp_test_wait(l[i].pid, 0);
      if (st >= 0) {
        l[i].exit_status = st;
        resolved++;
        continue;
      }
      g_autofree char *qs = qp_test_query_status(l[i].sock);
      if (qs != NULL && strcmp(qs, "running") == 0) {
        l[i].running = TRUE;
        resolved++;
      }
    }
    g_usleep(20000);
  }
  return resolved;
}

static void
test_concurrent_launches(Fixture *f, gconstpointer data)
{
  const gint64 total = host_plain_mib(NULL);
  /* What the kernel can give on node 0 bounds a node's room as its size
   * does (docs/ledger.md, "Memory the node really has"): the reserve must
   * leave less than that, by a margin for the launches' own memory, so
   * that the reserve alone says how many fit. */
  gint64 room = total;
  {
    g_autoptr(JsonObject) empty = status_json(f->state, NULL);
    JsonObject *m = json_object_get_object_member(node0(empty), "memory-mib");
    if (json_object_has_member(m, "kernel-can-give"))
      room =
          MIN(room, json_object_get_int_member(m, "kernel-can-give") - BIG_MIB);
  }
  const guint n_fit = (guint)CLAMP((room - BIG_MIB / 2) / BIG_MIB, 0, MAX_FIT);
  if (n_fit < 2) {
    g_autofree char *why = g_strdup_printf("node 0 has %" G_GINT64_FORMAT
                                           " MiB: two guests of %d MiB and a "
                                           "margin of %d MiB do not fit",
                                           total, BIG_MIB, BIG_MIB / 2);
    g_test_skip(why);
    return;
  }
  const gint64 capacity = (gint64)n_fit * BIG_MIB + BIG_MIB / 2;
  g_assert_cmpint(total, >, capacity);
  const gint64 reserve = total - capacity;
  g_autofree char *reserve_opt =
      g_strdup_printf("--reserve-mib=%" G_GINT64_FORMAT, reserve);
  g_test_message("node 0: %" G_GINT64_FORMAT " MiB, reserve %" G_GINT64_FORMAT
                 ", capacity %" G_GINT64_FORMAT " MiB = %u guests of %d MiB",
                 total, reserve, capacity, n_fit, BIG_MIB);

  /* The plan of each affinity, on the empty ledger. */
  JsonObject *plans[2];
  char **want_vcpu[2] = {NULL, NULL};
  for (int c = 0; c < 2; c++) {
    g_autofree char *aff = g_strdup_printf("--affinity=%d", c);
    const char *opts[] = {"--mode=balanced", reserve_opt, aff, NULL};
    g_autoptr(GPtrArray) cmd =
        command(f, f->state, f->marker, BIG_MIB, opts, NULL);
    plans[c] = qp_test_plan((char **)cmd->pdata + 1);
    want_vcpu[c] = qp_test_plan_vcpu_sets(plans[c]);
    g_autofree char *cpu = g_strdup_printf("%d", c);
    g_assert_cmpuint(g_strv_length(want_vcpu[c]), ==, 1);
    g_assert_cmpstr(want_vcpu[c][0], ==, cpu);
    g_assert_cmpstr(json_object_get_string_member(plans[c], "emulator-cpus"),
                    ==, cpu);
  }
  g_assert_cmpuint(qp_test_count_records(f->state), ==, 0);

  Sampler s;
  sampler_init(&s, f->state, reserve_opt, reserve);
  Launch l[N_LAUNCHES];
  GPtrArray *cmds[N_LAUNCHES];
  launches_init(f, l, N_LAUNCHES);
  for (int i = 0; i < N_LAUNCHES; i++) {
    g_autofree char *qmparg =
        g_strdup_printf("unix:%s,server=on,wait=off", l[i].sock);
    g_autofree char *aff = g_strdup_printf("--affinity=%d", l[i].cpu);
    const char *opts[] = {"--mode=balanced", reserve_opt, aff, NULL};
    const char *extra[] = {"-qmp", qmparg, NULL};
    cmds[i] = command(f, f->state, l[i].name, BIG_MIB, opts, extra);
  }

  GThread *samplers[3];
  samplers_start(&s, samplers);
  for (int i = 0; i < N_LAUNCHES; i++)
    l[i].pid = qp_test_spawn((char **)cmds[i]->pdata, NULL, l[i].dir);
  guint resolved = launches_resolve(l, N_LAUNCHES);
  samplers_stop(&s, samplers);

  g_autoptr(GString) seen = g_string_new(NULL);
  for (guint k = 0; k <= n_fit; k++) {
    guint n = GPOINTER_TO_UINT(
        g_hash_table_lookup(s.seen, GINT_TO_POINTER(k * BIG_MIB)));
    if (n > 0)
      g_string_append_printf(seen, " %d MiB x%u", k * BIG_MIB, n);
  }
  g_test_message("%d status samples, claimed seen:%s; %u raw scans (max %u "
                 "records, %" G_GINT64_FORMAT " MiB)",
                 s.samples, seen->str, s.scans, s.max_records,
                 s.max_scanned_mib);
  g_assert_cmpuint(resolved, ==, N_LAUNCHES);
  g_assert_cmpuint(s.violations->len, ==, 0);
  g_assert_cmpint(s.samples, >=, 3);
  g_assert_cmpint(s.max_scanned_mib, ==, (gint64)n_fit * BIG_MIB);
  g_assert_true(
      g_hash_table_contains(s.seen, GINT_TO_POINTER((gint64)n_fit * BIG_MIB)));

  /* Exactly n_fit run, the others failed with the one shortfall line. */
  g_autofree char *nofit_head = g_strdup_printf(
      "qemu-pin: VM does not fit: guest needs %d MiB but the best node 0 "
      "has only ",
      BIG_MIB);
  guint n_running = 0, n_failed = 0;
  g_autoptr(GHashTable) qemu_pids =
      g_hash_table_new(g_direct_hash, g_direct_equal);
  for (int i = 0; i < N_LAUNCHES; i++) {
    g_autofree char *err = file_text(l[i].dir, "stderr");
    g_autoptr(GArray) keepers = pids_of_kind(l[i].tag, TRUE);
    g_autoptr(GArray) others = pids_of_kind(l[i].tag, FALSE);
    if (l[i].running) {
      n_running++;
      g_hash_table_add(qemu_pids, GINT_TO_POINTER(l[i].pid));
      g_assert_cmpstr(err, ==, "");
      /* The guest runs pinned: vCPU threads on the plan's CPUs, every
       * other thread on the emulator CPUs, memory bound to node 0. */
      g_assert_true(qp_test_wait_vcpu_affinity(
          l[i].pid, (const char *const *)want_vcpu[l[i].cpu], 0));
      g_autoptr(GArray) vcpus = qp_test_vcpu_threads(l[i].pid);
      g_autofree char *task = g_strdup_printf("/proc/%d/task", l[i].pid);
      g_autoptr(GDir) d = g_dir_open(task, 0, NULL);
      const char *tname;
      guint threads = 0;
      while (d != NULL && (tname = g_dir_read_name(d)) != NULL) {
        int tid = atoi(tname);
        if (tid == g_array_index(vcpus, int, 0))
          continue;
        g_autofree char *have =
            qp_test_task_field(l[i].pid, tid, "Cpus_allowed_list");
        if (have == NULL)
          continue; /* a worker thread that left meanwhile */
        g_assert_cmpstr(
            have, ==,
            json_object_get_string_member(plans[l[i].cpu], "emulator-cpus"));
        threads++;
      }
      g_assert_cmpuint(threads, >=, 1);
      g_auto(GStrv) pol =
          qp_test_policies_of_mappings(l[i].pid, BIG_MIB * 1024);
      g_assert_cmpuint(g_strv_length(pol), ==, 1);
      g_assert_cmpstr(pol[0], ==, "bind:0");
      /* One QEMU (the launched process itself) and one keeper. */
      g_assert_cmpuint(keepers->len, ==, 1);
      g_assert_cmpuint(others->len, ==, 1);
      g_assert_cmpint(g_array_index(others, int, 0), ==, l[i].pid);
    } else {
      n_failed++;
      if (n_failed == 1 || !g_str_has_prefix(err, nofit_head))
        g_test_message("launch %d: status %d, stderr: %s", i, l[i].exit_status,
                       err);
      g_assert_cmpint(l[i].exit_status, ==, 1);
      g_assert_cmpuint(qp_test_count_lines(err), ==, 1);
      /* "... only U MiB uncommitted (T MiB total[, P MiB of it in hugepage
       * pools], C MiB claimed, R MiB reserved)": the numbers add up, and
       * the claim is the n_fit. */
      g_assert_true(g_str_has_prefix(err, nofit_head));
      gint64 u = -1, t = -1, p = 0, c = -1, r = -1;
      int end = 0, at = 0;
      const char *nums = err + strlen(nofit_head);
      g_assert_cmpint(
          sscanf(nums, "%" SCNd64 " MiB uncommitted (%" SCNd64 " MiB total, %n",
                 &u, &t, &at),
          ==, 2);
      nums += at;
      at = 0;
      if (sscanf(nums, "%" SCNd64 " MiB of it in hugepage pools, %n", &p,
                 &at) == 1 &&
          at > 0)
        nums += at;
      else
        p = 0;
      g_assert_cmpint(
          sscanf(nums, "%" SCNd64 " MiB claimed, %" SCNd64 " MiB reserved%n",
                 &c, &r, &end),
          ==, 2);
      /* On a live host, what is used outside claims there follows. */
      const char *tail = nums + end;
      g_assert_true(strcmp(tail, ")\n") == 0 ||
                    (g_str_has_prefix(tail, ", ") &&
                     strstr(tail, " MiB used outside any claim, ") != NULL &&
                     g_str_has_suffix(tail, ")\n")));
      g_assert_cmpint(c, ==, (gint64)n_fit * BIG_MIB);
      g_assert_cmpint(r, ==, reserve);
      g_assert_cmpint(u, ==, t - p - r - c);
      g_assert_cmpint(u, <, BIG_MIB);
      g_assert_cmpuint(keepers->len, ==, 0);
      g_assert_cmpuint(others->len, ==, 0);
    }
  }
  g_test_message("%u launches ran, %u were refused", n_running, n_failed);
  g_assert_cmpuint(n_running, ==, n_fit);
  g_assert_cmpuint(n_failed, ==, N_LAUNCHES - n_fit);

  /* No QEMU left paused: every QEMU of this test is one of the running
   * guests, and each says "running" to its caller's monitor. */
  g_autoptr(GArray) all = pids_of_kind(f->marker, FALSE);
  g_assert_cmpuint(all->len, ==, n_fit);
  for (guint i = 0; i < all->len; i++)
    g_assert_true(g_hash_table_contains(
        qemu_pids, GINT_TO_POINTER(g_array_index(all, int, i))));
  for (int i = 0; i < N_LAUNCHES; i++)
    if (l[i].running) {
      g_autofree char *qs = qp_test_query_status(l[i].sock);
      g_assert_cmpstr(qs, ==, "running");
    }
  g_autoptr(GArray) keepers = pids_of_kind(f->marker, TRUE);
  g_assert_cmpuint(keepers->len, ==, n_fit);

  /* The ledger holds exactly the running guests. */
  g_assert_cmpuint(qp_test_count_records(f->state), ==, n_fit);
  g_autoptr(JsonObject) st = status_json(f->state, reserve_opt);
  g_assert_cmpint(node0_mem(st, "claimed"), ==, (gint64)n_fit * BIG_MIB);
  g_assert_cmpint(node0_mem(st, "uncommitted"), ==,
                  node0_plain(st) - reserve - (gint64)n_fit * BIG_MIB);
  g_assert_cmpuint(n_vms(st), ==, n_fit);
  JsonArray *vms = json_object_get_array_member(st, "vms");
  for (guint i = 0; i < n_fit; i++) {
    JsonObject *vm = json_array_get_object_element(vms, i);
    g_assert_true(g_hash_table_contains(
        qemu_pids,
        GINT_TO_POINTER(json_object_get_int_member(vm, "qemu-pid"))));
  }

  /* Stop the guests: the ledger empties. */
  for (int i = 0; i < N_LAUNCHES; i++)
    if (l[i].running)
      kill(l[i].pid, SIGTERM);
  for (int i = 0; i < N_LAUNCHES; i++)
    if (l[i].running)
      g_assert_cmpint(qp_test_wait(l[i].pid, 30000), >=, 0);
  g_assert_true(qp_test_wait_no_process(f->marker, 30000));
  g_assert_cmpuint(qp_test_count_records(f->state), ==, 0);
  g_autoptr(JsonObject) after = status_json(f->state, reserve_opt);
  g_assert_cmpint(node0_mem(after, "claimed"), ==, 0);
  g_assert_cmpuint(n_vms(after), ==, 0);
  g_assert_cmpuint(n_warnings(after), ==, 0);

  for (int i = 0; i < N_LAUNCHES; i++)
    g_ptr_array_unref(cmds[i]);
  launches_clear(l, N_LAUNCHES);
  for (int c = 0; c < 2; c++) {
    json_object_unref(plans[c]);
    g_strfreev(want_vcpu[c]);
  }
  sampler_clear(&s);
}

/* One-to-one: the CPUs run out first. Of 8 guests started at once, one
 * gets CPU 0, one CPU 1, and no two records ever dedicate the same CPU. */
#define N_O2O 8

static void
test_concurrent_one_to_one(Fixture *f, gconstpointer data)
{
  Sampler s;
  sampler_init(&s, f->state, NULL, 0);
  Launch l[N_O2O];
  GPtrArray *cmds[N_O2O];
  launches_init(f, l, N_O2O);
  for (int i = 0; i < N_O2O; i++) {
    g_autofree char *qmparg =
        g_strdup_printf("unix:%s,server=on,wait=off", l[i].sock);
    const char *opts[] = {"--mode=one-to-one", NULL};
    const char *extra[] = {"-qmp", qmparg, NULL};
    cmds[i] = command(f, f->state, l[i].name, GUEST_MIB, opts, extra);
  }
  GThread *samplers[3];
  samplers_start(&s, samplers);
  for (int i = 0; i < N_O2O; i++)
    l[i].pid = qp_test_spawn((char **)cmds[i]->pdata, NULL, l[i].dir);
  guint resolved = launches_resolve(l, N_O2O);
  samplers_stop(&s, samplers);
  g_test_message("%d status samples, %u raw scans (max %u records, max %u "
                 "dedicated CPUs)",
                 s.samples, s.scans, s.max_records, s.max_dedicated);
  g_assert_cmpuint(resolved, ==, N_O2O);
  g_assert_cmpuint(s.violations->len, ==, 0);
  g_assert_cmpuint(s.max_dedicated, ==, 2);

  const char *nocpu = "qemu-pin: VM does not fit: one-to-one needs 1 CPU on "
                      "free cores but "
                      "only 0 are free on host nodes 0 (2 CPUs dedicated to "
                      "other VMs)\n";
  g_autoptr(JsonObject) st = status_json(f->state, NULL);
  g_assert_cmpstr(json_object_get_string_member(node0(st), "dedicated-cpus"),
                  ==, "0-1");
  g_assert_cmpuint(n_vms(st), ==, 2);
  JsonArray *vms = json_object_get_array_member(st, "vms");
  guint n_running = 0;
  guint64 used = 0;
  for (int i = 0; i < N_O2O; i++) {
    g_autofree char *err = file_text(l[i].dir, "stderr");
    g_autoptr(GArray) keepers = pids_of_kind(l[i].tag, TRUE);
    if (!l[i].running) {
      if (strcmp(err, nocpu) != 0)
        g_test_message("launch %d: status %d, stderr: %s", i, l[i].exit_status,
                       err);
      g_assert_cmpint(l[i].exit_status, ==, 1);
      g_assert_cmpstr(err, ==, nocpu);
      g_assert_cmpuint(keepers->len, ==, 0);
      g_autoptr(GArray) others = pids_of_kind(l[i].tag, FALSE);
      g_assert_cmpuint(others->len, ==, 0);
      continue;
    }
    n_running++;
    g_assert_cmpstr(err, ==, "");
    g_assert_cmpuint(keepers->len, ==, 1);
    /* Its record dedicates one CPU, and its vCPU runs there. */
    const char *ded = NULL;
    for (guint v = 0; v < json_array_get_length(vms); v++) {
      JsonObject *vm = json_array_get_object_element(vms, v);
      if (json_object_get_int_member(vm, "qemu-pid") == l[i].pid)
        ded = json_object_get_string_member(vm, "dedicated-cpus");
    }
    g_assert_nonnull(ded);
    g_assert_true(strcmp(ded, "0") == 0 || strcmp(ded, "1") == 0);
    g_assert_cmpuint(used & cpu_mask(ded), ==, 0);
    used |= cpu_mask(ded);
    const char *want[] = {ded, NULL};
    g_assert_true(qp_test_wait_vcpu_affinity(l[i].pid, want, 0));
  }
  g_assert_cmpuint(n_running, ==, 2);
  g_assert_cmpuint(used, ==, 3);

  for (int i = 0; i < N_O2O; i++)
    if (l[i].running)
      kill(l[i].pid, SIGTERM);
  for (int i = 0; i < N_O2O; i++)
    if (l[i].running)
      g_assert_cmpint(qp_test_wait(l[i].pid, 30000), >=, 0);
  g_assert_true(qp_test_wait_no_process(f->marker, 30000));
  g_assert_cmpuint(qp_test_count_records(f->state), ==, 0);
  g_autoptr(JsonObject) after = status_json(f->state, NULL);
  g_assert_cmpstr(json_object_get_string_member(node0(after), "dedicated-cpus"),
                  ==, "");
  for (int i = 0; i < N_O2O; i++)
    g_ptr_array_unref(cmds[i]);
  launches_clear(l, N_O2O);
  sampler_clear(&s);
}

/* ---- 2. Faults -------------------------------------------------------------
 */

static void
test_killed_keeper_keeps_claim(Fixture *f, gconstpointer data)
{
  GPid pid = start_vm(f, NULL);
  int keeper = the_keeper(f->marker);
  g_autofree char *id = check_record_names(f, pid, keeper);

  kill(keeper, SIGKILL);
  g_assert_true(wait_gone(keeper, 10000));
  g_autoptr(GArray) keepers = pids_of_kind(f->marker, TRUE);
  g_assert_cmpuint(keepers->len, ==, 0);

  /* QEMU lives: the claim stays, through status and status --prune. */
  g_autofree char *qs = qp_test_query_status(f->qmp);
  g_assert_cmpstr(qs, ==, "running");
  g_autoptr(JsonObject) st = status_json(f->state, "--prune");
  g_assert_cmpuint(n_vms(st), ==, 1);
  JsonObject *vm =
      json_array_get_object_element(json_object_get_array_member(st, "vms"), 0);
  g_assert_cmpstr(json_object_get_string_member(vm, "id"), ==, id);
  g_assert_cmpint(json_object_get_int_member(vm, "qemu-pid"), ==, pid);
  g_assert_cmpint(node0_mem(st, "claimed"), ==, GUEST_MIB);
  g_autofree char *again = only_record_id(f->state);
  g_assert_cmpstr(again, ==, id);

  /* QEMU killed too (a zombie not yet reaped holds nothing): the next
   * status prunes the record. */
  kill(pid, SIGKILL);
  g_assert_true(qp_test_wait_state(pid, 'Z', 10000));
  g_assert_cmpuint(qp_test_count_records(f->state), ==, 1);
  g_autoptr(JsonObject) st2 = status_json(f->state, NULL);
  g_assert_cmpuint(n_vms(st2), ==, 0);
  g_assert_cmpint(node0_mem(st2, "claimed"), ==, 0);
  g_assert_cmpuint(qp_test_count_records(f->state), ==, 0);
  g_assert_cmpint(qp_test_wait(pid, 10000), ==, 128 + SIGKILL);
}

static void
test_killed_qemu_released_by_keeper(Fixture *f, gconstpointer data)
{
  GPid pid = start_vm(f, NULL);
  int keeper = the_keeper(f->marker);
  g_autofree char *id = check_record_names(f, pid, keeper);
  g_assert_nonnull(id);

  /* Nobody but the keeper touches the ledger here. */
  kill_and_released(f, pid, keeper);
  g_autofree char *err = file_text(f->dir, "stderr");
  g_test_message("stderr of the launch: \"%s\"", err);
  g_assert_cmpstr(err, ==, "");
}

static void
test_killed_qemu_pruned_by_next_plan(Fixture *f, gconstpointer data)
{
  GPid pid = start_vm(f, NULL);
  int keeper = the_keeper(f->marker);
  g_autofree char *id = check_record_names(f, pid, keeper);

  /* The keeper cannot act: only the next plan can free the claim. */
  stop_keeper_unlocked(keeper, f->state);
  kill(pid, SIGKILL);
  g_assert_cmpint(qp_test_wait(pid, 10000), ==, 128 + SIGKILL);
  g_assert_cmpuint(qp_test_count_records(f->state), ==, 1);

  g_autoptr(GPtrArray) cmd = vm_command(f, NULL);
  g_autoptr(JsonObject) plan = qp_test_plan((char **)cmd->pdata + 1);
  g_assert_nonnull(plan);
  g_assert_cmpuint(qp_test_count_records(f->state), ==, 0);
  g_autofree char *stale = record_path(f->state, id, ".json");
  g_assert_false(g_file_test(stale, G_FILE_TEST_EXISTS));

  /* The keeper, let go, finds its record gone and leaves quietly. */
  kill(keeper, SIGCONT);
  g_assert_true(wait_gone(keeper, 20000));
  g_assert_true(qp_test_wait_no_process(f->marker, 10000));
  g_autofree char *err = file_text(f->dir, "stderr");
  g_assert_cmpstr(err, ==, "");
}

/* qemu-pin stopped between writing the claim and exec'ing QEMU. Returns
 * its PID; the record names it. */
/* A launch stopped where the test hook VAR (launcher/launch.c) says:
 * still qemu-pin, not QEMU yet. */
static GPid
start_stopped_at(Fixture *f, const char *var)
{
  g_autoptr(GPtrArray) cmd = vm_command(f, NULL);
  g_auto(GStrv) env = g_get_environ();
  env = g_environ_setenv(env, var, "1", TRUE);
  GPid pid = qp_test_spawn((char **)cmd->pdata, env, f->dir);
  g_assert_true(qp_test_wait_state(pid, 'T', 30000));
  g_autofree char *exe_path = g_strdup_printf("/proc/%d/exe", pid);
  g_autofree char *exe = g_file_read_link(exe_path, NULL);
  g_autofree char *self = realpath(qp_test_binary(), NULL);
  g_assert_cmpstr(exe, ==, self);
  return pid;
}

static GPid
start_stopped_before_exec(Fixture *f, int *keeper_out, char **id_out)
{
  /* Its claim is written. */
  GPid pid = start_stopped_at(f, "QEMU_PIN_TEST_STOP_BEFORE_EXEC");
  int keeper = the_keeper(f->marker);
  *id_out = check_record_names(f, pid, keeper);
  *keeper_out = keeper;
  return pid;
}

static void
test_killed_before_exec_keeper_releases(Fixture *f, gconstpointer data)
{
  int keeper;
  g_autofree char *id = NULL;
  GPid pid = start_stopped_before_exec(f, &keeper, &id);

  /* The keeper sees the monitor close, removes the record and leaves. */
  kill_and_released(f, pid, keeper);
}

static void
test_killed_before_exec_status_prunes(Fixture *f, gconstpointer data)
{
  int keeper;
  g_autofree char *id = NULL;
  GPid pid = start_stopped_before_exec(f, &keeper, &id);

  stop_keeper_unlocked(keeper, f->state);
  kill(pid, SIGKILL);
  g_assert_cmpint(qp_test_wait(pid, 10000), ==, 128 + SIGKILL);
  g_assert_cmpuint(qp_test_count_records(f->state), ==, 1);
  /* The record names a dead PID: the next status prunes it. */
  g_autoptr(JsonObject) st = status_json(f->state, NULL);
  g_assert_cmpuint(n_vms(st), ==, 0);
  g_assert_cmpint(node0_mem(st, "claimed"), ==, 0);
  g_assert_cmpuint(qp_test_count_records(f->state), ==, 0);

  kill(keeper, SIGCONT);
  g_assert_true(wait_gone(keeper, 20000));
  g_assert_true(qp_test_wait_no_process(f->marker, 10000));
}

/* A launch stopped between its keeper's start and the ledger's lock:
 * still qemu-pin, its keeper already there, no record made yet. */
static GPid
start_stopped_before_lock(Fixture *f, int *keeper_out)
{
  GPid pid = start_stopped_at(f, "QEMU_PIN_TEST_STOP_BEFORE_LOCK");
  *keeper_out = the_keeper(f->marker);
  g_assert_cmpuint(qp_test_count_records(f->state), ==, 0);
  return pid;
}

/* Killed there, the launch leaves nothing: its keeper, which has no plan
 * and no record, exits at once (status 0, no signal) without touching the
 * ledger. This process is made a subreaper for the test, so that the
 * keeper, an orphan, is its child and its exit status can be read. */
static void
test_killed_before_lock_keeper_leaves(Fixture *f, gconstpointer data)
{
  g_assert_cmpint(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), ==, 0);
  int keeper;
  GPid pid = start_stopped_before_lock(f, &keeper);

  kill(pid, SIGKILL);
  g_assert_cmpint(qp_test_wait(pid, 10000), ==, 128 + SIGKILL);
  int status = -1;
  gint64 deadline = g_get_monotonic_time() + 20 * G_USEC_PER_SEC;
  while (waitpid(keeper, &status, WNOHANG) == 0 &&
         g_get_monotonic_time() < deadline)
    g_usleep(5000);
  prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0);
  g_test_message("keeper %d: wait status %d", keeper, status);
  g_assert_true(WIFEXITED(status));
  g_assert_cmpint(WEXITSTATUS(status), ==, 0);
  g_assert_cmpuint(qp_test_count_records(f->state), ==, 0);
  assert_nothing_left(f);
}

/* Stopped there, the launch holds no lock (status, which takes it, runs);
 * let go, it claims and runs its VM with the keeper it started first, which
 * releases the claim when QEMU dies. */
static void
test_stopped_before_lock_holds_nothing(Fixture *f, gconstpointer data)
{
  int keeper;
  GPid pid = start_stopped_before_lock(f, &keeper);
  g_autoptr(JsonObject) st = status_json(f->state, NULL);
  g_assert_cmpuint(n_vms(st), ==, 0);

  kill(pid, SIGCONT);
  g_assert_true(qp_test_wait_status(f->qmp, "running", 60000));
  g_autofree char *id = check_record_names(f, pid, keeper);
  g_assert_nonnull(id);

  kill_and_released(f, pid, keeper);
}

typedef struct {
  const char *name;
  const char *cut_after; /* the record is cut this far past ... */
  gsize extra;           /* ... plus this many bytes */
  gboolean knows_nodes;  /* the salvaged nodes are the record's own */
} CorruptCase;

static const CorruptCase corrupt_cases[] = {
    {"cut-inside-time", "\"time\"", 3, TRUE},
    {"cut-inside-memory", "\"memory-mib\"", 6, FALSE},
};

static void
test_truncated_record(Fixture *f, gconstpointer data)
{
  const CorruptCase *c = data;

  /* A real record of a real launch. */
  GPid pid = start_vm(f, NULL);
  g_autofree char *id = only_record_id(f->state);
  g_autofree char *path = record_path(f->state, id, ".json");
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
  kill(pid, SIGTERM);
  g_assert_cmpint(qp_test_wait(pid, 30000), >=, 0);
  g_assert_true(qp_test_wait_no_process(f->marker, 20000));
  g_assert_cmpuint(qp_test_count_records(f->state), ==, 0);

  /* The same record, cut short, left behind as if by a crash. */
  const char *at = strstr(text, c->cut_after);
  g_assert_nonnull(at);
  gsize len = (gsize)(at - text) + strlen(c->cut_after) + c->extra;
  g_assert_cmpuint(len, <, strlen(text));
  g_assert_true(g_file_set_contents_full(path, text, (gssize)len,
                                         G_FILE_SET_CONTENTS_NONE, 0600, NULL));
  g_autofree char *cut = g_strndup(text, len);
  g_test_message("record cut to %zu of %zu bytes: ...%s", len, strlen(text),
                 cut + MAX(len, 40) - 40);

  /* status: quarantined, warned about, node 0 held. */
  g_autofree char *sd = g_strdup_printf("--state-dir=%s", f->state);
  char *argv[] = {(char *)qp_test_binary(), "status", sd, NULL};
  QpTestRun r;
  qp_test_run(argv, NULL, &r);
  g_test_message("status:\n%s%s", r.out, r.err);
  g_assert_cmpint(r.status, ==, 0);
  g_autofree char *moved =
      g_strdup_printf("warning: ledger record %s could not be read (", path);
  g_autofree char *moved_end =
      g_strdup_printf("); moved to %s.json.corrupt\n", id);
  g_autofree char *corrupt = record_path(f->state, id, ".json.corrupt");
  g_autofree char *held =
      c->knows_nodes
          ? g_strdup_printf("ledger record %s is unreadable: its node 0 is "
                            "held until an operator removes it",
                            corrupt)
          : g_strdup_printf("ledger record %s is unreadable and does not say "
                            "which nodes it holds: node 0 (the host's only "
                            "node) is held until an operator removes it",
                            corrupt);
  g_autofree char *held_line = g_strdup_printf("warning: %s\n", held);
  g_assert_nonnull(strstr(r.out, moved));
  g_assert_nonnull(strstr(r.out, moved_end));
  g_assert_nonnull(strstr(r.out, held_line));
  g_assert_nonnull(strstr(r.out, "(blocked by an unreadable record)\n"));
  g_assert_nonnull(strstr(
      r.out,
      "  memory [XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX]  X blocked\n"));
  g_assert_nonnull(strstr(r.out, "no VM holds a claim\n"));
  qp_test_run_clear(&r);
  g_assert_false(g_file_test(path, G_FILE_TEST_EXISTS));
  g_autofree char *kept = NULL;
  gsize kept_len = 0;
  g_assert_true(g_file_get_contents(corrupt, &kept, &kept_len, NULL));
  g_assert_cmpmem(kept, kept_len, text, len); /* moved, not altered */

  /* Every later read warns again and holds the node. */
  g_autoptr(JsonObject) st = status_json(f->state, NULL);
  g_assert_true(json_object_get_boolean_member(node0(st), "blocked"));
  g_assert_cmpint(node0_mem(st, "uncommitted"), ==, 0);
  g_assert_cmpuint(n_vms(st), ==, 0);
  g_assert_cmpuint(n_warnings(st), ==, 1);
  g_assert_cmpstr(json_array_get_string_element(
                      json_object_get_array_member(st, "warnings"), 0),
                  ==, held);

  /* A launch that needs node 0 is refused; no QEMU starts. */
  g_autoptr(GPtrArray) cmd = vm_command(f, NULL);
  qp_test_run((char **)cmd->pdata, NULL, &r);
  g_test_message("launch on the held node: status %d, stderr: %s", r.status,
                 r.err);
  g_assert_cmpint(r.status, ==, 1);
  g_autofree char *warn_line = g_strdup_printf("qemu-pin: warning: %s\n", held);
  g_assert_true(g_str_has_prefix(r.err, warn_line));
  g_assert_cmpuint(qp_test_count_lines(r.err), ==, 2);
  const char *error_line = r.err + strlen(warn_line);
  /* The refusal itself should name the node it could not use. */
  if (strstr(error_line, "node 0") == NULL)
    g_test_fail_printf("the refusal does not name node 0: %s", error_line);
  g_assert_true(qp_test_wait_no_process(f->marker, 10000));
  g_assert_cmpuint(qp_test_count_records(f->state), ==, 0);
  g_assert_true(g_file_test(corrupt, G_FILE_TEST_EXISTS));
  qp_test_run_clear(&r);

  /* The operator removes it: node 0 is free again and a VM starts. */
  g_assert_cmpint(unlink(corrupt), ==, 0);
  g_autoptr(JsonObject) st2 = status_json(f->state, NULL);
  g_assert_false(json_object_get_boolean_member(node0(st2), "blocked"));
  g_assert_cmpuint(n_warnings(st2), ==, 0);
  g_assert_cmpint(node0_mem(st2, "claimed"), ==, 0);
  g_assert_cmpint(node0_mem(st2, "uncommitted"), ==, node0_room(st2));
  GPid pid2 = start_vm(f, NULL);
  g_assert_cmpuint(qp_test_count_records(f->state), ==, 1);
  kill(pid2, SIGTERM);
  g_assert_cmpint(qp_test_wait(pid2, 30000), >=, 0);
  g_assert_true(qp_test_wait_no_process(f->marker, 20000));
  g_assert_cmpuint(qp_test_count_records(f->state), ==, 0);
}

typedef enum {
  SD_SYMLINK,  /* a symlink to a good directory */
  SD_DANGLING, /* a symlink to nothing */
  SD_FOREIGN,  /* owned by another uid */
  SD_WRITABLE, /* mode 0777 */
  SD_FILE,     /* a regular file */
} StateDirKind;

typedef struct {
  const char *name;
  StateDirKind kind;
  const char *says; /* after "state directory PATH " */
} StateDirCase;

static const StateDirCase state_dir_cases[] = {
    {"symlink-to-a-directory", SD_SYMLINK, "is a symlink"},
    {"dangling-symlink", SD_DANGLING, "is a symlink"},
    {"foreign-owner", SD_FOREIGN, "is owned by uid 65534"},
    {"writable-by-others", SD_WRITABLE, "has mode 0777"},
    {"regular-file", SD_FILE, "is not a directory"},
};

/* A state directory that is not safe to use is refused, by a launch and by
 * status: one line naming the path, no QEMU, nothing written there. */
static void
test_bad_state_dir(Fixture *f, gconstpointer data)
{
  const StateDirCase *c = data;
  g_autofree char *target = g_build_filename(f->dir, "real", NULL);
  switch (c->kind) {
  case SD_SYMLINK:
    g_assert_cmpint(mkdir(target, 0700), ==, 0);
    g_assert_cmpint(symlink(target, f->state), ==, 0);
    break;
  case SD_DANGLING:
    g_assert_cmpint(symlink(target, f->state), ==, 0);
    break;
  case SD_FOREIGN:
    if (geteuid() != 0) {
      g_test_skip("needs root to give the directory to another uid");
      return;
    }
    g_assert_cmpint(mkdir(f->state, 0700), ==, 0);
    g_assert_cmpint(chown(f->state, 65534, 65534), ==, 0);
    break;
  case SD_WRITABLE:
    g_assert_cmpint(mkdir(f->state, 0700), ==, 0);
    g_assert_cmpint(chmod(f->state, 0777), ==, 0);
    break;
  case SD_FILE:
    g_assert_true(g_file_set_contents(f->state, "", 0, NULL));
    break;
  }

  g_autofree char *says =
      g_strdup_printf("qemu-pin: state directory %s %s", f->state, c->says);
  g_autoptr(GPtrArray) cmd = vm_command(f, NULL);
  QpTestRun r;
  qp_test_run((char **)cmd->pdata, NULL, &r);
  g_test_message("status %d, stderr: %s", r.status, r.err);
  g_assert_cmpint(r.status, ==, 1);
  g_assert_cmpuint(qp_test_count_lines(r.err), ==, 1);
  g_assert_true(g_str_has_prefix(r.err, says));
  qp_test_run_clear(&r);
  /* Nothing started, nothing created there or through a link. */
  g_assert_true(qp_test_wait_no_process(f->marker, 10000));
  if (c->kind == SD_DANGLING) {
    g_assert_false(g_file_test(target, G_FILE_TEST_EXISTS));
  } else if (c->kind != SD_FILE) {
    const char *dir = c->kind == SD_SYMLINK ? target : f->state;
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    g_assert_nonnull(d);
    g_assert_null(g_dir_read_name(d));
  } else {
    struct stat st;
    g_assert_cmpint(stat(f->state, &st), ==, 0);
    g_assert_cmpint(st.st_size, ==, 0);
  }
  /* status refuses it the same way. */
  g_autofree char *sd = g_strdup_printf("--state-dir=%s", f->state);
  char *argv[] = {(char *)qp_test_binary(), "status", sd, NULL};
  qp_test_run(argv, NULL, &r);
  g_assert_cmpint(r.status, ==, 1);
  g_assert_cmpuint(qp_test_count_lines(r.err), ==, 1);
  g_assert_true(g_str_has_prefix(r.err, says));
  g_assert_cmpstr(r.out, ==, "");
  qp_test_run_clear(&r);
}

static void
test_daemonize_record_names_daemon(Fixture *f, gconstpointer data)
{
  g_autofree char *qmparg =
      g_strdup_printf("unix:%s,server=on,wait=off", f->qmp);
  g_autofree char *pidfile = g_build_filename(f->dir, "vm.pid", NULL);
  const char *opts[] = {"--mode=balanced", NULL};
  const char *extra[] = {"-daemonize", "-pidfile", pidfile,
                         "-qmp",       qmparg,     NULL};
  g_autoptr(GPtrArray) cmd =
      command(f, f->state, f->marker, GUEST_MIB, opts, extra);
  int pid = qp_test_launch_daemon((char **)cmd->pdata, pidfile);
  g_autofree char *qs = qp_test_query_status(f->qmp);
  g_assert_cmpstr(qs, ==, "running");
  int keeper = the_keeper(f->marker);
  g_autofree char *id = check_record_names(f, pid, keeper);
  g_autoptr(JsonObject) rec = read_record(f->state, id);
  gint64 launcher = json_object_get_int_member(rec, "launcher-pid");
  char lstate = launcher > 0 ? proc_state((int)launcher, NULL) : 0;
  g_test_message("record: qemu-pid %d, launcher-pid %" G_GINT64_FORMAT " (%s)",
                 pid, launcher, lstate ? "alive" : "gone");
  g_autoptr(JsonObject) st = status_json(f->state, NULL);
  g_assert_cmpuint(n_vms(st), ==, 1);
  JsonObject *vm =
      json_array_get_object_element(json_object_get_array_member(st, "vms"), 0);
  g_assert_cmpint(json_object_get_int_member(vm, "qemu-pid"), ==, pid);
  g_assert_cmpint(json_object_get_int_member(vm, "keeper-pid"), ==, keeper);
  /* qemu-pin has returned: nothing waits for the daemon any more, so the
   * record names no launcher (docs/ledger.md: "launcher-pid ... qemu-pin
   * itself while it waits for -daemonize, else 0"). */
  if (launcher != 0 || json_object_has_member(vm, "launcher-pid"))
    g_test_fail_printf("after qemu-pin returned, the record still names "
                       "launcher-pid %" G_GINT64_FORMAT " (%s); expected 0",
                       launcher, lstate ? "alive" : "gone");

  kill(pid, SIGTERM);
  g_assert_true(qp_test_wait_no_process(f->marker, 20000));
  g_assert_cmpuint(qp_test_count_records(f->state), ==, 0);
}

/* ---- 3. Status views -------------------------------------------------------
 */

static char *
line_starting(const char *text, const char *prefix)
{
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  for (guint i = 0; lines[i]; i++)
    if (g_str_has_prefix(lines[i], prefix))
      return g_strdup(lines[i]);
  return NULL;
}

static void
test_status_one_vm(Fixture *f, gconstpointer data)
{
  /* Half the node reserved: 20 of the 40 columns (also when the node
   * grows by a hot-added 128 MiB meanwhile); the 64 MiB claim is less than
   * one column, shown as one; hugepage pools (none on most hosts) follow
   * the reserve, at least one column. */
  gint64 total0 = 0;
  const gint64 plain0 = host_plain_mib(&total0);
  const gint64 pools = total0 - plain0;
  const gint64 reserve = total0 / 2;
  g_autofree char *reserve_opt =
      g_strdup_printf("--reserve-mib=%" G_GINT64_FORMAT, reserve);
  gint64 t0 = g_get_real_time() / G_USEC_PER_SEC;
  GPid pid = start_vm(f, NULL);
  gint64 t1 = g_get_real_time() / G_USEC_PER_SEC;
  int keeper = the_keeper(f->marker);
  g_autofree char *id = check_record_names(f, pid, keeper);

  g_autofree char *sd = g_strdup_printf("--state-dir=%s", f->state);
  char *argv[] = {(char *)qp_test_binary(), "status", sd, reserve_opt, NULL};
  QpTestRun r;
  qp_test_run(argv, NULL, &r);
  g_test_message("status:\n%s", r.out);
  g_assert_cmpint(r.status, ==, 0);
  g_assert_cmpstr(r.err, ==, "");
  gint64 total = 0;
  g_assert_cmpint(sscanf(r.out, "node 0: %" SCNd64 " MiB total", &total), ==,
                  1);
  g_autofree char *in_pools =
      pools > 0
          ? g_strdup_printf(" (%" G_GINT64_FORMAT " in hugepage pools)", pools)
          : g_strdup("");
  g_autofree char *head = g_strdup_printf(
      "node 0: %" G_GINT64_FORMAT " MiB total%s, %" G_GINT64_FORMAT
      " reserved, %d claimed, %" G_GINT64_FORMAT " free\n",
      total, in_pools, reserve, GUEST_MIB, total - pools - reserve - GUEST_MIB);
  g_assert_true(g_str_has_prefix(r.out, head));
  g_autofree char *bar = line_starting(r.out, "  memory [");
  const guint huge =
      pools > 0 ? MAX(1, (guint)((pools * 40 + total / 2) / total)) : 0;
  g_autofree char *hs = g_strnfill(huge, 'h');
  g_autofree char *dots = g_strnfill(19 - huge, '.');
  g_autofree char *want_bar = g_strdup_printf(
      "  memory [#++++++++++++++++++++%s%s]  # claimed, + host reserve, %s. "
      "free",
      hs, dots, huge > 0 ? "h hugepage pools, " : "");
  g_assert_cmpstr(bar, ==, want_bar);
  g_autofree char *cpus = line_starting(r.out, "  cpus ");
  g_assert_cmpstr(cpus, ==,
                  "  cpus 0-1 [SS]  D dedicated, S shared (1 vCPU, 0.50 per "
                  "CPU), . free, - not usable");
  g_assert_nonnull(strstr(r.out, "\n1 VM holding claims:\n"));
  g_autofree char *vm_prefix = g_strdup_printf(
      "  %s  %s  qemu pid %d, keeper pid %d, mode balanced, since ", f->marker,
      id, pid, keeper);
  g_autofree char *vm_line = line_starting(r.out, vm_prefix);
  g_assert_nonnull(vm_line);
  g_assert_true(g_str_has_suffix(vm_line, " UTC"));
  g_assert_nonnull(
      strstr(r.out, "\n    memory node 0 64 MiB; 1 shared vCPU on node 0\n"));
  g_assert_null(strstr(r.out, "warning"));
  qp_test_run_clear(&r);

  /* The total is the kernel's MemTotal of node 0 (read around the call:
   * the node may grow meanwhile). */
  gint64 kernel_before = node0_total_mib();
  g_autoptr(JsonObject) st = status_json(f->state, reserve_opt);
  gint64 kernel_after = node0_total_mib();
  JsonObject *n = node0(st);
  total = node0_mem(st, "total");
  g_assert_true(total == kernel_before || total == kernel_after);
  g_assert_cmpint(node0_mem(st, "reserve"), ==, reserve);
  g_assert_cmpint(node0_mem(st, "claimed"), ==, GUEST_MIB);
  g_assert_cmpint(node0_mem(st, "hugepage-pools"), ==, pools);
  g_assert_cmpint(node0_mem(st, "uncommitted"), ==, node0_room(st));
  g_assert_cmpint(node0_mem(st, "uncommitted"), <=,
                  total - pools - reserve - GUEST_MIB);
  g_assert_false(json_object_get_boolean_member(n, "blocked"));
  g_assert_cmpstr(json_object_get_string_member(n, "cpus"), ==, "0-1");
  g_assert_cmpstr(json_object_get_string_member(n, "dedicated-cpus"), ==, "");
  g_assert_cmpint(json_object_get_int_member(n, "shared-vcpus"), ==, 1);
  g_assert_cmpfloat(json_object_get_double_member(n, "load-per-cpu"), ==, 0.5);
  g_assert_cmpuint(n_vms(st), ==, 1);
  g_assert_cmpuint(n_warnings(st), ==, 0);
  JsonObject *vm =
      json_array_get_object_element(json_object_get_array_member(st, "vms"), 0);
  g_assert_cmpstr(json_object_get_string_member(vm, "id"), ==, id);
  g_assert_cmpstr(json_object_get_string_member(vm, "name"), ==, f->marker);
  g_assert_cmpint(json_object_get_int_member(vm, "qemu-pid"), ==, pid);
  g_assert_cmpint(json_object_get_int_member(vm, "keeper-pid"), ==, keeper);
  g_assert_false(json_object_has_member(vm, "launcher-pid"));
  g_assert_cmpstr(json_object_get_string_member(vm, "mode"), ==, "balanced");
  JsonObject *mem = json_object_get_object_member(vm, "memory-mib");
  g_assert_cmpuint(json_object_get_size(mem), ==, 1);
  g_assert_cmpint(json_object_get_int_member(mem, "0"), ==, GUEST_MIB);
  JsonObject *load = json_object_get_object_member(vm, "load");
  g_assert_cmpuint(json_object_get_size(load), ==, 1);
  g_assert_cmpint(json_object_get_int_member(load, "0"), ==, 1);
  g_assert_cmpuint(
      json_array_get_length(json_object_get_array_member(vm, "hugepages")), ==,
      0);
  g_assert_cmpstr(json_object_get_string_member(vm, "dedicated-cpus"), ==, "");
  gint64 since = json_object_get_int_member(vm, "since");
  g_assert_cmpint(since, >=, t0);
  g_assert_cmpint(since, <=, t1);

  kill(pid, SIGTERM);
  g_assert_cmpint(qp_test_wait(pid, 30000), >=, 0);
  g_assert_true(qp_test_wait_no_process(f->marker, 20000));
  g_assert_cmpuint(qp_test_count_records(f->state), ==, 0);
}

static void
test_status_dedicated_cpu(Fixture *f, gconstpointer data)
{
  GPid pid = start_vm(f, "--mode=one-to-one");
  int keeper = the_keeper(f->marker);
  g_autofree char *id = check_record_names(f, pid, keeper);
  g_autoptr(JsonObject) rec = read_record(f->state, id);
  const char *ded = json_object_get_string_member(rec, "dedicated-cpus");
  g_assert_true(strcmp(ded, "0") == 0 || strcmp(ded, "1") == 0);
  /* The vCPU runs on the dedicated CPU. */
  const char *want[] = {ded, NULL};
  g_assert_true(qp_test_wait_vcpu_affinity(pid, want, 0));

  g_autofree char *sd = g_strdup_printf("--state-dir=%s", f->state);
  char *argv[] = {(char *)qp_test_binary(), "status", sd, NULL};
  QpTestRun r;
  qp_test_run(argv, NULL, &r);
  g_test_message("status:\n%s", r.out);
  g_assert_cmpint(r.status, ==, 0);
  g_autofree char *cpus = line_starting(r.out, "  cpus ");
  g_autofree char *want_line = g_strdup_printf(
      "  cpus 0-1 [%s]  D dedicated, S shared (0 vCPUs, 0.00 per CPU), . "
      "free, - not usable",
      strcmp(ded, "0") == 0 ? "D." : ".D");
  g_assert_cmpstr(cpus, ==, want_line);
  g_autofree char *mem_line =
      g_strdup_printf("\n    memory node 0 64 MiB; dedicated cpus %s\n", ded);
  g_assert_nonnull(strstr(r.out, mem_line));
  qp_test_run_clear(&r);

  g_autoptr(JsonObject) st = status_json(f->state, NULL);
  g_assert_cmpstr(json_object_get_string_member(node0(st), "dedicated-cpus"),
                  ==, ded);
  g_assert_cmpint(json_object_get_int_member(node0(st), "shared-vcpus"), ==, 0);

  kill(pid, SIGTERM);
  g_assert_cmpint(qp_test_wait(pid, 30000), >=, 0);
  g_assert_true(qp_test_wait_no_process(f->marker, 20000));
  g_assert_cmpuint(qp_test_count_records(f->state), ==, 0);
}

/* A VM of the fixture named MARKER-SUFFIX with 2 vCPUs and its own -qmp
 * socket QMP, started with OPT; waits until its guest runs. */
static GPid
start_2vcpu_vm(Fixture *f, const char *suffix, const char *opt, const char *qmp)
{
  g_autofree char *qmparg = g_strdup_printf("unix:%s,server=on,wait=off", qmp);
  g_autofree char *name = g_strdup_printf("%s-%s", f->marker, suffix);
  g_autofree char *dir = g_build_filename(f->dir, suffix, NULL);
  g_assert_cmpint(mkdir(dir, 0700), ==, 0);
  const char *opts[] = {opt, NULL};
  const char *extra[] = {"-smp", "2", "-qmp", qmparg, NULL};
  g_autoptr(GPtrArray) cmd = command(f, f->state, name, GUEST_MIB, opts, extra);
  GPid pid = qp_test_spawn((char **)cmd->pdata, NULL, dir);
  if (!qp_test_wait_status(qmp, "running", 60000)) {
    g_autofree char *err = file_text(dir, "stderr");
    g_test_message("launch stderr: %s", err);
    g_assert_not_reached();
  }
  return pid;
}

/* The id of the record whose name is NAME in STATUS (--json). */
static const char *
vm_id_named(JsonObject *status, const char *name)
{
  JsonArray *vms = json_object_get_array_member(status, "vms");
  for (guint i = 0; i < json_array_get_length(vms); i++) {
    JsonObject *vm = json_array_get_object_element(vms, i);
    if (g_strcmp0(json_object_get_string_member(vm, "name"), name) == 0)
      return json_object_get_string_member(vm, "id");
  }
  g_assert_not_reached();
}

/* The host: a one-to-one VM on every CPU of this 2-CPU machine and
 * an auto VM that finds no other CPU and shares them, best effort. Each CPU
 * runs 2 vCPUs, and every view says so. */
static void
test_status_shared_dedicated_cores(Fixture *f, gconstpointer data)
{
  /* This machine's 2 CPUs, as the other one-to-one tests here assume. */
  g_autofree char *qmp_solo = g_build_filename(f->dir, "solo.sock", NULL);
  g_autofree char *qmp_guest = g_build_filename(f->dir, "guest.sock", NULL);
  GPid solo = start_2vcpu_vm(f, "solo", "--mode=one-to-one", qmp_solo);
  const char *want_solo[] = {"0", "1", NULL};
  g_assert_true(qp_test_wait_vcpu_affinity(solo, want_solo, 10000));
  GPid guest = start_2vcpu_vm(f, "guest", "--mode=auto", qmp_guest);
  /* The auto VM's vCPUs float on both CPUs (/proc says it). */
  const char *want_guest[] = {"0-1", "0-1", NULL};
  g_assert_true(qp_test_wait_vcpu_affinity(guest, want_guest, 10000));
  g_autofree char *solo_name = g_strdup_printf("%s-solo", f->marker);
  g_autofree char *guest_name = g_strdup_printf("%s-guest", f->marker);

  g_autoptr(JsonObject) st = status_json(f->state, NULL);
  JsonObject *n = node0(st);
  g_assert_cmpstr(json_object_get_string_member(n, "dedicated-cpus"), ==,
                  "0-1");
  g_assert_cmpstr(json_object_get_string_member(n, "overcommitted-cpus"), ==,
                  "0-1");
  g_assert_cmpfloat(json_object_get_double_member(n, "load-per-cpu"), ==, 2.0);
  JsonArray *groups = json_object_get_array_member(n, "cpu-load");
  g_assert_cmpuint(json_array_get_length(groups), ==, 1);
  g_assert_cmpfloat(
      json_object_get_double_member(json_array_get_object_element(groups, 0),
                                    "vcpus-per-cpu"),
      ==, 2.0);
  /* Each cache domain of the host's (none where every core has its own L3,
   * as on some virtual machines) holds both CPUs here: 2 vCPUs per CPU. */
  g_autoptr(GPtrArray) domains = host_cache_domains_node0();
  JsonArray *usage = json_object_get_array_member(n, "cache-domains");
  g_assert_cmpuint(json_array_get_length(usage), ==, domains->len);
  for (guint d = 0; d < domains->len; d++) {
    JsonObject *cd = json_array_get_object_element(usage, d);
    g_autofree char *name =
        g_strdup_printf("%s %s", json_object_get_string_member(cd, "level"),
                        json_object_get_string_member(cd, "cpus"));
    g_assert_cmpstr(name, ==, g_ptr_array_index(domains, d));
    g_assert_cmpfloat(json_object_get_double_member(cd, "vcpus-per-cpu"), ==,
                      2.0);
  }
  const char *guest_id = vm_id_named(st, guest_name);
  JsonArray *vms = json_object_get_array_member(st, "vms");
  for (guint i = 0; i < json_array_get_length(vms); i++) {
    JsonObject *vm = json_array_get_object_element(vms, i);
    JsonArray *with = json_object_get_array_member(vm, "dedicated-shared-with");
    gboolean is_solo =
        strcmp(json_object_get_string_member(vm, "name"), solo_name) == 0;
    g_assert_cmpuint(json_array_get_length(with), ==, is_solo ? 1 : 0);
    g_assert_true(json_object_get_boolean_member(vm, "best-effort") ==
                  !is_solo);
    if (!is_solo)
      continue;
    JsonObject *w = json_array_get_object_element(with, 0);
    g_assert_cmpstr(json_object_get_string_member(w, "id"), ==, guest_id);
    g_assert_cmpstr(json_object_get_string_member(w, "name"), ==, guest_name);
    g_assert_cmpstr(json_object_get_string_member(w, "cpus"), ==, "0-1");
  }

  g_autofree char *sd = g_strdup_printf("--state-dir=%s", f->state);
  char *argv[] = {(char *)qp_test_binary(), "status", sd, NULL};
  QpTestRun r;
  qp_test_run(argv, NULL, &r);
  g_test_message("status:\n%s", r.out);
  g_assert_cmpint(r.status, ==, 0);
  g_autofree char *cpus = line_starting(r.out, "  cpus ");
  g_assert_cmpstr(cpus, ==,
                  "  cpus 0-1 [OO]  D dedicated, S shared (2 vCPUs, 2.00 per "
                  "CPU with the dedicated vCPUs of 0-1), O overcommitted (more "
                  "vCPUs than CPUs), . free, - not usable");
  g_autofree char *per_cpu = line_starting(r.out, "  vCPUs per CPU: ");
  g_assert_cmpstr(per_cpu, ==,
                  "  vCPUs per CPU: 2.00 on 0-1; overcommitted 0-1");
  for (guint d = 0; d < domains->len; d++) {
    g_autofree char *at =
        g_strdup_printf("  %s: ", (const char *)g_ptr_array_index(domains, d));
    g_autofree char *want =
        g_strdup_printf("%s2 of 2 cores dedicated, 2.00 shared vCPUs (2.00 "
                        "per CPU)",
                        at);
    g_autofree char *line = line_starting(r.out, at);
    g_assert_cmpstr(line, ==, want);
  }
  if (domains->len == 0) {
    g_autofree char *l3_line = line_starting(r.out, "  L3 ");
    g_autofree char *l2_line = line_starting(r.out, "  L2 ");
    g_assert_true(l3_line == NULL && l2_line == NULL);
  }
  /* Under the one-to-one VM's entry, one line naming the other VM. */
  g_autofree char *solo_at = g_strdup_printf("\n  %s  ", solo_name);
  const char *entry = strstr(r.out, solo_at);
  g_assert_nonnull(entry);
  if (entry == NULL) /* for the compiler: the assertion does not return */
    return;
  const char *next = strstr(entry + 1, "\n  ");
  while (next != NULL && g_str_has_prefix(next, "\n    "))
    next = strstr(next + 1, "\n  ");
  g_autofree char *shared_line = g_strdup_printf(
      "\n    dedicated cpus shared: 0-1 with %s (%s)\n", guest_name, guest_id);
  const char *at = strstr(entry, shared_line);
  g_assert_nonnull(at);
  g_assert_true(next == NULL || at < next);
  g_assert_null(strstr(at + strlen(shared_line), "dedicated cpus shared"));
  qp_test_run_clear(&r);

  char *margv[] = {(char *)qp_test_binary(), "status", "--metrics", sd, NULL};
  qp_test_run(margv, NULL, &r);
  g_assert_cmpint(r.status, ==, 0);
  g_autofree char *m_shared = g_strdup_printf(
      "qemu_pin_vm_dedicated_cpus_shared{name=\"%s\",uuid=\"\",claim=\"%s\","
      "mode=\"one-to-one\",node=\"0\"} 2\n",
      solo_name, vm_id_named(st, solo_name));
  g_autofree char *m_best = g_strdup_printf(
      "qemu_pin_vm_best_effort{name=\"%s\",uuid=\"\",claim=\"%s\",mode="
      "\"balanced\"} 1\n",
      guest_name, guest_id);
  g_assert_nonnull(strstr(r.out, m_shared));
  g_assert_nonnull(strstr(r.out, m_best));
  qp_test_run_clear(&r);

  kill(guest, SIGTERM);
  kill(solo, SIGTERM);
  g_assert_cmpint(qp_test_wait(guest, 30000), >=, 0);
  g_assert_cmpint(qp_test_wait(solo, 30000), >=, 0);
  g_assert_true(qp_test_wait_no_process(f->marker, 20000));
  g_assert_cmpuint(qp_test_count_records(f->state), ==, 0);
}

#define VM_UUID "6f1c2a4e-3b5d-4e7f-9a1b-2c3d4e5f6a7b"
#define OTHER_UUID "0e9d8c7b-6a5f-4e3d-8c2b-1a0f9e8d7c6b"

/* Runs qemu-pin [WORD] OPT [OPT2] -- QEMU ... -smp 2 -uuid UUID for the
 * fixture's VM name (WORD "plan", or NULL for a launch); the result in R. */
static void
run_named(Fixture *f, const char *word, const char *opt, const char *opt2,
          const char *uuid, QpTestRun *r)
{
  const char *opts[] = {opt, opt2, NULL};
  const char *extra[] = {"-smp", "2", "-uuid", uuid, NULL};
  g_autoptr(GPtrArray) cmd =
      command(f, f->state, f->marker, GUEST_MIB, opts, extra);
  if (word != NULL)
    g_ptr_array_insert(cmd, 1, g_strdup(word));
  qp_test_run((char **)cmd->pdata, NULL, r);
}

/* `plan` of a running VM's own command line (same -uuid) plans as if the
 * VM were not there and says so; a launch or --dry-run with that -uuid, and
 * a plan of another -uuid, still count it. */
static void
test_plan_ignores_own_record(Fixture *f, gconstpointer data)
{
  g_autofree char *qmparg =
      g_strdup_printf("unix:%s,server=on,wait=off", f->qmp);
  const char *opts[] = {"--mode=one-to-one", NULL};
  const char *extra[] = {"-smp", "2", "-uuid", VM_UUID, "-qmp", qmparg, NULL};
  g_autoptr(GPtrArray) cmd =
      command(f, f->state, f->marker, GUEST_MIB, opts, extra);
  GPid pid = qp_test_spawn((char **)cmd->pdata, NULL, f->dir);
  g_assert_true(qp_test_wait_status(f->qmp, "running", 60000));
  const char *want[] = {"0", "1", NULL};
  g_assert_true(qp_test_wait_vcpu_affinity(pid, want, 10000));
  g_autofree char *id = only_record_id(f->state);

  QpTestRun r;
  run_named(f, "plan", "--mode=one-to-one", NULL, VM_UUID, &r);
  g_test_message("plan: %s%s", r.out, r.err);
  g_assert_cmpint(r.status, ==, 0);
  g_assert_cmpstr(r.err, ==, "");
  g_autoptr(JsonObject) plan = parse_object(r.out);
  qp_test_run_clear(&r);
  JsonObject *ign = json_object_get_object_member(plan, "ignored-record");
  g_assert_nonnull(ign);
  g_assert_cmpstr(json_object_get_string_member(ign, "id"), ==, id);
  g_assert_cmpstr(json_object_get_string_member(ign, "name"), ==, f->marker);
  g_assert_cmpstr(json_object_get_string_member(ign, "uuid"), ==, VM_UUID);
  g_assert_cmpint(json_object_get_int_member(ign, "qemu-pid"), ==, pid);
  g_assert_cmpstr(json_object_get_string_member(ign, "matched-by"), ==, "uuid");
  g_auto(GStrv) sets = qp_test_plan_vcpu_sets(plan);
  g_assert_cmpuint(g_strv_length(sets), ==, 2);
  g_assert_cmpstr(sets[0], !=, sets[1]);

  run_named(f, "plan", "--human", NULL, VM_UUID, &r);
  g_assert_cmpint(r.status, ==, 0);
  g_assert_cmpstr(r.err, ==, "");
  g_autofree char *line = g_strdup_printf(
      "\nignored record  %s (%s), qemu pid %d: the running VM of this -uuid, "
      "planned as if it were not there\n",
      f->marker, id, pid);
  g_assert_nonnull(strstr(r.out, line));
  g_assert_null(strstr(strstr(r.out, line) + strlen(line), "ignored record"));
  qp_test_run_clear(&r);

  /* Another VM's -uuid: the running VM holds every CPU. */
  run_named(f, "plan", "--mode=one-to-one", NULL, OTHER_UUID, &r);
  g_assert_cmpint(r.status, !=, 0);
  g_assert_cmpstr(r.out, ==, "");
  g_assert_cmpuint(qp_test_count_lines(r.err), ==, 1);
  g_assert_nonnull(strstr(r.err, "(2 CPUs dedicated to other VMs)"));
  qp_test_run_clear(&r);

  /* The same -uuid in auto mode for the other VM: best effort, its one
   * warning printed once, in the table. */
  run_named(f, "plan", "--human", NULL, OTHER_UUID, &r);
  g_assert_cmpint(r.status, ==, 0);
  g_assert_cmpstr(r.err, ==, "");
  g_assert_nonnull(strstr(r.out, "mode            balanced (best effort)\n"));
  g_assert_null(strstr(r.out, "ignored record"));
  g_test_message("plan --human:\n%s", r.out);
  const char *warn = strstr(r.out, "\nwarnings:\n  ! ");
  g_assert_nonnull(warn);
  g_auto(GStrv) lines = g_strsplit(warn, "\n", -1);
  guint best_effort = 0;
  for (guint i = 0; lines[i] != NULL; i++) {
    if (!g_str_has_prefix(lines[i], "  ! "))
      continue;
    best_effort += strstr(lines[i], "best effort") != NULL;
    for (guint j = i + 1; lines[j] != NULL; j++)
      g_assert_cmpstr(lines[i], !=, lines[j]);
  }
  g_assert_cmpuint(best_effort, ==, 1);
  qp_test_run_clear(&r);

  /* A launch, and its --dry-run, count the running VM of the same -uuid. */
  run_named(f, NULL, "--dry-run", "--mode=one-to-one", VM_UUID, &r);
  g_assert_cmpint(r.status, !=, 0);
  g_assert_nonnull(strstr(r.err, "does not fit"));
  qp_test_run_clear(&r);
  run_named(f, NULL, "--mode=one-to-one", NULL, VM_UUID, &r);
  g_assert_cmpint(r.status, !=, 0);
  g_assert_cmpuint(qp_test_count_lines(r.err), ==, 1);
  g_assert_nonnull(strstr(r.err, "(2 CPUs dedicated to other VMs)"));
  qp_test_run_clear(&r);
  g_autoptr(GArray) qemus = pids_of_kind(f->marker, FALSE);
  g_assert_cmpuint(qemus->len, ==, 1);
  g_assert_cmpuint(qp_test_count_records(f->state), ==, 1);

  /* status --picture counts one VM in the singular. */
  g_autofree char *svg = g_build_filename(f->dir, "host.svg", NULL);
  g_autofree char *pic = g_strdup_printf("--picture=%s", svg);
  g_autofree char *sd = g_strdup_printf("--state-dir=%s", f->state);
  char *argv[] = {(char *)qp_test_binary(), "status", sd, pic, NULL};
  qp_test_run(argv, NULL, &r);
  g_assert_cmpint(r.status, ==, 0);
  g_autofree char *drew =
      g_strdup_printf("qemu-pin: drew 1 VM on the host in %s\n", svg);
  g_assert_cmpstr(r.out, ==, drew);
  qp_test_run_clear(&r);

  kill(pid, SIGTERM);
  g_assert_cmpint(qp_test_wait(pid, 30000), >=, 0);
  g_assert_true(qp_test_wait_no_process(f->marker, 20000));
  g_assert_cmpuint(qp_test_count_records(f->state), ==, 0);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  signal(SIGABRT, on_abort);
#define ADD(path, fn, data) g_test_add(path, Fixture, data, setup, fn, teardown)
  ADD("/claims/concurrent/exactly-those-that-fit-start-and-run-pinned",
      test_concurrent_launches, NULL);
  ADD("/claims/concurrent/one-to-one-never-dedicates-a-cpu-twice",
      test_concurrent_one_to_one, NULL);
  ADD("/claims/fault/killed-keeper-keeps-claim-until-qemu-dies",
      test_killed_keeper_keeps_claim, NULL);
  ADD("/claims/fault/killed-qemu-released-by-keeper",
      test_killed_qemu_released_by_keeper, NULL);
  ADD("/claims/fault/killed-qemu-pruned-by-next-plan",
      test_killed_qemu_pruned_by_next_plan, NULL);
  ADD("/claims/fault/killed-before-exec-keeper-releases",
      test_killed_before_exec_keeper_releases, NULL);
  ADD("/claims/fault/killed-before-exec-status-prunes",
      test_killed_before_exec_status_prunes, NULL);
  ADD("/claims/fault/killed-before-lock-keeper-leaves",
      test_killed_before_lock_keeper_leaves, NULL);
  ADD("/claims/fault/stopped-before-lock-holds-nothing",
      test_stopped_before_lock_holds_nothing, NULL);
  for (gsize i = 0; i < G_N_ELEMENTS(corrupt_cases); i++) {
    g_autofree char *p = g_strdup_printf("/claims/fault/truncated-record/%s",
                                         corrupt_cases[i].name);
    ADD(p, test_truncated_record, &corrupt_cases[i]);
  }
  for (gsize i = 0; i < G_N_ELEMENTS(state_dir_cases); i++) {
    g_autofree char *p = g_strdup_printf("/claims/fault/state-dir-refused/%s",
                                         state_dir_cases[i].name);
    ADD(p, test_bad_state_dir, &state_dir_cases[i]);
  }
  ADD("/claims/fault/daemonize-record-names-the-daemon",
      test_daemonize_record_names_daemon, NULL);
  ADD("/claims/status/one-balanced-vm", test_status_one_vm, NULL);
  ADD("/claims/status/one-to-one-vm-shows-its-dedicated-cpu",
      test_status_dedicated_cpu, NULL);
  ADD("/claims/status/auto-vm-on-one-to-one-cores-shows-them-shared",
      test_status_shared_dedicated_cores, NULL);
  ADD("/claims/plan/own-running-record-left-out-launch-still-counts-it",
      test_plan_ignores_own_record, NULL);
  return g_test_run();
}
