/* The corpus: QEMU command lines orchestrators generate, each planned
 * through the library as a launch would, in every mode, on this host and on
 * the recorded multi-node hosts: libvirt 9.0's (tests/data/libvirt, about
 * 700, x86) and 11.3's (tests/data/libvirt-11.3, about 800), and Proxmox
 * VE's (tests/data/proxmox/cfg2cmd, about 90: vNUMA, hugepages, memory
 * hotplug with pc-dimms, its own -id option). Each
 * result must be one of:
 *   - a plan whose vCPUs (boot and max), guest nodes and memory (per page
 *     size and per guest node) are what the line asks (read from it here,
 *     independently of qemu-pin's parser), and whose rewritten command line
 *     can be made;
 *   - in mode none, QEMU run as it is (never a refusal), by the front too;
 *   - a one-line refusal that the VM does not fit (memory, or CPUs in an
 *     explicit mode: auto never refuses for CPUs), or one QEMU 7.2 gives
 *     too (a row of tests/common/qemu-refusals.c).
 * The counts per mode, host and outcome are printed. The ledger is empty:
 * every plan is the first on its host. */
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <string.h>
#include <sys/stat.h>

#include "launcher/front/front.h"
#include "launcher/launch.h"
#include "launcher/options.h"
#include "launcher/qemu/args.h"
#include "launcher/qemu/rewrite.h"
#include "launcher/qemu/memory.h"
#include "tests/common/qemu-refusals.h"
#include "topology/host/host.h"

/* ---- The lines ------------------------------------------------------------
 */

/* A memory backend of a line. */
typedef struct {
  char *id;
  guint64 bytes;
  guint64 page_kib; /* 0: ordinary memory, else the hugepage size */
  gboolean ram;     /* host RAM: not SGX EPC, not a character device (DAX) */
  gboolean taken;   /* takes its memory at start even when nothing uses it */
  gboolean used;
} Backend;

/* A piece of the guest's memory the line asks for. */
typedef struct {
  int gnode; /* -1: the guest without -numa; ANY_NODE: split by QEMU */
  guint64 page_kib;
  guint64 mib;
} Piece;

#define ANY_NODE G_MININT

/* What a line asks, read with the few forms libvirt writes: -smp N,... with
 * maxcpus=, -m N (MiB) or -m size=Nk,..., -numa node, and every piece of
 * memory as QEMU 7.2 allocates it: the RAM (of -machine memory-backend=, of
 * each -numa node's memdev= or mem=, or QEMU's own), the memory devices
 * (pc-dimm, nvdimm, virtio-pmem-pci: their backend; virtio-mem-pci: its
 * requested-size) on their node= (0 when not given), and the backends no one
 * uses, which take memory at start when they preallocate or reserve
 * hugepages. */
typedef struct {
  guint vcpus, maxcpus;
  guint64 mem_mib;
  guint nodes;
  GArray *pieces; /* of Piece */
} Ask;

typedef struct {
  char *name;
  char **argv; /* QEMU's arguments, without the environment and binary */
  guint argc;
  Ask ask;
} Line;

static guint64
size_bytes(const char *text, guint64 default_unit)
{
  char *end;
  guint64 v = g_ascii_strtoull(text, &end, 10);
  guint64 unit = default_unit;
  switch (g_ascii_tolower(*end)) {
  case 'k':
    unit = 1024;
    break;
  case 'm':
    unit = 1024 * 1024;
    break;
  case 'g':
    unit = 1024 * 1024 * 1024;
    break;
  }
  return v * unit;
}

static guint64
mib_up(guint64 bytes)
{
  return bytes / (1024 * 1024) + (bytes % (1024 * 1024) != 0);
}

static guint64
size_mib(const char *text, guint64 default_unit)
{
  return mib_up(size_bytes(text, default_unit));
}

/* An option value as a table of strings: a JSON object's members, or
 * key=value pairs (a first field without '=' under IMPLIED). */
static GHashTable *
read_value(const char *text, const char *implied)
{
  GHashTable *t =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  if (text[0] == '{') {
    g_autoptr(JsonParser) parser = json_parser_new();
    if (!json_parser_load_from_data(parser, text, -1, NULL))
      return t;
    JsonObject *obj = json_node_get_object(json_parser_get_root(parser));
    g_autoptr(GList) members = json_object_get_members(obj);
    for (GList *m = members; m != NULL; m = m->next) {
      JsonNode *n = json_object_get_member(obj, m->data);
      if (!JSON_NODE_HOLDS_VALUE(n))
        continue;
      char *v;
      if (json_node_get_value_type(n) == G_TYPE_STRING)
        v = g_strdup(json_node_get_string(n));
      else if (json_node_get_value_type(n) == G_TYPE_BOOLEAN)
        v = g_strdup(json_node_get_boolean(n) ? "on" : "off");
      else
        v = g_strdup_printf("%" G_GINT64_FORMAT, json_node_get_int(n));
      g_hash_table_insert(t, g_strdup(m->data), v);
    }
    return t;
  }
  g_auto(GStrv) f = g_strsplit(text, ",", -1);
  for (guint k = 0; f[k] != NULL; k++) {
    const char *eq = strchr(f[k], '=');
    if (eq != NULL)
      g_hash_table_insert(t, g_strndup(f[k], eq - f[k]), g_strdup(eq + 1));
    else if (k == 0)
      g_hash_table_insert(t, g_strdup(implied), g_strdup(f[k]));
  }
  return t;
}

static gboolean
is_on(GHashTable *t, const char *key)
{
  const char *v = g_hash_table_lookup(t, key);
  return v != NULL && (strcmp(v, "on") == 0 || strcmp(v, "true") == 0 ||
                       strcmp(v, "yes") == 0);
}

static gboolean
is_off(GHashTable *t, const char *key)
{
  const char *v = g_hash_table_lookup(t, key);
  return v != NULL && (strcmp(v, "off") == 0 || strcmp(v, "false") == 0 ||
                       strcmp(v, "no") == 0);
}

/* The kernel's default hugepage size, for hugetlb=on without a size. */
static guint64
default_hugepage_kib(void)
{
  g_autofree char *text = NULL;
  guint64 kib = 2048;
  const char *p;
  if (g_file_get_contents("/proc/meminfo", &text, NULL, NULL) &&
      (p = strstr(text, "Hugepagesize:")) != NULL)
    kib = g_ascii_strtoull(p + strlen("Hugepagesize:"), NULL, 10);
  return kib;
}

static Backend *
read_backend(const char *text)
{
  g_autoptr(GHashTable) t = read_value(text, "qom-type");
  const char *type = g_hash_table_lookup(t, "qom-type");
  if (type == NULL || !g_str_has_prefix(type, "memory-backend-"))
    return NULL;
  Backend *b = g_new0(Backend, 1);
  b->id = g_strdup(g_hash_table_lookup(t, "id"));
  const char *size = g_hash_table_lookup(t, "size");
  const char *path = g_hash_table_lookup(t, "mem-path");
  b->bytes = size != NULL ? size_bytes(size, 1) : 0;
  b->ram = strcmp(type, "memory-backend-epc") != 0;
  if (strcmp(type, "memory-backend-memfd") == 0 && is_on(t, "hugetlb")) {
    const char *hs = g_hash_table_lookup(t, "hugetlbsize");
    b->page_kib =
        hs != NULL ? size_bytes(hs, 1) / 1024 : default_hugepage_kib();
  } else if (strcmp(type, "memory-backend-file") == 0 && path != NULL) {
    /* The page size of the filesystem the file is (or will be) on. */
    b->page_kib = qp_hugetlbfs_page_kib(path);
    struct stat st;
    if (stat(path, &st) == 0 && S_ISCHR(st.st_mode))
      b->ram = FALSE;
    /* a file mapped read-only: its page cache, shared, never dirtied */
    if (is_on(t, "readonly") && b->page_kib == 0)
      b->ram = FALSE;
    if (b->bytes == 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode))
      b->bytes = (guint64)st.st_size;
  }
  b->taken =
      is_on(t, "prealloc") || (b->page_kib != 0 && !is_off(t, "reserve"));
  return b;
}

static void
backend_free(gpointer p)
{
  Backend *b = p;
  g_free(b->id);
  g_free(b);
}

static Backend *
backend_named(GPtrArray *backends, const char *id)
{
  for (guint i = 0; id != NULL && i < backends->len; i++) {
    Backend *b = g_ptr_array_index(backends, i);
    if (b->id != NULL && strcmp(b->id, id) == 0)
      return b;
  }
  return NULL;
}

static void
add_piece(Ask *a, int gnode, guint64 page_kib, guint64 mib)
{
  Piece p = {gnode, page_kib, mib};
  g_array_append_val(a->pieces, p);
}

/* The memory pieces of ARGV into A (its -m already read). */
static void
read_memory(char **argv, Ask *a)
{
  g_autoptr(GPtrArray) backends = g_ptr_array_new_with_free_func(backend_free);
  g_autoptr(GPtrArray) numa = g_ptr_array_new();
  g_autoptr(GPtrArray) devices = g_ptr_array_new();
  const char *machine_memdev_text = NULL, *mem_path = NULL;
  gboolean has_m = FALSE;
  for (guint i = 0; argv[i] != NULL && argv[i + 1] != NULL; i++) {
    const char *v = argv[i + 1];
    if (strcmp(argv[i], "-object") == 0) {
      Backend *b = read_backend(v);
      if (b != NULL)
        g_ptr_array_add(backends, b);
    } else if (strcmp(argv[i], "-numa") == 0 && g_str_has_prefix(v, "node")) {
      g_ptr_array_add(numa, (gpointer)v);
    } else if (strcmp(argv[i], "-device") == 0) {
      g_ptr_array_add(devices, (gpointer)v);
    } else if (strcmp(argv[i], "-machine") == 0) {
      machine_memdev_text = v;
    } else if (strcmp(argv[i], "-mem-path") == 0) {
      mem_path = v;
    } else if (strcmp(argv[i], "-m") == 0) {
      has_m = TRUE;
    }
  }
  guint64 path_page = mem_path != NULL ? qp_hugetlbfs_page_kib(mem_path) : 0;

  /* The RAM. */
  if (numa->len == 0) {
    g_autoptr(GHashTable) m = machine_memdev_text != NULL
                                  ? read_value(machine_memdev_text, "type")
                                  : NULL;
    Backend *b =
        m != NULL
            ? backend_named(backends, g_hash_table_lookup(m, "memory-backend"))
            : NULL;
    if (b != NULL) {
      b->used = TRUE;
      if (!has_m)
        a->mem_mib = mib_up(b->bytes);
    }
    add_piece(a, -1, b != NULL ? b->page_kib : path_page, a->mem_mib);
  } else {
    gboolean any_given = FALSE;
    for (guint n = 0; n < numa->len; n++) {
      g_autoptr(GHashTable) t = read_value(numa->pdata[n], "type");
      const char *id = g_hash_table_lookup(t, "nodeid");
      int gnode = id != NULL ? (int)g_ascii_strtoull(id, NULL, 10) : (int)n;
      Backend *b = backend_named(backends, g_hash_table_lookup(t, "memdev"));
      const char *mem = g_hash_table_lookup(t, "mem");
      if (b != NULL) {
        b->used = TRUE;
        add_piece(a, gnode, b->page_kib, mib_up(b->bytes));
        any_given = TRUE;
      } else if (mem != NULL) {
        add_piece(a, gnode, path_page, size_mib(mem, 1024 * 1024));
        any_given = TRUE;
      }
    }
    /* No node with memory: QEMU splits -m over the nodes itself. */
    if (!any_given)
      add_piece(a, ANY_NODE, path_page, a->mem_mib);
  }

  /* Memory devices, and other devices' backends (not the guest's RAM). */
  static const char *const kinds[] = {"pc-dimm", "nvdimm", "virtio-mem-pci",
                                      "virtio-pmem-pci", NULL};
  for (guint d = 0; d < devices->len; d++) {
    g_autoptr(GHashTable) t = read_value(devices->pdata[d], "driver");
    const char *driver = g_hash_table_lookup(t, "driver");
    Backend *b = backend_named(backends, g_hash_table_lookup(t, "memdev"));
    if (b == NULL || b->used)
      continue;
    b->used = TRUE;
    if (driver == NULL || !g_strv_contains(kinds, driver) || !b->ram)
      continue;
    guint64 bytes = b->bytes;
    const char *req = g_hash_table_lookup(t, "requested-size");
    if (strcmp(driver, "virtio-mem-pci") == 0)
      bytes = MIN(bytes, req != NULL ? size_bytes(req, 1) : 0);
    const char *node = g_hash_table_lookup(t, "node");
    int gnode = numa->len == 0 ? -1
                : node         ? (int)g_ascii_strtoull(node, NULL, 10)
                               : 0;
    add_piece(a, gnode, b->page_kib, mib_up(bytes));
  }

  /* Backends no one uses, on guest node 0 (or the guest). */
  for (guint i = 0; i < backends->len; i++) {
    Backend *b = g_ptr_array_index(backends, i);
    if (!b->used && b->ram)
      add_piece(a, numa->len == 0 ? -1 : 0, b->page_kib,
                b->taken ? mib_up(b->bytes) : 0);
  }
}

static Ask
read_ask(char **argv)
{
  Ask a = {1, 1, 128, 0, g_array_new(FALSE, FALSE, sizeof(Piece))};
  for (guint i = 0; argv[i] != NULL && argv[i + 1] != NULL; i++) {
    const char *v = argv[i + 1];
    if (strcmp(argv[i], "-smp") == 0) {
      g_auto(GStrv) f = g_strsplit(v, ",", -1);
      guint64 cpus = 0, max = 0, product = 1;
      for (guint k = 0; f[k] != NULL; k++) {
        const char *eq = strchr(f[k], '=');
        if (eq == NULL && k == 0)
          cpus = g_ascii_strtoull(f[k], NULL, 10);
        else if (g_str_has_prefix(f[k], "cpus="))
          cpus = g_ascii_strtoull(eq + 1, NULL, 10);
        else if (g_str_has_prefix(f[k], "maxcpus="))
          max = g_ascii_strtoull(eq + 1, NULL, 10);
        else if (eq != NULL)
          product *= g_ascii_strtoull(eq + 1, NULL, 10);
      }
      max = max ? max : cpus ? cpus : product;
      a.vcpus = (guint)(cpus ? cpus : max);
      a.maxcpus = (guint)max;
    } else if (strcmp(argv[i], "-m") == 0) {
      a.mem_mib = g_str_has_prefix(v, "size=") ? size_mib(v + 5, 1024 * 1024)
                                               : size_mib(v, 1024 * 1024);
    } else if (strcmp(argv[i], "-numa") == 0 && g_str_has_prefix(v, "node")) {
      a.nodes++;
    }
  }
  read_memory(argv, &a);
  return a;
}

/* A -readconfig file the line names that this host does not have (Proxmox
 * VE's /usr/share/qemu-server/pve-q35-4.0.cfg) is read from the copy of it
 * in DIR, so that what it holds is planned too. */
static void
resolve_readconfig(char **argv, const char *dir)
{
  for (guint i = 0; argv[i] != NULL && argv[i + 1] != NULL; i++) {
    if (strcmp(argv[i], "-readconfig") != 0 ||
        g_file_test(argv[i + 1], G_FILE_TEST_EXISTS))
      continue;
    g_autofree char *base = g_path_get_basename(argv[i + 1]);
    char *copy = g_build_filename(dir, base, NULL);
    if (!g_file_test(copy, G_FILE_TEST_IS_REGULAR))
      g_error("-readconfig %s: no copy of it in %s", argv[i + 1], dir);
    g_free(argv[i + 1]);
    argv[i + 1] = copy;
  }
}

/* A command line as libvirt's tests keep it (.args: "VAR=value \" lines,
 * the binary, then one argument per line with shell quoting) or Proxmox
 * VE's (.cmd: the binary, then arguments with shell quoting on lines joined
 * by "\"); -readconfig files from CONFIG_DIR when this host lacks them. */
static gboolean
read_line(const char *path, const char *config_dir, Line *l)
{
  g_autofree char *text = NULL;
  if (!g_file_get_contents(path, &text, NULL, NULL))
    return FALSE;
  g_auto(GStrv) parts = g_strsplit(text, "\\\n", -1);
  g_autofree char *joined = g_strjoinv(" ", parts);
  g_auto(GStrv) words = NULL;
  if (!g_shell_parse_argv(joined, NULL, &words, NULL))
    return FALSE;
  guint first = 0;
  while (words[first] != NULL && words[first][0] != '/')
    first++;
  if (words[first] == NULL)
    return FALSE;
  l->name = g_path_get_basename(path);
  l->argv = g_strdupv(words + first + 1);
  resolve_readconfig(l->argv, config_dir);
  l->argc = g_strv_length(l->argv);
  l->ask = read_ask(l->argv);
  return TRUE;
}

/* ---- Outcomes -------------------------------------------------------------
 */

typedef enum {
  OUT_PLAN,         /* planned as asked */
  OUT_EXEC,         /* mode none: QEMU runs as it is */
  OUT_NOFIT_MEMORY, /* does not fit: memory */
  OUT_NOFIT_CPUS,   /* does not fit: CPUs */
  OUT_QEMU_REFUSES, /* a refusal QEMU 7.2 gives too */
  OUT_WRONG,        /* failures from here on */
  OUT_BAD_REFUSAL,
  N_OUT
} Outcome;

static const char *const outcome_names[N_OUT] = {
    "plan",         "exec",       "nofit-memory", "nofit-cpus",
    "qemu-refuses", "WRONG-PLAN", "BAD-REFUSAL",
};

static const QpMode modes[] = {QP_MODE_AUTO, QP_MODE_BALANCED, QP_MODE_NUMA,
                               QP_MODE_ONE_TO_ONE, QP_MODE_NONE};

/* MiB asked and claimed for one page size or one guest node; SLACK is
 * what rounding to whole hugepages on each node of a claim may add. */
typedef struct {
  guint64 asked, claimed, slack;
} Tally;

static Tally *
tally(GHashTable *t, gint64 key)
{
  Tally *x = g_hash_table_lookup(t, &key);
  if (x == NULL) {
    gint64 *k = g_new(gint64, 1);
    *k = key;
    x = g_new0(Tally, 1);
    g_hash_table_insert(t, k, x);
  }
  return x;
}

/* Compares the memory the plan claims, piece by piece, with what the line
 * asks: per page size (ordinary memory in MiB, hugepages in whole pages on
 * each host node of a piece) and per guest node (its RAM, memory devices
 * and the backends no one uses, which QEMU binds with node 0). */
static gboolean
check_memory(const Ask *ask, const QpPlan *plan, GString *why)
{
  g_autoptr(GHashTable) by_page =
      g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free);
  g_autoptr(GHashTable) by_node =
      g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free);
  /* RAM QEMU splits over the guest nodes itself is counted per page size
   * only. */
  gboolean ram_split = FALSE;
  for (guint k = 0; k < ask->pieces->len; k++) {
    const Piece *p = &g_array_index(ask->pieces, Piece, k);
    tally(by_page, (gint64)p->page_kib)->asked += p->mib;
    if (p->gnode != ANY_NODE)
      tally(by_node, p->gnode)->asked += p->mib;
    else
      ram_split = TRUE;
  }
  for (guint m = 0; m < plan->n_mem; m++) {
    const QpPlanMem *pm = &plan->mem[m];
    guint64 mib = 0;
    for (guint c = 0; pm->claim != NULL && c < pm->claim->len; c++) {
      guint64 units = g_array_index(pm->claim, QpNodeUnits, c).units;
      mib += pm->page_kib == 0 ? units : units * pm->page_kib / 1024;
    }
    guint64 slack =
        pm->claim != NULL ? pm->page_kib / 1024 * pm->claim->len : 0;
    Tally *t = tally(by_page, (gint64)pm->page_kib);
    t->claimed += mib;
    t->slack += slack;
    if (!(ram_split && pm->kind == QP_MEM_RAM)) {
      t = tally(by_node, pm->gnode);
      t->claimed += mib;
      t->slack += slack;
    }
  }
  gboolean ok = TRUE;
  GHashTable *tables[] = {by_page, by_node};
  const char *what[] = {"page size (KiB)", "guest node"};
  for (guint w = 0; w < 2; w++) {
    GHashTableIter it;
    gpointer key, value;
    g_hash_table_iter_init(&it, tables[w]);
    while (g_hash_table_iter_next(&it, &key, &value)) {
      const Tally *t = value;
      if (t->claimed >= t->asked && t->claimed - t->asked <= t->slack)
        continue;
      g_string_append_printf(why,
                             "%s %" G_GINT64_FORMAT
                             ": claims %" G_GUINT64_FORMAT
                             " MiB, the line asks %" G_GUINT64_FORMAT " MiB; ",
                             what[w], *(gint64 *)key, t->claimed, t->asked);
      ok = FALSE;
    }
  }
  return ok;
}

/* A plan as the line asks: every vCPU (boot and max), its guest nodes (on
 * the memory bound per guest node, or the request's), its memory. */
static gboolean
check_plan(const Line *l, const QpQemuArgs *args, const QpPlan *plan,
           GString *why)
{
  const Ask *ask = &l->ask;
  gboolean ok = TRUE;
  if (plan->n_vcpus != ask->maxcpus || plan->n_boot_vcpus != ask->vcpus ||
      args->req->vcpus != ask->vcpus) {
    g_string_append_printf(why,
                           "vCPUs %u of %u planned, the line asks %u of "
                           "%u; ",
                           plan->n_boot_vcpus, plan->n_vcpus, ask->vcpus,
                           ask->maxcpus);
    ok = FALSE;
  }
  for (guint v = 0; v < plan->n_vcpus; v++)
    if (plan->vcpu_cpus[v] == NULL || hwloc_bitmap_iszero(plan->vcpu_cpus[v])) {
      g_string_append_printf(why, "vCPU %u has no CPU; ", v);
      ok = FALSE;
      break;
    }
  guint nodes = args->req->n_gnodes;
  gboolean bound = FALSE;
  g_autoptr(GHashTable) gnodes = g_hash_table_new(NULL, NULL);
  for (guint k = 0; k < plan->n_mem; k++)
    if (plan->mem[k].gnode >= 0) {
      bound = TRUE;
      g_hash_table_add(gnodes, GINT_TO_POINTER(plan->mem[k].gnode + 1));
    }
  if (bound)
    nodes = g_hash_table_size(gnodes);
  if (nodes != ask->nodes) {
    g_string_append_printf(why, "%u guest nodes planned, the line has %u; ",
                           nodes, ask->nodes);
    ok = FALSE;
  }
  ok &= check_memory(ask, plan, why);
  g_auto(GStrv) out = NULL;
  g_autoptr(GError) error = NULL;
  out = qp_qemu_args_rewrite(args, "qemu-system-x86_64", plan, 3, &error);
  if (out == NULL) {
    g_string_append_printf(why, "no rewritten command line: %s; ",
                           error->message);
    ok = FALSE;
  }
  return ok;
}

static Outcome
classify_refusal(const GError *error, GString *why)
{
  if (strchr(error->message, '\n') != NULL) {
    g_string_append_printf(why, "more than one line: %s", error->message);
    return OUT_BAD_REFUSAL;
  }
  /* A refusal for CPUs counts them (CPUs, cores); every other one is for
   * memory: too little uncommitted, or host-nodes the caller bound it to
   * that this host does not have (QEMU's mbind() fails there too). */
  if (g_error_matches(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT))
    return strstr(error->message, " CPUs") != NULL ||
                   strstr(error->message, " cores") != NULL
               ? OUT_NOFIT_CPUS
               : OUT_NOFIT_MEMORY;
  if (error->domain == QP_ARGS_ERROR && qp_qemu_refusal_find(error->message))
    return OUT_QEMU_REFUSES;
  g_string_append_printf(why, "a refusal QEMU 7.2 does not give: %s",
                         error->message);
  return OUT_BAD_REFUSAL;
}

/* Whether the front runs L straight under --mode=none, with QEMU's
 * arguments untouched after the caller's argv[0]. */
static gboolean
front_runs_straight(const Line *l)
{
  g_autoptr(GPtrArray) argv = g_ptr_array_new();
  g_ptr_array_add(argv, "qemu-pin");
  g_ptr_array_add(argv, "--mode=none");
  g_ptr_array_add(argv, "--");
  g_ptr_array_add(argv, "/usr/bin/qemu-system-x86_64");
  for (guint i = 0; i < l->argc; i++)
    g_ptr_array_add(argv, l->argv[i]);
  g_ptr_array_add(argv, NULL);
  char *envp[] = {NULL};
  QpFrontExec e;
  if (!qp_front_decide((int)argv->len - 1, (char **)argv->pdata, envp, &e))
    return FALSE;
  gboolean same = g_strcmp0(e.argv[0], "/usr/bin/qemu-system-x86_64") == 0;
  for (guint i = 0; same && i <= l->argc; i++)
    same = g_strcmp0(e.argv[i + 1], l->argv[i]) == 0;
  qp_front_exec_clear(&e);
  return same;
}

/* One line in one mode on one host, the way qemu-pin launches it: read the
 * command line (nothing in mode none), plan, rewrite. */
static Outcome
run_one(const Line *l, QpMode mode, const QpHost *host, const QpClaims *claims,
        GString *why)
{
  QpOptions opts;
  qp_options_init(&opts);
  opts.placement.mode = mode;
  g_autoptr(GError) error = NULL;
  g_autoptr(QpQemuArgs) args = qp_launch_read(&opts, l->argc, l->argv, &error);
  Outcome out;
  if (args == NULL && error == NULL) {
    out = OUT_EXEC;
  } else if (args == NULL) {
    out = classify_refusal(error, why);
  } else {
    g_autoptr(QpPlan) plan =
        qp_plan_compute(host, claims, args->req, &opts.placement, &error);
    if (plan == NULL)
      out = classify_refusal(error, why);
    else
      out = check_plan(l, args, plan, why) ? OUT_PLAN : OUT_WRONG;
  }
  if (mode == QP_MODE_NONE && out == OUT_EXEC && !front_runs_straight(l)) {
    g_string_append(why, "the front did not run QEMU as it is; ");
    out = OUT_WRONG;
  }
  if (mode == QP_MODE_NONE && out != OUT_EXEC) {
    g_string_append(why, "mode none did not run QEMU as it is; ");
    out = OUT_WRONG;
  }
  qp_options_clear(&opts);
  return out;
}

/* ---- The test -------------------------------------------------------------
 */

/* g_ptr_array_sort() passes pointers to the elements. */
static gint
compare_names(gconstpointer a, gconstpointer b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

typedef struct {
  char *name;
  QpHost *host;
} Host;

/* The command lines of one orchestrator. */
typedef struct {
  const char *name;       /* the test's: /corpus/NAME */
  const char *dir;        /* its files, under tests/ */
  const char *suffix;     /* of a file that holds a line */
  const char *config_dir; /* -readconfig files this host lacks, under tests/ */
  guint at_least;         /* lines it holds: a folder read wrong fails */
  GArray *lines;          /* of Line */
} Corpus;

static Corpus corpora[] = {
    {"libvirt", "data/libvirt", ".args", "data/libvirt", 700, NULL},
    {"proxmox", "data/proxmox/cfg2cmd", ".cmd", "data/proxmox", 90, NULL},
    {"libvirt-11.3", "data/libvirt-11.3", ".args", "data/libvirt-11.3", 800,
     NULL},
};

static void
test_corpus(gconstpointer data)
{
  const Corpus *corpus = data;
  const GArray *lines = corpus->lines;
  g_assert_cmpuint(lines->len, >=, corpus->at_least);
  g_autoptr(GPtrArray) hosts = g_ptr_array_new();
  g_autoptr(GError) error = NULL;
  Host live = {g_strdup("this-host"), qp_host_load(NULL, &error)};
  g_assert_no_error(error);
  g_ptr_array_add(hosts, g_memdup2(&live, sizeof(live)));
  const char *dir = g_getenv("QP_TOPOLOGIES");
  g_autoptr(GDir) d = g_dir_open(dir, 0, &error);
  g_assert_no_error(error);
  g_autoptr(GPtrArray) xmls = g_ptr_array_new_with_free_func(g_free);
  const char *name;
  while ((name = g_dir_read_name(d)) != NULL)
    if (g_str_has_suffix(name, ".xml"))
      g_ptr_array_add(xmls, g_strdup(name));
  g_ptr_array_sort(xmls, compare_names);
  for (guint i = 0; i < xmls->len; i++) {
    g_autofree char *path = g_build_filename(dir, xmls->pdata[i], NULL);
    QpHost *h = qp_host_load(path, &error);
    g_assert_no_error(error);
    if (h->n_nodes < 2) {
      qp_host_free(h);
      continue;
    }
    Host rec = {g_strndup(xmls->pdata[i], strlen(xmls->pdata[i]) - 4), h};
    g_ptr_array_add(hosts, g_memdup2(&rec, sizeof(rec)));
  }
  g_assert_cmpuint(hosts->len, >=, 4);

  g_autoptr(QpClaims) claims = qp_claims_new();
  guint n_modes = G_N_ELEMENTS(modes);
  g_autofree guint *count = g_new0(guint, n_modes * hosts->len * N_OUT);
  g_autoptr(GPtrArray) failures = g_ptr_array_new_with_free_func(g_free);
  for (guint m = 0; m < n_modes; m++)
    for (guint h = 0; h < hosts->len; h++) {
      const Host *host = hosts->pdata[h];
      for (guint i = 0; i < lines->len; i++) {
        const Line *l = &g_array_index(lines, Line, i);
        g_autoptr(GString) why = g_string_new(NULL);
        Outcome out = run_one(l, modes[m], host->host, claims, why);
        count[(m * hosts->len + h) * N_OUT + out]++;
        if (out >= OUT_WRONG)
          g_ptr_array_add(failures,
                          g_strdup_printf("%s, mode %s, host %s: %s", l->name,
                                          qp_mode_name(modes[m]), host->name,
                                          why->str));
      }
    }

  g_test_message("%u command lines x %u modes x %u hosts", lines->len, n_modes,
                 hosts->len);
  g_autoptr(GString) head = g_string_new(NULL);
  g_string_append_printf(head, "%-11s %-15s", "mode", "host");
  for (guint o = 0; o < N_OUT; o++)
    g_string_append_printf(head, " %12s", outcome_names[o]);
  g_test_message("%s", head->str);
  for (guint m = 0; m < n_modes; m++)
    for (guint h = 0; h < hosts->len; h++) {
      g_autoptr(GString) row = g_string_new(NULL);
      g_string_append_printf(row, "%-11s %-15s", qp_mode_name(modes[m]),
                             ((const Host *)hosts->pdata[h])->name);
      for (guint o = 0; o < N_OUT; o++)
        g_string_append_printf(row, " %12u",
                               count[(m * hosts->len + h) * N_OUT + o]);
      g_test_message("%s", row->str);
    }
  for (guint i = 0; i < failures->len && i < 40; i++)
    g_test_message("%s", (const char *)failures->pdata[i]);
  g_assert_cmpuint(failures->len, ==, 0);
  /* Mode auto places best-effort what balanced or numa refuse for CPUs. */
  for (guint m = 0; m < n_modes; m++)
    for (guint h = 0; modes[m] == QP_MODE_AUTO && h < hosts->len; h++)
      g_assert_cmpuint(count[(m * hosts->len + h) * N_OUT + OUT_NOFIT_CPUS], ==,
                       0);

  for (guint h = 0; h < hosts->len; h++) {
    Host *host = hosts->pdata[h];
    g_free(host->name);
    qp_host_free(host->host);
    g_free(host);
  }
}

/* The lines of CORPUS, in the order of their files' names. */
static GArray *
read_corpus(const Corpus *corpus)
{
  GArray *lines = g_array_new(FALSE, TRUE, sizeof(Line));
  const char *src = g_getenv("G_TEST_SRCDIR");
  g_autofree char *dir = g_build_filename(src, corpus->dir, NULL);
  g_autofree char *config_dir = g_build_filename(src, corpus->config_dir, NULL);
  g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
  g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
  const char *name;
  while (d != NULL && (name = g_dir_read_name(d)) != NULL)
    if (g_str_has_suffix(name, corpus->suffix))
      g_ptr_array_add(names, g_strdup(name));
  g_ptr_array_sort(names, compare_names);
  for (guint i = 0; i < names->len; i++) {
    g_autofree char *path = g_build_filename(dir, names->pdata[i], NULL);
    Line l = {0};
    if (read_line(path, config_dir, &l))
      g_array_append_val(lines, l);
    else
      g_error("%s: not a command line", path);
  }
  return lines;
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  for (guint c = 0; c < G_N_ELEMENTS(corpora); c++) {
    corpora[c].lines = read_corpus(&corpora[c]);
    g_autofree char *path = g_strdup_printf("/corpus/%s", corpora[c].name);
    g_test_add_data_func(path, &corpora[c], test_corpus);
  }
  int rc = g_test_run();
  for (guint c = 0; c < G_N_ELEMENTS(corpora); c++) {
    GArray *lines = corpora[c].lines;
    for (guint i = 0; i < lines->len; i++) {
      Line *l = &g_array_index(lines, Line, i);
      g_free(l->name);
      g_strfreev(l->argv);
      g_array_unref(l->ask.pieces);
    }
    g_array_unref(lines);
  }
  return rc;
}
