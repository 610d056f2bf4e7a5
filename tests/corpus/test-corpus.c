/* The corpus: QEMU command lines libvirt generates (tests/data/libvirt,
 * about 700, x86), each planned through the library as a launch would, in
 * every mode, on this host and on the recorded multi-node hosts. Each
 * result must be one of:
 *   - a plan whose vCPUs (boot and max), guest nodes and memory are what the
 *     line asks (read from it here, independently of qemu-pin's parser), and
 *     whose rewritten command line can be made;
 *   - in mode none, QEMU run as it is (never a refusal);
 *   - a one-line refusal that the VM does not fit (memory, or CPUs), or one
 *     QEMU 7.2 gives too (a row of tests/common/qemu-refusals.c).
 * The counts per mode, host and outcome are printed. The ledger is empty:
 * every plan is the first on its host. */
#include <glib/gstdio.h>
#include <string.h>

#include "launcher/launch.h"
#include "launcher/options.h"
#include "launcher/qemu-args.h"
#include "tests/common/qemu-refusals.h"
#include "topology/host.h"

/* ---- The lines ------------------------------------------------------------
 */

/* What a line asks, read with the few forms libvirt writes: -smp N,... with
 * maxcpus=, -m N (MiB) or -m size=Nk,..., -numa node. */
typedef struct {
  guint vcpus, maxcpus;
  guint64 mem_mib;
  guint nodes;
} Ask;

typedef struct {
  char *name;
  char **argv; /* QEMU's arguments, without the environment and binary */
  guint argc;
  Ask ask;
} Line;

static guint64
size_mib(const char *text, guint64 default_unit)
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
  guint64 bytes = v * unit;
  return bytes / (1024 * 1024) + (bytes % (1024 * 1024) != 0);
}

static Ask
read_ask(char **argv)
{
  Ask a = {1, 1, 128, 0};
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
  return a;
}

/* A .args file: "VAR=value \" lines, the binary, then one argument per line
 * with shell quoting. */
static gboolean
read_line(const char *path, Line *l)
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

/* The memory a plan claims, in MiB: ordinary memory per host node and
 * hugepages.
 *
 * This compares the guest's total with -m only. Once memory is modelled per
 * guest node and page size (pc-dimm, nvdimm, virtio-mem, memory backends of
 * each kind), the per-node comparison goes here: Ask gains the size and page
 * size of each -numa node's memdev (and the plugged devices' node=), and the
 * plan's claim_mem / claim_huge by host node are summed per guest node
 * through plan->mem[].host_nodes. */
static gboolean
check_memory(const Ask *ask, const QpPlan *plan, GString *why)
{
  guint64 mib = 0, huge_mib = 0, page_mib = 0;
  for (guint k = 0; k < plan->claim_mem->len; k++)
    mib += g_array_index(plan->claim_mem, QpNodeAmount, k).mib;
  for (guint k = 0; k < plan->claim_huge->len; k++) {
    const QpHugeClaim *h = &g_array_index(plan->claim_huge, QpHugeClaim, k);
    huge_mib += h->pages * h->page_kib / 1024;
    page_mib = MAX(page_mib, h->page_kib / 1024);
  }
  /* Hugepages are claimed in whole pages, on each node of the set. */
  guint64 got = mib + huge_mib;
  if (got >= ask->mem_mib &&
      got - ask->mem_mib <= page_mib * MAX(plan->claim_huge->len, 1))
    return TRUE;
  g_string_append_printf(why,
                         "claims %" G_GUINT64_FORMAT
                         " MiB, -m asks %" G_GUINT64_FORMAT " MiB; ",
                         got, ask->mem_mib);
  return FALSE;
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
  if (g_error_matches(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT))
    return strstr(error->message, " MiB") != NULL ? OUT_NOFIT_MEMORY
                                                  : OUT_NOFIT_CPUS;
  if (error->domain == QP_ARGS_ERROR && qp_qemu_refusal_find(error->message))
    return OUT_QEMU_REFUSES;
  g_string_append_printf(why, "a refusal QEMU 7.2 does not give: %s",
                         error->message);
  return OUT_BAD_REFUSAL;
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

static GArray *lines; /* of Line */

static void
test_corpus(void)
{
  g_assert_cmpuint(lines->len, >=, 700);
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

  for (guint h = 0; h < hosts->len; h++) {
    Host *host = hosts->pdata[h];
    g_free(host->name);
    qp_host_free(host->host);
    g_free(host);
  }
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  lines = g_array_new(FALSE, TRUE, sizeof(Line));
  g_autofree char *dir =
      g_build_filename(g_getenv("G_TEST_SRCDIR"), "data", "libvirt", NULL);
  g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
  g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
  const char *name;
  while (d != NULL && (name = g_dir_read_name(d)) != NULL)
    if (g_str_has_suffix(name, ".args"))
      g_ptr_array_add(names, g_strdup(name));
  g_ptr_array_sort(names, compare_names);
  for (guint i = 0; i < names->len; i++) {
    g_autofree char *path = g_build_filename(dir, names->pdata[i], NULL);
    Line l = {0};
    if (read_line(path, &l))
      g_array_append_val(lines, l);
    else
      g_error("%s: not a command line", path);
  }
  g_test_add_func("/corpus/libvirt", test_corpus);
  int rc = g_test_run();
  for (guint i = 0; i < lines->len; i++) {
    Line *l = &g_array_index(lines, Line, i);
    g_free(l->name);
    g_strfreev(l->argv);
  }
  g_array_unref(lines);
  return rc;
}
