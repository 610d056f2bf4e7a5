/* The host snapshot (topology/host/snapshot.h) on this live host and the
 * recorded ones: every recorded host reads back from its snapshot text as
 * hwloc's XML made it; this host through its snapshot is the host a live
 * load makes, with free memory read live; a snapshot made under another
 * key (boot, online CPUs) or format, or damaged, is ignored, the live host
 * loaded and the snapshot written anew. */
#include "topology/base/dir-file.h"
#include "topology/base/state-dir.h"
#include "topology/host/snapshot-text.h"
#include "topology/host/snapshot.h"

#include <numa.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "host-equal.h"

#define RECORDED QP_TEST_TOPOLOGIES "/epyc-7351p.xml"

typedef struct {
  char *dir;
  char *path;
} Fixture;

static void
setup(Fixture *f, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  f->dir = g_dir_make_tmp("qp-snapshot-XXXXXX", &error);
  g_assert_no_error(error);
  f->path = g_build_filename(f->dir, QP_STATE_HOST_SNAPSHOT, NULL);
}

static void
teardown(Fixture *f, gconstpointer data)
{
  /* The snapshot, the kept watermark figures, each user's. */
  g_autoptr(GDir) d = g_dir_open(f->dir, 0, NULL);
  for (const char *name; d != NULL && (name = g_dir_read_name(d)) != NULL;) {
    g_autofree char *p = g_build_filename(f->dir, name, NULL);
    unlink(p);
  }
  rmdir(f->dir);
  g_free(f->dir);
  g_free(f->path);
}

static void
write_file(Fixture *f, const char *text, gsize len)
{
  g_assert_true(g_file_set_contents(f->path, text, (gssize)len, NULL));
  chmod(f->path, 0600);
}

static char *
watermarks_path(Fixture *f)
{
  return g_strconcat(f->path, ".watermarks", NULL);
}

/* TEXT with its end line made anew: the hash of what it now holds. */
static char *
rehash(const char *text)
{
  const char *end = strstr(text, "\nend ");
  g_assert_nonnull(end);
  gsize n = (gsize)(end + 1 - text);
  return g_strdup_printf("%.*send %016" G_GINT64_MODIFIER "x\n", (int)n, text,
                         qp_dir_file_hash(text, n));
}

/* The recorded 4-node host, standing in for this one (source "stand-in",
 * so that a snapshot shows which host it holds). */
static QpHost *
stand_in(void)
{
  g_autoptr(GError) error = NULL;
  QpHost *host = qp_host_load_full(RECORDED, FALSE, &error);
  g_assert_no_error(error);
  g_free(host->source);
  host->source = g_strdup("stand-in");
  return host;
}

/* A snapshot of HOST under this host's key. */
static char *
snapshot_of(const QpHost *host)
{
  g_autofree char *key = qp_host_snapshot_key();
  g_assert_nonnull(key);
  char *text = qp_host_snapshot_format(host, key);
  g_assert_nonnull(text);
  return text;
}

static QpHost *
load(Fixture *f)
{
  g_autoptr(GError) error = NULL;
  QpHost *host = qp_host_load_snapshot(f->dir, FALSE, &error);
  g_assert_no_error(error);
  g_assert_nonnull(host);
  return host;
}

static QpHost *
live_host(void)
{
  g_autoptr(GError) error = NULL;
  QpHost *live = qp_host_load_full(NULL, FALSE, &error);
  g_assert_no_error(error);
  return live;
}

/* HOST is this host, as a live load makes it. */
static void
assert_is_live(const QpHost *host)
{
  g_autoptr(QpHost) live = live_host();
  qp_assert_host_equal(host, live, TRUE);
}

/* The snapshot file is this host's, under this key, in this format. */
static void
assert_snapshot_is_live(Fixture *f)
{
  g_autofree char *text = NULL;
  gsize len = 0;
  g_assert_true(g_file_get_contents(f->path, &text, &len, NULL));
  g_autofree char *key = qp_host_snapshot_key();
  g_autoptr(QpHost) read = qp_host_snapshot_parse(text, len, key);
  g_assert_nonnull(read);
  g_autoptr(GError) error = NULL;
  g_autoptr(QpHost) live = qp_host_load_live_static(&error);
  g_assert_no_error(error);
  qp_assert_host_equal(read, live, FALSE);
}

/* Every recorded host, from its XML, written as a snapshot and read back:
 * the same host, field by field, and the same text written again. */
static void
test_recorded_round_trip(void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GDir) dir = g_dir_open(QP_TEST_TOPOLOGIES, 0, &error);
  g_assert_no_error(error);
  guint n = 0;
  for (const char *name; (name = g_dir_read_name(dir)) != NULL;) {
    if (!g_str_has_suffix(name, ".xml"))
      continue;
    g_autofree char *path = g_build_filename(QP_TEST_TOPOLOGIES, name, NULL);
    g_test_message("%s", name);
    g_autoptr(QpHost) xml = qp_host_load_full(path, FALSE, &error);
    g_assert_no_error(error);
    g_autofree char *text = qp_host_snapshot_format(xml, "boot test\n");
    g_assert_nonnull(text);
    g_autoptr(QpHost) read =
        qp_host_snapshot_parse(text, strlen(text), "boot test\n");
    g_assert_nonnull(read);
    qp_assert_host_equal(xml, read, FALSE);
    g_autofree char *again = qp_host_snapshot_format(read, "boot test\n");
    g_assert_cmpstr(again, ==, text);
    n++;
  }
  g_assert_cmpuint(n, >=, 15);
}

/* A snapshot cut anywhere, or under another key, is not read. */
static void
test_every_cut_refused(void)
{
  g_autoptr(QpHost) host = stand_in();
  g_autofree char *text = qp_host_snapshot_format(host, "boot test\n");
  gsize len = strlen(text);
  for (gsize cut = 0; cut < len; cut++) {
    g_autofree char *part = g_strndup(text, cut);
    g_assert_null(qp_host_snapshot_parse(part, cut, "boot test\n"));
  }
  g_assert_null(qp_host_snapshot_parse(text, len, "boot other\n"));
  g_autoptr(QpHost) whole = qp_host_snapshot_parse(text, len, "boot test\n");
  g_assert_nonnull(whole);
}

/* A recorded host with PCI devices is not written: its snapshot would read
 * back without them. */
static void
test_devices_not_written(void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(QpHost) io =
      qp_host_load_full(QP_TEST_TOPOLOGIES "/x3950m2-io.xml", TRUE, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(io->pci->len, >, 0);
  g_assert_null(qp_host_snapshot_format(io, "boot test\n"));
}

/* This host through its snapshot, written by the first load and read by
 * the second, is the host a live load makes. */
static void
test_live_equals_hwloc(Fixture *f, gconstpointer data)
{
  g_autoptr(QpHost) first = load(f);
  assert_snapshot_is_live(f);
  g_autoptr(QpHost) second = load(f);
  assert_is_live(first);
  assert_is_live(second);
}

/* A snapshot with this host's key is used: the recorded 4-node host
 * standing in for this one, with this host's live part on it. */
static void
test_valid_used(Fixture *f, gconstpointer data)
{
  g_autoptr(QpHost) host = stand_in();
  g_autofree char *text = snapshot_of(host);
  write_file(f, text, strlen(text));
  g_autoptr(QpHost) read = load(f);
  g_assert_cmpstr(read->source, ==, "stand-in");
  g_assert_cmpuint(read->n_nodes, ==, 4);
  g_assert_cmpuint(read->n_cpus, ==, 32);
  g_assert_cmpuint(read->n_domains, ==, host->n_domains);
  g_assert_true(hwloc_bitmap_isincluded(read->allowed, host->allowed));
}

/* A node's memory is read live, total and free, not from the snapshot
 * (memory is hot-plugged and ballooned while a host runs): the snapshot of
 * this host with node memory made larger than any host's. */
static void
test_free_memory_live(Fixture *f, gconstpointer data)
{
  if (numa_available() < 0) {
    g_test_skip("libnuma reports no NUMA support here");
    return;
  }
  g_autoptr(GError) error = NULL;
  g_autoptr(QpHost) snap = qp_host_load_live_static(&error);
  g_assert_no_error(error);
  snap->nodes[0].total_mib = G_GUINT64_CONSTANT(1) << 30; /* 1 EiB */
  g_autofree char *text = snapshot_of(snap);
  write_file(f, text, strlen(text));

  g_autoptr(QpHost) host = load(f);
  g_assert_cmpuint(host->nodes[0].total_mib, <, 1073741824);
  g_assert_true(host->nodes[0].measured);
  long long free_bytes = 0;
  long long total = numa_node_size64(host->nodes[0].id, NULL);
  g_assert_cmpint(total, >, 0);
  g_assert_cmpuint(host->nodes[0].total_mib, ==, (guint64)total >> 20);
  g_assert_cmpint(numa_node_size64(host->nodes[0].id, &free_bytes), >=, 0);
  guint64 live = (guint64)free_bytes / (1024 * 1024);
  g_assert_cmpuint(host->nodes[0].free_mib, <=, live + live / 10 + 64);
  g_assert_cmpuint(host->nodes[0].free_mib + live / 10 + 64, >=, live);
}

/* A snapshot of another boot, or of other online CPUs, is ignored and
 * replaced. */
static void
test_stale_ignored(Fixture *f, gconstpointer data)
{
  const char *lines[] = {"boot ", "cpus ", "nodes ", "allowed ", "mems "};
  g_autoptr(QpHost) other = stand_in();
  for (guint i = 0; i < G_N_ELEMENTS(lines); i++) {
    g_autofree char *key = qp_host_snapshot_key();
    char *at = strstr(key, lines[i]);
    g_assert_nonnull(at);
    g_autofree char *stale = g_strdup_printf("%.*s%sX%s", (int)(at - key), key,
                                             lines[i], at + strlen(lines[i]));
    g_test_message("stale key line: %s", lines[i]);
    g_autofree char *text = qp_host_snapshot_format(other, stale);
    write_file(f, text, strlen(text));
    g_autoptr(QpHost) host = load(f);
    assert_is_live(host);
    assert_snapshot_is_live(f);
  }
}

/* A snapshot of an older qemu-pin (format 2: hwloc's XML under the same
 * key), or of a format to come, is ignored and replaced. */
static void
test_foreign_format_ignored(Fixture *f, gconstpointer data)
{
  g_autofree char *key = qp_host_snapshot_key();
  g_autofree char *xml = NULL;
  g_assert_true(g_file_get_contents(RECORDED, &xml, NULL, NULL));
  g_autoptr(QpHost) other = stand_in();
  g_autofree char *text = snapshot_of(other);
  g_autofree char *v2 = g_strdup_printf(
      "qemu-pin-host-snapshot 2\n%sxml %zu\n%s", key, strlen(xml), xml);
  g_autofree char *v4 = rehash(text);
  v4[strlen("qemu-pin-host-snapshot ")] = '4';
  g_autofree char *v4h = rehash(v4);
  const char *cases[] = {v2, v4h};
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_test_message("format: %.24s", cases[i]);
    write_file(f, cases[i], strlen(cases[i]));
    g_autoptr(QpHost) host = load(f);
    assert_is_live(host);
    assert_snapshot_is_live(f);
  }
}

/* TEXT with the first occurrence of FROM replaced by TO (and, when HASH,
 * its end line made anew, so that only the reader's checks can refuse it). */
static char *
edit(const char *text, const char *from, const char *to, gboolean hash)
{
  const char *at = strstr(text, from);
  g_assert_nonnull(at);
  g_autofree char *out = g_strdup_printf("%.*s%s%s", (int)(at - text), text, to,
                                         at + strlen(from));
  return hash ? rehash(out) : g_steal_pointer(&out);
}

/* A damaged snapshot is ignored and replaced: cut short, a byte changed,
 * bytes after its end, not a snapshot at all, and snapshots whose hash
 * holds but whose host does not (an index past its array, a CPU missing
 * from its core, a count that does not match its lines). */
static void
test_corrupt_ignored(Fixture *f, gconstpointer data)
{
  g_autoptr(QpHost) other = stand_in();
  g_autofree char *text = snapshot_of(other);
  gsize len = strlen(text);
  struct {
    const char *what;
    char *text;
  } cases[] = {
      {"cut", g_strndup(text, len / 2)},
      {"cut at a line",
       g_strndup(text, (gsize)(strstr(text, "\ncpu ") - text))},
      {"byte changed", edit(text, "cpu 3 3 ", "cpu 3 2 ", FALSE)},
      {"after the end", g_strconcat(text, "cpu 99 0 0 0 0\n", NULL)},
      {"garbage", g_strdup("\x01\x02 not a snapshot")},
      {"empty", g_strdup("")},
      {"core past the cores", edit(text, "cpu 3 3 ", "cpu 3 99 ", TRUE)},
      {"kind past the kinds",
       edit(text, "cpu 3 3 0 0 0\n", "cpu 3 3 0 0 1\n", TRUE)},
      {"cpu not in its core", edit(text, "cpu 3 3 ", "cpu 3 2 ", TRUE)},
      {"cpu not in its node", edit(text, "cpu 3 3 0 ", "cpu 3 3 1 ", TRUE)},
      {"node not a node", edit(text, "cpu 3 3 0 ", "cpu 3 3 7 ", TRUE)},
      {"a cpu fewer", edit(text, "\ncpu 3 3 0 0 0\n", "\n", TRUE)},
      {"leading zero", edit(text, "cpu 3 ", "cpu 03 ", TRUE)},
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_test_message("damage: %s", cases[i].what);
    write_file(f, cases[i].text, strlen(cases[i].text));
    g_autoptr(QpHost) host = load(f);
    assert_is_live(host);
    assert_snapshot_is_live(f);
    g_free(cases[i].text);
  }
}

/* In a shared ledger (group-writable, sticky) each user keeps its own
 * snapshot and watermark figures, named with its uid; a group-writable
 * directory without the sticky bit, where others could replace it, gets none.
 */
static void
test_shared_dir_per_user(Fixture *f, gconstpointer data)
{
  g_autofree char *own = g_strdup_printf("%s-%u", f->path, (unsigned)geteuid());
  g_assert_cmpint(chmod(f->dir, 03770), ==, 0);
  g_autoptr(QpHost) a = load(f);
  g_assert_true(g_file_test(own, G_FILE_TEST_IS_REGULAR));
  g_assert_false(g_file_test(f->path, G_FILE_TEST_EXISTS));
  g_assert_cmpint(unlink(own), ==, 0);
  /* The kept watermark figures too. */
  g_autofree char *own_kept = g_strconcat(own, ".watermarks", NULL);
  g_autofree char *kept = watermarks_path(f);
  g_assert_true(g_file_test(own_kept, G_FILE_TEST_IS_REGULAR));
  g_assert_false(g_file_test(kept, G_FILE_TEST_EXISTS));
  g_assert_cmpint(unlink(own_kept), ==, 0);

  g_assert_cmpint(chmod(f->dir, 02770), ==, 0);
  g_autoptr(QpHost) b = load(f);
  g_assert_cmpuint(b->n_nodes, ==, a->n_nodes);
  g_assert_false(g_file_test(own, G_FILE_TEST_EXISTS));
  g_assert_false(g_file_test(f->path, G_FILE_TEST_EXISTS));
  g_assert_false(g_file_test(own_kept, G_FILE_TEST_EXISTS));
  g_assert_false(g_file_test(kept, G_FILE_TEST_EXISTS));
  chmod(f->dir, 0700);
}

/* ---- The kept watermark figures ------------------------------------------ */

/* The first line of PATH, its ends' blanks dropped. */
static char *
file_line(const char *path)
{
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
  text[strcspn(text, "\n")] = '\0';
  return g_strdup(g_strstrip(text));
}

/* Node ID's MemTotal in KiB, from its meminfo. */
static guint64
mem_total_kib(int id)
{
  g_autofree char *path =
      g_strdup_printf("/sys/devices/system/node/node%d/meminfo", id);
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
  const char *at = strstr(text, "MemTotal:");
  g_assert_nonnull(at);
  return g_ascii_strtoull(at + strlen("MemTotal:"), NULL, 10);
}

/* The key the watermark figures of HOST are kept under (the kernel, the
 * three sysctl files, every node's MemTotal), made here from the files. */
static char *
watermark_key(const QpHost *host)
{
  struct utsname u;
  g_assert_cmpint(uname(&u), ==, 0);
  GString *key = g_string_new(NULL);
  g_string_append_printf(key, "kernel %s %s\n", u.release, u.version);
  const char *sysctls[] = {"min_free_kbytes", "watermark_scale_factor",
                           "lowmem_reserve_ratio"};
  for (guint i = 0; i < G_N_ELEMENTS(sysctls); i++) {
    g_autofree char *path = g_strconcat("/proc/sys/vm/", sysctls[i], NULL);
    g_autofree char *line = file_line(path);
    g_string_append_printf(key, "%s %s\n", sysctls[i], line);
  }
  for (guint i = 0; i < host->n_nodes; i++)
    g_string_append_printf(key, "total %d %" G_GUINT64_FORMAT "\n",
                           host->nodes[i].id, mem_total_kib(host->nodes[i].id));
  return g_string_free(key, FALSE);
}

/* Kept figures under KEY that reserve every node's whole memory: used, the
 * kernel can give nothing on any node. */
static char *
kept_reserving_all(const QpHost *host, const char *key)
{
  GString *text = g_string_new("qemu-pin-watermarks 1\n");
  g_string_append(text, key);
  for (guint i = 0; i < host->n_nodes; i++)
    g_string_append_printf(text, "node %d 0 %" G_GUINT64_FORMAT "\n",
                           host->nodes[i].id, mem_total_kib(host->nodes[i].id));
  g_string_append_printf(text, "end %016" G_GINT64_MODIFIER "x\n",
                         qp_dir_file_hash(text->str, text->len));
  return g_string_free(text, FALSE);
}

static void
write_watermarks(Fixture *f, const char *text)
{
  g_autofree char *path = watermarks_path(f);
  g_assert_true(g_file_set_contents(path, text, -1, NULL));
  g_assert_cmpint(chmod(path, 0600), ==, 0);
}

/* The kept figures next to the snapshot are this user's, 0600, and kept
 * under this host's key now. */
static void
assert_watermarks_live(Fixture *f, const QpHost *host)
{
  g_autofree char *path = watermarks_path(f);
  struct stat st;
  g_assert_cmpint(stat(path, &st), ==, 0);
  g_assert_cmpuint(st.st_uid, ==, geteuid());
  g_assert_cmpuint(st.st_mode & 07777, ==, 0600);
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
  g_autofree char *key = watermark_key(host);
  g_autofree char *head = g_strconcat("qemu-pin-watermarks 1\n", key, NULL);
  g_assert_true(g_str_has_prefix(text, head));
}

/* Whether the kernel can give something on some node of HOST. */
static gboolean
gives_something(const QpHost *host)
{
  for (guint i = 0; i < host->n_nodes; i++)
    if (host->nodes[i].measured && host->nodes[i].can_give_mib > 0)
      return TRUE;
  return FALSE;
}

/* A launch keeps the zones' watermark figures next to the snapshot, under
 * the key of what the kernel computes them from. */
static void
test_watermarks_kept(Fixture *f, gconstpointer data)
{
  g_autoptr(QpHost) host = load(f);
  g_assert_true(gives_something(host));
  assert_watermarks_live(f, host);
}

/* Kept figures under this host's key are used (zoneinfo, which gives
 * other figures, is not read): figures that reserve every node's memory
 * leave the kernel nothing to give; the kept file stays as it is. */
static void
test_watermarks_used(Fixture *f, gconstpointer data)
{
  g_autoptr(QpHost) first = load(f);
  g_autofree char *key = watermark_key(first);
  g_autofree char *kept = kept_reserving_all(first, key);
  write_watermarks(f, kept);
  g_autoptr(QpHost) host = load(f);
  for (guint i = 0; i < host->n_nodes; i++)
    g_assert_cmpuint(host->nodes[i].can_give_mib, ==, 0);
  g_autofree char *path = watermarks_path(f);
  g_autofree char *after = NULL;
  g_assert_true(g_file_get_contents(path, &after, NULL, NULL));
  g_assert_cmpstr(after, ==, kept);
}

/* Kept figures under another key (a sysctl, a node's MemTotal, the kernel
 * changed), damaged, or another user's are not used: zoneinfo is read, and
 * the figures kept anew. */
static void
test_watermarks_stale_or_corrupt(Fixture *f, gconstpointer data)
{
  g_autoptr(QpHost) first = load(f);
  g_autofree char *key = watermark_key(first);
  const char *lines[] = {"kernel ", "min_free_kbytes ",
                         "watermark_scale_factor ", "lowmem_reserve_ratio ",
                         "total "};
  g_autoptr(GPtrArray) cases = g_ptr_array_new_with_free_func(g_free);
  for (guint i = 0; i < G_N_ELEMENTS(lines); i++) {
    const char *at = strstr(key, lines[i]);
    g_assert_nonnull(at);
    g_autofree char *stale = g_strdup_printf("%.*s%s9%s", (int)(at - key), key,
                                             lines[i], at + strlen(lines[i]));
    g_ptr_array_add(cases, kept_reserving_all(first, stale));
  }
  g_autofree char *whole = kept_reserving_all(first, key);
  g_ptr_array_add(cases, g_strndup(whole, strlen(whole) - 2));
  g_autofree char *changed = g_strdup(whole);
  changed[strlen(changed) - 3] ^= 1; /* a digit of the hash */
  g_ptr_array_add(cases, g_steal_pointer(&changed));
  for (guint i = 0; i <= cases->len; i++) {
    g_autofree char *path = watermarks_path(f);
    if (i < cases->len) {
      g_test_message("kept: case %u", i);
      write_watermarks(f, cases->pdata[i]);
    } else {
      g_test_message("kept: another user's");
      write_watermarks(f, whole);
      g_assert_cmpint(chown(path, 1, 1), ==, 0);
    }
    g_autoptr(QpHost) host = load(f);
    g_assert_true(gives_something(host));
    assert_watermarks_live(f, host);
  }
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/host-snapshot/recorded-round-trip",
                  test_recorded_round_trip);
  g_test_add_func("/host-snapshot/every-cut-refused", test_every_cut_refused);
  g_test_add_func("/host-snapshot/devices-not-written",
                  test_devices_not_written);
#define FT(path, fn) g_test_add(path, Fixture, NULL, setup, fn, teardown)
  FT("/host-snapshot/live-equals-hwloc", test_live_equals_hwloc);
  FT("/host-snapshot/valid-used", test_valid_used);
  FT("/host-snapshot/free-memory-live", test_free_memory_live);
  FT("/host-snapshot/stale-ignored", test_stale_ignored);
  FT("/host-snapshot/foreign-format-ignored", test_foreign_format_ignored);
  FT("/host-snapshot/corrupt-ignored", test_corrupt_ignored);
  FT("/host-snapshot/shared-dir-per-user", test_shared_dir_per_user);
  FT("/host-snapshot/watermarks-kept", test_watermarks_kept);
  FT("/host-snapshot/watermarks-used", test_watermarks_used);
  FT("/host-snapshot/watermarks-stale-or-corrupt",
     test_watermarks_stale_or_corrupt);
  return g_test_run();
}
