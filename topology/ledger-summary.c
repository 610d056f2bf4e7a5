/* The ledger's summary (see ledger-summary.h). The file:
 *
 *   qemu-pin-ledger-summary 1
 *   <inode> <claim line>          one per record
 *   end <records> <FNV-1a 64 of everything above, hex>
 *
 * A claim line is space-separated: id, name
 * ("-" or "=" and the name URI-escaped), qemu-pid, qemu-start, launcher-pid,
 * launcher-start, keeper-pid, mode (number), best-effort (0/1), time, memory
 * ("node:mib,..."), hugepages ("node:kib:pages,..."), dedicated CPUs (a
 * list), load ("node:vcpus,...") and CPU load ("vcpus@list;..."), "-" for
 * an empty one. */
#include "topology/ledger-summary.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "topology/base/cpulist.h"
#include "topology/base/dir-file.h"
#include "topology/base/state-dir.h"
#include "topology/ledger.h"

#define HEADER "qemu-pin-ledger-summary 2\n"
#define SUMMARY_MAX_BYTES (64 * 1024 * 1024)
#define N_FIELDS 17

typedef struct {
  guint64 ino;    /* of the record file the line was made from */
  char *line;     /* the claim line */
  QpClaim *claim; /* parsed, until taken */
  int live;       /* -1 unknown, 0 gone, 1 live */
} Entry;

/* Records read from their files rather than the summary before a
 * critical section writes the summary again: a few record reads cost less
 * than writing every line at each start. */
#define SAVE_AFTER_MISSES 8

struct QpSummary {
  GHashTable *entries; /* id -> Entry */
  guint64 file_ino;
  guint added;        /* records set since loaded or saved */
  gboolean must_save; /* records dropped */
};

static void
entry_free(gpointer p)
{
  Entry *e = p;
  g_free(e->line);
  qp_claim_free(e->claim);
  g_free(e);
}

static QpSummary *
summary_new(void)
{
  QpSummary *s = g_new0(QpSummary, 1);
  s->entries =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, entry_free);
  return s;
}

void
qp_summary_free(QpSummary *s)
{
  if (s == NULL)
    return;
  g_hash_table_unref(s->entries);
  g_free(s);
}

guint64
qp_summary_file_ino(const QpSummary *s)
{
  return s->file_ino;
}

static guint64
fnv1a(const char *p, gsize n)
{
  guint64 h = 14695981039346656037ull;
  for (gsize i = 0; i < n; i++) {
    h ^= (guchar)p[i];
    h *= 1099511628211ull;
  }
  return h;
}

/* ---- Claim lines --------------------------------------------------------- */

static void
append_list(GString *s, hwloc_const_bitmap_t set)
{
  if (set == NULL || hwloc_bitmap_iszero(set)) {
    g_string_append(s, " -");
    return;
  }
  g_autofree char *text = qp_list_format(set);
  g_string_append_printf(s, " %s", text);
}

static void
append_holdings(GString *s, const QpClaim *c)
{
  g_string_append_c(s, ' ');
  for (guint i = 0; i < c->mem->len; i++) {
    const QpNodeAmount *m = &g_array_index(c->mem, QpNodeAmount, i);
    g_string_append_printf(s, "%s%d:%" G_GUINT64_FORMAT, i ? "," : "", m->node,
                           m->mib);
  }
  g_string_append(s, c->mem->len ? " " : "- ");
  for (guint i = 0; i < c->huge->len; i++) {
    const QpHugeClaim *h = &g_array_index(c->huge, QpHugeClaim, i);
    g_string_append_printf(s, "%s%d:%" G_GUINT64_FORMAT ":%" G_GUINT64_FORMAT,
                           i ? "," : "", h->node, h->page_kib, h->pages);
  }
  if (c->huge->len == 0)
    g_string_append_c(s, '-');
  append_list(s, c->dedicated);
  g_string_append_c(s, ' ');
  for (guint i = 0; i < c->load->len; i++) {
    const QpNodeLoad *l = &g_array_index(c->load, QpNodeLoad, i);
    g_string_append_printf(s, "%s%d:%u", i ? "," : "", l->node, l->vcpus);
  }
  g_string_append(s, c->load->len ? " " : "- ");
  for (guint i = 0; i < c->cpu_load->len; i++) {
    const QpCpuLoad *l = &g_array_index(c->cpu_load, QpCpuLoad, i);
    g_autofree char *cpus = qp_list_format(l->cpus);
    g_string_append_printf(s, "%s%u@%s", i ? ";" : "", l->vcpus, cpus);
  }
  if (c->cpu_load->len == 0)
    g_string_append_c(s, '-');
}

/* " =TEXT" escaped (no space, no comma), or " -" for NULL. */
static void
append_text(GString *s, const char *text)
{
  if (text == NULL) {
    g_string_append(s, " -");
    return;
  }
  g_autofree char *e = g_uri_escape_string(text, NULL, FALSE);
  g_string_append_printf(s, " =%s", e);
}

/* FIELD ("-" or "=TEXT") into *OUT; FALSE when it is neither. */
static gboolean
parse_text(const char *field, char **out)
{
  if (strcmp(field, "-") == 0)
    return TRUE;
  if (field[0] != '=')
    return FALSE;
  *out = g_uri_unescape_string(field + 1, NULL);
  return *out != NULL;
}

/* The record's identity and descriptions: its -uuid and devices. */
static void
append_descriptions(GString *s, const QpClaim *c)
{
  append_text(s, c->uuid);
  if (c->devices->len == 0) {
    g_string_append(s, " -");
    return;
  }
  g_string_append(s, " =");
  for (guint i = 0; i < c->devices->len; i++) {
    g_autofree char *e = g_uri_escape_string(c->devices->pdata[i], NULL, FALSE);
    g_string_append_printf(s, "%s%s", i ? "," : "", e);
  }
}

static gboolean
parse_descriptions(char **f, QpClaim *c)
{
  if (!parse_text(f[0], &c->uuid))
    return FALSE;
  if (strcmp(f[1], "-") == 0)
    return TRUE;
  if (f[1][0] != '=' || f[1][1] == '\0')
    return FALSE;
  g_auto(GStrv) parts = g_strsplit(f[1] + 1, ",", -1);
  for (guint i = 0; parts[i] != NULL; i++) {
    char *d = g_uri_unescape_string(parts[i], NULL);
    if (d == NULL)
      return FALSE;
    g_ptr_array_add(c->devices, d);
  }
  return TRUE;
}

char *
qp_claim_to_summary_line(const QpClaim *c)
{
  GString *s = g_string_new(c->id);
  append_text(s, c->name);
  g_string_append_printf(s,
                         " %d %" G_GUINT64_FORMAT " %d %" G_GUINT64_FORMAT
                         " %d %d %d %" G_GINT64_FORMAT,
                         c->qemu_pid, c->qemu_start, c->launcher_pid,
                         c->launcher_start, c->keeper_pid, (int)c->mode,
                         c->best_effort ? 1 : 0, c->time);
  append_holdings(s, c);
  append_descriptions(s, c);
  return g_string_free(s, FALSE);
}

static gboolean
num(const char *text, guint64 max, guint64 *out)
{
  return g_ascii_string_to_unsigned(text, 10, 0, max, out, NULL);
}

/* "a:b[:c],..." into N numbers per item (each at most MAX), appended to
 * OUT as guint64[N]. */
static gboolean
tuples(const char *text, guint n, GArray *out)
{
  if (strcmp(text, "-") == 0)
    return TRUE;
  g_auto(GStrv) items = g_strsplit(text, ",", -1);
  for (guint i = 0; items[i] != NULL; i++) {
    g_auto(GStrv) parts = g_strsplit(items[i], ":", -1);
    if (g_strv_length(parts) != n)
      return FALSE;
    for (guint k = 0; k < n; k++) {
      guint64 v;
      if (!num(parts[k], k == 0 ? QP_LIST_MAX_INDEX : G_MAXINT64, &v))
        return FALSE;
      g_array_append_val(out, v);
    }
  }
  return TRUE;
}

static gboolean
parse_holdings(char **f, QpClaim *c)
{
  g_autoptr(GArray) v = g_array_new(FALSE, FALSE, sizeof(guint64));
  if (!tuples(f[0], 2, v))
    return FALSE;
  for (guint i = 0; i < v->len; i += 2) {
    QpNodeAmount m = {(int)g_array_index(v, guint64, i),
                      g_array_index(v, guint64, i + 1)};
    g_array_append_val(c->mem, m);
  }
  g_array_set_size(v, 0);
  if (!tuples(f[1], 3, v))
    return FALSE;
  for (guint i = 0; i < v->len; i += 3) {
    QpHugeClaim h = {(int)g_array_index(v, guint64, i),
                     g_array_index(v, guint64, i + 1),
                     g_array_index(v, guint64, i + 2)};
    g_array_append_val(c->huge, h);
  }
  if (strcmp(f[2], "-") != 0) {
    g_auto(hwloc_bitmap_t) set = NULL;
    if (!qp_list_parse(f[2], "dedicated", QP_LIST_MAX_INDEX, &set, NULL))
      return FALSE;
    hwloc_bitmap_copy(c->dedicated, set);
  }
  g_array_set_size(v, 0);
  if (!tuples(f[3], 2, v))
    return FALSE;
  for (guint i = 0; i < v->len; i += 2) {
    guint64 n = g_array_index(v, guint64, i + 1);
    if (n > G_MAXUINT)
      return FALSE;
    QpNodeLoad l = {(int)g_array_index(v, guint64, i), (guint)n};
    g_array_append_val(c->load, l);
  }
  if (strcmp(f[4], "-") == 0)
    return TRUE;
  g_auto(GStrv) loads = g_strsplit(f[4], ";", -1);
  for (guint i = 0; loads[i] != NULL; i++) {
    char *at = strchr(loads[i], '@');
    guint64 n;
    if (at == NULL)
      return FALSE;
    *at = '\0';
    QpCpuLoad l = {NULL, 0};
    if (!num(loads[i], G_MAXUINT, &n) ||
        !qp_list_parse(at + 1, "cpu-load", QP_LIST_MAX_INDEX, &l.cpus, NULL))
      return FALSE;
    l.vcpus = (guint)n;
    g_array_append_val(c->cpu_load, l);
  }
  return TRUE;
}

QpClaim *
qp_claim_from_summary_line(const char *line, GError **error)
{
  g_auto(GStrv) f = g_strsplit(line, " ", -1);
  g_autoptr(QpClaim) c = qp_claim_new();
  guint64 v[8];
  gboolean ok = g_strv_length(f) == N_FIELDS && qp_claim_id_is_valid(f[0]) &&
                parse_text(f[1], &c->name);
  for (guint i = 0; ok && i < 8; i++)
    ok = num(f[2 + i],
             i == 1 || i == 3 ? G_MAXUINT64
             : i == 7         ? G_MAXINT64
                              : INT_MAX,
             &v[i]);
  ok = ok && v[5] <= QP_MODE_ONE_TO_ONE && v[6] <= 1 &&
       parse_holdings(f + 10, c) && parse_descriptions(f + 15, c);
  if (!ok) {
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_INVALID,
                "not a ledger summary line: \"%.60s\"", line);
    return NULL;
  }
  c->id = g_strdup(f[0]);
  c->qemu_pid = (int)v[0];
  c->qemu_start = v[1];
  c->launcher_pid = (int)v[2];
  c->launcher_start = v[3];
  c->keeper_pid = (int)v[4];
  c->mode = (QpMode)v[5];
  c->best_effort = v[6] != 0;
  c->time = (gint64)v[7];
  return g_steal_pointer(&c);
}

/* ---- The file ------------------------------------------------------------ */

/* The summary file's text, or NULL when there is none, it is too large, or
 * (in a SHARED ledger) neither root nor this user wrote it. */
static char *
read_summary_file(int dirfd, gboolean shared, gsize *len, guint64 *ino)
{
  char *text = NULL;
  struct stat st;
  int errsv = 0;
  if (!qp_dir_file_read(dirfd, QP_STATE_SUMMARY, SUMMARY_MAX_BYTES, &text, len,
                        &st, &errsv))
    return NULL;
  if (*len > SUMMARY_MAX_BYTES || *len != (gsize)st.st_size ||
      (shared && st.st_uid != 0 && st.st_uid != geteuid())) {
    g_free(text);
    return NULL; /* grown meanwhile, or not ours to trust */
  }
  *ino = (guint64)st.st_ino;
  return text;
}

/* The entries of TEXT (LEN bytes) into S; FALSE when it is not a whole
 * summary. */
static gboolean
parse_summary(char *text, gsize len, QpSummary *s)
{
  gsize hl = strlen(HEADER);
  if (len < hl || memcmp(text, HEADER, hl) != 0 || text[len - 1] != '\n')
    return FALSE;
  text[len - 1] = '\0';
  char *end = strrchr(text, '\n');
  if (end == NULL)
    return FALSE;
  guint64 count, hash;
  char *p = end + 1, *rest = NULL;
  if (strncmp(p, "end ", 4) != 0)
    return FALSE;
  count = g_ascii_strtoull(p + 4, &rest, 10);
  if (rest == p + 4 || *rest != ' ')
    return FALSE;
  if (!g_ascii_string_to_unsigned(rest + 1, 16, 0, G_MAXUINT64, &hash, NULL) ||
      hash != fnv1a(text, (gsize)(end + 1 - text)))
    return FALSE;
  *end = '\0';
  for (char *line = text + hl; line < end;) {
    char *nl = strchr(line, '\n');
    if (nl != NULL)
      *nl = '\0';
    char *sp = strchr(line, ' ');
    char *id_end = sp ? strchr(sp + 1, ' ') : NULL;
    guint64 ino;
    if (id_end == NULL)
      return FALSE;
    *sp = '\0';
    if (!num(line, G_MAXUINT64, &ino))
      return FALSE;
    Entry *e = g_new0(Entry, 1);
    e->ino = ino;
    e->line = g_strdup(sp + 1);
    e->live = -1;
    g_hash_table_replace(s->entries,
                         g_strndup(sp + 1, (gsize)(id_end - sp - 1)), e);
    line = nl ? nl + 1 : end;
  }
  return g_hash_table_size(s->entries) == count;
}

QpSummary *
qp_summary_load(int dirfd, gboolean shared)
{
  QpSummary *s = summary_new();
  gsize len = 0;
  guint64 ino = 0;
  g_autofree char *text = read_summary_file(dirfd, shared, &len, &ino);
  if (text == NULL)
    return s;
  if (!parse_summary(text, len, s)) {
    g_hash_table_remove_all(s->entries);
    s->must_save = TRUE; /* rewrite it */
    return s;
  }
  s->file_ino = ino;
  return s;
}

gboolean
qp_summary_save(QpSummary *s, int dirfd, gboolean shared, GError **error)
{
  GString *out = g_string_new(HEADER);
  GHashTableIter it;
  gpointer key, value;
  g_hash_table_iter_init(&it, s->entries);
  while (g_hash_table_iter_next(&it, &key, &value)) {
    const Entry *e = value;
    g_string_append_printf(out, "%" G_GUINT64_FORMAT " %s\n", e->ino, e->line);
  }
  guint64 hash = fnv1a(out->str, out->len);
  g_string_append_printf(out, "end %u %016" G_GINT64_MODIFIER "x\n",
                         g_hash_table_size(s->entries), hash);
  g_autofree char *text = g_string_free(out, FALSE);
  guint64 ino = 0;
  int errsv = 0;
  if (!qp_state_file_replace(dirfd, QP_STATE_SUMMARY, text, strlen(text),
                             shared ? 0644 : 0600, FALSE, &ino, &errsv, NULL,
                             NULL)) {
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_LEDGER,
                "cannot write the ledger summary: %s", g_strerror(errsv));
    return FALSE;
  }
  s->file_ino = ino;
  s->added = 0;
  s->must_save = FALSE;
  return TRUE;
}

/* ---- Entries ------------------------------------------------------------- */

static Entry *
lookup(const QpSummary *s, const char *id, guint64 ino)
{
  Entry *e = g_hash_table_lookup(s->entries, id);
  return e != NULL && e->ino == ino ? e : NULL;
}

static QpClaim *
parsed(Entry *e)
{
  if (e->claim == NULL)
    e->claim = qp_claim_from_summary_line(e->line, NULL);
  return e->claim;
}

QpClaim *
qp_summary_claim(QpSummary *s, const char *id, guint64 ino)
{
  Entry *e = lookup(s, id, ino);
  if (e == NULL || parsed(e) == NULL)
    return NULL;
  return g_steal_pointer(&e->claim);
}

int
qp_summary_liveness(const QpSummary *s, const char *id, guint64 ino)
{
  const Entry *e = lookup(s, id, ino);
  return e != NULL ? e->live : -1;
}

void
qp_summary_take_liveness(QpSummary *s, QpSummary *from)
{
  GHashTableIter it;
  gpointer key, value;
  g_hash_table_iter_init(&it, s->entries);
  while (g_hash_table_iter_next(&it, &key, &value)) {
    Entry *e = value;
    Entry *old = lookup(from, key, e->ino);
    /* The same inode with the same line: the same record. */
    if (old == NULL || old->live < 0 || strcmp(old->line, e->line) != 0)
      continue;
    e->live = old->live;
    if (e->claim == NULL)
      e->claim = g_steal_pointer(&old->claim);
  }
}

void
qp_summary_check_all(QpSummary *s, gboolean (*live)(const QpClaim *claim))
{
  GHashTableIter it;
  gpointer value;
  g_hash_table_iter_init(&it, s->entries);
  while (g_hash_table_iter_next(&it, NULL, &value)) {
    Entry *e = value;
    if (parsed(e) != NULL)
      e->live = live(e->claim) ? 1 : 0;
  }
}

void
qp_summary_set(QpSummary *s, const char *id, guint64 ino, const QpClaim *claim)
{
  if (claim == NULL) {
    qp_summary_drop(s, id);
    return;
  }
  g_autofree char *line = qp_claim_to_summary_line(claim);
  Entry *old = g_hash_table_lookup(s->entries, id);
  if (old != NULL && old->ino == ino && strcmp(old->line, line) == 0)
    return;
  Entry *e = g_new0(Entry, 1);
  e->ino = ino;
  e->line = g_steal_pointer(&line);
  e->live = -1;
  g_hash_table_replace(s->entries, g_strdup(id), e);
  s->added++;
}

void
qp_summary_drop(QpSummary *s, const char *id)
{
  if (g_hash_table_remove(s->entries, id))
    s->must_save = TRUE;
}

void
qp_summary_retain(QpSummary *s, GHashTable *keep)
{
  GHashTableIter it;
  gpointer key;
  g_hash_table_iter_init(&it, s->entries);
  while (g_hash_table_iter_next(&it, &key, NULL))
    if (!g_hash_table_contains(keep, key)) {
      g_hash_table_iter_remove(&it);
      s->must_save = TRUE;
    }
}

gboolean
qp_summary_needs_save(const QpSummary *s)
{
  return s->must_save || s->added >= SAVE_AFTER_MISSES;
}
