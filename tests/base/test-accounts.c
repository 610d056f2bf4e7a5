/* Users' and groups' names (topology/base/accounts.c) as the static
 * launcher reads them, from passwd and group files of the test's own, and
 * as the full program asks the C library (NSS), which must agree for what
 * /etc holds. */
#include "topology/base/accounts.h"

#include <glib/gstdio.h>
#include <grp.h>
#include <pwd.h>
#include <unistd.h>

static char *
write_etc(void)
{
  char *dir = g_dir_make_tmp("qp-accounts-XXXXXX", NULL);
  g_assert_nonnull(dir);
  const char *group = "# a comment line is no group\n"
                      "root:x:0:\n"
                      "+nis\n"
                      "-other:x:55:\n"
                      "broken:x\n"
                      "noid:x::\n"
                      "neg:x:-3:\n"
                      ":x:44:\n"
                      "kvm:x:107:libvirt-qemu,qp\n"
                      "big:x:4294967296:\n"
                      "twice:x:500:\n"
                      "twice-again:x:500:\n"
                      "last:x:900:a";
  const char *passwd = "root:x:0:0:root:/root:/bin/sh\n"
                       "qp:x:1000:1000::/home/qp:/bin/sh\n";
  g_autofree char *g = g_build_filename(dir, "group", NULL);
  g_autofree char *p = g_build_filename(dir, "passwd", NULL);
  g_assert_true(g_file_set_contents(g, group, -1, NULL));
  g_assert_true(g_file_set_contents(p, passwd, -1, NULL));
  return dir;
}

static void
test_files(void)
{
  g_autofree char *dir = write_etc();
  qp_accounts_files_only(dir);
  gid_t gid = 12345;
  g_assert_true(qp_group_gid("kvm", &gid));
  g_assert_cmpuint(gid, ==, 107);
  g_assert_true(qp_group_gid("root", &gid));
  g_assert_cmpuint(gid, ==, 0);
  g_assert_true(qp_group_gid("last", &gid)); /* no newline at the end */
  g_assert_cmpuint(gid, ==, 900);
  /* NIS escapes, broken lines and ids out of range are no groups. */
  const char *none[] = {"nis", "+nis", "other", "broken", "noid",
                        "neg", "",     "big",   "nosuch", "kv"};
  for (gsize i = 0; i < G_N_ELEMENTS(none); i++)
    g_assert_false(qp_group_gid(none[i], &gid));
  g_autofree char *kvm = qp_group_label(107);
  g_assert_cmpstr(kvm, ==, "kvm");
  g_autofree char *first = qp_group_label(500); /* the first of two */
  g_assert_cmpstr(first, ==, "twice");
  g_autofree char *unknown = qp_group_label(4242);
  g_assert_cmpstr(unknown, ==, "4242");
  g_autofree char *user = qp_user_label(1000);
  g_assert_cmpstr(user, ==, "qp");
  g_autofree char *nouser = qp_user_label(4242);
  g_assert_cmpstr(nouser, ==, "uid 4242");
  /* Without the files: numbers, no group. */
  g_autofree char *g = g_build_filename(dir, "group", NULL);
  g_autofree char *p = g_build_filename(dir, "passwd", NULL);
  g_unlink(g);
  g_unlink(p);
  g_assert_false(qp_group_gid("kvm", &gid));
  g_autofree char *gone = qp_group_label(107);
  g_assert_cmpstr(gone, ==, "107");
  g_autofree char *gone_user = qp_user_label(0);
  g_assert_cmpstr(gone_user, ==, "uid 0");
  g_rmdir(dir);
}

/* Run first: the C library's answer (the default) and the files' for the
 * test's own user and group and root's, which /etc holds. */
static void
test_nss_agrees(void)
{
  struct passwd *pw = getpwuid(0);
  struct group *gr = getgrgid(0);
  if (pw == NULL || gr == NULL) {
    g_test_skip("this system has no user or group 0");
    return;
  }
  g_autofree char *root = g_strdup(pw->pw_name);
  g_autofree char *root_group = g_strdup(gr->gr_name);
  g_autofree char *nss_user = qp_user_label(0);
  g_autofree char *nss_group = qp_group_label(0);
  g_assert_cmpstr(nss_user, ==, root);
  g_assert_cmpstr(nss_group, ==, root_group);
  gid_t gid = 1;
  g_assert_true(qp_group_gid(root_group, &gid));
  g_assert_cmpuint(gid, ==, 0);
  qp_accounts_files_only(NULL);
  g_autofree char *files_user = qp_user_label(0);
  g_autofree char *files_group = qp_group_label(0);
  g_assert_cmpstr(files_user, ==, root);
  g_assert_cmpstr(files_group, ==, root_group);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/accounts/nss-and-etc-agree", test_nss_agrees);
  g_test_add_func("/accounts/files", test_files);
  return g_test_run();
}
