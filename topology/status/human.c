/* The views as text, for people: `qemu-pin topology`, `qemu-pin plan
 * --human` and `qemu-pin status` (see status.h). */
#include "topology/status/status.h"

#include "topology/plan/capacity.h"
#include "topology/host/cache-domains.h"
#include "topology/ledger/ledger.h"
#include "topology/status/usage.h"

/* ---- The host ------------------------------------------------------------ */

static void
append_size(GString *s, guint64 kib)
{
  if (kib == 0)
    return;
  if (kib % 1024 == 0)
    g_string_append_printf(s, " (%" G_GUINT64_FORMAT " MiB)", kib / 1024);
  else
    g_string_append_printf(s, " (%" G_GUINT64_FORMAT " KiB)", kib);
}

/* "node 0 cache domains: L3 0-1,16-17 (8 MiB), L3 2-3,18-19 (8 MiB)\n" for
 * a node with domains. */
static void
append_cache_domains(const QpHost *host, int id, GString *s)
{
  gboolean first = TRUE;
  for (guint d = 0; d < host->n_domains; d++) {
    const QpCacheDomain *cd = &host->domains[d];
    if (cd->node != id)
      continue;
    g_autofree char *cpus = qp_list_format(cd->cpus);
    if (first)
      g_string_append_printf(s, "node %d cache domains: ", id);
    g_string_append_printf(s, "%s%s %s", first ? "" : ", ",
                           qp_cache_level_name(cd->level), cpus);
    append_size(s, cd->size_kib);
    first = FALSE;
  }
  if (!first)
    g_string_append_c(s, '\n');
}

char *
qp_host_to_text(const QpHost *host)
{
  GString *s = g_string_new(NULL);
  g_auto(hwloc_bitmap_t) ids = hwloc_bitmap_alloc();
  for (guint i = 0; i < host->n_nodes; i++)
    hwloc_bitmap_set(ids, (unsigned)host->nodes[i].id);
  g_autofree char *id_list = qp_list_format(ids);

  g_string_append_printf(s, "source: %s\n", host->source);
  g_string_append_printf(s, "available: %u nodes (%s)\n", host->n_nodes,
                         id_list);
  for (guint i = 0; i < host->n_nodes; i++) {
    const QpNode *n = &host->nodes[i];
    g_autofree char *all = qp_list_format(n->all_cpus);
    g_autofree char *cpus = qp_list_format(n->cpus);
    g_string_append_printf(s, "node %d cpus: %s", n->id,
                           *all != '\0' ? all : "(none: memory only)");
    if (!hwloc_bitmap_isequal(n->cpus, n->all_cpus))
      g_string_append_printf(s, " (allowed: %s)",
                             *cpus != '\0' ? cpus : "none");
    g_string_append_printf(s, "\nnode %d size: %" G_GUINT64_FORMAT " MiB\n",
                           n->id, n->total_mib);
    g_string_append_printf(s, "node %d free: %" G_GUINT64_FORMAT " MiB\n",
                           n->id, n->free_mib);
    for (guint h = 0; h < n->hugepages->len; h++) {
      const QpHugePool *p = &g_array_index(n->hugepages, QpHugePool, h);
      g_string_append_printf(s,
                             "node %d hugepages %" G_GUINT64_FORMAT
                             " kB: %" G_GUINT64_FORMAT
                             " total, %" G_GUINT64_FORMAT " free\n",
                             n->id, p->page_kib, p->total, p->free);
    }
    append_cache_domains(host, n->id, s);
  }
  g_string_append(s, "node distances:\nnode ");
  for (guint j = 0; j < host->n_nodes; j++)
    g_string_append_printf(s, " %3d", host->nodes[j].id);
  g_string_append_c(s, '\n');
  for (guint i = 0; i < host->n_nodes; i++) {
    g_string_append_printf(s, "%3d: ", host->nodes[i].id);
    for (guint j = 0; j < host->n_nodes; j++)
      g_string_append_printf(s, " %3u", host->distance[i * host->n_nodes + j]);
    g_string_append_c(s, '\n');
  }

  guint max_threads = 0;
  for (guint i = 0; i < host->n_cores; i++)
    max_threads =
        MAX(max_threads, (guint)hwloc_bitmap_weight(host->cores[i].pus));
  g_string_append_printf(s, "cores: %u, CPUs: %u, up to %u thread%s per core\n",
                         host->n_cores, host->n_cpus, max_threads,
                         max_threads == 1 ? "" : "s");
  for (guint i = 0; i < host->n_cores; i++) {
    g_autofree char *pus = qp_list_format(host->cores[i].pus);
    g_string_append_printf(s, "  core %u: cpus %s, package %d, node %d\n", i,
                           pus, host->cores[i].package, host->cores[i].node);
  }
  g_string_append_printf(s, "kinds: %u\n", host->n_kinds);
  for (guint k = 0; k < host->n_kinds; k++) {
    g_auto(hwloc_bitmap_t) set = qp_host_kind_cpus(host, k);
    g_autofree char *cpus = qp_list_format(set);
    g_string_append_printf(s, "  kind %u: %s, efficiency %d, cpus %s\n", k,
                           host->kind_names[k], host->kind_efficiency[k], cpus);
  }
  g_autofree char *allowed = qp_list_format(host->allowed);
  g_autofree char *allowed_nodes = qp_list_format(host->allowed_nodes);
  g_string_append_printf(s, "allowed cpus: %s\nallowed nodes: %s\n", allowed,
                         allowed_nodes);
  if (host->mem_denied != NULL && !hwloc_bitmap_iszero(host->mem_denied)) {
    g_autofree char *denied = qp_list_format(host->mem_denied);
    g_string_append_printf(s,
                           "memory denied: nodes %s (their CPUs only: the "
                           "cgroup's cpuset.mems or the memory policy keeps "
                           "memory off them)\n",
                           denied);
  }
  g_string_append_printf(s, "pci devices: %u\n", host->pci->len);
  for (guint i = 0; i < host->pci->len; i++) {
    const QpPciDevice *d = &g_array_index(host->pci, QpPciDevice, i);
    if (d->node >= 0)
      g_string_append_printf(s, "  %s: node %d\n", d->bdf, d->node);
    else
      g_string_append_printf(s, "  %s: node unknown\n", d->bdf);
  }
  return g_string_free(s, FALSE);
}

/* ---- The plan ------------------------------------------------------------ */

/* The devices' table. */
static void
append_devices(GString *s, const QpPlan *plan)
{
  if (plan->devices == NULL || plan->devices->len == 0)
    return;
  g_string_append(s, "\nhost node  PCI           iothread  device\n");
  for (guint d = 0; d < plan->devices->len; d++) {
    const QpPlanDevice *dev = plan->devices->pdata[d];
    g_autofree char *node =
        dev->node >= 0 ? g_strdup_printf("%d", dev->node) : g_strdup("unknown");
    g_string_append_printf(
        s, "%-10s %-13s %-9s %s\n", node, dev->bdf != NULL ? dev->bdf : "-",
        dev->iothread != NULL ? dev->iothread : "-", dev->what);
  }
  for (guint i = 0; plan->iothreads != NULL && i < plan->iothreads->len; i++) {
    const QpPlanIothread *t = plan->iothreads->pdata[i];
    g_autofree char *l = qp_list_format(t->cpus);
    g_string_append_printf(s, "iothread %s on CPUs %s (host node %d)\n", t->id,
                           l, t->node);
  }
}

static char *
fmt_list(hwloc_const_bitmap_t set)
{
  if (set == NULL)
    return g_strdup("-");
  char *l = qp_list_format(set);
  if (*l == '\0') {
    g_free(l);
    return g_strdup("-");
  }
  return l;
}

/* The sets of the plan, one line each. */
static void
append_sets(GString *s, const QpPlan *plan)
{
  g_autofree char *proc = fmt_list(plan->process_cpus);
  g_autofree char *emu = fmt_list(plan->emulator_cpus);
  g_autofree char *io = fmt_list(plan->iothread_cpus);
  g_autofree char *start = fmt_list(plan->startup_cpus);
  g_autofree char *nodes = fmt_list(plan->host_nodes);
  g_autofree char *memn = fmt_list(plan->mem_nodes);
  g_autofree char *ded = fmt_list(plan->dedicated);

  g_string_append_printf(s, "mode            %s%s\n", qp_mode_name(plan->mode),
                         plan->best_effort ? " (best effort)" : "");
  g_autofree char *ignored = qp_status_ignored_words(plan);
  if (ignored != NULL)
    g_string_append_printf(s, "ignored record  %s\n", ignored);
  g_string_append_printf(s, "host nodes      %s\n", nodes);
  g_string_append_printf(s, "process CPUs    %s\n", proc);
  g_string_append_printf(s, "emulator CPUs   %s\n", emu);
  g_string_append_printf(s, "iothread CPUs   %s\n", io);
  g_string_append_printf(s, "startup CPUs    %s\n", start);
  g_string_append_printf(s, "QEMU starts     %s\n",
                         plan->pause ? "paused until pinned" : "running");
  g_string_append_printf(s, "dedicated CPUs  %s\n", ded);
  for (guint i = 0; plan->cpu_load != NULL && i < plan->cpu_load->len; i++) {
    const QpCpuLoad *l = &g_array_index(plan->cpu_load, QpCpuLoad, i);
    g_autofree char *cl = fmt_list(l->cpus);
    g_string_append_printf(s, "shared vCPUs    %u on CPUs %s\n", l->vcpus, cl);
  }
  if (plan->mem_nodes != NULL)
    g_string_append_printf(s, "memory policy   %s on nodes %s\n",
                           qp_policy_name(plan->mem_policy), memn);
  else
    g_string_append(s, "memory policy   not bound\n");
}

/* vCPUs with the same CPUs in runs: "0-7  0-1,4-5" */
static void
append_vcpus(GString *s, const QpPlan *plan)
{
  g_string_append(s, "\nvCPUs       host CPUs\n");
  for (guint v = 0; v < plan->n_vcpus;) {
    guint w = v + 1;
    while (w < plan->n_vcpus &&
           hwloc_bitmap_isequal(plan->vcpu_cpus[w], plan->vcpu_cpus[v]))
      w++;
    g_autofree char *vs = w - v > 1 ? g_strdup_printf("%u-%u", v, w - 1)
                                    : g_strdup_printf("%u", v);
    g_autofree char *cs = fmt_list(plan->vcpu_cpus[v]);
    g_string_append_printf(s, "%-11s %s\n", vs, cs);
    v = w;
  }
}

/* One row per piece of the guest's memory. */
static void
append_mem(GString *s, const QpPlan *plan)
{
  if (plan->n_mem == 0)
    return;
  g_string_append(s, "\nguest node  host nodes  policy      MiB       "
                     "memdev          bound by  memory\n");
  for (guint m = 0; m < plan->n_mem; m++) {
    const QpPlanMem *pm = &plan->mem[m];
    g_autofree char *g =
        pm->gnode >= 0 ? g_strdup_printf("%d", pm->gnode) : g_strdup("-");
    g_autofree char *hn = fmt_list(pm->host_nodes);
    g_autofree char *what = g_strdup_printf(
        "%s%s%s%s", qp_mem_kind_name(pm->kind), pm->device != NULL ? " " : "",
        pm->device != NULL ? pm->device : "",
        pm->page_kib != 0 ? ", hugepages" : "");
    g_string_append_printf(
        s, "%-11s %-11s %-11s %-9" G_GUINT64_FORMAT " %-15s %-9s %s\n", g, hn,
        qp_policy_name(pm->policy), pm->mem_mib,
        pm->memdev != NULL ? pm->memdev : "-",
        pm->host_nodes == NULL ? "not bound"
        : pm->caller_set       ? "caller"
                               : "qemu-pin",
        what);
  }
}

/* The node ids the claims table shows: the host's, or without a host
 * those the claims name. */
static GArray *
claim_node_ids(const QpPlan *plan, const QpHost *host)
{
  GArray *ids = g_array_new(FALSE, FALSE, sizeof(int));
  if (host != NULL) {
    for (guint i = 0; i < host->n_nodes; i++)
      g_array_append_val(ids, host->nodes[i].id);
    return ids;
  }
  for (guint i = 0; i < plan->claim_mem->len; i++)
    g_array_append_val(ids,
                       g_array_index(plan->claim_mem, QpNodeAmount, i).node);
  for (guint i = 0; i < plan->claim_huge->len; i++)
    g_array_append_val(ids,
                       g_array_index(plan->claim_huge, QpHugeClaim, i).node);
  for (guint i = 0; i < plan->load->len; i++)
    g_array_append_val(ids, g_array_index(plan->load, QpNodeLoad, i).node);
  return ids;
}

/* The claims row of node ID, if the plan claims anything there. */
static void
append_claims_row(GString *s, const QpPlan *plan, int id)
{
  guint64 mib = 0;
  guint vcpus = 0;
  g_autoptr(GString) huge = g_string_new("");
  for (guint i = 0; i < plan->claim_mem->len; i++)
    if (g_array_index(plan->claim_mem, QpNodeAmount, i).node == id)
      mib += g_array_index(plan->claim_mem, QpNodeAmount, i).mib;
  for (guint i = 0; i < plan->claim_huge->len; i++) {
    const QpHugeClaim *h = &g_array_index(plan->claim_huge, QpHugeClaim, i);
    if (h->node == id)
      g_string_append_printf(
          huge, "%s%" G_GUINT64_FORMAT " x %" G_GUINT64_FORMAT " KiB",
          huge->len ? ", " : "", h->pages, h->page_kib);
  }
  for (guint i = 0; i < plan->load->len; i++)
    if (g_array_index(plan->load, QpNodeLoad, i).node == id)
      vcpus += g_array_index(plan->load, QpNodeLoad, i).vcpus;
  if (mib == 0 && huge->len == 0 && vcpus == 0)
    return;
  g_string_append_printf(s, "        %-5d %-11" G_GUINT64_FORMAT " %-19s %u\n",
                         id, mib, huge->len ? huge->str : "-", vcpus);
}

static void
append_claims(GString *s, const QpPlan *plan, const QpHost *host)
{
  g_string_append(s, "\nclaims: node  memory MiB  hugepages           "
                     "shared vCPUs\n");
  g_autoptr(GArray) ids = claim_node_ids(plan, host);
  g_auto(hwloc_bitmap_t) shown = hwloc_bitmap_alloc();
  for (guint x = 0; x < ids->len; x++) {
    int id = g_array_index(ids, int, x);
    if (id < 0 || hwloc_bitmap_isset(shown, id))
      continue;
    hwloc_bitmap_set(shown, id);
    append_claims_row(s, plan, id);
  }
}

static void
append_vnuma(GString *s, const QpPlan *plan)
{
  if (!plan->vnuma)
    return;
  g_string_append_printf(s,
                         "\nsuggested guest topology: sockets=%u dies=%u "
                         "cores=%u threads=%u\n",
                         plan->vnuma_sockets, MAX(plan->vnuma_dies, 1),
                         plan->vnuma_cores, plan->vnuma_threads);
  for (guint n = 0; n < plan->n_vnodes; n++) {
    g_autofree char *vl = fmt_list(plan->vnodes[n].vcpus);
    g_string_append_printf(s,
                           "  -numa node,nodeid=%d,cpus=%s (%" G_GUINT64_FORMAT
                           " MiB, host node %d)\n",
                           plan->vnodes[n].id, vl, plan->vnodes[n].mem_mib,
                           plan->vnodes[n].host_node);
  }
}

/* "\nTITLE:\n  MARK line\n..." when there are LINES. */
static void
append_lines(GString *s, const char *title, const char *mark,
             const GPtrArray *lines)
{
  if (lines == NULL || lines->len == 0)
    return;
  g_string_append_printf(s, "\n%s:\n", title);
  for (guint i = 0; i < lines->len; i++)
    g_string_append_printf(s, "  %s %s\n", mark,
                           (const char *)g_ptr_array_index(lines, i));
}

char *
qp_plan_to_human(const QpPlan *plan, const QpHost *host)
{
  GString *s = g_string_new("");
  append_sets(s, plan);
  append_vcpus(s, plan);
  append_mem(s, plan);
  append_devices(s, plan);
  append_claims(s, plan, host);
  append_vnuma(s, plan);
  append_lines(s, "reasons", "-", plan->reasons);
  append_lines(s, "warnings", "!", plan->warnings);
  return g_string_free(s, FALSE);
}
/* ---- The ledger's status ------------------------------------------------- */

#define BAR_COLUMNS 40

/* One line per L3 domain of node ID, "  L3 0-1,16-17: 1 of 2 cores
 * dedicated, 1.50 shared vCPUs (0.75 per CPU)". */
static void
append_cache_usage(const QpHost *host, hwloc_const_bitmap_t dedicated,
                   const double *load, int id, GString *s)
{
  for (guint d = 0; d < host->n_domains; d++) {
    const QpCacheDomain *cd = &host->domains[d];
    if (cd->node != id || cd->level != QP_CACHE_L3)
      continue;
    QpCacheUsage u;
    qp_cache_usage(host, dedicated, load, d, &u);
    g_autofree char *cpus = qp_list_format(cd->cpus);
    g_string_append_printf(s,
                           "  L3 %s: %u of %u cores dedicated, %.2f shared "
                           "vCPUs (%.2f per CPU)\n",
                           cpus, u.dedicated_cores, cd->n_cores, u.shared_vcpus,
                           u.per_cpu);
  }
}
static guint
columns(guint64 part, guint64 total)
{
  if (total == 0)
    return 0;
  /* Round to nearest, but never show a non-zero part as empty. */
  guint64 c = (part * BAR_COLUMNS + total / 2) / total;
  if (c == 0 && part > 0)
    c = 1;
  return (guint)MIN(c, (guint64)BAR_COLUMNS);
}

static void
append_bar(GString *s, const QpNodeCapacity *cap)
{
  guint claimed = columns(cap->claimed_mib, cap->total_mib);
  guint reserve = columns(cap->reserve_mib, cap->total_mib);
  guint huge = columns(cap->hugepage_mib, cap->total_mib);
  if (claimed + reserve > BAR_COLUMNS)
    reserve = BAR_COLUMNS - claimed;
  if (claimed + reserve + huge > BAR_COLUMNS)
    huge = BAR_COLUMNS - claimed - reserve;
  g_string_append(s, "  memory [");
  for (guint i = 0; i < BAR_COLUMNS; i++) {
    char ch = '.';
    if (cap->blocked)
      ch = 'X';
    else if (i < claimed)
      ch = '#';
    else if (i < claimed + reserve)
      ch = '+';
    else if (i < claimed + reserve + huge)
      ch = 'h';
    g_string_append_c(s, ch);
  }
  g_string_append(s, cap->blocked ? "]  X blocked\n"
                     : huge > 0   ? "]  # claimed, + host reserve, h "
                                    "hugepage pools, . free\n"
                                  : "]  # claimed, + host reserve, . free\n");
}

static void
append_cpus(GString *s, const QpHost *host, const QpNode *n,
            const QpNodeCapacity *cap, const double *load)
{
  if (n->all_cpus == NULL || hwloc_bitmap_iszero(n->all_cpus))
    return;
  g_autofree char *list = qp_list_format(n->all_cpus);
  g_string_append_printf(s, "  cpus %s [", list);
  int cpu;
  hwloc_bitmap_foreach_begin(cpu, n->all_cpus)
  {
    double shared = qp_status_cpu_load_of(host, load, cpu);
    double l = qp_status_cpu_vcpus(host, load, cap->dedicated, cpu);
    char ch = '.';
    if (l > 1.0)
      ch = 'O';
    else if (hwloc_bitmap_isset(cap->dedicated, (unsigned)cpu))
      ch = 'D';
    else if (shared > 0.0)
      ch = 'S';
    else if (n->cpus == NULL || !hwloc_bitmap_isset(n->cpus, (unsigned)cpu))
      ch = '-';
    g_string_append_c(s, ch);
  }
  hwloc_bitmap_foreach_end();
  g_auto(hwloc_bitmap_t) over = hwloc_bitmap_alloc();
  g_autoptr(GArray) groups =
      qp_status_load_groups(host, n, load, cap->dedicated, over);
  g_auto(hwloc_bitmap_t) on_dedicated =
      qp_status_shared_dedicated(host, load, cap->dedicated, n->all_cpus);
  g_autofree char *with = NULL;
  if (!hwloc_bitmap_iszero(on_dedicated)) {
    g_autofree char *dl = qp_list_format(on_dedicated);
    with = g_strdup_printf(" with the dedicated vCPUs of %s", dl);
  }
  g_string_append_printf(
      s,
      "]  D dedicated, S shared (%u vCPU%s, %.2f per CPU%s), "
      "%s. free, - not usable\n",
      cap->shared_vcpus, cap->shared_vcpus == 1 ? "" : "s",
      qp_status_load_per_cpu(host, n, cap, load), with != NULL ? with : "",
      hwloc_bitmap_iszero(over) ? ""
                                : "O overcommitted (more vCPUs than CPUs), ");
  if (groups->len == 0)
    return;
  g_string_append(s, "  vCPUs per CPU:");
  for (guint g = 0; g < groups->len; g++) {
    const QpLoadGroup *lg = &g_array_index(groups, QpLoadGroup, g);
    g_autofree char *cl = qp_list_format(lg->cpus);
    g_string_append_printf(s, "%s %.2f on %s", g ? "," : "", lg->per_cpu, cl);
  }
  if (!hwloc_bitmap_iszero(over)) {
    g_autofree char *ol = qp_list_format(over);
    g_string_append_printf(s, "; overcommitted %s", ol);
  }
  g_string_append_c(s, '\n');
}

/* "    dedicated cpus shared: 0-1 with beta (id-b)" when other VMs' shared
 * vCPUs float on the dedicated CPUs of claims->claims[INDEX]. */
static void
append_sharers(GString *s, const QpHost *host, const QpClaims *claims,
               guint index)
{
  g_autoptr(GArray) sharers = qp_status_sharers(host, claims, index);
  if (sharers->len == 0)
    return;
  g_string_append(s, "    dedicated cpus shared:");
  for (guint i = 0; i < sharers->len; i++) {
    const QpSharer *sh = &g_array_index(sharers, QpSharer, i);
    g_autofree char *cpus = qp_list_format(sh->cpus);
    g_autofree char *who = qp_status_vm_words(sh->with);
    g_string_append_printf(s, "%s %s with %s", i ? "," : "", cpus, who);
  }
  g_string_append_c(s, '\n');
}

static void
append_vm(GString *s, const QpClaim *c)
{
  g_autoptr(GDateTime) t = g_date_time_new_from_unix_utc(c->time);
  g_autofree char *since =
      t ? g_date_time_format(t, "%Y-%m-%d %H:%M:%S UTC") : g_strdup("?");
  g_string_append_printf(s, "  %s  %s  qemu pid %d", c->name ? c->name : "-",
                         c->id, c->qemu_pid);
  if (c->launcher_pid > 0)
    g_string_append_printf(s, ", launcher pid %d", c->launcher_pid);
  g_string_append_printf(
      s, ", keeper pid %d%s, mode %s%s%s, since %s\n", c->keeper_pid,
      c->keeper_pid <= 0 || qp_status_keeper_running(c)
          ? ""
          : " (not running: the claim holds while QEMU "
            "lives, but hotplug is no longer followed)",
      qp_mode_name(c->mode), c->best_effort ? " (best effort)" : "",
      c->caller_placed ? " (placed by its caller: never "
                         "moved)"
                       : "",
      since);
  g_string_append(s, "    memory");
  if (c->mem->len == 0)
    g_string_append(s, " none");
  for (guint i = 0; i < c->mem->len; i++) {
    const QpNodeAmount *a = &g_array_index(c->mem, QpNodeAmount, i);
    g_string_append_printf(s, "%s node %d %" G_GUINT64_FORMAT " MiB",
                           i ? "," : "", a->node, a->mib);
  }
  for (guint i = 0; i < c->huge->len; i++) {
    const QpHugeClaim *h = &g_array_index(c->huge, QpHugeClaim, i);
    g_string_append_printf(s,
                           "; hugepages node %d %" G_GUINT64_FORMAT
                           " x %" G_GUINT64_FORMAT " KiB",
                           h->node, h->pages, h->page_kib);
  }
  if (!hwloc_bitmap_iszero(c->dedicated)) {
    g_autofree char *list = qp_list_format(c->dedicated);
    g_string_append_printf(s, "; dedicated cpus %s", list);
  }
  for (guint i = 0; i < c->load->len; i++) {
    const QpNodeLoad *l = &g_array_index(c->load, QpNodeLoad, i);
    g_string_append_printf(s, "; %u shared vCPU%s on node %d", l->vcpus,
                           l->vcpus == 1 ? "" : "s", l->node);
  }
  /* Where a best-effort VM's vCPUs share CPUs (others float on their
   * nodes, as the node lines show). */
  for (guint i = 0; c->best_effort && i < c->cpu_load->len; i++) {
    const QpCpuLoad *l = &g_array_index(c->cpu_load, QpCpuLoad, i);
    g_autofree char *list = qp_list_format(l->cpus);
    g_string_append_printf(s, "; %u vCPU%s float%s on cpus %s", l->vcpus,
                           l->vcpus == 1 ? "" : "s", l->vcpus == 1 ? "s" : "",
                           list);
  }
  g_string_append_c(s, '\n');
  for (guint i = 0; i < c->devices->len; i++)
    g_string_append_printf(s, "    device %s\n",
                           (const char *)c->devices->pdata[i]);
}

char *
qp_status_to_text(const QpHost *host, const QpClaims *claims,
                  const QpPlacementOptions *opts)
{
  GString *s = g_string_new(NULL);
  g_autofree double *load = host ? qp_claims_cpu_load(host, claims) : NULL;
  for (guint i = 0; host && i < host->n_nodes; i++) {
    const QpNode *n = &host->nodes[i];
    QpNodeCapacity cap;
    qp_node_capacity(host, claims, opts, i, &cap);
    g_autofree char *pools =
        cap.hugepage_mib > 0
            ? g_strdup_printf(" (%" G_GUINT64_FORMAT " in hugepage pools)",
                              cap.hugepage_mib)
            : g_strdup("");
    g_string_append_printf(
        s,
        "node %d: %" G_GUINT64_FORMAT " MiB total%s, %" G_GUINT64_FORMAT
        " reserved, %" G_GUINT64_FORMAT " claimed, %" G_GUINT64_FORMAT
        " free%s\n",
        n->id, cap.total_mib, pools, cap.reserve_mib, cap.claimed_mib,
        cap.uncommitted_mib,
        cap.blocked ? " (blocked by an unreadable record)" : "");
    if (cap.measured) {
      /* Claims the node can no longer keep: what they have yet to take
       * is more than the kernel can give there (memory used since, or a
       * VM bound to several nodes whose pages went here: robustness.md,
       * finding 40). */
      g_autofree char *short_of =
          cap.outstanding_mib > cap.can_give_mib
              ? g_strdup_printf(
                    "; short by %" G_GUINT64_FORMAT
                    " MiB: the claims not yet resident are more than the "
                    "kernel can give",
                    cap.outstanding_mib - cap.can_give_mib)
              : g_strdup("");
      g_string_append_printf(
          s,
          "  now: the kernel can give %" G_GUINT64_FORMAT
          " MiB, %" G_GUINT64_FORMAT " used outside claims, %" G_GUINT64_FORMAT
          " claimed not yet resident, %" G_GUINT64_FORMAT " available%s\n",
          cap.can_give_mib, cap.outside_mib, cap.outstanding_mib,
          cap.uncommitted_mib, short_of);
    }
    append_bar(s, &cap);
    g_autoptr(GArray) sizes = qp_node_page_sizes(n, claims);
    for (guint j = 0; j < sizes->len; j++) {
      guint64 kib = g_array_index(sizes, guint64, j);
      QpNodePages pages;
      qp_node_pages(host, claims, i, kib, &pages);
      g_string_append_printf(
          s,
          "  hugepages %" G_GUINT64_FORMAT " KiB: %" G_GUINT64_FORMAT
          " total, %" G_GUINT64_FORMAT " free, %" G_GUINT64_FORMAT " claimed\n",
          kib, pages.total, pages.free, pages.claimed);
    }
    append_cpus(s, host, n, &cap, load);
    g_auto(hwloc_bitmap_t) dedicated = qp_claims_dedicated(claims);
    append_cache_usage(host, dedicated, load, n->id, s);
    qp_node_capacity_clear(&cap);
  }

  guint n_vms = claims ? claims->claims->len : 0;
  if (n_vms == 0)
    g_string_append(s, "no VM holds a claim\n");
  else
    g_string_append_printf(s, "%u VM%s holding claims:\n", n_vms,
                           n_vms == 1 ? "" : "s");
  for (guint i = 0; i < n_vms; i++) {
    append_vm(s, claims->claims->pdata[i]);
    append_sharers(s, host, claims, i);
  }
  guint n_ignored = claims ? claims->ignored->len : 0;
  if (n_ignored > 0)
    g_string_append_printf(s,
                           "%u record%s not counted (a member claims only "
                           "what a VM of its own holds):\n",
                           n_ignored, n_ignored == 1 ? "" : "s");
  for (guint i = 0; i < n_ignored; i++) {
    const QpIgnoredRecord *r = claims->ignored->pdata[i];
    g_string_append_printf(s, "  %s of uid %u: %s\n", r->file, r->owner,
                           r->reason);
  }

  for (guint i = 0; claims && i < claims->warnings->len; i++)
    g_string_append_printf(s, "warning: %s\n",
                           (const char *)claims->warnings->pdata[i]);
  g_autoptr(GPtrArray) over = qp_status_overcommitted(host, claims, opts);
  for (guint i = 0; i < over->len; i++)
    g_string_append_printf(s, "warning: %s\n", (const char *)over->pdata[i]);
  return g_string_free(s, FALSE);
}

char *
qp_status_moves_to_text(const GPtrArray *moves, const QpClaims *claims)
{
  GString *s = g_string_new(NULL);
  guint n = moves != NULL ? moves->len : 0;
  if (n > 0)
    g_string_append_printf(s, "qemu-pin rebalance would move %u VM%s now:\n", n,
                           n == 1 ? "" : "s");
  for (guint i = 0; i < n; i++) {
    const QpMove *m = moves->pdata[i];
    const char *name = NULL;
    for (guint j = 0; claims != NULL && j < claims->claims->len; j++) {
      const QpClaim *c = claims->claims->pdata[j];
      if (g_strcmp0(c->id, m->vm) == 0)
        name = c->name;
    }
    g_autofree char *from = qp_list_format(m->from);
    g_autofree char *to = qp_list_format(m->to);
    g_string_append_printf(
        s, "  VM %s (%s) from nodes %s to %s, %" G_GUINT64_FORMAT " MiB",
        name != NULL ? name : "-", m->vm, from, to, m->mib);
    if (m->relieves >= 0)
      g_string_append_printf(s, " (off node %d, overcommitted)", m->relieves);
    g_string_append_c(s, '\n');
  }
  return g_string_free(s, FALSE);
}
