/* Replays fuzz inputs without libFuzzer: every file named on the command
 * line, or in a directory named there, goes through the target's
 * LLVMFuzzerTestOneInput once. Built in every configuration, so that the
 * seed corpus and the kept crashers run in `meson test` (and under the
 * sanitizers of an ASan build). Prints TAP. */
#include <glib.h>
#include <stdio.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static void
replay_path(const char *path, guint *n)
{
  if (g_file_test(path, G_FILE_TEST_IS_DIR)) {
    g_autoptr(GDir) d = g_dir_open(path, 0, NULL);
    g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
    const char *name;
    while (d != NULL && (name = g_dir_read_name(d)) != NULL)
      g_ptr_array_add(names, g_build_filename(path, name, NULL));
    g_ptr_array_sort(names, (GCompareFunc)g_strcmp0);
    for (guint i = 0; i < names->len; i++)
      replay_path(names->pdata[i], n);
    return;
  }
  g_autofree char *data = NULL;
  gsize len = 0;
  g_autoptr(GError) error = NULL;
  if (!g_file_get_contents(path, &data, &len, &error)) {
    printf("not ok %u %s: %s\n", ++*n, path, error->message);
    return;
  }
  LLVMFuzzerTestOneInput((const unsigned char *)data, len);
  printf("ok %u %s\n", ++*n, path);
  fflush(stdout);
}

int
main(int argc, char **argv)
{
  guint n = 0;
  for (int i = 1; i < argc; i++)
    replay_path(argv[i], &n);
  printf("1..%u\n", n);
  return n > 0 ? 0 : 1;
}
