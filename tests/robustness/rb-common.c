#include "tests/robustness/rb-common.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void
rb_setup(RbFixture *f, gconstpointer data)
{
  f->dir = qp_test_tmpdir();
  /* Readable by the unprivileged user of the EPERM rows. */
  chmod(f->dir, 0755);
  f->marker = g_path_get_basename(f->dir);
  f->state = g_build_filename(f->dir, "state", NULL);
  f->halt_fw = qp_test_firmware(f->dir, QP_TEST_FW_HALT);
  f->ran = g_build_filename(f->dir, "qemu-ran", NULL);
  f->qemu = g_build_filename(f->dir, "qemu", NULL);
  g_autofree char *script = g_strdup_printf(
      "#!/bin/sh\ntouch '%s'\nexec '%s' \"$@\"\n", f->ran, qp_test_qemu());
  GError *error = NULL;
  g_file_set_contents(f->qemu, script, -1, &error);
  g_assert_no_error(error);
  g_assert_cmpint(chmod(f->qemu, 0755), ==, 0);
}

void
rb_teardown(RbFixture *f, gconstpointer data)
{
  g_autoptr(GArray) left = qp_test_pids_with(f->marker);
  for (guint i = 0; i < left->len; i++)
    kill(g_array_index(left, int, i), SIGKILL);
  qp_test_rmtree(f->dir);
  g_free(f->dir);
  g_free(f->marker);
  g_free(f->state);
  g_free(f->halt_fw);
  g_free(f->ran);
  g_free(f->qemu);
}

char *
rb_fake_qemu(void)
{
  const char *root = g_getenv("QP_BUILD_ROOT");
  g_assert_nonnull(root);
  return g_build_filename(root, "tests", "qmp", "fake-qemu", NULL);
}

int
rb_run(RbFixture *f, char **argv, char **envp, guint timeout_ms, char **err)
{
  GPid pid = qp_test_spawn(argv, envp, f->dir);
  int status = qp_test_wait(pid, timeout_ms);
  if (status < 0) {
    kill(pid, SIGKILL);
    qp_test_wait(pid, 5000);
    g_autofree char *path = g_build_filename(f->dir, "stderr", NULL);
    g_autofree char *text = NULL;
    g_file_get_contents(path, &text, NULL, NULL);
    g_test_message("stderr so far: %s", text ? text : "");
    g_test_fail_printf("%s did not finish within %u ms", argv[0], timeout_ms);
    return -1;
  }
  qp_test_wait_no_process(f->marker, 10000);
  g_autofree char *path = g_build_filename(f->dir, "stderr", NULL);
  g_autoptr(GError) error = NULL;
  g_file_get_contents(path, err, NULL, &error);
  g_assert_no_error(error);
  return status;
}

void
rb_assert_one_line(const char *text)
{
  if (text == NULL) {
    g_test_fail_printf("expected exactly one line on stderr, got nothing");
    return;
  }
  gsize n = strlen(text);
  if (n == 0 || text[n - 1] != '\n' || strchr(text, '\n') != text + n - 1)
    g_test_fail_printf("expected exactly one line on stderr, got: \"%s\"",
                       text);
}

char **
rb_state_entries(RbFixture *f)
{
  GPtrArray *names = g_ptr_array_new();
  g_autoptr(GDir) d = g_dir_open(f->state, 0, NULL);
  const char *name;
  while (d != NULL && (name = g_dir_read_name(d)) != NULL)
    /* The lock and the caches of the host and the records hold no claim. */
    if (strcmp(name, "lock") != 0 && strcmp(name, "qemu.pid") != 0 &&
        !g_str_has_prefix(name, ".host-snapshot") &&
        strcmp(name, ".summary") != 0)
      g_ptr_array_add(names, g_strdup(name));
  g_ptr_array_add(names, NULL);
  return (char **)g_ptr_array_free(names, FALSE);
}

GArray *
rb_pids_named(const char *comm, const char *marker)
{
  g_autoptr(GArray) all = qp_test_pids_with(marker);
  GArray *out = g_array_new(FALSE, FALSE, sizeof(int));
  for (guint i = 0; i < all->len; i++) {
    int pid = g_array_index(all, int, i);
    g_autofree char *path = g_strdup_printf("/proc/%d/comm", pid);
    g_autofree char *c = NULL;
    if (g_file_get_contents(path, &c, NULL, NULL) &&
        strcmp(g_strstrip(c), comm) == 0)
      g_array_append_val(out, pid);
  }
  return out;
}

void
rb_assert_nothing_left(RbFixture *f, guint timeout_ms)
{
  if (!qp_test_wait_no_process(f->marker, timeout_ms)) {
    g_autoptr(GArray) left = qp_test_pids_with(f->marker);
    g_autoptr(GString) s = g_string_new(NULL);
    for (guint i = 0; i < left->len; i++) {
      int pid = g_array_index(left, int, i);
      g_autofree char *path = g_strdup_printf("/proc/%d/comm", pid);
      g_autofree char *c = NULL;
      g_file_get_contents(path, &c, NULL, NULL);
      g_string_append_printf(s, " %d (%s)", pid, c ? g_strstrip(c) : "?");
    }
    g_test_fail_printf("processes left behind:%s", s->str);
  }
  g_autoptr(GArray) keepers = rb_pids_named("qemu-pin-keeper", f->marker);
  g_assert_cmpuint(keepers->len, ==, 0);
  g_auto(GStrv) entries = rb_state_entries(f);
  if (entries[0] != NULL) {
    g_autofree char *list = g_strjoinv(" ", entries);
    g_test_fail_printf("state directory not empty: %s", list);
  }
}

void
rb_add_guest_args(RbFixture *f, GPtrArray *argv)
{
  const char *common[] = {"-accel",      "tcg",      "-machine", "q35",
                          "-nodefaults", "-display", "none",     NULL};
  for (guint i = 0; common[i] != NULL; i++)
    g_ptr_array_add(argv, g_strdup(common[i]));
  g_ptr_array_add(argv, g_strdup("-bios"));
  g_ptr_array_add(argv, g_strdup(f->halt_fw));
}
