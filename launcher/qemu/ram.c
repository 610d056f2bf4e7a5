#include "launcher/qemu/ram.h"

#include "launcher/qemu/keyval.h"
#include "launcher/qemu/numbers.h"

/* KV holds -m's keys; from -machine memory.size= (BYTES) a size without a
 * suffix is in bytes, from -m in QP_MiB. */
gboolean
qp_ram_read(QpQemuArgs *a, GArray *kv, gboolean bytes, gboolean *custom,
            GError **error)
{
  static const char *const keys[] = {"size", "slots", "maxmem", NULL};
  const char *unknown = qp_kv_unknown_key(kv, keys);
  guint64 size = 128 * QP_MiB;
  QpKvPair *p;

  *custom = FALSE;
  if (unknown != NULL)
    return qp_args_invalid(
        error,
        "-m '%s': unknown parameter '%s': expected size, slots or "
        "maxmem",
        qp_kv_last(kv, unknown)->text, unknown);
  if ((p = qp_kv_last(kv, "size")) != NULL) {
    g_autofree char *what = g_strdup_printf("-m '%s': size", p->text);
    if (!qp_parse_size(p->value, what, !bytes, &size, error))
      return FALSE;
    /* QEMU 7.2 reads a size of 0 as not given: the default 128 QP_MiB. */
    if (size == 0) {
      size = 128 * QP_MiB;
    } else {
      /* QEMU rounds up to 8 KiB. */
      if (size > G_MAXUINT64 - 8191)
        return qp_args_invalid(error, "-m '%s': size '%s' is too large",
                               p->text, p->value);
      size = (size + 8191) & ~(guint64)8191;
      *custom = TRUE;
    }
  }
  QpKvPair *slots = qp_kv_last(kv, "slots"), *maxmem = qp_kv_last(kv, "maxmem");
  guint64 nslots = 0, max = 0;
  if (slots != NULL && !qp_parse_uint(slots->value, G_MAXUINT64, &nslots))
    return qp_args_invalid(error, "-m '%s': slots '%s' is not a number",
                           slots->text, slots->value);
  if (maxmem != NULL) {
    g_autofree char *what = g_strdup_printf("-m '%s': maxmem", maxmem->text);
    if (!qp_parse_size(maxmem->value, what, FALSE, &max, error))
      return FALSE;
    if (max < size)
      return qp_args_invalid(error,
                             "-m '%s': maxmem (%" G_GUINT64_FORMAT
                             " bytes) must be at "
                             "least the RAM size (%" G_GUINT64_FORMAT " bytes)",
                             maxmem->text, max, size);
    if (nslots > 0 && max == size)
      return qp_args_invalid(
          error,
          "-m '%s': memory slots were given but maxmem equals the "
          "RAM size: expected maxmem above %" G_GUINT64_FORMAT " bytes",
          maxmem->text, size);
  } else if (slots != NULL) {
    return qp_args_invalid(error, "-m '%s': slots needs maxmem", slots->text);
  }
  a->ram_bytes = size;
  a->req->mem_mib = qp_bytes_to_mib(size);
  a->req->maxmem_mib = qp_bytes_to_mib(max);
  return TRUE;
}
