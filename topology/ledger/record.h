/* A ledger record's two forms, made from one table of fields
 * (topology/ledger/record.c): the JSON of its record file (docs/ledger.md,
 * "Record format") and the summary's line, one token per field in the same
 * order ("Summary"). Each field is written and checked by one codec in
 * both, so the forms cannot drift apart. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

#include "topology/base/jvalue.h"
#include "topology/ledger/claims.h"

G_BEGIN_DECLS

/* TRUE if ID can name a record: letters, digits, '-', '_' and '.' (not
 * leading), at most 128 characters. */
gboolean qp_claim_id_is_valid(const char *id);

/* JSON form of a record, and back: NULL with ERROR naming the first field
 * that is not what it should be. */
char *qp_claim_to_json(const QpClaim *claim);
QpClaim *qp_claim_from_json(const char *text, gsize len, GError **error);

/* The summary line of CLAIM (no newline, no leading space), and back:
 * NULL with ERROR when LINE is not one. */
char *qp_claim_to_summary_line(const QpClaim *claim);
QpClaim *qp_claim_from_summary_line(const char *line, GError **error);

/* The id of the summary line LINE (LEN bytes of the result; not
 * NUL-terminated there), or NULL when LINE has no id. */
const char *qp_claim_line_id(const char *line, gsize *len);

/* The fields of a line in order, comma-separated ("version,id,..."): a
 * summary made with other fields is not one to read. */
const char *qp_claim_line_fields(void);

/* What a VM holds, as its record, its plan and status write it:
 * "memory-mib" (QpNodeAmount), "hugepages" (QpHugeClaim), "dedicated-cpus",
 * "load" (QpNodeLoad) and "cpu-load" (QpCpuLoad); a NULL array is empty.
 * Set in OBJECT, or added to B, a json-glib builder, for the views
 * (record-json.c: the launch path links no json-glib). */
void qp_claim_holdings_to_jv(QpJv *object, const GArray *mem,
                             const GArray *huge, hwloc_const_bitmap_t dedicated,
                             const GArray *load, const GArray *cpu_load);
void qp_json_add_holdings(JsonBuilder *b, const GArray *mem, const GArray *huge,
                          hwloc_const_bitmap_t dedicated, const GArray *load,
                          const GArray *cpu_load);

G_END_DECLS
