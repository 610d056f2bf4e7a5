/* The kinds of a ledger record's fields (topology/ledger/fields.c), for
 * the record's table of fields (record.c): each kind's codec writes a
 * field's value into the JSON being built or as one token of a summary
 * line (no space), and reads it back from a JSON member (NULL: absent) or
 * a token, with the same checks for both. For the ledger's record only. */
#pragma once

#include <glib.h>

#include "topology/base/jvalue.h"
#include "topology/ledger/claims.h"

G_BEGIN_DECLS

typedef struct QpField QpField;

/* A field's value V (inside the claim) written into a JSON object being
 * built or as one token of a line (no space), and read back from the
 * member N (NULL: absent) or a token. */
typedef struct {
  void (*put_json)(QpJv *object, const QpField *f, gconstpointer v);
  gboolean (*get_json)(const QpJv *n, const QpField *f, gpointer v,
                       GError **error);
  void (*put_line)(GString *s, const QpField *f, gconstpointer v);
  gboolean (*get_line)(const char *token, const QpField *f, gpointer v,
                       GError **error);
} QpFieldCodec;

enum {
  QP_FIELD_INT = 1 << 0,      /* a number held in an int (else 64 bits) */
  QP_FIELD_OMIT = 1 << 1,     /* not written when NULL or empty */
  QP_FIELD_OPTIONAL = 1 << 4, /* items, node maps: may be absent when read */
  QP_FIELD_PER_VCPUS =
      1 << 2, /* a node map of QpNodeLoad (else QpNodeAmount) */
  QP_FIELD_HOLDING =
      1 << 3, /* what the VM holds: its plan and status show it */
};

struct QpField {
  const char *key;
  const QpFieldCodec *codec;
  gsize offset; /* in QpClaim */
  guint64 max;  /* numbers and node maps: the largest value */
  guint flags;
};

/* The kinds. version: no storage, always 1. id: char *, a valid record
 * id. text: char *, NULL for none. number: int (QP_FIELD_INT) or 64 bits, at
 * most max (QP_FIELD_OPTIONAL: 0 when absent; QP_FIELD_OMIT: 0 not
 * written). mode: QpMode by name. flag: gboolean, FALSE when absent
 * (QP_FIELD_OMIT: FALSE not written). node_map:
 * GArray of QpNodeAmount, or of QpNodeLoad (QP_FIELD_PER_VCPUS). huge: GArray
 * of QpHugeClaim. cpus: hwloc_bitmap_t. cpu_load: GArray of QpCpuLoad, may be
 * absent. strings: GPtrArray of char *, may be absent. */
extern const QpFieldCodec qp_field_version, qp_field_id, qp_field_text,
    qp_field_number, qp_field_mode, qp_field_flag, qp_field_node_map,
    qp_field_huge, qp_field_cpus, qp_field_cpu_load, qp_field_strings;

G_END_DECLS
