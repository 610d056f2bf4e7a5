#include "launcher/qemu/numbers.h"

#include "launcher/qemu/error.h"

/* An unsigned integer as QEMU's qemu_strtou64(.., base 0) reads it: decimal,
 * 0x hex, or 0-prefixed octal; no sign, no blanks, nothing after. */
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
  for (; *p; p++) {
    int d = g_ascii_xdigit_value(*p);
    if (d < 0 || (guint)d >= base)
      return FALSE;
    if (v > (G_MAXUINT64 - (guint64)d) / base)
      return FALSE;
    v = v * base + (guint64)d;
  }
  if (v > max)
    return FALSE;
  *out = v;
  return TRUE;
}

/* A list value of the options visitor: "3" or "0-3" (base 0 numbers). */
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

gboolean
qp_parse_size(const char *text, const char *what, gboolean default_mib,
              guint64 *out, GError **error)
{
  const char *p = text;
  guint64 whole = 0;
  double fraction = 0;
  gboolean has_fraction = FALSE;
  guint64 mul;

  if (text == NULL || *text == '\0')
    return qp_args_invalid(
        error, "%s is empty: expected a size such as 512M or 4G", what);
  if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
    p += 2;
    if (!g_ascii_isxdigit(*p))
      goto bad;
    for (; g_ascii_isxdigit(*p); p++) {
      if (whole > (G_MAXUINT64 >> 4))
        goto too_large;
      whole = (whole << 4) | (guint64)g_ascii_xdigit_value(*p);
    }
  } else {
    if (!g_ascii_isdigit(*p))
      goto bad;
    for (; g_ascii_isdigit(*p); p++) {
      guint64 d = (guint64)(*p - '0');
      if (whole > (G_MAXUINT64 - d) / 10)
        goto too_large;
      whole = whole * 10 + d;
    }
    if (*p == '.') {
      double scale = 0.1;
      p++;
      if (!g_ascii_isdigit(*p))
        goto bad;
      has_fraction = TRUE;
      for (; g_ascii_isdigit(*p); p++) {
        fraction += (*p - '0') * scale;
        scale /= 10;
      }
    }
  }
  switch (g_ascii_toupper(*p)) {
  case '\0':
    mul = default_mib ? QP_MiB : 1;
    break;
  case 'B':
    mul = 1;
    break;
  case 'K':
    mul = G_GUINT64_CONSTANT(1) << 10;
    break;
  case 'M':
    mul = QP_MiB;
    break;
  case 'G':
    mul = G_GUINT64_CONSTANT(1) << 30;
    break;
  case 'T':
    mul = G_GUINT64_CONSTANT(1) << 40;
    break;
  case 'P':
    mul = G_GUINT64_CONSTANT(1) << 50;
    break;
  case 'E':
    mul = G_GUINT64_CONSTANT(1) << 60;
    break;
  default:
    goto bad;
  }
  if (*p != '\0' && p[1] != '\0')
    goto bad;
  /* QEMU reads "1.5" without a suffix as bytes, and bytes have no
   * fraction. */
  if (has_fraction && (*p == '\0' || mul == 1))
    goto bad;
  if (whole > G_MAXUINT64 / mul)
    goto too_large;
  {
    guint64 v = whole * mul;
    guint64 f = (guint64)(fraction * (double)mul);
    if (v > G_MAXUINT64 - f)
      goto too_large;
    *out = v + f;
  }
  return TRUE;

bad:
  return qp_args_invalid(
      error,
      "%s '%s' is not a size: expected a number with an optional "
      "suffix B, K, M, G, T, P or E (such as 512M or 4G)",
      what, text);
too_large:
  return qp_args_invalid(
      error, "%s '%s' is too large: a size must fit in 64 bits", what, text);
}

gboolean
qp_parse_size_mib(const char *text, const char *what, gboolean default_mib,
                  guint64 *out, GError **error)
{
  guint64 bytes;
  if (!qp_parse_size(text, what, default_mib, &bytes, error))
    return FALSE;
  *out = bytes / QP_MiB + (bytes % QP_MiB != 0);
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
