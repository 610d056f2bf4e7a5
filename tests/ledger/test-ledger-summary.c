/* The ledger's summary (topology/ledger/summary.h) with real files and real
 * processes: a claim survives the trip through a summary line, the read
 * uses the summary, and the records stay the truth whatever the summary
 * says: a writer killed between its record and the summary, a summary cut
 * short or garbled, a record removed behind its back, a VM gone. */
#include "topology/ledger/store.h"
#include "topology/ledger/summary.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
  char *tmp;
  char *state;
} Fixture;

static void
fixture_setup(Fixture *f, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  f->tmp = g_dir_make_tmp("qp-summary-XXXXXX", &error);
  g_assert_no_error(error);
  f->state = g_build_filename(f->tmp, "state", NULL);
}

static void
fixture_teardown(Fixture *f, gconstpointer data)
{
  g_autoptr(GDir) d = g_dir_open(f->state, 0, NULL);
  const char *name;
  while (d != NULL && (name = g_dir_read_name(d)) != NULL) {
    g_autofree char *p = g_build_filename(f->state, name, NULL);
    unlink(p);
  }
  rmdir(f->state);
  rmdir(f->tmp);
  g_free(f->tmp);
  g_free(f->state);
}

static char *
state_file(Fixture *f, const char *name)
{
  return g_build_filename(f->state, name, NULL);
}

static QpClaim *
claim_of(const char *id, int pid, guint64 start, guint64 mib)
{
  QpClaim *c = qp_claim_new();
  c->id = g_strdup(id);
  c->qemu_pid = pid;
  c->qemu_start = start;
  c->mode = QP_MODE_NUMA;
  c->time = 1700000000;
  QpNodeAmount a = {.node = 0, .mib = mib};
  g_array_append_val(c->mem, a);
  return c;
}

static QpClaim *
live_claim(const char *id, guint64 mib)
{
  return claim_of(id, getpid(), qp_proc_start_time(getpid()), mib);
}

/* One critical section as qemu-pin runs it: pre-scan, lock, read, write
 * CLAIM (NULL: none), remove record REMOVE (NULL: none), unlock. Returns
 * what the read found. */
static QpClaims *
section_full(Fixture *f, const QpClaim *claim, const char *remove)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(QpLedger) l = qp_ledger_open(f->state, &error);
  g_assert_no_error(error);
  qp_ledger_prescan(l, NULL);
  g_assert_true(qp_ledger_lock(l, &error));
  QpClaims *claims = qp_ledger_read(l, NULL, &error);
  g_assert_no_error(error);
  g_assert_nonnull(claims);
  if (claim != NULL)
    g_assert_true(qp_ledger_write(l, claim, &error));
  if (remove != NULL)
    g_assert_true(qp_ledger_remove(l, remove, &error));
  g_assert_no_error(error);
  qp_ledger_unlock(l);
  return claims;
}

static QpClaims *
section(Fixture *f, const QpClaim *claim)
{
  return section_full(f, claim, NULL);
}

/* Makes the summary list every record: a summary may lag a few added
 * records behind, never a removal, so add one and remove it again. */
static void
settle(Fixture *f)
{
  g_autoptr(QpClaim) pad = live_claim("pad", 1);
  qp_claims_free(section(f, pad));
  qp_claims_free(section_full(f, NULL, "pad"));
}

/* The memory record ID claims in CLAIMS, or -1 without it. */
static gint64
mib_of(const QpClaims *claims, const char *id)
{
  for (guint i = 0; i < claims->claims->len; i++) {
    const QpClaim *c = claims->claims->pdata[i];
    if (strcmp(c->id, id) == 0)
      return (gint64)g_array_index(c->mem, QpNodeAmount, 0).mib;
  }
  return -1;
}

/* Writes N records r0..r(N-1) of 100 + i MiB, all in the summary. */
static void
fill(Fixture *f, guint n)
{
  for (guint i = 0; i < n; i++) {
    g_autofree char *id = g_strdup_printf("r%u", i);
    g_autoptr(QpClaim) c = live_claim(id, 100 + i);
    qp_claims_free(section(f, c));
  }
  settle(f);
  g_autoptr(QpClaims) all = section(f, NULL);
  g_assert_cmpuint(all->claims->len, ==, n);
  g_autofree char *path = state_file(f, QP_STATE_SUMMARY);
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
  for (guint i = 0; i < n; i++) {
    g_autofree char *line = g_strdup_printf(" r%u - ", i);
    g_assert_nonnull(strstr(text, line));
  }
}

/* ---- Lines ----------------------------------------------------------------
 */

static void
test_line_round_trip(void)
{
  g_autoptr(QpClaim) c = claim_of("vm-1", 4242, 987654321, 2048);
  c->name = g_strdup("guest one % é\tx");
  c->uuid = g_strdup("c7a5fdbd-cdaf-9455-926a-d65c16db1809");
  g_ptr_array_add(c->devices, g_strdup("virtio-blk-pci disk0 (/dev/vda): "
                                       "PCI 0000:21:00.0, host node 2"));
  g_ptr_array_add(c->devices, g_strdup("vfio-pci hostdev0, x"));
  c->launcher_pid = 17;
  c->launcher_start = 18;
  c->keeper_pid = 4243;
  c->mode = QP_MODE_ONE_TO_ONE;
  c->best_effort = TRUE;
  QpNodeAmount m = {3, 512};
  g_array_append_val(c->mem, m);
  QpHugeClaim h = {1, 2048, 64};
  g_array_append_val(c->huge, h);
  hwloc_bitmap_set_range(c->dedicated, 4, 7);
  QpNodeLoad l = {1, 3};
  g_array_append_val(c->load, l);
  QpCpuLoad cl = {hwloc_bitmap_alloc(), 5};
  hwloc_bitmap_set_range(cl.cpus, 8, 11);
  hwloc_bitmap_set(cl.cpus, 20);
  g_array_append_val(c->cpu_load, cl);
  hwloc_bitmap_set_range(c->started_nodes, 1, 2);
  hwloc_bitmap_set_range(c->started_cpus, 8, 15);
  QpNodeAmount r = {2, 391};
  g_array_append_val(c->started_reserve, r);

  g_autofree char *line = qp_claim_to_summary_line(c);
  g_assert_null(strchr(line, '\n'));
  g_autoptr(GError) error = NULL;
  g_autoptr(QpClaim) back = qp_claim_from_summary_line(line, &error);
  g_assert_no_error(error);
  g_autofree char *want = qp_claim_to_json(c);
  g_autofree char *got = qp_claim_to_json(back);
  g_assert_cmpstr(got, ==, want);
  g_assert_nonnull(strstr(got, "\"started-nodes\" : \"1-2\""));
  g_assert_cmpuint(qp_node_amount_of(back->started_reserve, 2), ==, 391);

  g_autoptr(QpClaim) bare = claim_of("vm-2", 1, 2, 0);
  g_array_set_size(bare->mem, 0);
  g_autofree char *bare_line = qp_claim_to_summary_line(bare);
  g_autoptr(QpClaim) bare_back = qp_claim_from_summary_line(bare_line, &error);
  g_assert_no_error(error);
  g_autofree char *bare_want = qp_claim_to_json(bare);
  g_autofree char *bare_got = qp_claim_to_json(bare_back);
  g_assert_cmpstr(bare_got, ==, bare_want);
}

/* The token of FIELD in a line (its index among qp_claim_line_fields()). */
static guint
token_of(const char *field)
{
  g_auto(GStrv) keys = g_strsplit(qp_claim_line_fields(), ",", -1);
  for (guint i = 0; keys[i] != NULL; i++)
    if (strcmp(keys[i], field) == 0)
      return i;
  g_error("no field %s in a summary line", field);
}

/* LINE with the token of FIELD replaced by TOKEN. */
static char *
line_with(const char *line, const char *field, const char *token)
{
  g_auto(GStrv) t = g_strsplit(line, " ", -1);
  guint k = token_of(field);
  g_free(t[k]);
  t[k] = g_strdup(token);
  return g_strjoinv(" ", t);
}

/* JSON record TEXT with member FIELD's value replaced by VALUE (JSON). */
static char *
json_with(const char *text, const char *field, const char *value)
{
  g_autoptr(JsonParser) p = json_parser_new();
  g_assert_true(json_parser_load_from_data(p, text, -1, NULL));
  JsonObject *o = json_node_get_object(json_parser_get_root(p));
  g_autoptr(JsonParser) v = json_parser_new();
  g_assert_true(json_parser_load_from_data(v, value, -1, NULL));
  json_object_set_member(o, field, json_node_copy(json_parser_get_root(v)));
  g_autoptr(JsonGenerator) gen = json_generator_new();
  json_generator_set_root(gen, json_parser_get_root(p));
  return json_generator_to_data(gen, NULL);
}

/* A value that is wrong is refused from either form, by the same check:
 * the record file and the summary line say the same. */
static void
test_line_rejects(void)
{
  static const struct {
    const char *field, *token, *json, *message;
  } bad[] = {
      {"mode", "fast", "\"fast\"", "\"mode\" is \"fast\""},
      {"qemu-pid", "3000000000", "3000000000", "expected at most 2147483647"},
      {"memory-mib", "9000:1", "{\"9000\": 1}", "has node 9000"},
      {"memory-mib", "01:1", "{\"01\": 1}", "has key \"01\""},
      {"load", "0:5000000000", "{\"0\": 5000000000}",
       "expected at most 4294967295"},
      {"hugepages", "0:0:4", "[{\"node\": 0, \"page-kib\": 0, \"pages\": 4}]",
       "\"hugepages[0].page-kib\" is 0; expected a page size"},
      {"dedicated-cpus", "0-", "\"0-\"", "dedicated-cpus"},
      {"cpu-load", "2@", "[{\"cpus\": \"\", \"vcpus\": 2}]",
       "cpu-load[0].cpus"},
      {"id", ".vm", "\".vm\"", "\"id\" is \".vm\""},
      {"version", "2", "2", "\"version\" is 2"},
  };
  g_autoptr(QpClaim) c = claim_of("vm-1", 1, 2, 512);
  g_autofree char *line = qp_claim_to_summary_line(c);
  g_autofree char *json = qp_claim_to_json(c);
  g_autoptr(GError) none = NULL;
  g_autoptr(QpClaim) ok = qp_claim_from_summary_line(line, &none);
  g_assert_no_error(none);
  g_assert_nonnull(ok);
  for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_test_message("%s = %s", bad[i].field, bad[i].token);
    g_autofree char *l = line_with(line, bad[i].field, bad[i].token);
    g_autofree char *j = json_with(json, bad[i].field, bad[i].json);
    g_autoptr(GError) le = NULL, je = NULL;
    g_autoptr(QpClaim) from_line = qp_claim_from_summary_line(l, &le);
    g_autoptr(QpClaim) from_json = qp_claim_from_json(j, strlen(j), &je);
    g_assert_null(from_line);
    g_assert_null(from_json);
    g_assert_error(le, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_INVALID);
    g_assert_error(je, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_INVALID);
    g_assert_nonnull(strstr(je->message, bad[i].message));
    g_assert_cmpstr(le->message, ==, je->message);
  }
  /* A line of another length is no line: a field more, a field less. */
  g_autofree char *longer = g_strconcat(line, " extra", NULL);
  g_assert_null(qp_claim_from_summary_line(longer, NULL));
  /* A leading space is an empty first field, as g_strsplit() counts it:
   * one field more. */
  g_autofree char *spaced = g_strconcat(" ", line, NULL);
  g_autoptr(GError) se = NULL;
  g_assert_null(qp_claim_from_summary_line(spaced, &se));
  guint fields = 1;
  for (const char *q = spaced; *q != '\0'; q++)
    fields += *q == ' ';
  g_autofree char *want = g_strdup_printf(": %u fields;", fields);
  g_assert_error(se, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_INVALID);
  g_assert_nonnull(strstr(se->message, want));
  *strrchr(line, ' ') = '\0';
  g_assert_null(qp_claim_from_summary_line(line, NULL));
  g_assert_null(qp_claim_from_summary_line("", NULL));
}

/* The line's own reader of numbers and node maps takes exactly what
 * g_ascii_string_to_unsigned() and g_strsplit() took before it: decimal
 * digits (leading zeros too), nothing else, nothing beyond the field's
 * largest value; a map's items "node:value" joined by commas, none for "-"
 * or an empty token, an empty item refused. */
static void
test_line_numbers(void)
{
  g_autoptr(QpClaim) c = claim_of("vm-1", 1, 2, 512);
  g_autofree char *line = qp_claim_to_summary_line(c);
  static const char *numbers[] = {"0",
                                  "007",
                                  "9223372036854775807",
                                  "9223372036854775808",
                                  "18446744073709551615",
                                  "18446744073709551616",
                                  "+5",
                                  "-5",
                                  "0x10",
                                  "1e3",
                                  "5a",
                                  "",
                                  "99999999999999999999999"};
  for (guint i = 0; i < G_N_ELEMENTS(numbers); i++) {
    guint64 v = 0;
    gboolean was =
        g_ascii_string_to_unsigned(numbers[i], 10, 0, G_MAXUINT64, &v, NULL) &&
        v <= G_MAXINT64;
    g_autofree char *l = line_with(line, "qemu-start", numbers[i]);
    g_autoptr(GError) error = NULL;
    g_autoptr(QpClaim) back = qp_claim_from_summary_line(l, &error);
    g_test_message("qemu-start \"%s\": %s", numbers[i],
                   error ? error->message : "taken");
    g_assert_cmpint(back != NULL, ==, was);
    if (back != NULL)
      g_assert_cmpuint((guint64)back->qemu_start, ==, v);
  }
  static const struct {
    const char *token;
    guint n; /* items read; G_MAXUINT: refused */
    guint64 last;
  } maps[] = {
      {"-", 0, 0},
      {"", 0, 0},
      {"0:1", 1, 1},
      {"0:1,3:2048", 2, 2048},
      {"0:1,", G_MAXUINT, 0},
      {",0:1", G_MAXUINT, 0},
      {"0:1,,1:1", G_MAXUINT, 0},
      {"0:+1", G_MAXUINT, 0},
      {"0", G_MAXUINT, 0},
      {"1:00000000000000000000000000000000000000000000000000000000000000000007",
       1, 7},
      {"1:00000000000000000000000000000000000000000000000000000000000000000x07",
       G_MAXUINT, 0},
  };
  for (guint i = 0; i < G_N_ELEMENTS(maps); i++) {
    g_autofree char *l = line_with(line, "memory-mib", maps[i].token);
    g_autoptr(GError) error = NULL;
    g_autoptr(QpClaim) back = qp_claim_from_summary_line(l, &error);
    g_test_message("memory-mib \"%s\": %s", maps[i].token,
                   error ? error->message : "taken");
    if (maps[i].n == G_MAXUINT) {
      g_assert_null(back);
      g_assert_nonnull(strstr(error->message, "memory-mib"));
      continue;
    }
    g_assert_no_error(error);
    g_assert_cmpuint(back->mem->len, ==, maps[i].n);
    if (maps[i].n > 0)
      g_assert_cmpuint(
          g_array_index(back->mem, QpNodeAmount, back->mem->len - 1).mib, ==,
          maps[i].last);
  }
}

/* A line's text is UTF-8, as a record file's JSON must be: a name that
 * unescapes to other bytes is refused, not handed on to a record that no
 * reader could take back. */
static void
test_line_text_utf8(void)
{
  g_autoptr(QpClaim) c = claim_of("vm-1", 1, 2, 512);
  g_autofree char *line = qp_claim_to_summary_line(c);
  static const struct {
    const char *field, *token;
    gboolean taken;
  } texts[] = {
      {"name", "=vm%C3%A9", TRUE},     {"name", "=vm%ED%A0", FALSE},
      {"uuid", "=%FF", FALSE},         {"devices", "=disk,%C3%A9", TRUE},
      {"devices", "=disk,%C3", FALSE},
  };
  for (guint i = 0; i < G_N_ELEMENTS(texts); i++) {
    g_autofree char *l = line_with(line, texts[i].field, texts[i].token);
    g_autoptr(GError) error = NULL;
    g_autoptr(QpClaim) back = qp_claim_from_summary_line(l, &error);
    g_test_message("%s \"%s\": %s", texts[i].field, texts[i].token,
                   error ? error->message : "taken");
    g_assert_cmpint(back != NULL, ==, texts[i].taken);
    if (back == NULL) {
      g_assert_nonnull(strstr(error->message, texts[i].field));
      g_assert_nonnull(strstr(error->message, "expected escaped UTF-8 text"));
      continue;
    }
    g_autofree char *json = qp_claim_to_json(back);
    g_autoptr(QpClaim) again = qp_claim_from_json(json, strlen(json), NULL);
    g_assert_nonnull(again);
  }
}

/* ---- The read uses it ------------------------------------------------------
 */

/* A record changed in place (same inode: never done by qemu-pin, which
 * renames) is read from the summary: the read did not open the record. */
static void
test_read_uses_summary(Fixture *f, gconstpointer data)
{
  fill(f, 3);
  g_autofree char *rec = state_file(f, "r1.json");
  g_autoptr(QpClaim) other = live_claim("r1", 999);
  g_autofree char *text = qp_claim_to_json(other);
  int fd = open(rec, O_WRONLY | O_TRUNC);
  g_assert_cmpint(fd, >=, 0);
  g_assert_cmpint(write(fd, text, strlen(text)), ==, (ssize_t)strlen(text));
  close(fd);
  g_autoptr(QpClaims) claims = section(f, NULL);
  g_assert_cmpint(mib_of(claims, "r1"), ==, 101);
}

/* ---- Records stay the truth ---------------------------------------------- */

/* A writer killed after its record is in place but before the summary is
 * written: the next read has the new record and the new version of a
 * rewritten one. */
static void
test_killed_writer_loses_nothing(Fixture *f, gconstpointer data)
{
  fill(f, 3);
  pid_t child = fork();
  g_assert_cmpint(child, >=, 0);
  if (child == 0) {
    QpLedger *l = qp_ledger_open(f->state, NULL);
    qp_ledger_prescan(l, NULL);
    if (!qp_ledger_lock(l, NULL))
      _exit(1);
    QpClaims *c = qp_ledger_read(l, NULL, NULL);
    QpClaim *fresh =
        claim_of("new", getppid(), qp_proc_start_time(getppid()), 777);
    QpClaim *redo =
        claim_of("r2", getppid(), qp_proc_start_time(getppid()), 555);
    if (c == NULL || !qp_ledger_write(l, fresh, NULL) ||
        !qp_ledger_write(l, redo, NULL))
      _exit(1);
    raise(SIGKILL); /* before the unlock, which writes the summary */
    _exit(1);
  }
  int status = 0;
  g_assert_cmpint(waitpid(child, &status, 0), ==, child);
  g_assert_true(WIFSIGNALED(status));
  g_assert_cmpint(WTERMSIG(status), ==, SIGKILL);

  g_autoptr(QpClaims) claims = section(f, NULL);
  g_assert_cmpuint(claims->claims->len, ==, 4);
  g_assert_cmpint(mib_of(claims, "new"), ==, 777);
  g_assert_cmpint(mib_of(claims, "r2"), ==, 555);
  g_assert_cmpint(mib_of(claims, "r0"), ==, 100);
}

/* The summary garbled in each way: ignored, every record read from its file,
 * and the summary written anew. */
static void
test_corrupt_summary_ignored(Fixture *f, gconstpointer data)
{
  static const char *damage[] = {"cut", "flip", "header", "empty", "junk"};
  for (guint k = 0; k < G_N_ELEMENTS(damage); k++) {
    g_test_message("damage: %s", damage[k]);
    fill(f, 3);
    g_autofree char *path = state_file(f, QP_STATE_SUMMARY);
    g_autofree char *text = NULL;
    gsize len = 0;
    g_assert_true(g_file_get_contents(path, &text, &len, NULL));
    /* A summary that lists r1 at another size than its record. */
    char *at = strstr(text, "r1 - ");
    g_assert_nonnull(at);
    char *mib = strstr(at, " 0:101 ");
    g_assert_nonnull(mib);
    mib[5] = '9'; /* 0:101 -> 0:109 */
    if (strcmp(damage[k], "cut") == 0)
      len -= 10;
    else if (strcmp(damage[k], "header") == 0)
      text[strlen("qemu-pin-ledger-summary ")] = '7';
    else if (strcmp(damage[k], "empty") == 0)
      len = 0;
    else if (strcmp(damage[k], "junk") == 0)
      memset(text, 'x', len);
    /* "flip": only the size changed: the hash no longer matches. */
    g_assert_true(g_file_set_contents(path, text, (gssize)len, NULL));
    g_autoptr(QpClaims) claims = section(f, NULL);
    g_assert_cmpuint(claims->claims->len, ==, 3);
    g_assert_cmpint(mib_of(claims, "r1"), ==, 101);
    g_autofree char *again = NULL;
    g_assert_true(g_file_get_contents(path, &again, NULL, NULL));
    g_autofree char *head = g_strdup_printf("qemu-pin-ledger-summary 4 %s\n",
                                            qp_claim_line_fields());
    g_assert_true(g_str_has_prefix(again, head));
    g_assert_nonnull(strstr(again, " 0:101 "));
  }
}

/* A record removed behind the summary's back is not read back from it. */
static void
test_removed_record_gone(Fixture *f, gconstpointer data)
{
  fill(f, 3);
  g_autofree char *rec = state_file(f, "r0.json");
  g_assert_cmpint(unlink(rec), ==, 0);
  g_autoptr(QpClaims) claims = section(f, NULL);
  g_assert_cmpuint(claims->claims->len, ==, 2);
  g_assert_cmpint(mib_of(claims, "r0"), ==, -1);
}

/* A VM gone after the summary was written: its record is pruned, and the
 * summary forgets it. */
static void
test_gone_vm_pruned(Fixture *f, gconstpointer data)
{
  fill(f, 2);
  int pfd[2];
  g_assert_cmpint(pipe(pfd), ==, 0);
  pid_t child = fork();
  if (child == 0) {
    char b;
    close(pfd[1]);
    (void)!read(pfd[0], &b, 1);
    _exit(0);
  }
  close(pfd[0]);
  g_autoptr(QpClaim) c = claim_of("gone", child, qp_proc_start_time(child), 5);
  qp_claims_free(section(f, c));
  settle(f);
  g_autofree char *path = state_file(f, QP_STATE_SUMMARY);
  g_autofree char *before = NULL;
  g_assert_true(g_file_get_contents(path, &before, NULL, NULL));
  g_assert_nonnull(strstr(before, " gone "));
  g_autoptr(QpClaims) second = section(f, NULL);
  g_assert_cmpint(mib_of(second, "gone"), ==, 5);
  close(pfd[1]);
  g_assert_cmpint(waitpid(child, NULL, 0), ==, child);

  g_autoptr(QpClaims) after = section(f, NULL);
  g_assert_cmpint(mib_of(after, "gone"), ==, -1);
  g_assert_cmpuint(after->claims->len, ==, 2);
  g_autofree char *rec = state_file(f, "gone.json");
  g_assert_false(g_file_test(rec, G_FILE_TEST_EXISTS));
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
  g_assert_null(strstr(text, " gone "));
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/ledger-summary/line/round-trip", test_line_round_trip);
  g_test_add_func("/ledger-summary/line/rejects", test_line_rejects);
  g_test_add_func("/ledger-summary/line/numbers", test_line_numbers);
  g_test_add_func("/ledger-summary/line/text-utf8", test_line_text_utf8);
#define FT(path, fn)                                                           \
  g_test_add(path, Fixture, NULL, fixture_setup, fn, fixture_teardown)
  FT("/ledger-summary/read/uses-summary", test_read_uses_summary);
  FT("/ledger-summary/truth/killed-writer", test_killed_writer_loses_nothing);
  FT("/ledger-summary/truth/corrupt-summary", test_corrupt_summary_ignored);
  FT("/ledger-summary/truth/removed-record", test_removed_record_gone);
  FT("/ledger-summary/truth/gone-vm", test_gone_vm_pruned);
  return g_test_run();
}
