/* What the kernel can give on a node (topology/host/node-memory.c): a
 * recorded root (tests/data/node-memory/README.md) of two 8 GiB nodes with
 * page cache, reclaimable slab, zone watermarks and a ZFS ARC of 4 GiB over
 * a 1 GiB minimum; every figure worked out by hand from those files. */
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>

#include "topology/base/dir-file.h"
#include "topology/host/node-memory.h"

#define ROOT QP_TEST_NODE_MEMORY

static void
read_both(QpNodeKernelMemory *m, const char *root)
{
  memset(m, 0, 2 * sizeof(*m));
  m[0].node = 0;
  m[1].node = 1;
  qp_node_kernel_memory_read(root, m, 2, NULL);
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

/* ---- Kept watermark figures (QpWatermarkCache) ------------------------ */

static const char *const root_files[] = {
    "sys/devices/system/node/node0/meminfo",
    "sys/devices/system/node/node1/meminfo", "proc/zoneinfo",
    "proc/spl/kstat/zfs/arcstats", NULL};

static void
put_file(const char *root, const char *name, const char *text)
{
  g_autofree char *to = g_build_filename(root, name, NULL);
  g_autofree char *parent = g_path_get_dirname(to);
  g_assert_cmpint(g_mkdir_with_parents(parent, 0700), ==, 0);
  g_assert_true(g_file_set_contents(to, text, -1, NULL));
}

/* A copy of the recorded root with the three sysctl files the watermarks
 * follow, as this host has them. */
static char *
root_with_sysctls(void)
{
  char *dir = g_dir_make_tmp("qp-node-memory-XXXXXX", NULL);
  g_assert_nonnull(dir);
  for (guint i = 0; root_files[i] != NULL; i++) {
    g_autofree char *from = g_build_filename(ROOT, root_files[i], NULL);
    g_autofree char *text = NULL;
    g_assert_true(g_file_get_contents(from, &text, NULL, NULL));
    put_file(dir, root_files[i], text);
  }
  put_file(dir, "proc/sys/vm/min_free_kbytes", "67584\n");
  put_file(dir, "proc/sys/vm/watermark_scale_factor", "10\n");
  put_file(dir, "proc/sys/vm/lowmem_reserve_ratio", "256\t256\t32\t0\t0\n");
  return dir;
}

static void
remove_tree(const char *path)
{
  GDir *d = g_dir_open(path, 0, NULL);
  for (const char *name; d != NULL && (name = g_dir_read_name(d)) != NULL;) {
    g_autofree char *p = g_build_filename(path, name, NULL);
    if (g_file_test(p, G_FILE_TEST_IS_DIR) &&
        !g_file_test(p, G_FILE_TEST_IS_SYMLINK))
      remove_tree(p);
    else
      g_remove(p);
  }
  if (d != NULL)
    g_dir_close(d);
  g_rmdir(path);
}

/* The two nodes of ROOT read with the kept text KEPT (may be NULL): the
 * figures in M, what is to be kept in *FRESH; TRUE when KEPT was used. */
static gboolean
read_kept(const char *root, const char *kept, QpNodeKernelMemory *m,
          char **fresh)
{
  memset(m, 0, 2 * sizeof(*m));
  m[0].node = 0;
  m[1].node = 1;
  QpWatermarkCache cache = {.kept = kept};
  qp_node_kernel_memory_read(root, m, 2, &cache);
  *fresh = cache.fresh;
  return cache.used;
}

/* The recorded root's figures (test_meminfo_and_watermarks()). */
static void
assert_recorded_figures(const QpNodeKernelMemory *m)
{
  g_assert_cmpuint(m[0].low_kib, ==, (10000 + 5000) * 4);
  g_assert_cmpuint(m[0].reserve_kib, ==, (12000 + 1000 + 6000) * 4);
  g_assert_cmpuint(m[1].low_kib, ==, 8000 * 4);
  g_assert_cmpuint(m[1].reserve_kib, ==, 9600 * 4);
}

/* Node 1's Normal zone with other watermarks: low 8000 -> 2000. */
static void
change_zoneinfo(const char *root)
{
  g_autofree char *path = g_build_filename(root, "proc/zoneinfo", NULL);
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
  char *at = strstr(text, "Node 1,");
  g_assert_nonnull(at);
  at = strstr(at, "low      8000");
  g_assert_nonnull(at);
  memcpy(at, "low      2000", strlen("low      2000"));
  g_assert_true(g_file_set_contents(path, text, -1, NULL));
}

/* Figures read under a key are kept; read again under the same key they
 * are used, and zoneinfo is not read: the root's zoneinfo, changed in
 * between, would give node 1 another low watermark. */
static void
test_kept_used(void)
{
  g_autofree char *root = root_with_sysctls();
  QpNodeKernelMemory m[2];
  g_autofree char *kept = NULL;
  g_assert_false(read_kept(root, NULL, m, &kept));
  assert_recorded_figures(m);
  g_assert_nonnull(kept);
  g_assert_true(g_str_has_prefix(kept, "qemu-pin-watermarks 1\nkernel "));
  g_assert_nonnull(strstr(kept, "\nmin_free_kbytes 67584\n"
                                "watermark_scale_factor 10\n"
                                "lowmem_reserve_ratio 256\t256\t32\t0\t0\n"
                                "total 0 8388608\ntotal 1 8388608\n"
                                "node 0 60000 76000\nnode 1 32000 38400\n"
                                "end "));

  change_zoneinfo(root);
  g_autofree char *again = NULL;
  g_assert_true(read_kept(root, kept, m, &again));
  g_assert_null(again);
  assert_recorded_figures(m);
  /* The rest is read as ever. */
  g_assert_true(m[0].read);
  g_assert_cmpuint(m[0].free_kib, ==, 2097152);
  g_assert_cmpuint(m[0].arc_kib, ==, 2413443);
  remove_tree(root);
}

/* Any change of the key reads zoneinfo again and keeps the new figures: a
 * sysctl written, a node's MemTotal changed (hotplug, balloon), a sysctl
 * file that cannot be read (then nothing is kept). */
static void
test_changed_key_reads(void)
{
  struct {
    const char *what, *file, *text;
    gboolean keyed;
  } cases[] = {
      {"min_free_kbytes", "proc/sys/vm/min_free_kbytes", "90112\n", TRUE},
      {"watermark_scale_factor", "proc/sys/vm/watermark_scale_factor", "150\n",
       TRUE},
      {"lowmem_reserve_ratio", "proc/sys/vm/lowmem_reserve_ratio",
       "256\t256\t64\t0\t0\n", TRUE},
      {"MemTotal", "sys/devices/system/node/node1/meminfo", NULL, TRUE},
      {"no sysctl", "proc/sys/vm/watermark_scale_factor", "", FALSE},
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_test_message("changed: %s", cases[i].what);
    g_autofree char *root = root_with_sysctls();
    QpNodeKernelMemory m[2];
    g_autofree char *kept = NULL;
    g_assert_false(read_kept(root, NULL, m, &kept));
    g_assert_nonnull(kept);
    change_zoneinfo(root);
    g_autofree char *path = g_build_filename(root, cases[i].file, NULL);
    if (cases[i].text == NULL) {
      g_autofree char *text = NULL;
      g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
      char *at = strstr(text, "8388608 kB");
      g_assert_nonnull(at);
      memcpy(at, "8388612", 7); /* a memory block more */
      g_assert_true(g_file_set_contents(path, text, -1, NULL));
    } else if (*cases[i].text == '\0') {
      g_assert_cmpint(g_remove(path), ==, 0);
    } else {
      g_assert_true(g_file_set_contents(path, cases[i].text, -1, NULL));
    }
    g_autofree char *fresh = NULL;
    g_assert_false(read_kept(root, kept, m, &fresh));
    g_assert_cmpuint(m[1].low_kib, ==, 2000 * 4);
    if (cases[i].keyed) {
      g_assert_nonnull(fresh);
      g_assert_nonnull(strstr(fresh, "\nnode 1 8000 38400\n"));
      g_autofree char *again = NULL;
      g_assert_true(read_kept(root, fresh, m, &again));
      g_assert_cmpuint(m[1].low_kib, ==, 2000 * 4);
    } else {
      g_assert_null(fresh);
    }
    remove_tree(root);
  }
}

/* TEXT with FROM replaced by TO and, when HASH, its end line made anew. */
static char *
edit_kept(const char *text, const char *from, const char *to, gboolean hash)
{
  const char *at = strstr(text, from);
  g_assert_nonnull(at);
  g_autofree char *out = g_strdup_printf("%.*s%s%s", (int)(at - text), text, to,
                                         at + strlen(from));
  if (!hash)
    return g_steal_pointer(&out);
  char *end = strstr(out, "\nend ");
  g_assert_nonnull(end);
  gsize n = (gsize)(end + 1 - out);
  return g_strdup_printf("%.*send %016" G_GINT64_MODIFIER "x\n", (int)n, out,
                         qp_dir_file_hash(out, n));
}

/* A damaged kept text is not used: zoneinfo is read, and the figures kept
 * anew. */
static void
test_corrupt_kept_reads(void)
{
  g_autofree char *root = root_with_sysctls();
  QpNodeKernelMemory m[2];
  g_autofree char *kept = NULL;
  g_assert_false(read_kept(root, NULL, m, &kept));
  change_zoneinfo(root);
  gsize len = strlen(kept);
  struct {
    const char *what;
    char *text;
  } cases[] = {
      {"cut", g_strndup(kept, len / 2)},
      {"cut at the end line", g_strndup(kept, len - 17)},
      {"byte changed", edit_kept(kept, "node 1 32000", "node 1 32001", FALSE)},
      {"after the end", g_strconcat(kept, "node 2 0 0\n", NULL)},
      {"garbage", g_strdup("\x01\x02 not kept")},
      {"empty", g_strdup("")},
      {"other version",
       edit_kept(kept, "watermarks 1\n", "watermarks 2\n", TRUE)},
      {"a node fewer", edit_kept(kept, "node 1 32000 38400\n", "", TRUE)},
      {"other node", edit_kept(kept, "node 1 ", "node 2 ", TRUE)},
      {"leading zero", edit_kept(kept, "node 1 32000", "node 1 032000", TRUE)},
      {"not a number", edit_kept(kept, "node 1 32000", "node 1 3200x", TRUE)},
      {"overflow",
       edit_kept(kept, "node 1 32000", "node 1 99999999999999999999", TRUE)},
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_test_message("damage: %s", cases[i].what);
    g_autofree char *fresh = NULL;
    g_assert_false(read_kept(root, cases[i].text, m, &fresh));
    g_assert_cmpuint(m[1].low_kib, ==, 2000 * 4);
    g_assert_nonnull(fresh);
    g_free(cases[i].text);
  }
  remove_tree(root);
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
  qp_host_read_node_memory(host, NULL);
  g_unsetenv("HWLOC_FSROOT");
  g_assert_true(host->nodes[0].measured);
  g_assert_cmpuint(host->nodes[0].total_mib, ==, 8192);
  g_assert_cmpuint(host->nodes[0].free_mib, ==, 2048);
  g_assert_cmpuint(host->nodes[0].used_mib, ==, 6144);
  g_assert_cmpuint(host->nodes[0].can_give_mib, ==, 5625315 / 1024);
  g_assert_cmpuint(host->nodes[0].arc_mib, ==, 2413443 / 1024);
  g_assert_cmpuint(host->nodes[1].can_give_mib, ==, 7249020 / 1024);
}

/* Under HWLOC_FSROOT (a recorded host's files) the host's figures are read
 * from the root's zoneinfo as ever, whatever is kept, and nothing is kept. */
static void
test_recorded_root_keeps_nothing(void)
{
  g_autofree char *root = root_with_sysctls();
  QpNodeKernelMemory m[2];
  g_autofree char *kept = NULL;
  g_assert_false(read_kept(root, NULL, m, &kept));
  g_assert_nonnull(kept);
  g_autoptr(GError) error = NULL;
  g_autoptr(QpHost) host =
      qp_host_load_synthetic("pack:2 numa:1(memory=8GiB) core:1 pu:1", &error);
  g_assert_no_error(error);
  QpWatermarkCache cache = {.kept = kept};
  g_setenv("HWLOC_FSROOT", root, TRUE);
  qp_host_read_node_memory(host, &cache);
  g_unsetenv("HWLOC_FSROOT");
  g_assert_false(cache.used);
  g_assert_null(cache.fresh);
  g_assert_cmpuint(host->nodes[0].can_give_mib, ==, 5625315 / 1024);
  remove_tree(root);
}

/* A meminfo line's number is its fourth word, digits only, up to the
 * largest 64-bit value: a line with any other is skipped, as a line of
 * unknown words is. */
static void
test_meminfo_numbers(void)
{
  QpNodeKernelMemory m = {0};
  g_assert_true(
      qp_node_meminfo_parse("Node 0 MemTotal:       18446744073709551615 kB\n"
                            "Node 0 MemFree:        1000 kB\n"
                            "Node 0 Active(file):   18446744073709551616 kB\n"
                            "Node 0 Inactive(file): 12x kB\n"
                            "Node 0 KReclaimable:   -3 kB\n"
                            "Node 0 SReclaimable:   +4 kB\n"
                            "Node 0 FilePages:      077 kB\n",
                            &m));
  g_assert_cmpuint(m.total_kib, ==, G_MAXUINT64);
  g_assert_cmpuint(m.free_kib, ==, 1000);
  g_assert_cmpuint(m.file_kib, ==, 0);
  g_assert_cmpuint(m.reclaimable_kib, ==, 0);
  /* A total that is no number: no MemTotal, nothing read. */
  QpNodeKernelMemory bad = {0};
  g_assert_false(qp_node_meminfo_parse("Node 0 MemTotal: 1e9 kB\n"
                                       "Node 0 MemFree: 10 kB\n",
                                       &bad));
  g_assert_false(bad.read);
}

static void
test_no_such_node(void)
{
  QpNodeKernelMemory m = {.node = 7};
  qp_node_kernel_memory_read(ROOT, &m, 1, NULL);
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
  g_test_add_func("/host/node-memory/meminfo-numbers", test_meminfo_numbers);
  g_test_add_func("/host/node-memory/kept-used", test_kept_used);
  g_test_add_func("/host/node-memory/recorded-root-keeps-nothing",
                  test_recorded_root_keeps_nothing);
  g_test_add_func("/host/node-memory/changed-key-reads",
                  test_changed_key_reads);
  g_test_add_func("/host/node-memory/corrupt-kept-reads",
                  test_corrupt_kept_reads);
  return g_test_run();
}
