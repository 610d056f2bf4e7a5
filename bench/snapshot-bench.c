/* snapshot-bench: what reading the host snapshot costs a launch, against
 * importing the same host from hwloc's XML as the snapshot did before
 * (format 2).
 *
 * For each recorded host given (default: the big ones of
 * tests/data/topologies) it takes the XML hwloc exports of it without PCI
 * devices, which is what a format-2 snapshot held, and reports medians of:
 *   hwloc import   hwloc_topology_init, set_xmlbuffer, load and destroy,
 *                  with qemu-pin's filters (hwloc alone);
 *   import+model   the same, and the host model built from it;
 *   snapshot read  qemu-pin's snapshot text of the same host parsed into
 *                  the model (qp_host_snapshot_parse()).
 * Neither the file's read nor the live step, which both paths share, is
 * timed.
 *
 * Usage: snapshot-bench [--runs N] [XML...] */
#include <glib.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench-time.h"
#include "topology/host/host.h"
#include "topology/host/snapshot-text.h"

#define KEY "boot bench\n"

static int opt_runs = 201;

static const GOptionEntry entries[] = {
    {"runs", 0, 0, G_OPTION_ARG_INT, &opt_runs, "Runs per median (201)", "N"},
    {NULL},
};

static const char *default_hosts[] = {
    "epyc-7763-2s.xml", "spr-snc4.xml",   "2s-8node.xml",
    "epyc-7451-2s.xml", "x3950m2-io.xml", "opteron-6272-4s.xml",
};

/* A topology with the filters of a launch's live load (build.c's
 * new_topology() without devices). */
static hwloc_topology_t
topology(void)
{
  hwloc_topology_t topo = NULL;
  if (qp_hwloc_topology_init(&topo) < 0)
    g_error("hwloc_topology_init failed");
  hwloc_topology_set_flags(topo, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED);
  hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_NONE);
  hwloc_topology_set_cache_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_ALL);
  hwloc_topology_set_icache_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_NONE);
  return topo;
}

/* PATH as a format-2 snapshot held it: hwloc's export without devices. */
static char *
exported_xml(const char *path, int *len)
{
  hwloc_topology_t topo = topology();
  char *buf = NULL;
  if (hwloc_topology_set_xml(topo, path) < 0 || hwloc_topology_load(topo) < 0 ||
      hwloc_topology_export_xmlbuffer(topo, &buf, len, 0) < 0)
    g_error("cannot load %s", path);
  char *xml = g_strndup(buf, (gsize)*len);
  hwloc_free_xmlbuffer(topo, buf);
  hwloc_topology_destroy(topo);
  return xml;
}

static void
bench_host(const char *path)
{
  int len = 0;
  g_autofree char *xml = exported_xml(path, &len);
  g_autofree char *tmp = NULL;
  int fd = g_file_open_tmp("snapshot-bench-XXXXXX.xml", &tmp, NULL);
  if (fd < 0 || !g_file_set_contents(tmp, xml, len, NULL))
    g_error("cannot write a temporary file");
  close(fd);
  g_autoptr(GError) error = NULL;
  g_autoptr(QpHost) host = qp_host_load_full(tmp, FALSE, &error);
  if (host == NULL)
    g_error("%s: %s", path, error->message);
  g_autofree char *text = qp_host_snapshot_format(host, KEY);
  if (text == NULL)
    g_error("%s: no snapshot", path);
  gsize text_len = strlen(text);

  double *t[3] = {g_new(double, opt_runs), g_new(double, opt_runs),
                  g_new(double, opt_runs)};
  for (int r = 0; r < opt_runs; r++) {
    double a = qp_bench_now_us();
    hwloc_topology_t topo = topology();
    if (hwloc_topology_set_xmlbuffer(topo, xml, len) < 0 ||
        hwloc_topology_load(topo) < 0)
      g_error("import failed");
    hwloc_topology_destroy(topo);
    double b = qp_bench_now_us();
    qp_host_free(qp_host_load_full(tmp, FALSE, NULL));
    double c = qp_bench_now_us();
    QpHost *read = qp_host_snapshot_parse(text, text_len, KEY);
    double d = qp_bench_now_us();
    if (read == NULL)
      g_error("%s: snapshot not read back", path);
    qp_host_free(read);
    t[0][r] = b - a;
    t[1][r] = c - b;
    t[2][r] = d - c;
  }
  g_autofree char *name = g_path_get_basename(path);
  printf("| %s | %u | %d | %zu | %.0f | %.0f | %.1f |\n", name, host->n_cpus,
         len, text_len, qp_bench_median(t[0], opt_runs),
         qp_bench_median(t[1], opt_runs), qp_bench_median(t[2], opt_runs));
  g_unlink(tmp);
  for (int i = 0; i < 3; i++)
    g_free(t[i]);
}

int
main(int argc, char **argv)
{
  g_autoptr(GOptionContext) ctx = g_option_context_new("[XML...]");
  g_autoptr(GError) error = NULL;
  g_option_context_add_main_entries(ctx, entries, NULL);
  if (!g_option_context_parse(ctx, &argc, &argv, &error) || opt_runs < 1) {
    fprintf(stderr, "snapshot-bench: %s\n",
            error != NULL ? error->message : "--runs must be at least 1");
    return 2;
  }
  printf("| host | CPUs | XML bytes | snapshot bytes | hwloc import (us) | "
         "import+model (us) | snapshot read (us) |\n"
         "|---|---|---|---|---|---|---|\n");
  if (argc > 1) {
    for (int i = 1; i < argc; i++)
      bench_host(argv[i]);
    return 0;
  }
  for (guint i = 0; i < G_N_ELEMENTS(default_hosts); i++) {
    g_autofree char *path =
        g_build_filename(QP_TOPOLOGIES, default_hosts[i], NULL);
    bench_host(path);
  }
  return 0;
}
