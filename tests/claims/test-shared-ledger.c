/* One ledger for every user that runs QEMU (docs/ledger.md, "Shared
 * ledger"), with the real qemu-pin and real QEMU (TCG): root and an
 * unprivileged user (libvirt's libvirt-qemu when the host has it, else one
 * made here) launch through the same scratch ledger, mode 3770 for the
 * user's group. Each sees the other's claim when planning, root's status
 * lists both, the user can neither remove nor rewrite root's record, and
 * killing one VM releases its claim alone. The user's side runs through
 * setpriv(1). */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/common/qp-test.h"

#define TEST_USER "qp-ledger-test"
/* The member .ci/setup makes (group kvm), preferred. */
#define MEMBER_USER "qp-member"

typedef struct {
  char *dir;     /* scratch directory, readable by the user */
  char *state;   /* the shared ledger: 3770 root:GROUP */
  char *udir;    /* the user's own files (monitor socket, output) */
  char *rdir;    /* root's */
  char *halt_fw; /* a guest that sleeps */
  char *marker;  /* in every command line started here */
  uid_t uid;
  gid_t gid;
  char *user;
} Fixture;

/* The unprivileged user: libvirt's QEMU user when there is one, else a
 * system user made for the test. FALSE (with a skip) when neither. */
static gboolean
find_user(Fixture *f)
{
  struct passwd *pw = getpwnam(MEMBER_USER);
  if (pw == NULL)
    pw = getpwnam("libvirt-qemu");
  if (pw == NULL)
    pw = getpwnam(TEST_USER);
  if (pw == NULL && g_file_test("/usr/sbin/useradd", G_FILE_TEST_EXISTS)) {
    char *argv[] = {"/usr/sbin/useradd", "--system", "--user-group",
                    "--no-create-home",  "--shell",  "/usr/sbin/nologin",
                    TEST_USER,           NULL};
    QpTestRun r;
    qp_test_run(argv, NULL, &r);
    qp_test_run_clear(&r);
    pw = getpwnam(TEST_USER);
  }
  if (pw == NULL) {
    g_test_skip("no unprivileged user: libvirt-qemu is missing and useradd "
                "could not make " TEST_USER);
    return FALSE;
  }
  f->uid = pw->pw_uid;
  f->gid = pw->pw_gid;
  f->user = g_strdup(pw->pw_name);
  return TRUE;
}

static gboolean
setup(Fixture *f)
{
  if (geteuid() != 0) {
    g_test_skip("needs root: the test launches as root and as another user");
    return FALSE;
  }
  if (!g_file_test("/usr/bin/setpriv", G_FILE_TEST_IS_EXECUTABLE)) {
    g_test_skip("no /usr/bin/setpriv to launch as another user");
    return FALSE;
  }
  if (!find_user(f))
    return FALSE;
  f->dir = qp_test_tmpdir();
  g_assert_cmpint(chmod(f->dir, 0755), ==, 0);
  f->marker = g_path_get_basename(f->dir);
  /* Whatever happens to this test, no QEMU it started outlives it. */
  qp_test_guard_start(f->marker);
  f->halt_fw = qp_test_firmware(f->dir, QP_TEST_FW_HALT);
  g_assert_cmpint(chmod(f->halt_fw, 0644), ==, 0);
  f->state = g_build_filename(f->dir, "state", NULL);
  g_assert_cmpint(mkdir(f->state, 0700), ==, 0);
  g_assert_cmpint(chown(f->state, 0, f->gid), ==, 0);
  g_assert_cmpint(chmod(f->state, 03770), ==, 0);
  f->udir = g_build_filename(f->dir, "user", NULL);
  f->rdir = g_build_filename(f->dir, "root", NULL);
  g_assert_cmpint(mkdir(f->udir, 0700), ==, 0);
  g_assert_cmpint(chown(f->udir, f->uid, f->gid), ==, 0);
  g_assert_cmpint(mkdir(f->rdir, 0700), ==, 0);
  return TRUE;
}

static void
teardown(Fixture *f)
{
  if (f->marker != NULL) {
    g_autoptr(GArray) left = qp_test_pids_with(f->marker);
    for (guint i = 0; i < left->len; i++)
      kill(g_array_index(left, int, i), SIGKILL);
    qp_test_wait_no_process(f->marker, 10000);
  }
  qp_test_guard_stop();
  qp_test_rmtree(f->dir);
  g_free(f->dir);
  g_free(f->state);
  g_free(f->udir);
  g_free(f->rdir);
  g_free(f->halt_fw);
  g_free(f->marker);
  g_free(f->user);
}

/* ARGV run as the fixture's user (AS_USER) or as root. */
static GPtrArray *
as(Fixture *f, gboolean as_user)
{
  GPtrArray *a = g_ptr_array_new_with_free_func(g_free);
  if (!as_user)
    return a;
  g_ptr_array_add(a, g_strdup("/usr/bin/setpriv"));
  g_ptr_array_add(a, g_strdup_printf("--reuid=%u", (unsigned)f->uid));
  g_ptr_array_add(a, g_strdup_printf("--regid=%u", (unsigned)f->gid));
  g_ptr_array_add(a, g_strdup("--init-groups"));
  g_ptr_array_add(a, g_strdup("--"));
  return a;
}

/* qemu-pin --state-dir=STATE -- QEMU ... -m MIB, named NAME, its monitor
 * in the launching side's own directory. */
/* The directory of VM NAME's monitor socket and output, owned by the side
 * that launches it; an old socket in it removed. */
static char *
vm_dir(Fixture *f, gboolean as_user, const char *name)
{
  char *dir = g_build_filename(as_user ? f->udir : f->rdir, name, NULL);
  if (mkdir(dir, 0700) == 0 && as_user)
    g_assert_cmpint(chown(dir, f->uid, f->gid), ==, 0);
  g_autofree char *sock = g_build_filename(dir, "qmp.sock", NULL);
  unlink(sock);
  return dir;
}

static GPtrArray *
launch_mode(Fixture *f, gboolean as_user, const char *name, guint64 mib,
            const char *mode)
{
  GPtrArray *a = as(f, as_user);
  g_ptr_array_add(a, g_strdup(qp_test_binary()));
  g_ptr_array_add(a, g_strdup_printf("--state-dir=%s", f->state));
  g_ptr_array_add(a, g_strdup_printf("--mode=%s", mode));
  g_ptr_array_add(a, g_strdup("--"));
  const char *common[] = {qp_test_qemu(), "-accel", "tcg",   "-machine",
                          "q35",          "-smp",   "1",     "-nodefaults",
                          "-display",     "none",   "-bios", NULL};
  for (guint i = 0; common[i]; i++)
    g_ptr_array_add(a, g_strdup(common[i]));
  g_ptr_array_add(a, g_strdup(f->halt_fw));
  g_ptr_array_add(a, g_strdup("-m"));
  g_ptr_array_add(a, g_strdup_printf("%" G_GUINT64_FORMAT, mib));
  g_ptr_array_add(a, g_strdup("-name"));
  g_ptr_array_add(a,
                  g_strdup_printf("%s-%s,debug-threads=on", name, f->marker));
  /* The VM's own identity, as orchestrators pass it. */
  g_ptr_array_add(a, g_strdup("-uuid"));
  g_ptr_array_add(a, g_uuid_string_random());
  g_ptr_array_add(a, g_strdup("-qmp"));
  g_autofree char *dir = vm_dir(f, as_user, name);
  g_ptr_array_add(a,
                  g_strdup_printf("unix:%s/qmp.sock,server=on,wait=off", dir));
  g_ptr_array_add(a, NULL);
  return a;
}

static GPtrArray *
launch_command(Fixture *f, gboolean as_user, const char *name, guint64 mib)
{
  return launch_mode(f, as_user, name, mib, "balanced");
}

/* Launches a VM in MODE and waits until its guest runs: QEMU's PID
 * (setpriv and qemu-pin exec in place). */
static GPid
start_vm_mode(Fixture *f, gboolean as_user, const char *name, guint64 mib,
              const char *mode)
{
  g_autoptr(GPtrArray) cmd = launch_mode(f, as_user, name, mib, mode);
  g_autofree char *dir = vm_dir(f, as_user, name);
  GPid pid = qp_test_spawn((char **)cmd->pdata, NULL, dir);
  g_autofree char *qmp = g_build_filename(dir, "qmp.sock", NULL);
  if (!qp_test_wait_status(qmp, "running", 60000)) {
    g_autofree char *errf = g_build_filename(dir, "stderr", NULL);
    g_autofree char *err = NULL;
    g_file_get_contents(errf, &err, NULL, NULL);
    g_test_message("launch of %s: %s", name, err);
    g_assert_not_reached();
  }
  /* A member of the group launches on the shared ledger without a word. */
  g_autofree char *errf = g_build_filename(dir, "stderr", NULL);
  g_autofree char *err = NULL;
  g_assert_true(g_file_get_contents(errf, &err, NULL, NULL));
  g_assert_cmpstr(err, ==, "");
  return pid;
}

static GPid
start_vm(Fixture *f, gboolean as_user, const char *name, guint64 mib)
{
  return start_vm_mode(f, as_user, name, mib, "balanced");
}

/* A launch of MIB that must be refused for lack of memory. */
static void
assert_refused(Fixture *f, gboolean as_user, const char *name, guint64 mib)
{
  g_autoptr(GPtrArray) cmd = launch_command(f, as_user, name, mib);
  QpTestRun r;
  qp_test_run((char **)cmd->pdata, NULL, &r);
  g_test_message("%s: status %d, stderr %s", name, r.status, r.err);
  g_assert_cmpint(r.status, !=, 0);
  g_assert_nonnull(strstr(r.err, "does not fit"));
  g_assert_cmpuint(qp_test_count_lines(r.err), ==, 1);
  qp_test_run_clear(&r);
}

static JsonObject *
parse_object(const char *text)
{
  g_autoptr(JsonParser) p = json_parser_new();
  GError *error = NULL;
  json_parser_load_from_data(p, text, -1, &error);
  g_assert_no_error(error);
  return json_object_ref(json_node_get_object(json_parser_get_root(p)));
}

/* `qemu-pin status --json [--prune]` on the shared ledger, as AS_USER. */
static JsonObject *
status_json(Fixture *f, gboolean as_user, gboolean prune)
{
  g_autoptr(GPtrArray) a = as(f, as_user);
  g_ptr_array_add(a, g_strdup(qp_test_binary()));
  g_ptr_array_add(a, g_strdup("status"));
  g_ptr_array_add(a, g_strdup("--json"));
  g_ptr_array_add(a, g_strdup_printf("--state-dir=%s", f->state));
  if (prune)
    g_ptr_array_add(a, g_strdup("--prune"));
  g_ptr_array_add(a, NULL);
  QpTestRun r;
  qp_test_run((char **)a->pdata, NULL, &r);
  if (r.status != 0 || *r.err != '\0')
    g_test_message("status: %s", r.err);
  g_assert_cmpint(r.status, ==, 0);
  g_assert_cmpstr(r.err, ==, "");
  JsonObject *o = parse_object(r.out);
  qp_test_run_clear(&r);
  return o;
}

static gint64
node0_mem(JsonObject *status, const char *what)
{
  JsonArray *nodes = json_object_get_array_member(status, "nodes");
  JsonObject *n = json_array_get_object_element(nodes, 0);
  g_assert_cmpint(json_object_get_int_member(n, "id"), ==, 0);
  JsonObject *m = json_object_get_object_member(n, "memory-mib");
  return json_object_get_int_member(m, what);
}

/* The id of the VM whose name starts with NAME in STATUS (NULL: none). */
static const char *
vm_id(JsonObject *status, const char *name)
{
  JsonArray *vms = json_object_get_array_member(status, "vms");
  for (guint i = 0; i < json_array_get_length(vms); i++) {
    JsonObject *vm = json_array_get_object_element(vms, i);
    if (g_str_has_prefix(json_object_get_string_member(vm, "name"), name))
      return json_object_get_string_member(vm, "id");
  }
  return NULL;
}

static char *
record_path(Fixture *f, const char *id)
{
  g_autofree char *name = g_strconcat(id, ".json", NULL);
  return g_build_filename(f->state, name, NULL);
}

static uid_t
owner(const char *path)
{
  struct stat st;
  g_assert_cmpint(stat(path, &st), ==, 0);
  return st.st_uid;
}

/* A shell command run as the user; its exit status. */
static int
user_sh(Fixture *f, const char *script)
{
  g_autoptr(GPtrArray) a = as(f, TRUE);
  g_ptr_array_add(a, g_strdup("/bin/sh"));
  g_ptr_array_add(a, g_strdup("-c"));
  g_ptr_array_add(a, g_strdup(script));
  g_ptr_array_add(a, NULL);
  QpTestRun r;
  qp_test_run((char **)a->pdata, NULL, &r);
  g_test_message("as %s: %s: status %d %s", f->user, script, r.status, r.err);
  int status = r.status;
  qp_test_run_clear(&r);
  return status;
}

/* What the user may not do to root's record at PATH (TEXT its content):
 * remove it, write it, replace it by rename, or prune it. */
static void
assert_user_cannot_touch(Fixture *f, const char *path, const char *text)
{
  g_autofree char *rm = g_strdup_printf("rm -f '%s'", path);
  g_autofree char *wr = g_strdup_printf("echo '{}' > '%s'", path);
  g_autofree char *mv = g_strdup_printf(
      "echo '{}' > '%s/.x' && mv -f '%s/.x' '%s'", f->state, f->state, path);
  g_assert_cmpint(user_sh(f, rm), !=, 0);
  g_assert_cmpint(user_sh(f, wr), !=, 0);
  g_assert_cmpint(user_sh(f, mv), !=, 0);
  json_object_unref(status_json(f, TRUE, TRUE)); /* the user's --prune */
  g_autofree char *now = NULL;
  g_assert_true(g_file_get_contents(path, &now, NULL, NULL));
  g_assert_cmpstr(now, ==, text);
  g_assert_cmpuint(owner(path), ==, 0);
}

static void
test_two_users(void)
{
  Fixture fx = {0}, *f = &fx;
  if (!setup(f))
    return;
  g_autoptr(JsonObject) empty = status_json(f, FALSE, FALSE);
  gint64 room = node0_mem(empty, "uncommitted");
  g_assert_cmpint(room, >=, 256);

  /* The user's VM takes half of node 0, root's VM the rest: then neither
   * has room for a quarter more, which each sees only with the other's
   * claim counted (its own leaves half). The node's size may drift a
   * little while the test runs (a guest host's balloon): each VM is sized
   * from the free memory of the moment, and a quarter is far above it. */
  GPid upid = start_vm(f, TRUE, "user-vm", (guint64)room / 2);
  g_autoptr(JsonObject) half = status_json(f, FALSE, FALSE);
  g_assert_cmpint(node0_mem(half, "claimed"), ==, room / 2);
  /* The rest less a margin: what the kernel can give drifts meanwhile. */
  gint64 rest = node0_mem(half, "uncommitted") - 64;
  GPid rpid = start_vm(f, FALSE, "root-vm", (guint64)rest);
  assert_refused(f, TRUE, "user-vm2", (guint64)room / 4);
  assert_refused(f, FALSE, "root-vm2", (guint64)room / 4);

  /* Root's status lists both, each record owned by its launcher. */
  g_autoptr(JsonObject) both = status_json(f, FALSE, FALSE);
  g_assert_cmpuint(
      json_array_get_length(json_object_get_array_member(both, "vms")), ==, 2);
  g_autofree char *upath = record_path(f, vm_id(both, "user-vm"));
  g_autofree char *rpath = record_path(f, vm_id(both, "root-vm"));
  g_assert_cmpuint(owner(upath), ==, f->uid);
  g_assert_cmpuint(owner(rpath), ==, 0);
  /* The user reads root's record too. */
  g_autoptr(JsonObject) seen = status_json(f, TRUE, FALSE);
  g_assert_nonnull(vm_id(seen, "root-vm"));

  g_autofree char *rtext = NULL;
  g_assert_true(g_file_get_contents(rpath, &rtext, NULL, NULL));
  assert_user_cannot_touch(f, rpath, rtext);

  /* Killing the user's VM releases its claim alone. */
  g_assert_cmpint(kill(upid, SIGKILL), ==, 0);
  g_assert_cmpint(qp_test_wait(upid, 10000), ==, 128 + SIGKILL);
  for (int i = 0; i < 1000 && g_file_test(upath, G_FILE_TEST_EXISTS); i++)
    g_usleep(10000);
  g_assert_false(g_file_test(upath, G_FILE_TEST_EXISTS));
  g_autoptr(JsonObject) after = status_json(f, FALSE, FALSE);
  g_assert_null(vm_id(after, "user-vm"));
  g_assert_nonnull(vm_id(after, "root-vm"));
  g_assert_cmpint(node0_mem(after, "claimed"), ==, rest);

  /* And root's, its own alone: the user's VM again holds its half, or what
   * the node can give now if that is less, less a margin (the kernel's free
   * memory drifts while the test runs: 2 MiB between the look and the
   * launch failed a run on a busy host). */
  const gint64 again = MIN(room / 2, node0_mem(after, "uncommitted") - 64);
  upid = start_vm(f, TRUE, "user-vm", (guint64)again);
  g_assert_cmpint(kill(rpid, SIGKILL), ==, 0);
  g_assert_cmpint(qp_test_wait(rpid, 10000), ==, 128 + SIGKILL);
  for (int i = 0; i < 1000 && g_file_test(rpath, G_FILE_TEST_EXISTS); i++)
    g_usleep(10000);
  g_assert_false(g_file_test(rpath, G_FILE_TEST_EXISTS));
  g_autoptr(JsonObject) last = status_json(f, FALSE, FALSE);
  g_assert_nonnull(vm_id(last, "user-vm"));
  g_assert_null(vm_id(last, "root-vm"));
  g_assert_cmpint(node0_mem(last, "claimed"), ==, again);
  kill(upid, SIGKILL);
  qp_test_wait(upid, 10000);
  teardown(f);
}

/* Leaves a stale record: a VM whose keeper and QEMU are killed, its
 * record's path returned. */
static char *
stale_vm(Fixture *f, gboolean as_user, const char *name)
{
  GPid pid = start_vm(f, as_user, name, 64);
  g_autoptr(JsonObject) st = status_json(f, FALSE, FALSE);
  JsonArray *vms = json_object_get_array_member(st, "vms");
  const char *id = vm_id(st, name);
  if (id == NULL) {
    g_autofree char *text =
        json_to_string(json_object_get_member(st, "vms"), FALSE);
    g_test_message("%s is not in the ledger: %s", name, text);
  }
  g_assert_nonnull(id);
  for (guint i = 0; i < json_array_get_length(vms); i++) {
    JsonObject *vm = json_array_get_object_element(vms, i);
    if (strcmp(json_object_get_string_member(vm, "id"), id) == 0)
      kill((pid_t)json_object_get_int_member(vm, "keeper-pid"), SIGKILL);
  }
  kill(pid, SIGKILL);
  qp_test_wait(pid, 10000);
  g_autofree char *marker = g_strdup_printf("%s-%s", name, f->marker);
  g_assert_true(qp_test_wait_no_process(marker, 10000));
  char *path = record_path(f, id);
  g_assert_true(g_file_test(path, G_FILE_TEST_EXISTS));
  return path;
}

static guint
n_vms(JsonObject *status)
{
  return json_array_get_length(json_object_get_array_member(status, "vms"));
}

/* A dead VM's record counts for nothing to anyone; a reader removes only
 * its own such records, root's `status --prune` any. */
static void
test_stale_records(void)
{
  Fixture fx = {0}, *f = &fx;
  if (!setup(f))
    return;
  /* Root's plain status (in stale_vm) leaves the user's stale record. */
  g_autofree char *ustale = stale_vm(f, TRUE, "user-gone");
  g_autofree char *rstale = stale_vm(f, FALSE, "root-gone");
  g_assert_true(g_file_test(ustale, G_FILE_TEST_EXISTS));

  g_autoptr(JsonObject) by_user = status_json(f, TRUE, TRUE);
  g_assert_cmpuint(n_vms(by_user), ==, 0);
  g_assert_false(g_file_test(ustale, G_FILE_TEST_EXISTS));
  g_assert_true(g_file_test(rstale, G_FILE_TEST_EXISTS));
  g_assert_cmpuint(owner(rstale), ==, 0);

  g_autofree char *ustale2 = stale_vm(f, TRUE, "user-gone2");
  g_autoptr(JsonObject) by_root = status_json(f, FALSE, FALSE);
  g_assert_cmpuint(n_vms(by_root), ==, 0);
  g_assert_false(g_file_test(rstale, G_FILE_TEST_EXISTS));
  g_assert_true(g_file_test(ustale2, G_FILE_TEST_EXISTS));
  g_autoptr(JsonObject) pruned = status_json(f, FALSE, TRUE);
  g_assert_cmpuint(n_vms(pruned), ==, 0);
  g_assert_false(g_file_test(ustale2, G_FILE_TEST_EXISTS));
  teardown(f);
}

/* A user that cannot use /run/qemu-pin runs on its own ledger, saying
 * so in one line that names the directory, why and the fix. The user's
 * qemu-pin runs in a private mount namespace with a fresh tmpfs on /run,
 * where there is no /run/qemu-pin whatever this host has there. */
static void
test_fallback_warning(void)
{
  Fixture fx = {0}, *f = &fx;
  if (!setup(f))
    return;
  g_autoptr(GPtrArray) a = g_ptr_array_new_with_free_func(g_free);
  const char *private_run[] = {"/usr/bin/unshare",
                               "--mount",
                               "--propagation",
                               "private",
                               "--",
                               "/bin/sh",
                               "-c",
                               "mount -t tmpfs tmpfs /run && exec \"$@\"",
                               "sh"};
  for (gsize i = 0; i < G_N_ELEMENTS(private_run); i++)
    g_ptr_array_add(a, g_strdup(private_run[i]));
  g_autoptr(GPtrArray) user = as(f, TRUE);
  for (guint i = 0; i < user->len; i++)
    g_ptr_array_add(a, g_strdup(user->pdata[i]));
  g_ptr_array_add(a, g_strdup(qp_test_binary()));
  g_ptr_array_add(a, g_strdup("status"));
  g_ptr_array_add(a, NULL);
  g_auto(GStrv) env =
      g_environ_setenv(g_get_environ(), "XDG_RUNTIME_DIR", f->udir, TRUE);
  QpTestRun r;
  qp_test_run((char **)a->pdata, env, &r);
  g_test_message("status as %s: %d, stderr: %s", f->user, r.status, r.err);
  if (r.status != 0 && g_str_has_prefix(r.err, "unshare: ")) {
    g_autofree char *why = g_strdup_printf(
        "no private mount namespace for the user's /run: %s", r.err);
    g_test_skip(g_strstrip(why));
  } else {
    g_assert_cmpint(r.status, ==, 0);
    g_autofree char *own = g_build_filename(f->udir, "qemu-pin", NULL);
    g_assert_cmpuint(qp_test_count_lines(r.err), ==, 1);
    g_assert_true(g_str_has_prefix(r.err, "qemu-pin: warning: shared ledger "
                                          "/run/qemu-pin is not usable: "));
    g_assert_nonnull(strstr(r.err, "systemd-tmpfiles --create"));
    g_assert_nonnull(strstr(r.err, own));
    /* A reader makes no ledger: the first launch does. */
    g_assert_false(g_file_test(own, G_FILE_TEST_EXISTS));
    g_assert_nonnull(strstr(r.out, "no VM holds a claim"));
  }
  qp_test_run_clear(&r);
  teardown(f);
}

/* ---- status --metrics ------------------------------------------------------
 */

/* `qemu-pin status --metrics` as root, read by prometheus_client's parser
 * (tests/claims/prom-parse.py); NULL, the test skipped, without it. */
static JsonObject *
metrics_parsed(Fixture *f)
{
  g_autofree char *sd = g_strdup_printf("--state-dir=%s", f->state);
  char *argv[] = {(char *)qp_test_binary(), "status", "--metrics", sd, NULL};
  QpTestRun r;
  qp_test_run(argv, NULL, &r);
  g_assert_cmpint(r.status, ==, 0);
  g_assert_cmpstr(r.err, ==, "");
  g_autofree char *path = g_build_filename(f->dir, "metrics.prom", NULL);
  g_assert_true(g_file_set_contents(path, r.out, -1, NULL));
  g_test_message("%s", r.out);
  qp_test_run_clear(&r);
  g_autofree char *script = g_build_filename(
      g_getenv("QP_SOURCE_ROOT"), "tests", "claims", "prom-parse.py", NULL);
  char *pargv[] = {"/usr/bin/python3", script, path, NULL};
  qp_test_run(pargv, NULL, &r);
  if (r.status == 77) {
    g_test_skip("python3-prometheus-client is not installed: no parser");
    qp_test_run_clear(&r);
    return NULL;
  }
  if (r.status != 0)
    g_test_message("prom-parse.py: %s", r.err);
  g_assert_cmpint(r.status, ==, 0);
  JsonObject *m = parse_object(r.out);
  qp_test_run_clear(&r);
  return m;
}

/* The value of the one sample NAME (without qemu_pin_) whose labels
 * include the pairs that follow (key, value, ..., NULL); -1 when none. */
static double metric(JsonObject *m, const char *name,
                     ...) G_GNUC_NULL_TERMINATED;

static double
metric(JsonObject *m, const char *name, ...)
{
  g_autofree char *full = g_strconcat("qemu_pin_", name, NULL);
  JsonArray *samples = json_object_get_array_member(m, "samples");
  double found = -1;
  guint n = 0;
  for (guint i = 0; i < json_array_get_length(samples); i++) {
    JsonObject *s = json_array_get_object_element(samples, i);
    if (strcmp(json_object_get_string_member(s, "name"), full) != 0)
      continue;
    JsonObject *labels = json_object_get_object_member(s, "labels");
    gboolean match = TRUE;
    va_list ap;
    va_start(ap, name);
    for (const char *k = va_arg(ap, const char *); k != NULL;
         k = va_arg(ap, const char *)) {
      const char *v = va_arg(ap, const char *);
      match &= json_object_has_member(labels, k) &&
               strcmp(json_object_get_string_member(labels, k), v) == 0;
    }
    va_end(ap);
    if (match) {
      found = json_object_get_double_member(s, "value");
      n++;
    }
  }
  g_assert_cmpuint(n, <=, 1);
  return found;
}

static guint
samples_named(JsonObject *m, const char *name)
{
  g_autofree char *full = g_strconcat("qemu_pin_", name, NULL);
  JsonArray *samples = json_object_get_array_member(m, "samples");
  guint n = 0;
  for (guint i = 0; i < json_array_get_length(samples); i++)
    n += strcmp(json_object_get_string_member(
                    json_array_get_object_element(samples, i), "name"),
                full) == 0;
  return n;
}

/* CPUs of a list ("0-3,8"); whether CPU is in it, when CPU >= 0. */
static guint
list_count(const char *list, int cpu, gboolean *has)
{
  guint n = 0;
  g_auto(GStrv) parts = g_strsplit(list, ",", -1);
  for (guint i = 0; parts[i] && *parts[i]; i++) {
    int a = atoi(parts[i]);
    const char *dash = strchr(parts[i], '-');
    int b = dash ? atoi(dash + 1) : a;
    n += (guint)(b - a + 1);
    if (has != NULL && cpu >= a && cpu <= b)
      *has = TRUE;
  }
  return n;
}

#define MIB 1048576.0

static void
check_node_metrics(JsonObject *m, JsonObject *n)
{
  g_autofree char *id =
      g_strdup_printf("%" G_GINT64_FORMAT, json_object_get_int_member(n, "id"));
  JsonObject *mem = json_object_get_object_member(n, "memory-mib");
  static const char *const pairs[][2] = {
      {"reserve", "node_memory_reserved_bytes"},
      {"claimed", "node_memory_claimed_bytes"},
      {"hugepage-pools", "node_memory_hugepage_pools_bytes"}};
  for (guint i = 0; i < G_N_ELEMENTS(pairs); i++)
    g_assert_cmpfloat(metric(m, pairs[i][1], "node", id, NULL), ==,
                      json_object_get_int_member(mem, pairs[i][0]) * MIB);
  /* The node's size and what a claim may take are read live from the
   * kernel by each of the two commands, a moment apart: the same within
   * what the host's memory moves meanwhile. */
  static const char *const live[][2] = {
      {"total", "node_memory_total_bytes"},
      {"uncommitted", "node_memory_free_bytes"}};
  for (guint i = 0; i < G_N_ELEMENTS(live); i++) {
    double got = metric(m, live[i][1], "node", id, NULL);
    double want = json_object_get_int_member(mem, live[i][0]) * MIB;
    g_test_message("node %s %s: metrics %.0f, json %.0f bytes", id, live[i][0],
                   got, want);
    g_assert_cmpfloat(got > want ? got - want : want - got, <=, 64 * MIB);
  }
  JsonArray *huge = json_object_get_array_member(n, "hugepages");
  for (guint i = 0; i < json_array_get_length(huge); i++) {
    JsonObject *h = json_array_get_object_element(huge, i);
    g_autofree char *size = g_strdup_printf(
        "%" G_GINT64_FORMAT, json_object_get_int_member(h, "page-kib") * 1024);
    g_assert_cmpfloat(metric(m, "node_hugepages_total_pages", "node", id,
                             "page_size_bytes", size, NULL),
                      ==, json_object_get_int_member(h, "total"));
    g_assert_cmpfloat(metric(m, "node_hugepages_free_pages", "node", id,
                             "page_size_bytes", size, NULL),
                      ==, json_object_get_int_member(h, "free"));
    g_assert_cmpfloat(metric(m, "node_hugepages_claimed_pages", "node", id,
                             "page_size_bytes", size, NULL),
                      ==, json_object_get_int_member(h, "claimed"));
  }
  guint dedicated =
      list_count(json_object_get_string_member(n, "dedicated-cpus"), -1, NULL);
  guint cpus = list_count(json_object_get_string_member(n, "cpus"), -1, NULL);
  g_assert_cmpfloat(metric(m, "node_dedicated_cpus", "node", id, NULL), ==,
                    dedicated);
  g_assert_cmpfloat(metric(m, "node_shared_cpus", "node", id, NULL), ==,
                    cpus - dedicated);
  g_assert_cmpfloat(metric(m, "node_shared_vcpus", "node", id, NULL), ==,
                    json_object_get_int_member(n, "shared-vcpus"));
}

/* The host node (as a string) of CPU, from STATUS's node lists. */
static char *
node_of_cpu(JsonObject *status, int cpu)
{
  JsonArray *nodes = json_object_get_array_member(status, "nodes");
  for (guint i = 0; i < json_array_get_length(nodes); i++) {
    JsonObject *n = json_array_get_object_element(nodes, i);
    gboolean has = FALSE;
    list_count(json_object_get_string_member(n, "cpus"), cpu, &has);
    if (has)
      return g_strdup_printf("%" G_GINT64_FORMAT,
                             json_object_get_int_member(n, "id"));
  }
  g_assert_not_reached();
}

/* One VM's claim in the metrics; returns its number of memory samples. */
static guint
check_vm_metrics(JsonObject *m, JsonObject *status, JsonObject *vm)
{
  const char *id = json_object_get_string_member(vm, "id");
  const char *uuid = json_object_get_string_member(vm, "uuid");
  g_assert_true(g_uuid_string_is_valid(uuid));
  g_assert_cmpstr(uuid, !=, id);
  const char *name = json_object_get_string_member(vm, "name");
  const char *mode = json_object_get_string_member(vm, "mode");
  JsonObject *mem = json_object_get_object_member(vm, "memory-mib");
  g_autoptr(GList) nodes = json_object_get_members(mem);
  for (GList *l = nodes; l; l = l->next)
    g_assert_cmpfloat(metric(m, "vm_memory_bytes", "claim", id, "uuid", uuid,
                             "name", name, "mode", mode, "node", l->data, NULL),
                      ==, json_object_get_int_member(mem, l->data) * MIB);
  JsonObject *load = json_object_get_object_member(vm, "load");
  g_autoptr(GList) lnodes = json_object_get_members(load);
  for (GList *l = lnodes; l; l = l->next)
    g_assert_cmpfloat(metric(m, "vm_shared_vcpus", "claim", id, "uuid", uuid,
                             "node", l->data, NULL),
                      ==, json_object_get_int_member(load, l->data));
  const char *ded = json_object_get_string_member(vm, "dedicated-cpus");
  GHashTable *per_node =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  for (int cpu = 0; cpu < 4096; cpu++) {
    gboolean has = FALSE;
    list_count(ded, cpu, &has);
    if (!has)
      continue;
    char *node = node_of_cpu(status, cpu);
    guint k = GPOINTER_TO_UINT(g_hash_table_lookup(per_node, node));
    g_hash_table_insert(per_node, node, GUINT_TO_POINTER(k + 1));
  }
  GHashTableIter it;
  gpointer key, value;
  g_hash_table_iter_init(&it, per_node);
  while (g_hash_table_iter_next(&it, &key, &value))
    g_assert_cmpfloat(metric(m, "vm_dedicated_cpus", "claim", id, "uuid", uuid,
                             "node", key, NULL),
                      ==, GPOINTER_TO_UINT(value));
  g_hash_table_unref(per_node);
  return g_list_length(nodes);
}

/* Every family a gauge with its help, named qemu_pin_*. */
static void
check_families(JsonObject *m)
{
  JsonObject *fams = json_object_get_object_member(m, "families");
  g_autoptr(GList) names = json_object_get_members(fams);
  g_assert_cmpuint(g_list_length(names), >=, 10);
  for (GList *l = names; l; l = l->next) {
    JsonObject *fam = json_object_get_object_member(fams, l->data);
    g_assert_true(g_str_has_prefix(l->data, "qemu_pin_"));
    g_assert_cmpstr(json_object_get_string_member(fam, "type"), ==, "gauge");
    g_assert_cmpuint(strlen(json_object_get_string_member(fam, "help")), >, 0);
  }
}

/* NODES (status --json's) without what the host's memory moves live
 * (memory-mib's total, uncommitted, outside-claims, outstanding,
 * kernel-can-give, available; the hugepages free): what the ledger and the
 * host's pools decide, as text. */
static char *
claimed_nodes(JsonObject *status)
{
  static const char *const live[] = {"total",           "uncommitted",
                                     "outside-claims",  "outstanding",
                                     "kernel-can-give", "available"};
  /* A deep copy (json_node_copy() shares the members). */
  g_autofree char *all =
      json_to_string(json_object_get_member(status, "nodes"), FALSE);
  JsonNode *copy = json_from_string(all, NULL);
  JsonArray *nodes = json_node_get_array(copy);
  for (guint i = 0; i < json_array_get_length(nodes); i++) {
    JsonObject *n = json_array_get_object_element(nodes, i);
    JsonObject *mem = json_object_get_object_member(n, "memory-mib");
    for (gsize k = 0; k < G_N_ELEMENTS(live); k++)
      json_object_remove_member(mem, live[k]);
    json_object_remove_member(n, "blocked");
    JsonArray *huge = json_object_get_array_member(n, "hugepages");
    for (guint h = 0; h < json_array_get_length(huge); h++)
      json_object_remove_member(json_array_get_object_element(huge, h), "free");
  }
  char *text = json_to_string(copy, FALSE);
  json_node_unref(copy);
  return text;
}

/* The ledger's and the pools' part of the nodes did not change between A
 * and B: metrics read in between saw it too (what moves live, the checks
 * allow for). */
static gboolean
same_nodes(JsonObject *a, JsonObject *b)
{
  g_autofree char *ta = claimed_nodes(a);
  g_autofree char *tb = claimed_nodes(b);
  return strcmp(ta, tb) == 0;
}

/* While two VMs run (one a user's, one root's dedicating a CPU) and a
 * user's stale record waits, `status --metrics` says what `status --json`
 * says. */
static void
test_metrics(void)
{
  Fixture fx = {0}, *f = &fx;
  if (!setup(f))
    return;
  GPid upid = start_vm(f, TRUE, "user-vm", 128);
  GPid rpid = start_vm_mode(f, FALSE, "root-vm", 96, "one-to-one");
  /* Last: the user's next launch would remove it. */
  g_autofree char *stale = stale_vm(f, TRUE, "user-gone");
  g_assert_true(g_file_test(stale, G_FILE_TEST_EXISTS));
  g_autoptr(JsonObject) status = NULL;
  g_autoptr(JsonObject) m = NULL;
  for (int i = 0; i < 20 && status == NULL; i++) {
    g_autoptr(JsonObject) before = status_json(f, FALSE, FALSE);
    g_clear_pointer(&m, json_object_unref);
    m = metrics_parsed(f);
    g_autoptr(JsonObject) after = status_json(f, FALSE, FALSE);
    if (m == NULL || same_nodes(before, after))
      status = g_steal_pointer(&before);
  }
  g_assert_nonnull(status);
  if (m != NULL) {
    check_families(m);
    JsonArray *nodes = json_object_get_array_member(status, "nodes");
    for (guint i = 0; i < json_array_get_length(nodes); i++)
      check_node_metrics(m, json_array_get_object_element(nodes, i));
    JsonArray *vms = json_object_get_array_member(status, "vms");
    g_assert_cmpuint(json_array_get_length(vms), ==, 2);
    guint n_mem = 0;
    for (guint i = 0; i < json_array_get_length(vms); i++)
      n_mem +=
          check_vm_metrics(m, status, json_array_get_object_element(vms, i));
    g_assert_cmpuint(samples_named(m, "vm_memory_bytes"), ==, n_mem);
    g_assert_cmpuint(samples_named(m, "vm_dedicated_cpus"), ==, 1);
    g_assert_cmpfloat(metric(m, "ledger_records", "state", "live", NULL), ==,
                      2);
    g_assert_cmpfloat(metric(m, "ledger_records", "state", "stale", NULL), ==,
                      1);
    g_assert_cmpfloat(metric(m, "ledger_records", "state", "unreadable", NULL),
                      ==, 0);
  }
  kill(upid, SIGKILL);
  kill(rpid, SIGKILL);
  qp_test_wait(upid, 10000);
  qp_test_wait(rpid, 10000);
  teardown(f);
}

/* Another command's option given to topology or status is refused in one
 * line naming it, exit 2, nothing on stdout (outside check, stop 42: they
 * were ignored); the environment's twins are for every command and stay
 * quiet. */
static void
test_other_commands_options(void)
{
  static const char *const rows[][2] = {
      {"topology", "--mode=balanced"},
      {"topology", "--metrics"},
      {"topology", "--state-dir=/nonexistent"},
      {"status", "--human"},
      {"status", "--dry-run"},
      {"rebalance", "--human"},
      {"rebalance", "--metrics"},
      {"rebalance", "--prune"},
      {"rebalance", "--picture=x.png"}};
  for (gsize i = 0; i < G_N_ELEMENTS(rows); i++) {
    char *argv[] = {(char *)qp_test_binary(), (char *)rows[i][0],
                    (char *)rows[i][1], NULL};
    QpTestRun r;
    qp_test_run(argv, NULL, &r);
    g_test_message("%s %s: %d %s", rows[i][0], rows[i][1], r.status, r.err);
    g_assert_cmpint(r.status, ==, 2);
    g_assert_cmpstr(r.out, ==, "");
    g_autofree char *opt = g_strndup(rows[i][1], strcspn(rows[i][1], "="));
    g_autofree char *want =
        g_strdup_printf("option '%s' is not for qemu-pin %s", opt, rows[i][0]);
    g_assert_nonnull(strstr(r.err, want));
    g_assert_true(strchr(r.err, '\n') == r.err + strlen(r.err) - 1);
    qp_test_run_clear(&r);
  }
  g_auto(GStrv) envp =
      g_environ_setenv(g_get_environ(), "QEMU_PIN_MODE", "balanced", TRUE);
  char *argv[] = {(char *)qp_test_binary(), "topology", "--json", NULL};
  QpTestRun r;
  qp_test_run(argv, envp, &r);
  g_assert_cmpint(r.status, ==, 0);
  qp_test_run_clear(&r);
}

/* status plans no VM: a placement option other than the host's reserve
 * (and qemu-pin's launch settings) given to it is refused in one line
 * naming it and what status takes, exit 2, nothing on stdout (before,
 * each was taken and ignored: exit 0 and the table). What status does
 * take still works: the reserve, per node and for the rest, shows in its
 * JSON. */
static void
test_status_placement_options(void)
{
  static const char *const refused[] = {"--mode=balanced",
                                        "--affinity=0",
                                        "--hostnodes=0",
                                        "--policy=bind",
                                        "--strategy=pack",
                                        "--smt=strict",
                                        "--device-locality=ignore",
                                        "--vnuma=off",
                                        "--make-room",
                                        "--rebalance-min-mib=1",
                                        "--qmp-timeout=1000",
                                        "--start-timeout=1000"};
  g_autofree char *dir = qp_test_tmpdir();
  g_autofree char *state = g_strdup_printf("--state-dir=%s", dir);
  for (gsize i = 0; i < G_N_ELEMENTS(refused); i++) {
    char *argv[] = {(char *)qp_test_binary(), "status", state,
                    (char *)refused[i], NULL};
    QpTestRun r;
    qp_test_run(argv, NULL, &r);
    g_test_message("status %s: %d %s", refused[i], r.status, r.err);
    g_assert_cmpint(r.status, ==, 2);
    g_assert_cmpstr(r.out, ==, "");
    g_autofree char *opt = g_strndup(refused[i], strcspn(refused[i], "="));
    g_autofree char *want = g_strdup_printf(
        "qemu-pin: option '%s' is not for qemu-pin status (it takes --json, "
        "--metrics, --prune, --picture, --state-dir, --config, --topology, "
        "--reserve-mib, --node-reserve-mib and -v): see qemu-pin --help\n",
        opt);
    g_assert_cmpstr(r.err, ==, want);
    qp_test_run_clear(&r);
  }
  g_autofree char *topo =
      g_build_filename(g_getenv("QP_TOPOLOGIES"), "2s-8node.xml", NULL);
  g_autofree char *topology = g_strdup_printf("--topology=%s", topo);
  char *argv[] = {(char *)qp_test_binary(),
                  "status",
                  state,
                  "--config=/dev/null",
                  topology,
                  "--reserve-mib=100",
                  "--node-reserve-mib=1:50",
                  "-v",
                  "--json",
                  NULL};
  QpTestRun r;
  qp_test_run(argv, NULL, &r);
  g_test_message("status: %d %s", r.status, r.err);
  g_assert_cmpint(r.status, ==, 0);
  g_autoptr(JsonParser) p = json_parser_new();
  g_assert_true(json_parser_load_from_data(p, r.out, -1, NULL));
  JsonArray *nodes = json_object_get_array_member(
      json_node_get_object(json_parser_get_root(p)), "nodes");
  g_assert_cmpuint(json_array_get_length(nodes), ==, 8);
  for (guint i = 0; i < json_array_get_length(nodes); i++) {
    JsonObject *n = json_array_get_object_element(nodes, i);
    JsonObject *m = json_object_get_object_member(n, "memory-mib");
    g_assert_cmpint(json_object_get_int_member(m, "reserve"), ==,
                    json_object_get_int_member(n, "id") == 1 ? 50 : 100);
  }
  qp_test_run_clear(&r);
  qp_test_rmtree(dir);
}

/* status prints one format: two of --json, --metrics, --picture are refused
 * in one line naming both, with nothing on stdout; so is a --picture of a
 * format it does not draw. */
static void
test_metrics_one_output(void)
{
  g_autofree char *dir = g_dir_make_tmp("qp-metrics-XXXXXX", NULL);
  g_autofree char *state = g_strdup_printf("--state-dir=%s", dir);
  static const char *const pairs[][2] = {{"--json", "--metrics"},
                                         {"--metrics", "--picture=x.png"}};
  for (gsize i = 0; i < G_N_ELEMENTS(pairs); i++) {
    char *argv[] = {
        (char *)qp_test_binary(), "status", state, (char *)pairs[i][0],
        (char *)pairs[i][1],      NULL};
    QpTestRun r;
    qp_test_run(argv, NULL, &r);
    g_assert_cmpint(r.status, ==, 2);
    g_assert_cmpstr(r.out, ==, "");
    g_assert_nonnull(strstr(r.err, "--metrics"));
    g_assert_cmpuint(strlen(r.err), >, 0);
    g_assert_true(strchr(r.err, '\n') == r.err + strlen(r.err) - 1);
    qp_test_run_clear(&r);
  }
  /* A picture of a format lstopo is not asked for: bad usage, named. */
  char *argv[] = {(char *)qp_test_binary(), "status", state,
                  "--picture=host.gif", NULL};
  QpTestRun r;
  qp_test_run(argv, NULL, &r);
  g_assert_cmpint(r.status, ==, 2);
  g_assert_cmpstr(r.out, ==, "");
  g_assert_cmpstr(r.err, ==,
                  "qemu-pin: --picture 'host.gif': expected a file name "
                  "ending in .png or .svg\n");
  qp_test_run_clear(&r);
  rmdir(dir);
}

/* ---- Records that lie ------------------------------------------------------
 */

/* Field 22 of /proc/PID/stat: its start time. */
static guint64
start_time(int pid)
{
  g_autofree char *path = g_strdup_printf("/proc/%d/stat", pid);
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
  const char *p = strrchr(text, ')');
  g_assert_nonnull(p);
  g_auto(GStrv) fields = g_strsplit(p + 2, " ", -1);
  g_assert_cmpuint(g_strv_length(fields), >, 19);
  return g_ascii_strtoull(fields[19], NULL, 10); /* field 3 is fields[0] */
}

/* The text of record TEMPLATE (a real record's path) made to say ID, NAME,
 * QEMU PID and its start time, MIB on node 0 and DEDICATED CPUs ("" for
 * none) in MODE, with no keeper. */
static char *
forged_record(const char *template, const char *id, const char *name, int pid,
              gint64 mib, const char *dedicated, const char *mode)
{
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(template, &text, NULL, NULL));
  g_autoptr(JsonObject) o = parse_object(text);
  json_object_set_string_member(o, "id", id);
  json_object_set_string_member(o, "name", name);
  json_object_set_int_member(o, "qemu-pid", pid);
  json_object_set_int_member(o, "qemu-start", (gint64)start_time(pid));
  json_object_set_int_member(o, "keeper-pid", 0);
  json_object_set_string_member(o, "mode", mode);
  JsonObject *mem = json_object_new();
  json_object_set_int_member(mem, "0", mib);
  json_object_set_object_member(o, "memory-mib", mem);
  json_object_set_string_member(o, "dedicated-cpus", dedicated);
  g_autoptr(JsonNode) root = json_node_new(JSON_NODE_OBJECT);
  json_node_set_object(root, o);
  return json_to_string(root, TRUE);
}

/* The member puts TEXT in the shared ledger as record ID, by rename (so
 * that it may replace its own record). */
static void
member_writes(Fixture *f, const char *id, const char *text)
{
  g_autofree char *src = g_strdup_printf("%s/%s.src", f->udir, id);
  g_assert_true(g_file_set_contents(src, text, -1, NULL));
  g_assert_cmpint(chown(src, f->uid, f->gid), ==, 0);
  g_autofree char *dst = record_path(f, id);
  g_autofree char *sh =
      g_strdup_printf("cp '%s' '%s/.forged' && mv -f '%s/.forged' '%s'", src,
                      f->state, f->state, dst);
  g_assert_cmpint(user_sh(f, sh), ==, 0);
  g_assert_cmpuint(owner(dst), ==, f->uid);
}

/* The entry of STATUS's "ignored" for record ID, or NULL. */
static JsonObject *
ignored_entry(Fixture *f, JsonObject *status, const char *id)
{
  g_autofree char *path = record_path(f, id);
  JsonArray *ign = json_object_get_array_member(status, "ignored");
  for (guint i = 0; i < json_array_get_length(ign); i++) {
    JsonObject *e = json_array_get_object_element(ign, i);
    if (strcmp(json_object_get_string_member(e, "file"), path) == 0)
      return e;
  }
  return NULL;
}

/* Record ID is ignored in STATUS, owned by the member, for a reason that
 * holds WHY. */
static void
assert_ignored(Fixture *f, JsonObject *status, const char *id, const char *why)
{
  JsonObject *e = ignored_entry(f, status, id);
  if (e == NULL) {
    g_autofree char *text =
        json_to_string(json_object_get_member(status, "ignored"), FALSE);
    g_test_message("%s is not ignored: %s", id, text);
  }
  g_assert_nonnull(e);
  g_assert_cmpint(json_object_get_int_member(e, "owner"), ==, f->uid);
  const char *reason = json_object_get_string_member(e, "reason");
  g_test_message("%s: %s", id, reason);
  g_assert_null(strchr(reason, '\n'));
  g_assert_nonnull(strstr(reason, why));
}

/* The VM record ID's memory on node 0 in STATUS, -1 when it is not there. */
static gint64
vm_mib(JsonObject *status, const char *id)
{
  JsonArray *vms = json_object_get_array_member(status, "vms");
  for (guint i = 0; i < json_array_get_length(vms); i++) {
    JsonObject *vm = json_array_get_object_element(vms, i);
    if (strcmp(json_object_get_string_member(vm, "id"), id) == 0)
      return json_object_get_int_member(
          json_object_get_object_member(vm, "memory-mib"), "0");
  }
  return -1;
}

/* A member of the group forges records (one naming PID 1, one its own
 * sleep, and its real VM's record rewritten to claim more than its -m):
 * none of them is counted, each is listed as ignored with its reason,
 * root's VM starts as if they were not there, and root's prune removes
 * them. The member's real 256 MiB VM counts 256 MiB. */
static void
test_forged_records(void)
{
  Fixture fx = {0}, *f = &fx;
  if (!setup(f))
    return;
  g_autoptr(JsonObject) empty = status_json(f, FALSE, FALSE);
  gint64 room = node0_mem(empty, "uncommitted");
  g_assert_cmpint(room, >=, 1024);

  GPid upid = start_vm(f, TRUE, "user-vm", 256);
  GPid u2pid = start_vm(f, TRUE, "user-small", 64);
  g_autoptr(JsonObject) real = status_json(f, FALSE, FALSE);
  g_autofree char *uid_ = g_strdup(vm_id(real, "user-vm"));
  g_autofree char *u2id = g_strdup(vm_id(real, "user-small"));
  g_assert_cmpint(vm_mib(real, uid_), ==, 256);
  g_assert_cmpint(node0_mem(real, "claimed"), ==, 256 + 64);
  g_autofree char *template = record_path(f, u2id);

  /* Each lie claims the whole node: counted, it would refuse root. */
  g_autofree char *init = forged_record(template, "forged-init", "innocent", 1,
                                        room, "0-1", "one-to-one");
  member_writes(f, "forged-init", init);
  g_autofree char *sleeper_argv0 = g_strdup_printf("sleep-%s", f->marker);
  g_autoptr(GPtrArray) sl = as(f, TRUE);
  g_ptr_array_add(sl, g_strdup("/bin/bash"));
  g_ptr_array_add(sl, g_strdup("-c"));
  g_ptr_array_add(sl,
                  g_strdup_printf("exec -a %s /bin/sleep 600", sleeper_argv0));
  g_ptr_array_add(sl, NULL);
  GPid sleeper = qp_test_spawn((char **)sl->pdata, NULL, f->udir);
  for (int i = 0; i < 500; i++) {
    g_autoptr(GArray) p = qp_test_pids_with(sleeper_argv0);
    if (p->len == 1 && g_array_index(p, int, 0) == sleeper)
      break;
    g_usleep(10000);
  }
  g_autofree char *snooze = forged_record(template, "forged-sleep", "sleepy",
                                          sleeper, room, "", "balanced");
  member_writes(f, "forged-sleep", snooze);
  g_autofree char *bigger =
      forged_record(template, u2id, "user-small", u2pid, room, "", "balanced");
  member_writes(f, u2id, bigger);

  /* Root and the member see the same: the lies listed, not counted. */
  for (int as_user = 0; as_user < 2; as_user++) {
    g_autoptr(JsonObject) st = status_json(f, as_user, FALSE);
    g_assert_cmpuint(
        json_array_get_length(json_object_get_array_member(st, "ignored")), ==,
        3);
    assert_ignored(f, st, "forged-init", "qemu-pid 1 belongs to uid 0");
    assert_ignored(f, st, "forged-sleep", "is not QEMU (it runs sleep)");
    assert_ignored(f, st, u2id, "its QEMU's command line asks at most 64 MiB");
    g_assert_cmpuint(
        json_array_get_length(json_object_get_array_member(st, "vms")), ==, 1);
    g_assert_cmpint(vm_mib(st, uid_), ==, 256);
    g_assert_cmpint(node0_mem(st, "claimed"), ==, 256);
    g_assert_cmpstr(json_object_get_string_member(
                        json_array_get_object_element(
                            json_object_get_array_member(st, "nodes"), 0),
                        "dedicated-cpus"),
                    ==, "");
  }
  /* The human view says so too. */
  g_autofree char *sd = g_strdup_printf("--state-dir=%s", f->state);
  char *hargv[] = {(char *)qp_test_binary(), "status", sd, NULL};
  QpTestRun r;
  qp_test_run(hargv, NULL, &r);
  g_assert_cmpint(r.status, ==, 0);
  g_test_message("%s", r.out);
  g_assert_nonnull(strstr(r.out, "3 records not counted"));
  g_autofree char *init_path = record_path(f, "forged-init");
  g_autofree char *line =
      g_strdup_printf("%s of uid %u: its qemu-pid 1 belongs to uid 0",
                      init_path, (unsigned)f->uid);
  g_assert_nonnull(strstr(r.out, line));
  qp_test_run_clear(&r);

  /* Root's next launch: a one-to-one VM with the rest of the node, which
   * any of the lies would have refused (memory and CPUs). */
  gint64 rest = room - 256 - 128;
  GPid rpid = start_vm_mode(f, FALSE, "root-vm", (guint64)rest, "one-to-one");
  g_autoptr(JsonObject) after = status_json(f, FALSE, FALSE);
  g_assert_nonnull(vm_id(after, "root-vm"));
  g_assert_cmpint(node0_mem(after, "claimed"), ==, 256 + rest);

  /* Root's prune removes the three; the real VMs' records stay. */
  g_autoptr(JsonObject) pruned = status_json(f, FALSE, TRUE);
  g_assert_cmpuint(
      json_array_get_length(json_object_get_array_member(pruned, "ignored")),
      ==, 0);
  g_autofree char *p1 = record_path(f, "forged-init");
  g_autofree char *p2 = record_path(f, "forged-sleep");
  g_autofree char *p3 = record_path(f, u2id);
  g_assert_false(g_file_test(p1, G_FILE_TEST_EXISTS));
  g_assert_false(g_file_test(p2, G_FILE_TEST_EXISTS));
  g_assert_false(g_file_test(p3, G_FILE_TEST_EXISTS));
  g_assert_cmpint(vm_mib(pruned, uid_), ==, 256);
  g_assert_nonnull(vm_id(pruned, "root-vm"));

  kill(sleeper, SIGKILL);
  qp_test_wait(sleeper, 10000);
  GPid all[] = {upid, u2pid, rpid};
  for (guint i = 0; i < G_N_ELEMENTS(all); i++) {
    kill(all[i], SIGKILL);
    qp_test_wait(all[i], 10000);
  }
  teardown(f);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/shared-ledger/two-users", test_two_users);
  g_test_add_func("/shared-ledger/stale-records", test_stale_records);
  g_test_add_func("/shared-ledger/fallback-warning", test_fallback_warning);
  g_test_add_func("/shared-ledger/metrics", test_metrics);
  g_test_add_func("/shared-ledger/forged-records", test_forged_records);
  g_test_add_func("/shared-ledger/other-commands-options-refused",
                  test_other_commands_options);
  g_test_add_func("/shared-ledger/status-placement-options-refused",
                  test_status_placement_options);
  g_test_add_func("/shared-ledger/metrics-is-one-output",
                  test_metrics_one_output);
  return g_test_run();
}
