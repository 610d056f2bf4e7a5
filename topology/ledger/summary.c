/* The ledger's summary (see summary.h). The file:
 *
 *   qemu-pin-ledger-summary 4 <the line's fields, comma-separated>
 *   <inode> <owner> <verdict> <claim line>          one per record
 *   end <records> <FNV-1a 64 of everything above, hex>
 *
 * A claim line is the record's line form (topology/ledger/record.h): one
 * token per field of the record, in the record's order. A summary whose
 * header names other fields (a qemu-pin with another record) is not read.
 * The owner is the record file's uid ("-": not known); the verdict whether
 * the record counts in a shared ledger (topology/ledger/trust.h): "-" not
 * judged, "ok", or why not (URI-escaped, one token). */
#include "topology/ledger/summary.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "topology/base/dir-file.h"
#include "topology/base/state-dir.h"
#include "topology/ledger/record.h"

#define FORMAT "qemu-pin-ledger-summary 4"
#define SUMMARY_MAX_BYTES (64 * 1024 * 1024)

typedef struct {
  guint64 ino;    /* of the record file the line was made from */
  char *line;     /* the claim line */
  QpClaim *claim; /* parsed, until taken */
  int live;       /* -1 unknown, 0 gone, 1 live */
  gint64 owner;   /* uid of the record file, -1 unknown */
  char *verdict;  /* NULL not judged, "" counts, else why it does not */
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
  g_free(e->verdict);
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

/* A verdict in its token form (see the top of this file) and back. */
static char *
verdict_token(const char *verdict)
{
  if (verdict == NULL)
    return g_strdup("-");
  if (*verdict == '\0')
    return g_strdup("ok");
  return g_uri_escape_string(verdict, NULL, FALSE);
}

static char *
verdict_parse(const char *token)
{
  if (strcmp(token, "-") == 0)
    return NULL;
  if (strcmp(token, "ok") == 0)
    return g_strdup("");
  return g_uri_unescape_string(token, NULL);
}

/* The summary's first line: its format and the fields of its lines. */
static char *
header(void)
{
  return g_strdup_printf(FORMAT " %s\n", qp_claim_line_fields());
}

/* The entries of TEXT (LEN bytes) into S; FALSE when it is not a whole
 * summary. */
static gboolean
parse_summary(char *text, gsize len, QpSummary *s)
{
  g_autofree char *head = header();
  gsize hl = strlen(head);
  if (len < hl || memcmp(text, head, hl) != 0 || text[len - 1] != '\n')
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
      hash != qp_dir_file_hash(text, (gsize)(end + 1 - text)))
    return FALSE;
  *end = '\0';
  for (char *line = text + hl; line < end;) {
    char *nl = strchr(line, '\n');
    if (nl != NULL)
      *nl = '\0';
    char *sp = strchr(line, ' ');
    char *sp2 = sp ? strchr(sp + 1, ' ') : NULL;
    char *sp3 = sp2 ? strchr(sp2 + 1, ' ') : NULL;
    gsize id_len = 0;
    const char *id = sp3 ? qp_claim_line_id(sp3 + 1, &id_len) : NULL;
    guint64 ino, owner = 0;
    if (id == NULL || id_len == 0)
      return FALSE;
    *sp = *sp2 = *sp3 = '\0';
    if (!g_ascii_string_to_unsigned(line, 10, 0, G_MAXUINT64, &ino, NULL) ||
        (strcmp(sp + 1, "-") != 0 &&
         !g_ascii_string_to_unsigned(sp + 1, 10, 0, G_MAXUINT32, &owner, NULL)))
      return FALSE;
    Entry *e = g_new0(Entry, 1);
    e->ino = ino;
    e->line = g_strdup(sp3 + 1);
    e->live = -1;
    e->owner = strcmp(sp + 1, "-") == 0 ? -1 : (gint64)owner;
    e->verdict = verdict_parse(sp2 + 1);
    g_hash_table_replace(s->entries, g_strndup(id, id_len), e);
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
  g_autofree char *head = header();
  GString *out = g_string_new(head);
  GHashTableIter it;
  gpointer key, value;
  g_hash_table_iter_init(&it, s->entries);
  while (g_hash_table_iter_next(&it, &key, &value)) {
    const Entry *e = value;
    g_autofree char *verdict = verdict_token(e->verdict);
    g_string_append_printf(out, "%" G_GUINT64_FORMAT " ", e->ino);
    if (e->owner < 0)
      g_string_append(out, "-");
    else
      g_string_append_printf(out, "%" G_GINT64_FORMAT, e->owner);
    g_string_append_printf(out, " %s %s\n", verdict, e->line);
  }
  guint64 hash = qp_dir_file_hash(out->str, out->len);
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

gint64
qp_summary_owner(const QpSummary *s, const char *id, guint64 ino)
{
  const Entry *e = lookup(s, id, ino);
  return e != NULL ? e->owner : -1;
}

const char *
qp_summary_verdict(const QpSummary *s, const char *id, guint64 ino)
{
  const Entry *e = lookup(s, id, ino);
  return e != NULL ? e->verdict : NULL;
}

void
qp_summary_set_verdict(QpSummary *s, const char *id, guint64 ino,
                       const char *verdict)
{
  Entry *e = lookup(s, id, ino);
  if (e == NULL || g_strcmp0(e->verdict, verdict) == 0)
    return;
  g_free(e->verdict);
  e->verdict = g_strdup(verdict);
  s->added++; /* a verdict kept saves judging it again */
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
    if (old == NULL || old->live < 0 || strcmp(old->line, e->line) != 0 ||
        old->owner != e->owner)
      continue;
    e->live = old->live;
    if (e->verdict == NULL && old->verdict != NULL) {
      e->verdict = g_steal_pointer(&old->verdict);
      s->added++;
    }
    if (e->claim == NULL)
      e->claim = g_steal_pointer(&old->claim);
  }
}

void
qp_summary_check_all(QpSummary *s, gboolean (*live)(QpClaim *claim),
                     QpSummaryJudge judge, gpointer data)
{
  GHashTableIter it;
  gpointer value;
  g_hash_table_iter_init(&it, s->entries);
  while (g_hash_table_iter_next(&it, NULL, &value)) {
    Entry *e = value;
    if (parsed(e) == NULL)
      continue;
    e->live = live(e->claim) ? 1 : 0;
    if (e->live && e->verdict == NULL && judge != NULL) {
      e->verdict = judge(e->claim, e->owner, data);
      if (e->verdict != NULL)
        s->added++;
    }
  }
}

void
qp_summary_set(QpSummary *s, const char *id, guint64 ino, gint64 owner,
               const QpClaim *claim)
{
  if (claim == NULL) {
    qp_summary_drop(s, id);
    return;
  }
  g_autofree char *line = qp_claim_to_summary_line(claim);
  Entry *old = g_hash_table_lookup(s->entries, id);
  if (old != NULL && old->ino == ino && old->owner == owner &&
      strcmp(old->line, line) == 0)
    return;
  Entry *e = g_new0(Entry, 1);
  e->ino = ino;
  e->line = g_steal_pointer(&line);
  e->live = -1;
  e->owner = owner;
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
