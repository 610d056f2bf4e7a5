#include "tests/common/qp-test.h"

#include <errno.h>
#include <fcntl.h>
#include <hwloc.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hwloc.h>

const char *
qp_test_binary(void)
{
  const char *b = g_getenv("QP_BINARY");
  g_assert_nonnull(b);
  return b;
}

const char *
qp_test_qemu(void)
{
  const char *q = g_getenv("QP_TEST_QEMU");
  return q ? q : "/usr/bin/qemu-system-x86_64";
}

char *
qp_test_tmpdir(void)
{
  GError *error = NULL;
  char *dir = g_dir_make_tmp("qp-test-XXXXXX", &error);
  g_assert_no_error(error);
  return dir;
}

void
qp_test_rmtree(const char *dir)
{
  if (dir == NULL)
    return;
  g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
  const char *name;
  while (d != NULL && (name = g_dir_read_name(d)) != NULL) {
    g_autofree char *p = g_build_filename(dir, name, NULL);
    struct stat st;
    if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
      qp_test_rmtree(p);
    else
      unlink(p);
  }
  rmdir(dir);
}

char *
qp_test_firmware(const char *dir, QpTestFirmware kind)
{
  static const guint8 exit_code[] = {0xB0, 0x00, 0xE6, 0xF4, 0xF4};
  static const guint8 exit3_code[] = {0xB0, 0x01, 0xE6, 0xF4, 0xF4};
  static const guint8 halt_code[] = {0xFA, 0xF4, 0xEB, 0xFD};
  guint8 *image = g_malloc0(65536);
  const char *name = "halt.fw";
  if (kind == QP_TEST_FW_EXIT) {
    memcpy(image + 0xFFF0, exit_code, sizeof(exit_code));
    name = "exit.fw";
  } else if (kind == QP_TEST_FW_EXIT3) {
    memcpy(image + 0xFFF0, exit3_code, sizeof(exit3_code));
    name = "exit3.fw";
  } else {
    memcpy(image + 0xFFF0, halt_code, sizeof(halt_code));
  }
  char *path = g_build_filename(dir, name, NULL);
  GError *error = NULL;
  g_file_set_contents(path, (const char *)image, 65536, &error);
  g_assert_no_error(error);
  g_free(image);
  return path;
}

void
qp_test_run_clear(QpTestRun *r)
{
  g_clear_pointer(&r->out, g_free);
  g_clear_pointer(&r->err, g_free);
}

static int
decode_status(int wstatus)
{
  if (WIFEXITED(wstatus))
    return WEXITSTATUS(wstatus);
  if (WIFSIGNALED(wstatus))
    return 128 + WTERMSIG(wstatus);
  return -1;
}

/* Reads what FD has now into OUT; FALSE at its end. */
static gboolean
drain(int fd, GString *out)
{
  char buf[4096];
  ssize_t n = read(fd, buf, sizeof(buf));
  if (n > 0) {
    g_string_append_len(out, buf, n);
    return TRUE;
  }
  return n < 0 && (errno == EINTR || errno == EAGAIN);
}

/* In the child before its exec: it dies with the test. A test that fails
 * (or aborts in a library) before it stops the VMs it started leaves no
 * QEMU running: the launcher execs QEMU in place, which keeps the signal,
 * and its keeper, which does not inherit it, then sees QEMU gone and
 * releases the claim. The signal comes when the thread that spawned the
 * child ends: every spawn here is in the test's main thread, or waits for
 * its child. */
static void
die_with_test(gpointer data)
{
  (void)data;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
}

/* How long a command run to completion may take: a launch that should have
 * been refused and runs a guest instead must fail the test, not hang it to
 * meson's timeout without a word. */
#define RUN_DEADLINE_S 240

void
qp_test_run(char **argv, char **envp, QpTestRun *r)
{
  GError *error = NULL;
  memset(r, 0, sizeof(*r));
  GPid pid = 0;
  int out_fd = -1, err_fd = -1;
  g_spawn_async_with_pipes(NULL, argv, envp, G_SPAWN_DO_NOT_REAP_CHILD,
                           die_with_test, NULL, &pid, NULL, &out_fd, &err_fd,
                           &error);
  g_assert_no_error(error);
  GString *out = g_string_new(NULL), *err = g_string_new(NULL);
  gint64 deadline = g_get_monotonic_time() + RUN_DEADLINE_S * G_USEC_PER_SEC;
  while (out_fd >= 0 || err_fd >= 0) {
    struct pollfd p[2] = {{.fd = out_fd, .events = POLLIN},
                          {.fd = err_fd, .events = POLLIN}};
    gint64 left = (deadline - g_get_monotonic_time()) / 1000;
    if (left <= 0) {
      kill(pid, SIGKILL);
      g_test_message("%s did not end within %d s; stderr so far: %s", argv[0],
                     RUN_DEADLINE_S, err->str);
      g_assert_not_reached();
    }
    if (poll(p, 2, (int)MIN(left, 1000)) < 0 && errno != EINTR)
      g_assert_not_reached();
    if (out_fd >= 0 && p[0].revents != 0 && !drain(out_fd, out)) {
      close(out_fd);
      out_fd = -1;
    }
    if (err_fd >= 0 && p[1].revents != 0 && !drain(err_fd, err)) {
      close(err_fd);
      err_fd = -1;
    }
  }
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR)
    ;
  r->out = g_string_free(out, FALSE);
  r->err = g_string_free(err, FALSE);
  r->status = decode_status(wstatus);
}

int
qp_test_pidfile(const char *path)
{
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
  int pid = atoi(text);
  g_assert_cmpint(pid, >, 0);
  return pid;
}

int
qp_test_launch_daemon(char **argv, const char *pidfile)
{
  QpTestRun r;
  qp_test_run(argv, NULL, &r);
  g_assert_cmpstr(r.err, ==, "");
  g_assert_cmpint(r.status, ==, 0);
  qp_test_run_clear(&r);
  return qp_test_pidfile(pidfile);
}

GPid
qp_test_spawn(char **argv, char **envp, const char *dir)
{
  g_autofree char *out = g_build_filename(dir, "stdout", NULL);
  g_autofree char *err = g_build_filename(dir, "stderr", NULL);
  int ofd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int efd = open(err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  g_assert_cmpint(ofd, >=, 0);
  g_assert_cmpint(efd, >=, 0);
  GPid pid = 0;
  GError *error = NULL;
  g_spawn_async_with_fds(NULL, argv, envp, G_SPAWN_DO_NOT_REAP_CHILD,
                         die_with_test, NULL, &pid, -1, ofd, efd, &error);
  g_assert_no_error(error);
  close(ofd);
  close(efd);
  return pid;
}

int
qp_test_wait(GPid pid, guint timeout_ms)
{
  gint64 deadline = g_get_monotonic_time() + (gint64)timeout_ms * 1000;
  for (;;) {
    int wstatus;
    pid_t r = waitpid(pid, &wstatus, WNOHANG);
    if (r == pid)
      return decode_status(wstatus);
    if (g_get_monotonic_time() > deadline)
      return -1;
    g_usleep(5000);
  }
}

gboolean
qp_test_wait_state(int pid, char want, guint timeout_ms)
{
  gint64 deadline = g_get_monotonic_time() + (gint64)timeout_ms * 1000;
  do {
    g_autofree char *state = qp_test_task_field(pid, pid, "State");
    if (state != NULL && state[0] == want)
      return TRUE;
    g_usleep(5000);
  } while (g_get_monotonic_time() < deadline);
  return FALSE;
}

char *
qp_test_task_field(int pid, int tid, const char *field)
{
  g_autofree char *path = g_strdup_printf("/proc/%d/task/%d/status", pid, tid);
  g_autofree char *text = NULL;
  if (!g_file_get_contents(path, &text, NULL, NULL))
    return NULL;
  g_autofree char *key = g_strdup_printf("\n%s:", field);
  const char *p = strstr(text, key);
  if (p == NULL)
    return NULL;
  p += strlen(key);
  const char *e = strchr(p, '\n');
  return g_strstrip(g_strndup(p, e ? (gsize)(e - p) : strlen(p)));
}

GArray *
qp_test_vcpu_threads(int pid)
{
  GArray *tids = g_array_new(FALSE, TRUE, sizeof(int));
  g_autofree char *task = g_strdup_printf("/proc/%d/task", pid);
  g_autoptr(GDir) d = g_dir_open(task, 0, NULL);
  const char *name;
  while (d != NULL && (name = g_dir_read_name(d)) != NULL) {
    g_autofree char *comm_path = g_strdup_printf("%s/%s/comm", task, name);
    g_autofree char *comm = NULL;
    if (!g_file_get_contents(comm_path, &comm, NULL, NULL))
      continue;
    int idx;
    if (sscanf(comm, "CPU %d/", &idx) != 1 || idx < 0 || idx > 4096)
      continue;
    if ((guint)idx >= tids->len)
      g_array_set_size(tids, (guint)idx + 1);
    g_array_index(tids, int, idx) = atoi(name);
  }
  return tids;
}

gboolean
qp_test_wait_vcpu_affinity(int pid, const char *const *want, guint timeout_ms)
{
  guint n = g_strv_length((char **)want);
  gint64 deadline = g_get_monotonic_time() + (gint64)timeout_ms * 1000;
  do {
    g_autoptr(GArray) tids = qp_test_vcpu_threads(pid);
    gboolean ok = tids->len == n;
    for (guint i = 0; ok && i < n; i++) {
      int tid = g_array_index(tids, int, i);
      if (*want[i] == '\0') {
        ok = tid == 0;
        continue;
      }
      g_autofree char *have =
          tid ? qp_test_task_field(pid, tid, "Cpus_allowed_list") : NULL;
      ok = have != NULL && strcmp(have, want[i]) == 0;
    }
    if (ok)
      return TRUE;
    g_usleep(10000);
  } while (g_get_monotonic_time() < deadline);
  return FALSE;
}

char **
qp_test_numa_maps_of_mappings(int pid, guint64 size_kib)
{
  g_autoptr(GPtrArray) policies = g_ptr_array_new();
  g_autofree char *smaps_path = g_strdup_printf("/proc/%d/smaps", pid);
  g_autofree char *numa_path = g_strdup_printf("/proc/%d/numa_maps", pid);
  g_autofree char *maps_text = NULL;
  g_autofree char *numa = NULL;
  if (!g_file_get_contents(smaps_path, &maps_text, NULL, NULL) ||
      !g_file_get_contents(numa_path, &numa, NULL, NULL)) {
    g_ptr_array_add(policies, NULL);
    return (char **)g_ptr_array_free(g_steal_pointer(&policies), FALSE);
  }
  /* Start addresses of mappings of exactly SIZE_KIB, as numa_maps writes
   * them (no leading zeros). */
  g_autoptr(GHashTable) starts =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  g_auto(GStrv) lines = g_strsplit(maps_text, "\n", -1);
  const char *current = NULL;
  for (guint i = 0; lines[i] != NULL; i++) {
    const char *l = lines[i];
    const char *dash = strchr(l, '-');
    const char *space = strchr(l, ' ');
    if (g_ascii_isxdigit(l[0]) && dash != NULL && space != NULL &&
        dash < space) {
      /* Guest RAM is read-write; a thread's new malloc arena reserves
       * 128 MiB without access for a moment ("---p") before trimming it:
       * not a backend. */
      current = strncmp(space + 1, "rw", 2) == 0 ? l : NULL;
      continue;
    }
    guint64 kib;
    if (current != NULL &&
        sscanf(l, "Size: %" G_GUINT64_FORMAT " kB", &kib) == 1 &&
        kib == size_kib) {
      const char *s = current;
      while (*s == '0' && s[1] != '-')
        s++;
      g_hash_table_add(starts, g_ascii_strdown(s, strchr(s, '-') - s));
    }
  }
  g_auto(GStrv) nl = g_strsplit(numa, "\n", -1);
  for (guint i = 0; nl[i] != NULL; i++) {
    g_auto(GStrv) f = g_strsplit(nl[i], " ", 2);
    if (f[0] != NULL && f[1] != NULL && g_hash_table_contains(starts, f[0]))
      g_ptr_array_add(policies, g_strdup(f[1]));
  }
  g_ptr_array_add(policies, NULL);
  return (char **)g_ptr_array_free(g_steal_pointer(&policies), FALSE);
}

char **
qp_test_policies_of_mappings(int pid, guint64 size_kib)
{
  char **lines = qp_test_numa_maps_of_mappings(pid, size_kib);
  for (guint i = 0; lines[i] != NULL; i++)
    *strchrnul(lines[i], ' ') = '\0';
  return lines;
}

char **
qp_test_wait_mappings(int pid, guint64 size_kib, guint n, guint timeout_ms)
{
  gint64 deadline = g_get_monotonic_time() + (gint64)timeout_ms * 1000;
  for (;;) {
    char **lines = qp_test_numa_maps_of_mappings(pid, size_kib);
    if (g_strv_length(lines) == n || g_get_monotonic_time() > deadline)
      return lines;
    g_strfreev(lines);
    g_usleep(20000);
  }
}

guint64
qp_test_numa_maps_resident_kib(const char *line, gboolean *on_policy_nodes)
{
  hwloc_bitmap_t on = hwloc_bitmap_alloc();
  guint64 pages = 0, page_kib = 4;
  g_auto(GStrv) items = g_strsplit(line, " ", -1);
  for (guint i = 0; items[i] != NULL; i++) {
    guint node;
    guint64 n;
    if (sscanf(items[i], "N%u=%" G_GUINT64_FORMAT, &node, &n) == 2) {
      pages += n;
      hwloc_bitmap_set(on, node);
    } else {
      sscanf(items[i], "kernelpagesize_kB=%" G_GUINT64_FORMAT, &page_kib);
    }
  }
  if (on_policy_nodes != NULL) {
    /* "bind:0-1", "prefer:0", "interleave:0,2"; "default" has no nodes. */
    const char *colon = strchr(items[0] ? items[0] : "", ':');
    hwloc_bitmap_t policy = hwloc_bitmap_alloc();
    if (colon == NULL)
      hwloc_bitmap_fill(policy);
    else
      hwloc_bitmap_list_sscanf(policy, colon + 1);
    *on_policy_nodes = hwloc_bitmap_isincluded(on, policy);
    hwloc_bitmap_free(policy);
  }
  hwloc_bitmap_free(on);
  return pages * page_kib;
}

GArray *
qp_test_pids_with(const char *marker)
{
  GArray *pids = g_array_new(FALSE, FALSE, sizeof(int));
  g_autoptr(GDir) d = g_dir_open("/proc", 0, NULL);
  const char *name;
  int self = getpid();
  while (d != NULL && (name = g_dir_read_name(d)) != NULL) {
    int pid = atoi(name);
    if (pid <= 0 || pid == self)
      continue;
    g_autofree char *path = g_strdup_printf("/proc/%d/cmdline", pid);
    g_autofree char *cmd = NULL;
    gsize len = 0;
    if (!g_file_get_contents(path, &cmd, &len, NULL) || len == 0)
      continue;
    for (gsize i = 0; i + 1 < len; i++)
      if (cmd[i] == '\0')
        cmd[i] = ' ';
    if (strstr(cmd, marker) != NULL) {
      /* A zombie is gone for our purposes. */
      g_autofree char *stat_path = g_strdup_printf("/proc/%d/stat", pid);
      g_autofree char *st = NULL;
      if (g_file_get_contents(stat_path, &st, NULL, NULL)) {
        const char *p = strrchr(st, ')');
        if (p != NULL && p[1] == ' ' && p[2] == 'Z')
          continue;
      }
      g_array_append_val(pids, pid);
    }
  }
  return pids;
}

gboolean
qp_test_wait_no_process(const char *marker, guint timeout_ms)
{
  gint64 deadline = g_get_monotonic_time() + (gint64)timeout_ms * 1000;
  do {
    g_autoptr(GArray) pids = qp_test_pids_with(marker);
    if (pids->len == 0)
      return TRUE;
    g_usleep(10000);
  } while (g_get_monotonic_time() < deadline);
  /* Say who is still there, so that a failure can be understood. */
  g_autoptr(GArray) left = qp_test_pids_with(marker);
  for (guint i = 0; i < left->len; i++) {
    int pid = g_array_index(left, int, i);
    g_autofree char *path = g_strdup_printf("/proc/%d/cmdline", pid);
    g_autofree char *cmd = NULL;
    gsize len = 0;
    if (!g_file_get_contents(path, &cmd, &len, NULL))
      continue;
    for (gsize k = 0; k + 1 < len; k++)
      if (cmd[k] == '\0')
        cmd[k] = ' ';
    g_autofree char *stat_path = g_strdup_printf("/proc/%d/stat", pid);
    g_autofree char *st = NULL;
    g_file_get_contents(stat_path, &st, NULL, NULL);
    g_autofree char *wchan_path = g_strdup_printf("/proc/%d/wchan", pid);
    g_autofree char *wchan = NULL;
    g_file_get_contents(wchan_path, &wchan, NULL, NULL);
    g_test_message("still there: pid %d [%s] wchan %s stat %s", pid, cmd,
                   wchan ? wchan : "?", st ? st : "?");
  }
  return FALSE;
}

guint
qp_test_count_lines(const char *text)
{
  guint n = 0;
  for (const char *p = text; *p; p++)
    n += *p == '\n';
  return n;
}

guint
qp_test_count_records(const char *dir)
{
  guint n = 0;
  g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
  const char *name;
  while (d != NULL && (name = g_dir_read_name(d)) != NULL)
    if (g_str_has_suffix(name, ".json") && name[0] != '.')
      n++;
  return n;
}

JsonObject *
qp_test_record(const char *dir)
{
  g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
  const char *name;
  g_autofree char *found = NULL;
  guint n = 0;
  while (d != NULL && (name = g_dir_read_name(d)) != NULL) {
    if (name[0] == '.' || !g_str_has_suffix(name, ".json"))
      continue;
    n++;
    g_free(found);
    found = g_build_filename(dir, name, NULL);
  }
  if (n != 1)
    return NULL;
  g_autoptr(JsonParser) p = json_parser_new();
  if (!json_parser_load_from_file(p, found, NULL))
    return NULL;
  JsonNode *root = json_parser_get_root(p);
  if (!JSON_NODE_HOLDS_OBJECT(root))
    return NULL;
  return json_object_ref(json_node_get_object(root));
}

/* The string member MEMBER of the one record in DIR, or NULL. */
static char *
record_string(const char *dir, const char *member)
{
  g_autoptr(JsonObject) rec = qp_test_record(dir);
  if (rec == NULL)
    return NULL;
  return g_strdup(
      json_object_get_string_member_with_default(rec, member, NULL));
}

gboolean
qp_test_wait_record_string(const char *dir, const char *member,
                           const char *want, guint timeout_ms)
{
  gint64 deadline = g_get_monotonic_time() + (gint64)timeout_ms * 1000;
  g_autofree char *have = NULL;
  do {
    g_free(have);
    have = record_string(dir, member);
    if (g_strcmp0(have, want) == 0)
      return TRUE;
    g_usleep(20000);
  } while (g_get_monotonic_time() < deadline);
  g_test_message("the record's %s is %s, not %s", member,
                 have ? have : "(no record)", want);
  return FALSE;
}

static hwloc_bitmap_t
cpu_set_of(const char *list)
{
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  g_assert_cmpint(hwloc_bitmap_list_sscanf(set, list), ==, 0);
  return set;
}

void
qp_test_set_affinity(int tid, const char *list)
{
  hwloc_bitmap_t set = cpu_set_of(list);
  cpu_set_t mask;
  CPU_ZERO(&mask);
  int c;
  hwloc_bitmap_foreach_begin(c, set)
  {
    if (c < CPU_SETSIZE)
      CPU_SET(c, &mask);
  }
  hwloc_bitmap_foreach_end();
  hwloc_bitmap_free(set);
  g_assert_cmpint(sched_setaffinity(tid, sizeof(mask), &mask), ==, 0);
}

char *
qp_test_cpus_without_core_of(const char *list, const char *cpu)
{
  g_autofree char *path = g_strdup_printf(
      "/sys/devices/system/cpu/cpu%s/topology/thread_siblings_list", cpu);
  g_autofree char *siblings = NULL;
  if (!g_file_get_contents(path, &siblings, NULL, NULL))
    siblings = g_strdup(cpu);
  hwloc_bitmap_t set = cpu_set_of(list);
  hwloc_bitmap_t core = cpu_set_of(g_strstrip(siblings));
  hwloc_bitmap_andnot(set, set, core);
  char *text = NULL;
  hwloc_bitmap_list_asprintf(&text, set);
  char *out = g_strdup(text);
  free(text);
  hwloc_bitmap_free(set);
  hwloc_bitmap_free(core);
  return out;
}

JsonObject *
qp_test_plan(char **args)
{
  g_autoptr(GPtrArray) argv = g_ptr_array_new();
  g_ptr_array_add(argv, (char *)qp_test_binary());
  g_ptr_array_add(argv, "plan");
  for (guint i = 0; args[i] != NULL; i++)
    g_ptr_array_add(argv, args[i]);
  g_ptr_array_add(argv, NULL);
  QpTestRun r;
  qp_test_run((char **)argv->pdata, NULL, &r);
  if (r.status != 0)
    g_test_message("qemu-pin plan: %s", r.err);
  g_assert_cmpint(r.status, ==, 0);
  g_autoptr(JsonParser) p = json_parser_new();
  GError *error = NULL;
  json_parser_load_from_data(p, r.out, -1, &error);
  g_assert_no_error(error);
  JsonObject *o =
      json_object_ref(json_node_get_object(json_parser_get_root(p)));
  qp_test_run_clear(&r);
  return o;
}

char **
qp_test_plan_vcpu_sets(JsonObject *plan)
{
  JsonArray *a = json_object_get_array_member(plan, "vcpus");
  guint n = json_array_get_length(a);
  char **sets = g_new0(char *, n + 1);
  for (guint i = 0; i < n; i++) {
    JsonObject *v = json_array_get_object_element(a, i);
    guint idx = (guint)json_object_get_int_member(v, "index");
    g_assert_cmpuint(idx, <, n);
    sets[idx] = g_strdup(json_object_get_string_member(v, "cpus"));
  }
  return sets;
}

static gboolean
read_line(int fd, GString *buf)
{
  g_string_truncate(buf, 0);
  char c;
  for (;;) {
    ssize_t n = read(fd, &c, 1);
    if (n <= 0)
      return FALSE;
    if (c == '\n')
      return TRUE;
    g_string_append_c(buf, c);
  }
}

int
qp_test_connect_unix(const char *path)
{
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -1;
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  g_strlcpy(sa.sun_path, path, sizeof(sa.sun_path));
  if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

JsonNode *
qp_test_qmp_command(const char *path, const char *command)
{
  return qp_test_qmp_execute(path, command, NULL);
}

JsonNode *
qp_test_qmp_execute(const char *path, const char *command,
                    const char *arguments)
{
  int fd = qp_test_connect_unix(path);
  if (fd < 0)
    return NULL;
  g_autoptr(GString) line = g_string_new(NULL);
  g_autofree char *cmd = g_strdup_printf(
      "{\"execute\":\"qmp_capabilities\"}\n{\"execute\":\"%s\",%s%s%s"
      "\"id\":1}\n",
      command, arguments ? "\"arguments\":" : "", arguments ? arguments : "",
      arguments ? "," : "");
  JsonNode *result = NULL;
  if (!read_line(fd, line) || write(fd, cmd, strlen(cmd)) < 0)
    goto out;
  while (read_line(fd, line)) {
    g_autoptr(JsonParser) p = json_parser_new();
    if (!json_parser_load_from_data(p, line->str, -1, NULL))
      continue;
    JsonObject *o = json_node_get_object(json_parser_get_root(p));
    if (o == NULL || !json_object_has_member(o, "id"))
      continue;
    if (json_object_has_member(o, "return"))
      result = json_node_copy(json_object_get_member(o, "return"));
    break;
  }
out:
  close(fd);
  return result;
}

char *
qp_test_query_status(const char *path)
{
  g_autoptr(JsonNode) r = qp_test_qmp_command(path, "query-status");
  if (r == NULL || !JSON_NODE_HOLDS_OBJECT(r))
    return NULL;
  return g_strdup(json_object_get_string_member_with_default(
      json_node_get_object(r), "status", ""));
}

gboolean
qp_test_wait_status(const char *path, const char *want, guint timeout_ms)
{
  gint64 deadline = g_get_monotonic_time() + (gint64)timeout_ms * 1000;
  do {
    g_autofree char *s = qp_test_query_status(path);
    if (s != NULL && strcmp(s, want) == 0)
      return TRUE;
    g_usleep(20000);
  } while (g_get_monotonic_time() < deadline);
  return FALSE;
}

static void
stdin_from(gpointer data)
{
  dup2(GPOINTER_TO_INT(data), 0);
}

/* The int member NAME of OBJ, or -1. */
static gint64
member_int(JsonObject *obj, const char *name)
{
  JsonNode *n = json_object_get_member(obj, name);
  return n != NULL && JSON_NODE_HOLDS_VALUE(n) ? json_node_get_int(n) : -1;
}

/* The possible vCPUs of query-hotpluggable-cpus: the topology is the
 * highest id of each level plus one; a vCPU's index is socket-major, as
 * QEMU's x86_topo_ids_from_idx() numbers it. */
static void
view_cpus(QpTestQemuView *v, JsonArray *cpus)
{
  guint n = json_array_get_length(cpus);
  gint64 dies = 1, cores = 1, threads = 1;
  for (guint i = 0; i < n; i++) {
    JsonObject *p = json_object_get_object_member(
        json_array_get_object_element(cpus, i), "props");
    dies = MAX(dies, member_int(p, "die-id") + 1);
    cores = MAX(cores, member_int(p, "core-id") + 1);
    threads = MAX(threads, member_int(p, "thread-id") + 1);
  }
  v->maxcpus = n;
  v->cpu_node = g_new(int, MAX(n, 1));
  v->cpu_die = g_new(int, MAX(n, 1));
  for (guint i = 0; i < n; i++)
    v->cpu_node[i] = v->cpu_die[i] = -1;
  for (guint i = 0; i < n; i++) {
    JsonObject *p = json_object_get_object_member(
        json_array_get_object_element(cpus, i), "props");
    gint64 index = ((MAX(member_int(p, "socket-id"), 0) * dies +
                     MAX(member_int(p, "die-id"), 0)) *
                        cores +
                    MAX(member_int(p, "core-id"), 0)) *
                       threads +
                   MAX(member_int(p, "thread-id"), 0);
    if (index >= 0 && index < (gint64)n) {
      v->cpu_node[index] = (int)member_int(p, "node-id");
      v->cpu_die[index] = (int)(MAX(member_int(p, "socket-id"), 0) * dies +
                                MAX(member_int(p, "die-id"), 0));
    }
  }
}

static void
view_numa(QpTestQemuView *v, const char *text)
{
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  guint64 nodes = 0;
  if (lines[0] != NULL &&
      sscanf(lines[0], "%" G_GUINT64_FORMAT " nodes", &nodes) != 1)
    nodes = 0;
  v->n_nodes = (guint)nodes;
  v->node_mib = g_new0(guint64, MAX(nodes, 1));
  for (guint i = 1; lines[i] != NULL; i++) {
    guint node;
    guint64 mib;
    if (sscanf(lines[i], "node %u size: %" G_GUINT64_FORMAT " MB", &node,
               &mib) == 2 &&
        node < nodes)
      v->node_mib[node] = mib;
  }
}

void
qp_test_qemu_view(const char *const *args, QpTestQemuView *v)
{
  static const char commands[] =
      "{\"execute\":\"qmp_capabilities\"}\n"
      "{\"execute\":\"query-memory-size-summary\"}\n"
      "{\"execute\":\"query-cpus-fast\"}\n"
      "{\"execute\":\"query-hotpluggable-cpus\"}\n"
      "{\"execute\":\"human-monitor-command\","
      "\"arguments\":{\"command-line\":\"info numa\"}}\n"
      "{\"execute\":\"quit\"}\n";
  memset(v, 0, sizeof(*v));
  int fd = memfd_create("qmp-commands", MFD_CLOEXEC);
  g_assert_cmpint(fd, >=, 0);
  g_assert_cmpint(write(fd, commands, sizeof(commands) - 1), ==,
                  (ssize_t)sizeof(commands) - 1);
  lseek(fd, 0, SEEK_SET);

  g_autoptr(GPtrArray) argv = g_ptr_array_new();
  const char *common[] = {qp_test_qemu(), "-accel", "tcg",  "-display", "none",
                          "-nodefaults",  "-S",     "-qmp", "stdio"};
  for (guint i = 0; i < G_N_ELEMENTS(common); i++)
    g_ptr_array_add(argv, (char *)common[i]);
  for (guint i = 0; args[i] != NULL; i++)
    g_ptr_array_add(argv, (char *)args[i]);
  g_ptr_array_add(argv, NULL);

  g_autofree char *out = NULL;
  int wstatus = 0;
  GError *error = NULL;
  g_spawn_sync(NULL, (char **)argv->pdata, NULL, G_SPAWN_DEFAULT, stdin_from,
               GINT_TO_POINTER(fd), &out, &v->err, &wstatus, &error);
  g_assert_no_error(error);
  close(fd);
  v->status = decode_status(wstatus);

  /* One reply (or event) per line; the returns come in command order. */
  g_autoptr(GPtrArray) returns =
      g_ptr_array_new_with_free_func((GDestroyNotify)json_node_unref);
  g_auto(GStrv) lines = g_strsplit(out, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++) {
    g_autoptr(JsonParser) parser = json_parser_new();
    if (!json_parser_load_from_data(parser, lines[i], -1, NULL))
      continue;
    JsonNode *root = json_parser_get_root(parser);
    if (root == NULL || !JSON_NODE_HOLDS_OBJECT(root))
      continue;
    JsonNode *ret =
        json_object_get_member(json_node_get_object(root), "return");
    if (ret != NULL)
      g_ptr_array_add(returns, json_node_copy(ret));
  }
  if (returns->len < 6)
    return;
  v->started = TRUE;
  v->ram_mib = (guint64)json_object_get_int_member(
                   json_node_get_object(returns->pdata[1]), "base-memory") >>
               20;
  JsonArray *running = json_node_get_array(returns->pdata[2]);
  v->vcpus = json_array_get_length(running);
  hwloc_bitmap_t boot = hwloc_bitmap_alloc();
  for (guint i = 0; i < v->vcpus; i++) {
    gint64 index =
        member_int(json_array_get_object_element(running, i), "cpu-index");
    if (index >= 0)
      hwloc_bitmap_set(boot, (unsigned)index);
  }
  char *list = NULL;
  g_assert_cmpint(hwloc_bitmap_list_asprintf(&list, boot), >=, 0);
  v->boot = g_strdup(list);
  free(list);
  hwloc_bitmap_free(boot);
  view_cpus(v, json_node_get_array(returns->pdata[3]));
  g_autofree char *numa = g_strdup(json_node_get_string(returns->pdata[4]));
  view_numa(v, numa);
}

void
qp_test_qemu_view_clear(QpTestQemuView *v)
{
  g_clear_pointer(&v->err, g_free);
  g_clear_pointer(&v->boot, g_free);
  g_clear_pointer(&v->cpu_node, g_free);
  g_clear_pointer(&v->cpu_die, g_free);
  g_clear_pointer(&v->node_mib, g_free);
}

char *
qp_test_file_text(const char *dir, const char *name)
{
  g_autofree char *path = g_build_filename(dir, name, NULL);
  char *text = NULL;
  g_file_get_contents(path, &text, NULL, NULL);
  return text ? text : g_strdup("");
}

gint64
qp_test_read_number(const char *path)
{
  g_autofree char *text = NULL;
  if (!g_file_get_contents(path, &text, NULL, NULL))
    return -1;
  return g_ascii_strtoll(text, NULL, 10);
}

gboolean
qp_test_write_number(const char *path, gint64 n)
{
  g_autofree char *text = g_strdup_printf("%" G_GINT64_FORMAT "\n", n);
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  gboolean ok =
      fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text);
  if (!ok)
    g_test_message("writing %s: %s", path, g_strerror(errno));
  if (fd >= 0)
    close(fd);
  return ok;
}

void
qp_test_stop_released(GPid pid, const char *marker, const char *state)
{
  kill(pid, SIGTERM);
  g_assert_cmpint(qp_test_wait(pid, 20000), >=, 0);
  g_assert_true(qp_test_wait_no_process(marker, 20000));
  g_assert_cmpuint(qp_test_count_records(state), ==, 0);
}

static int guard_fd = -1;
static GPid guard_pid = 0;

/* The guard's child: waits for EOF on FD, then kills MARKER's processes. */
static void G_GNUC_NORETURN
guard_run(int fd, const char *marker)
{
  signal(SIGINT, SIG_IGN);
  signal(SIGTERM, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  setsid();
  for (int other = 3; other < 1024; other++)
    if (other != fd)
      close(other);
  char c;
  while (read(fd, &c, 1) < 0 && errno == EINTR)
    ;
  for (int round = 0; round < 500; round++) {
    g_autoptr(GArray) left = qp_test_pids_with(marker);
    if (left->len == 0)
      break;
    for (guint i = 0; i < left->len; i++)
      kill(g_array_index(left, int, i), SIGKILL);
    g_usleep(10000);
  }
  _exit(0);
}

void
qp_test_guard_start(const char *marker)
{
  g_assert_cmpint(guard_fd, <, 0);
  int p[2];
  g_assert_cmpint(pipe2(p, O_CLOEXEC), ==, 0);
  pid_t pid = fork();
  g_assert_cmpint(pid, >=, 0);
  if (pid == 0) {
    close(p[1]);
    guard_run(p[0], marker);
  }
  close(p[0]);
  guard_fd = p[1];
  guard_pid = pid;
}

void
qp_test_guard_stop(void)
{
  if (guard_fd < 0)
    return;
  close(guard_fd);
  guard_fd = -1;
  waitpid(guard_pid, NULL, 0);
  guard_pid = 0;
}
