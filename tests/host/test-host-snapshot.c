/* The host snapshot (topology/host/snapshot.h) on this live host: a valid
 * snapshot is what the load uses, with free memory read live; a snapshot
 * made under another key (boot, online CPUs) or damaged is ignored, the
 * live host loaded and the snapshot written anew. */
#include "topology/base/state-dir.h"
#include "topology/host/snapshot.h"

#include <numa.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
  unlink(f->path);
  rmdir(f->dir);
  g_free(f->dir);
  g_free(f->path);
}

/* A snapshot under KEY holding XML. */
static void
write_snapshot(Fixture *f, const char *key, const char *xml)
{
  g_autofree char *text = g_strdup_printf(
      "qemu-pin-host-snapshot 2\n%sxml %zu\n%s", key, strlen(xml), xml);
  g_assert_true(g_file_set_contents(f->path, text, -1, NULL));
  chmod(f->path, 0600);
}

static char *
recorded_xml(void)
{
  char *xml = NULL;
  g_assert_true(g_file_get_contents(RECORDED, &xml, NULL, NULL));
  return xml;
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

/* The live host's node count, loaded with hwloc. */
static guint
live_nodes(void)
{
  g_autoptr(QpHost) live = qp_host_load_full(NULL, FALSE, NULL);
  g_assert_nonnull(live);
  return live->n_nodes;
}

static void
assert_snapshot_is_live(Fixture *f)
{
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(f->path, &text, NULL, NULL));
  g_autofree char *key = qp_host_snapshot_key();
  g_autofree char *head = g_strconcat("qemu-pin-host-snapshot 2\n", key, NULL);
  g_assert_true(g_str_has_prefix(text, head));
  g_assert_null(strstr(text, "AMD EPYC 7351P"));
}

/* A snapshot with this host's key is used: a recorded 4-node host stands
 * in for this one, so the load shows which was read. */
static void
test_valid_used(Fixture *f, gconstpointer data)
{
  if (live_nodes() == 4) {
    g_test_skip("this host has 4 nodes, as the stand-in does");
    return;
  }
  g_autofree char *key = qp_host_snapshot_key();
  g_autofree char *xml = recorded_xml();
  write_snapshot(f, key, xml);
  g_autoptr(QpHost) host = load(f);
  g_assert_cmpuint(host->n_nodes, ==, 4);
  g_assert_cmpuint(host->n_cpus, ==, 32);
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
  qp_host_free(load(f)); /* writes the snapshot */
  assert_snapshot_is_live(f);
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(f->path, &text, NULL, NULL));
  /* The first node's local_memory becomes 2^50 bytes. */
  char *lm = strstr(text, "local_memory=\"");
  g_assert_nonnull(lm);
  lm += strlen("local_memory=\"");
  gsize digits = strspn(lm, "0123456789");
  char *xml_start = strstr(text, "\nxml ");
  g_assert_nonnull(xml_start);
  char *body = strchr(xml_start + 1, '\n') + 1;
  g_autofree char *before = g_strndup(body, (gsize)(lm - body));
  g_autofree char *xml =
      g_strconcat(before, "1125899906842624", lm + digits, NULL);
  g_autofree char *key = qp_host_snapshot_key();
  write_snapshot(f, key, xml);

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
  const char *lines[] = {"boot ", "cpus ", "nodes ", "allowed "};
  guint n = live_nodes();
  g_autofree char *xml = recorded_xml();
  for (guint i = 0; i < G_N_ELEMENTS(lines); i++) {
    g_autofree char *key = qp_host_snapshot_key();
    char *at = strstr(key, lines[i]);
    g_assert_nonnull(at);
    g_autofree char *stale = g_strdup_printf("%.*s%sX%s", (int)(at - key), key,
                                             lines[i], at + strlen(lines[i]));
    g_test_message("stale key line: %s", lines[i]);
    write_snapshot(f, stale, xml);
    g_autoptr(QpHost) host = load(f);
    g_assert_cmpuint(host->n_nodes, ==, n);
    assert_snapshot_is_live(f);
  }
}

/* A damaged snapshot is ignored and replaced. */
static void
test_corrupt_ignored(Fixture *f, gconstpointer data)
{
  guint n = live_nodes();
  g_autofree char *key = qp_host_snapshot_key();
  g_autofree char *xml = recorded_xml();
  g_autofree char *cut = g_strndup(xml, strlen(xml) / 2);
  const char *cases[] = {"cut", "garbage", "length", "empty"};
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_test_message("damage: %s", cases[i]);
    if (i == 0) {
      /* Its XML cut in half, the length saying so: hwloc refuses it. */
      write_snapshot(f, key, cut);
    } else if (i == 1) {
      write_snapshot(f, key, "<topology>\x01\x02 not xml");
    } else if (i == 2) {
      g_autofree char *text = g_strdup_printf(
          "qemu-pin-host-snapshot 2\n%sxml %zu\n%s", key, strlen(xml) + 5, xml);
      g_assert_true(g_file_set_contents(f->path, text, -1, NULL));
    } else {
      g_assert_true(g_file_set_contents(f->path, "", 0, NULL));
    }
    g_autoptr(QpHost) host = load(f);
    g_assert_cmpuint(host->n_nodes, ==, n);
    assert_snapshot_is_live(f);
  }
}

/* In a shared ledger (group-writable, sticky) each user keeps its own
 * snapshot, named with its uid; a group-writable directory without the
 * sticky bit, where others could replace it, gets none. */
static void
test_shared_dir_per_user(Fixture *f, gconstpointer data)
{
  g_autofree char *own = g_strdup_printf("%s-%u", f->path, (unsigned)geteuid());
  g_assert_cmpint(chmod(f->dir, 03770), ==, 0);
  g_autoptr(QpHost) a = load(f);
  g_assert_true(g_file_test(own, G_FILE_TEST_IS_REGULAR));
  g_assert_false(g_file_test(f->path, G_FILE_TEST_EXISTS));
  g_assert_cmpint(unlink(own), ==, 0);

  g_assert_cmpint(chmod(f->dir, 02770), ==, 0);
  g_autoptr(QpHost) b = load(f);
  g_assert_cmpuint(b->n_nodes, ==, a->n_nodes);
  g_assert_false(g_file_test(own, G_FILE_TEST_EXISTS));
  g_assert_false(g_file_test(f->path, G_FILE_TEST_EXISTS));
  chmod(f->dir, 0700);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
#define FT(path, fn) g_test_add(path, Fixture, NULL, setup, fn, teardown)
  FT("/host-snapshot/valid-used", test_valid_used);
  FT("/host-snapshot/free-memory-live", test_free_memory_live);
  FT("/host-snapshot/stale-ignored", test_stale_ignored);
  FT("/host-snapshot/corrupt-ignored", test_corrupt_ignored);
  FT("/host-snapshot/shared-dir-per-user", test_shared_dir_per_user);
  return g_test_run();
}
