/* What the kernel can give on each node now (see node-memory.h). */
#include "topology/host/node-memory.h"

#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "topology/base/cpulist.h"
#include "topology/base/dir-file.h"

#define QP_NODE_DIR "/sys/devices/system/node"
#define QP_ZONEINFO "/proc/zoneinfo"
#define QP_ARCSTATS "/proc/spl/kstat/zfs/arcstats"
#define QP_VM_SYSCTL "/proc/sys/vm/"
#define QP_WATERMARKS_HEADER "qemu-pin-watermarks 1\n"
/* A sysctl's text: far more than any has. */
#define QP_SYSCTL_MAX 4096

/* The files whose writes make the kernel compute its watermarks anew. */
static const char *const watermark_sysctls[] = {
    "min_free_kbytes",
    "watermark_scale_factor",
    "lowmem_reserve_ratio",
};

/* ---- Parsing ------------------------------------------------------------ */

static const char *
skip_blanks(const char *p, const char *end)
{
  while (p < end && (*p == ' ' || *p == '\t'))
    p++;
  return p;
}

static const char *
word_end(const char *p, const char *end)
{
  while (p < end && *p != ' ' && *p != '\t')
    p++;
  return p;
}

/* "Node 0 MemFree:   4449924 kB", the line from LINE to END: KEY (without
 * the colon) and its value. Read in place: a launch reads every node's
 * file, and splitting each line into words cost more than the rest of the
 * host's load. */
static gboolean
meminfo_line(const char *line, const char *end, char *key, gsize key_size,
             guint64 *value)
{
  const char *w[4][2];
  const char *p = line;
  guint k = 0;
  for (; k < 4; k++) {
    p = skip_blanks(p, end);
    if (p == end)
      return FALSE;
    w[k][0] = p;
    p = word_end(p, end);
    w[k][1] = p;
  }
  gsize len = (gsize)(w[2][1] - w[2][0]);
  if (w[0][1] - w[0][0] != 4 || memcmp(w[0][0], "Node", 4) != 0 || len < 2 ||
      w[2][1][-1] != ':' || len > key_size)
    return FALSE;
  memcpy(key, w[2][0], len - 1);
  key[len - 1] = '\0';
  const char *d = w[3][0];
  return qp_decimal_read(&d, w[3][1], G_MAXUINT64, FALSE, value) &&
         d == w[3][1];
}

gboolean
qp_node_meminfo_parse(const char *text, QpNodeKernelMemory *out)
{
  guint64 total = 0, free = 0, active_file = 0, inactive_file = 0;
  guint64 kreclaimable = 0, sreclaimable = 0, file_pages = 0, anon = 0;
  guint64 slab = 0, stack = 0, tables = 0, sec_tables = 0;
  gboolean has_total = FALSE, has_free = FALSE, has_kreclaimable = FALSE;
  for (const char *line = text; *line != '\0';) {
    const char *end = strchrnul(line, '\n');
    const char *next = *end == '\n' ? end + 1 : end;
    char key[64];
    guint64 v = 0;
    gboolean ok = meminfo_line(line, end, key, sizeof key, &v);
    line = next;
    if (!ok)
      continue;
    struct {
      const char *key;
      guint64 *to;
      gboolean *seen;
    } known[] = {
        {"MemTotal", &total, &has_total},
        {"MemFree", &free, &has_free},
        {"Active(file)", &active_file, NULL},
        {"Inactive(file)", &inactive_file, NULL},
        {"KReclaimable", &kreclaimable, &has_kreclaimable},
        {"SReclaimable", &sreclaimable, NULL},
        {"FilePages", &file_pages, NULL},
        {"AnonPages", &anon, NULL},
        {"Slab", &slab, NULL},
        {"KernelStack", &stack, NULL},
        {"PageTables", &tables, NULL},
        {"SecPageTables", &sec_tables, NULL},
    };
    for (guint k = 0; k < G_N_ELEMENTS(known); k++)
      if (strcmp(key, known[k].key) == 0) {
        *known[k].to = v;
        if (known[k].seen != NULL)
          *known[k].seen = TRUE;
      }
  }
  if (!has_total || !has_free)
    return FALSE;
  out->read = TRUE;
  out->total_kib = total;
  out->free_kib = MIN(free, total);
  out->file_kib = active_file + inactive_file;
  out->reclaimable_kib = has_kreclaimable ? kreclaimable : sreclaimable;
  /* Hugepage pools are used memory no counter names: the caller's. */
  guint64 explained = out->free_kib + file_pages + anon + slab + stack +
                      tables + sec_tables + out->pools_kib;
  out->unaccounted_kib = total > explained ? total - explained : 0;
  return TRUE;
}

/* "Node 3, zone   Normal": 3. */
static gboolean
zone_header(const char *line, int *node)
{
  if (!g_str_has_prefix(line, "Node "))
    return FALSE;
  char *end = NULL;
  guint64 v = g_ascii_strtoull(line + 5, &end, 10);
  if (end == line + 5 || *end != ',' || v > G_MAXINT)
    return FALSE;
  *node = (int)v;
  return TRUE;
}

/* "protection: (0, 3018, 4938, 4938, 4938)": the largest. */
static guint64
max_protection(const char *rest)
{
  guint64 best = 0;
  for (const char *p = rest; *p != '\0'; p++)
    if (g_ascii_isdigit(*p) && (p == rest || !g_ascii_isdigit(p[-1]))) {
      guint64 v = g_ascii_strtoull(p, NULL, 10);
      best = MAX(best, v);
    }
  return best;
}

typedef struct {
  guint64 boost, low, high, managed, protection;
  gboolean any;
} Zone;

static void
zone_done(Zone *z, QpNodeKernelMemory *m, guint64 page_kib)
{
  if (m != NULL && z->any) {
    /* The printed watermarks include the zone's watermark_boost, which the
     * kernel adds for a while after a fragmenting allocation and kswapd
     * takes back; totalreserve_pages is computed when the watermarks are
     * set, with no boost. Without it, the figures change only when the
     * kernel computes its watermarks anew. */
    guint64 low = z->low - MIN(z->boost, z->low);
    guint64 high = z->high - MIN(z->boost, z->high);
    m->low_kib += low * page_kib;
    /* calculate_totalreserve_pages(): high watermark plus the largest
     * lowmem reserve, at most the zone's managed pages. */
    m->reserve_kib += MIN(high + z->protection, z->managed) * page_kib;
  }
  memset(z, 0, sizeof(*z));
}

static QpNodeKernelMemory *
node_of(QpNodeKernelMemory *out, guint n, int node)
{
  for (guint i = 0; i < n; i++)
    if (out[i].node == node)
      return &out[i];
  return NULL;
}

void
qp_zoneinfo_parse(const char *text, guint64 page_kib, QpNodeKernelMemory *out,
                  guint n)
{
  QpNodeKernelMemory *cur = NULL;
  Zone z = {0};
  /* Each line in place, as meminfo's: the file has a few hundred. */
  g_autofree char *line = NULL;
  for (const char *at = text; *at != '\0';) {
    const char *end = strchrnul(at, '\n');
    const char *p = skip_blanks(at, end);
    const char *start = at;
    at = *end == '\n' ? end + 1 : end;
    /* "boost 0", "min 51", "low 63", "high 75", "managed 3840",
     * "protection: (...)", "Node 0, zone Normal"; the pagesets' "high:" has
     * a colon and is no watermark. */
    char word[32];
    gsize len = (gsize)(word_end(p, end) - p);
    if (len == 0 || len >= sizeof word)
      continue;
    memcpy(word, p, len);
    word[len] = '\0';
    if (strcmp(word, "Node") == 0 || strcmp(word, "protection:") == 0) {
      g_free(line);
      line = g_strndup(start, (gsize)(end - start));
      int node = -1;
      if (zone_header(line, &node)) {
        zone_done(&z, cur, page_kib);
        cur = node_of(out, n, node);
      } else if (word[0] == 'p') {
        z.protection = max_protection(line + (p - start) + len);
        z.any = TRUE;
      }
      continue;
    }
    const char *rest = p + len;
    guint64 *to = strcmp(word, "boost") == 0     ? &z.boost
                  : strcmp(word, "low") == 0     ? &z.low
                  : strcmp(word, "high") == 0    ? &z.high
                  : strcmp(word, "managed") == 0 ? &z.managed
                                                 : NULL;
    if (to == NULL)
      continue;
    while (*rest == ' ' || *rest == '\t')
      rest++;
    *to = g_ascii_strtoull(rest, NULL, 10);
    z.any = TRUE;
  }
  zone_done(&z, cur, page_kib);
}

guint64
qp_arcstats_reclaimable_kib(const char *text)
{
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  guint64 size = 0, c_min = 0;
  gboolean has_size = FALSE, has_min = FALSE;
  for (guint i = 0; lines[i] != NULL; i++) {
    /* "size                            4    8589934592" */
    g_auto(GStrv) t = g_strsplit_set(lines[i], " \t", -1);
    const char *words[3] = {NULL};
    guint k = 0;
    for (guint j = 0; t[j] != NULL && k < 3; j++)
      if (*t[j] != '\0')
        words[k++] = t[j];
    if (k < 3)
      continue;
    char *end = NULL;
    guint64 v = g_ascii_strtoull(words[2], &end, 10);
    if (end == words[2] || *end != '\0')
      continue;
    if (strcmp(words[0], "size") == 0) {
      size = v;
      has_size = TRUE;
    } else if (strcmp(words[0], "c_min") == 0) {
      c_min = v;
      has_min = TRUE;
    }
  }
  if (!has_size || !has_min || size <= c_min)
    return 0;
  return (size - c_min) / 1024;
}

void
qp_arc_share(guint64 arc_kib, QpNodeKernelMemory *out, guint n)
{
  guint64 sum = 0;
  for (guint i = 0; i < n; i++)
    sum += out[i].unaccounted_kib;
  for (guint i = 0; i < n; i++) {
    if (sum == 0)
      break;
    /* In proportion, in 128-bit arithmetic: both may be terabytes. */
    guint64 share =
        (guint64)((unsigned __int128)arc_kib * out[i].unaccounted_kib / sum);
    out[i].arc_kib = MIN(share, out[i].unaccounted_kib);
  }
}

guint64
qp_node_kernel_can_give_kib(const QpNodeKernelMemory *m)
{
  if (!m->read)
    return 0;
  gint64 avail = (gint64)m->free_kib - (gint64)m->reserve_kib;
  /* The kernel keeps part of the page cache and of reclaimable slab to
   * work with: half of each, at most the low watermark. */
  guint64 cache = m->file_kib - MIN(m->file_kib / 2, m->low_kib);
  guint64 slab = m->reclaimable_kib - MIN(m->reclaimable_kib / 2, m->low_kib);
  avail += (gint64)(cache + slab + m->arc_kib);
  if (avail < 0)
    return 0;
  return MIN((guint64)avail, m->total_kib);
}

/* ---- Kept watermark figures -------------------------------------------- */

/* TEXT as one line of a kept text: its ends' blanks dropped, and any
 * control character but a tab a space. */
static void
one_line(GString *to, const char *text)
{
  const char *end = text + strlen(text);
  while (end > text && g_ascii_isspace(end[-1]))
    end--;
  for (const char *p = text; p < end; p++)
    g_string_append_c(to, (g_ascii_iscntrl(*p) && *p != '\t') ? ' ' : *p);
  g_string_append_c(to, '\n');
}

char *
qp_watermarks_key(const char *root, const QpNodeKernelMemory *out, guint n)
{
  struct utsname u;
  if (uname(&u) != 0)
    return NULL;
  g_autoptr(GString) key = g_string_new("kernel ");
  g_autofree char *kernel = g_strconcat(u.release, " ", u.version, NULL);
  one_line(key, kernel);
  for (guint i = 0; i < G_N_ELEMENTS(watermark_sysctls); i++) {
    g_autofree char *path =
        g_strconcat(root, QP_VM_SYSCTL, watermark_sysctls[i], NULL);
    g_autofree char *text = qp_file_read_text(path, QP_SYSCTL_MAX);
    if (text == NULL || strlen(text) >= QP_SYSCTL_MAX)
      return NULL;
    g_string_append_printf(key, "%s ", watermark_sysctls[i]);
    one_line(key, text);
  }
  for (guint i = 0; i < n; i++) {
    if (!out[i].read)
      return NULL;
    g_string_append_printf(key, "total %d %" G_GUINT64_FORMAT "\n", out[i].node,
                           out[i].total_kib);
  }
  return g_string_free(g_steal_pointer(&key), FALSE);
}

char *
qp_watermarks_format(const char *key, const QpNodeKernelMemory *m, guint n)
{
  GString *text = g_string_new(QP_WATERMARKS_HEADER);
  g_string_append(text, key);
  for (guint i = 0; i < n; i++)
    g_string_append_printf(
        text, "node %d %" G_GUINT64_FORMAT " %" G_GUINT64_FORMAT "\n",
        m[i].node, m[i].low_kib, m[i].reserve_kib);
  g_string_append_printf(text, "end %016" G_GINT64_MODIFIER "x\n",
                         qp_dir_file_hash(text->str, text->len));
  return g_string_free(text, FALSE);
}

/* The decimal number at *P, as the writer writes it, up to the character
 * STOP; *P moved past STOP. */
static gboolean
kept_number(const char **p, char stop, guint64 *v)
{
  const char *d = *p;
  if (!qp_decimal_read(&d, NULL, G_MAXUINT64, TRUE, v) || *d != stop)
    return FALSE;
  *p = d + 1;
  return TRUE;
}

gboolean
qp_watermarks_parse(const char *text, const char *key, QpNodeKernelMemory *out,
                    guint n)
{
  const gsize head = strlen(QP_WATERMARKS_HEADER), key_len = strlen(key);
  if (strncmp(text, QP_WATERMARKS_HEADER, head) != 0 ||
      strncmp(text + head, key, key_len) != 0)
    return FALSE;
  const char *p = text + head + key_len;
  g_autofree guint64 *figures = g_new(guint64, 2 * (gsize)MAX(n, 1));
  for (guint i = 0; i < n; i++) {
    g_autofree char *start = g_strdup_printf("node %d ", out[i].node);
    if (!g_str_has_prefix(p, start))
      return FALSE;
    p += strlen(start);
    if (!kept_number(&p, ' ', &figures[2 * i]) ||
        !kept_number(&p, '\n', &figures[2 * i + 1]))
      return FALSE;
  }
  /* "end " and 16 hex digits of the hash of all before it, and nothing
   * after. */
  gsize body = (gsize)(p - text);
  g_autofree char *end = g_strdup_printf("end %016" G_GINT64_MODIFIER "x\n",
                                         qp_dir_file_hash(text, body));
  if (strcmp(p, end) != 0)
    return FALSE;
  for (guint i = 0; i < n; i++) {
    out[i].low_kib = figures[2 * i];
    out[i].reserve_kib = figures[2 * i + 1];
  }
  return TRUE;
}

/* ---- Reading ------------------------------------------------------------ */

static char *
read_text(const char *root, const char *path)
{
  g_autofree char *full = g_strconcat(root, path, NULL);
  return qp_file_read_text(full, G_MAXINT);
}

void
qp_node_kernel_memory_read(const char *root, QpNodeKernelMemory *out, guint n,
                           QpWatermarkCache *cache)
{
  for (guint i = 0; i < n; i++) {
    g_autofree char *path =
        g_strdup_printf(QP_NODE_DIR "/node%d/meminfo", out[i].node);
    g_autofree char *text = read_text(root, path);
    if (text == NULL || !qp_node_meminfo_parse(text, &out[i]))
      out[i].read = FALSE;
  }
  g_autofree char *key = cache != NULL ? qp_watermarks_key(root, out, n) : NULL;
  if (key != NULL && cache->kept != NULL &&
      qp_watermarks_parse(cache->kept, key, out, n)) {
    cache->used = TRUE;
  } else {
    long page = sysconf(_SC_PAGESIZE);
    g_autofree char *zones = read_text(root, QP_ZONEINFO);
    if (zones != NULL) {
      qp_zoneinfo_parse(zones, page > 0 ? (guint64)page / 1024 : 4, out, n);
      if (key != NULL)
        cache->fresh = qp_watermarks_format(key, out, n);
    }
  }
  g_autofree char *arc = read_text(root, QP_ARCSTATS);
  if (arc != NULL)
    qp_arc_share(qp_arcstats_reclaimable_kib(arc), out, n);
}

void
qp_host_read_node_memory(QpHost *host, QpWatermarkCache *cache)
{
  const char *root = g_getenv("HWLOC_FSROOT");
  if (root == NULL || strcmp(root, "/") == 0)
    root = "";
  else
    cache = NULL; /* a recorded host's files: read, and nothing kept */
  g_autofree QpNodeKernelMemory *m =
      g_new0(QpNodeKernelMemory, MAX(host->n_nodes, 1));
  for (guint i = 0; i < host->n_nodes; i++) {
    const QpNode *n = &host->nodes[i];
    m[i].node = n->id;
    for (guint j = 0; n->hugepages != NULL && j < n->hugepages->len; j++) {
      const QpHugePool *p = &g_array_index(n->hugepages, QpHugePool, j);
      m[i].pools_kib += p->total * p->page_kib;
    }
  }
  qp_node_kernel_memory_read(root, m, host->n_nodes, cache);
  for (guint i = 0; i < host->n_nodes; i++) {
    QpNode *n = &host->nodes[i];
    if (!m[i].read)
      continue;
    guint64 pools = m[i].pools_kib / 1024;
    n->measured = TRUE;
    n->total_mib = m[i].total_kib / 1024;
    n->free_mib = m[i].free_kib / 1024;
    guint64 used = n->total_mib - n->free_mib;
    n->used_mib = used > pools ? used - pools : 0;
    n->can_give_mib = qp_node_kernel_can_give_kib(&m[i]) / 1024;
    n->arc_mib = m[i].arc_kib / 1024;
  }
}
