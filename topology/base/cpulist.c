#include "topology/base/cpulist.h"

#include "topology/base/dir-file.h"

#include <errno.h>
#include <stdlib.h>

/* The quark's name is the argument as written. */
/* clang-format off */
G_DEFINE_QUARK(qp-topology-error-quark, qp_topology_error)
/* clang-format on */

gboolean
qp_decimal_read(const char **p, const char *end, guint64 max,
                gboolean canonical, guint64 *out)
{
  const char *s = *p;
  if ((end != NULL && s == end) || !g_ascii_isdigit(*s))
    return FALSE;
  if (canonical && *s == '0' && (end == NULL || s + 1 < end) &&
      g_ascii_isdigit(s[1]))
    return FALSE;
  guint64 v = 0;
  for (; (end == NULL || s < end) && g_ascii_isdigit(*s); s++) {
    guint64 d = (guint64)(*s - '0');
    if (d > max || v > (max - d) / 10)
      return FALSE;
    v = v * 10 + d;
  }
  *p = s;
  *out = v;
  return TRUE;
}

static gboolean
parse_index(const char **p, guint max, guint *out)
{
  guint64 v = 0;
  if (!qp_decimal_read(p, NULL, max, FALSE, &v))
    return FALSE;
  *out = (guint)v;
  return TRUE;
}

gboolean
qp_list_parse(const char *text, const char *what, guint max,
              hwloc_bitmap_t *out, GError **error)
{
  g_auto(hwloc_bitmap_t) set = hwloc_bitmap_alloc();
  const char *p = text;

  if (text == NULL || *text == '\0') {
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_INVALID,
                "%s is empty: expected a list such as 0-3,8", what);
    return FALSE;
  }
  for (;;) {
    guint lo, hi;
    if (!parse_index(&p, max, &lo))
      goto bad;
    hi = lo;
    if (*p == '-') {
      p++;
      if (!parse_index(&p, max, &hi) || hi < lo)
        goto bad;
    }
    hwloc_bitmap_set_range(set, (unsigned)lo, (int)hi);
    if (*p == '\0')
      break;
    if (*p != ',')
      goto bad;
    p++;
  }
  *out = g_steal_pointer(&set);
  return TRUE;

bad:
  g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_INVALID,
              "%s '%s' is not a valid list: expected numbers 0-%u and "
              "ascending ranges separated by commas, such as 0-3,8",
              what, text, max);
  return FALSE;
}

char *
qp_list_format(hwloc_const_bitmap_t set)
{
  char *s = NULL;
  if (set == NULL || hwloc_bitmap_iszero(set))
    return g_strdup("");
  if (hwloc_bitmap_list_asprintf(&s, set) < 0)
    g_error("out of memory");
  char *r = g_strdup(s);
  free(s);
  return r;
}

gboolean
qp_list_read_file(const char *path, hwloc_bitmap_t *out, GError **error)
{
  g_autofree char *text = qp_file_read_text(path, G_MAXINT);
  *out = NULL;
  if (text == NULL)
    return TRUE;
  g_strstrip(text);
  if (*text == '\0')
    return TRUE;
  return qp_list_parse(text, path, QP_LIST_MAX_INDEX, out, error);
}
