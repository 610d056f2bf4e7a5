/* What the kernel can give on a node (topology/host/node-memory.c): a
 * recorded root (tests/data/node-memory/README.md) of two 8 GiB nodes with
 * page cache, reclaimable slab, zone watermarks and a ZFS ARC of 4 GiB over
 * a 1 GiB minimum; every figure worked out by hand from those files. */
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>

#include "topology/host/node-memory.h"

#define ROOT QP_TEST_NODE_MEMORY

static void
read_both(QpNodeKernelMemory *m, const char *root)
{
  memset(m, 0, 2 * sizeof(*m));
  m[0].node = 0;
  m[1].node = 1;
  qp_node_kernel_memory_read(root, m, 2);
}

static void
test_meminfo_and_watermarks(void)
{
  QpNodeKernelMemory m[2];
  read_both(m, ROOT);
  g_assert_true(m[0].read);
  g_assert_cmpuint(m[0].total_kib, ==, 8388608);
  g_assert_cmpuint(m[0].free_kib, ==, 2097152);
  g_assert_cmpuint(m[0].file_kib, ==, 1048576);
  g_assert_cmpuint(m[0].reclaimable_kib, ==, 262144);
  /* Zones DMA (nothing managed), DMA32 and Normal; the pagesets' "high:"
   * (999999) is no watermark. */
  g_assert_cmpuint(m[0].low_kib, ==, (10000 + 5000) * 4);
  g_assert_cmpuint(m[0].reserve_kib, ==, (12000 + 1000 + 6000) * 4);
  g_assert_cmpuint(m[1].low_kib, ==, 8000 * 4);
  g_assert_cmpuint(m[1].reserve_kib, ==, 9600 * 4);
  /* Used by no meminfo counter: total less free, file, anon, slab,
   * kernel stacks and page tables. */
  g_assert_cmpuint(m[0].unaccounted_kib, ==, 3833856);
  g_assert_cmpuint(m[1].unaccounted_kib, ==, 1163264);
}

/* A zone's printed min, low and high include its watermark_boost (kept
 * for a while after a fragmenting allocation); the kernel's reserve
 * (totalreserve_pages) is set without it, and so are the figures. */
static void
test_boost_left_out(void)
{
  static const char zones[] = "Node 0, zone   Normal\n"
                              "  pages free     100000\n"
                              "        boost    3000\n"
                              "        min      7000\n"
                              "        low      8000\n"
                              "        high     9000\n"
                              "        managed  1500000\n"
                              "        protection: (0, 0, 0, 0, 0)\n";
  QpNodeKernelMemory m = {.node = 0};
  qp_zoneinfo_parse(zones, 4, &m, 1);
  g_assert_cmpuint(m.low_kib, ==, 5000 * 4);
  g_assert_cmpuint(m.reserve_kib, ==, 6000 * 4);
}

static void
test_arc_counts_as_reclaimable(void)
{
  g_autofree char *path =
      g_build_filename(ROOT, "proc/spl/kstat/zfs/arcstats", NULL);
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
  /* size 4 GiB less c_min 1 GiB. */
  g_assert_cmpuint(qp_arcstats_reclaimable_kib(text), ==, 3 * 1024 * 1024);
  g_assert_cmpuint(qp_arcstats_reclaimable_kib("size 4 10\n"), ==, 0);
  g_assert_cmpuint(qp_arcstats_reclaimable_kib("c_min 4 2048\nsize 4 1024\n"),
                   ==, 0);

  QpNodeKernelMemory m[2];
  read_both(m, ROOT);
  /* Shared by the memory no counter explains: 3833856 and 1163264 KiB. */
  g_assert_cmpuint(m[0].arc_kib, ==, 2413443);
  g_assert_cmpuint(m[1].arc_kib, ==, 732284);
  /* free - reserve + cache - min(cache/2, low) + slab - min(slab/2, low)
   * + ARC: 2097152 - 76000 + 988576 + 202144 + 2413443. */
  g_assert_cmpuint(qp_node_kernel_can_give_kib(&m[0]), ==, 5625315);
  g_assert_cmpuint(qp_node_kernel_can_give_kib(&m[1]), ==, 7249020);
}

static void
test_without_zfs(void)
{
  /* The same root without arcstats: a copy of its node and zone files. */
  g_autofree char *dir = g_dir_make_tmp("qp-node-memory-XXXXXX", NULL);
  g_assert_nonnull(dir);
  const char *files[] = {"sys/devices/system/node/node0/meminfo",
                         "sys/devices/system/node/node1/meminfo",
                         "proc/zoneinfo", NULL};
  for (guint i = 0; files[i] != NULL; i++) {
    g_autofree char *from = g_build_filename(ROOT, files[i], NULL);
    g_autofree char *to = g_build_filename(dir, files[i], NULL);
    g_autofree char *parent = g_path_get_dirname(to);
    g_autofree char *text = NULL;
    gsize len = 0;
    g_assert_true(g_file_get_contents(from, &text, &len, NULL));
    g_assert_cmpint(g_mkdir_with_parents(parent, 0700), ==, 0);
    g_assert_true(g_file_set_contents(to, text, (gssize)len, NULL));
  }
  QpNodeKernelMemory m[2];
  read_both(m, dir);
  g_assert_cmpuint(m[0].arc_kib, ==, 0);
  g_assert_cmpuint(qp_node_kernel_can_give_kib(&m[0]), ==, 3211872);
  g_assert_cmpuint(qp_node_kernel_can_give_kib(&m[1]), ==, 6516736);
  for (guint i = 0; files[i] != NULL; i++) {
    g_autofree char *p = g_build_filename(dir, files[i], NULL);
    g_remove(p);
  }
  const char *dirs[] = {"sys/devices/system/node/node0",
                        "sys/devices/system/node/node1",
                        "sys/devices/system/node",
                        "sys/devices/system",
                        "sys/devices",
                        "sys",
                        "proc",
                        "",
                        NULL};
  for (guint i = 0; dirs[i] != NULL; i++) {
    g_autofree char *p = g_build_filename(dir, dirs[i], NULL);
    g_rmdir(p);
  }
}

static void
test_host_from_recorded_root(void)
{
  /* A live load under HWLOC_FSROOT reads the node files there: a
   * synthetic host's nodes filled as the live host's are. */
  g_autoptr(GError) error = NULL;
  g_autoptr(QpHost) host =
      qp_host_load_synthetic("pack:2 numa:1(memory=8GiB) core:1 pu:1", &error);
  g_assert_no_error(error);
  g_assert_false(host->nodes[0].measured);
  g_setenv("HWLOC_FSROOT", ROOT, TRUE);
  qp_host_read_node_memory(host);
  g_unsetenv("HWLOC_FSROOT");
  g_assert_true(host->nodes[0].measured);
  g_assert_cmpuint(host->nodes[0].total_mib, ==, 8192);
  g_assert_cmpuint(host->nodes[0].free_mib, ==, 2048);
  g_assert_cmpuint(host->nodes[0].used_mib, ==, 6144);
  g_assert_cmpuint(host->nodes[0].can_give_mib, ==, 5625315 / 1024);
  g_assert_cmpuint(host->nodes[0].arc_mib, ==, 2413443 / 1024);
  g_assert_cmpuint(host->nodes[1].can_give_mib, ==, 7249020 / 1024);
}

static void
test_no_such_node(void)
{
  QpNodeKernelMemory m = {.node = 7};
  qp_node_kernel_memory_read(ROOT, &m, 1);
  g_assert_false(m.read);
  g_assert_cmpuint(qp_node_kernel_can_give_kib(&m), ==, 0);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/host/node-memory/meminfo-and-watermarks",
                  test_meminfo_and_watermarks);
  g_test_add_func("/host/node-memory/boost-left-out", test_boost_left_out);
  g_test_add_func("/host/node-memory/arc-counts-as-reclaimable",
                  test_arc_counts_as_reclaimable);
  g_test_add_func("/host/node-memory/without-zfs", test_without_zfs);
  g_test_add_func("/host/node-memory/host-from-recorded-root",
                  test_host_from_recorded_root);
  g_test_add_func("/host/node-memory/no-such-node", test_no_such_node);
  return g_test_run();
}
