/* The host snapshot's text format (see snapshot-text.h): written once a
 * boot, read by every launch, so the reader reads in place and allocates
 * only what the host keeps. */
#include "topology/host/snapshot-text.h"

#include <stdlib.h>
#include <string.h>

#include "topology/base/cpulist.h"
#include "topology/base/dir-file.h"

/* Bounds of what is read: Linux's CPUs (cpulist.h), and nodes enough for
 * any host while the distance matrix stays a few MiB. */
#define MAX_CPUS (QP_LIST_MAX_INDEX + 1)
#define MAX_NODES 1024

/* ---- Writing ------------------------------------------------------------ */

/* Text that reads back as it was: one line, no control characters. */
static gboolean
plain(const char *s)
{
  for (const char *p = s; *p != '\0'; p++)
    if ((guchar)*p < 0x20 || *p == 0x7f)
      return FALSE;
  return TRUE;
}

/* SET as a list, "-" when empty; FALSE for a set past the CPUs a list may
 * name (or without end). */
static gboolean
append_list(GString *out, hwloc_const_bitmap_t set)
{
  if (hwloc_bitmap_iszero(set)) {
    g_string_append_c(out, '-');
    return TRUE;
  }
  if (hwloc_bitmap_weight(set) < 0 || hwloc_bitmap_last(set) >= MAX_CPUS)
    return FALSE;
  char *s = NULL;
  if (hwloc_bitmap_list_asprintf(&s, set) < 0)
    g_error("out of memory");
  g_string_append(out, s);
  free(s);
  return TRUE;
}

static gboolean
append_node(GString *out, const QpNode *n)
{
  g_string_append_printf(out, "node %d %" G_GUINT64_FORMAT " ", n->id,
                         n->total_mib);
  if (!append_list(out, n->all_cpus))
    return FALSE;
  g_string_append_c(out, ' ');
  if (n->hugepages == NULL || n->hugepages->len == 0)
    g_string_append_c(out, '-');
  for (guint j = 0; n->hugepages != NULL && j < n->hugepages->len; j++) {
    const QpHugePool *p = &g_array_index(n->hugepages, QpHugePool, j);
    g_string_append_printf(out, "%s%" G_GUINT64_FORMAT ":%" G_GUINT64_FORMAT,
                           j > 0 ? "," : "", p->page_kib, p->total);
  }
  g_string_append_c(out, '\n');
  return TRUE;
}

/* The lines of HOST after the key, or FALSE. */
static gboolean
append_host(GString *out, const QpHost *host)
{
  if ((host->pci != NULL && host->pci->len > 0) || host->source == NULL ||
      host->source[0] == '\0' || !plain(host->source) ||
      (host->inconsistent != NULL && !plain(host->inconsistent)))
    return FALSE;
  g_string_append_printf(out, "host %u %u %u %u %u\nsource %s\ncpuset ",
                         host->n_nodes, host->n_cores, host->n_cpus,
                         host->n_kinds, host->n_domains, host->source);
  if (!append_list(out, host->allowed))
    return FALSE;
  g_string_append(out, "\nnodeset ");
  if (!append_list(out, host->allowed_nodes))
    return FALSE;
  g_string_append_c(out, '\n');
  for (guint i = 0; i < host->n_nodes; i++)
    if (!append_node(out, &host->nodes[i]))
      return FALSE;
  for (guint k = 0; k < host->n_kinds; k++) {
    if (!plain(host->kind_names[k]))
      return FALSE;
    g_string_append_printf(out, "kind %d %s\n", host->kind_efficiency[k],
                           host->kind_names[k]);
  }
  for (guint d = 0; d < host->n_domains; d++) {
    const QpCacheDomain *cd = &host->domains[d];
    g_string_append_printf(out, "domain %d %d %" G_GUINT64_FORMAT " %u ",
                           cd->level, cd->node, cd->size_kib, cd->n_cores);
    if (!append_list(out, cd->cpus))
      return FALSE;
    g_string_append_c(out, '\n');
  }
  for (guint c = 0; c < host->n_cores; c++) {
    const QpCore *core = &host->cores[c];
    g_string_append_printf(out, "core %d %d %d %d ", core->package, core->node,
                           core->domain[QP_CACHE_L3],
                           core->domain[QP_CACHE_L2]);
    if (!append_list(out, core->pus))
      return FALSE;
    g_string_append_c(out, '\n');
  }
  for (guint c = 0; c < host->n_cpus; c++) {
    const QpCpu *cpu = &host->cpus[c];
    g_string_append_printf(out, "cpu %d %d %d %d %d\n", cpu->id, cpu->core,
                           cpu->node, cpu->package, cpu->kind);
  }
  for (guint i = 0; i < host->n_nodes; i++) {
    g_string_append(out, "distance");
    for (guint j = 0; j < host->n_nodes; j++)
      g_string_append_printf(out, " %u", qp_host_distance_at(host, i, j));
    g_string_append_c(out, '\n');
  }
  if (host->inconsistent != NULL)
    g_string_append_printf(out, "inconsistent %s\n", host->inconsistent);
  return TRUE;
}

char *
qp_host_snapshot_format(const QpHost *host, const char *key)
{
  GString *out = g_string_new(QP_HOST_SNAPSHOT_HEADER);
  g_string_append(out, key);
  if (!append_host(out, host)) {
    g_string_free(out, TRUE);
    return NULL;
  }
  guint64 hash = qp_dir_file_hash(out->str, out->len);
  g_string_append_printf(out, "end %016" G_GINT64_MODIFIER "x\n", hash);
  return g_string_free(out, FALSE);
}

/* ---- Reading ------------------------------------------------------------ */

typedef struct {
  const char *p;   /* the next byte */
  const char *end; /* where the end line starts: nothing is read past it */
} Reader;

/* "WORD " at R. */
static gboolean
word(Reader *r, const char *w)
{
  gsize n = strlen(w);
  if ((gsize)(r->end - r->p) <= n || memcmp(r->p, w, n) != 0 || r->p[n] != ' ')
    return FALSE;
  r->p += n + 1;
  return TRUE;
}

/* The token at R (up to a space or the line's end) in *START and *LEN, and
 * past it the space, or when LAST the newline. */
static gboolean
token(Reader *r, gboolean last, const char **start, gsize *len)
{
  const char *p = r->p;
  while (p < r->end && *p != ' ' && *p != '\n')
    p++;
  if (p == r->p || p == r->end || *p != (last ? '\n' : ' '))
    return FALSE;
  *start = r->p;
  *len = (gsize)(p - r->p);
  r->p = p + 1;
  return TRUE;
}

/* A decimal number written as the writer does (no sign, no leading zero)
 * from *P up to END, at most MAX. */
static gboolean
digits(const char **p, const char *end, guint64 max, guint64 *out)
{
  return qp_decimal_read(p, end, max, TRUE, out);
}

static gboolean
u64(Reader *r, guint64 max, gboolean last, guint64 *out)
{
  const char *s = NULL;
  gsize len = 0;
  if (!token(r, last, &s, &len))
    return FALSE;
  return digits(&s, s + len, max, out) && s == r->p - 1;
}

/* A number from MIN (-1 or more) to MAX. */
static gboolean
int_field(Reader *r, int min, int max, gboolean last, int *out)
{
  const char *s = NULL;
  gsize len = 0;
  guint64 v = 0;
  if (!token(r, last, &s, &len))
    return FALSE;
  if (len == 2 && memcmp(s, "-1", 2) == 0 && min <= -1) {
    *out = -1;
    return TRUE;
  }
  if (max < 0 || !digits(&s, s + len, (guint64)max, &v) || s != r->p - 1 ||
      (gint64)v < min)
    return FALSE;
  *out = (int)v;
  return TRUE;
}

/* A list, "-" for the empty set. */
static gboolean
list(Reader *r, gboolean last, hwloc_bitmap_t *out)
{
  const char *s = NULL;
  gsize len = 0;
  if (!token(r, last, &s, &len))
    return FALSE;
  if (len == 1 && *s == '-') {
    *out = hwloc_bitmap_alloc();
    return TRUE;
  }
  char buf[512];
  g_autofree char *big = len < sizeof buf ? NULL : g_strndup(s, len);
  char *text = big != NULL ? big : buf;
  if (big == NULL) {
    memcpy(buf, s, len);
    buf[len] = '\0';
  }
  return qp_list_parse(text, "snapshot", QP_LIST_MAX_INDEX, out, NULL);
}

/* The rest of the line, plain text, and past its newline. */
static gboolean
rest(Reader *r, char **out)
{
  const char *nl = memchr(r->p, '\n', (gsize)(r->end - r->p));
  if (nl == NULL)
    return FALSE;
  for (const char *q = r->p; q < nl; q++)
    if ((guchar)*q < 0x20 || *q == 0x7f)
      return FALSE;
  *out = g_strndup(r->p, (gsize)(nl - r->p));
  r->p = nl + 1;
  return TRUE;
}

/* "-" or PAGE_KIB:PAGES,... in ascending page size. */
static gboolean
pools(Reader *r, GArray *out)
{
  const char *s = NULL;
  gsize len = 0;
  if (!token(r, TRUE, &s, &len))
    return FALSE;
  if (len == 1 && *s == '-')
    return TRUE;
  for (const char *p = s, *end = s + len;;) {
    QpHugePool pool = {0};
    if (!digits(&p, end, G_MAXUINT64, &pool.page_kib) || p == end ||
        *p++ != ':' || !digits(&p, end, G_MAXUINT64, &pool.total))
      return FALSE;
    if (out->len > 0 &&
        g_array_index(out, QpHugePool, out->len - 1).page_kib >= pool.page_kib)
      return FALSE;
    pool.free = pool.total;
    g_array_append_val(out, pool);
    if (p == end)
      return TRUE;
    if (*p++ != ',')
      return FALSE;
  }
}

/* A node id of HOST, or -1 when NONE_OK. */
static gboolean
node_ref(Reader *r, const QpHost *host, gboolean none_ok, gboolean last,
         int *out)
{
  return int_field(r, none_ok ? -1 : 0, G_MAXINT, last, out) &&
         (*out == -1 || qp_host_node_index(host, *out) >= 0);
}

static gboolean
read_nodes(Reader *r, QpHost *host)
{
  for (guint i = 0; i < host->n_nodes; i++) {
    QpNode *n = &host->nodes[i];
    n->hugepages = g_array_new(FALSE, TRUE, sizeof(QpHugePool));
    n->cpus = hwloc_bitmap_alloc();
    if (!word(r, "node") || !int_field(r, 0, G_MAXINT, FALSE, &n->id) ||
        (i > 0 && n->id <= host->nodes[i - 1].id) ||
        !u64(r, G_MAXUINT64, FALSE, &n->total_mib) ||
        !list(r, FALSE, &n->all_cpus) || !pools(r, n->hugepages))
      return FALSE;
    n->free_mib = n->total_mib;
  }
  return TRUE;
}

static gboolean
read_kinds(Reader *r, QpHost *host)
{
  for (guint k = 0; k < host->n_kinds; k++)
    if (!word(r, "kind") ||
        !int_field(r, -1, G_MAXINT, FALSE, &host->kind_efficiency[k]) ||
        !rest(r, &host->kind_names[k]))
      return FALSE;
  return TRUE;
}

static gboolean
read_domains(Reader *r, QpHost *host)
{
  for (guint d = 0; d < host->n_domains; d++) {
    QpCacheDomain *cd = &host->domains[d];
    int n_cores = 0;
    if (!word(r, "domain") ||
        !int_field(r, 0, QP_CACHE_LEVELS - 1, FALSE, &cd->level) ||
        !node_ref(r, host, FALSE, FALSE, &cd->node) ||
        !u64(r, G_MAXUINT64, FALSE, &cd->size_kib) ||
        !int_field(r, 1, (int)host->n_cores, FALSE, &n_cores) ||
        !list(r, TRUE, &cd->cpus) || hwloc_bitmap_iszero(cd->cpus))
      return FALSE;
    cd->n_cores = (guint)n_cores;
  }
  return TRUE;
}

/* A core's domain at LEVEL: -1, or a domain of that level. */
static gboolean
domain_ref(Reader *r, const QpHost *host, int level, int *out)
{
  return int_field(r, -1, (int)host->n_domains - 1, FALSE, out) &&
         (*out == -1 || host->domains[*out].level == level);
}

static gboolean
read_cores(Reader *r, QpHost *host)
{
  for (guint c = 0; c < host->n_cores; c++) {
    QpCore *core = &host->cores[c];
    if (!word(r, "core") ||
        !int_field(r, -1, G_MAXINT, FALSE, &core->package) ||
        !node_ref(r, host, TRUE, FALSE, &core->node) ||
        !domain_ref(r, host, QP_CACHE_L3, &core->domain[QP_CACHE_L3]) ||
        !domain_ref(r, host, QP_CACHE_L2, &core->domain[QP_CACHE_L2]) ||
        !list(r, TRUE, &core->pus) || hwloc_bitmap_iszero(core->pus))
      return FALSE;
  }
  return TRUE;
}

/* The CPUs, each in its core's PUs and its node's CPUs, which hold no
 * other: the indexes the planner follows agree. ALL gets every CPU. */
static gboolean
read_cpus(Reader *r, QpHost *host, hwloc_bitmap_t all)
{
  int in_nodes = 0, in_cores = 0;
  for (guint c = 0; c < host->n_cpus; c++) {
    QpCpu *cpu = &host->cpus[c];
    if (!word(r, "cpu") ||
        !int_field(r, 0, QP_LIST_MAX_INDEX, FALSE, &cpu->id) ||
        (c > 0 && cpu->id <= host->cpus[c - 1].id) ||
        !int_field(r, 0, (int)host->n_cores - 1, FALSE, &cpu->core) ||
        !node_ref(r, host, TRUE, FALSE, &cpu->node) ||
        !int_field(r, -1, G_MAXINT, FALSE, &cpu->package) ||
        !int_field(r, 0, (int)host->n_kinds - 1, TRUE, &cpu->kind) ||
        !hwloc_bitmap_isset(host->cores[cpu->core].pus, (unsigned)cpu->id))
      return FALSE;
    int ni = qp_host_node_index(host, cpu->node);
    if (ni >= 0 &&
        !hwloc_bitmap_isset(host->nodes[ni].all_cpus, (unsigned)cpu->id))
      return FALSE;
    in_nodes += ni >= 0;
    hwloc_bitmap_set(all, (unsigned)cpu->id);
  }
  for (guint c = 0; c < host->n_cores; c++)
    in_cores += hwloc_bitmap_weight(host->cores[c].pus);
  for (guint i = 0; i < host->n_nodes; i++)
    in_nodes -= hwloc_bitmap_weight(host->nodes[i].all_cpus);
  return in_cores == (int)host->n_cpus && in_nodes == 0;
}

static gboolean
read_distances(Reader *r, QpHost *host)
{
  const guint n = host->n_nodes;
  host->distance = g_new(guint, (gsize)n * n);
  for (guint i = 0; i < n; i++) {
    if (!word(r, "distance"))
      return FALSE;
    for (guint j = 0; j < n; j++) {
      guint64 v = 0;
      if (!u64(r, G_MAXUINT, j == n - 1, &v))
        return FALSE;
      host->distance[i * n + j] = (guint)v;
    }
  }
  return TRUE;
}

/* The host lines of R, up to its end line, into HOST (counts set). */
static gboolean
read_host(Reader *r, QpHost *host)
{
  g_auto(hwloc_bitmap_t) all = hwloc_bitmap_alloc();
  if (!word(r, "source") || !rest(r, &host->source) ||
      host->source[0] == '\0' || !word(r, "cpuset") ||
      !list(r, TRUE, &host->allowed) || !word(r, "nodeset") ||
      !list(r, TRUE, &host->allowed_nodes) || !read_nodes(r, host) ||
      !read_kinds(r, host) || !read_domains(r, host) || !read_cores(r, host) ||
      !read_cpus(r, host, all) || !read_distances(r, host) ||
      !hwloc_bitmap_isincluded(host->allowed, all))
    return FALSE;
  if (r->p < r->end &&
      (!word(r, "inconsistent") || !rest(r, &host->inconsistent)))
    return FALSE;
  return r->p == r->end;
}

/* The counts of the host line, and HOST's arrays made for them (zeroed, so
 * that qp_host_free() takes a host read halfway). */
static gboolean
read_counts(Reader *r, QpHost *host)
{
  guint64 v[5];
  const guint64 max[5] = {MAX_NODES, MAX_CPUS, MAX_CPUS, MAX_CPUS,
                          2 * MAX_CPUS};
  if (!word(r, "host"))
    return FALSE;
  for (guint i = 0; i < 5; i++)
    if (!u64(r, max[i], i == 4, &v[i]))
      return FALSE;
  if (v[2] == 0 || v[1] == 0 || v[1] > v[2] || v[3] == 0 || v[3] > v[2] ||
      v[4] > 2 * v[1])
    return FALSE;
  host->n_nodes = (guint)v[0];
  host->n_cores = (guint)v[1];
  host->n_cpus = (guint)v[2];
  host->n_kinds = (guint)v[3];
  host->n_domains = (guint)v[4];
  host->nodes = g_new0(QpNode, MAX(host->n_nodes, 1));
  host->cores = g_new0(QpCore, host->n_cores);
  host->cpus = g_new0(QpCpu, host->n_cpus);
  host->kind_names = g_new0(char *, host->n_kinds + 1);
  host->kind_efficiency = g_new0(int, host->n_kinds);
  host->domains = g_new0(QpCacheDomain, MAX(host->n_domains, 1));
  host->pci = g_array_new(FALSE, TRUE, sizeof(QpPciDevice));
  return TRUE;
}

/* Where TEXT's end line starts, when it is the last line and its hash is
 * of everything before it; else NULL. */
static const char *
end_line(const char *text, gsize len)
{
  const gsize el = strlen("end ") + 16 + 1;
  if (len < el || text[len - 1] != '\n')
    return NULL;
  const char *end = text + len - el;
  guint64 hash = 0;
  char hex[17];
  memcpy(hex, end + 4, 16);
  hex[16] = '\0';
  if (memcmp(end, "end ", 4) != 0 || (end > text && end[-1] != '\n') ||
      strspn(hex, "0123456789abcdef") != 16 ||
      !g_ascii_string_to_unsigned(hex, 16, 0, G_MAXUINT64, &hash, NULL) ||
      hash != qp_dir_file_hash(text, (gsize)(end - text)))
    return NULL;
  return end;
}

QpHost *
qp_host_snapshot_parse(const char *text, gsize len, const char *key)
{
  const gsize hl = strlen(QP_HOST_SNAPSHOT_HEADER), kl = strlen(key);
  const char *end = end_line(text, len);
  if (end == NULL || (gsize)(end - text) < hl + kl ||
      memcmp(text, QP_HOST_SNAPSHOT_HEADER, hl) != 0 ||
      memcmp(text + hl, key, kl) != 0)
    return NULL;
  Reader r = {text + hl + kl, end};
  g_autoptr(QpHost) host = g_new0(QpHost, 1);
  if (!read_counts(&r, host) || !read_host(&r, host))
    return NULL;
  qp_host_set_allowed(host, host->allowed);
  return g_steal_pointer(&host);
}
