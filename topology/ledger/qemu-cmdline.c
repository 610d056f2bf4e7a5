/* What a QEMU command line asks at most (see qemu-cmdline.h). */
#include "topology/ledger/qemu-cmdline.h"

#include <string.h>

#include "topology/base/boards.h"
#include "topology/base/jvalue.h"

#define MIB (1024.0 * 1024.0)

/* A QEMU size ("256", "1.5G", "512k"): bytes, UNIT bytes per unit when
 * it has no suffix; FALSE when it is none. */
static gboolean
parse_size(const char *text, double unit, double *bytes)
{
  char *end = NULL;
  double v = g_ascii_strtod(text, &end);
  if (end == text || !(v >= 0 && v < 1e30)) /* no NaN, no infinity */
    return FALSE;
  static const char suffixes[] = "BKMGTPE";
  if (*end != '\0') {
    const char *s = strchr(suffixes, g_ascii_toupper(*end));
    if (s == NULL || end[1] != '\0')
      return FALSE;
    unit = 1.0;
    for (const char *k = suffixes; k < s; k++)
      unit *= 1024.0;
  }
  *bytes = v * unit;
  return TRUE;
}

static guint64
to_mib(double bytes)
{
  double mib = bytes / MIB;
  if (mib >= (double)G_MAXUINT32)
    return G_MAXUINT32;
  guint64 whole = (guint64)mib;
  return (double)whole < mib ? whole + 1 : whole; /* rounded up */
}

/* The value of KEY in the key=value list OPTS; IMPLIED names the key of a
 * leading bare value ("-m 256" is size=256). A new string or NULL. */
static char *
keyval(const char *opts, const char *key, const char *implied)
{
  g_auto(GStrv) parts = g_strsplit(opts, ",", -1);
  char *found = NULL;
  for (guint i = 0; parts[i] != NULL; i++) {
    const char *eq = strchr(parts[i], '=');
    const char *k = parts[i], *v = eq ? eq + 1 : NULL;
    gsize klen = eq ? (gsize)(eq - parts[i]) : strlen(parts[i]);
    if (eq == NULL && i == 0 && implied != NULL) {
      k = implied;
      klen = strlen(implied);
      v = parts[i];
    }
    if (v != NULL && strlen(key) == klen && strncmp(k, key, klen) == 0) {
      g_free(found);
      found = g_strdup(v);
    }
  }
  return found;
}

/* -m [size=]MEGS[,slots=N,maxmem=SIZE]: the larger of size and maxmem. */
static gboolean
memory_option(const char *v, double *bytes)
{
  g_autofree char *size = keyval(v, "size", "size");
  g_autofree char *maxmem = keyval(v, "maxmem", NULL);
  double s = 0, m = 0;
  gboolean ok = size != NULL && parse_size(size, MIB, &s);
  if (maxmem != NULL && parse_size(maxmem, 1.0, &m))
    ok = TRUE;
  *bytes = MAX(s, m);
  return ok;
}

/* -smp [cpus=]N[,maxcpus=N][,sockets=..,cores=..,threads=..]: the most
 * vCPUs it allows. */
static guint
smp_option(const char *v)
{
  static const char *const topology[] = {"drawers", "books",    "sockets",
                                         "dies",    "clusters", "modules",
                                         "cores",   "threads"};
  guint64 most = 0, product = 1;
  gboolean has_topology = FALSE;
  for (guint i = 0; i < G_N_ELEMENTS(topology); i++) {
    g_autofree char *t = keyval(v, topology[i], NULL);
    guint64 n = 0;
    if (t != NULL && g_ascii_string_to_unsigned(t, 10, 1, 65536, &n, NULL)) {
      product *= n;
      has_topology = TRUE;
      if (product > 1u << 20)
        product = 1u << 20;
    }
  }
  if (has_topology)
    most = product;
  const char *counts[] = {"cpus", "maxcpus"};
  for (guint i = 0; i < G_N_ELEMENTS(counts); i++) {
    g_autofree char *c = keyval(v, counts[i], i == 0 ? "cpus" : NULL);
    guint64 n = 0;
    if (c != NULL && g_ascii_string_to_unsigned(c, 10, 0, 1u << 20, &n, NULL))
      most = MAX(most, n);
  }
  return (guint)most;
}

/* A memory backend's size in -object (key=value or JSON) and its id in
 * *ID (a new string); 0 when the object is no memory backend. */
static double
backend_size(const char *v, char **id)
{
  if (*v == '{') {
    g_autoptr(QpJv) o = qp_jv_parse(v, -1, NULL);
    if (!qp_jv_is(o, QP_JV_OBJECT))
      return 0;
    const char *type = qp_jv_get_string_or(o, "qom-type", "");
    const QpJv *size = qp_jv_get(o, "size");
    QpJvType t = qp_jv_type(size);
    if (!g_str_has_prefix(type, "memory-backend-") || size == NULL ||
        t == QP_JV_NULL || t == QP_JV_ARRAY || t == QP_JV_OBJECT)
      return 0;
    *id = g_strdup(qp_jv_get_string_or(o, "id", ""));
    double bytes = 0;
    if (t == QP_JV_STRING)
      return parse_size(qp_jv_get_string(size), 1.0, &bytes) ? bytes : 0;
    if (t == QP_JV_INT)
      return (double)MAX(qp_jv_get_int(size), 0);
    return 0;
  }
  g_autofree char *type = keyval(v, "qom-type", "qom-type");
  g_autofree char *size = keyval(v, "size", NULL);
  double bytes = 0;
  if (type == NULL || !g_str_has_prefix(type, "memory-backend-") ||
      size == NULL || !parse_size(size, 1.0, &bytes))
    return 0;
  *id = keyval(v, "id", NULL);
  return bytes;
}

/* The backend a -machine, -numa or -device option V uses as guest memory
 * (memory-backend=, memdev=), which -m and maxmem already count: added to
 * USED. */
static void
backend_used(const char *v, GHashTable *used)
{
  const char *keys[] = {"memory-backend", "memdev"};
  for (guint i = 0; i < G_N_ELEMENTS(keys); i++) {
    char *id = keyval(v, keys[i], NULL);
    if (id != NULL)
      g_hash_table_add(used, id);
  }
}

void
qp_qemu_cmdline_bounds(const char *args, gsize len, QpQemuBounds *out)
{
  g_autoptr(GPtrArray) argv = g_ptr_array_new();
  for (gsize i = 0; i < len;) {
    const char *a = args + i;
    gsize n = strnlen(a, len - i);
    if (i + n < len) /* a whole argument: the last may be cut */
      g_ptr_array_add(argv, (gpointer)a);
    i += n + 1;
  }
  double ram = 0, backends = 0;
  gboolean has_m = FALSE, has_smp = FALSE;
  guint vcpus = 0;
  g_autofree char *type = NULL, *ram_backend = NULL;
  g_autoptr(GHashTable) used =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr(GHashTable) sizes =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  for (guint i = 0; i + 1 < argv->len; i++) {
    const char *opt = argv->pdata[i], *v = argv->pdata[i + 1];
    if (g_str_has_prefix(opt, "--"))
      opt++; /* QEMU takes --m as -m */
    double bytes = 0;
    if (strcmp(opt, "-m") == 0 && memory_option(v, &bytes)) {
      ram = MAX(ram, bytes);
      has_m = TRUE;
    } else if (strcmp(opt, "-smp") == 0) {
      vcpus = MAX(vcpus, smp_option(v));
      has_smp = TRUE;
    } else if (strcmp(opt, "-object") == 0) {
      char *id = NULL;
      double size = backend_size(v, &id);
      if (id != NULL)
        g_hash_table_replace(sizes, id, g_memdup2(&size, sizeof size));
      else
        backends += size;
    } else if (strcmp(opt, "-machine") == 0 || strcmp(opt, "-M") == 0 ||
               strcmp(opt, "-numa") == 0 || strcmp(opt, "-device") == 0) {
      backend_used(v, used);
      /* The machine type and the backend of its RAM, the last given. */
      if (strcmp(opt, "-M") == 0 || strcmp(opt, "-machine") == 0) {
        char *t = keyval(v, "type", "type");
        char *b = keyval(v, "memory-backend", NULL);
        if (t != NULL) {
          g_free(type);
          type = t;
        }
        if (b != NULL) {
          g_free(ram_backend);
          ram_backend = b;
        }
      }
    }
  }
  /* Backends that are guest RAM or memory devices are within -m/maxmem;
   * the others (shared memory, vhost-user's) take memory of their own. */
  GHashTableIter it;
  gpointer key, value;
  g_hash_table_iter_init(&it, sizes);
  while (g_hash_table_iter_next(&it, &key, &value))
    if (!g_hash_table_contains(used, key))
      backends += *(double *)value;
  /* Without -m the RAM is the machine type's default (1 GiB on sbsa-ref),
   * or the size of the backend -machine memory-backend= names (as qemu-pin
   * gives it). Without -smp the vCPUs are the type's default. */
  guint default_cpus, default_mib;
  qp_board_defaults(type, &default_cpus, &default_mib);
  const double *ram_size =
      ram_backend != NULL ? g_hash_table_lookup(sizes, ram_backend) : NULL;
  guint64 ram_mib = has_m                               ? to_mib(ram)
                    : ram_size != NULL && *ram_size > 0 ? to_mib(*ram_size)
                                                        : default_mib;
  out->memory_mib = ram_mib + to_mib(backends);
  out->vcpus = MAX(has_smp ? vcpus : default_cpus, 1);
}

QpPluggable
qp_qemu_cmdline_memory_pluggable(const char *args, gsize len)
{
  QpPluggable found = QP_PLUGGABLE_NONE;
  const char *prev = NULL;
  for (gsize i = 0; i < len;) {
    const char *a = args + i;
    gsize n = strnlen(a, len - i);
    if (i + n >= len)
      break; /* the last argument may be cut */
    const char *opt =
        prev != NULL && g_str_has_prefix(prev, "--") ? prev + 1 : prev;
    if (g_strcmp0(opt, "-m") == 0) {
      g_autofree char *maxmem = keyval(a, "maxmem", "size");
      if (maxmem != NULL)
        found = QP_PLUGGABLE_MAXMEM;
    } else if (g_strcmp0(opt, "-device") == 0) {
      g_autofree char *driver =
          a[0] == '{' ? NULL : keyval(a, "driver", "driver");
      if (g_str_has_prefix(driver != NULL ? driver : "", "virtio-mem") ||
          (a[0] == '{' && strstr(a, "\"virtio-mem") != NULL))
        return QP_PLUGGABLE_VIRTIO_MEM;
    }
    prev = a;
    i += n + 1;
  }
  return found;
}

gboolean
qp_qemu_is_qemu_name(const char *name)
{
  g_autofree char *base = g_strdup(name);
  if (g_str_has_suffix(base, " (deleted)"))
    base[strlen(base) - strlen(" (deleted)")] = '\0';
  return (g_str_has_prefix(base, "qemu-system-") &&
          base[strlen("qemu-system-")] != '\0') ||
         strcmp(base, "qemu-kvm") == 0 || strcmp(base, "kvm") == 0 ||
         strcmp(base, "qemu-pin") == 0 || strcmp(base, "qemu-pin-full") == 0;
}
