/* Whole files (topology/base/dir-file.c): the bounded reads a launch makes
 * of /proc and /sys and of the state directory, on real files. */
#include "topology/base/dir-file.h"

#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

static void
test_read_text(void)
{
  /* A /proc file has size 0: read to its end all the same. */
  g_autofree char *status = qp_file_read_text("/proc/self/status", G_MAXINT);
  g_assert_nonnull(status);
  g_assert_true(g_str_has_prefix(status, "Name:"));
  g_assert_nonnull(strstr(status, "\nCpus_allowed_list:"));
  g_assert_cmpuint(strlen(status), >, 100);

  g_autofree char *dir = g_dir_make_tmp("qp-dir-file-XXXXXX", NULL);
  g_autofree char *big = g_build_filename(dir, "big", NULL);
  g_autofree char *empty = g_build_filename(dir, "empty", NULL);
  GString *text = g_string_new(NULL);
  for (int i = 0; i < 5000; i++)
    g_string_append_printf(text, "line %d\n", i);
  g_assert_true(g_file_set_contents(big, text->str, (gssize)text->len, NULL));
  g_assert_true(g_file_set_contents(empty, "", 0, NULL));
  /* Whole (more than one read), then cut at MAX. */
  g_autofree char *all = qp_file_read_text(big, G_MAXINT);
  g_assert_cmpstr(all, ==, text->str);
  g_autofree char *cut = qp_file_read_text(big, 10000);
  g_assert_cmpuint(strlen(cut), ==, 10000);
  g_assert_true(strncmp(cut, text->str, 10000) == 0);
  g_autofree char *none = qp_file_read_text(empty, 64);
  g_assert_cmpstr(none, ==, "");
  g_autofree char *missing = g_build_filename(dir, "missing", NULL);
  g_assert_null(qp_file_read_text(missing, 64));
  /* A directory opens but cannot be read. */
  g_assert_null(qp_file_read_text(dir, 64));
  g_string_free(text, TRUE);
  g_unlink(big);
  g_unlink(empty);
  g_rmdir(dir);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/dir-file/read-text", test_read_text);
  return g_test_run();
}
