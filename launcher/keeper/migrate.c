/* Moving QEMU's memory between host nodes (migrate.h). */
#include "launcher/keeper/migrate.h"

#include <errno.h>
#include <fcntl.h>
#include "launcher/numa-sys.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "launcher/launch.h"
#include "qp-error.h"
#include "topology/base/cpulist.h"
#include "topology/base/proc.h"
#include "topology/ledger/claims.h"

#define CGROUP_ROOT "/sys/fs/cgroup"
#define CGROUP_OURS CGROUP_ROOT "/qemu-pin"
/* Pages per move_pages(2) call: 16 MiB of 4 KiB pages. */
#define CHUNK_PAGES 4096
/* The base page size numa_maps counts in where it names none. */
#define BASE_PAGE_KIB 4

/* ---- Where the memory is ------------------------------------------------ */

typedef struct {
  guint64 total_kib, on_kib;
  GArray *per_node;          /* of QpNodeAmount, in KiB: ordinary pages */
  hwloc_bitmap_t huge_nodes; /* nodes that hold hugepages of it */
} Sum;

gboolean
qp_numa_maps_node_pages(const char *token, int *node, guint64 *pages)
{
  char *end = NULL;
  if (token[0] != 'N' || !g_ascii_isdigit(token[1]))
    return FALSE;
  guint64 n = g_ascii_strtoull(token + 1, &end, 10);
  if (*end != '=' || n > G_MAXINT)
    return FALSE;
  *node = (int)n;
  *pages = g_ascii_strtoull(end + 1, NULL, 10);
  return TRUE;
}

guint64
qp_numa_maps_page_kib(char *const *t, gboolean *huge)
{
  guint64 page_kib = 0;
  *huge = FALSE;
  for (guint i = 0; t[i] != NULL; i++) {
    *huge |= strcmp(t[i], "huge") == 0;
    if (g_str_has_prefix(t[i], "kernelpagesize_kB="))
      page_kib = g_ascii_strtoull(t[i] + 18, NULL, 10);
  }
  return page_kib;
}

/* Whether the tokens T of a numa_maps line name anonymous pages. */
static gboolean
has_anon(char *const *t)
{
  for (guint i = 0; t[i] != NULL; i++)
    if (g_str_has_prefix(t[i], "anon="))
      return TRUE;
  return FALSE;
}

/* One line of numa_maps: its policy, page size and pages per node. */
static void
add_line(const char *line, hwloc_const_bitmap_t nodes, Sum *bound, Sum *anon)
{
  g_auto(GStrv) t = g_strsplit(line, " ", -1);
  if (t[0] == NULL || t[1] == NULL)
    return;
  gboolean has_policy = strcmp(t[1], "default") != 0;
  gboolean is_anon = has_anon(t + 2);
  gboolean huge; /* a hugetlb line is told by its page size below */
  guint64 page_kib = qp_numa_maps_page_kib(t + 2, &huge);
  if (page_kib == 0)
    page_kib = BASE_PAGE_KIB;
  int node;
  guint64 pages;
  for (guint i = 2; t[i] != NULL; i++) {
    if (!qp_numa_maps_node_pages(t[i], &node, &pages))
      continue;
    guint64 kib = pages * page_kib;
    Sum *s = has_policy ? bound : is_anon ? anon : NULL;
    if (s == NULL)
      continue;
    s->total_kib += kib;
    if (hwloc_bitmap_isset(nodes, (unsigned)node))
      s->on_kib += kib;
    if (kib > 0 && page_kib > BASE_PAGE_KIB)
      hwloc_bitmap_set(s->huge_nodes, (unsigned)node);
    else if (kib > 0)
      qp_node_amount_add(s->per_node, node, kib);
  }
}

/* /proc/PID/NAME whole, or NULL with ERROR set. */
static char *
proc_file(int pid, const char *name, GError **error)
{
  g_autofree char *path = g_strdup_printf("/proc/%d/%s", pid, name);
  char *text = NULL;
  g_autoptr(GError) local = NULL;
  if (!g_file_get_contents(path, &text, NULL, &local)) {
    g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
                "cannot read %s: %s", path, local->message);
    return NULL;
  }
  return text;
}

hwloc_bitmap_t
qp_mem_allowed_nodes(int pid)
{
  g_autofree char *text = proc_file(pid, "status", NULL);
  g_autofree char *list =
      text != NULL ? qp_proc_status_field(text, "Mems_allowed_list") : NULL;
  hwloc_bitmap_t nodes = NULL;
  if (list == NULL || !qp_list_parse(list, "Mems_allowed_list",
                                     QP_LIST_MAX_INDEX, &nodes, NULL))
    return NULL;
  return nodes;
}

/* numa_maps read as qp_mem_where() says; PER_NODE (may be NULL): the
 * memory counted there per node, in KiB. */
static gboolean
where(int pid, hwloc_const_bitmap_t nodes, QpMemWhere *out, GArray **per_node,
      hwloc_bitmap_t huge_nodes, GError **error)
{
  g_autofree char *text = proc_file(pid, "numa_maps", error);
  if (text == NULL)
    return FALSE;
  Sum bound = {0, 0, g_array_new(FALSE, TRUE, sizeof(QpNodeAmount)),
               hwloc_bitmap_alloc()};
  Sum anon = {0, 0, g_array_new(FALSE, TRUE, sizeof(QpNodeAmount)),
              hwloc_bitmap_alloc()};
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    add_line(lines[i], nodes, &bound, &anon);
  Sum *s = bound.total_kib > 0 ? &bound : &anon;
  out->total_kib = s->total_kib;
  out->on_kib = s->on_kib;
  if (per_node != NULL)
    *per_node = g_array_ref(s->per_node);
  if (huge_nodes != NULL)
    hwloc_bitmap_copy(huge_nodes, s->huge_nodes);
  g_array_unref(bound.per_node);
  g_array_unref(anon.per_node);
  hwloc_bitmap_free(bound.huge_nodes);
  hwloc_bitmap_free(anon.huge_nodes);
  return TRUE;
}

gboolean
qp_mem_where(int pid, hwloc_const_bitmap_t nodes, QpMemWhere *out,
             GError **error)
{
  return where(pid, nodes, out, NULL, NULL, error);
}

GArray *
qp_mem_where_per_node(int pid, hwloc_bitmap_t huge_nodes, GError **error)
{
  g_auto(hwloc_bitmap_t) none = hwloc_bitmap_alloc();
  QpMemWhere w;
  GArray *per_node = NULL;
  if (!where(pid, none, &w, &per_node, huge_nodes, error))
    return NULL;
  for (guint j = 0; j < per_node->len; j++) {
    QpNodeAmount *a = &g_array_index(per_node, QpNodeAmount, j);
    a->mib = (a->mib + 1023) / 1024;
  }
  return per_node;
}

/* ---- The pages ---------------------------------------------------------- */

typedef struct {
  int pid;
  int map[QP_LIST_MAX_INDEX + 1]; /* node -> destination, -1: stays */
  /* Or, evening out (take != NULL): pages to take off each node and room
   * for pages on each, of the mapping's own nodes (allowed) alone, and
   * how many pages may still move. */
  guint64 *take, *give;
  hwloc_const_bitmap_t allowed;
  guint64 left;
  guint rate_mib;
  gint64 started_us;
  guint64 moved_kib;
  guint64 page_size; /* of the mapping at hand */
  void **pages;
  int *nodes, *status;
} Mover;

static Mover *
mover_new(int pid)
{
  Mover *m = g_new0(Mover, 1);
  m->pid = pid;
  m->started_us = g_get_monotonic_time();
  m->page_size = (guint64)sysconf(_SC_PAGESIZE);
  m->pages = g_new(void *, CHUNK_PAGES);
  m->nodes = g_new(int, CHUNK_PAGES);
  m->status = g_new(int, CHUNK_PAGES);
  return m;
}

static void
mover_free(Mover *m)
{
  g_free(m->pages);
  g_free(m->nodes);
  g_free(m->status);
  g_free(m);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC(Mover, mover_free)

/* Waits until the pages moved so far are within the rate. */
static void
keep_rate(const Mover *m)
{
  if (m->rate_mib == 0)
    return;
  double mib = (double)m->moved_kib / 1024.0;
  gint64 due_us = m->started_us + (gint64)(mib * 1e6 / m->rate_mib);
  gint64 now = g_get_monotonic_time();
  if (due_us > now)
    g_usleep((gulong)(due_us - now));
}

/* The hugetlb mappings of PID: start address -> page size in KiB. */
static GHashTable *
huge_mappings(int pid)
{
  GHashTable *huge = g_hash_table_new(g_direct_hash, g_direct_equal);
  g_autofree char *text = proc_file(pid, "numa_maps", NULL);
  g_auto(GStrv) lines = g_strsplit(text != NULL ? text : "", "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++) {
    g_auto(GStrv) t = g_strsplit(lines[i], " ", -1);
    gboolean is_huge;
    guint64 kib = qp_numa_maps_page_kib(t, &is_huge);
    if (!is_huge || kib <= BASE_PAGE_KIB)
      continue;
    guint64 start = g_ascii_strtoull(lines[i], NULL, 16);
    g_hash_table_insert(huge, GSIZE_TO_POINTER(start), GSIZE_TO_POINTER(kib));
  }
  return huge;
}

/* Evening out: where a page on node AT goes (a node of the mapping with
 * room left), or -1 when it stays. */
static int
even_dest(Mover *m, int at)
{
  if (m->left == 0 || m->take[at] == 0)
    return -1;
  int d;
  hwloc_bitmap_foreach_begin(d, m->allowed)
  {
    if (d != at && d <= QP_LIST_MAX_INDEX && m->give[d] > 0) {
      m->take[at]--;
      m->give[d]--;
      m->left--;
      return d;
    }
  }
  hwloc_bitmap_foreach_end();
  return -1;
}

/* One chunk of N pages from ADDR: where each is, then the move of those
 * off the destination (or, evening out, of those a node has too many). */
static gboolean
move_chunk(Mover *m, guintptr addr, guint n, GError **error)
{
  for (guint i = 0; i < n; i++)
    m->pages[i] = (void *)(addr + (guintptr)i * m->page_size);
  if (qp_sys_move_pages(m->pid, n, m->pages, NULL, m->status, 0) < 0)
    return TRUE; /* the mapping went away meanwhile */
  guint k = 0;
  for (guint i = 0; i < n; i++) {
    int at = m->status[i];
    if (at < 0 || at > QP_LIST_MAX_INDEX)
      continue;
    int to = m->take != NULL ? even_dest(m, at) : m->map[at];
    if (to < 0)
      continue;
    m->pages[k] = m->pages[i];
    m->nodes[k] = to;
    k++;
  }
  if (k == 0)
    return TRUE;
  if (qp_sys_move_pages(m->pid, k, m->pages, m->nodes, m->status,
                        MPOL_MF_MOVE) < 0 &&
      errno != ENOENT) {
    g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
                "move_pages of QEMU (pid %d): %s", m->pid, g_strerror(errno));
    return FALSE;
  }
  for (guint i = 0; i < k; i++)
    if (m->status[i] >= 0)
      m->moved_kib += m->page_size / 1024;
  keep_rate(m);
  return TRUE;
}

/* The node map: a page on host node N (position P among HOST_NODES) goes
 * to TO's node at position P modulo |TO|; one on TO stays. */
static void
make_map(Mover *m, hwloc_const_bitmap_t host_nodes, hwloc_const_bitmap_t to)
{
  for (guint i = 0; i < G_N_ELEMENTS(m->map); i++)
    m->map[i] = -1;
  int weight = hwloc_bitmap_weight(to);
  int pos = 0, node;
  hwloc_bitmap_foreach_begin(node, host_nodes)
  {
    if (node <= QP_LIST_MAX_INDEX && !hwloc_bitmap_isset(to, (unsigned)node)) {
      int d = -1;
      for (int j = 0; j <= pos % weight; j++)
        d = hwloc_bitmap_next(to, d);
      m->map[node] = d;
    }
    pos++;
  }
  hwloc_bitmap_foreach_end();
}

gboolean
qp_mem_move_pages(int pid, hwloc_const_bitmap_t host_nodes,
                  hwloc_const_bitmap_t to, guint rate_mib, guint64 *moved_mib,
                  GError **error)
{
  g_autofree char *text = proc_file(pid, "maps", error);
  if (text == NULL)
    return FALSE;
  g_autoptr(Mover) m = mover_new(pid);
  m->rate_mib = rate_mib;
  make_map(m, host_nodes, to);
  g_autoptr(GHashTable) huge = huge_mappings(pid);
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  guint64 base = m->page_size;
  for (guint i = 0; lines[i] != NULL; i++) {
    guint64 start = 0, end = 0;
    if (sscanf(lines[i], "%" G_GINT64_MODIFIER "x-%" G_GINT64_MODIFIER "x",
               &start, &end) != 2 ||
        strstr(lines[i], "[vsyscall]") != NULL)
      continue;
    /* A hugetlb mapping moves a hugepage at a time, by its first byte. */
    gpointer kib = g_hash_table_lookup(huge, GSIZE_TO_POINTER(start));
    m->page_size = kib != NULL ? GPOINTER_TO_SIZE(kib) * 1024 : base;
    for (guint64 a = start; a < end; a += CHUNK_PAGES * m->page_size) {
      guint n = (guint)MIN((guint64)CHUNK_PAGES, (end - a) / m->page_size);
      if (n > 0 && !move_chunk(m, (guintptr)a, n, error))
        return FALSE;
    }
  }
  *moved_mib = m->moved_kib / 1024;
  return TRUE;
}

/* The policy of a numa_maps line (its second word) when it binds to two
 * nodes or more ("bind:1-2"), as nodes; NULL for any other. */
static hwloc_bitmap_t
bound_to_several(const char *policy)
{
  hwloc_bitmap_t nodes = NULL;
  if (!g_str_has_prefix(policy, "bind:") ||
      !qp_list_parse(policy + 5, "policy", QP_LIST_MAX_INDEX, &nodes, NULL))
    return NULL;
  if (hwloc_bitmap_weight(nodes) < 2) {
    hwloc_bitmap_free(nodes);
    return NULL;
  }
  return nodes;
}

/* Whether the words of a numa_maps line after its policy (WORDS) say
 * anonymous memory in pages of PAGE_SIZE, no hugepages. */
static gboolean
ordinary_anon(char **words, guint64 page_size)
{
  gboolean huge;
  guint64 page_kib = qp_numa_maps_page_kib(words, &huge);
  return !huge && has_anon(words) && page_kib * 1024 == page_size;
}

/* Start address -> end address of each mapping of PID (/proc/PID/maps),
 * as huge_mappings() keys its table. */
static GHashTable *
mapping_ends(int pid, GError **error)
{
  g_autofree char *text = proc_file(pid, "maps", error);
  if (text == NULL)
    return NULL;
  GHashTable *ends = g_hash_table_new(g_direct_hash, g_direct_equal);
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++) {
    guint64 start = 0, end = 0;
    if (sscanf(lines[i], "%" G_GINT64_MODIFIER "x-%" G_GINT64_MODIFIER "x",
               &start, &end) == 2)
      g_hash_table_insert(ends, GSIZE_TO_POINTER(start), GSIZE_TO_POINTER(end));
  }
  return ends;
}

/* MIB (of QpNodeAmount) in pages of PER_MIB per MiB into PAGES (indexed by
 * node); returns their sum. */
static guint64
pages_per_node(const GArray *mib, guint64 per_mib, guint64 *pages)
{
  guint64 sum = 0;
  for (guint j = 0; j < mib->len; j++) {
    const QpNodeAmount *a = &g_array_index(mib, QpNodeAmount, j);
    if (a->node >= 0 && a->node <= QP_LIST_MAX_INDEX) {
      pages[a->node] += a->mib * per_mib;
      sum += a->mib * per_mib;
    }
  }
  return sum;
}

gboolean
qp_mem_even_out(int pid, const GArray *take_mib, const GArray *give_mib,
                guint64 max_mib, guint64 *moved_mib, GError **error)
{
  *moved_mib = 0;
  g_autofree char *text = proc_file(pid, "numa_maps", error);
  if (text == NULL)
    return FALSE;
  g_autoptr(GHashTable) ends = mapping_ends(pid, error);
  if (ends == NULL)
    return FALSE;
  g_autoptr(Mover) m = mover_new(pid);
  guint64 per_mib = ((guint64)1 << 20) / m->page_size;
  g_autofree guint64 *take = g_new0(guint64, QP_LIST_MAX_INDEX + 1);
  g_autofree guint64 *give = g_new0(guint64, QP_LIST_MAX_INDEX + 1);
  guint64 taken = pages_per_node(take_mib, per_mib, take),
          room = pages_per_node(give_mib, per_mib, give);
  m->take = take;
  m->give = give;
  m->left = MIN(MIN(taken, room), max_mib * per_mib);
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  for (guint i = 0; lines[i] != NULL && m->left > 0; i++) {
    /* Ordinary anonymous memory bound to several nodes: guest RAM whose
     * binding lets its pages be on any of them (hugepages, the caller's
     * one-node bindings and file pages stay). */
    g_auto(GStrv) t = g_strsplit(lines[i], " ", -1);
    if (t[0] == NULL || t[1] == NULL || !ordinary_anon(t + 2, m->page_size))
      continue;
    g_auto(hwloc_bitmap_t) allowed = bound_to_several(t[1]);
    guint64 start = g_ascii_strtoull(t[0], NULL, 16);
    guint64 end =
        GPOINTER_TO_SIZE(g_hash_table_lookup(ends, GSIZE_TO_POINTER(start)));
    if (allowed == NULL || end <= start)
      continue;
    m->allowed = allowed;
    for (guint64 a = start; a < end && m->left > 0;
         a += CHUNK_PAGES * m->page_size) {
      guint n = (guint)MIN((guint64)CHUNK_PAGES, (end - a) / m->page_size);
      if (n > 0 && !move_chunk(m, (guintptr)a, n, error))
        return FALSE;
    }
  }
  *moved_mib = m->moved_kib / 1024;
  return TRUE;
}

/* ---- The binding: a cgroup of qemu-pin's own ---------------------------- */

static gboolean
write_file(const char *path, const char *value, GError **error)
{
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0 || write(fd, value, strlen(value)) < 0) {
    g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
                "cannot write '%s' to %s: %s", value, path, g_strerror(errno));
    if (fd >= 0)
      close(fd);
    return FALSE;
  }
  close(fd);
  return TRUE;
}

/* QEMU's cgroup v2 path ("/" for the root), or NULL. */
static char *
cgroup_of(int pid)
{
  g_autofree char *path = g_strdup_printf("/proc/%d/cgroup", pid);
  g_autofree char *text = NULL;
  if (!g_file_get_contents(path, &text, NULL, NULL))
    return NULL;
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    if (g_str_has_prefix(lines[i], "0::"))
      return g_strdup(lines[i] + 3);
  return NULL;
}

static gboolean
has_cpuset(const char *dir)
{
  g_autofree char *path = g_build_filename(dir, "cgroup.controllers", NULL);
  g_autofree char *text = NULL;
  if (!g_file_get_contents(path, &text, NULL, NULL))
    return FALSE;
  g_auto(GStrv) words = g_strsplit_set(text, " \n", -1);
  return g_strv_contains((const char *const *)words, "cpuset");
}

gboolean
qp_mem_binding_movable(int pid, uid_t uid, const char *id, char **why)
{
  g_autofree char *in = cgroup_of(pid);
  g_autofree char *ours = g_strdup_printf("/qemu-pin/%s", id);
  if (in != NULL && strcmp(in, ours) == 0)
    return TRUE;
  if (uid != 0) {
    *why = g_strdup("qemu-pin runs as a user: only root may make a cgroup "
                    "for QEMU");
    return FALSE;
  }
  if (in == NULL || !has_cpuset(CGROUP_ROOT)) {
    *why = g_strdup("no cgroup v2 with the cpuset controller at " CGROUP_ROOT);
    return FALSE;
  }
  if (strcmp(in, "/") != 0) {
    *why = g_strdup_printf("QEMU's cgroup %s is its orchestrator's "
                           "(libvirt, systemd, Proxmox)",
                           in);
    return FALSE;
  }
  return TRUE;
}

char *
qp_mem_own_cgroup(int pid, const char *id, char **why)
{
  g_autofree char *dir = g_strdup_printf(CGROUP_OURS "/%s", id);
  if (!qp_mem_binding_movable(pid, geteuid(), id, why))
    return NULL;
  g_autofree char *in = cgroup_of(pid);
  if (g_strcmp0(in, "/") != 0)
    return g_steal_pointer(&dir); /* ours already */
  g_autoptr(GError) error = NULL;
  g_autofree char *pid_text = g_strdup_printf("%d", pid);
  g_autofree char *procs = g_build_filename(dir, "cgroup.procs", NULL);
  if (!write_file(CGROUP_ROOT "/cgroup.subtree_control", "+cpuset", &error) ||
      (mkdir(CGROUP_OURS, 0755) < 0 && errno != EEXIST) ||
      !write_file(CGROUP_OURS "/cgroup.subtree_control", "+cpuset", &error) ||
      (mkdir(dir, 0755) < 0 && errno != EEXIST) ||
      !write_file(procs, pid_text, &error)) {
    *why = error != NULL
               ? g_strdup(error->message)
               : g_strdup_printf("cannot make %s: %s", dir, g_strerror(errno));
    rmdir(dir);
    return NULL;
  }
  return g_steal_pointer(&dir);
}

gboolean
qp_mem_rebind(const char *cgroup, hwloc_const_bitmap_t nodes, GError **error)
{
  g_autofree char *mems = g_build_filename(cgroup, "cpuset.mems", NULL);
  g_autofree char *list = qp_list_format(nodes);
  return write_file(mems, list, error);
}

void
qp_mem_cgroup_remove(const char *id)
{
  g_autofree char *dir = g_strdup_printf(CGROUP_OURS "/%s", id);
  rmdir(dir);
}
