#include "launcher/qemu/numbers.h"

#include <string.h>

#include "launcher/qemu/error.h"

gboolean
qp_read_digits(const char **p, guint base, guint64 *v)
{
  for (; g_ascii_isxdigit(**p); (*p)++) {
    guint64 d = (guint64)g_ascii_xdigit_value(**p);
    if (d >= base)
      break;
    if (*v > (G_MAXUINT64 - d) / base)
      return FALSE;
    *v = *v * base + d;
  }
  return TRUE;
}

gboolean
qp_parse_uint(const char *text, guint64 max, guint64 *out)
{
  const char *p = text;
  guint base = 10;
  guint64 v = 0;

  if (p == NULL || !g_ascii_isdigit(*p))
    return FALSE;
  if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
    base = 16;
    p += 2;
    if (!g_ascii_isxdigit(*p))
      return FALSE;
  } else if (p[0] == '0' && p[1] != '\0') {
    base = 8;
    p++;
  }
  if (!qp_read_digits(&p, base, &v) || *p != '\0' || v > max)
    return FALSE;
  *out = v;
  return TRUE;
}

gboolean
qp_parse_range(const char *text, guint64 max, guint64 *lo, guint64 *hi)
{
  const char *dash = strchr(text, '-');
  if (dash == NULL) {
    if (!qp_parse_uint(text, max, lo))
      return FALSE;
    *hi = *lo;
    return TRUE;
  }
  g_autofree char *a = g_strndup(text, (gsize)(dash - text));
  return qp_parse_uint(a, max, lo) && qp_parse_uint(dash + 1, max, hi) &&
         *lo <= *hi;
}

typedef enum {
  SIZE_OK,
  SIZE_BAD,       /* not a size */
  SIZE_TOO_LARGE, /* more than 64 bits */
} SizeRead;

/* The number a size starts with: hex ("0x") or decimal with an optional
 * fraction, *P left after it. As QEMU 7.2's qemu_strtosz(): a '.' may
 * have no digits after it ("1.k", "1024."), and *HAS_FRACTION is set only
 * for a fraction that is not zero ("1024.0" is a whole number). */
static SizeRead
size_number(const char **p, guint64 *whole, double *fraction,
            gboolean *has_fraction)
{
  gboolean hex = (*p)[0] == '0' && ((*p)[1] == 'x' || (*p)[1] == 'X');
  if (hex)
    *p += 2;
  if (hex ? !g_ascii_isxdigit(**p) : !g_ascii_isdigit(**p))
    return SIZE_BAD;
  if (!qp_read_digits(p, hex ? 16 : 10, whole))
    return SIZE_TOO_LARGE;
  if (hex || **p != '.')
    return SIZE_OK;
  (*p)++;
  for (double scale = 0.1; g_ascii_isdigit(**p); (*p)++, scale /= 10)
    *fraction += (**p - '0') * scale;
  *has_fraction = *fraction != 0;
  return SIZE_OK;
}

/* The multiplier of SUFFIX (one of B K M G T P E, either case, or none),
 * 0 for anything else. */
static guint64
size_unit(const char *suffix, gboolean default_mib)
{
  static const char units[] = "BKMGTPE";
  if (*suffix == '\0')
    return default_mib ? QP_MiB : 1;
  const char *u = strchr(units, g_ascii_toupper(*suffix));
  if (u == NULL || *u == '\0' || suffix[1] != '\0')
    return 0;
  return G_GUINT64_CONSTANT(1) << (10 * (u - units));
}

gboolean
qp_parse_size(const char *text, const char *what, gboolean default_mib,
              guint64 *out, GError **error)
{
  const char *p = text;
  guint64 whole = 0, mul = 0;
  double fraction = 0;
  gboolean has_fraction = FALSE;

  if (text == NULL || *text == '\0')
    return qp_args_invalid(
        error, "%s is empty: expected a size such as 512M or 4G", what);
  SizeRead r = size_number(&p, &whole, &fraction, &has_fraction);
  if (r == SIZE_OK) {
    /* QEMU's legacy MiB (-m, -numa mem=) is for a size whose last
     * character is a digit: "1024." and "0x40000000B" are bytes. */
    mul = size_unit(p, default_mib && g_ascii_isdigit(text[strlen(text) - 1]));
    /* QEMU reads "1.5" without a suffix as bytes, and bytes have no
     * fraction. */
    if (mul == 0 || (has_fraction && (*p == '\0' || mul == 1)))
      r = SIZE_BAD;
    else if (whole > G_MAXUINT64 / mul)
      r = SIZE_TOO_LARGE;
  }
  if (r == SIZE_BAD)
    return qp_args_invalid(
        error,
        "%s '%s' is not a size: expected a number with an optional "
        "suffix B, K, M, G, T, P or E (such as 512M or 4G)",
        what, text);
  guint64 v = 0, f = 0;
  if (r == SIZE_OK) {
    v = whole * mul;
    f = (guint64)(fraction * (double)mul);
  }
  if (r == SIZE_TOO_LARGE || v > G_MAXUINT64 - f)
    return qp_args_invalid(
        error, "%s '%s' is too large: a size must fit in 64 bits", what, text);
  *out = v + f;
  return TRUE;
}

gboolean
qp_parse_size_mib(const char *text, const char *what, gboolean default_mib,
                  guint64 *out, GError **error)
{
  guint64 bytes;
  if (!qp_parse_size(text, what, default_mib, &bytes, error))
    return FALSE;
  *out = qp_bytes_to_mib(bytes);
  return TRUE;
}

guint64
qp_bytes_to_mib(guint64 bytes)
{
  return bytes / QP_MiB + (bytes % QP_MiB != 0);
}

gboolean
qp_parse_bool(const char *text, gboolean *out)
{
  static const char *const yes[] = {"on", "yes", "true", "y", NULL};
  static const char *const no[] = {"off", "no", "false", "n", NULL};
  if (text != NULL && g_strv_contains(yes, text)) {
    *out = TRUE;
    return TRUE;
  }
  if (text != NULL && g_strv_contains(no, text)) {
    *out = FALSE;
    return TRUE;
  }
  return FALSE;
}
