/* The state directory (topology/base/state-dir.c): the name of each file,
 * the one rule for temporary files and what the sweep takes, and the
 * checks of a directory, on real directories. */
#include "topology/base/state-dir.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Every file of the directory has a temporary file by the one rule, which
 * the sweep recognises, and its own kind. */
static void
test_names(void)
{
  static const struct {
    const char *name;
    QpStateFile kind;
  } files[] = {
      {"vm-1.json", QP_STATE_FILE_RECORD},
      {"vm-1.json.corrupt", QP_STATE_FILE_CORRUPT},
      {QP_STATE_SUMMARY, QP_STATE_FILE_OTHER},
      {QP_STATE_HOST_SNAPSHOT, QP_STATE_FILE_OTHER},
      {QP_STATE_LOCK, QP_STATE_FILE_OTHER},
  };
  for (guint i = 0; i < G_N_ELEMENTS(files); i++) {
    gsize id_len = 0;
    g_assert_cmpint(qp_state_file_kind(files[i].name, &id_len), ==,
                    files[i].kind);
    if (files[i].kind != QP_STATE_FILE_OTHER)
      g_assert_cmpuint(id_len, ==, strlen("vm-1"));
    g_autofree char *tmp = qp_state_temp_name(files[i].name);
    g_autofree char *want = g_strdup_printf(
        ".%s.tmp-%d", files[i].name + (files[i].name[0] == '.'), getpid());
    g_assert_cmpstr(tmp, ==, want);
    g_assert_cmpint(qp_state_file_kind(tmp, &id_len), ==, QP_STATE_FILE_TEMP);
  }
  g_autofree char *record = qp_state_record_name("vm-1");
  g_autofree char *corrupt = qp_state_corrupt_name("vm-1");
  g_autofree char *own = qp_state_snapshot_name(TRUE);
  g_autofree char *private_name = qp_state_snapshot_name(FALSE);
  g_autofree char *own_want = g_strdup_printf(".host-snapshot-%u", geteuid());
  g_assert_cmpstr(record, ==, "vm-1.json");
  g_assert_cmpstr(corrupt, ==, "vm-1.json.corrupt");
  g_assert_cmpstr(own, ==, own_want);
  g_assert_cmpstr(private_name, ==, ".host-snapshot");
  /* Not temporary files: no pid, or not hidden. */
  gsize n;
  g_assert_cmpint(qp_state_file_kind(".vm.json.tmp-", &n), ==,
                  QP_STATE_FILE_OTHER);
  g_assert_cmpint(qp_state_file_kind(".vm.json.tmp-12x", &n), ==,
                  QP_STATE_FILE_OTHER);
  g_assert_cmpint(qp_state_file_kind("vm.json.tmp-12", &n), ==,
                  QP_STATE_FILE_OTHER);
}

/* A pid that no process has any more. */
static int
dead_pid(void)
{
  pid_t child = fork();
  g_assert_cmpint(child, >=, 0);
  if (child == 0)
    _exit(0);
  int status;
  g_assert_cmpint(waitpid(child, &status, 0), ==, child);
  return child;
}

static void
touch(int dirfd, const char *name)
{
  int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  g_assert_cmpint(fd, >=, 0);
  close(fd);
}

/* qp_state_file_replace() writes through the temporary file and leaves
 * none; the sweep removes a dead writer's and keeps a live one's. */
static void
test_replace_and_sweep(void)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *tmp = g_dir_make_tmp("qp-state-XXXXXX", &error);
  g_assert_no_error(error);
  g_autofree char *dir = g_build_filename(tmp, "state", NULL);
  struct stat st;
  int dirfd = qp_state_dir_open(dir, TRUE, &st, &error);
  g_assert_no_error(error);
  g_assert_cmpint(dirfd, >=, 0);
  g_assert_cmpuint(st.st_mode & 07777, ==, 0700);
  g_assert_false(qp_state_dir_is_shared(&st));

  int errsv = 0;
  g_autofree char *used = NULL;
  g_assert_true(qp_state_file_replace(dirfd, QP_STATE_SUMMARY, "x\n", 2, 0600,
                                      FALSE, NULL, &errsv, NULL, &used));
  g_autofree char *want = qp_state_temp_name(QP_STATE_SUMMARY);
  g_assert_cmpstr(used, ==, want);
  g_assert_cmpint(faccessat(dirfd, used, F_OK, 0), <, 0);
  g_assert_cmpint(faccessat(dirfd, QP_STATE_SUMMARY, F_OK, 0), ==, 0);

  g_autofree char *gone = g_strdup_printf(".summary.tmp-%d", dead_pid());
  g_autofree char *mine = g_strdup_printf(".summary.tmp-%d", getpid());
  touch(dirfd, gone);
  touch(dirfd, mine);
  g_assert_true(qp_state_sweep_temp(dirfd, gone));
  g_assert_false(qp_state_sweep_temp(dirfd, mine));
  g_assert_false(qp_state_sweep_temp(dirfd, QP_STATE_SUMMARY));
  g_assert_cmpint(faccessat(dirfd, gone, F_OK, 0), <, 0);
  g_assert_cmpint(faccessat(dirfd, mine, F_OK, 0), ==, 0);
  g_assert_cmpint(faccessat(dirfd, QP_STATE_SUMMARY, F_OK, 0), ==, 0);

  unlinkat(dirfd, mine, 0);
  unlinkat(dirfd, QP_STATE_SUMMARY, 0);
  close(dirfd);
  g_assert_cmpint(rmdir(dir), ==, 0);
  g_assert_cmpint(rmdir(tmp), ==, 0);
}

/* A directory others may write, or a symlink, is refused with the mode it
 * should have; without CREATE a missing one is an error too. */
static void
test_checks(void)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *tmp = g_dir_make_tmp("qp-state-XXXXXX", &error);
  g_assert_no_error(error);
  g_autofree char *open_dir = g_build_filename(tmp, "open", NULL);
  g_autofree char *link = g_build_filename(tmp, "link", NULL);
  g_autofree char *missing = g_build_filename(tmp, "missing", NULL);
  g_assert_cmpint(mkdir(open_dir, 0700), ==, 0);
  g_assert_cmpint(chmod(open_dir, 0777), ==, 0);
  g_assert_cmpint(symlink(open_dir, link), ==, 0);

  g_assert_cmpint(qp_state_dir_open(open_dir, FALSE, NULL, &error), <, 0);
  g_assert_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_LEDGER);
  g_assert_nonnull(strstr(error->message, "mode 0777, writable by others"));
  g_clear_error(&error);
  g_assert_cmpint(qp_state_dir_open(link, TRUE, NULL, &error), <, 0);
  g_assert_nonnull(strstr(error->message, "is a symlink"));
  g_clear_error(&error);
  g_assert_cmpint(qp_state_dir_open(missing, FALSE, NULL, &error), <, 0);
  g_assert_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_LEDGER);
  g_clear_error(&error);

  g_autofree char *warning = NULL;
  g_autofree char *chosen = qp_state_dir_for(open_dir, &warning);
  g_assert_cmpstr(chosen, ==, open_dir);
  g_assert_null(warning);

  unlink(link);
  rmdir(open_dir);
  rmdir(tmp);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/state-dir/names", test_names);
  g_test_add_func("/state-dir/replace-and-sweep", test_replace_and_sweep);
  g_test_add_func("/state-dir/checks", test_checks);
  return g_test_run();
}
