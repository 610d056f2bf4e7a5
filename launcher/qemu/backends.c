/* The memory backends of -object, as QEMU 7.2's hostmem backends read
 * their properties. */
#include "launcher/qemu/backends.h"

#include <string.h>

#include "launcher/qemu/keyval.h"
#include "launcher/qemu/machine.h"
#include "launcher/qemu/memory.h"
#include "launcher/qemu/numbers.h"
#include "launcher/qemu/props.h"

void
qp_backend_free(gpointer p)
{
  QpBackend *b = p;
  g_free(b->id);
  g_free(b->qom_type);
  g_free(b->mem_path);
  hwloc_bitmap_free(b->host_nodes);
  g_free(b);
}

QpBackend *
qp_backend_find(const QpQemuArgs *a, const char *id)
{
  for (guint i = 0; id != NULL && i < a->backends->len; i++) {
    QpBackend *b = g_ptr_array_index(a->backends, i);
    if (strcmp(b->id, id) == 0)
      return b;
  }
  return NULL;
}

/* What QEMU 7.2's memory backends take, for a JSON -object. */
static const QpPropSchema backend_schema[] = {
    {"prealloc", QP_PROP_BOOL}, {"hugetlb", QP_PROP_BOOL},
    {"share", QP_PROP_BOOL},    {"merge", QP_PROP_BOOL},
    {"dump", QP_PROP_BOOL},     {"reserve", QP_PROP_BOOL},
    {"size", QP_PROP_SIZE},     {"hugetlbsize", QP_PROP_SIZE},
    {"align", QP_PROP_SIZE},    {"mem-path", QP_PROP_STRING},
    {"policy", QP_PROP_STRING}, {"prealloc-context", QP_PROP_STRING},
    {"seal", QP_PROP_BOOL},     {"readonly", QP_PROP_BOOL},
    {NULL, QP_PROP_BOOL},
};

/* memfd_create()'s flags (linux/memfd.h), as QEMU 7.2's qemu_memfd_create()
 * makes them. */
#define MFD_CLOEXEC_ 0x1u
#define MFD_ALLOW_SEALING_ 0x2u
#define MFD_HUGETLB_ 0x4u

/* The flags QEMU 7.2 makes a hugetlb memfd with, for the page size of
 * hugetlbsize= BYTES (0 when not given: the default hugepage size). */
static guint
memfd_flags(const QpProps *p, guint64 bytes)
{
  guint shift = bytes != 0 ? (guint)__builtin_ctzll(bytes) : 0;
  return MFD_CLOEXEC_ | MFD_HUGETLB_ | (shift << QP_MFD_HUGE_SHIFT) |
         (qp_props_bool_or(p, "seal", TRUE) ? MFD_ALLOW_SEALING_ : 0);
}

/* A memfd backend's hugetlbsize= of BYTES, as QEMU 7.2 takes it: 0 is
 * refused as it is set, a size that is no power of 2 as the memfd is made
 * (with hugetlb=on or off), each in QEMU's words; with hugetlb=on, a size
 * below the smallest base page (4 KiB) is no page size of any host, and
 * the kernel refuses it (ENODEV, as QEMU says it). 1 (2^0) asks for the
 * default hugepage size, as no hugetlbsize= does. */
static gboolean
memfd_page_size(QpBackend *b, const QpProps *p, guint64 bytes, GError **error)
{
  if (bytes == 0)
    return qp_args_invalid(error,
                           "%s '%s': Property "
                           "'memory-backend-memfd.hugetlbsize' doesn't take "
                           "value '0'",
                           p->option, p->text);
  if ((bytes & (bytes - 1)) != 0)
    return qp_args_invalid(error,
                           "%s '%s': hugetlbsize %" G_GUINT64_FORMAT
                           " is not valid: Hugepage size must be a power of 2",
                           p->option, p->text, bytes);
  if (b->hugetlb && bytes > 1 && bytes < 4096)
    return qp_args_invalid(error,
                           "%s '%s': hugetlbsize %" G_GUINT64_FORMAT
                           " is not a hugepage size of any host: expected "
                           "4096 bytes or more (QEMU: failed to create memfd "
                           "with flags 0x%x: No such device)",
                           p->option, p->text, bytes, b->memfd_flags);
  return TRUE;
}

/* The properties of backend B from P; *HAS_SIZE says whether size= is
 * given. */
static gboolean
backend_read(QpBackend *b, const QpProps *p, gboolean *has_size, GError **error)
{
  guint64 huge_bytes = 0;
  gboolean has_huge;
  if (!qp_props_check(p, backend_schema, error) ||
      !qp_props_size(p, "size", &b->size_bytes, has_size, error) ||
      !qp_props_bool(p, "prealloc", &b->prealloc, error) ||
      !qp_props_bool(p, "hugetlb", &b->hugetlb, error) ||
      !qp_props_bool(p, "readonly", &b->readonly, error) ||
      !qp_props_size(p, "hugetlbsize", &huge_bytes, &has_huge, error))
    return FALSE;
  if (strcmp(b->qom_type, "memory-backend-memfd") == 0) {
    if (b->hugetlb)
      b->memfd_flags = memfd_flags(p, has_huge ? huge_bytes : 0);
    if (has_huge && !memfd_page_size(b, p, huge_bytes, error))
      return FALSE;
  }
  b->hugetlbsize_kib = huge_bytes / 1024;
  b->mem_path = g_strdup(qp_props_string(p, "mem-path"));
  const char *policy = qp_props_string(p, "policy");
  if (policy != NULL && !qp_policy_parse(policy, &b->policy))
    return qp_args_invalid(error,
                           "%s '%s': policy '%s' is not one of default, "
                           "preferred, bind, interleave",
                           p->option, p->text, policy);
  if (!qp_props_index_set(p, "host-nodes", QP_MAX_NODES - 1, &b->host_nodes,
                          error))
    return FALSE;
  b->prealloc_context = qp_props_has(p, "prealloc-context");
  b->reserve = qp_props_bool_or(p, "reserve", TRUE);
  return TRUE;
}

gboolean
qp_object_read(QpQemuArgs *a, const QpOpt *o, GError **error)
{
  const char *text = o->value, *qom_type, *id;
  g_auto(QpProps) p = {0};

  if (!qp_props_read(&p, "-object", text, "qom-type", error) ||
      !qp_props_get_string(&p, "qom-type", &qom_type, error))
    return FALSE;
  if (qom_type == NULL && p.json != NULL)
    return qp_args_invalid(error, "-object '%s': 'qom-type' must be a string",
                           text);
  if (!qp_props_get_string(&p, "id", &id, error))
    return FALSE;
  if (qom_type == NULL)
    return TRUE; /* QEMU says what is wrong */
  if (strcmp(qom_type, "iothread") == 0) {
    a->req->n_iothreads++;
    return TRUE;
  }
  if (!g_str_has_prefix(qom_type, "memory-backend-"))
    return TRUE;

  if (id == NULL || *id == '\0')
    return qp_args_invalid(error, "-object '%s': a memory backend needs an id",
                           text);
  if (qp_backend_find(a, id) != NULL)
    return qp_args_invalid(error,
                           "-object '%s': id '%s' is already used by another "
                           "memory backend",
                           text, id);

  g_autoptr(GPtrArray) holder = g_ptr_array_new_with_free_func(qp_backend_free);
  QpBackend *b = g_new0(QpBackend, 1);
  g_ptr_array_add(holder, b);
  b->id = g_strdup(id);
  b->qom_type = g_strdup(qom_type);
  b->argi = o->vi;
  b->json = p.json != NULL;
  gboolean has_size = FALSE;
  if (!backend_read(b, &p, &has_size, error))
    return FALSE;
  if (has_size && b->size_bytes == 0)
    return qp_args_invalid(error,
                           "-object '%s': size 0 is not a memory size: "
                           "expected more than 0 bytes",
                           text);
  if (!has_size && strcmp(b->qom_type, "memory-backend-file") != 0)
    return qp_args_invalid(
        error, "-object '%s': memory backend '%s' needs a size", text, b->id);
  b->size_mib = qp_bytes_to_mib(b->size_bytes);
  if (b->policy == QP_POLICY_BIND && b->host_nodes == NULL)
    return qp_args_invalid(error, "-object '%s': policy bind needs host-nodes",
                           text);
  if (b->host_nodes != NULL && b->policy == QP_POLICY_DEFAULT)
    return qp_args_invalid(error,
                           "-object '%s': host-nodes needs a policy other "
                           "than default (bind, preferred or interleave)",
                           text);
  qp_backend_classify(b);
  g_ptr_array_add(a->backends, g_ptr_array_steal_index(holder, 0));
  return TRUE;
}
