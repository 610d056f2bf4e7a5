/* plan-bench: how long planning and claiming take as hosts and ledgers grow.
 *
 * For synthetic hosts of 4 to 64 nodes (64 to 1024 CPUs) and ledgers of 0 to
 * 1,000 live records it reports the median of repeated runs of:
 *   plan        qp_plan_compute() with the claims built in memory;
 *   plan+claim  open + pre-scan + lock + read + plan + write + unlock of a
 *               real ledger
 *               in a temporary directory holding N live records (they name
 *               this process's own PID and start time, so none is pruned);
 *   lock held   lock to unlock inside plan+claim: how long other launchers
 *               wait behind this one.
 * The request is the common case: 8 vCPUs, 8 GiB, no vNUMA, in the mode
 * given by --mode (balanced by default).
 *
 * With --fill DIR --records N it only fills the ledger DIR with N records
 * naming the live process --pid (default: its parent), for benchmarks of
 * the qemu-pin binary against a full ledger.
 *
 * With --rebalance N it times qp_rebalance_compute() once (CPU time) for N
 * live balanced VMs of 20 + 20 MiB, each spanning the two nodes of a 2 x 64
 * core host, and prints the moves' count, MiB and a checksum of their order
 * (a change that should plan the same moves must print the same line).
 *
 * Usage: plan-bench [--markdown] [--quick] [--dir DIR] [--mode MODE]
 * DIR holds the temporary ledgers (default: /dev/shm when it is a tmpfs, as
 * /run is on most hosts, else the temporary directory). */
#include <errno.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "topology/host/host.h"
#include "topology/ledger/store.h"
#include "topology/plan/plan.h"
#include "topology/plan/claim.h"
#include "topology/plan/rebalance.h"

#define TMPFS_MAGIC_VALUE 0x01021994

typedef struct {
  guint nodes;
  const char *description;
} HostShape;

/* Eight cores with two threads per node; 64 GiB per node. */
static const HostShape shapes[] = {
    {4, "pack:1 numa:4(memory=64GiB) core:8 pu:2"},
    {8, "pack:2 numa:4(memory=64GiB) core:8 pu:2"},
    {16, "pack:4 numa:4(memory=64GiB) core:8 pu:2"},
    {32, "pack:4 numa:8(memory=64GiB) core:8 pu:2"},
    {64, "pack:8 numa:8(memory=64GiB) core:8 pu:2"},
};

static const guint ledger_sizes[] = {0, 10, 100, 1000};

static gboolean opt_markdown;
static gboolean opt_quick;
static char *opt_dir;
static char *opt_mode = NULL;
static char *opt_fill;
static int opt_records;
static int opt_pid;
static int opt_rebalance;

static const GOptionEntry entries[] = {
    {"markdown", 0, 0, G_OPTION_ARG_NONE, &opt_markdown,
     "Print Markdown tables", NULL},
    {"quick", 0, 0, G_OPTION_ARG_NONE, &opt_quick,
     "Fewer repetitions (for a smoke run)", NULL},
    {"dir", 0, 0, G_OPTION_ARG_FILENAME, &opt_dir,
     "Directory for the temporary ledgers", "DIR"},
    {"mode", 0, 0, G_OPTION_ARG_STRING, &opt_mode,
     "Placement mode of the request (balanced, one-to-one, ...)", "MODE"},
    {"fill", 0, 0, G_OPTION_ARG_FILENAME, &opt_fill,
     "Only fill the ledger DIR with --records live records", "DIR"},
    {"records", 0, 0, G_OPTION_ARG_INT, &opt_records, "Records for --fill",
     "N"},
    {"pid", 0, 0, G_OPTION_ARG_INT, &opt_pid,
     "The live process the --fill records name (default: the parent)", "PID"},
    {"rebalance", 0, 0, G_OPTION_ARG_INT, &opt_rebalance,
     "Only time one rebalance of N VMs spanning two nodes", "N"},
    {NULL},
};

static int
cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y ? 1 : 0;
}

static double
median(GArray *samples)
{
  if (samples->len == 0)
    return 0;
  qsort(samples->data, samples->len, sizeof(double), cmp_double);
  guint n = samples->len;
  double *v = (double *)(void *)samples->data;
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Repetitions: at least MIN_RUNS, then until BUDGET seconds are spent. */
static guint
min_runs(void)
{
  return opt_quick ? 3 : 15;
}

static double
budget_s(void)
{
  return opt_quick ? 0.02 : 0.4;
}

static guint
max_runs(void)
{
  return opt_quick ? 10 : 1001;
}

static double
now_ms(void)
{
  return (double)g_get_monotonic_time() / 1000.0;
}

/* CPU time of this process (user + system): unlike wall time it does not
 * grow while other processes hold the CPUs of a busy host. */
static double
cpu_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

/* SLIT: 10 local, 16 within a package, 32 across packages. */
static void
set_distances(QpHost *host)
{
  guint nn = host->n_nodes;
  g_autofree guint *m = g_new(guint, nn * nn);
  for (guint a = 0; a < nn; a++)
    for (guint b = 0; b < nn; b++) {
      int pa = -1, pb = -1;
      for (guint c = 0; c < host->n_cpus; c++) {
        if (pa < 0 && host->cpus[c].node == host->nodes[a].id)
          pa = host->cpus[c].package;
        if (pb < 0 && host->cpus[c].node == host->nodes[b].id)
          pb = host->cpus[c].package;
      }
      m[a * nn + b] = a == b ? 10 : pa == pb ? 16 : 32;
    }
  qp_host_set_distances(host, m);
}

/* Record I of a ledger: 48 MiB and 2 shared vCPUs on node I mod n (1,000
 * records hold 47 GiB of the smallest host's 256 GiB), live as this process. */
static QpClaim *
make_claim(const QpHost *host, guint i, int pid, guint64 start)
{
  QpClaim *c = qp_claim_new();
  c->id = g_strdup_printf("bench-%04u", i);
  c->name = g_strdup_printf("vm%u", i);
  c->qemu_pid = pid;
  c->qemu_start = start;
  c->keeper_pid = pid;
  c->mode = QP_MODE_BALANCED;
  int node = host->nodes[i % host->n_nodes].id;
  QpNodeAmount m = {node, opt_fill != NULL ? 1 : 48};
  g_array_append_val(c->mem, m);
  QpNodeLoad l = {node, 2};
  g_array_append_val(c->load, l);
  c->time = 1700000000;
  /* Half of it resident, as its keeper measured it; the in-memory claims'
   * QEMU resident set (a real ledger's reader takes it from /proc). */
  QpNodeAmount r = {node, MAX(m.mib / 2, 1)};
  g_array_append_val(c->resident, r);
  c->qemu_rss_mib = 1024;
  return c;
}

static QpRequest *
make_request(void)
{
  QpRequest *req = qp_request_new();
  req->vcpus = req->maxcpus = 8;
  req->cores = 8;
  req->mem_mib = 8192;
  return req;
}

typedef struct {
  double plan_ms, plan_cpu_ms;
  double claim_ms, claim_cpu_ms;
  double hold_ms;
  guint runs_plan, runs_claim;
} Cell;

static gboolean
bench_plan(const QpHost *host, guint n, const QpPlacementOptions *opts,
           Cell *cell, GError **error)
{
  g_autoptr(QpClaims) claims = qp_claims_new();
  for (guint i = 0; i < n; i++)
    g_ptr_array_add(claims->claims, make_claim(host, i, 1, 1));
  g_autoptr(QpRequest) req = make_request();
  g_autoptr(GArray) t = g_array_new(FALSE, FALSE, sizeof(double));
  g_autoptr(GArray) tc = g_array_new(FALSE, FALSE, sizeof(double));
  double start = now_ms();
  while (t->len < min_runs() ||
         (t->len < max_runs() && now_ms() - start < budget_s() * 1000)) {
    double c0 = cpu_ms(), t0 = now_ms();
    g_autoptr(QpPlan) plan = qp_plan_compute(host, claims, req, opts, error);
    double t1 = now_ms(), c1 = cpu_ms();
    if (plan == NULL)
      return FALSE;
    g_array_append_val(t, (double){t1 - t0});
    g_array_append_val(tc, (double){c1 - c0});
  }
  cell->runs_plan = t->len;
  cell->plan_ms = median(t);
  cell->plan_cpu_ms = median(tc);
  return TRUE;
}

static gboolean
remove_tree(const char *dir)
{
  g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
  if (d != NULL) {
    const char *name;
    while ((name = g_dir_read_name(d)) != NULL) {
      g_autofree char *p = g_build_filename(dir, name, NULL);
      g_unlink(p);
    }
  }
  return g_rmdir(dir) == 0;
}

/* Fills DIR with N live records. */
static gboolean
fill_ledger(const QpHost *host, guint n, const char *dir, int pid, guint64 st,
            GError **error)
{
  g_autoptr(QpLedger) setup = qp_ledger_open(dir, error);
  if (setup == NULL || !qp_ledger_lock(setup, error))
    return FALSE;
  for (guint i = 0; i < n; i++) {
    g_autoptr(QpClaim) c = make_claim(host, i, pid, st);
    if (!qp_ledger_write(setup, c, error))
      return FALSE;
  }
  qp_ledger_unlock(setup);
  return TRUE;
}

/* One launcher's critical path: open, lock, read, plan, write, unlock. The
 * record is taken back out afterwards (untimed) so every run sees N. */
static gboolean
claim_once(const QpHost *host, guint n, const QpPlacementOptions *opts,
           const QpRequest *req, const char *dir, int pid, guint64 st,
           double *total_ms, double *total_cpu_ms, double *hold_ms,
           GError **error)
{
  g_autofree char *id = qp_ledger_new_id();
  double c0 = cpu_ms(), t0 = now_ms();
  g_autoptr(QpLedger) l = qp_ledger_open(dir, error);
  if (l == NULL)
    return FALSE;
  qp_ledger_prescan(l, host);
  if (!qp_ledger_lock(l, error))
    return FALSE;
  double t1 = now_ms();
  g_autoptr(QpClaims) claims = qp_ledger_read(l, host, error);
  if (claims == NULL)
    return FALSE;
  if (claims->claims->len != n) {
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_LEDGER,
                "ledger %s holds %u live records, expected %u", dir,
                claims->claims->len, n);
    return FALSE;
  }
  g_autoptr(QpPlan) plan = qp_plan_compute(host, claims, req, opts, error);
  if (plan == NULL)
    return FALSE;
  g_autoptr(QpClaim) c = qp_claim_from_plan(plan, id, "bench");
  c->qemu_pid = pid;
  c->qemu_start = st;
  if (!qp_ledger_write(l, c, error))
    return FALSE;
  qp_ledger_unlock(l);
  double t2 = now_ms();
  qp_ledger_close(g_steal_pointer(&l));
  double t3 = now_ms(), c3 = cpu_ms();
  *total_ms = t3 - t0;
  *total_cpu_ms = c3 - c0;
  *hold_ms = t2 - t1;
  g_autoptr(QpLedger) r = qp_ledger_open(dir, error);
  return r != NULL && qp_ledger_remove(r, id, error);
}

static gboolean
claim_runs(const QpHost *host, guint n, const QpPlacementOptions *opts,
           const char *dir, Cell *cell, GError **error)
{
  int pid = getpid();
  guint64 st = qp_proc_start_time(pid);
  if (!fill_ledger(host, n, dir, pid, st, error))
    return FALSE;
  g_autoptr(QpRequest) req = make_request();
  g_autoptr(GArray) total = g_array_new(FALSE, FALSE, sizeof(double));
  g_autoptr(GArray) total_cpu = g_array_new(FALSE, FALSE, sizeof(double));
  g_autoptr(GArray) hold = g_array_new(FALSE, FALSE, sizeof(double));
  double start = now_ms();
  while (total->len < min_runs() ||
         (total->len < max_runs() && now_ms() - start < budget_s() * 1000)) {
    double t = 0, tc = 0, h = 0;
    if (!claim_once(host, n, opts, req, dir, pid, st, &t, &tc, &h, error))
      return FALSE;
    g_array_append_val(total, t);
    g_array_append_val(total_cpu, tc);
    g_array_append_val(hold, h);
  }
  cell->runs_claim = total->len;
  cell->claim_cpu_ms = median(total_cpu);
  cell->claim_ms = median(total);
  cell->hold_ms = median(hold);
  return TRUE;
}

static gboolean
bench_claim(const QpHost *host, guint n, const QpPlacementOptions *opts,
            const char *base, Cell *cell, GError **error)
{
  g_autofree char *tmpl = g_build_filename(base, "qp-bench-XXXXXX", NULL);
  if (g_mkdtemp_full(tmpl, 0700) == NULL) {
    g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno),
                "cannot create a temporary ledger in %s: %s", base,
                g_strerror(errno));
    return FALSE;
  }
  g_autofree char *dir = g_build_filename(tmpl, "ledger", NULL);
  gboolean ok = claim_runs(host, n, opts, dir, cell, error);
  remove_tree(dir);
  g_rmdir(tmpl);
  return ok;
}

/* --fill: N live records on one node of the live host. */
static int
fill_only(GError **error)
{
  int pid = opt_pid > 0 ? opt_pid : (int)getppid();
  guint64 st = qp_proc_start_time(pid);
  g_autoptr(QpHost) host =
      qp_host_load_synthetic("numa:1(memory=64GiB) core:1 pu:1", error);
  if (st == 0 || host == NULL ||
      !fill_ledger(host, (guint)MAX(opt_records, 0), opt_fill, pid, st,
                   error)) {
    g_printerr("plan-bench: --fill %s: %s\n", opt_fill,
               *error ? (*error)->message : "no such process");
    return 1;
  }
  return 0;
}

/* --rebalance N: one qp_rebalance_compute() of N spanning VMs. */
static int
rebalance_only(GError **error)
{
  g_autoptr(QpHost) host = qp_host_load_synthetic(
      "pack:2 numa:1(memory=512GiB) core:64 pu:2", error);
  if (host == NULL) {
    g_printerr("plan-bench: %s\n", (*error)->message);
    return 1;
  }
  guint n = (guint)MAX(opt_rebalance, 0);
  g_autoptr(QpClaims) claims = qp_claims_new();
  g_autofree QpRebalanceVm *vms = g_new0(QpRebalanceVm, MAX(n, 1));
  for (guint i = 0; i < n; i++) {
    QpClaim *c = make_claim(host, i, 1, 1);
    g_array_set_size(c->mem, 0);
    g_array_set_size(c->resident, 0);
    for (guint j = 0; j < 2; j++) {
      QpNodeAmount m = {host->nodes[j].id, 20 + (i % 7)};
      g_array_append_val(c->mem, m);
    }
    g_ptr_array_add(claims->claims, c);
    vms[i].id = c->id;
  }
  QpRebalanceOptions o = {0};
  double c0 = cpu_ms();
  g_autoptr(QpRebalance) r =
      qp_rebalance_compute(host, claims, vms, n, &o, error);
  double c1 = cpu_ms();
  if (r == NULL) {
    g_printerr("plan-bench: --rebalance: %s\n", (*error)->message);
    return 1;
  }
  guint32 sum = 0;
  for (guint i = 0; i < r->moves->len; i++) {
    const QpMove *m = r->moves->pdata[i];
    g_autofree char *to = qp_list_format(m->to);
    g_autofree char *line =
        g_strdup_printf("%s>%s:%" G_GUINT64_FORMAT ";", m->vm, to, m->mib);
    sum = sum * 31 + g_str_hash(line);
  }
  printf("%u VMs: %u moves, %" G_GUINT64_FORMAT
         " MiB, checksum %08x, %.1f ms CPU\n",
         n, r->moves->len, r->mib, sum, c1 - c0);
  return 0;
}

static char *
default_dir(void)
{
  struct statfs sf;
  if (statfs("/dev/shm", &sf) == 0 && sf.f_type == TMPFS_MAGIC_VALUE &&
      access("/dev/shm", W_OK) == 0)
    return g_strdup("/dev/shm");
  return g_strdup(g_get_tmp_dir());
}

static const char *
fs_name(const char *dir)
{
  struct statfs sf;
  if (statfs(dir, &sf) != 0)
    return "unknown";
  switch ((unsigned long)sf.f_type) {
  case TMPFS_MAGIC_VALUE:
    return "tmpfs";
  case 0xEF53:
    return "ext4";
  case 0x58465342:
    return "xfs";
  case 0x9123683E:
    return "btrfs";
  default:
    return "other";
  }
}

int
main(int argc, char **argv)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GOptionContext) octx = g_option_context_new("");
  g_option_context_set_summary(octx, "Plan and plan+claim time vs host size "
                                     "and ledger size (medians).");
  g_option_context_add_main_entries(octx, entries, NULL);
  if (!g_option_context_parse(octx, &argc, &argv, &error)) {
    g_printerr("plan-bench: %s\n", error->message);
    return 2;
  }
  if (opt_fill != NULL)
    return fill_only(&error);
  if (opt_rebalance > 0)
    return rebalance_only(&error);
  g_autofree char *dir = opt_dir != NULL ? g_strdup(opt_dir) : default_dir();
  QpPlacementOptions opts;
  qp_placement_options_init(&opts);
  opts.mode = QP_MODE_BALANCED;
  if (opt_mode != NULL && !qp_mode_parse(opt_mode, &opts.mode)) {
    g_printerr("plan-bench: --mode %s: expected auto, none, balanced, numa or "
               "one-to-one\n",
               opt_mode);
    return 2;
  }

  const char *sep = opt_markdown ? " | " : "  ";
  if (opt_markdown) {
    printf("Request: %s mode, 8 vCPUs, 8 GiB. Ledger records: 48 MiB and 2 "
           "vCPUs each, live. Ledger directory on %s (%s).\n\n",
           qp_mode_name(opts.mode), fs_name(dir), dir);
    printf("| nodes | CPUs | records | plan (ms) | plan CPU (ms) | "
           "plan+claim (ms) | plan+claim CPU (ms) | lock held (ms) | runs |\n");
    printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  } else {
    printf("# %s mode, 8 vCPUs, 8 GiB; ledger in %s (%s); medians in ms\n",
           qp_mode_name(opts.mode), dir, fs_name(dir));
    printf("%5s%s%5s%s%7s%s%9s%s%9s%s%10s%s%10s%s%9s%s%s\n", "nodes", sep,
           "CPUs", sep, "records", sep, "plan", sep, "plan CPU", sep,
           "plan+claim", sep, "p+c CPU", sep, "lock held", sep, "runs");
  }
  int status = 0;
  for (guint h = 0; h < G_N_ELEMENTS(shapes); h++) {
    g_autoptr(QpHost) host =
        qp_host_load_synthetic(shapes[h].description, &error);
    if (host == NULL) {
      g_printerr("plan-bench: %s\n", error->message);
      return 1;
    }
    set_distances(host);
    /* Measured as the live host is (its kernel can give it all), so that
     * every plan counts the records' resident memory: the same plans. */
    for (guint i = 0; i < host->n_nodes; i++) {
      host->nodes[i].measured = TRUE;
      host->nodes[i].can_give_mib = host->nodes[i].total_mib;
    }
    for (guint s = 0; s < G_N_ELEMENTS(ledger_sizes); s++) {
      Cell cell = {0};
      guint n = ledger_sizes[s];
      if (!bench_plan(host, n, &opts, &cell, &error) ||
          !bench_claim(host, n, &opts, dir, &cell, &error)) {
        g_printerr("plan-bench: %u nodes, %u records: %s\n", host->n_nodes, n,
                   error->message);
        g_clear_error(&error);
        status = 1;
        continue;
      }
      if (opt_markdown)
        printf("| %u | %u | %u | %.3f | %.3f | %.3f | %.3f | %.3f | %u/%u |\n",
               host->n_nodes, host->n_cpus, n, cell.plan_ms, cell.plan_cpu_ms,
               cell.claim_ms, cell.claim_cpu_ms, cell.hold_ms, cell.runs_plan,
               cell.runs_claim);
      else
        printf("%5u%s%5u%s%7u%s%9.3f%s%9.3f%s%10.3f%s%10.3f%s%9.3f%s%u/%u\n",
               host->n_nodes, sep, host->n_cpus, sep, n, sep, cell.plan_ms, sep,
               cell.plan_cpu_ms, sep, cell.claim_ms, sep, cell.claim_cpu_ms,
               sep, cell.hold_ms, sep, cell.runs_plan, cell.runs_claim);
      fflush(stdout);
    }
  }
  qp_placement_options_clear(&opts);
  g_free(opt_dir);
  g_free(opt_mode);
  return status;
}
