/* A ledger record in its two forms (see record.h): one table of fields,
 * each with the codec of its kind, writes and reads both the record file's
 * JSON (version 1, read strictly: docs/ledger.md, "Record format") and
 * the summary's line. A value read from either form goes through the same
 * checks; adding a field is one row of the table. */
#include "topology/ledger/record.h"

#include <limits.h>
#include <string.h>

#include "topology/ledger/fields.h"

/* ---- The record --------------------------------------------------------- */

#define FIELD(key, codec, member, max, flags)                                  \
  {                                                                            \
    key, &codec, G_STRUCT_OFFSET(QpClaim, member), max, flags                  \
  }

/* In the order written and read, so that the first bad field is named.
 * Every field that holds nodes comes before "time", for the salvage of a
 * damaged record (docs/ledger.md); "resident-mib" holds none. The line's id is
 * its second token (qp_claim_line_id()). */
static const QpField fields[] = {
    {"version", &qp_field_version, 0, G_MAXINT, 0},
    FIELD("id", qp_field_id, id, 0, 0),
    FIELD("name", qp_field_text, name, 0, 0),
    FIELD("uuid", qp_field_text, uuid, 0, QP_FIELD_OMIT),
    FIELD("qemu-pid", qp_field_number, qemu_pid, INT_MAX, QP_FIELD_INT),
    FIELD("qemu-start", qp_field_number, qemu_start, G_MAXINT64, 0),
    FIELD("launcher-pid", qp_field_number, launcher_pid, INT_MAX, QP_FIELD_INT),
    FIELD("launcher-start", qp_field_number, launcher_start, G_MAXINT64, 0),
    FIELD("keeper-pid", qp_field_number, keeper_pid, INT_MAX, QP_FIELD_INT),
    FIELD("mode", qp_field_mode, mode, 0, 0),
    FIELD("best-effort", qp_field_flag, best_effort, 0, 0),
    FIELD("memory-mib", qp_field_node_map, mem, G_MAXINT64, QP_FIELD_HOLDING),
    FIELD("hugepages", qp_field_huge, huge, 0, QP_FIELD_HOLDING),
    FIELD("dedicated-cpus", qp_field_cpus, dedicated, 0, QP_FIELD_HOLDING),
    FIELD("load", qp_field_node_map, load, G_MAXUINT,
          QP_FIELD_HOLDING | QP_FIELD_PER_VCPUS),
    FIELD("cpu-load", qp_field_cpu_load, cpu_load, 0,
          QP_FIELD_HOLDING | QP_FIELD_OPTIONAL),
    FIELD("time", qp_field_number, time, G_MAXINT64, 0),
    FIELD("moved-at", qp_field_number, moved_at, G_MAXINT64,
          QP_FIELD_OMIT | QP_FIELD_OPTIONAL),
    FIELD("caller-placed", qp_field_flag, caller_placed, 0, QP_FIELD_OMIT),
    FIELD("started-nodes", qp_field_cpus, started_nodes, 0,
          QP_FIELD_OMIT | QP_FIELD_OPTIONAL),
    FIELD("started-cpus", qp_field_cpus, started_cpus, 0,
          QP_FIELD_OMIT | QP_FIELD_OPTIONAL),
    FIELD("started-reserve-mib", qp_field_node_map, started_reserve, G_MAXINT64,
          QP_FIELD_OMIT | QP_FIELD_OPTIONAL),
    FIELD("devices", qp_field_strings, devices, 0, QP_FIELD_OMIT),
    FIELD("resident-mib", qp_field_node_map, resident, G_MAXINT64,
          QP_FIELD_OPTIONAL),
};

#define ID_TOKEN 1 /* fields[1] is the id */

static gconstpointer
value_of(const QpClaim *c, const QpField *f)
{
  return (const char *)c + f->offset;
}

static gpointer
place_of(QpClaim *c, const QpField *f)
{
  return (char *)c + f->offset;
}

void
qp_claim_holdings_to_jv(QpJv *object, const GArray *mem, const GArray *huge,
                        hwloc_const_bitmap_t dedicated, const GArray *load,
                        const GArray *cpu_load)
{
  /* Only the holdings are read from it. */
  const QpClaim c = {.mem = (GArray *)mem,
                     .huge = (GArray *)huge,
                     .dedicated = (hwloc_bitmap_t)dedicated,
                     .load = (GArray *)load,
                     .cpu_load = (GArray *)cpu_load};
  for (guint i = 0; i < G_N_ELEMENTS(fields); i++)
    if (fields[i].flags & QP_FIELD_HOLDING)
      fields[i].codec->put_json(object, &fields[i], value_of(&c, &fields[i]));
}

char *
qp_claim_to_json(const QpClaim *c)
{
  g_autoptr(QpJv) o = qp_jv_object();
  for (guint i = 0; i < G_N_ELEMENTS(fields); i++)
    fields[i].codec->put_json(o, &fields[i], value_of(c, &fields[i]));
  GString *s = g_string_new(NULL);
  qp_jv_write_to(s, o, TRUE);
  g_string_append_c(s, '\n');
  return g_string_free(s, FALSE);
}

QpClaim *
qp_claim_from_json(const char *text, gsize len, GError **error)
{
  g_autoptr(GError) local = NULL;
  g_autoptr(QpJv) o = qp_jv_parse(text, (gssize)len, &local);
  if (o == NULL) {
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_INVALID,
                "ledger record is not valid JSON: %s", local->message);
    return NULL;
  }
  if (!qp_jv_is(o, QP_JV_OBJECT)) {
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_INVALID,
                "ledger record is %s; expected a JSON object",
                qp_jv_type_name(o));
    return NULL;
  }
  g_autoptr(QpClaim) c = qp_claim_new();
  for (guint i = 0; i < G_N_ELEMENTS(fields); i++) {
    const QpField *f = &fields[i];
    if (!f->codec->get_json(qp_jv_get(o, f->key), f, place_of(c, f), error))
      return NULL;
  }
  return g_steal_pointer(&c);
}

char *
qp_claim_to_summary_line(const QpClaim *c)
{
  GString *s = g_string_new(NULL);
  for (guint i = 0; i < G_N_ELEMENTS(fields); i++) {
    if (i > 0)
      g_string_append_c(s, ' ');
    fields[i].codec->put_line(s, &fields[i], value_of(c, &fields[i]));
  }
  return g_string_free(s, FALSE);
}

QpClaim *
qp_claim_from_summary_line(const char *line, GError **error)
{
  /* Split at the spaces in one copy, as g_strsplit() would, but with no
   * allocation per token: records are read by the thousand. */
  g_autofree char *copy = g_strdup(line);
  char *t[G_N_ELEMENTS(fields)];
  guint n = 0;
  for (char *p = copy; *line != '\0';) {
    char *space = strchr(p, ' ');
    if (n < G_N_ELEMENTS(fields))
      t[n] = p;
    n++;
    if (space == NULL)
      break;
    *space = '\0';
    p = space + 1;
  }
  if (n != G_N_ELEMENTS(fields)) {
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_INVALID,
                "not a ledger summary line: %u fields; expected %u: \"%.60s\"",
                n, (guint)G_N_ELEMENTS(fields), line);
    return NULL;
  }
  g_autoptr(QpClaim) c = qp_claim_new();
  for (guint i = 0; i < G_N_ELEMENTS(fields); i++)
    if (!fields[i].codec->get_line(t[i], &fields[i], place_of(c, &fields[i]),
                                   error))
      return NULL;
  return g_steal_pointer(&c);
}

const char *
qp_claim_line_id(const char *line, gsize *len)
{
  const char *p = line;
  for (guint i = 0; i < ID_TOKEN && p != NULL; i++) {
    p = strchr(p, ' ');
    if (p != NULL)
      p++;
  }
  if (p == NULL)
    return NULL;
  *len = strcspn(p, " ");
  return p;
}

const char *
qp_claim_line_fields(void)
{
  static char *keys;
  if (g_once_init_enter(&keys)) {
    GString *s = g_string_new(NULL);
    for (guint i = 0; i < G_N_ELEMENTS(fields); i++)
      g_string_append_printf(s, "%s%s", i ? "," : "", fields[i].key);
    g_once_init_leave(&keys, g_string_free(s, FALSE));
  }
  return keys;
}
