/* Words written by name (see names.h). */
#include "topology/base/names.h"

#include <string.h>

const char *
qp_name_of(const QpName *table, gsize n, int value)
{
  for (gsize i = 0; i < n; i++)
    if (table[i].value == value)
      return table[i].name;
  return "?";
}

gboolean
qp_name_value(const QpName *table, gsize n, const char *text, int *out)
{
  for (gsize i = 0; i < n; i++)
    if (text != NULL && strcmp(table[i].name, text) == 0) {
      *out = table[i].value;
      return TRUE;
    }
  return FALSE;
}

QP_DEFINE_NAMES(mode, QpMode, {"auto", QP_MODE_AUTO}, {"none", QP_MODE_NONE},
                {"balanced", QP_MODE_BALANCED}, {"numa", QP_MODE_NUMA},
                {"one-to-one", QP_MODE_ONE_TO_ONE})
