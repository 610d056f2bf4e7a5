/* The guest's initial RAM as QEMU 7.2's parse_memory_options() reads -m,
 * and the backend -machine memory-backend= gives it. */
#include "launcher/qemu/ram.h"

#include "launcher/qemu/backends.h"
#include "launcher/qemu/keyval.h"
#include "launcher/qemu/numbers.h"

/* size= of KV in *SIZE (the machine type's DEFAULT when not given); *CUSTOM
 * says whether one was. Without a suffix the size is in MiB, in bytes for
 * the first N_BYTES items of KV (-machine memory.size). */
static gboolean
ram_size(GArray *kv, guint n_bytes, guint64 default_size, guint64 *size,
         gboolean *custom, GError **error)
{
  QpKvPair *p = qp_kv_last(kv, "size");
  *size = default_size;
  *custom = FALSE;
  if (p == NULL)
    return TRUE;
  gboolean bytes = p - &g_array_index(kv, QpKvPair, 0) < (gssize)n_bytes;
  g_autofree char *what = g_strdup_printf("-m '%s': size", p->text);
  if (!qp_parse_size(p->value, what, !bytes, size, error))
    return FALSE;
  /* QEMU 7.2 reads a size of 0 as not given: the default. */
  if (*size == 0) {
    *size = default_size;
    return TRUE;
  }
  /* QEMU rounds up to 8 KiB. */
  if (*size > G_MAXUINT64 - 8191)
    return qp_args_invalid(error, "-m '%s': size '%s' is too large", p->text,
                           p->value);
  *size = (*size + 8191) & ~(guint64)8191;
  *custom = TRUE;
  return TRUE;
}

/* maxmem= of KV in *MAX (0 when not given), checked with slots= against the
 * RAM SIZE. */
static gboolean
ram_max(GArray *kv, guint64 size, guint64 *max, GError **error)
{
  QpKvPair *slots = qp_kv_last(kv, "slots"), *maxmem = qp_kv_last(kv, "maxmem");
  guint64 nslots = 0;
  *max = 0;
  if (slots != NULL && !qp_parse_uint(slots->value, G_MAXUINT64, &nslots))
    return qp_args_invalid(error, "-m '%s': slots '%s' is not a number",
                           slots->text, slots->value);
  if (maxmem == NULL && slots != NULL)
    return qp_args_invalid(error, "-m '%s': slots needs maxmem", slots->text);
  if (maxmem == NULL)
    return TRUE;
  g_autofree char *what = g_strdup_printf("-m '%s': maxmem", maxmem->text);
  if (!qp_parse_size(maxmem->value, what, FALSE, max, error))
    return FALSE;
  if (*max < size)
    return qp_args_invalid(error,
                           "-m '%s': maxmem (%" G_GUINT64_FORMAT
                           " bytes) must be at "
                           "least the RAM size (%" G_GUINT64_FORMAT " bytes)",
                           maxmem->text, *max, size);
  if (nslots > 0 && *max == size)
    return qp_args_invalid(
        error,
        "-m '%s': memory slots were given but maxmem equals the "
        "RAM size: expected maxmem above %" G_GUINT64_FORMAT " bytes",
        maxmem->text, size);
  return TRUE;
}

/* -machine memory-backend=: the RAM is that backend's, of its size unless
 * -m gives one (CUSTOM), which must then be the same. */
static gboolean
ram_backend(QpQemuArgs *a, gboolean custom, GError **error)
{
  QpBackend *b = qp_backend_find(a, a->machine_memdev);
  if (b == NULL)
    return qp_args_invalid(error,
                           "-machine memory-backend=%s names no -object "
                           "memory-backend-*",
                           a->machine_memdev);
  if (b->size_bytes == 0)
    return TRUE;
  if (!custom) {
    a->ram_bytes = b->size_bytes;
    a->req->mem_mib = b->size_mib;
  } else if (b->size_bytes != a->ram_bytes) {
    return qp_args_invalid(
        error,
        "-machine memory-backend=%s: the backend has %" G_GUINT64_FORMAT
        " bytes but -m asks for %" G_GUINT64_FORMAT ": they must "
        "be equal",
        a->machine_memdev, b->size_bytes, a->ram_bytes);
  }
  return TRUE;
}

gboolean
qp_ram_read(QpQemuArgs *a, GArray *kv, guint n_bytes, GError **error)
{
  static const char *const keys[] = {"size", "slots", "maxmem", NULL};
  guint64 size, max;
  gboolean custom;

  if (!qp_kv_check_keys(kv, keys, "-m", "size, slots or maxmem", error) ||
      !ram_size(kv, n_bytes, (guint64)a->machine_info.default_ram_mib * QP_MiB,
                &size, &custom, error) ||
      !ram_max(kv, size, &max, error))
    return FALSE;
  a->ram_bytes = size;
  a->req->mem_mib = qp_bytes_to_mib(size);
  a->req->maxmem_mib = qp_bytes_to_mib(max);
  return a->machine_memdev == NULL || ram_backend(a, custom, error);
}
