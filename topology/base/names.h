/* Words written by name: an enumeration kept as a table of names and
 * values, looked up both ways, and the one every layer speaks, the
 * placement mode (a ledger record names its VM's mode). */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  const char *name;
  int value;
} QpName;

/* The name of VALUE in TABLE (N entries), "?" when it has none. */
const char *qp_name_of(const QpName *table, gsize n, int value);
/* The value named TEXT (NULL: none) in TABLE into *OUT; FALSE if none. */
gboolean qp_name_value(const QpName *table, gsize n, const char *text,
                       int *out);

/* Defines qp_PREFIX_name(Type) and qp_PREFIX_parse(text, Type *) from the
 * {name, value} pairs that follow. */
#define QP_DEFINE_NAMES(prefix, Type, ...)                                     \
  static const QpName prefix##_names[] = {__VA_ARGS__};                        \
  const char *qp_##prefix##_name(Type v)                                       \
  {                                                                            \
    return qp_name_of(prefix##_names, G_N_ELEMENTS(prefix##_names), (int)v);   \
  }                                                                            \
  gboolean qp_##prefix##_parse(const char *text, Type *out)                    \
  {                                                                            \
    int v;                                                                     \
    if (!qp_name_value(prefix##_names, G_N_ELEMENTS(prefix##_names), text,     \
                       &v))                                                    \
      return FALSE;                                                            \
    *out = (Type)v;                                                            \
    return TRUE;                                                               \
  }

typedef enum {
  QP_MODE_AUTO,
  QP_MODE_NONE,
  QP_MODE_BALANCED,
  QP_MODE_NUMA,
  QP_MODE_ONE_TO_ONE,
} QpMode;

const char *qp_mode_name(QpMode mode); /* "auto", "one-to-one", ... */
gboolean qp_mode_parse(const char *text, QpMode *out);

G_END_DECLS
