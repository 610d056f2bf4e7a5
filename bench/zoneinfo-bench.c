/* zoneinfo-bench: what /proc/zoneinfo costs a launch that reads it, on this
 * host and on the big hosts the file grows with.
 *
 * /proc/zoneinfo has, for every populated zone, a "pagesets" block of 7
 * lines per possible CPU, so it grows with CPUs x populated zones. This
 * program takes this host's file (or FILE) as the model of the format and
 * makes from it the file of a host of --cpus CPUs for each count of --nodes:
 * every zone of node 0 once per node (DMA and DMA32 on node 0 only), each
 * pageset's first CPU block once per CPU.
 * It reports, for this host's file and for each made one, its size and the
 * medians of:
 *   read    open, read (4 KiB at a time) and close of the real file (this
 *           host's only: the kernel makes the text as it is read);
 *   parse   qp_zoneinfo_parse() of the text.
 * Run under `valgrind --tool=callgrind --runs 1` for load-independent
 * instruction counts of qp_zoneinfo_parse.
 *
 * Usage: zoneinfo-bench [--runs N] [--cpus C] [--nodes N,...] [--file FILE]
 */
#include <fcntl.h>
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench-time.h"
#include "topology/host/node-memory.h"

static int opt_runs = 201;
static int opt_cpus = 256;
static char *opt_file = NULL;
static char *opt_nodes = NULL;

static const GOptionEntry entries[] = {
    {"runs", 0, 0, G_OPTION_ARG_INT, &opt_runs, "Runs per median (201)", "N"},
    {"cpus", 0, 0, G_OPTION_ARG_INT, &opt_cpus, "CPUs of the made hosts (256)",
     "C"},
    {"file", 0, 0, G_OPTION_ARG_FILENAME, &opt_file,
     "The model zoneinfo (/proc/zoneinfo)", "FILE"},
    {"nodes", 0, 0, G_OPTION_ARG_STRING, &opt_nodes,
     "Nodes of each made host (2,8; \"\" for none)", "N,..."},
    {NULL},
};

/* Node 0's zones of MODEL for a host of NODES nodes and CPUS CPUs. */
static char *
make_zoneinfo(const char *model, int nodes, int cpus)
{
  g_auto(GStrv) lines = g_strsplit(model, "\n", -1);
  GString *out = g_string_new(NULL);
  for (int node = 0; node < nodes; node++) {
    gboolean in_node0 = FALSE;
    for (guint i = 0; lines[i] != NULL; i++) {
      const char *l = lines[i];
      /* DMA and DMA32 are the first node's alone, as on a real host. */
      if (g_str_has_prefix(l, "Node "))
        in_node0 = g_str_has_prefix(l, "Node 0,") &&
                   (node == 0 || (!g_str_has_suffix(l, "DMA") &&
                                  !g_str_has_suffix(l, "DMA32")));
      if (!in_node0 || *l == '\0')
        continue;
      if (g_str_has_prefix(l, "Node 0,")) {
        g_string_append_printf(out, "Node %d,%s\n", node, l + 7);
        continue;
      }
      if (!g_str_has_prefix(l, "    cpu: ")) {
        g_string_append_printf(out, "%s\n", l);
        continue;
      }
      /* "    cpu: 0" and its lines up to the next CPU's or the block's
       * end, once per CPU. */
      guint end = i + 1;
      while (lines[end] != NULL && g_str_has_prefix(lines[end], "     "))
        end++;
      if (lines[end] != NULL &&
          g_str_has_prefix(lines[end], "  vm stats threshold"))
        end++;
      if (strcmp(l, "    cpu: 0") == 0)
        for (int c = 0; c < cpus; c++) {
          g_string_append_printf(out, "    cpu: %d\n", c);
          for (guint j = i + 1; j < end; j++)
            g_string_append_printf(out, "%s\n", lines[j]);
        }
      i = end - 1;
    }
  }
  return g_string_free(out, FALSE);
}

static guint
count_lines(const char *text)
{
  guint n = 0;
  for (const char *p = text; *p != '\0'; p++)
    n += *p == '\n';
  return n;
}

static double
read_us(const char *path)
{
  char buf[4096];
  double *t = g_new(double, opt_runs);
  for (int r = 0; r < opt_runs; r++) {
    double a = qp_bench_now_us();
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      g_error("cannot open %s", path);
    while (read(fd, buf, sizeof buf) > 0)
      ;
    close(fd);
    t[r] = qp_bench_now_us() - a;
  }
  double m = qp_bench_median(t, opt_runs);
  g_free(t);
  return m;
}

static void
bench(const char *name, const char *text, int nodes, double read)
{
  g_autofree QpNodeKernelMemory *m = g_new0(QpNodeKernelMemory, nodes);
  double *t = g_new(double, opt_runs);
  for (int r = 0; r < opt_runs; r++) {
    for (int i = 0; i < nodes; i++)
      m[i] = (QpNodeKernelMemory){.node = i};
    double a = qp_bench_now_us();
    qp_zoneinfo_parse(text, 4, m, (guint)nodes);
    t[r] = qp_bench_now_us() - a;
  }
  g_autofree char *read_text =
      read > 0 ? g_strdup_printf("%.1f", read) : g_strdup("-");
  printf("| %s | %zu | %u | %s | %.1f |\n", name, strlen(text),
         count_lines(text), read_text, qp_bench_median(t, opt_runs));
  g_free(t);
}

int
main(int argc, char **argv)
{
  g_autoptr(GOptionContext) ctx = g_option_context_new("");
  g_option_context_add_main_entries(ctx, entries, NULL);
  g_autoptr(GError) error = NULL;
  if (!g_option_context_parse(ctx, &argc, &argv, &error) || opt_runs < 1 ||
      opt_cpus < 1) {
    fprintf(stderr, "zoneinfo-bench: %s\n",
            error != NULL ? error->message : "expected --runs, --cpus >= 1");
    return 2;
  }
  const char *path = opt_file != NULL ? opt_file : "/proc/zoneinfo";
  g_autofree char *model = NULL;
  if (!g_file_get_contents(path, &model, NULL, NULL)) {
    fprintf(stderr, "zoneinfo-bench: cannot read %s\n", path);
    return 1;
  }
  printf("| zoneinfo | bytes | lines | read (us) | parse (us) |\n"
         "|---|---:|---:|---:|---:|\n");
  bench("this host", model, 1, read_us(path));
  g_auto(GStrv) shapes =
      g_strsplit(opt_nodes != NULL ? opt_nodes : "2,8", ",", -1);
  for (guint s = 0; shapes[s] != NULL; s++) {
    int nodes = atoi(shapes[s]);
    if (*shapes[s] == '\0')
      continue;
    if (nodes < 1 || nodes > 1024) {
      fprintf(stderr, "zoneinfo-bench: --nodes %s: expected 1 to 1024\n",
              shapes[s]);
      return 2;
    }
    g_autofree char *text = make_zoneinfo(model, nodes, opt_cpus);
    g_autofree char *name =
        g_strdup_printf("%d CPUs, %d nodes", opt_cpus, nodes);
    bench(name, text, nodes, 0);
  }
  return 0;
}
