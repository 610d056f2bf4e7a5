#include "tests/orchestrators/orch-common.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hwloc.h>

char *
orch_dropin(const char *dir, const char *name)
{
  g_autofree char *bin = g_build_filename(dir, "bin", NULL);
  g_assert_cmpint(g_mkdir_with_parents(bin, 0755), ==, 0);
  char *link = g_build_filename(bin, name, NULL);
  g_assert_cmpint(symlink(qp_test_binary(), link), ==, 0);
  return link;
}

char *
orch_write(const char *dir, const char *name, const char *text)
{
  char *path = g_build_filename(dir, name, NULL);
  GError *error = NULL;
  g_file_set_contents(path, text, -1, &error);
  g_assert_no_error(error);
  return path;
}

char **
orch_env(const char *const *extra)
{
  g_auto(GStrv) env = g_get_environ();
  GPtrArray *out = g_ptr_array_new();
  for (guint i = 0; env[i] != NULL; i++)
    if (!g_str_has_prefix(env[i], "QEMU_PIN_"))
      g_ptr_array_add(out, g_strdup(env[i]));
  for (guint i = 0; extra != NULL && extra[i] != NULL; i++)
    g_ptr_array_add(out, g_strdup(extra[i]));
  g_ptr_array_add(out, NULL);
  return (char **)g_ptr_array_free(out, FALSE);
}

static gboolean
read_line(int fd, GString *buf, gint64 deadline)
{
  g_string_truncate(buf, 0);
  for (;;) {
    char c;
    ssize_t n = read(fd, &c, 1);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
      if (g_get_monotonic_time() > deadline)
        return FALSE;
      continue;
    }
    if (n <= 0)
      return FALSE;
    if (c == '\n')
      return TRUE;
    g_string_append_c(buf, c);
  }
}

JsonNode *
orch_qmp(const char *path, const char *command, char **error_text)
{
  if (error_text)
    *error_text = NULL;
  int fd = qp_test_connect_unix(path);
  if (fd < 0) {
    if (error_text)
      *error_text = g_strdup_printf("connect %s: %s", path, g_strerror(errno));
    return NULL;
  }
  struct timeval tv = {30, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  gint64 deadline = g_get_monotonic_time() + 30 * G_USEC_PER_SEC;
  g_autoptr(GString) line = g_string_new(NULL);
  g_autofree char *text = g_strdup_printf(
      "{\"execute\":\"qmp_capabilities\",\"id\":\"cap\"}\n%s\n", command);
  JsonNode *result = NULL;
  if (!read_line(fd, line, deadline) ||
      write(fd, text, strlen(text)) != (ssize_t)strlen(text)) {
    if (error_text)
      *error_text = g_strdup("no greeting, or the write failed");
    goto out;
  }
  /* Two replies: the capabilities', then ours; events in between. */
  guint replies = 0;
  while (read_line(fd, line, deadline)) {
    g_autoptr(JsonParser) p = json_parser_new();
    if (!json_parser_load_from_data(p, line->str, -1, NULL))
      continue;
    JsonObject *o = json_node_get_object(json_parser_get_root(p));
    if (o == NULL || (!json_object_has_member(o, "return") &&
                      !json_object_has_member(o, "error")))
      continue;
    if (++replies < 2)
      continue;
    if (json_object_has_member(o, "return")) {
      result = json_node_copy(json_object_get_member(o, "return"));
    } else if (error_text) {
      JsonObject *e = json_object_get_object_member(o, "error");
      *error_text = g_strdup(json_object_get_string_member_with_default(
          e, "desc", "(no description)"));
    }
    break;
  }
  if (result == NULL && error_text && *error_text == NULL)
    *error_text = g_strdup("no reply");
out:
  close(fd);
  return result;
}

char *
orch_status(const char *path)
{
  g_autoptr(JsonNode) r =
      orch_qmp(path, "{\"execute\":\"query-status\"}", NULL);
  if (r == NULL || !JSON_NODE_HOLDS_OBJECT(r))
    return NULL;
  return g_strdup(
      json_object_get_string_member(json_node_get_object(r), "status"));
}

gboolean
orch_wait_status(const char *path, const char *want, guint timeout_ms)
{
  gint64 deadline = g_get_monotonic_time() + (gint64)timeout_ms * 1000;
  g_autofree char *last = NULL;
  do {
    g_free(last);
    last = orch_status(path);
    if (last != NULL && strcmp(last, want) == 0)
      return TRUE;
    g_usleep(20000);
  } while (g_get_monotonic_time() < deadline);
  g_test_message("status over %s is %s, not %s", path,
                 last ? last : "(no answer)", want);
  return FALSE;
}

JsonObject *
orch_record(const char *dir)
{
  return qp_test_record(dir);
}

gboolean
orch_wait_records(const char *dir, guint n, guint timeout_ms)
{
  gint64 deadline = g_get_monotonic_time() + (gint64)timeout_ms * 1000;
  guint have;
  do {
    have = qp_test_count_records(dir);
    if (have == n)
      return TRUE;
    g_usleep(20000);
  } while (g_get_monotonic_time() < deadline);
  g_test_message("%s holds %u records, not %u", dir, have, n);
  return FALSE;
}

char **
orch_vcpu_affinities(int pid)
{
  g_autoptr(GArray) tids = qp_test_vcpu_threads(pid);
  char **out = g_new0(char *, tids->len + 1);
  for (guint i = 0; i < tids->len; i++) {
    int tid = g_array_index(tids, int, i);
    char *s = tid ? qp_test_task_field(pid, tid, "Cpus_allowed_list") : NULL;
    out[i] = s ? s : g_strdup("");
  }
  return out;
}

void
orch_set_vcpu_affinities(int pid, const char *cpus)
{
  g_autoptr(GArray) tids = qp_test_vcpu_threads(pid);
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  g_assert_cmpint(hwloc_bitmap_list_sscanf(set, cpus), ==, 0);
  cpu_set_t mask;
  CPU_ZERO(&mask);
  int i;
  hwloc_bitmap_foreach_begin(i, set)
  {
    if (i < CPU_SETSIZE)
      CPU_SET(i, &mask);
  }
  hwloc_bitmap_foreach_end();
  hwloc_bitmap_free(set);
  for (guint k = 0; k < tids->len; k++) {
    int tid = g_array_index(tids, int, k);
    if (tid > 0)
      g_assert_cmpint(sched_setaffinity(tid, sizeof(mask), &mask), ==, 0);
  }
}

char *
orch_own_cpus(void)
{
  cpu_set_t mask;
  g_assert_cmpint(sched_getaffinity(0, sizeof(mask), &mask), ==, 0);
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  for (int i = 0; i < CPU_SETSIZE; i++)
    if (CPU_ISSET(i, &mask))
      hwloc_bitmap_set(set, (unsigned)i);
  char *text = NULL;
  hwloc_bitmap_list_asprintf(&text, set);
  hwloc_bitmap_free(set);
  char *out = g_strdup(text);
  free(text);
  return out;
}

char *
orch_union(char **sets)
{
  hwloc_bitmap_t all = hwloc_bitmap_alloc();
  hwloc_bitmap_t one = hwloc_bitmap_alloc();
  for (guint i = 0; sets[i] != NULL; i++) {
    g_assert_cmpint(hwloc_bitmap_list_sscanf(one, sets[i]), ==, 0);
    hwloc_bitmap_or(all, all, one);
  }
  char *text = NULL;
  hwloc_bitmap_list_asprintf(&text, all);
  hwloc_bitmap_free(all);
  hwloc_bitmap_free(one);
  char *out = g_strdup(text);
  free(text);
  return out;
}

guint64
orch_start_time(int pid)
{
  g_autofree char *path = g_strdup_printf("/proc/%d/stat", pid);
  g_autofree char *text = NULL;
  if (!g_file_get_contents(path, &text, NULL, NULL))
    return 0;
  const char *p = strrchr(text, ')');
  if (p == NULL)
    return 0;
  g_auto(GStrv) f = g_strsplit(p + 2, " ", -1);
  /* f[0] is field 3 (state); field 22 is f[19]. */
  if (g_strv_length(f) < 20)
    return 0;
  return g_ascii_strtoull(f[19], NULL, 10);
}

char **
orch_cmdline(int pid)
{
  g_autofree char *path = g_strdup_printf("/proc/%d/cmdline", pid);
  g_autofree char *text = NULL;
  gsize len = 0;
  GPtrArray *out = g_ptr_array_new();
  if (g_file_get_contents(path, &text, &len, NULL)) {
    gsize i = 0;
    while (i < len) {
      g_ptr_array_add(out, g_strdup(text + i));
      i += strlen(text + i) + 1;
    }
  }
  g_ptr_array_add(out, NULL);
  return (char **)g_ptr_array_free(out, FALSE);
}

int
orch_free_port(void)
{
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  g_assert_cmpint(fd, >=, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET,
                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  g_assert_cmpint(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), ==, 0);
  socklen_t len = sizeof(sa);
  g_assert_cmpint(getsockname(fd, (struct sockaddr *)&sa, &len), ==, 0);
  close(fd);
  return ntohs(sa.sin_port);
}

void
orch_show_file(const char *what, const char *file)
{
  g_autofree char *text = NULL;
  if (g_file_get_contents(file, &text, NULL, NULL))
    g_test_message("%s (%s):\n%s", what, file, text);
}

static char abort_marker[128];
static char abort_virsh[512];
static char abort_domain[128];

static void
run_virsh(const char *verb)
{
  pid_t pid = fork();
  if (pid == 0) {
    char *argv[] = {abort_virsh,  "-c",         "qemu:///system",
                    (char *)verb, abort_domain, NULL};
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) {
      dup2(null, STDOUT_FILENO);
      dup2(null, STDERR_FILENO);
    }
    execv(abort_virsh, argv);
    _exit(127);
  }
  if (pid > 0)
    waitpid(pid, NULL, 0);
}

static void
on_fatal_signal(int sig)
{
  if (abort_virsh[0] != '\0' && abort_domain[0] != '\0') {
    run_virsh("destroy");
    run_virsh("undefine");
  }
  if (abort_marker[0] != '\0') {
    GArray *pids = qp_test_pids_with(abort_marker);
    for (guint i = 0; i < pids->len; i++)
      kill(g_array_index(pids, int, i), SIGKILL);
    g_array_free(pids, TRUE);
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

void
orch_cleanup_on_abort(const char *marker, const char *virsh, const char *domain)
{
  static gboolean installed;
  g_strlcpy(abort_marker, marker ? marker : "", sizeof(abort_marker));
  g_strlcpy(abort_virsh, virsh ? virsh : "", sizeof(abort_virsh));
  g_strlcpy(abort_domain, domain ? domain : "", sizeof(abort_domain));
  if (!installed) {
    installed = TRUE;
    signal(SIGABRT, on_fatal_signal);
    signal(SIGTERM, on_fatal_signal);
  }
}

void
orch_wait_migrated(const char *src_qmp)
{
  gint64 deadline = g_get_monotonic_time() + 120 * G_USEC_PER_SEC;
  g_autofree char *status = NULL;
  do {
    g_autoptr(JsonNode) r =
        orch_qmp(src_qmp, "{\"execute\":\"query-migrate\"}", NULL);
    g_free(status);
    status = r && JSON_NODE_HOLDS_OBJECT(r)
                 ? g_strdup(json_object_get_string_member_with_default(
                       json_node_get_object(r), "status", "none"))
                 : NULL;
    if (status != NULL &&
        (strcmp(status, "completed") == 0 || strcmp(status, "failed") == 0))
      break;
    g_usleep(50000);
  } while (g_get_monotonic_time() < deadline);
  g_assert_cmpstr(status, ==, "completed");
}
