/* QEMU's command line: parsing (both syntaxes, every -smp form, -m, -numa,
 * memory backends), the pass-through cases, a table of bad input, and the
 * rewritten argv run by a real QEMU (TCG) that must accept it and bind the
 * guest's RAM as planned. */
#include "launcher/qemu/args.h"
#include "launcher/qemu/daemonize.h"
#include "launcher/qemu/numbers.h"
#include "launcher/qemu/rewrite.h"
#include "tests/common/qemu-refusals.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <fcntl.h>
#include <json-glib/json-glib.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define MiB (G_GUINT64_CONSTANT(1) << 20)

static char *firmware; /* exits at once through isa-debug-exit */
static char *tmpdir;

/* ---- helpers ----------------------------------------------------------------
 */

static QpQemuArgs *
parse_strv(const char *const *argv, GError **error)
{
  return qp_qemu_args_parse(g_strv_length((char **)argv), (char **)argv, error);
}

static QpQemuArgs *
parse_ok(const char *const *argv)
{
  g_autoptr(GError) error = NULL;
  QpQemuArgs *a = parse_strv(argv, &error);
  g_assert_no_error(error);
  g_assert_nonnull(a);
  return a;
}

/* Splits a command line written with single spaces (no value holds one). */
static QpQemuArgs *
parse_line(const char *line, GError **error)
{
  g_auto(GStrv) argv = g_strsplit(line, " ", -1);
  return parse_strv((const char *const *)argv, error);
}

static QpQemuArgs *
parse_line_ok(const char *line)
{
  g_autoptr(GError) error = NULL;
  QpQemuArgs *a = parse_line(line, &error);
  if (error)
    g_test_message("%s: %s", line, error->message);
  g_assert_no_error(error);
  return a;
}

static char *
list(hwloc_const_bitmap_t set)
{
  return set ? qp_list_format(set) : g_strdup("(null)");
}

static void
make_firmware(void)
{
  g_autoptr(GError) error = NULL;
  tmpdir = g_dir_make_tmp("qp-args-XXXXXX", &error);
  g_assert_no_error(error);
  guint8 *fw = g_malloc0(64 * 1024);
  /* mov al,0; out 0xf4,al; hlt */
  const guint8 code[] = {0xB0, 0x00, 0xE6, 0xF4, 0xF4};
  memcpy(fw + 0xFFF0, code, sizeof(code));
  firmware = g_build_filename(tmpdir, "exit.bin", NULL);
  g_assert_true(g_file_set_contents(firmware, (char *)fw, 64 * 1024, &error));
  g_free(fw);
}

/* ---- a QEMU with a private QMP socket
 * ------------------------------------------- */

typedef struct {
  GPid pid;
  int qmp;     /* our end */
  int err;     /* QEMU's stderr */
  GString *in; /* unread QMP bytes */
  int status;  /* wait status once reaped */
  gboolean reaped;
} Qemu;

static gboolean
qemu_line(Qemu *q, char **line)
{
  for (;;) {
    char *nl = memchr(q->in->str, '\n', q->in->len);
    if (nl != NULL) {
      *line = g_strndup(q->in->str, (gsize)(nl - q->in->str));
      g_string_erase(q->in, 0, nl - q->in->str + 1);
      return TRUE;
    }
    struct pollfd p = {.fd = q->qmp, .events = POLLIN};
    if (poll(&p, 1, 30000) <= 0)
      return FALSE;
    char buf[4096];
    ssize_t n = read(q->qmp, buf, sizeof(buf));
    if (n <= 0)
      return FALSE;
    g_string_append_len(q->in, buf, n);
  }
}

/* Sends CMD; returns the reply line (events skipped), NULL if QEMU is gone. */
static char *
qemu_cmd(Qemu *q, const char *cmd)
{
  g_autofree char *msg = g_strdup_printf("%s\n", cmd);
  if (write(q->qmp, msg, strlen(msg)) != (ssize_t)strlen(msg))
    return NULL;
  for (;;) {
    char *line = NULL;
    if (!qemu_line(q, &line))
      return NULL;
    if (strstr(line, "\"return\"") || strstr(line, "\"error\""))
      return line;
    g_free(line);
  }
}

static char *
read_all_fd(int fd)
{
  GString *s = g_string_new(NULL);
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0)
    g_string_append_len(s, buf, n);
  return g_string_free(s, FALSE);
}

/* Starts qemu-system-x86_64 with ARGS (rewritten by qp_qemu_args_rewrite with
 * PLAN) and negotiates QMP. On failure returns FALSE with QEMU's stderr in
 * *STDERR_OUT. */
static gboolean
qemu_start(Qemu *q, const QpQemuArgs *args, const QpPlan *plan, char **argv_out,
           char **stderr_out)
{
  int sv[2], ep[2];
  g_autoptr(GError) error = NULL;
  g_assert_cmpint(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), ==,
                  0);
  g_assert_cmpint(pipe2(ep, O_CLOEXEC), ==, 0);
  g_auto(GStrv) argv =
      qp_qemu_args_rewrite(args, "qemu-system-x86_64", plan, sv[1], &error);
  g_assert_no_error(error);
  g_assert_nonnull(argv);
  if (argv_out)
    *argv_out = g_strjoinv(" ", argv);
  g_test_message("argv: %s", argv_out ? *argv_out : "");

  memset(q, 0, sizeof(*q));
  q->pid = fork();
  g_assert_cmpint(q->pid, >=, 0);
  if (q->pid == 0) {
    fcntl(sv[1], F_SETFD, 0); /* QEMU keeps its end across exec */
    dup2(ep[1], 2);
    execvp(argv[0], argv);
    _exit(127);
  }
  close(sv[1]);
  close(ep[1]);
  q->qmp = sv[0];
  q->err = ep[0];
  q->in = g_string_new(NULL);

  g_autofree char *greeting = NULL;
  g_autofree char *caps = NULL;
  if (!qemu_line(q, &greeting) || strstr(greeting, "\"QMP\"") == NULL ||
      (caps = qemu_cmd(q, "{\"execute\":\"qmp_capabilities\"}")) == NULL ||
      strstr(caps, "\"return\"") == NULL) {
    waitpid(q->pid, &q->status, 0);
    q->reaped = TRUE;
    *stderr_out = read_all_fd(q->err);
    return FALSE;
  }
  return TRUE;
}

static int
qemu_wait(Qemu *q)
{
  if (!q->reaped) {
    g_assert_cmpint(waitpid(q->pid, &q->status, 0), ==, q->pid);
    q->reaped = TRUE;
  }
  return q->status;
}

static void
qemu_close(Qemu *q)
{
  if (!q->reaped) {
    kill(q->pid, SIGKILL);
    qemu_wait(q);
  }
  close(q->qmp);
  close(q->err);
  g_string_free(q->in, TRUE);
}

/* Policy (e.g. "bind:0") of the mapping of exactly SIZE bytes, or NULL.
 * QEMU 8.1 and later give policy=preferred as MPOL_PREFERRED_MANY where the
 * kernel has it, which numa_maps writes "prefer (many):0": the same nodes,
 * read here as "prefer:0" as 7.2's MPOL_PREFERRED is. */
static char *
mapping_policy(GPid pid, guint64 size)
{
  g_autofree char *maps = NULL, *numa = NULL;
  g_autofree char *mp = g_strdup_printf("/proc/%d/maps", pid);
  g_autofree char *np = g_strdup_printf("/proc/%d/numa_maps", pid);
  g_assert_true(g_file_get_contents(mp, &maps, NULL, NULL));
  g_assert_true(g_file_get_contents(np, &numa, NULL, NULL));
  g_auto(GStrv) ml = g_strsplit(maps, "\n", -1);
  g_auto(GStrv) nl = g_strsplit(numa, "\n", -1);
  for (guint i = 0; ml[i]; i++) {
    guint64 lo, hi;
    if (sscanf(ml[i], "%" G_GINT64_MODIFIER "x-%" G_GINT64_MODIFIER "x", &lo,
               &hi) != 2 ||
        hi - lo != size)
      continue;
    g_autofree char *start = g_strdup_printf("%" G_GINT64_MODIFIER "x ", lo);
    for (guint j = 0; nl[j]; j++)
      if (g_str_has_prefix(nl[j], start)) {
        g_auto(GStrv) f = g_strsplit(nl[j], " ", 4);
        if (g_strcmp0(f[1], "prefer") == 0 && f[2] != NULL &&
            g_str_has_prefix(f[2], "(many):"))
          return g_strconcat("prefer", f[2] + strlen("(many)"), NULL);
        return g_strdup(f[1]);
      }
  }
  return NULL;
}

/* ---- key=value and JSON syntax
 * ------------------------------------------------- */

static void
test_kv_syntax(void)
{
  /* ",," is a comma inside a value; the implied first key; flags. */
  g_autoptr(QpQemuArgs) a = parse_line_ok(
      "-name guest=my,,vm,debug-threads=on -uuid "
      "1b4e28ba-2fa1-11d2-883f-0016d3cca427 "
      "-pidfile /run/x.pid -id 100 -incoming defer -daemonize -sandbox on "
      "-S --smp 4 -m 1G");
  g_assert_cmpstr(a->name, ==, "my,vm");
  g_assert_cmpstr(a->uuid, ==, "1b4e28ba-2fa1-11d2-883f-0016d3cca427");
  g_assert_cmpstr(a->pidfile, ==, "/run/x.pid");
  g_assert_cmpstr(a->id, ==, "100");
  g_assert_cmpstr(a->incoming, ==, "defer");
  g_assert_true(a->daemonize);
  g_assert_true(a->has_sandbox);
  g_assert_true(a->has_S);
  g_assert_false(a->passthrough);
  g_assert_cmpuint(a->req->vcpus, ==, 4);
  g_assert_cmpuint(a->req->mem_mib, ==, 1024);
  g_assert_cmpstr(a->machine, ==, "pc");

  g_autoptr(QpQemuArgs) b = parse_line_ok("-name plain -machine q35,accel=tcg");
  g_assert_cmpstr(b->name, ==, "plain");
  g_assert_cmpstr(b->machine, ==, "q35");
  g_assert_false(b->has_S);
  g_assert_null(b->incoming);
}

/* A value that looks like an option is still the value of the option before
 * it; an unknown option takes no argument; a word is a disk image. */
static void
test_option_values(void)
{
  const char *argv[] = {"-append",  "-smp 99",      "-kernel", "-m",
                        "disk.img", "-unknown-opt", "-smp",    "2",
                        "-m",       "256",          NULL};
  g_autoptr(QpQemuArgs) a = parse_ok(argv);
  g_assert_cmpuint(a->req->vcpus, ==, 2);
  g_assert_cmpuint(a->req->mem_mib, ==, 256);
  g_assert_cmpuint(a->argc, ==, 10);
}

/* ---- -smp: qemu-pin's topology equals QEMU 7.2's
 * ---------------------------------- */

typedef struct {
  const char *machine;
  const char *smp;
  guint cpus, maxcpus, sockets, dies, cores, threads;
} SmpCase;

static const SmpCase smp_cases[] = {
    {"q35", "4", 4, 4, 1, 1, 4, 1},
    {"q35", "cpus=4", 4, 4, 1, 1, 4, 1},
    {"q35", "4,sockets=2", 4, 4, 2, 1, 2, 1},
    {"q35", "4,cores=2", 4, 4, 2, 1, 2, 1},
    {"q35", "8,threads=2", 8, 8, 1, 1, 4, 2},
    {"q35", "12,sockets=2,threads=2", 12, 12, 2, 1, 3, 2},
    {"q35", "8,sockets=2,dies=2", 8, 8, 2, 2, 2, 1},
    {"q35", "sockets=2", 2, 2, 2, 1, 1, 1},
    {"q35", "maxcpus=8", 8, 8, 1, 1, 8, 1},
    {"q35", "4,maxcpus=8", 4, 8, 1, 1, 8, 1},
    {"q35", "4,maxcpus=8,sockets=2", 4, 8, 2, 1, 4, 1},
    {"q35", "cpus=4,cpus=2", 2, 2, 1, 1, 2, 1},
    {"q35", "0x4", 4, 4, 1, 1, 4, 1},
    {"q35", "010", 8, 8, 1, 1, 8, 1},
    {"q35", "2,sockets=1,cores=1,threads=2", 2, 2, 1, 1, 1, 2},
    {"pc-q35-6.1", "4", 4, 4, 4, 1, 1, 1},
    {"pc-q35-6.1", "8,cores=2", 8, 8, 4, 1, 2, 1},
    {"pc-q35-6.1", "12,cores=3,threads=2", 12, 12, 2, 1, 3, 2},
    {"pc-i440fx-6.0", "4,sockets=2", 4, 4, 2, 1, 2, 1},
    {"pc", "6", 6, 6, 1, 1, 6, 1},
};

static void
test_smp(gconstpointer data)
{
  const SmpCase *c = data;
  g_autofree char *line =
      g_strdup_printf("-machine %s -smp %s", c->machine, c->smp);
  g_autoptr(QpQemuArgs) a = parse_line_ok(line);
  const QpRequest *r = a->req;
  g_assert_cmpuint(r->vcpus, ==, c->cpus);
  g_assert_cmpuint(r->maxcpus, ==, c->maxcpus);
  g_assert_cmpuint(r->sockets, ==, c->sockets);
  g_assert_cmpuint(r->dies, ==, c->dies);
  g_assert_cmpuint(r->clusters, ==, 1);
  g_assert_cmpuint(r->cores, ==, c->cores);
  g_assert_cmpuint(r->threads, ==, c->threads);
}

/* ppc64 pseries: a vCPU core plugged with -device at start runs from the
 * start, its threads at cpu-indexes core-id up (QEMU 7.2's
 * qemu-system-ppc64 -machine pseries -smp 1,maxcpus=4 -device
 * power9_v2.0-spapr-cpu-core,core-id=3: query-cpus-fast gives cpu-indexes
 * 0 and 3). With threads=2 (KVM only: TCG takes 1 thread per core) a core
 * is two vCPUs. (A core-id beyond maxcpus QEMU refuses: "core id 5 out of
 * range".) */
static void
test_spapr_cpu_core_at_start(void)
{
  static const struct {
    const char *line;
    guint vcpus;
    const char *boot;
  } cases[] = {
      {"-machine pseries -smp 1,maxcpus=4 -device "
       "power9_v2.0-spapr-cpu-core,core-id=3",
       2, "0,3"},
      {"-machine pseries -smp 2,maxcpus=8,threads=2 -device "
       "host-spapr-cpu-core,core-id=6",
       4, "0-1,6-7"},
  };
  for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autoptr(QpQemuArgs) a = parse_line_ok(cases[i].line);
    g_auto(hwloc_bitmap_t) boot = qp_request_boot_set(a->req);
    g_autofree char *list = qp_list_format(boot);
    g_test_message("%s: %s", cases[i].line, list);
    g_assert_cmpuint(a->req->vcpus, ==, cases[i].vcpus);
    g_assert_cmpstr(list, ==, cases[i].boot);
  }
}

/* The same table, asked of QEMU 7.2 itself: the hotpluggable CPU slots and
 * their socket/die/core/thread ids, and the number of running vCPUs. */
static void
test_smp_matches_qemu(void)
{
  for (gsize i = 0; i < G_N_ELEMENTS(smp_cases); i++) {
    const SmpCase *c = &smp_cases[i];
    g_autofree char *line = g_strdup_printf(
        "-machine %s -accel tcg -display none -nodefaults -smp %s", c->machine,
        c->smp);
    g_autoptr(QpQemuArgs) a = parse_line_ok(line);
    Qemu q;
    g_autofree char *err = NULL;
    if (!qemu_start(&q, a, NULL, NULL, &err))
      g_error("QEMU refused -smp %s: %s", c->smp, err);
    g_autofree char *slots =
        qemu_cmd(&q, "{\"execute\":\"query-hotpluggable-cpus\"}");
    g_autofree char *fast = qemu_cmd(&q, "{\"execute\":\"query-cpus-fast\"}");
    g_autoptr(JsonParser) p1 = json_parser_new();
    g_autoptr(JsonParser) p2 = json_parser_new();
    g_assert_true(json_parser_load_from_data(p1, slots, -1, NULL));
    g_assert_true(json_parser_load_from_data(p2, fast, -1, NULL));
    JsonArray *s = json_object_get_array_member(
        json_node_get_object(json_parser_get_root(p1)), "return");
    JsonArray *f = json_object_get_array_member(
        json_node_get_object(json_parser_get_root(p2)), "return");
    guint sockets = 0, dies = 1, cores = 0, threads = 0;
    for (guint k = 0; k < json_array_get_length(s); k++) {
      JsonObject *props = json_object_get_object_member(
          json_array_get_object_element(s, k), "props");
      sockets =
          MAX(sockets, json_object_get_int_member(props, "socket-id") + 1);
      if (json_object_has_member(props, "die-id"))
        dies = MAX(dies, json_object_get_int_member(props, "die-id") + 1);
      cores = MAX(cores, json_object_get_int_member(props, "core-id") + 1);
      threads =
          MAX(threads, json_object_get_int_member(props, "thread-id") + 1);
    }
    g_test_message("-M %s -smp %s: QEMU %u slots, %u running, %u/%u/%u/%u",
                   c->machine, c->smp, json_array_get_length(s),
                   json_array_get_length(f), sockets, dies, cores, threads);
    g_assert_cmpuint(json_array_get_length(s), ==, a->req->maxcpus);
    g_assert_cmpuint(json_array_get_length(f), ==, a->req->vcpus);
    g_assert_cmpuint(sockets, ==, a->req->sockets);
    g_assert_cmpuint(dies, ==, a->req->dies);
    g_assert_cmpuint(cores, ==, a->req->cores);
    g_assert_cmpuint(threads, ==, a->req->threads);
    g_free(qemu_cmd(&q, "{\"execute\":\"quit\"}"));
    qemu_wait(&q);
    qemu_close(&q);
  }
}

/* -machine smp.* and memory.* stand in for -smp and -m when those are
 * absent; when present, a key of -smp given later, and any key of -m,
 * wins (the mixes are rows of test-refusals.c's accepted lines). */
static void
test_machine_smp_memory(void)
{
  g_autoptr(QpQemuArgs) a =
      parse_line_ok("-machine q35,smp.cpus=4,smp.sockets=2,memory.size=256M");
  g_assert_cmpuint(a->req->vcpus, ==, 4);
  g_assert_cmpuint(a->req->sockets, ==, 2);
  g_assert_cmpuint(a->req->cores, ==, 2);
  g_assert_cmpuint(a->req->mem_mib, ==, 256);
  g_autoptr(QpQemuArgs) b =
      parse_line_ok("-machine q35,smp.cpus=4,memory.size=256M -smp 2 -m 512");
  g_assert_cmpuint(b->req->vcpus, ==, 2);
  g_assert_cmpuint(b->req->sockets, ==, 1);
  g_assert_cmpuint(b->req->mem_mib, ==, 512);
  /* memory.size counts bytes without a suffix, -m MiB. */
  g_autoptr(QpQemuArgs) c = parse_line_ok("-machine memory.size=268435456");
  g_assert_cmpuint(c->req->mem_mib, ==, 256);

  const char *lines[] = {
      "-machine q35,smp.cpus=4,smp.sockets=2,memory.size=256M",
      "-machine q35,smp.cpus=4,memory.size=256M -smp 2 -m 512"};
  for (gsize i = 0; i < G_N_ELEMENTS(lines); i++) {
    g_autofree char *line =
        g_strdup_printf("-accel tcg -display none -nodefaults %s", lines[i]);
    g_autoptr(QpQemuArgs) q_args = parse_line_ok(line);
    Qemu q;
    g_autofree char *err = NULL;
    if (!qemu_start(&q, q_args, NULL, NULL, &err))
      g_error("QEMU refused %s: %s", line, err);
    g_autofree char *cpus = qemu_cmd(&q, "{\"execute\":\"query-cpus-fast\"}");
    g_autofree char *mem =
        qemu_cmd(&q, "{\"execute\":\"query-memory-size-summary\"}");
    g_autoptr(JsonParser) p1 = json_parser_new();
    g_autoptr(JsonParser) p2 = json_parser_new();
    g_assert_true(json_parser_load_from_data(p1, cpus, -1, NULL));
    g_assert_true(json_parser_load_from_data(p2, mem, -1, NULL));
    JsonArray *arr = json_object_get_array_member(
        json_node_get_object(json_parser_get_root(p1)), "return");
    JsonObject *m = json_object_get_object_member(
        json_node_get_object(json_parser_get_root(p2)), "return");
    g_assert_cmpuint(json_array_get_length(arr), ==, q_args->req->vcpus);
    g_assert_cmpuint((guint64)json_object_get_int_member(m, "base-memory"), ==,
                     q_args->req->mem_mib * MiB);
    g_free(qemu_cmd(&q, "{\"execute\":\"quit\"}"));
    qemu_wait(&q);
    qemu_close(&q);
  }
}

/* ---- -m and sizes
 * ---------------------------------------------------------------- */

static void
test_sizes(void)
{
  static const struct {
    const char *text;
    gboolean default_mib;
    guint64 bytes;
  } ok[] = {
      {"4G", TRUE, 4ull << 30},
      {"4g", TRUE, 4ull << 30},
      {"512", TRUE, 512 * MiB},
      {"512", FALSE, 512},
      {"1.5G", TRUE, 1536 * MiB},
      {"1024K", TRUE, MiB},
      {"0x200", TRUE, 512 * MiB},
      {"010", TRUE, 10 * MiB},
      {"1B", TRUE, 1},
      {"2T", FALSE, 2ull << 40},
      {"8E", FALSE, 8ull << 60},
      /* As QEMU 7.2: a zero fraction is a whole number, a '.' needs no
       * digit after it, and the legacy MiB is only for a size ending in a
       * digit ("1024." and "0x40000000B" are bytes). */
      {"1024.0", TRUE, 1024 * MiB},
      {"1.G", TRUE, 1024 * MiB},
      {"64.k", TRUE, 64 * 1024},
      {"1024.", TRUE, 1024},
      {"0x40000000B", TRUE, 0x40000000Bull},
  };
  for (gsize i = 0; i < G_N_ELEMENTS(ok); i++) {
    g_autoptr(GError) error = NULL;
    guint64 v = 0;
    g_assert_true(
        qp_parse_size(ok[i].text, "-m", ok[i].default_mib, &v, &error));
    g_assert_no_error(error);
    g_assert_cmpuint(v, ==, ok[i].bytes);
  }
  guint64 mib = 0;
  g_assert_true(qp_parse_size_mib("1536K", "-m", TRUE, &mib, NULL));
  g_assert_cmpuint(mib, ==, 2); /* rounded up */

  const char *bad[] = {
      "4Q", "", "-1", "1.5", "4 G", "1e3", "1.0e3", "16E", "99999999999999G",
      "0x", "G"};
  for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_autoptr(GError) error = NULL;
    guint64 v = 0;
    g_assert_false(qp_parse_size(bad[i], "-m", TRUE, &v, &error));
    g_assert_error(error, QP_ARGS_ERROR, QP_ARGS_ERROR_INVALID);
    g_assert_null(strchr(error->message, '\n'));
    if (*bad[i]) {
      g_autofree char *quoted = g_strdup_printf("'%s'", bad[i]);
      g_assert_nonnull(strstr(error->message, quoted));
    }
  }
}

static void
test_memory(void)
{
  g_autoptr(QpQemuArgs) a = parse_line_ok("-m size=2G,slots=4,maxmem=8G");
  g_assert_cmpuint(a->req->mem_mib, ==, 2048);
  g_assert_cmpuint(a->ram_bytes, ==, 2ull << 30);
  g_autoptr(QpQemuArgs) b = parse_line_ok("-smp 2");
  g_assert_cmpuint(b->req->mem_mib, ==, 128); /* QEMU's default */
  /* -m merges like QEMU's: the last size wins. */
  g_autoptr(QpQemuArgs) c = parse_line_ok("-m 1G -m 3G");
  g_assert_cmpuint(c->req->mem_mib, ==, 3072);
  /* Without -m the RAM size is the machine backend's. */
  g_autoptr(QpQemuArgs) d = parse_line_ok(
      "-object memory-backend-ram,id=r,size=768M -machine memory-backend=r");
  g_assert_cmpuint(d->req->mem_mib, ==, 768);
  g_assert_cmpstr(d->machine_memdev, ==, "r");
  g_assert_null(d->req->host_nodes);
  /* The plan names it as the caller's backend (outside check, stop 43:
   * memdev was null). */
  g_assert_cmpstr(d->req->memdev, ==, "r");
  g_assert_null(b->req->memdev);
  /* Its host-nodes and policy are the caller's binding of the guest's
   * memory (libvirt's <numatune> without NUMA cells). */
  g_autoptr(QpQemuArgs) e = parse_line_ok(
      "-object {\"qom-type\":\"memory-backend-ram\",\"id\":\"pc.ram\","
      "\"size\":134217728,\"host-nodes\":[1],\"policy\":\"preferred\"} "
      "-machine memory-backend=pc.ram");
  g_autofree char *nodes = list(e->req->host_nodes);
  g_assert_cmpstr(nodes, ==, "1");
  g_assert_cmpint(e->req->policy, ==, QP_POLICY_PREFERRED);
}

/* Without -smp and -m a board has QEMU 7.2's own vCPUs and RAM, not 1 and
 * 128 MiB (outside check, branch h13: sbsa-ref ran with 128 MiB of its
 * 1 GiB, raspi3b was refused "Invalid RAM size, should be 1 GiB", and
 * one-to-one stopped it: "QEMU reports vCPU 1 but the plan has 1 vCPUs"). */
static void
test_board_defaults(void)
{
  g_autoptr(QpQemuArgs) a = parse_line_ok("-machine sbsa-ref");
  g_assert_cmpuint(a->req->vcpus, ==, 4);
  g_assert_cmpuint(a->req->maxcpus, ==, 4);
  g_assert_cmpuint(a->req->mem_mib, ==, 1024);
  g_assert_cmpuint(a->ram_bytes, ==, 1ull << 30);
  g_autoptr(QpQemuArgs) b = parse_line_ok("-M raspi3ap -m 0");
  g_assert_cmpuint(b->req->vcpus, ==, 4);
  g_assert_cmpuint(b->req->mem_mib, ==, 512);
  /* What the caller gives is what QEMU takes. */
  g_autoptr(QpQemuArgs) c = parse_line_ok("-machine sbsa-ref -smp 2 -m 256");
  g_assert_cmpuint(c->req->vcpus, ==, 2);
  g_assert_cmpuint(c->req->mem_mib, ==, 256);
  g_autoptr(QpQemuArgs) d = parse_line_ok("-machine virt");
  g_assert_cmpuint(d->req->vcpus, ==, 1);
  g_assert_cmpuint(d->req->mem_mib, ==, 128);
  g_autoptr(QpQemuArgs) e = parse_line_ok("-machine q35");
  g_assert_cmpuint(e->req->vcpus, ==, 1);
  g_assert_cmpuint(e->req->mem_mib, ==, 128);
}

/* ---- memory backends, both syntaxes
 * ----------------------------------------------- */

static void
test_backends(void)
{
  g_autoptr(QpQemuArgs) a = parse_line_ok(
      "-m 3G -object "
      "memory-backend-ram,id=ram0,size=1G,host-nodes=0-1,host-nodes=3,policy="
      "bind,prealloc=on "
      "-object "
      "{\"qom-type\":\"memory-backend-memfd\",\"id\":\"ram1\",\"size\":"
      "1073741824,"
      "\"hugetlb\":true,\"hugetlbsize\":2097152,\"host-nodes\":[2],\"policy\":"
      "\"preferred\"} "
      "-object memory-backend-file,id=ram2,size=1G,mem-path=/dev/shm,share=on "
      "-object iothread,id=io1 -object "
      "{\"qom-type\":\"iothread\",\"id\":\"io2\"} "
      "-numa node,memdev=ram0 -numa node,memdev=ram1 -numa node,memdev=ram2 "
      "-smp 3");
  g_assert_cmpuint(a->backends->len, ==, 3);
  QpBackend *b0 = g_ptr_array_index(a->backends, 0);
  QpBackend *b1 = g_ptr_array_index(a->backends, 1);
  QpBackend *b2 = g_ptr_array_index(a->backends, 2);
  g_autofree char *n0 = list(b0->host_nodes), *n1 = list(b1->host_nodes);
  g_assert_cmpstr(b0->id, ==, "ram0");
  g_assert_cmpstr(b0->qom_type, ==, "memory-backend-ram");
  g_assert_cmpuint(b0->size_mib, ==, 1024);
  g_assert_cmpstr(n0, ==, "0-1,3");
  g_assert_cmpint(b0->policy, ==, QP_POLICY_BIND);
  g_assert_true(b0->prealloc);
  g_assert_false(b0->json);
  g_assert_cmpuint(b0->argi, ==, 3);
  g_assert_true(b1->json);
  g_assert_true(b1->hugetlb);
  g_assert_cmpuint(b1->hugetlbsize_kib, ==, 2048);
  g_assert_cmpstr(n1, ==, "2");
  g_assert_cmpint(b1->policy, ==, QP_POLICY_PREFERRED);
  g_assert_cmpstr(b2->mem_path, ==, "/dev/shm");
  g_assert_null(b2->host_nodes);
  g_assert_cmpuint(a->req->n_iothreads, ==, 2);
  g_assert_true(a->req->prealloc);
  /* Page sizes per guest node: only node 1 is on hugepages. */
  g_assert_cmpuint(a->req->gnodes[0].page_kib, ==, 0);
  g_assert_cmpuint(a->req->gnodes[1].page_kib, ==, 2048);
  g_assert_cmpuint(a->req->gnodes[2].page_kib, ==, 0);
  g_assert_cmpuint(a->req->n_gnodes, ==, 3);
  g_autofree char *g0 = list(a->req->gnodes[0].host_nodes);
  g_assert_cmpstr(g0, ==, "0-1,3");
  g_assert_cmpstr(a->req->gnodes[2].memdev, ==, "ram2");
  g_assert_null(a->req->gnodes[2].host_nodes);
  g_assert_cmpuint(a->req->gnodes[1].mem_mib, ==, 1024);

  /* -mem-prealloc makes every backend preallocate. */
  g_autoptr(QpQemuArgs) c =
      parse_line_ok("-mem-prealloc -object memory-backend-ram,id=r,size=128M "
                    "-machine memory-backend=r");
  g_assert_true(((QpBackend *)g_ptr_array_index(c->backends, 0))->prealloc);
  g_assert_true(c->req->prealloc);
}

static void
test_vfio(void)
{
  g_autoptr(QpQemuArgs) a = parse_line_ok(
      "-device vfio-pci,host=01:00.0,id=hostdev0 "
      "-device "
      "{\"driver\":\"vfio-pci\",\"host\":\"0000:41:00.1\",\"id\":\"hostdev1\"} "
      "-device vfio-pci,sysfsdev=/sys/bus/pci/devices/0001:02:1f.7 "
      "-device virtio-net-pci,host=xx -device vfio-pci,host=AB:01.2");
  g_assert_nonnull(a->req->vfio);
  g_assert_cmpuint(g_strv_length(a->req->vfio), ==, 4);
  g_assert_cmpstr(a->req->vfio[0], ==, "0000:01:00.0");
  g_assert_cmpstr(a->req->vfio[1], ==, "0000:41:00.1");
  g_assert_cmpstr(a->req->vfio[2], ==, "0001:02:1f.7");
  g_assert_cmpstr(a->req->vfio[3], ==, "0000:ab:01.2");
}

/* ---- -numa
 * ---------------------------------------------------------------------------
 */

#define TWO_BACKENDS                                                           \
  "-m 1G -object memory-backend-ram,id=m0,size=512M "                          \
  "-object memory-backend-ram,id=m1,size=512M "

static void
test_numa_nodes(void)
{
  g_autoptr(QpQemuArgs) a = parse_line_ok(
      TWO_BACKENDS "-smp 4 -numa node,nodeid=0,cpus=0,cpus=2,memdev=m0 "
                   "-numa node,nodeid=1,cpus=1,cpus=3,memdev=m1 "
                   "-numa dist,src=0,dst=1,val=21");
  const QpRequest *r = a->req;
  g_assert_cmpuint(r->n_gnodes, ==, 2);
  g_autofree char *c0 = list(r->gnodes[0].vcpus),
                  *c1 = list(r->gnodes[1].vcpus);
  g_assert_cmpstr(c0, ==, "0,2");
  g_assert_cmpstr(c1, ==, "1,3");
  g_assert_cmpuint(r->gnodes[0].mem_mib, ==, 512);
  g_assert_cmpstr(r->gnodes[1].memdev, ==, "m1");
  g_assert_nonnull(r->gdistance);
  /* One direction given: QEMU fills in the other; local is 10. */
  g_assert_cmpuint(r->gdistance[0], ==, 10);
  g_assert_cmpuint(r->gdistance[1], ==, 21);
  g_assert_cmpuint(r->gdistance[2], ==, 21);
  g_assert_cmpuint(r->gdistance[3], ==, 10);
}

static void
test_numa_cpu(void)
{
  /* -numa cpu by socket, and by core: index order is socket-major. */
  g_autoptr(QpQemuArgs) a = parse_line_ok(
      TWO_BACKENDS
      "-smp 8,sockets=2,cores=2,threads=2 "
      "-numa node,nodeid=0,memdev=m0 -numa node,nodeid=1,memdev=m1 "
      "-numa cpu,node-id=1,socket-id=1,core-id=0 "
      "-numa cpu,node-id=0,socket-id=0 -numa "
      "cpu,node-id=1,socket-id=1,core-id=1,thread-id=1 "
      "-numa cpu,node-id=0,socket-id=1,core-id=1,thread-id=0");
  g_autofree char *c0 = list(a->req->gnodes[0].vcpus),
                  *c1 = list(a->req->gnodes[1].vcpus);
  g_assert_cmpstr(c0, ==, "0-3,6");
  g_assert_cmpstr(c1, ==, "4-5,7");
  g_assert_cmpuint(a->warnings->len, ==, 0);
}

/* vCPUs in no node: by socket round robin when no node names any (QEMU's
 * x86 default), on node 0 with a warning when some are named. */
static void
test_numa_defaults(void)
{
  g_autoptr(QpQemuArgs) a = parse_line_ok(
      TWO_BACKENDS
      "-smp 4,sockets=2 -numa node,memdev=m0 -numa node,memdev=m1");
  g_autofree char *a0 = list(a->req->gnodes[0].vcpus),
                  *a1 = list(a->req->gnodes[1].vcpus);
  g_assert_cmpstr(a0, ==, "0-1");
  g_assert_cmpstr(a1, ==, "2-3");
  g_assert_cmpuint(a->warnings->len, ==, 0);

  g_autoptr(QpQemuArgs) b = parse_line_ok(
      TWO_BACKENDS
      "-smp 4,sockets=4 -numa node,memdev=m0 -numa node,memdev=m1,cpus=3");
  g_autofree char *b0 = list(b->req->gnodes[0].vcpus),
                  *b1 = list(b->req->gnodes[1].vcpus);
  g_assert_cmpstr(b0, ==, "0-2");
  g_assert_cmpstr(b1, ==, "3");
  /* QEMU puts vCPUs left out on node 0 and says so itself. */
  g_assert_cmpuint(b->warnings->len, ==, 0);
  g_assert_cmpuint(b->notes->len, ==, 1);

  /* No memory on any node: QEMU 7.2 refuses it on every machine type
   * (tests/common/qemu-refusals.c "numa/no-memory"), so qemu-pin makes up
   * no split of its own. */
  const char *no_memory[] = {
      "-m 1000M -smp 3 -numa node -numa node -numa node",
      "-M pc-i440fx-2.9 -m 1000M -smp 2 -numa node -numa node",
      ("-m 1G -object memory-backend-ram,id=r,size=1G "
       "-machine memory-backend=r -numa node"),
  };
  for (gsize i = 0; i < G_N_ELEMENTS(no_memory); i++) {
    g_autoptr(GError) error = NULL;
    g_autoptr(QpQemuArgs) c = parse_line(no_memory[i], &error);
    g_assert_null(c);
    g_assert_error(error, QP_ARGS_ERROR, QP_ARGS_ERROR_INVALID);
    g_assert_nonnull(strstr(error->message, "adds up to 0 MiB"));
    g_assert_null(strchr(error->message, '\n'));
  }

  /* A node without memory beside nodes with memdev is memory-less. */
  g_autoptr(QpQemuArgs) d =
      parse_line_ok("-m 512M -object memory-backend-ram,id=m0,size=512M -smp 2 "
                    "-numa node,memdev=m0,cpus=0 "
                    "-numa node,cpus=1");
  g_assert_cmpuint(d->req->gnodes[1].mem_mib, ==, 0);
}

/* What QEMU itself assigns, for the defaults above. */
static void
test_numa_defaults_match_qemu(void)
{
  const char *lines[] = {
      TWO_BACKENDS "-smp 4,sockets=2 -numa node,memdev=m0 -numa node,memdev=m1",
      TWO_BACKENDS
      "-smp 4,sockets=4 -numa node,memdev=m0 -numa node,memdev=m1,cpus=3",
      TWO_BACKENDS
      "-smp 8,sockets=2,cores=2,threads=2 -numa node,memdev=m0 "
      "-numa node,memdev=m1 -numa cpu,node-id=1,socket-id=1,core-id=0 "
      "-numa cpu,node-id=0,socket-id=0 -numa "
      "cpu,node-id=1,socket-id=1,core-id=1,thread-id=1 "
      "-numa cpu,node-id=0,socket-id=1,core-id=1,thread-id=0",
  };
  for (gsize i = 0; i < G_N_ELEMENTS(lines); i++) {
    g_autofree char *line = g_strdup_printf(
        "-M q35 -accel tcg -display none -nodefaults %s", lines[i]);
    g_autoptr(QpQemuArgs) a = parse_line_ok(line);
    Qemu q;
    g_autofree char *err = NULL;
    if (!qemu_start(&q, a, NULL, NULL, &err))
      g_error("QEMU refused %s: %s", line, err);
    g_autofree char *fast =
        qemu_cmd(&q, "{\"execute\":\"query-hotpluggable-cpus\"}");
    g_autoptr(JsonParser) p = json_parser_new();
    g_assert_true(json_parser_load_from_data(p, fast, -1, NULL));
    JsonArray *s = json_object_get_array_member(
        json_node_get_object(json_parser_get_root(p)), "return");
    g_assert_cmpuint(json_array_get_length(s), ==, a->req->maxcpus);
    for (guint k = 0; k < json_array_get_length(s); k++) {
      JsonObject *props = json_object_get_object_member(
          json_array_get_object_element(s, k), "props");
      /* Recompute the vCPU index from the ids, socket-major. */
      const QpRequest *r = a->req;
      guint idx =
          (((guint)json_object_get_int_member(props, "socket-id") * r->dies +
            (json_object_has_member(props, "die-id")
                 ? (guint)json_object_get_int_member(props, "die-id")
                 : 0)) *
               r->cores +
           (guint)json_object_get_int_member(props, "core-id")) *
              r->threads +
          (guint)json_object_get_int_member(props, "thread-id");
      int node = (int)json_object_get_int_member(props, "node-id");
      g_assert_true(hwloc_bitmap_isset(r->gnodes[node].vcpus, idx));
    }
    g_free(qemu_cmd(&q, "{\"execute\":\"quit\"}"));
    qemu_wait(&q);
    qemu_close(&q);
  }
}

/* ---- not a launch
 * -------------------------------------------------------------------- */

static void
test_passthrough(void)
{
  const char *yes[] = {
      "-version",
      "--version",
      "-h",
      "-help",
      "--help",
      "-machine help",
      "-M ?",
      "-cpu help",
      "-cpu ?",
      "-device help",
      "-device vfio-pci,help",
      "-device driver=?",
      "-object help",
      "-object memory-backend-ram,help",
      "-accel help",
      "-machine none",
      "-M none,accel=kvm:tcg",
      ("-S -no-user-config -nodefaults -nographic -machine none,accel=kvm:tcg "
       "-qmp unix:/tmp/m.sock,server=on,wait=off -pidfile /tmp/p -daemonize"),
      /* Bad values elsewhere are the real binary's to report. */
      "-smp 0 -version",
      "-smp 4,sockets=3,cores=1 -machine help",
      "-m 4Q -cpu help",
      "-name foo,help",
      "-display help",
      "-smp",
  };
  const char *no[] = {
      "-name help", "-machine q35", "-smp 2", "-append help", "-kernel ?",
  };
  for (gsize i = 0; i < G_N_ELEMENTS(yes); i++) {
    g_autoptr(GError) error = NULL;
    g_autoptr(QpQemuArgs) a = parse_line(yes[i], &error);
    if (i == G_N_ELEMENTS(yes) - 1) {
      /* a lone "-smp": QEMU says "requires an argument", and so do we */
      g_assert_error(error, QP_ARGS_ERROR, QP_ARGS_ERROR_INVALID);
      g_assert_nonnull(strstr(error->message, "-smp"));
      continue;
    }
    g_assert_no_error(error);
    g_assert_true(a->passthrough);
  }
  for (gsize i = 0; i < G_N_ELEMENTS(no); i++) {
    g_autoptr(QpQemuArgs) a = parse_line_ok(no[i]);
    g_assert_false(a->passthrough);
  }
}

/* ---- bad input
 * ------------------------------------------------------------------------ */

typedef struct {
  const char *line;
  const char *value; /* the message must contain it */
  const char *also;  /* and this, when set */
} BadCase;

static const BadCase bad_cases[] = {
    /* -smp */
    {"-smp -1", "'-1'", "not a number"},
    {"-smp 4,sockets=3,cores=1", "'4,sockets=3,cores=1'",
     "= 3 does not equal maxcpus (4)"},
    {"-smp cpus=99999", "'cpus=99999'", "maximum"},
    {"-M pc-q35-7.2 -smp 289", "'289'", "288"},
    {"-M q35 -smp 4097", "'4097'", "4096"},
    {"-smp 256", "'256'", "255"},
    {"-smp 8,maxcpus=4", "'8,maxcpus=4'", "at least cpus"},
    {"-smp 4,clusters=2", "'4,clusters=2'", "clusters"},
    {"-smp 1.5", "'1.5'", NULL},
    {"-smp 4,foo=1", "'foo'", "unknown parameter"},
    {"-smp cpus=", "'cpus='", NULL},
    {"-smp 4,threads=3", "'4,threads=3'", "does not equal"},
    /* -m */
    {"-m 4Q", "'4Q'", NULL},
    {"-m 99999999999999G", "'99999999999999G'", "too large"},
    {"-m 18446744073709551615", "'18446744073709551615'", "too large"},
    {"-m -1", "'-1'", NULL},
    {"-m 1G,slots=2", "'1G,slots=2'", "maxmem"},
    {"-m 1G,maxmem=512M", "'1G,maxmem=512M'", NULL},
    {"-m 1G,foo=1", "'foo'", NULL},
    {"-m size=", "'size='", NULL},
    /* -numa */
    {TWO_BACKENDS "-numa node,memdev=m0 -numa node,memdev=nope", "'nope'",
     NULL},
    {TWO_BACKENDS
     "-smp 4 -numa node,cpus=0-2,memdev=m0 -numa node,cpus=2-3,memdev=m1",
     "'node,cpus=2-3,memdev=m1'", "vCPU 2"},
    {TWO_BACKENDS "-smp 4 -numa node,cpus=4,memdev=m0",
     "'node,cpus=4,memdev=m0'", NULL},
    {TWO_BACKENDS "-smp 4 -numa node,cpus=3-1", "'3-1'", NULL},
    {TWO_BACKENDS "-numa cpu,node-id=0,socket-id=0 -numa node,memdev=m0",
     "node-id=0", "declared"},
    {TWO_BACKENDS "-numa node,memdev=m0 -numa dist,src=0,dst=1,val=20",
     "src=0,dst=1", NULL},
    {TWO_BACKENDS
     "-numa node,memdev=m0 -numa node,memdev=m1 -numa dist,src=0,dst=1,val=9",
     "val=9", "10"},
    {TWO_BACKENDS "-numa node,nodeid=0,memdev=m0 -numa node,nodeid=2,memdev=m1",
     "node 1", NULL},
    {TWO_BACKENDS "-numa node,nodeid=0,memdev=m0 -numa node,nodeid=0,memdev=m1",
     "node,nodeid=0", "twice"},
    {"-m 1G -object memory-backend-ram,id=m0,size=512M -numa node,memdev=m0 "
     "-numa node,mem=512M",
     "mem=512M", NULL},
    {"-M pc-i440fx-4.2 -m 1G -object memory-backend-ram,id=m0,size=512M -numa "
     "node,memdev=m0 "
     "-numa node,mem=512M",
     "mixed", NULL},
    {TWO_BACKENDS "-numa node,memdev=m0", "512 MiB", "1024 MiB"},
    {TWO_BACKENDS "-numa node,memdev=m0 -numa node,memdev=m0", "'m0'", NULL},
    {TWO_BACKENDS "-numa foo", "'foo'", NULL},
    {TWO_BACKENDS "-numa node,memdev=m0,bar=1", "'bar'", NULL},
    {TWO_BACKENDS
     "-numa node,memdev=m0 -numa node,memdev=m1 -numa cpu,node-id=0,die-id=0",
     "die-id", NULL},
    /* -machine memory-backend */
    {"-machine memory-backend=nope", "nope", NULL},
    {"-m 1G -object memory-backend-ram,id=r,size=512M -machine "
     "memory-backend=r",
     "memory-backend=r", NULL},
    /* -object, key=value */
    {"-object memory-backend-ram,id=r,size=4Q", "'4Q'", NULL},
    {"-object memory-backend-ram,id=r,size=0", "size 0", NULL},
    {"-object memory-backend-ram,id=r", "'memory-backend-ram,id=r'", "size"},
    {"-object memory-backend-ram,id=r,size=1G,host-nodes=0-,policy=bind",
     "'0-'", NULL},
    {"-object memory-backend-ram,id=r,size=1G,host-nodes=a,policy=bind", "'a'",
     NULL},
    {"-object memory-backend-ram,id=r,size=1G,host-nodes=0,policy=fast",
     "'fast'", NULL},
    {"-object memory-backend-ram,id=r,size=1G,policy=bind", "policy=bind",
     "host-nodes"},
    {"-object memory-backend-ram,id=r,size=1G,prealloc=maybe", "'maybe'", NULL},
    {"-object memory-backend-ram,size=1G", "'memory-backend-ram,size=1G'",
     "id"},
    /* -object, JSON */
    {"-object "
     "{\"qom-type\":\"memory-backend-ram\",\"id\":\"r\",\"size\":1073741824",
     "{\"qom-type\":\"memory-backend-ram\",\"id\":\"r\",\"size\":1073741824",
     "JSON"},
    {"-object "
     "{\"qom-type\":\"memory-backend-ram\",\"id\":\"r\",\"size\":\"1G\"}",
     "'size'", "integer"},
    {"-object {\"qom-type\":\"memory-backend-ram\",\"id\":\"r\",\"size\":-1}",
     "'size'", NULL},
    {"-object "
     "{\"qom-type\":\"memory-backend-ram\",\"id\":\"r\",\"size\":1024,\"host-"
     "nodes\":0,\"policy\":\"bind\"}",
     "'host-nodes'", "array"},
    {"-object "
     "{\"qom-type\":\"memory-backend-ram\",\"id\":\"r\",\"size\":1024,\"host-"
     "nodes\":[\"0\"],\"policy\":\"bind\"}",
     "'host-nodes'", NULL},
    {"-object "
     "{\"qom-type\":\"memory-backend-ram\",\"id\":\"r\",\"size\":1024,"
     "\"prealloc\":\"yes\"}",
     "'prealloc'", NULL},
    {"-object {\"qom-type\":42,\"id\":\"r\"}", "'qom-type'", NULL},
    {"-object {}", "'{}'", "qom-type"},
    /* -device vfio-pci */
    {"-device vfio-pci,host=01:00", "'01:00'", NULL},
    {"-device vfio-pci,host=0000:01:20.0", "'0000:01:20.0'", NULL},
    {"-device vfio-pci", "host=", NULL},
    {"-device {\"driver\":\"vfio-pci\",\"host\":1}", "'host'", NULL},
    /* missing argument */
    {"-name x -m", "-m", "requires an argument"},
};

static void
test_bad_input(gconstpointer data)
{
  const BadCase *c = data;
  g_autoptr(GError) error = NULL;
  g_autoptr(QpQemuArgs) a = parse_line(c->line, &error);
  if (a != NULL)
    g_error("accepted: %s", c->line);
  g_assert_error(error, QP_ARGS_ERROR, QP_ARGS_ERROR_INVALID);
  g_test_message("%s -> %s", c->line, error->message);
  g_assert_null(strchr(error->message, '\n'));
  if (strstr(error->message, c->value) == NULL)
    g_error("'%s' not in: %s", c->value, error->message);
  if (c->also != NULL && strstr(error->message, c->also) == NULL)
    g_error("'%s' not in: %s", c->also, error->message);
  /* Only as QEMU 7.2 refuses it too (tests/args/test-refusals.c). */
  if (qp_qemu_refusal_find(error->message) == NULL)
    g_error("not a refusal of tests/common/qemu-refusals.c: %s",
            error->message);
}

/* ---- robustness: random command lines never crash, and every refusal is
 * one line
 * ------------------------------------------------------------------------ */

static QpPlan *plan_new(guint n_mem);
static void plan_set(QpPlan *p, guint k, int gnode, const char *nodes,
                     const char *memdev);
static void plan_free_(QpPlan *p);

static char *
random_value(void)
{
  static const char *const pieces[] = {
      "0",
      "1",
      "4",
      "-1",
      "0x10",
      "010",
      "99999",
      "1G",
      "4Q",
      "512",
      "1.5G",
      "",
      ",",
      ",,",
      "=",
      "cpus=",
      "sockets=2",
      "cores=",
      "threads=2",
      "maxcpus=8",
      "node",
      "cpu",
      "dist",
      "nodeid=",
      "memdev=m0",
      "mem=1G",
      "cpus=0-1",
      "src=0",
      "dst=1",
      "val=20",
      "node-id=0",
      "socket-id=0",
      "memory-backend-ram",
      "id=m0",
      "size=",
      "host-nodes=0-",
      "policy=bind",
      "prealloc=on",
      "help",
      "?",
      "{",
      "}",
      "\"",
      "\"qom-type\":",
      "\"size\":",
      "[0]",
      "vfio-pci",
      "host=01:00.0",
      "q35",
      "none",
      "memory-backend=m0",
      "-",
      "no",
      "noprealloc",
  };
  GString *s = g_string_new(NULL);
  guint n = (guint)g_test_rand_int_range(0, 6);
  for (guint i = 0; i < n; i++) {
    g_string_append(s, pieces[g_test_rand_int_range(0, G_N_ELEMENTS(pieces))]);
    if (g_test_rand_bit())
      g_string_append_c(s, ',');
  }
  return g_string_free(s, FALSE);
}

static void
test_random_argv(void)
{
  static const char *const options[] = {
      "-smp",      "-m",    "-numa",         "-object",
      "-machine",  "-M",    "-device",       "-name",
      "-S",        "--smp", "-mem-prealloc", "-mem-path",
      "-incoming", "image", "-nographic",    "-version"};
  guint refused = 0, passthrough = 0, launched = 0;
  for (guint iter = 0; iter < 4000; iter++) {
    g_autoptr(GPtrArray) argv = g_ptr_array_new_with_free_func(g_free);
    guint n = (guint)g_test_rand_int_range(0, 8);
    for (guint i = 0; i < n; i++) {
      const char *o = options[g_test_rand_int_range(0, G_N_ELEMENTS(options))];
      g_ptr_array_add(argv, g_strdup(o));
      if (g_test_rand_int_range(0, 10) < 9)
        g_ptr_array_add(argv, random_value());
    }
    g_ptr_array_add(argv, NULL);
    g_autoptr(GError) error = NULL;
    g_autoptr(QpQemuArgs) a =
        parse_strv((const char *const *)argv->pdata, &error);
    if (a == NULL) {
      g_assert_error(error, QP_ARGS_ERROR, QP_ARGS_ERROR_INVALID);
      g_assert_null(strchr(error->message, '\n'));
      refused++;
      continue;
    }
    g_assert_no_error(error);
    if (a->passthrough)
      passthrough++;
    else
      launched++;
    g_assert_cmpuint(a->req->vcpus, >=, 1);
    g_assert_cmpuint(a->req->maxcpus, >=, a->req->vcpus);
    /* Rewriting with a plan for every guest node (or the guest) works. */
    guint nm = a->req->n_gnodes ? a->req->n_gnodes : 1;
    QpPlan *plan = plan_new(nm);
    for (guint k = 0; k < nm; k++)
      plan_set(plan, k, a->req->n_gnodes ? (int)k : -1, "0", NULL);
    g_auto(GStrv) out = qp_qemu_args_rewrite(a, "qemu", plan, 3, &error);
    if (out == NULL)
      g_assert_error(error, QP_ARGS_ERROR, QP_ARGS_ERROR_INVALID);
    plan_free_(plan);
  }
  g_test_message("refused %u, passed through %u, launched %u", refused,
                 passthrough, launched);
  /* The generator reaches every outcome. */
  g_assert_cmpuint(refused, >, 0);
  g_assert_cmpuint(passthrough, >, 0);
  g_assert_cmpuint(launched, >, 0);
}

/* ---- rewrite
 * ----------------------------------------------------------------------------
 */

static const char *base_args = "-accel tcg -display none -nodefaults -device "
                               "isa-debug-exit,iobase=0xf4,iosize=4";

static QpPlan *
plan_new(guint n_mem)
{
  QpPlan *p = g_new0(QpPlan, 1);
  p->mode = QP_MODE_NUMA;
  /* As a plan whose threads need pinning: QEMU starts paused. */
  p->pause = TRUE;
  p->n_mem = n_mem;
  p->mem = g_new0(QpPlanMem, n_mem);
  return p;
}

static void
plan_set(QpPlan *p, guint k, int gnode, const char *nodes, const char *memdev)
{
  QpPlanMem *m = &p->mem[k];
  m->gnode = gnode;
  g_assert_true(qp_list_parse(nodes, "plan", 127, &m->host_nodes, NULL));
  m->policy = QP_POLICY_BIND;
  m->memdev = g_strdup(memdev);
}

static void
plan_free_(QpPlan *p)
{
  for (guint k = 0; k < p->n_mem; k++) {
    hwloc_bitmap_free(p->mem[k].host_nodes);
    g_free(p->mem[k].memdev);
  }
  g_free(p->mem);
  g_free(p);
}

typedef struct {
  const char *name;
  const char *args;       /* the caller's, after base_args */
  int gnodes[4];          /* plan: guest node per mem entry (-2 ends) */
  const char *memdevs[4]; /* plan: memdev per entry */
  guint64 sizes[4];       /* bytes of RAM mappings that must be bind:0 */
  const char *expect[4];  /* substrings of the rewritten argv */
  const char *policy;     /* expected policy of the mappings */
  const char *absent;     /* must not be in the rewritten argv */
} RewriteCase;

static const RewriteCase rewrite_cases[] = {
    {"no-vnuma",
     "-M q35 -m 96M -smp 2",
     {-1, -2},
     {NULL},
     {96 * MiB},
     {"-object "
      "memory-backend-ram,id=pc.ram,size=100663296,host-nodes=0,policy=bind "
      "-machine memory-backend=pc.ram -S -chardev socket,id=qemu-pin-qmp,fd=",
      NULL},
     "bind:0"},
    {"no-vnuma-pc",
     "-m 80M",
     {-1, -2},
     {NULL},
     {80 * MiB},
     {"id=pc.ram", NULL},
     "bind:0"},
    {"machine-backend-kv",
     "-M q35 -object memory-backend-ram,id=mem,size=72M "
     "-machine memory-backend=mem",
     {-1, -2},
     {NULL},
     {72 * MiB},
     {"memory-backend-ram,id=mem,size=72M,host-nodes=0,policy=bind", NULL},
     "bind:0"},
    {"machine-backend-json",
     "-M q35 -m 88M -object "
     "{\"qom-type\":\"memory-backend-ram\",\"id\":\"mem\",\"size\":92274688} "
     "-machine memory-backend=mem",
     {-1, -2},
     {NULL},
     {88 * MiB},
     {"\"host-nodes\":[0]", "\"policy\":\"bind\"", NULL},
     "bind:0"},
    {"numa-kv-and-json",
     "-M q35 -m 112M -smp 2 "
     "-object memory-backend-ram,id=m0,size=48M "
     "-object "
     "{\"qom-type\":\"memory-backend-ram\",\"id\":\"m1\",\"size\":67108864} "
     "-numa node,nodeid=0,cpus=0,memdev=m0 -numa "
     "node,nodeid=1,cpus=1,memdev=m1",
     {0, 1, -2},
     {"m0", "m1"},
     {48 * MiB, 64 * MiB},
     {"id=m0,size=48M,host-nodes=0,policy=bind", NULL},
     "bind:0"},
    {"caller-host-nodes-kept",
     "-M q35 -object "
     "memory-backend-ram,id=mem,size=56M,host-nodes=0,policy=preferred "
     "-machine memory-backend=mem",
     {-1, -2},
     {NULL},
     {56 * MiB},
     {"memory-backend-ram,id=mem,size=56M,host-nodes=0,policy=preferred "
      "-machine",
      NULL},
     "prefer:0"},
    {"prealloc-kv",
     "-M q35 -object memory-backend-ram,id=mem,size=40M,prealloc=on "
     "-machine memory-backend=mem",
     {-1, -2},
     {NULL},
     {40 * MiB},
     {"-object thread-context,id=qemu-pin-tc-mem,node-affinity=0 -object "
      "memory-backend-ram,id=mem,size=40M,prealloc=on,host-nodes=0,policy=bind,"
      "prealloc-context=qemu-pin-tc-mem",
      NULL},
     "bind:0"},
    {"prealloc-json",
     "-M q35 -m 40M -object "
     "{\"qom-type\":\"memory-backend-ram\",\"id\":\"mem\",\"size\":41943040,"
     "\"prealloc\":true} "
     "-machine memory-backend=mem",
     {-1, -2},
     {NULL},
     {40 * MiB},
     {"thread-context,id=qemu-pin-tc-mem,node-affinity=0",
      "\"prealloc-context\":\"qemu-pin-tc-mem\"", NULL},
     "bind:0"},
    {"mem-prealloc",
     "-M q35 -m 48M -mem-prealloc",
     {-1, -2},
     {NULL},
     {48 * MiB},
     {"thread-context,id=qemu-pin-tc-pc.ram,node-affinity=0 -object "
      "memory-backend-ram,"
      "id=pc.ram,size=50331648,host-nodes=0,policy=bind,prealloc-context=qemu-"
      "pin-tc-pc.ram",
      NULL},
     "bind:0"},
    {"mem-path-becomes-backend",
     "-M q35 -m 64M -mem-path /dev/shm -smp 1",
     {-1, -2},
     {NULL},
     {64 * MiB},
     {"-M q35 -m 64M -smp 1 -object "
      "memory-backend-file,id=pc.ram,size=67108864,"
      "mem-path=/dev/shm,host-nodes=0,policy=bind -machine "
      "memory-backend=pc.ram",
      NULL},
     "bind:0",
     "-mem-path"},
    {"trailing-comma",
     "-M q35 -object memory-backend-ram,id=mem,size=40M, "
     "-machine memory-backend=mem",
     {-1, -2},
     {NULL},
     {40 * MiB},
     {"id=mem,size=40M,host-nodes=0,policy=bind", NULL},
     "bind:0"},
};

static void
test_rewrite(gconstpointer data)
{
  const RewriteCase *c = data;
  g_autofree char *line =
      g_strdup_printf("%s -bios %s %s", base_args, firmware, c->args);
  g_autoptr(QpQemuArgs) a = parse_line_ok(line);
  guint n = 0;
  while (c->gnodes[n] != -2)
    n++;
  QpPlan *plan = plan_new(n);
  for (guint k = 0; k < n; k++)
    plan_set(plan, k, c->gnodes[k], "0", c->memdevs[k]);

  Qemu q;
  g_autofree char *argv = NULL, *err = NULL;
  if (!qemu_start(&q, a, plan, &argv, &err))
    g_error("QEMU refused %s: %s", argv, err);
  for (guint k = 0; c->expect[k]; k++)
    if (strstr(argv, c->expect[k]) == NULL)
      g_error("'%s' not in: %s", c->expect[k], argv);
  if (c->absent != NULL && strstr(argv, c->absent) != NULL)
    g_error("'%s' in: %s", c->absent, argv);

  /* Paused (-S), and each guest RAM mapping has the planned policy. */
  g_autofree char *status = qemu_cmd(&q, "{\"execute\":\"query-status\"}");
  g_assert_nonnull(strstr(status, "\"running\": false"));
  for (guint k = 0; c->sizes[k]; k++) {
    g_autofree char *policy = mapping_policy(q.pid, c->sizes[k]);
    if (g_strcmp0(policy, c->policy) != 0)
      g_error("mapping of %" G_GUINT64_FORMAT " bytes: policy %s, expected %s",
              c->sizes[k], policy, c->policy);
  }
  /* The guest runs and exits through isa-debug-exit: status 1. */
  g_free(qemu_cmd(&q, "{\"execute\":\"cont\"}"));
  int status_ = qemu_wait(&q);
  g_assert_true(WIFEXITED(status_));
  g_assert_cmpint(WEXITSTATUS(status_), ==, 1);
  qemu_close(&q);
  plan_free_(plan);
}

/* A plan that pins no thread of its own (pause false: balanced on one
 * node) adds no -S: QEMU starts as the caller asked; the caller's own -S
 * stays. */
static void
test_rewrite_no_pause(void)
{
  for (int caller_S = 0; caller_S < 2; caller_S++) {
    g_autoptr(QpQemuArgs) a =
        parse_line_ok(caller_S ? "-M q35 -m 96M -smp 2 -S" : "-M q35 -m 96M");
    QpPlan *plan = plan_new(1);
    plan->pause = FALSE;
    plan_set(plan, 0, -1, "0", NULL);
    g_autoptr(GError) error = NULL;
    g_auto(GStrv) out = qp_qemu_args_rewrite(a, "qemu", plan, 7, &error);
    g_assert_no_error(error);
    g_autofree char *joined = g_strjoinv(" ", out + 1);
    g_test_message("%s", joined);
    g_assert_true(g_str_has_suffix(
        joined, "-machine memory-backend=pc.ram -chardev "
                "socket,id=qemu-pin-qmp,fd=7 -mon chardev=qemu-pin-qmp,"
                "mode=control"));
    guint n_S = 0;
    for (guint i = 1; out[i] != NULL; i++)
      n_S += strcmp(out[i], "-S") == 0;
    g_assert_cmpuint(n_S, ==, (guint)caller_S);
    plan_free_(plan);
  }
}

/* A caller's chardev named as the private monitor's would be: the monitor
 * takes another id, which no word of the caller's holds (QEMU refuses an
 * id given twice: "Duplicate ID 'qemu-pin-qmp' for chardev"). */
static void
test_rewrite_monitor_id_taken(void)
{
  const char *argv[] = {
      "-chardev", "socket,id=qemu-pin-qmp,path=/tmp/m,server=on,wait=off",
      "-mon",     "chardev=qemu-pin-qmp",
      "-name",    "qemu-pin-qmp1",
      NULL};
  g_autoptr(QpQemuArgs) a = parse_ok(argv);
  g_auto(GStrv) out = qp_qemu_args_rewrite(a, "qemu", NULL, 7, NULL);
  g_autofree char *joined = g_strjoinv(" ", out);
  g_assert_cmpstr(joined, ==,
                  "qemu -chardev "
                  "socket,id=qemu-pin-qmp,path=/tmp/m,server=on,wait=off "
                  "-mon chardev=qemu-pin-qmp -name qemu-pin-qmp1 -S -chardev "
                  "socket,id=qemu-pin-qmp2,fd=7 -mon "
                  "chardev=qemu-pin-qmp2,mode=control");
}

/* Without a plan: only -S and the monitor; the caller's arguments are all
 * there, in order, untouched. */
static void
test_rewrite_no_plan(void)
{
  const char *argv[] = {"-name", "a,,b", "-smp", "2", "-S", "disk.img", NULL};
  g_autoptr(QpQemuArgs) a = parse_ok(argv);
  g_auto(GStrv) out = qp_qemu_args_rewrite(a, "/usr/bin/kvm", NULL, 7, NULL);
  g_autofree char *joined = g_strjoinv(" ", out);
  g_assert_cmpstr(
      joined, ==,
      "/usr/bin/kvm -name a,,b -smp 2 -S disk.img -chardev "
      "socket,id=qemu-pin-qmp,fd=7 -mon chardev=qemu-pin-qmp,mode=control");
  const char *argv2[] = {"-smp", "2", NULL};
  g_autoptr(QpQemuArgs) b = parse_ok(argv2);
  g_auto(GStrv) out2 =
      qp_qemu_args_rewrite(b, "qemu-system-x86_64", NULL, -1, NULL);
  g_autofree char *joined2 = g_strjoinv(" ", out2);
  g_assert_cmpstr(joined2, ==, "qemu-system-x86_64 -smp 2 -S");
}

/* Several host nodes, and a gap in them: host-nodes in the syntax QEMU 7.2
 * reads (ranges, repeated keys). Checked against QEMU with qom-get; the
 * binding itself needs the nodes to exist, so -S stops before that matters. */
static void
test_rewrite_node_lists(void)
{
  g_autoptr(QpQemuArgs) a =
      parse_line_ok("-M q35 -m 64M -object memory-backend-ram,id=mem,size=64M "
                    "-machine memory-backend=mem");
  QpPlan *plan = plan_new(1);
  plan_set(plan, 0, -1, "0-2,5", NULL);
  g_auto(GStrv) out =
      qp_qemu_args_rewrite(a, "qemu-system-x86_64", plan, -1, NULL);
  g_autofree char *joined = g_strjoinv(" ", out);
  g_assert_nonnull(
      strstr(joined, "size=64M,host-nodes=0-2,host-nodes=5,policy=bind"));

  const char *json =
      "{\"qom-type\":\"memory-backend-ram\",\"id\":\"mem\",\"size\":67108864}";
  const char *argv[] = {"-M",      "q35", "-m",       "64M",
                        "-object", json,  "-machine", "memory-backend=mem",
                        NULL};
  g_autoptr(QpQemuArgs) b = parse_ok(argv);
  g_auto(GStrv) out2 =
      qp_qemu_args_rewrite(b, "qemu-system-x86_64", plan, -1, NULL);
  g_autoptr(JsonParser) p = json_parser_new();
  g_assert_true(json_parser_load_from_data(p, out2[6], -1, NULL));
  JsonArray *nodes = json_object_get_array_member(
      json_node_get_object(json_parser_get_root(p)), "host-nodes");
  g_assert_cmpuint(json_array_get_length(nodes), ==, 4);
  g_assert_cmpint(json_array_get_int_element(nodes, 3), ==, 5);
  plan_free_(plan);

  /* A thread-context gets only nodes with CPUs (QEMU refuses one that
   * selects none); none at all, no thread-context. Node 0 has CPUs here,
   * node 5 does not exist. */
  g_autoptr(QpQemuArgs) c = parse_line_ok(
      "-M q35 -m 64M -object memory-backend-ram,id=mem,size=64M,prealloc=on "
      "-machine memory-backend=mem");
  QpPlan *p2 = plan_new(1);
  plan_set(p2, 0, -1, "0,5", NULL);
  g_auto(GStrv) out3 =
      qp_qemu_args_rewrite(c, "qemu-system-x86_64", p2, -1, NULL);
  g_autofree char *j3 = g_strjoinv(" ", out3);
  g_assert_nonnull(
      strstr(j3, "-object thread-context,id=qemu-pin-tc-mem,node-affinity=0 "));
  g_assert_nonnull(
      strstr(j3, "host-nodes=0,host-nodes=5,policy=bind,prealloc-context="));
  plan_free_(p2);
  QpPlan *p3 = plan_new(1);
  plan_set(p3, 0, -1, "5", NULL);
  g_auto(GStrv) out4 =
      qp_qemu_args_rewrite(c, "qemu-system-x86_64", p3, -1, NULL);
  g_autofree char *j4 = g_strjoinv(" ", out4);
  g_assert_null(strstr(j4, "thread-context"));
  g_assert_null(strstr(j4, "prealloc-context"));
  g_assert_nonnull(strstr(j4, "prealloc=on,host-nodes=5,policy=bind"));
  plan_free_(p3);
}

/* Preallocation in each combination: the exact argv of the rewrite, and
 * the -v line. With -daemonize no thread-context of the command line may be
 * used (QEMU creates its thread before the fork, and preallocating through it
 * then waits forever): qemu-pin adds none and takes the caller's
 * prealloc-context off; the binding stays. */
typedef struct {
  const char *name;
  const char *args;    /* the caller's QEMU arguments */
  int gnodes[3];       /* plan: guest node per mem entry (-2 ends) */
  const char *expect;  /* the whole rewritten argv, after "qemu" */
  const char *note;    /* in the -v line, or NULL for no line */
  const char *dropped; /* backends whose prealloc-context is taken off */
} PreallocCase;

#define PROXMOX_NUMA                                                           \
  "-smp 2 -m 256M -object memory-backend-ram,id=m0,size=128M,prealloc=on "     \
  "-object memory-backend-ram,id=m1,size=128M,prealloc=on "                    \
  "-numa node,nodeid=0,cpus=0,memdev=m0 -numa node,nodeid=1,cpus=1,memdev=m1"
#define ISSUE_LINE                                                             \
  "-smp 2 -m 256 -object thread-context,id=tc0,node-affinity=0 "               \
  "-object memory-backend-ram,id=m0,size=128M,prealloc=on,prealloc-context="   \
  "tc0 -object memory-backend-ram,id=m1,size=128M "                            \
  "-numa node,nodeid=0,cpus=0,memdev=m0 -numa node,nodeid=1,cpus=1,memdev=m1"
#define MACHINE_BACKEND                                                        \
  "-M q35 -m 128M -object memory-backend-ram,id=mem,size=128M,prealloc=on "    \
  "-machine memory-backend=mem"
#define JSON_BACKEND                                                           \
  "-M q35 -m 128M -object {\"qom-type\":\"memory-backend-memfd\",\"id\":"      \
  "\"mem\",\"size\":134217728,\"prealloc\":true} -machine memory-backend=mem"
#define NOTE "-daemonize: preallocating without a thread-context"

static const PreallocCase prealloc_cases[] = {
    {"numa-memdev/foreground",
     PROXMOX_NUMA,
     {0, 1, -2},
     "-smp 2 -m 256M -object thread-context,id=qemu-pin-tc-m0,node-affinity=0 "
     "-object memory-backend-ram,id=m0,size=128M,prealloc=on,host-nodes=0,"
     "policy=bind,prealloc-context=qemu-pin-tc-m0 -object thread-context,id="
     "qemu-pin-tc-m1,node-affinity=0 -object memory-backend-ram,id=m1,size="
     "128M,prealloc=on,host-nodes=0,policy=bind,prealloc-context=qemu-pin-tc-"
     "m1 -numa node,nodeid=0,cpus=0,memdev=m0 -numa node,nodeid=1,cpus=1,"
     "memdev=m1 -S",
     NULL},
    {"numa-memdev/daemonize",
     PROXMOX_NUMA " -daemonize",
     {0, 1, -2},
     "-smp 2 -m 256M -object memory-backend-ram,id=m0,size=128M,prealloc=on,"
     "host-nodes=0,policy=bind -object memory-backend-ram,id=m1,size=128M,"
     "prealloc=on,host-nodes=0,policy=bind -numa node,nodeid=0,cpus=0,memdev="
     "m0 -numa node,nodeid=1,cpus=1,memdev=m1 -daemonize -S",
     NOTE},
    {"machine-memory-backend/foreground",
     MACHINE_BACKEND,
     {-1, -2},
     "-M q35 -m 128M -object thread-context,id=qemu-pin-tc-mem,node-affinity="
     "0 -object memory-backend-ram,id=mem,size=128M,prealloc=on,host-nodes=0,"
     "policy=bind,prealloc-context=qemu-pin-tc-mem -machine memory-backend="
     "mem -S",
     NULL},
    {"machine-memory-backend/daemonize",
     "-daemonize " MACHINE_BACKEND,
     {-1, -2},
     "-daemonize -M q35 -m 128M -object memory-backend-ram,id=mem,size=128M,"
     "prealloc=on,host-nodes=0,policy=bind -machine memory-backend=mem -S",
     NOTE},
    {"json-backend/foreground",
     JSON_BACKEND,
     {-1, -2},
     "-M q35 -m 128M -object thread-context,id=qemu-pin-tc-mem,node-affinity="
     "0 -object {\"qom-type\":\"memory-backend-memfd\",\"id\":\"mem\",\"size\""
     ":134217728,\"prealloc\":true,\"host-nodes\":[0],\"policy\":\"bind\","
     "\"prealloc-context\":\"qemu-pin-tc-mem\"} -machine memory-backend=mem -S",
     NULL},
    {"json-backend/daemonize",
     JSON_BACKEND " -daemonize",
     {-1, -2},
     "-M q35 -m 128M -object {\"qom-type\":\"memory-backend-memfd\",\"id\":"
     "\"mem\",\"size\":134217728,\"prealloc\":true,\"host-nodes\":[0],"
     "\"policy\":\"bind\"} -machine memory-backend=mem -daemonize -S",
     NOTE},
    {"mem-prealloc/foreground",
     "-M q35 -m 128M -mem-prealloc",
     {-1, -2},
     "-M q35 -m 128M -mem-prealloc -object thread-context,id=qemu-pin-tc-pc."
     "ram,node-affinity=0 -object memory-backend-ram,id=pc.ram,size=134217728,"
     "host-nodes=0,policy=bind,prealloc-context=qemu-pin-tc-pc.ram -machine "
     "memory-backend=pc.ram -S",
     NULL},
    {"mem-prealloc/daemonize",
     "-M q35 -m 128M -mem-prealloc -daemonize",
     {-1, -2},
     "-M q35 -m 128M -mem-prealloc -daemonize -object memory-backend-ram,id="
     "pc.ram,size=134217728,host-nodes=0,policy=bind -machine memory-backend="
     "pc.ram -S",
     NOTE},
    {"caller-thread-context/foreground",
     ISSUE_LINE,
     {0, 1, -2},
     "-smp 2 -m 256 -object thread-context,id=tc0,node-affinity=0 -object "
     "memory-backend-ram,id=m0,size=128M,prealloc=on,prealloc-context=tc0,"
     "host-nodes=0,policy=bind -object memory-backend-ram,id=m1,size=128M,"
     "host-nodes=0,policy=bind -numa node,nodeid=0,cpus=0,memdev=m0 -numa "
     "node,nodeid=1,cpus=1,memdev=m1 -S",
     NULL},
    {"caller-thread-context/daemonize",
     ISSUE_LINE " -daemonize",
     {0, 1, -2},
     "-smp 2 -m 256 -object thread-context,id=tc0,node-affinity=0 -object "
     "memory-backend-ram,id=m0,size=128M,prealloc=on,host-nodes=0,policy=bind "
     "-object memory-backend-ram,id=m1,size=128M,host-nodes=0,policy=bind "
     "-numa node,nodeid=0,cpus=0,memdev=m0 -numa node,nodeid=1,cpus=1,memdev="
     "m1 -daemonize -S",
     NOTE " (QEMU starts its thread before the fork, and the daemon would wait "
          "for it forever); memory stays bound",
     "m0"},
    /* Not in the plan, escapes in another value: only the key goes. */
    {"caller-context-unplanned-backend/daemonize",
     "-daemonize -object thread-context,id=tc0,cpu-affinity=0 -object "
     "memory-backend-file,id=f,size=128M,mem-path=/dev/shm/a,,b,prealloc=on,"
     "prealloc-context=tc0,share=on -object {\"qom-type\":\"memory-backend-"
     "ram\",\"id\":\"j\",\"size\":134217728,\"prealloc-context\":\"tc0\"}",
     {-2},
     "-daemonize -object thread-context,id=tc0,cpu-affinity=0 -object "
     "memory-backend-file,id=f,size=128M,mem-path=/dev/shm/a,,b,prealloc=on,"
     "share=on -object {\"qom-type\":\"memory-backend-ram\",\"id\":\"j\","
     "\"size\":134217728} -S",
     NULL,
     "f, j"},
    /* ",," after a flag is an empty flag to QEMU, not an escape: the
     * context is an item of its own, and it goes as dropped says. */
    {"caller-context-after-flag/daemonize",
     "-daemonize -object memory-backend-ram,id=e,size=128M,x,,"
     "prealloc-context=tc0",
     {-2},
     "-daemonize -object memory-backend-ram,id=e,size=128M,x, -S",
     NULL,
     "e"},
};

static void
test_rewrite_prealloc(gconstpointer data)
{
  const PreallocCase *c = data;
  /* As qemu-pin runs it: the caller's contexts are taken off first. */
  g_auto(GStrv) words = g_strsplit(c->args, " ", -1);
  g_autofree char *dropped = NULL;
  g_auto(GStrv) safe =
      qp_argv_daemonize_safe(g_strv_length(words), words, &dropped);
  g_assert_cmpstr(dropped, ==, c->dropped);
  g_autofree char *line = safe ? g_strjoinv(" ", safe) : g_strdup(c->args);
  g_autoptr(QpQemuArgs) a = parse_line_ok(line);
  guint n = 0;
  while (c->gnodes[n] != -2)
    n++;
  QpPlan *plan = plan_new(n);
  for (guint k = 0; k < n; k++)
    plan_set(plan, k, c->gnodes[k], "0", NULL);
  g_autoptr(GError) error = NULL;
  g_auto(GStrv) out = qp_qemu_args_rewrite(a, "qemu", plan, -1, &error);
  g_assert_no_error(error);
  g_autofree char *joined = g_strjoinv(" ", out + 1);
  g_assert_cmpstr(joined, ==, c->expect);
  g_autofree char *note = qp_qemu_args_prealloc_note(a, plan);
  g_test_message("-v: %s", note ? note : "(none)");
  if (c->note == NULL)
    g_assert_null(note);
  else
    g_assert_nonnull(strstr(note ? note : "", c->note));
  plan_free_(plan);
}

/* -daemonize: an -object value that is no memory backend to read (a JSON
 * qom-type that is not a string) stays as written, quietly: no JSON
 * library warning reaches stderr (G_DEBUG=fatal-criticals makes one an
 * abort here). */
static void
test_daemonize_unreadable_object(void)
{
  const char *argv[] = {
      "-daemonize",
      "-object",
      "{\"qom-type\":{},\"id\":\"m\",\"prealloc-context\":\"t\"}",
      "-object",
      "{\"qom-type\":[1],\"prealloc-context\":\"t\"}",
      NULL};
  g_autofree char *dropped = NULL;
  g_auto(GStrv) safe =
      qp_argv_daemonize_safe(G_N_ELEMENTS(argv) - 1, (char **)argv, &dropped);
  g_assert_null(safe);
  g_assert_null(dropped);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  make_firmware();

  g_test_add_func("/args/syntax/key-value-escapes-and-implied-keys",
                  test_kv_syntax);
  g_test_add_func("/args/syntax/values-are-never-options", test_option_values);
  for (gsize i = 0; i < G_N_ELEMENTS(smp_cases); i++) {
    g_autofree char *path = g_strdup_printf(
        "/args/smp/%s/%s", smp_cases[i].machine, smp_cases[i].smp);
    g_test_add_data_func(path, &smp_cases[i], test_smp);
  }
  g_test_add_func("/args/smp/topology-equals-qemu", test_smp_matches_qemu);
  g_test_add_func("/args/smp/spapr-cpu-core-at-start",
                  test_spapr_cpu_core_at_start);
  g_test_add_func("/args/m/sizes-as-qemu-strtosz", test_sizes);
  g_test_add_func("/args/machine/smp-and-memory-properties",
                  test_machine_smp_memory);
  g_test_add_func("/args/m/size-slots-maxmem-default", test_memory);
  g_test_add_func("/args/machine/board-defaults", test_board_defaults);
  g_test_add_func("/args/object/memory-backends-both-syntaxes", test_backends);
  g_test_add_func("/args/device/vfio-host-normalised", test_vfio);
  g_test_add_func("/args/numa/nodes-cpus-memdev-dist", test_numa_nodes);
  g_test_add_func("/args/numa/cpu-by-topology-ids", test_numa_cpu);
  g_test_add_func("/args/numa/unassigned-vcpus-and-no-memory",
                  test_numa_defaults);
  g_test_add_func("/args/numa/assignment-equals-qemu",
                  test_numa_defaults_match_qemu);
  g_test_add_func("/args/passthrough/help-version-probe", test_passthrough);
  for (gsize i = 0; i < G_N_ELEMENTS(bad_cases); i++) {
    g_autofree char *path =
        g_strdup_printf("/args/bad-input/%" G_GSIZE_FORMAT, i);
    g_test_add_data_func(path, &bad_cases[i], test_bad_input);
  }
  for (gsize i = 0; i < G_N_ELEMENTS(rewrite_cases); i++) {
    g_autofree char *path =
        g_strdup_printf("/args/rewrite/qemu-accepts/%s", rewrite_cases[i].name);
    g_test_add_data_func(path, &rewrite_cases[i], test_rewrite);
  }
  g_test_add_func("/args/rewrite/no-pause-adds-no-S", test_rewrite_no_pause);
  g_test_add_func("/args/rewrite/no-plan-adds-only-S-and-monitor",
                  test_rewrite_no_plan);
  g_test_add_func("/args/rewrite/monitor-id-taken",
                  test_rewrite_monitor_id_taken);
  g_test_add_func("/args/rewrite/host-node-lists", test_rewrite_node_lists);
  for (gsize i = 0; i < G_N_ELEMENTS(prealloc_cases); i++) {
    g_autofree char *path =
        g_strdup_printf("/args/rewrite/prealloc/%s", prealloc_cases[i].name);
    g_test_add_data_func(path, &prealloc_cases[i], test_rewrite_prealloc);
  }
  g_test_add_func("/args/rewrite/daemonize-unreadable-object-stays",
                  test_daemonize_unreadable_object);
  g_test_add_func("/args/robustness/random-command-lines", test_random_argv);

  int ret = g_test_run();
  g_unlink(firmware);
  g_rmdir(tmpdir);
  g_free(firmware);
  g_free(tmpdir);
  return ret;
}
