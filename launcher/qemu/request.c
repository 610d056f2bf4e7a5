/* QEMU's command line: parsed for placement, rewritten for launch.
 *
 * The semantics are QEMU 7.2's (qemu-system-x86_64): the option table, the
 * QemuOpts key=value syntax, -smp's machine_parse_smp_config(), -m's
 * parse_memory_options(), -numa's numa.c and the -object rules. A value
 * is refused only where QEMU 7.2 refuses it too (tests/args/test-refusals.c
 * holds QEMU's own message for each); what QEMU accepts with a warning
 * (-smp 0, -m 0) is read as QEMU reads it. */
#include "launcher/qemu/args.h"

#include <errno.h>
#include <json-glib/json-glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/qemu/keyval.h"
#include "launcher/qemu/memory.h"
#include "launcher/qemu/readconfig.h"
#include "topology/cpulist.h"

/* The quark's name is the argument as written. */
/* clang-format off */
G_DEFINE_QUARK(qp-args-error-quark, qp_args_error)
/* clang-format on */

#define MiB (G_GUINT64_CONSTANT(1) << 20)
#define QP_MAX_NODES 128     /* QEMU's MAX_NODES */
#define QP_CPU_HARD_CAP 1024 /* unknown machine types */

/* ---- The option table ---------------------------------------------------
 *
 * Every option of QEMU 7.2's qemu-system-x86_64 that takes an argument
 * (HAS_ARG in qemu-options.hx), in the binary's order. Read from the
 * binary itself (Debian's 7.2.22): its qemu_options[] table of 121 entries,
 * name and flags, found in .data.rel.ro; every entry was then confirmed with
 * `qemu-system-x86_64 -version -NAME` ("requires an argument"). Options of
 * other targets are kept (QEMU consumes their argument before refusing
 * them). An option not listed takes none. "id" is Proxmox's: its kvm takes
 * `-id VMID`. */
static const char *const options_with_arg[] = {
    "machine",    "M",
    "cpu",        "accel",
    "smp",        "numa",
    "add-fd",     "set",
    "global",     "boot",
    "m",          "mem-path",
    "k",          "audio",
    "audiodev",   "device",
    "name",       "uuid",
    "fda",        "fdb",
    "hda",        "hdb",
    "hdc",        "hdd",
    "cdrom",      "blockdev",
    "drive",      "mtdblock",
    "sd",         "fsdev",
    "virtfs",     "iscsi",
    "usbdevice",  "display",
    "spice",      "rotate",
    "vga",        "g",
    "vnc",        "acpitable",
    "smbios",     "netdev",
    "nic",        "net",
    "chardev",    "tpmdev",
    "bios",       "pflash",
    "kernel",     "append",
    "initrd",     "dtb",
    "compat",     "fw_cfg",
    "serial",     "parallel",
    "monitor",    "qmp",
    "qmp-pretty", "mon",
    "debugcon",   "pidfile",
    "overcommit", "gdb",
    "d",          "D",
    "dfilter",    "seed",
    "L",          "xen-domid",
    "action",     "loadvm",
    "option-rom", "rtc",
    "icount",     "watchdog-action",
    "echr",       "incoming",
    "chroot",     "runas",
    "prom-env",   "semihosting-config",
    "sandbox",    "readconfig",
    "trace",      "plugin",
    "qtest",      "qtest-log",
    "msg",        "dump-vmstate",
    "object",     "id",
};

/* Options whose value is free text: a value "help" there is not a request
 * for help. */
static const char *const free_text_options[] = {
    "uuid",       "pidfile",  "incoming",     "id",      "append",
    "kernel",     "initrd",   "bios",         "L",       "dtb",
    "hda",        "hdb",      "hdc",          "hdd",     "fda",
    "fdb",        "cdrom",    "mtdblock",     "sd",      "pflash",
    "loadvm",     "runas",    "chroot",       "D",       "readconfig",
    "option-rom", "mem-path", "dump-vmstate", "add-fd",  "seed",
    "xen-domid",  "qmp",      "qmp-pretty",   "monitor", "serial",
    "parallel",   "debugcon", "gdb",          "echr",    "k",
    "dfilter",
};

/* Options that print something and exit: never a launch. */
static const char *const info_options[] = {
    "h", "help", "version", "audio-help", "dump-vmstate",
};

static gboolean
in_list(const char *const *list, gsize n, const char *name)
{
  for (gsize i = 0; i < n; i++)
    if (strcmp(list[i], name) == 0)
      return TRUE;
  return FALSE;
}

static gboolean
option_has_arg(const char *name)
{
  return in_list(options_with_arg, G_N_ELEMENTS(options_with_arg), name);
}

static gboolean
is_help_word(const char *s)
{
  return s != NULL && (strcmp(s, "help") == 0 || strcmp(s, "?") == 0);
}

static gboolean set_invalid(GError **error, const char *format, ...)
    G_GNUC_PRINTF(2, 3);

static gboolean
set_invalid(GError **error, const char *format, ...)
{
  va_list ap;
  va_start(ap, format);
  g_autofree char *msg = g_strdup_vprintf(format, ap);
  va_end(ap);
  /* One line, whatever the value held. */
  for (char *p = msg; *p; p++)
    if (*p == '\n' || *p == '\r')
      *p = ' ';
  g_set_error_literal(error, QP_ARGS_ERROR, QP_ARGS_ERROR_INVALID, msg);
  return FALSE;
}

/* ---- key=value (QemuOpts) -----------------------------------------------
 *
 * Comma separated; ",," is a literal comma inside a value; the first item
 * may omit its key (the implied key, e.g. cpus for -smp); an item without
 * "=" elsewhere is a flag: "foo" means foo=on, "nofoo" foo=off. Later keys
 * win, except for list keys (cpus of -numa node, host-nodes), which add. */

typedef struct {
  char *key;
  char *value;
  gboolean flag;    /* written without "=" */
  const char *text; /* the whole option value it came from */
} KvPair;

static void
kv_pair_clear(gpointer p)
{
  KvPair *kv = p;
  g_free(kv->key);
  g_free(kv->value);
}

static GArray *
kv_new(void)
{
  GArray *a = g_array_new(FALSE, TRUE, sizeof(KvPair));
  g_array_set_clear_func(a, kv_pair_clear);
  return a;
}

/* Appends the items of TEXT to KV. */
static void
kv_parse_into(GArray *kv, const char *text, const char *implied)
{
  const char *p = text;
  gboolean first = TRUE;

  while (*p) {
    KvPair pair = {0};
    gsize len = strcspn(p, "=,");
    pair.text = text;
    if (p[len] != '=') {
      if (first && implied != NULL) {
        pair.key = g_strdup(implied);
      } else {
        g_autofree char *name = g_strndup(p, len);
        pair.flag = TRUE;
        if (!is_help_word(name) && g_str_has_prefix(name, "no")) {
          pair.key = g_strdup(name + 2);
          pair.value = g_strdup("off");
        } else {
          pair.key = g_strdup(name);
          pair.value = g_strdup("on");
        }
        p += len;
        goto next;
      }
    } else {
      pair.key = g_strndup(p, len);
      p += len + 1;
    }
    {
      GString *v = g_string_new(NULL);
      for (;;) {
        if (*p == '\0')
          break;
        if (*p == ',') {
          if (p[1] == ',') {
            g_string_append_c(v, ',');
            p += 2;
            continue;
          }
          break;
        }
        g_string_append_c(v, *p++);
      }
      pair.value = g_string_free(v, FALSE);
    }
  next:
    g_array_append_val(kv, pair);
    first = FALSE;
    if (*p == ',')
      p++;
  }
}

static GArray *
kv_parse(const char *text, const char *implied)
{
  GArray *kv = kv_new();
  kv_parse_into(kv, text, implied);
  return kv;
}

static KvPair *
kv_last(GArray *kv, const char *key)
{
  for (guint i = kv->len; i > 0; i--) {
    KvPair *p = &g_array_index(kv, KvPair, i - 1);
    if (strcmp(p->key, key) == 0)
      return p;
  }
  return NULL;
}

static const char *
kv_get(GArray *kv, const char *key)
{
  KvPair *p = kv_last(kv, key);
  return p ? p->value : NULL;
}

GArray *
qp_kv_parse(const char *text, const char *implied)
{
  return kv_parse(text, implied);
}

const char *
qp_kv_get(GArray *kv, const char *key)
{
  return kv_get(kv, key);
}

static gboolean
kv_wants_help(GArray *kv)
{
  for (guint i = 0; i < kv->len; i++) {
    KvPair *p = &g_array_index(kv, KvPair, i);
    if (p->flag && is_help_word(p->key))
      return TRUE;
  }
  return FALSE;
}

/* First key of KV not in KNOWN (NULL-terminated), or NULL. */
static const char *
kv_unknown_key(GArray *kv, const char *const *known)
{
  for (guint i = 0; i < kv->len; i++) {
    KvPair *p = &g_array_index(kv, KvPair, i);
    if (!g_strv_contains(known, p->key))
      return p->key;
  }
  return NULL;
}

/* Appends ",KEY=VALUE" to the key=value text in S, escaping commas. */
static void
kv_append(GString *s, const char *key, const char *value)
{
  /* A trailing run of an odd number of commas ends with a separator. */
  gsize run = 0;
  while (run < s->len && s->str[s->len - 1 - run] == ',')
    run++;
  if (s->len > 0 && run % 2 == 0)
    g_string_append_c(s, ',');
  g_string_append_printf(s, "%s=", key);
  for (const char *p = value; *p; p++) {
    if (*p == ',')
      g_string_append_c(s, ',');
    g_string_append_c(s, *p);
  }
}

/* TEXT (key=value syntax) without its KEY=... items; the others stay as
 * they were written, ",," escapes included. */
static char *
kv_without(const char *text, const char *key)
{
  GString *out = g_string_new(NULL);
  const char *p = text;
  while (*p) {
    const char *start = p;
    while (*p && !(*p == ',' && p[1] != ','))
      p += *p == ',' ? 2 : 1;
    gsize len = (gsize)(p - start);
    gsize klen = strcspn(start, "=,");
    if (!(klen < len && start[klen] == '=' && klen == strlen(key) &&
          strncmp(start, key, klen) == 0)) {
      if (out->len > 0)
        g_string_append_c(out, ',');
      g_string_append_len(out, start, (gssize)len);
    }
    if (*p == ',')
      p++;
  }
  return g_string_free(out, FALSE);
}

/* ---- numbers and sizes --------------------------------------------------- */

/* An unsigned integer as QEMU's qemu_strtou64(.., base 0) reads it: decimal,
 * 0x hex, or 0-prefixed octal; no sign, no blanks, nothing after. */
static gboolean
parse_uint(const char *text, guint64 max, guint64 *out)
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
    return set_invalid(error, "%s is empty: expected a size such as 512M or 4G",
                       what);
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
    mul = default_mib ? MiB : 1;
    break;
  case 'B':
    mul = 1;
    break;
  case 'K':
    mul = G_GUINT64_CONSTANT(1) << 10;
    break;
  case 'M':
    mul = MiB;
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
  return set_invalid(
      error,
      "%s '%s' is not a size: expected a number with an optional "
      "suffix B, K, M, G, T, P or E (such as 512M or 4G)",
      what, text);
too_large:
  return set_invalid(error, "%s '%s' is too large: a size must fit in 64 bits",
                     what, text);
}

gboolean
qp_parse_size_mib(const char *text, const char *what, gboolean default_mib,
                  guint64 *out, GError **error)
{
  guint64 bytes;
  if (!qp_parse_size(text, what, default_mib, &bytes, error))
    return FALSE;
  *out = bytes / MiB + (bytes % MiB != 0);
  return TRUE;
}

static guint64
bytes_to_mib(guint64 bytes)
{
  return bytes / MiB + (bytes % MiB != 0);
}

static gboolean
parse_bool(const char *text, gboolean *out)
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

/* ---- machines --------------------------------------------------------------
 *
 * What -smp and -numa depend on, per machine type, as QEMU 7.2 has it:
 * pc-*-6.1 and older prefer sockets over cores when filling in -smp;
 * q35 takes up to 288 vCPUs (1024 from pc-q35-8.0 in later QEMUs), i440fx
 * 255, isapc 1; x86 has dies but no clusters; -numa node,mem= exists only up
 * to the 5.0 machine types; the RAM of pc and q35 is called "pc.ram". */

typedef struct {
  gboolean known;
  gboolean prefer_sockets;
  gboolean clusters_supported;
  gboolean dies_supported;
  gboolean numa_mem_supported;
  guint max_cpus;
  const char *ram_id;
} MachineInfo;

/* "7.2" -> 702; -1 if TEXT is not MAJOR.MINOR. */
static int
machine_version(const char *text)
{
  guint64 major, minor;
  g_auto(GStrv) parts = g_strsplit(text, ".", -1);
  if (g_strv_length(parts) != 2 || !parse_uint(parts[0], 99, &major) ||
      !parse_uint(parts[1], 99, &minor))
    return -1;
  return (int)(major * 100 + minor);
}

static MachineInfo
machine_info(const char *type)
{
  MachineInfo m = {.known = FALSE,
                   .prefer_sockets = FALSE,
                   .clusters_supported = TRUE,
                   .dies_supported = TRUE,
                   .numa_mem_supported = TRUE,
                   .max_cpus = QP_CPU_HARD_CAP,
                   .ram_id = NULL};
  int version = 702; /* the aliases pc and q35 are 7.2's */
  gboolean q35 = FALSE, i440fx = FALSE;

  if (strcmp(type, "q35") == 0) {
    q35 = TRUE;
  } else if (strcmp(type, "pc") == 0) {
    i440fx = TRUE;
  } else if (g_str_has_prefix(type, "pc-q35-")) {
    q35 = TRUE;
    version = machine_version(type + strlen("pc-q35-"));
  } else if (g_str_has_prefix(type, "pc-i440fx-")) {
    i440fx = TRUE;
    version = machine_version(type + strlen("pc-i440fx-"));
  } else if (g_str_has_prefix(type, "pc-")) {
    i440fx = TRUE;
    version = machine_version(type + strlen("pc-"));
  } else if (strcmp(type, "isapc") == 0) {
    m.known = TRUE;
    m.clusters_supported = FALSE;
    m.max_cpus = 1;
    m.ram_id = "pc.ram";
    return m;
  } else if (strcmp(type, "microvm") == 0) {
    m.known = TRUE;
    m.clusters_supported = FALSE;
    m.numa_mem_supported = FALSE;
    m.max_cpus = 288;
    m.ram_id = "microvm.ram";
    return m;
  }
  if (!q35 && !i440fx)
    return m;
  if (version < 0)
    version = 702;
  m.known = TRUE;
  m.clusters_supported = FALSE;
  m.prefer_sockets = version < 602;
  m.numa_mem_supported = version < 501;
  m.max_cpus = q35 ? (version >= 800 ? 1024 : 288) : 255;
  m.ram_id = "pc.ram";
  return m;
}

/* ---- parser state ----------------------------------------------------------
 */

/* argv index of an option read from a -readconfig file. */
#define IN_FILE G_MAXUINT

typedef struct {
  const char *name;  /* without its dashes */
  guint i;           /* argv index of the option, or IN_FILE */
  const char *value; /* NULL if it takes none */
  guint vi;          /* argv index of the value, or IN_FILE */
} Opt;

typedef struct {
  guint argi;          /* argv index of the -numa node value */
  guint64 mem_bytes;   /* memory of the node */
  gboolean legacy_mem; /* mem= */
} NodeExtra;

struct _QpQemuArgsPriv {
  NodeExtra *nodes;   /* parallel to req->gnodes */
  gboolean split_mem; /* no node had memory: qemu-pin splits the RAM */
  char *mem_path;     /* -mem-path */
  GArray *mem_path_i; /* argv indexes of the -mem-path options */
  gboolean mem_prealloc;
  MachineInfo machine;
  GPtrArray *file_values; /* of char*: option values read from files, each
                             followed by "FILE:LINE [group]" */
};

static void
backend_free(gpointer p)
{
  QpBackend *b = p;
  g_free(b->id);
  g_free(b->qom_type);
  g_free(b->mem_path);
  hwloc_bitmap_free(b->host_nodes);
  g_free(b);
}

void
qp_qemu_args_free(QpQemuArgs *args)
{
  if (args == NULL)
    return;
  g_strfreev(args->argv);
  qp_request_free(args->req);
  if (args->backends)
    g_ptr_array_unref(args->backends);
  g_free(args->machine_memdev);
  g_free(args->incoming);
  g_free(args->pidfile);
  g_free(args->name);
  g_free(args->uuid);
  g_free(args->id);
  g_free(args->machine);
  if (args->warnings)
    g_ptr_array_unref(args->warnings);
  if (args->notes)
    g_ptr_array_unref(args->notes);
  if (args->priv) {
    g_free(args->priv->nodes);
    g_free(args->priv->mem_path);
    if (args->priv->mem_path_i)
      g_array_unref(args->priv->mem_path_i);
    if (args->priv->file_values)
      g_ptr_array_unref(args->priv->file_values);
    g_free(args->priv);
  }
  g_free(args);
}

const char *
qp_qemu_args_ram_id(const QpQemuArgs *args)
{
  return args->priv->machine.ram_id ? args->priv->machine.ram_id
                                    : "qemu-pin-ram";
}

static QpBackend *
find_backend(const QpQemuArgs *a, const char *id)
{
  for (guint i = 0; i < a->backends->len; i++) {
    QpBackend *b = g_ptr_array_index(a->backends, i);
    if (strcmp(b->id, id) == 0)
      return b;
  }
  return NULL;
}

/* ---- lists ------------------------------------------------------------------
 */

/* A list value of the options visitor: "3" or "0-3" (base 0 numbers). */
static gboolean
parse_range(const char *text, guint64 max, guint64 *lo, guint64 *hi)
{
  const char *dash = strchr(text, '-');
  if (dash == NULL) {
    if (!parse_uint(text, max, lo))
      return FALSE;
    *hi = *lo;
    return TRUE;
  }
  g_autofree char *a = g_strndup(text, (gsize)(dash - text));
  return parse_uint(a, max, lo) && parse_uint(dash + 1, max, hi) && *lo <= *hi;
}

/* Every KEY of KV as one set ("host-nodes=0-1,host-nodes=3"). */
static gboolean
kv_list(GArray *kv, const char *key, guint64 max, const char *what,
        const char *text, hwloc_bitmap_t *out, GError **error)
{
  g_auto(hwloc_bitmap_t) set = NULL;
  for (guint i = 0; i < kv->len; i++) {
    KvPair *p = &g_array_index(kv, KvPair, i);
    guint64 lo, hi;
    if (strcmp(p->key, key) != 0)
      continue;
    if (!parse_range(p->value, max, &lo, &hi))
      return set_invalid(
          error,
          "%s '%s': %s '%s' is not an index or range: expected "
          "a number or a range such as 0-3, at most %" G_GUINT64_FORMAT,
          what, text, key, p->value, max);
    if (set == NULL)
      set = hwloc_bitmap_alloc();
    hwloc_bitmap_set_range(set, (unsigned)lo, (int)hi);
  }
  *out = g_steal_pointer(&set);
  return TRUE;
}

static gboolean
json_list(JsonNode *node, const char *key, guint64 max, const char *text,
          hwloc_bitmap_t *out, GError **error)
{
  if (!JSON_NODE_HOLDS_ARRAY(node))
    return set_invalid(error,
                       "-object '%s': '%s' must be an array of node numbers",
                       text, key);
  JsonArray *arr = json_node_get_array(node);
  g_auto(hwloc_bitmap_t) set = hwloc_bitmap_alloc();
  for (guint i = 0; i < json_array_get_length(arr); i++) {
    JsonNode *e = json_array_get_element(arr, i);
    if (!JSON_NODE_HOLDS_VALUE(e) ||
        json_node_get_value_type(e) != G_TYPE_INT64 ||
        json_node_get_int(e) < 0 || (guint64)json_node_get_int(e) > max)
      return set_invalid(
          error,
          "-object '%s': '%s' must hold integers from 0 to %" G_GUINT64_FORMAT,
          text, key, max);
    hwloc_bitmap_set(set, (unsigned)json_node_get_int(e));
  }
  *out = g_steal_pointer(&set);
  return TRUE;
}

/* ---- -object
 * ------------------------------------------------------------------ */

static const char *const json_bool_keys[] = {
    "prealloc", "hugetlb", "share", "merge", "dump", "reserve", NULL};
static const char *const json_size_keys[] = {"size", "hugetlbsize", "align",
                                             NULL};
static const char *const json_string_keys[] = {"mem-path", "policy",
                                               "prealloc-context", NULL};

/* The memory backend of a JSON -object. */
static gboolean
backend_from_json(JsonObject *obj, const char *text, QpBackend *b,
                  gboolean *has_size, GError **error)
{
  GList *members = json_object_get_members(obj);
  for (GList *l = members; l; l = l->next) {
    const char *key = l->data;
    JsonNode *n = json_object_get_member(obj, key);
    gboolean ok = TRUE;
    if (g_strv_contains(json_bool_keys, key))
      ok = JSON_NODE_HOLDS_VALUE(n) &&
           json_node_get_value_type(n) == G_TYPE_BOOLEAN;
    else if (g_strv_contains(json_size_keys, key))
      ok = JSON_NODE_HOLDS_VALUE(n) &&
           json_node_get_value_type(n) == G_TYPE_INT64 &&
           json_node_get_int(n) >= 0;
    else if (g_strv_contains(json_string_keys, key))
      ok = JSON_NODE_HOLDS_VALUE(n) &&
           json_node_get_value_type(n) == G_TYPE_STRING;
    if (!ok) {
      g_list_free(members);
      const char *expected = g_strv_contains(json_bool_keys, key)
                                 ? "true or false"
                             : g_strv_contains(json_size_keys, key)
                                 ? "a non-negative integer (bytes)"
                                 : "a string";
      return set_invalid(error, "-object '%s': '%s' must be %s", text, key,
                         expected);
    }
  }
  g_list_free(members);

  if (json_object_has_member(obj, "size")) {
    *has_size = TRUE;
    b->size_mib = (guint64)json_object_get_int_member(obj, "size");
  }
  if (json_object_has_member(obj, "prealloc"))
    b->prealloc = json_object_get_boolean_member(obj, "prealloc");
  if (json_object_has_member(obj, "hugetlb"))
    b->hugetlb = json_object_get_boolean_member(obj, "hugetlb");
  if (json_object_has_member(obj, "hugetlbsize"))
    b->hugetlbsize_kib =
        (guint64)json_object_get_int_member(obj, "hugetlbsize") / 1024;
  if (json_object_has_member(obj, "mem-path"))
    b->mem_path = g_strdup(json_object_get_string_member(obj, "mem-path"));
  if (json_object_has_member(obj, "policy")) {
    const char *p = json_object_get_string_member(obj, "policy");
    if (!qp_policy_parse(p, &b->policy))
      return set_invalid(error,
                         "-object '%s': policy '%s' is not one of default, "
                         "preferred, bind, interleave",
                         text, p);
  }
  if (json_object_has_member(obj, "host-nodes") &&
      !json_list(json_object_get_member(obj, "host-nodes"), "host-nodes",
                 QP_MAX_NODES - 1, text, &b->host_nodes, error))
    return FALSE;
  return TRUE;
}

/* The memory backend of a key=value -object. */
static gboolean
backend_from_kv(GArray *kv, const char *text, QpBackend *b, gboolean *has_size,
                GError **error)
{
  const char *v;
  g_autofree char *what = g_strdup_printf("-object '%s': size", text);

  if ((v = kv_get(kv, "size")) != NULL) {
    if (!qp_parse_size(v, what, FALSE, &b->size_mib, error))
      return FALSE;
    *has_size = TRUE;
  }
  static const char *const bools[] = {"prealloc", "hugetlb", NULL};
  for (guint i = 0; bools[i]; i++) {
    gboolean flag;
    if ((v = kv_get(kv, bools[i])) == NULL)
      continue;
    if (!parse_bool(v, &flag))
      return set_invalid(error, "-object '%s': %s '%s' is not on or off", text,
                         bools[i], v);
    if (i == 0)
      b->prealloc = flag;
    else
      b->hugetlb = flag;
  }
  if ((v = kv_get(kv, "hugetlbsize")) != NULL) {
    guint64 bytes;
    g_free(what);
    what = g_strdup_printf("-object '%s': hugetlbsize", text);
    if (!qp_parse_size(v, what, FALSE, &bytes, error))
      return FALSE;
    b->hugetlbsize_kib = bytes / 1024;
  }
  if ((v = kv_get(kv, "mem-path")) != NULL)
    b->mem_path = g_strdup(v);
  if ((v = kv_get(kv, "policy")) != NULL && !qp_policy_parse(v, &b->policy))
    return set_invalid(error,
                       "-object '%s': policy '%s' is not one of default, "
                       "preferred, bind, interleave",
                       text, v);
  return kv_list(kv, "host-nodes", QP_MAX_NODES - 1, "-object", text,
                 &b->host_nodes, error);
}

static gboolean
parse_object(QpQemuArgs *a, const Opt *o, GError **error)
{
  const char *text = o->value;
  g_autofree char *qom_type = NULL, *id = NULL;
  g_autoptr(JsonParser) parser = NULL;
  g_autoptr(GArray) kv = NULL;
  JsonObject *obj = NULL;

  if (text[0] == '{') {
    g_autoptr(GError) local = NULL;
    parser = json_parser_new();
    if (!json_parser_load_from_data(parser, text, -1, &local))
      return set_invalid(error, "-object '%s' is not valid JSON: %s", text,
                         local->message);
    JsonNode *root = json_parser_get_root(parser);
    if (root == NULL || !JSON_NODE_HOLDS_OBJECT(root))
      return set_invalid(error, "-object '%s': expected a JSON object", text);
    obj = json_node_get_object(root);
    JsonNode *t = json_object_get_member(obj, "qom-type");
    JsonNode *i = json_object_get_member(obj, "id");
    if (t == NULL || !JSON_NODE_HOLDS_VALUE(t) ||
        json_node_get_value_type(t) != G_TYPE_STRING)
      return set_invalid(error, "-object '%s': 'qom-type' must be a string",
                         text);
    if (i != NULL && (!JSON_NODE_HOLDS_VALUE(i) ||
                      json_node_get_value_type(i) != G_TYPE_STRING))
      return set_invalid(error, "-object '%s': 'id' must be a string", text);
    qom_type = g_strdup(json_node_get_string(t));
    id = i ? g_strdup(json_node_get_string(i)) : NULL;
  } else {
    kv = kv_parse(text, "qom-type");
    qom_type = g_strdup(kv_get(kv, "qom-type"));
    id = g_strdup(kv_get(kv, "id"));
  }

  if (qom_type == NULL)
    return TRUE; /* QEMU says what is wrong */
  if (strcmp(qom_type, "iothread") == 0) {
    a->req->n_iothreads++;
    return TRUE;
  }
  if (!g_str_has_prefix(qom_type, "memory-backend-"))
    return TRUE;

  if (id == NULL || *id == '\0')
    return set_invalid(error, "-object '%s': a memory backend needs an id",
                       text);
  if (find_backend(a, id) != NULL)
    return set_invalid(error,
                       "-object '%s': id '%s' is already used by another "
                       "memory backend",
                       text, id);

  g_autoptr(GPtrArray) holder = g_ptr_array_new_with_free_func(backend_free);
  QpBackend *b = g_new0(QpBackend, 1);
  g_ptr_array_add(holder, b);
  b->id = g_steal_pointer(&id);
  b->qom_type = g_steal_pointer(&qom_type);
  b->argi = o->vi;
  b->json = obj != NULL;
  gboolean has_size = FALSE;
  if (obj ? !backend_from_json(obj, text, b, &has_size, error)
          : !backend_from_kv(kv, text, b, &has_size, error))
    return FALSE;

  /* size_mib holds bytes until here. */
  guint64 bytes = b->size_mib;
  if (has_size && bytes == 0)
    return set_invalid(error,
                       "-object '%s': size 0 is not a memory size: "
                       "expected more than 0 bytes",
                       text);
  if (!has_size && strcmp(b->qom_type, "memory-backend-file") != 0)
    return set_invalid(error, "-object '%s': memory backend '%s' needs a size",
                       text, b->id);
  b->size_bytes = bytes;
  b->size_mib = bytes_to_mib(bytes);
  b->prealloc_context = obj ? json_object_has_member(obj, "prealloc-context")
                            : kv_get(kv, "prealloc-context") != NULL;
  if (b->policy == QP_POLICY_BIND && b->host_nodes == NULL)
    return set_invalid(error, "-object '%s': policy bind needs host-nodes",
                       text);
  if (b->host_nodes != NULL && b->policy == QP_POLICY_DEFAULT)
    return set_invalid(error,
                       "-object '%s': host-nodes needs a policy other "
                       "than default (bind, preferred or interleave)",
                       text);
  qp_backend_classify(b, text);
  g_ptr_array_add(a->backends, g_ptr_array_steal_index(holder, 0));
  return TRUE;
}

/* ---- -smp
 * ---------------------------------------------------------------------
 *
 * machine_parse_smp_config() of QEMU 7.2: omitted values are computed from
 * the given ones; before the 6.2 machine types sockets are preferred over
 * cores, since then cores over sockets; threads last. */

static gboolean
parse_smp(QpQemuArgs *a, GArray *kv, const char *last_text, GError **error)
{
  static const char *const keys[] = {"cpus",     "maxcpus", "sockets", "dies",
                                     "clusters", "cores",   "threads", NULL};
  const MachineInfo *m = &a->priv->machine;
  guint64 val[7] = {0};
  const char *unknown = kv_unknown_key(kv, keys);

  if (unknown != NULL) {
    KvPair *p = kv_last(kv, unknown);
    return set_invalid(
        error,
        "-smp '%s': unknown parameter '%s': expected cpus, maxcpus, "
        "sockets, dies, clusters, cores or threads",
        p->text, unknown);
  }
  for (guint k = 0; keys[k]; k++) {
    KvPair *p = kv_last(kv, keys[k]);
    if (p == NULL)
      continue;
    if (!parse_uint(p->value, G_MAXUINT32, &val[k]))
      return set_invalid(
          error,
          "-smp '%s': %s '%s' is not a number: expected a positive "
          "integer",
          p->text, keys[k], p->value);
    /* QEMU 7.2 warns that 0 is deprecated and reads it as omitted. */
  }
  guint64 cpus = val[0], maxcpus = val[1], sockets = val[2], dies = val[3],
          clusters = val[4], cores = val[5], threads = val[6];
  const char *text =
      kv->len ? g_array_index(kv, KvPair, kv->len - 1).text : last_text;

  if (!m->dies_supported && dies > 1)
    return set_invalid(error,
                       "-smp '%s': dies=%" G_GUINT64_FORMAT " is not "
                       "supported by machine '%s'",
                       text, dies, a->machine);
  if (!m->clusters_supported && clusters > 1)
    return set_invalid(error,
                       "-smp '%s': clusters=%" G_GUINT64_FORMAT
                       " is not supported "
                       "by machine '%s' (x86 has no clusters in QEMU 7.2)",
                       text, clusters, a->machine);
  dies = dies ? dies : 1;
  clusters = clusters ? clusters : 1;

  if (cpus == 0 && maxcpus == 0) {
    sockets = sockets ? sockets : 1;
    cores = cores ? cores : 1;
    threads = threads ? threads : 1;
  } else {
    maxcpus = maxcpus ? maxcpus : cpus;
    if (m->prefer_sockets) {
      if (sockets == 0) {
        cores = cores ? cores : 1;
        threads = threads ? threads : 1;
        sockets = maxcpus / (dies * clusters * cores * threads);
      } else if (cores == 0) {
        threads = threads ? threads : 1;
        cores = maxcpus / (sockets * dies * clusters * threads);
      }
    } else {
      if (cores == 0) {
        sockets = sockets ? sockets : 1;
        threads = threads ? threads : 1;
        cores = maxcpus / (sockets * dies * clusters * threads);
      } else if (sockets == 0) {
        threads = threads ? threads : 1;
        sockets = maxcpus / (dies * clusters * cores * threads);
      }
    }
    if (threads == 0)
      threads = maxcpus / (sockets * dies * clusters * cores);
  }
  guint64 product = sockets * dies * clusters * cores * threads;
  maxcpus = maxcpus ? maxcpus : product;
  cpus = cpus ? cpus : maxcpus;

  if (product != maxcpus)
    return set_invalid(
        error,
        "-smp '%s': sockets (%" G_GUINT64_FORMAT ") * dies (%" G_GUINT64_FORMAT
        ") * clusters (%" G_GUINT64_FORMAT ") * cores (%" G_GUINT64_FORMAT
        ") * threads (%" G_GUINT64_FORMAT ") = %" G_GUINT64_FORMAT
        " does not equal maxcpus (%" G_GUINT64_FORMAT ")",
        text, sockets, dies, clusters, cores, threads, product, maxcpus);
  if (maxcpus < cpus)
    return set_invalid(error,
                       "-smp '%s': maxcpus (%" G_GUINT64_FORMAT
                       ") must be at least "
                       "cpus (%" G_GUINT64_FORMAT ")",
                       text, maxcpus, cpus);
  if (maxcpus > m->max_cpus)
    return set_invalid(error,
                       "-smp '%s': %" G_GUINT64_FORMAT
                       " vCPUs exceed the maximum "
                       "of %u of machine '%s'%s",
                       text, maxcpus, m->max_cpus, a->machine,
                       m->known ? ""
                                : " (qemu-pin's cap for machine types it "
                                  "does not know)");

  QpRequest *r = a->req;
  r->vcpus = (guint)cpus;
  r->maxcpus = (guint)maxcpus;
  r->sockets = (guint)sockets;
  r->dies = (guint)dies;
  r->clusters = (guint)clusters;
  r->cores = (guint)cores;
  r->threads = (guint)threads;
  return TRUE;
}

/* Topology ids of vCPU INDEX: socket-major, then die, cluster, core, thread
 * (x86_topo_ids_from_idx). */
typedef struct {
  guint64 socket, die, cluster, core, thread;
} TopoIds;

static TopoIds
topo_ids(const QpRequest *r, guint index)
{
  TopoIds t;
  guint64 i = index;
  t.thread = i % r->threads;
  i /= r->threads;
  t.core = i % r->cores;
  i /= r->cores;
  t.cluster = i % r->clusters;
  i /= r->clusters;
  t.die = i % r->dies;
  t.socket = i / r->dies;
  return t;
}

/* ---- -m
 * ------------------------------------------------------------------------ */

/* KV holds -m's keys; from -machine memory.size= (BYTES) a size without a
 * suffix is in bytes, from -m in MiB. */
static gboolean
parse_memory(QpQemuArgs *a, GArray *kv, gboolean bytes, gboolean *custom,
             GError **error)
{
  static const char *const keys[] = {"size", "slots", "maxmem", NULL};
  const char *unknown = kv_unknown_key(kv, keys);
  guint64 size = 128 * MiB;
  KvPair *p;

  *custom = FALSE;
  if (unknown != NULL)
    return set_invalid(
        error,
        "-m '%s': unknown parameter '%s': expected size, slots or "
        "maxmem",
        kv_last(kv, unknown)->text, unknown);
  if ((p = kv_last(kv, "size")) != NULL) {
    g_autofree char *what = g_strdup_printf("-m '%s': size", p->text);
    if (!qp_parse_size(p->value, what, !bytes, &size, error))
      return FALSE;
    /* QEMU 7.2 reads a size of 0 as not given: the default 128 MiB. */
    if (size == 0) {
      size = 128 * MiB;
    } else {
      /* QEMU rounds up to 8 KiB. */
      if (size > G_MAXUINT64 - 8191)
        return set_invalid(error, "-m '%s': size '%s' is too large", p->text,
                           p->value);
      size = (size + 8191) & ~(guint64)8191;
      *custom = TRUE;
    }
  }
  KvPair *slots = kv_last(kv, "slots"), *maxmem = kv_last(kv, "maxmem");
  guint64 nslots = 0, max = 0;
  if (slots != NULL && !parse_uint(slots->value, G_MAXUINT64, &nslots))
    return set_invalid(error, "-m '%s': slots '%s' is not a number",
                       slots->text, slots->value);
  if (maxmem != NULL) {
    g_autofree char *what = g_strdup_printf("-m '%s': maxmem", maxmem->text);
    if (!qp_parse_size(maxmem->value, what, FALSE, &max, error))
      return FALSE;
    if (max < size)
      return set_invalid(error,
                         "-m '%s': maxmem (%" G_GUINT64_FORMAT
                         " bytes) must be at "
                         "least the RAM size (%" G_GUINT64_FORMAT " bytes)",
                         maxmem->text, max, size);
    if (nslots > 0 && max == size)
      return set_invalid(
          error,
          "-m '%s': memory slots were given but maxmem equals the "
          "RAM size: expected maxmem above %" G_GUINT64_FORMAT " bytes",
          maxmem->text, size);
  } else if (slots != NULL) {
    return set_invalid(error, "-m '%s': slots needs maxmem", slots->text);
  }
  a->ram_bytes = size;
  a->req->mem_mib = bytes_to_mib(size);
  a->req->maxmem_mib = bytes_to_mib(max);
  return TRUE;
}

/* ---- -numa
 * ---------------------------------------------------------------------- */

typedef struct {
  gboolean present;
  guint argi;
  const char *text;
  gboolean legacy_mem;
  guint64 mem_bytes;
  char *memdev;
} NumaNode;

typedef struct {
  NumaNode nodes[QP_MAX_NODES];
  guint n;       /* nodes declared so far */
  int *cpu_node; /* per vCPU index, -1 if none */
  guint dist[QP_MAX_NODES][QP_MAX_NODES];
  gboolean has_dist;
} Numa;

static void
numa_clear(Numa *numa)
{
  for (guint i = 0; i < QP_MAX_NODES; i++)
    g_free(numa->nodes[i].memdev);
  g_free(numa->cpu_node);
}

static gboolean
numa_get_uint(GArray *kv, const char *key, guint64 max, const char *text,
              gboolean required, guint64 *out, gboolean *has, GError **error)
{
  const char *v = kv_get(kv, key);
  *has = v != NULL;
  if (v == NULL) {
    if (required)
      return set_invalid(error, "-numa '%s': %s is missing", text, key);
    return TRUE;
  }
  if (!parse_uint(v, max, out))
    return set_invalid(
        error,
        "-numa '%s': %s '%s' is not a number from 0 to %" G_GUINT64_FORMAT,
        text, key, v, max);
  return TRUE;
}

static gboolean
numa_assign(QpQemuArgs *a, Numa *numa, guint cpu, guint node, const char *text,
            GError **error)
{
  if (numa->cpu_node[cpu] >= 0 && (guint)numa->cpu_node[cpu] != node)
    return set_invalid(
        error,
        "-numa '%s': vCPU %u is already assigned to node %d: the "
        "CPUs of two nodes must not overlap",
        text, cpu, numa->cpu_node[cpu]);
  numa->cpu_node[cpu] = (int)node;
  return TRUE;
}

static gboolean
numa_node(QpQemuArgs *a, Numa *numa, const Opt *o, GArray *kv, GError **error)
{
  static const char *const keys[] = {"type",   "nodeid",    "cpus", "mem",
                                     "memdev", "initiator", NULL};
  const char *text = o->value, *unknown = kv_unknown_key(kv, keys);
  guint64 id = numa->n;
  gboolean has;

  if (unknown != NULL)
    return set_invalid(
        error,
        "-numa '%s': unknown parameter '%s': expected nodeid, cpus, "
        "mem, memdev or initiator",
        text, unknown);
  if (!numa_get_uint(kv, "nodeid", G_MAXUINT16, text, FALSE, &id, &has, error))
    return FALSE;
  if (id >= QP_MAX_NODES)
    return set_invalid(error,
                       "-numa '%s': node %" G_GUINT64_FORMAT " is too high: "
                       "QEMU has at most %d NUMA nodes",
                       text, id, QP_MAX_NODES);
  NumaNode *n = &numa->nodes[id];
  if (n->present)
    return set_invalid(error,
                       "-numa '%s': node %" G_GUINT64_FORMAT " is declared "
                       "twice",
                       text, id);
  n->present = TRUE;
  n->argi = o->vi;
  n->text = text;
  numa->n++;

  const char *mem = kv_get(kv, "mem"), *memdev = kv_get(kv, "memdev");
  if (mem != NULL && memdev != NULL)
    return set_invalid(error,
                       "-numa '%s': mem and memdev exclude each other: "
                       "give one",
                       text);
  if (mem != NULL) {
    if (!a->priv->machine.numa_mem_supported)
      return set_invalid(
          error,
          "-numa '%s': mem= is not supported by machine '%s': use "
          "memdev= with an -object memory-backend-*",
          text, a->machine);
    g_autofree char *what = g_strdup_printf("-numa '%s': mem", text);
    if (!qp_parse_size(mem, what, TRUE, &n->mem_bytes, error))
      return FALSE;
    n->legacy_mem = TRUE;
  }
  if (memdev != NULL) {
    QpBackend *b = find_backend(a, memdev);
    if (b == NULL)
      return set_invalid(
          error, "-numa '%s': memdev '%s' names no -object memory-backend-*",
          text, memdev);
    for (guint i = 0; i < QP_MAX_NODES; i++)
      if (numa->nodes[i].memdev && strcmp(numa->nodes[i].memdev, memdev) == 0)
        return set_invalid(error,
                           "-numa '%s': memdev '%s' is already the memory "
                           "of node %u",
                           text, memdev, i);
    n->memdev = g_strdup(memdev);
    n->mem_bytes = b->size_bytes;
  }

  for (guint i = 0; i < kv->len; i++) {
    KvPair *p = &g_array_index(kv, KvPair, i);
    guint64 lo, hi;
    if (strcmp(p->key, "cpus") != 0)
      continue;
    if (!parse_range(p->value, G_MAXUINT16, &lo, &hi))
      return set_invalid(
          error,
          "-numa '%s': cpus '%s' is not a vCPU index or range such "
          "as 0-3",
          text, p->value);
    if (hi >= a->req->maxcpus)
      return set_invalid(error,
                         "-numa '%s': vCPU %" G_GUINT64_FORMAT
                         " does not exist: "
                         "indexes go up to maxcpus - 1 (%u)",
                         text, hi, a->req->maxcpus - 1);
    for (guint64 c = lo; c <= hi; c++)
      if (!numa_assign(a, numa, (guint)c, (guint)id, text, error))
        return FALSE;
  }
  return TRUE;
}

static gboolean
numa_cpu(QpQemuArgs *a, Numa *numa, const Opt *o, GArray *kv, GError **error)
{
  static const char *const keys[] = {"type",      "node-id",    "socket-id",
                                     "die-id",    "cluster-id", "core-id",
                                     "thread-id", NULL};
  const char *text = o->value, *unknown = kv_unknown_key(kv, keys);
  guint64 node = 0, ids[5] = {0};
  gboolean has, has_id[5];
  const QpRequest *r = a->req;

  if (unknown != NULL)
    return set_invalid(error,
                       "-numa '%s': unknown parameter '%s': expected node-id, "
                       "socket-id, die-id, cluster-id, core-id or thread-id",
                       text, unknown);
  if (!numa_get_uint(kv, "node-id", G_MAXUINT16, text, TRUE, &node, &has,
                     error))
    return FALSE;
  if (node >= QP_MAX_NODES || !numa->nodes[node].present)
    return set_invalid(
        error,
        "-numa '%s': node %" G_GUINT64_FORMAT " is not declared: "
        "an earlier -numa node,nodeid=%" G_GUINT64_FORMAT " must "
        "declare it",
        text, node, node);
  for (guint k = 0; k < 5; k++)
    if (!numa_get_uint(kv, keys[k + 2], G_MAXINT64, text, FALSE, &ids[k],
                       &has_id[k], error))
      return FALSE;
  if (has_id[1] && r->dies == 1 && a->priv->machine.known)
    return set_invalid(error,
                       "-numa '%s': die-id is not supported with one die "
                       "per socket",
                       text);
  if (has_id[2] && !a->priv->machine.clusters_supported)
    return set_invalid(error,
                       "-numa '%s': cluster-id is not supported by machine "
                       "'%s'",
                       text, a->machine);

  gboolean match = FALSE;
  for (guint c = 0; c < r->maxcpus; c++) {
    TopoIds t = topo_ids(r, c);
    guint64 v[5] = {t.socket, t.die, t.cluster, t.core, t.thread};
    gboolean skip = FALSE;
    for (guint k = 0; k < 5; k++)
      if (has_id[k] && ids[k] != v[k])
        skip = TRUE;
    if (skip)
      continue;
    if (!numa_assign(a, numa, c, (guint)node, text, error))
      return FALSE;
    match = TRUE;
  }
  if (!match)
    return set_invalid(error,
                       "-numa '%s': no vCPU has these ids in the -smp "
                       "topology",
                       text);
  return TRUE;
}

static gboolean
numa_dist(Numa *numa, const char *text, GArray *kv, GError **error)
{
  static const char *const keys[] = {"type", "src", "dst", "val", NULL};
  const char *unknown = kv_unknown_key(kv, keys);
  guint64 src, dst, val;
  gboolean has;

  if (unknown != NULL)
    return set_invalid(
        error,
        "-numa '%s': unknown parameter '%s': expected src, dst and "
        "val",
        text, unknown);
  if (!numa_get_uint(kv, "src", G_MAXUINT16, text, TRUE, &src, &has, error) ||
      !numa_get_uint(kv, "dst", G_MAXUINT16, text, TRUE, &dst, &has, error) ||
      !numa_get_uint(kv, "val", G_MAXUINT8, text, TRUE, &val, &has, error))
    return FALSE;
  if (src >= QP_MAX_NODES || dst >= QP_MAX_NODES || !numa->nodes[src].present ||
      !numa->nodes[dst].present)
    return set_invalid(
        error,
        "-numa '%s': node %" G_GUINT64_FORMAT " is not declared: "
        "declare both nodes with -numa node first",
        text, (src >= QP_MAX_NODES || !numa->nodes[src].present) ? src : dst);
  if (val < 10)
    return set_invalid(error,
                       "-numa '%s': distance %" G_GUINT64_FORMAT " is below "
                       "the minimum of 10",
                       text, val);
  if (src == dst && val != 10)
    return set_invalid(error,
                       "-numa '%s': the distance of a node to itself must "
                       "be 10",
                       text);
  numa->dist[src][dst] = (guint)val;
  numa->has_dist = TRUE;
  return TRUE;
}

static gboolean
numa_finish(QpQemuArgs *a, Numa *numa, GError **error)
{
  QpRequest *r = a->req;
  guint n = numa->n;
  gboolean any_mem = FALSE, any_memdev = FALSE, any_cpu = FALSE;
  guint64 total = 0;
  gboolean sizes_known = TRUE;

  if (n == 0)
    return TRUE;
  for (guint i = 0; i < n; i++)
    if (!numa->nodes[i].present)
      return set_invalid(error,
                         "-numa: node %u is missing: node ids must run "
                         "from 0 to %u without gaps",
                         i, n - 1);
  for (guint i = 0; i < n; i++) {
    NumaNode *nd = &numa->nodes[i];
    any_mem |= nd->legacy_mem;
    any_memdev |= nd->memdev != NULL;
    if (nd->memdev != NULL && nd->mem_bytes == 0)
      sizes_known = FALSE;
    total += nd->mem_bytes;
  }
  if (any_mem && any_memdev)
    return set_invalid(error,
                       "-numa: mem= and memdev= are mixed: give every node "
                       "memdev= (or, on old machine types, every node mem=)");
  if (any_memdev && a->machine_memdev != NULL)
    return set_invalid(
        error,
        "-machine memory-backend=%s and -numa node,memdev= exclude "
        "each other: give the memory of each node with memdev=",
        a->machine_memdev);
  if ((any_mem || any_memdev) && sizes_known && total != a->ram_bytes)
    return set_invalid(
        error,
        "-numa: the memory of the nodes adds up to %" G_GUINT64_FORMAT
        " MiB, but the RAM size (-m) is %" G_GUINT64_FORMAT " MiB: "
        "they must be equal",
        bytes_to_mib(total), bytes_to_mib(a->ram_bytes));
  if (!any_mem && !any_memdev && a->machine_memdev == NULL) {
    /* No node has memory. QEMU 7.2 splits the RAM only for machine types
     * up to 5.0 (and refuses later ones); qemu-pin splits it the same way,
     * 8 MiB aligned with the rest on the last node, and the rewrite gives
     * each node a backend of that size. */
    guint64 used = 0;
    for (guint i = 0; i + 1 < n; i++) {
      numa->nodes[i].mem_bytes =
          (a->ram_bytes / n) & ~((G_GUINT64_CONSTANT(1) << 23) - 1);
      used += numa->nodes[i].mem_bytes;
    }
    numa->nodes[n - 1].mem_bytes = a->ram_bytes - used;
    a->priv->split_mem = TRUE;
  }

  for (guint c = 0; c < r->maxcpus; c++)
    any_cpu |= numa->cpu_node[c] >= 0;
  {
    g_autoptr(GString) missing = g_string_new(NULL);
    for (guint c = 0; c < r->maxcpus; c++) {
      if (numa->cpu_node[c] >= 0)
        continue;
      if (any_cpu) {
        /* QEMU 7.2 puts them on node 0 and warns. */
        numa->cpu_node[c] = 0;
        g_string_append_printf(missing, "%s%u", missing->len ? "," : "", c);
      } else {
        numa->cpu_node[c] = (int)(topo_ids(r, c).socket % n);
      }
    }
    if (missing->len)
      g_ptr_array_add(
          a->notes, g_strdup_printf("vCPUs %s are in no -numa node: QEMU puts "
                                    "them on node 0",
                                    missing->str));
  }

  if (numa->has_dist) {
    gboolean asym = FALSE;
    for (guint s = 0; s < n; s++)
      for (guint d = s; d < n; d++) {
        if (s != d && numa->dist[s][d] == 0 && numa->dist[d][s] == 0)
          return set_invalid(error,
                             "-numa dist: the distance between nodes %u "
                             "and %u is missing: give at least one direction",
                             s, d);
        if (numa->dist[s][d] && numa->dist[d][s] &&
            numa->dist[s][d] != numa->dist[d][s])
          asym = TRUE;
      }
    if (asym)
      for (guint s = 0; s < n; s++)
        for (guint d = 0; d < n; d++)
          if (s != d && numa->dist[s][d] == 0)
            return set_invalid(error,
                               "-numa dist: distances are asymmetric, so both "
                               "directions are needed, and %u to %u is missing",
                               s, d);
    r->gdistance = g_new0(guint, n * n);
    for (guint s = 0; s < n; s++)
      for (guint d = 0; d < n; d++)
        r->gdistance[s * n + d] = s == d             ? 10
                                  : numa->dist[s][d] ? numa->dist[s][d]
                                                     : numa->dist[d][s];
  }

  r->n_gnodes = n;
  r->gnodes = g_new0(QpGuestNode, n);
  a->priv->nodes = g_new0(NodeExtra, n);
  for (guint i = 0; i < n; i++) {
    NumaNode *nd = &numa->nodes[i];
    QpGuestNode *g = &r->gnodes[i];
    g->id = (int)i;
    g->vcpus = hwloc_bitmap_alloc();
    for (guint c = 0; c < r->maxcpus; c++)
      if (numa->cpu_node[c] == (int)i)
        hwloc_bitmap_set(g->vcpus, c);
    g->mem_mib = bytes_to_mib(nd->mem_bytes);
    g->memdev = g_strdup(nd->memdev);
    if (nd->memdev != NULL) {
      QpBackend *b = find_backend(a, nd->memdev);
      g->host_nodes = b->host_nodes ? hwloc_bitmap_dup(b->host_nodes) : NULL;
      g->policy = b->policy;
    }
    a->priv->nodes[i].argi = nd->argi;
    a->priv->nodes[i].mem_bytes = nd->mem_bytes;
    a->priv->nodes[i].legacy_mem = nd->legacy_mem;
  }
  return TRUE;
}

/* ---- -device vfio-pci
 * ------------------------------------------------------------- */

static gboolean
hex_field(const char **p, guint64 max, guint64 *out)
{
  const char *s = *p;
  guint64 v = 0;
  if (!g_ascii_isxdigit(*s))
    return FALSE;
  for (; g_ascii_isxdigit(*s); s++) {
    v = v * 16 + (guint64)g_ascii_xdigit_value(*s);
    if (v > max)
      return FALSE;
  }
  *p = s;
  *out = v;
  return TRUE;
}

/* "[domain:]bus:slot.function" (hex, function decimal 0-7) to the canonical
 * "0000:01:00.0", or NULL. */
static char *
normalise_bdf(const char *text)
{
  const char *p = text;
  guint64 a, b, dom = 0, bus, slot, fn;
  if (!hex_field(&p, 0xffff, &a) || *p++ != ':' || !hex_field(&p, 0xffff, &b))
    return NULL;
  if (*p == ':') {
    p++;
    dom = a;
    bus = b;
    if (!hex_field(&p, 0x1f, &slot))
      return NULL;
  } else {
    bus = a;
    slot = b;
  }
  if (bus > 0xff || slot > 0x1f || *p++ != '.' || *p < '0' || *p > '7' || p[1])
    return NULL;
  fn = (guint64)(*p - '0');
  return g_strdup_printf("%04" G_GINT64_MODIFIER "x:%02" G_GINT64_MODIFIER
                         "x:%02" G_GINT64_MODIFIER "x.%" G_GINT64_MODIFIER "x",
                         dom, bus, slot, fn);
}

/* The PCI device behind a vfio-pci sysfsdev= path: the path resolved
 * (symlinks and all, as QEMU opens it) is the device's sysfs directory, and
 * the nearest component that is a PCI address is the device itself
 * (/sys/bus/pci/devices/BDF) or, for a mediated device
 * (/sys/bus/mdev/devices/UUID, which resolves under its parent), the parent
 * whose locality it shares. A path that does not resolve (the device is on
 * another host) names the device by its last component when that is an
 * address. NULL when neither gives one. */
static char *
sysfsdev_bdf(const char *path)
{
  g_autofree char *real = realpath(path, NULL);
  g_auto(GStrv) parts = g_strsplit(real != NULL ? real : path, "/", -1);
  for (guint n = g_strv_length(parts); n > 0; n--) {
    char *bdf = normalise_bdf(parts[n - 1]);
    if (bdf != NULL || real == NULL)
      return bdf;
  }
  return NULL;
}

static gboolean
parse_device(GPtrArray *vfio, const char *text, GError **error)
{
  g_autofree char *driver = NULL, *host = NULL, *sysfsdev = NULL;

  if (text[0] == '{') {
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(GError) local = NULL;
    if (!json_parser_load_from_data(parser, text, -1, &local))
      return set_invalid(error, "-device '%s' is not valid JSON: %s", text,
                         local->message);
    JsonNode *root = json_parser_get_root(parser);
    if (root == NULL || !JSON_NODE_HOLDS_OBJECT(root))
      return set_invalid(error, "-device '%s': expected a JSON object", text);
    JsonObject *obj = json_node_get_object(root);
    static const char *const keys[] = {"driver", "host", "sysfsdev"};
    char **dest[] = {&driver, &host, &sysfsdev};
    for (guint k = 0; k < G_N_ELEMENTS(keys); k++) {
      JsonNode *n = json_object_get_member(obj, keys[k]);
      if (n == NULL)
        continue;
      if (!JSON_NODE_HOLDS_VALUE(n) ||
          json_node_get_value_type(n) != G_TYPE_STRING)
        return set_invalid(error, "-device '%s': '%s' must be a string", text,
                           keys[k]);
      *dest[k] = g_strdup(json_node_get_string(n));
    }
  } else {
    g_autoptr(GArray) kv = kv_parse(text, "driver");
    driver = g_strdup(kv_get(kv, "driver"));
    host = g_strdup(kv_get(kv, "host"));
    sysfsdev = g_strdup(kv_get(kv, "sysfsdev"));
  }
  if (driver == NULL || (strcmp(driver, "vfio-pci") != 0 &&
                         strcmp(driver, "vfio-pci-nohotplug") != 0))
    return TRUE;
  if (host == NULL && sysfsdev != NULL) {
    /* Any path: QEMU reads it. A device whose address cannot be found
     * there keeps the path, and its locality is unknown to the plan. */
    char *bdf = sysfsdev_bdf(sysfsdev);
    g_ptr_array_add(vfio, bdf != NULL ? bdf : g_strdup(sysfsdev));
    return TRUE;
  }
  if (host == NULL)
    return set_invalid(error,
                       "-device '%s': vfio-pci needs host= or sysfsdev=", text);
  const char *addr = host;
  char *bdf = normalise_bdf(addr);
  if (bdf == NULL)
    return set_invalid(error,
                       "-device '%s': host '%s' is not a PCI address: expected "
                       "[domain:]bus:slot.function such as 0000:01:00.0",
                       text, addr);
  g_ptr_array_add(vfio, bdf);
  return TRUE;
}

/* ---- the whole command line
 * ---------------------------------------------------- */

/* The options of ARGV in order, as QEMU's lookup_opt() finds them: "--opt"
 * is "-opt"; an option in the table takes the next argument whatever it
 * looks like; a word without a dash is a disk image. *MISSING is the last
 * option when it lacks its argument. */
static GArray *
scan_options(guint argc, char **argv, const char **missing)
{
  GArray *opts = g_array_new(FALSE, TRUE, sizeof(Opt));
  *missing = NULL;
  for (guint i = 0; i < argc; i++) {
    const char *arg = argv[i];
    Opt o = {0};
    if (arg[0] != '-')
      continue;
    o.name = arg + 1;
    if (o.name[0] == '-')
      o.name++;
    o.i = i;
    if (option_has_arg(o.name)) {
      if (i + 1 >= argc) {
        *missing = arg;
        break;
      }
      o.vi = ++i;
      o.value = argv[i];
    }
    g_array_append_val(opts, o);
  }
  return opts;
}

static gboolean is_opt(const Opt *o, const char *name);

QpVmIds *
qp_vm_ids_from_argv(guint argc, char **argv)
{
  const char *missing;
  g_autoptr(GArray) opts = scan_options(argc, argv, &missing);
  QpVmIds *ids = g_new0(QpVmIds, 1);
  for (guint i = 0; i < opts->len; i++) {
    const Opt *o = &g_array_index(opts, Opt, i);
    if (is_opt(o, "uuid")) {
      g_free(ids->uuid);
      ids->uuid = g_strdup(o->value);
    } else if (is_opt(o, "id")) {
      g_free(ids->id);
      ids->id = g_strdup(o->value);
    } else if (is_opt(o, "name")) {
      g_autoptr(GArray) kv = kv_parse(o->value, "guest");
      g_free(ids->name);
      ids->name = g_strdup(kv_get(kv, "guest"));
    }
  }
  return ids;
}

void
qp_vm_ids_free(QpVmIds *ids)
{
  if (ids == NULL)
    return;
  g_free(ids->name);
  g_free(ids->uuid);
  g_free(ids->id);
  g_free(ids);
}

/* A memory backend of an -object value (key=value or JSON) without its
 * prealloc-context, or NULL when it is no such backend or has none. The id
 * goes to *ID. Never fails: what cannot be read is left as it is. */
static char *
backend_without_context(const char *value, char **id)
{
  if (value[0] != '{') {
    g_autoptr(GArray) kv = kv_parse(value, "qom-type");
    const char *type = kv_get(kv, "qom-type");
    if (type == NULL || !g_str_has_prefix(type, "memory-backend-") ||
        kv_get(kv, "prealloc-context") == NULL)
      return NULL;
    *id = g_strdup(kv_get(kv, "id"));
    return kv_without(value, "prealloc-context");
  }
  g_autoptr(JsonParser) parser = json_parser_new();
  if (!json_parser_load_from_data(parser, value, -1, NULL))
    return NULL;
  JsonNode *root = json_parser_get_root(parser);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT(root))
    return NULL;
  JsonObject *obj = json_node_get_object(root);
  const char *type =
      json_object_get_string_member_with_default(obj, "qom-type", NULL);
  if (type == NULL || !g_str_has_prefix(type, "memory-backend-") ||
      !json_object_has_member(obj, "prealloc-context"))
    return NULL;
  *id = g_strdup(json_object_get_string_member_with_default(obj, "id", ""));
  json_object_remove_member(obj, "prealloc-context");
  return json_to_string(root, FALSE);
}

char **
qp_argv_daemonize_safe(guint argc, char **argv, char **dropped)
{
  const char *missing;
  g_autoptr(GArray) opts = scan_options(argc, argv, &missing);
  gboolean daemonize = FALSE;
  for (guint i = 0; i < opts->len; i++)
    daemonize |= is_opt(&g_array_index(opts, Opt, i), "daemonize");
  *dropped = NULL;
  if (!daemonize)
    return NULL;
  g_autoptr(GString) ids = g_string_new(NULL);
  char **out = NULL;
  for (guint i = 0; i < opts->len; i++) {
    const Opt *o = &g_array_index(opts, Opt, i);
    g_autofree char *id = NULL;
    char *edited = is_opt(o, "object") && o->value != NULL
                       ? backend_without_context(o->value, &id)
                       : NULL;
    if (edited == NULL)
      continue;
    if (out == NULL) {
      out = g_new0(char *, (gsize)argc + 1);
      for (guint k = 0; k < argc; k++)
        out[k] = g_strdup(argv[k]);
    }
    g_free(out[o->vi]);
    out[o->vi] = edited;
    g_string_append_printf(ids, "%s%s", ids->len ? ", " : "", id ? id : "");
  }
  if (out != NULL)
    *dropped = g_strdup(ids->str);
  return out;
}

/* Not a launch: help, version, a capability probe. */
static gboolean
wants_help(const Opt *o)
{
  if (in_list(info_options, G_N_ELEMENTS(info_options), o->name))
    return TRUE;
  if (o->value == NULL || o->value[0] == '{' ||
      in_list(free_text_options, G_N_ELEMENTS(free_text_options), o->name))
    return FALSE;
  /* -name help names the guest "help"; -name x,help asks for help. */
  if (is_help_word(o->value) && strcmp(o->name, "name") != 0)
    return TRUE;
  g_autoptr(GArray) kv =
      kv_parse(o->value, strcmp(o->name, "name") == 0 ? "guest" : "");
  if (kv_wants_help(kv))
    return TRUE;
  /* -machine type=help, -device driver=help, -object qom-type=help... */
  for (guint i = 0; i < kv->len; i++) {
    KvPair *p = &g_array_index(kv, KvPair, i);
    if (!p->flag && is_help_word(p->value) && strcmp(p->key, "guest") != 0 &&
        (i == 0 || strcmp(p->key, "type") == 0 ||
         strcmp(p->key, "driver") == 0 || strcmp(p->key, "qom-type") == 0))
      return TRUE;
  }
  return FALSE;
}

static gboolean
is_opt(const Opt *o, const char *name)
{
  return strcmp(o->name, name) == 0;
}

static gboolean
parse_all(QpQemuArgs *a, GArray *opts, GError **error)
{
  g_autoptr(GArray) machine = kv_new(), smp = kv_new(), mem = kv_new();
  const char *smp_text = "", *v;
  gboolean smp_from_machine = FALSE;
  gboolean custom_ram = FALSE;

  for (guint i = 0; i < opts->len; i++) {
    const Opt *o = &g_array_index(opts, Opt, i);
    if (is_opt(o, "machine") || is_opt(o, "M"))
      kv_parse_into(machine, o->value, "type");
    else if (is_opt(o, "smp")) {
      kv_parse_into(smp, o->value, "cpus");
      smp_text = o->value;
    } else if (is_opt(o, "m"))
      kv_parse_into(mem, o->value, "size");
  }
  /* -machine smp.cpus=4 and memory.size=1G do what -smp and -m do, unless
   * those are given: then QEMU 7.2 takes them and ignores the others. */
  gboolean mem_bytes = FALSE;
  if (smp->len == 0 || mem->len == 0) {
    gboolean from_smp = smp->len == 0, from_mem = mem->len == 0;
    for (guint i = 0; i < machine->len; i++) {
      KvPair *p = &g_array_index(machine, KvPair, i);
      KvPair copy = {.value = g_strdup(p->value), .text = p->text};
      if (from_smp && g_str_has_prefix(p->key, "smp.")) {
        copy.key = g_strdup(p->key + 4);
        g_array_append_val(smp, copy);
        smp_text = p->text;
        smp_from_machine = TRUE;
      } else if (from_mem && g_str_has_prefix(p->key, "memory.")) {
        const char *k = p->key + 7;
        copy.key = g_strdup(strcmp(k, "max-size") == 0 ? "maxmem"
                            : strcmp(k, "maxmem") == 0 ? "memory.maxmem"
                                                       : k);
        g_array_append_val(mem, copy);
        mem_bytes = TRUE;
      } else {
        g_free(copy.value);
      }
    }
  }
  v = kv_get(machine, "type");
  a->machine = g_strdup(v ? v : "pc");
  a->priv->machine = machine_info(a->machine);
  if ((v = kv_get(machine, "memory-backend")) != NULL)
    a->machine_memdev = g_strdup(v);

  for (guint i = 0; i < opts->len; i++) {
    const Opt *o = &g_array_index(opts, Opt, i);
    if (is_opt(o, "S"))
      a->has_S = TRUE;
    else if (is_opt(o, "daemonize"))
      a->daemonize = TRUE;
    else if (is_opt(o, "sandbox"))
      a->has_sandbox = TRUE;
    else if (is_opt(o, "mem-prealloc"))
      a->priv->mem_prealloc = TRUE;
    else if (is_opt(o, "mem-path")) {
      g_free(a->priv->mem_path);
      a->priv->mem_path = g_strdup(o->value);
      g_array_append_val(a->priv->mem_path_i, o->i);
    } else if (is_opt(o, "incoming"))
      g_free(a->incoming), a->incoming = g_strdup(o->value);
    else if (is_opt(o, "pidfile"))
      g_free(a->pidfile), a->pidfile = g_strdup(o->value);
    else if (is_opt(o, "object")) {
      if (!parse_object(a, o, error))
        return FALSE;
    }
  }

  if (!parse_smp(a, smp, smp_text, error)) {
    /* The topology came from -machine smp.*: name what the caller wrote. */
    if (smp_from_machine && error != NULL && *error != NULL &&
        g_str_has_prefix((*error)->message, "-smp '")) {
      char *m = g_strconcat("-machine '", (*error)->message + 6, NULL);
      g_free((*error)->message);
      (*error)->message = m;
    }
    return FALSE;
  }
  if (!parse_memory(a, mem, mem_bytes, &custom_ram, error))
    return FALSE;

  if (a->machine_memdev != NULL) {
    QpBackend *b = find_backend(a, a->machine_memdev);
    if (b == NULL)
      return set_invalid(error,
                         "-machine memory-backend=%s names no -object "
                         "memory-backend-*",
                         a->machine_memdev);
    if (!custom_ram && b->size_bytes != 0) {
      a->ram_bytes = b->size_bytes;
      a->req->mem_mib = b->size_mib;
    } else if (custom_ram && b->size_bytes != 0 &&
               b->size_bytes != a->ram_bytes)
      return set_invalid(
          error,
          "-machine memory-backend=%s: the backend has %" G_GUINT64_FORMAT
          " bytes but -m asks for %" G_GUINT64_FORMAT ": they must "
          "be equal",
          a->machine_memdev, b->size_bytes, a->ram_bytes);
  }

  {
    Numa numa;
    memset(&numa, 0, sizeof(numa));
    numa.cpu_node = g_new(int, a->req->maxcpus);
    for (guint c = 0; c < a->req->maxcpus; c++)
      numa.cpu_node[c] = -1;
    gboolean ok = TRUE;
    for (guint i = 0; ok && i < opts->len; i++) {
      const Opt *o = &g_array_index(opts, Opt, i);
      if (!is_opt(o, "numa"))
        continue;
      g_autoptr(GArray) kv = kv_parse(o->value, "type");
      const char *type = kv_get(kv, "type");
      if (type == NULL)
        type = "node";
      if (strcmp(type, "node") == 0)
        ok = numa_node(a, &numa, o, kv, error);
      else if (strcmp(type, "cpu") == 0)
        ok = numa_cpu(a, &numa, o, kv, error);
      else if (strcmp(type, "dist") == 0)
        ok = numa_dist(&numa, o->value, kv, error);
      else if (strcmp(type, "hmat-lb") != 0 && strcmp(type, "hmat-cache") != 0)
        ok = set_invalid(
            error,
            "-numa '%s': unknown type '%s': expected node, cpu, dist, "
            "hmat-lb or hmat-cache",
            o->value, type);
    }
    if (ok)
      ok = numa_finish(a, &numa, error);
    numa_clear(&numa);
    if (!ok)
      return FALSE;
  }

  g_autoptr(GPtrArray) vfio = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GPtrArray) devices = g_ptr_array_new();
  for (guint i = 0; i < opts->len; i++) {
    const Opt *o = &g_array_index(opts, Opt, i);
    if (!is_opt(o, "device"))
      continue;
    if (!parse_device(vfio, o->value, error))
      return FALSE;
    g_ptr_array_add(devices, (gpointer)o->value);
  }
  if (vfio->len > 0) {
    g_ptr_array_add(vfio, NULL);
    a->req->vfio = (char **)g_ptr_array_steal(vfio, NULL);
  }

  /* Preallocation, over every backend. -mem-prealloc makes every memory
   * backend preallocate (it is a global property in 7.2). */
  QpRequest *r = a->req;
  for (guint i = 0; i < a->backends->len; i++) {
    QpBackend *b = g_ptr_array_index(a->backends, i);
    if (a->priv->mem_prealloc)
      b->prealloc = TRUE;
    r->prealloc |= b->prealloc;
  }
  if (a->priv->mem_prealloc)
    r->prealloc = TRUE;
  qp_memory_model(a, devices, a->priv->mem_path);
  return TRUE;
}

/* The option a -readconfig section stands for, as QEMU 7.2 treats it:
 * [machine] merges into -machine, [smp-opts] into -smp, [memory] is -m,
 * [numa] -numa, [object "ID"] -object and [device "ID"] -device. Sections
 * that do not matter to placement give NULL. */
static const char *
section_option(const QpConfigSection *section)
{
  static const char *const map[][2] = {
      {"machine", "machine"}, {"smp-opts", "smp"},  {"memory", "m"},
      {"numa", "numa"},       {"object", "object"}, {"device", "device"},
  };
  for (guint k = 0; k < G_N_ELEMENTS(map); k++)
    if (strcmp(section->group, map[k][0]) == 0)
      return map[k][1];
  return NULL;
}

/* When ERROR names a value read from a -readconfig file, says which file,
 * line and section it came from: the caller did not write the option. */
static void
name_config_file(const QpQemuArgs *a, GError **error)
{
  GPtrArray *v = a->priv->file_values;
  for (guint k = 0;
       v != NULL && error != NULL && *error != NULL && k + 1 < v->len; k += 2)
    if (strstr((*error)->message, v->pdata[k]) != NULL) {
      g_prefix_error(error, "-readconfig %s: ", (char *)v->pdata[k + 1]);
      return;
    }
}

/* OPTS with the options of each -readconfig file in place of it, so that
 * they merge with the command line's in QEMU's order. A file that cannot be
 * read is one warning (QEMU then says so itself); what QEMU refuses in its
 * syntax is refused here too. */
static GArray *
with_config_files(QpQemuArgs *a, GArray *opts, GError **error)
{
  g_autoptr(GArray) all = g_array_new(FALSE, TRUE, sizeof(Opt));
  for (guint i = 0; i < opts->len; i++) {
    const Opt *o = &g_array_index(opts, Opt, i);
    g_array_append_val(all, *o);
    if (!is_opt(o, "readconfig"))
      continue;
    g_autoptr(GError) local = NULL;
    g_autoptr(GPtrArray) sections = qp_readconfig_read(o->value, &local);
    if (sections == NULL && local->domain == QP_ARGS_ERROR) {
      g_propagate_error(error, g_steal_pointer(&local));
      return NULL;
    }
    if (sections == NULL) {
      g_ptr_array_add(a->warnings,
                      g_strdup_printf("-readconfig %s %s: what it holds is "
                                      "not planned for",
                                      o->value, local->message));
      continue;
    }
    if (a->priv->file_values == NULL)
      a->priv->file_values = g_ptr_array_new_with_free_func(g_free);
    for (guint k = 0; k < sections->len; k++) {
      const QpConfigSection *sec = g_ptr_array_index(sections, k);
      const char *name = section_option(sec);
      if (name == NULL)
        continue;
      GString *v = g_string_new(NULL);
      if (sec->id != NULL)
        kv_append(v, "id", sec->id);
      for (guint j = 0; j < sec->keys->len; j++)
        kv_append(v, sec->keys->pdata[j], sec->values->pdata[j]);
      char *value = g_string_free(v, FALSE);
      g_ptr_array_add(a->priv->file_values, value);
      g_ptr_array_add(
          a->priv->file_values,
          g_strdup_printf("%s:%u [%s]", o->value, sec->line, sec->group));
      Opt f = {.name = name, .i = IN_FILE, .value = value, .vi = IN_FILE};
      g_array_append_val(all, f);
    }
  }
  return g_steal_pointer(&all);
}

QpQemuArgs *
qp_qemu_args_parse(guint argc, char **argv, GError **error)
{
  g_autoptr(QpQemuArgs) a = g_new0(QpQemuArgs, 1);
  g_autoptr(GArray) opts = NULL;
  const char *missing = NULL;

  a->argc = argc;
  a->argv = g_new0(char *, argc + 1);
  for (guint i = 0; i < argc; i++)
    a->argv[i] = g_strdup(argv[i]);
  a->req = qp_request_new();
  a->backends = g_ptr_array_new_with_free_func(backend_free);
  a->warnings = g_ptr_array_new_with_free_func(g_free);
  a->notes = g_ptr_array_new_with_free_func(g_free);
  a->priv = g_new0(struct _QpQemuArgsPriv, 1);
  a->priv->mem_path_i = g_array_new(FALSE, FALSE, sizeof(guint));
  a->ram_bytes = 128 * MiB;
  {
    g_autoptr(QpVmIds) ids = qp_vm_ids_from_argv(argc, a->argv);
    a->name = g_steal_pointer(&ids->name);
    a->uuid = g_steal_pointer(&ids->uuid);
    a->id = g_steal_pointer(&ids->id);
  }

  opts = scan_options(a->argc, a->argv, &missing);
  for (guint i = 0; i < opts->len; i++)
    if (wants_help(&g_array_index(opts, Opt, i)))
      a->passthrough = TRUE;
  if (!a->passthrough) {
    /* A capability probe: -machine none (libvirt: -machine none,accel=...) */
    g_autoptr(GArray) machine = kv_new();
    for (guint i = 0; i < opts->len; i++) {
      const Opt *o = &g_array_index(opts, Opt, i);
      if (is_opt(o, "machine") || is_opt(o, "M"))
        kv_parse_into(machine, o->value, "type");
    }
    const char *type = kv_get(machine, "type");
    if (type != NULL && strcmp(type, "none") == 0)
      a->passthrough = TRUE;
  }
  if (a->passthrough)
    return g_steal_pointer(&a);
  if (missing != NULL) {
    set_invalid(error, "%s requires an argument", missing);
    return NULL;
  }
  g_autoptr(GArray) all = with_config_files(a, opts, error);
  if (all == NULL)
    return NULL;
  if (!parse_all(a, all, error)) {
    name_config_file(a, error);
    return NULL;
  }
  g_autoptr(GString) unbound = g_string_new(NULL);
  for (guint i = 0; i < a->backends->len; i++) {
    const QpBackend *b = g_ptr_array_index(a->backends, i);
    if (b->argi == IN_FILE && b->host_nodes == NULL)
      g_string_append_printf(unbound, "%s'%s'", unbound->len ? ", " : "",
                             b->id);
  }
  if (unbound->len > 0)
    g_ptr_array_add(a->warnings,
                    g_strdup_printf("memory backends %s of -readconfig files "
                                    "cannot be given host-nodes: the "
                                    "process's memory policy binds them",
                                    unbound->str));
  return g_steal_pointer(&a);
}

/* ---- rewrite
 * --------------------------------------------------------------------- */

typedef struct {
  const QpQemuArgs *args;
  char **replace;     /* per argv index: new value, or NULL */
  gboolean *drop;     /* per argv index: left out */
  GPtrArray **before; /* per argv index: arguments inserted before it */
  GPtrArray *tail;    /* arguments added at the end */
} Rewrite;

static void
rewrite_insert(Rewrite *rw, guint index, const char *opt, char *value)
{
  if (rw->before[index] == NULL)
    rw->before[index] = g_ptr_array_new_with_free_func(g_free);
  g_ptr_array_add(rw->before[index], g_strdup(opt));
  g_ptr_array_add(rw->before[index], value);
}

static void
append_list(GString *s, const char *key, hwloc_const_bitmap_t set)
{
  g_autofree char *list = qp_list_format(set);
  g_auto(GStrv) ranges = g_strsplit(list, ",", -1);
  for (guint i = 0; ranges[i]; i++)
    kv_append(s, key, ranges[i]);
}

static const char *
policy_for(QpPolicy p)
{
  return qp_policy_name(p == QP_POLICY_DEFAULT ? QP_POLICY_BIND : p);
}

/* The nodes of NODES that have CPUs (sysfs): QEMU refuses a thread-context
 * whose node-affinity selects no CPU ("The nodes select no CPUs"), and
 * memory-only nodes (CXL, PMEM) have none. NULL if none has. */
static hwloc_bitmap_t
nodes_with_cpus(hwloc_const_bitmap_t nodes)
{
  hwloc_bitmap_t out = hwloc_bitmap_alloc();
  int n;
  hwloc_bitmap_foreach_begin(n, nodes)
  {
    g_autofree char *path =
        g_strdup_printf("/sys/devices/system/node/node%d/cpulist", n);
    g_autofree char *text = NULL;
    if (g_file_get_contents(path, &text, NULL, NULL) &&
        g_ascii_isdigit(text[0]))
      hwloc_bitmap_set(out, (unsigned)n);
  }
  hwloc_bitmap_foreach_end();
  if (hwloc_bitmap_iszero(out)) {
    hwloc_bitmap_free(out);
    return NULL;
  }
  return out;
}

static char *
tc_id(const char *backend)
{
  return g_strdup_printf("qemu-pin-tc-%s", backend);
}

/* Whether QEMU can use a thread-context of the command line. QEMU creates
 * the context's thread before the fork of -daemonize (the type is created
 * "pre-sandbox", in 7.2 as in later releases), so the daemon has the object
 * but not its thread: the first preallocation thread asked of it is waited
 * for forever, and the first process never exits. Preallocation then goes
 * without one: the backend's host-nodes/policy still place the memory, and
 * its threads inherit the startup CPU set of the main thread. */
static gboolean
prealloc_context_usable(const QpQemuArgs *a)
{
  return !a->daemonize;
}

static char *
thread_context(const char *backend, hwloc_const_bitmap_t nodes)
{
  g_autofree char *id = tc_id(backend);
  GString *s = g_string_new("thread-context");
  kv_append(s, "id", id);
  append_list(s, "node-affinity", nodes);
  return g_string_free(s, FALSE);
}

/* The caller's backend B (TEXT, its value so far) with HOST_NODES/POLICY
 * added (when SET_NODES) and a prealloc-context (when WITH_TC). */
static gboolean
edit_backend(const char *text, const QpBackend *b, gboolean set_nodes,
             hwloc_const_bitmap_t nodes, QpPolicy policy, gboolean with_tc,
             char **out, GError **error)
{
  g_autofree char *tc = tc_id(b->id);
  /* The caller's policy (preferred without host-nodes) stays. */
  gboolean set_policy = set_nodes && b->policy == QP_POLICY_DEFAULT;

  if (!b->json) {
    GString *s = g_string_new(text);
    if (set_nodes)
      append_list(s, "host-nodes", nodes);
    if (set_policy)
      kv_append(s, "policy", policy_for(policy));
    if (with_tc)
      kv_append(s, "prealloc-context", tc);
    *out = g_string_free(s, FALSE);
    return TRUE;
  }
  g_autoptr(JsonParser) parser = json_parser_new();
  if (!json_parser_load_from_data(parser, text, -1, error))
    return FALSE;
  JsonObject *obj = json_node_get_object(json_parser_get_root(parser));
  if (set_nodes) {
    JsonArray *arr = json_array_new();
    int n;
    hwloc_bitmap_foreach_begin(n, nodes) json_array_add_int_element(arr, n);
    hwloc_bitmap_foreach_end();
    json_object_set_array_member(obj, "host-nodes", arr);
  }
  if (set_policy)
    json_object_set_string_member(obj, "policy", policy_for(policy));
  if (with_tc)
    json_object_set_string_member(obj, "prealloc-context", tc);
  g_autoptr(JsonGenerator) gen = json_generator_new();
  json_generator_set_root(gen, json_parser_get_root(parser));
  *out = json_generator_to_data(gen, NULL);
  return TRUE;
}

/* A backend qemu-pin makes: memory-backend-ram ID of BYTES bound to NODES,
 * or memory-backend-file in MEM_PATH (what -mem-path made). */
static char *
new_backend(const char *id, const char *mem_path, guint64 bytes,
            hwloc_const_bitmap_t nodes, QpPolicy policy, gboolean with_tc)
{
  GString *s =
      g_string_new(mem_path ? "memory-backend-file" : "memory-backend-ram");
  g_autofree char *size = g_strdup_printf("%" G_GUINT64_FORMAT, bytes);
  kv_append(s, "id", id);
  kv_append(s, "size", size);
  if (mem_path != NULL)
    kv_append(s, "mem-path", mem_path);
  append_list(s, "host-nodes", nodes);
  kv_append(s, "policy", policy_for(policy));
  if (with_tc) {
    g_autofree char *tc = tc_id(id);
    kv_append(s, "prealloc-context", tc);
  }
  return g_string_free(s, FALSE);
}

static void
drop_mem_path(Rewrite *rw)
{
  GArray *idx = rw->args->priv->mem_path_i;
  for (guint i = 0; i < idx->len; i++) {
    guint k = g_array_index(idx, guint, i);
    rw->drop[k] = rw->drop[k + 1] = TRUE;
  }
}

static gboolean
apply_mem(Rewrite *rw, const QpPlanMem *m, GHashTable *done, GError **error)
{
  const QpQemuArgs *a = rw->args;
  const QpRequest *r = a->req;
  const char *memdev = m->memdev;

  if (m->host_nodes == NULL || hwloc_bitmap_iszero(m->host_nodes))
    return TRUE;
  if (m->gnode >= 0 && (guint)m->gnode >= r->n_gnodes)
    return set_invalid(error,
                       "plan: guest node %d does not exist (the guest has "
                       "%u)",
                       m->gnode, r->n_gnodes);
  if (memdev == NULL)
    memdev = m->gnode < 0 ? a->machine_memdev : r->gnodes[m->gnode].memdev;

  if (memdev != NULL) {
    QpBackend *b = find_backend(a, memdev);
    if (b == NULL)
      return set_invalid(error,
                         "plan: memory backend '%s' is not on the command "
                         "line",
                         memdev);
    /* A backend of a -readconfig file stays as written: the process's
     * memory policy binds it (the parser warned). */
    if (g_hash_table_contains(done, b->id) || b->argi == IN_FILE)
      return TRUE;
    g_hash_table_add(done, b->id);
    gboolean set_nodes = b->host_nodes == NULL && !m->caller_set;
    hwloc_const_bitmap_t nodes = set_nodes ? m->host_nodes : b->host_nodes;
    g_auto(hwloc_bitmap_t) tc_nodes = NULL;
    if (b->prealloc && !b->prealloc_context && nodes != NULL &&
        prealloc_context_usable(a))
      tc_nodes = nodes_with_cpus(nodes);
    gboolean with_tc = tc_nodes != NULL;
    if (!set_nodes && !with_tc)
      return TRUE;
    char *value = NULL;
    const char *text =
        rw->replace[b->argi] ? rw->replace[b->argi] : a->argv[b->argi];
    if (!edit_backend(text, b, set_nodes, nodes, m->policy, with_tc, &value,
                      error))
      return FALSE;
    g_free(rw->replace[b->argi]);
    rw->replace[b->argi] = value;
    if (with_tc)
      rewrite_insert(rw, b->argi - 1, "-object",
                     thread_context(b->id, tc_nodes));
    return TRUE;
  }
  if (m->caller_set)
    return TRUE;

  /* -mem-path cannot go with -machine memory-backend or memdev=: it becomes
   * the mem-path of the backends made here, as QEMU makes its own. */
  const char *mem_path = a->priv->mem_path;
  g_auto(hwloc_bitmap_t) tc_nodes =
      a->priv->mem_prealloc && prealloc_context_usable(a)
          ? nodes_with_cpus(m->host_nodes)
          : NULL;
  gboolean with_tc = tc_nodes != NULL;
  if (m->gnode < 0) {
    if (r->n_gnodes > 0)
      return set_invalid(error,
                         "plan: memory for the whole guest, but the guest "
                         "has %u NUMA nodes",
                         r->n_gnodes);
    const char *id = qp_qemu_args_ram_id(a);
    drop_mem_path(rw);
    if (with_tc) {
      g_ptr_array_add(rw->tail, g_strdup("-object"));
      g_ptr_array_add(rw->tail, thread_context(id, tc_nodes));
    }
    g_ptr_array_add(rw->tail, g_strdup("-object"));
    g_ptr_array_add(rw->tail, new_backend(id, mem_path, a->ram_bytes,
                                          m->host_nodes, m->policy, with_tc));
    g_ptr_array_add(rw->tail, g_strdup("-machine"));
    g_ptr_array_add(rw->tail, g_strdup_printf("memory-backend=%s", id));
    return TRUE;
  }
  const NodeExtra *nx = &a->priv->nodes[m->gnode];
  if (!a->priv->split_mem || nx->legacy_mem || nx->mem_bytes == 0 ||
      nx->argi == IN_FILE)
    return TRUE; /* mem=, no memory, or a -readconfig node: nothing to bind */
  /* Several backends can share a -mem-path directory, not a file. */
  if (mem_path != NULL && !g_file_test(mem_path, G_FILE_TEST_IS_DIR))
    return TRUE;
  drop_mem_path(rw);
  g_autofree char *id = g_strdup_printf("qemu-pin-node%d", m->gnode);
  if (with_tc)
    rewrite_insert(rw, nx->argi - 1, "-object", thread_context(id, tc_nodes));
  rewrite_insert(rw, nx->argi - 1, "-object",
                 new_backend(id, mem_path, nx->mem_bytes, m->host_nodes,
                             m->policy, with_tc));
  GString *s = g_string_new(a->argv[nx->argi]);
  kv_append(s, "memdev", id);
  rw->replace[nx->argi] = g_string_free(s, FALSE);
  return TRUE;
}

/* --vnuma=auto on a guest without -numa: a guest topology mirroring the
 * placement. -smp options merge, the last value of a key winning, so the
 * one added at the end decides. Guest nodes (with their own backends) only
 * where the caller left the RAM to QEMU. Returns TRUE if it made the guest
 * nodes, which then hold all the RAM. */
static gboolean
apply_vnuma(Rewrite *rw, const QpPlan *plan)
{
  const QpQemuArgs *a = rw->args;
  g_ptr_array_add(rw->tail, g_strdup("-smp"));
  g_ptr_array_add(
      rw->tail, g_strdup_printf(
                    "cpus=%u,maxcpus=%u,sockets=%u,dies=1,cores=%u,threads=%u",
                    a->req->vcpus, plan->n_vcpus, plan->vnuma_sockets,
                    plan->vnuma_cores, plan->vnuma_threads));
  if (plan->n_vnodes == 0 || a->machine_memdev != NULL ||
      a->priv->mem_path != NULL)
    return FALSE;
  for (guint i = 0; i < plan->n_vnodes; i++) {
    const QpPlanVnode *v = &plan->vnodes[i];
    g_autofree char *id = g_strdup_printf("qemu-pin-vnode%d", v->id);
    g_auto(hwloc_bitmap_t) host = hwloc_bitmap_alloc();
    hwloc_bitmap_set(host, (unsigned)v->host_node);
    g_ptr_array_add(rw->tail, g_strdup("-object"));
    g_ptr_array_add(rw->tail, new_backend(id, NULL, v->mem_mib * MiB, host,
                                          QP_POLICY_BIND, FALSE));
    GString *node = g_string_new("node");
    g_autofree char *nodeid = g_strdup_printf("%d", v->id);
    kv_append(node, "nodeid", nodeid);
    /* A list with gaps takes one cpus= per range. */
    g_autofree char *cpus = qp_list_format(v->vcpus);
    g_auto(GStrv) ranges = g_strsplit(cpus, ",", -1);
    for (guint k = 0; ranges[k] != NULL; k++)
      kv_append(node, "cpus", ranges[k]);
    kv_append(node, "memdev", id);
    g_ptr_array_add(rw->tail, g_strdup("-numa"));
    g_ptr_array_add(rw->tail, g_string_free(node, FALSE));
  }
  for (guint x = 0; plan->vnode_distance != NULL && x < plan->n_vnodes; x++)
    for (guint y = 0; y < plan->n_vnodes; y++) {
      if (x == y)
        continue;
      g_ptr_array_add(rw->tail, g_strdup("-numa"));
      g_ptr_array_add(
          rw->tail,
          g_strdup_printf("dist,src=%d,dst=%d,val=%u", plan->vnodes[x].id,
                          plan->vnodes[y].id,
                          plan->vnode_distance[x * plan->n_vnodes + y]));
    }
  return TRUE;
}

char *
qp_qemu_args_prealloc_note(const QpQemuArgs *args, const QpPlan *plan)
{
  if (prealloc_context_usable(args) || !args->req->prealloc)
    return NULL;
  gboolean bound = FALSE;
  for (guint k = 0; plan != NULL && k < plan->n_mem; k++)
    bound |= plan->mem[k].host_nodes != NULL &&
             !hwloc_bitmap_iszero(plan->mem[k].host_nodes);
  if (!bound)
    return NULL;
  return g_strdup(
      "-daemonize: preallocating without a thread-context (QEMU starts its "
      "thread before the fork, and the daemon would wait for it forever); "
      "memory stays bound by host-nodes/policy, preallocation threads run on "
      "the startup CPUs");
}

char **
qp_qemu_args_rewrite(const QpQemuArgs *args, const char *argv0,
                     const QpPlan *plan, int qmp_fd, GError **error)
{
  guint argc = args->argc;
  Rewrite rw = {.args = args};
  g_autoptr(GHashTable) done = g_hash_table_new(g_str_hash, g_str_equal);
  gboolean ok = TRUE;

  rw.replace = g_new0(char *, argc + 1);
  rw.before = g_new0(GPtrArray *, argc + 1);
  rw.drop = g_new0(gboolean, argc + 1);
  rw.tail = g_ptr_array_new_with_free_func(g_free);
  gboolean vnodes = plan != NULL && plan->vnuma && args->req->n_gnodes == 0 &&
                    apply_vnuma(&rw, plan);
  for (guint k = 0; plan != NULL && ok && k < plan->n_mem; k++)
    if (!(vnodes && plan->mem[k].gnode < 0 && plan->mem[k].kind == QP_MEM_RAM))
      ok = apply_mem(&rw, &plan->mem[k], done, error);

  GPtrArray *out = g_ptr_array_new();
  if (ok) {
    g_ptr_array_add(out, g_strdup(argv0));
    for (guint i = 0; i < argc; i++) {
      if (rw.before[i] != NULL)
        for (guint j = 0; j < rw.before[i]->len; j++)
          g_ptr_array_add(out, g_strdup(g_ptr_array_index(rw.before[i], j)));
      if (!rw.drop[i])
        g_ptr_array_add(
            out, g_strdup(rw.replace[i] ? rw.replace[i] : args->argv[i]));
    }
    for (guint j = 0; j < rw.tail->len; j++)
      g_ptr_array_add(out, g_strdup(g_ptr_array_index(rw.tail, j)));
    /* Paused until the keeper has pinned. Not for -incoming: the guest
     * cannot run before the migration completes anyway, and QEMU starts
     * it then unless the caller said -S; our -S would keep it paused. */
    if (!args->has_S && args->incoming == NULL)
      g_ptr_array_add(out, g_strdup("-S"));
    if (qmp_fd >= 0) {
      g_ptr_array_add(out, g_strdup("-chardev"));
      g_ptr_array_add(out,
                      g_strdup_printf("socket,id=qemu-pin-qmp,fd=%d", qmp_fd));
      g_ptr_array_add(out, g_strdup("-mon"));
      g_ptr_array_add(out, g_strdup("chardev=qemu-pin-qmp,mode=control"));
    }
  }
  g_ptr_array_add(out, NULL);

  for (guint i = 0; i <= argc; i++) {
    g_free(rw.replace[i]);
    if (rw.before[i])
      g_ptr_array_unref(rw.before[i]);
  }
  g_free(rw.replace);
  g_free(rw.before);
  g_free(rw.drop);
  g_ptr_array_unref(rw.tail);
  if (!ok) {
    g_strfreev((char **)g_ptr_array_free(out, FALSE));
    return NULL;
  }
  return (char **)g_ptr_array_free(out, FALSE);
}
