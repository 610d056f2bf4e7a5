#include "topology/base/cpulist.h"
#include <glib/gstdio.h>
#include <string.h>

static void
check_ok(const char *text, const char *canonical)
{
  g_autoptr(GError) error = NULL;
  g_auto(hwloc_bitmap_t) set = NULL;
  g_assert_true(
      qp_list_parse(text, "--affinity", QP_LIST_MAX_INDEX, &set, &error));
  g_assert_no_error(error);
  g_autofree char *s = qp_list_format(set);
  g_assert_cmpstr(s, ==, canonical);
}

static void
test_valid(void)
{
  check_ok("0", "0");
  check_ok("0-3", "0-3");
  check_ok("3,0-1", "0-1,3");
  check_ok("0,1,4,5,8,9,12,13", "0-1,4-5,8-9,12-13");
  check_ok("2-2", "2");
  check_ok("8191", "8191");
}

static void
test_invalid(void)
{
  const char *bad[] = {"0-",   "3-1", "a",   "99999", "",      "1,",  ",1",
                       "1--2", "-1",  "1 2", "0x1",   "1-2-3", "8192"};
  for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_autoptr(GError) error = NULL;
    g_auto(hwloc_bitmap_t) set = NULL;
    g_assert_false(
        qp_list_parse(bad[i], "--affinity", QP_LIST_MAX_INDEX, &set, &error));
    g_assert_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_INVALID);
    g_assert_null(set);
    /* One line naming the option and, unless empty, the value. */
    g_assert_null(strchr(error->message, '\n'));
    g_assert_nonnull(strstr(error->message, "--affinity"));
    if (*bad[i] != '\0') {
      g_autofree char *quoted = g_strdup_printf("'%s'", bad[i]);
      g_assert_nonnull(strstr(error->message, quoted));
    }
  }
}

static void
test_max(void)
{
  g_autoptr(GError) error = NULL;
  g_auto(hwloc_bitmap_t) set = NULL;
  g_assert_false(qp_list_parse("0-4", "--hostnodes", 3, &set, &error));
  g_assert_nonnull(strstr(error->message, "0-3"));
}

/* A kernel's list file: missing or empty is no list, a bad one names the
 * file. */
static void
test_read_file(void)
{
  g_autofree char *dir = g_dir_make_tmp("qp-cpulist-XXXXXX", NULL);
  g_assert_nonnull(dir);
  g_autofree char *path = g_build_filename(dir, "online", NULL);
  hwloc_bitmap_t set = NULL;
  g_autoptr(GError) error = NULL;
  g_assert_true(qp_list_read_file(path, &set, &error));
  g_assert_null(set);
  g_assert_true(g_file_set_contents(path, "\n", -1, NULL));
  g_assert_true(qp_list_read_file(path, &set, &error));
  g_assert_null(set);
  g_assert_true(g_file_set_contents(path, "0-3,8\n", -1, NULL));
  g_assert_true(qp_list_read_file(path, &set, &error));
  g_autofree char *text = qp_list_format(set);
  g_assert_cmpstr(text, ==, "0-3,8");
  hwloc_bitmap_free(set);
  set = NULL;
  g_assert_true(g_file_set_contents(path, "0-x\n", -1, NULL));
  g_assert_false(qp_list_read_file(path, &set, &error));
  g_assert_null(set);
  g_assert_nonnull(strstr(error->message, path));
  g_unlink(path);
  g_rmdir(dir);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/cpulist/accepts-lists-and-ranges", test_valid);
  g_test_add_func("/cpulist/rejects-malformed-with-one-line", test_invalid);
  g_test_add_func("/cpulist/rejects-above-maximum", test_max);
  g_test_add_func("/cpulist/read-file", test_read_file);
  return g_test_run();
}
