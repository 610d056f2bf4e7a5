/* Whether a shared ledger's member's record counts (topology/ledger/
 * trust.h): what a QEMU command line asks at most, read as /proc gives it,
 * and the verdicts on records of real processes (this test's own children:
 * sleep, and a shell copied under a QEMU name). The whole scenario with
 * real QEMU and an unprivileged member is tests/claims/test-shared-ledger.c. */
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "topology/base/proc.h"
#include "topology/ledger/qemu-cmdline.h"
#include "topology/ledger/trust.h"

typedef struct {
  const char *args; /* space-separated: no argument holds a space */
  guint64 mib;
  guint vcpus;
} BoundsCase;

static const BoundsCase bounds_cases[] = {
    {"qemu-system-x86_64", 128, 1},
    {"qemu-system-x86_64 -m 256", 256, 1},
    {"qemu-system-x86_64 -m 1G -smp 2", 1024, 2},
    {"qemu-system-x86_64 -m 1.5G", 1536, 1},
    {"qemu-system-x86_64 --m 300 --smp 3", 300, 3},
    {"qemu-system-x86_64 -m size=512M,slots=4,maxmem=2G", 2048, 1},
    {"qemu-system-x86_64 -m 512,maxmem=4294967296", 4096, 1},
    {"qemu-system-x86_64 -smp 2,maxcpus=8", 128, 8},
    {"qemu-system-x86_64 -smp sockets=2,cores=4,threads=2", 128, 16},
    {"qemu-system-x86_64 -smp cpus=4", 128, 4},
    /* Backends add to -m unless they are its RAM or a memory device. */
    {"qemu-system-x86_64 -m 1G -object memory-backend-ram,id=m0,size=1G", 2048,
     1},
    {"qemu-system-x86_64 -m 1G -object memory-backend-ram,id=m0,size=1G "
     "-machine q35,memory-backend=m0",
     1024, 1},
    {"qemu-system-x86_64 -m 1G,maxmem=2G -object "
     "memory-backend-ram,id=m0,size=512M -object "
     "memory-backend-ram,id=d0,size=1G -numa node,memdev=m0 -numa "
     "node,memdev=m1 -object memory-backend-ram,id=m1,size=512M -device "
     "pc-dimm,memdev=d0",
     2048, 1},
    {"qemu-system-x86_64 -m 1G -object "
     "{\"qom-type\":\"memory-backend-memfd\",\"id\":\"m0\",\"size\":"
     "536870912}",
     1536, 1},
    {"qemu-system-x86_64 -object iothread,id=io0 -m 64", 64, 1},
    /* qemu-pin's own command line before it execs QEMU in place. */
    {"qemu-pin --mode=balanced -- qemu-system-x86_64 -m 256 -smp 2", 256, 2},
    /* Without -m and -smp a board has QEMU's defaults (finding 45), and
     * the RAM is the size of the backend qemu-pin gives it. */
    {"qemu-system-aarch64 -M sbsa-ref", 1024, 4},
    {"qemu-system-aarch64 -M sbsa-ref -object "
     "memory-backend-ram,id=qemu-pin-ram,size=1073741824,host-nodes=0,"
     "policy=bind -machine memory-backend=qemu-pin-ram",
     1024, 4},
    {"qemu-system-aarch64 -machine raspi3ap,accel=tcg", 512, 4},
    {"qemu-system-aarch64 -machine virt -smp 2", 128, 2},
    /* What does not parse bounds nothing. */
    {"qemu-system-x86_64 -m lots -smp many", 128, 1},
    /* The last -m missing its value counts for nothing. */
    {"qemu-system-x86_64 -m 64 -m", 64, 1},
};

/* ARGS as /proc/PID/cmdline has it: each word ending in NUL (*LEN bytes). */
static char *
cmdline_of(const char *args, gsize *len)
{
  char *buf = g_strdup(args);
  *len = strlen(buf) + 1;
  for (char *p = buf; *p; p++)
    if (*p == ' ')
      *p = '\0';
  return buf;
}

static void
test_bounds(void)
{
  for (gsize i = 0; i < G_N_ELEMENTS(bounds_cases); i++) {
    const BoundsCase *t = &bounds_cases[i];
    gsize len;
    g_autofree char *buf = cmdline_of(t->args, &len);
    QpQemuBounds b;
    qp_qemu_cmdline_bounds(buf, len, &b);
    g_test_message("%s: %" G_GUINT64_FORMAT " MiB, %u vCPUs", t->args,
                   b.memory_mib, b.vcpus);
    g_assert_cmpuint(b.memory_mib, ==, t->mib);
    g_assert_cmpuint(b.vcpus, ==, t->vcpus);
  }
}

/* How a command line lets memory be plugged: virtio-mem wins over maxmem
 * wherever each comes (its size changes; DIMMs are plugged whole). */
static void
test_pluggable(void)
{
  static const struct {
    const char *args;
    QpPluggable want;
  } cases[] = {
      {"qemu-system-x86_64 -m 1G", QP_PLUGGABLE_NONE},
      {"qemu-system-x86_64 -m 1G,slots=2,maxmem=4G", QP_PLUGGABLE_MAXMEM},
      {"qemu-system-x86_64 --m size=1G,maxmem=4G", QP_PLUGGABLE_MAXMEM},
      {"qemu-system-x86_64 -m 1G,maxmem=4G -device "
       "virtio-mem-pci,id=v0,memdev=m0",
       QP_PLUGGABLE_VIRTIO_MEM},
      {"qemu-system-x86_64 -device virtio-mem-pci,memdev=m0 -m "
       "1G,maxmem=4G",
       QP_PLUGGABLE_VIRTIO_MEM},
      {"qemu-system-x86_64 -m 1G,maxmem=4G -device "
       "{\"driver\":\"virtio-mem-pci\",\"memdev\":\"m0\"}",
       QP_PLUGGABLE_VIRTIO_MEM},
      {"qemu-system-x86_64 -m 1G -device pc-dimm,memdev=m0", QP_PLUGGABLE_NONE},
      /* The last argument may be cut (a long /proc/PID/cmdline). */
      {"qemu-system-x86_64 -m 1G,maxmem=4G", QP_PLUGGABLE_NONE},
  };
  for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
    gsize len;
    g_autofree char *buf = cmdline_of(cases[i].args, &len);
    if (i + 1 == G_N_ELEMENTS(cases))
      len--; /* the last one's last word cut */
    g_test_message("%s", cases[i].args);
    g_assert_cmpint(qp_qemu_cmdline_memory_pluggable(buf, len), ==,
                    cases[i].want);
  }
}

static void
test_names(void)
{
  const char *qemu[] = {"qemu-system-x86_64",
                        "qemu-system-aarch64",
                        "qemu-kvm",
                        "kvm",
                        "qemu-pin",
                        "qemu-pin-full",
                        "qemu-system-x86_64 (deleted)"};
  const char * not [] = {"sleep",  "qemu-system-",    "qemu-img", "bash",
                         "kvm-ok", "qemu-pin-fuller", "qemu-pi"};
  for (gsize i = 0; i < G_N_ELEMENTS(qemu); i++)
    g_assert_true(qp_qemu_is_qemu_name(qemu[i]));
  for (gsize i = 0; i < G_N_ELEMENTS(not ); i++)
    g_assert_false(qp_qemu_is_qemu_name(not [i]));
}

static void
own_group(gpointer data)
{
  (void)data;
  setpgid(0, 0);
}

/* A child running ARGV (ARGV[0] a path), started and alive, in a process
 * group of its own and with its output away from the test's (a shell's own
 * child, left by a kill of the shell, would hold the test's output open and
 * keep the test runner waiting). */
static GPid
spawn(char **argv)
{
  GPid pid = 0;
  g_autoptr(GError) error = NULL;
  g_assert_true(g_spawn_async(NULL, argv, NULL,
                              G_SPAWN_DO_NOT_REAP_CHILD |
                                  G_SPAWN_STDOUT_TO_DEV_NULL |
                                  G_SPAWN_STDERR_TO_DEV_NULL,
                              own_group, NULL, &pid, &error));
  g_assert_no_error(error);
  /* Until it has exec'd: its executable is no longer this test's. */
  g_autofree char *exe = g_strdup_printf("/proc/%d/exe", pid);
  g_autofree char *self = g_file_read_link("/proc/self/exe", NULL);
  for (int i = 0; i < 500; i++) {
    g_autofree char *now = g_file_read_link(exe, NULL);
    if (now != NULL && strcmp(now, self) != 0)
      break;
    g_usleep(2000);
  }
  return pid;
}

/* PID and whatever it started. */
static void
stop(GPid pid)
{
  kill(-pid, SIGKILL);
  waitpid(pid, NULL, 0);
}

/* A claim of PID in MODE for MIB on node 0 with DEDICATED CPUs. */
static QpClaim *
claim_of(int pid, QpMode mode, guint64 mib, const char *dedicated)
{
  QpClaim *c = qp_claim_new();
  c->id = g_strdup("r");
  c->qemu_pid = pid;
  c->qemu_start = qp_proc_start_time(pid);
  c->mode = mode;
  QpNodeAmount a = {0, mib};
  g_array_append_val(c->mem, a);
  if (dedicated != NULL)
    hwloc_bitmap_list_sscanf(c->dedicated, dedicated);
  return c;
}

/* A copy of the shell under a QEMU name, in a new directory *DIR. */
static char *
shell_as_qemu(char **dir)
{
  *dir = g_dir_make_tmp("qp-trust-XXXXXX", NULL);
  char *exe = g_build_filename(*dir, "qemu-system-x86_64", NULL);
  g_autofree char *sh = NULL;
  gsize len = 0;
  g_assert_true(g_file_get_contents("/bin/sh", &sh, &len, NULL));
  g_assert_true(g_file_set_contents(exe, sh, (gssize)len, NULL));
  g_assert_cmpint(chmod(exe, 0755), ==, 0);
  return exe;
}

/* A shell under a QEMU name whose command line asks -m 256 -smp 2. */
static GPid
fake_qemu(char **dir)
{
  g_autofree char *exe = shell_as_qemu(dir);
  char *argv[] = {exe, "-c", "sleep 600; :", "sh", "-m", "256", "-smp",
                  "2", NULL};
  return spawn(argv);
}

static void
cleanup_dir(char *dir)
{
  g_autofree char *exe = g_build_filename(dir, "qemu-system-x86_64", NULL);
  unlink(exe);
  rmdir(dir);
  g_free(dir);
}

static void
test_verdicts(void)
{
  guint me = (guint)geteuid();
  /* PID 1 is no process of this owner (unless this runs as root). */
  g_autoptr(QpClaim) init = claim_of(1, QP_MODE_BALANCED, 64, NULL);
  g_autofree char *why = qp_record_distrust(init, me + 1, NULL);
  g_test_message("pid 1: %s", why);
  g_assert_nonnull(strstr(why, "qemu-pid 1 belongs to uid"));

  /* The owner's own process, which is no QEMU. */
  char *sleep_argv[] = {"/bin/sleep", "600", NULL};
  GPid sleeper = spawn(sleep_argv);
  g_autoptr(QpClaim) s = claim_of(sleeper, QP_MODE_BALANCED, 64, NULL);
  g_clear_pointer(&why, g_free);
  why = qp_record_distrust(s, me, NULL);
  g_test_message("sleep: %s", why);
  g_assert_nonnull(strstr(why, "is not QEMU (it runs sleep)"));
  stop(sleeper);

  char *dir = NULL;
  GPid q = fake_qemu(&dir);
  /* What its command line asks counts; more does not. */
  g_autoptr(QpClaim) fits = claim_of(q, QP_MODE_BALANCED, 256, NULL);
  QpNodeLoad l = {0, 2};
  g_array_append_val(fits->load, l);
  g_clear_pointer(&why, g_free);
  why = qp_record_distrust(fits, me, NULL);
  g_assert_cmpstr(why, ==, NULL);
  g_autoptr(QpClaim) more = claim_of(q, QP_MODE_BALANCED, 5000, NULL);
  why = qp_record_distrust(more, me, NULL);
  g_test_message("5000 MiB: %s", why);
  g_assert_true(g_str_has_prefix(why,
                                 "it claims 5000 MiB, its QEMU's command "
                                 "line asks at most 256 MiB and it holds "));
  g_clear_pointer(&why, g_free);
  g_autoptr(QpClaim) cores = claim_of(q, QP_MODE_ONE_TO_ONE, 256, "0-2");
  why = qp_record_distrust(cores, me, NULL);
  g_assert_nonnull(strstr(why, "3 dedicated cores and 0 shared vCPUs, its "
                               "QEMU has at most 2 vCPUs"));
  g_clear_pointer(&why, g_free);
  /* Fields that disagree: a balanced record dedicates nothing. */
  g_autoptr(QpClaim) bal = claim_of(q, QP_MODE_BALANCED, 256, "0");
  why = qp_record_distrust(bal, me, NULL);
  g_assert_cmpstr(why, ==,
                  "mode balanced dedicates CPUs 0 (only one-to-one "
                  "dedicates CPUs)");
  g_clear_pointer(&why, g_free);
  /* A keeper named must be there. */
  fits->keeper_pid = q;
  g_assert_null(qp_record_distrust(fits, me, NULL));
  /* A keeper that died (killed, out of memory) leaves the claim counted
   * while its QEMU runs, as a killed keeper does in any ledger. */
  fits->keeper_pid = sleeper;
  why = qp_record_distrust(fits, me, NULL);
  g_test_message("keeper gone: %s", why ? why : "counted");
  g_assert_null(why);
  fits->keeper_pid = 1;
  why = qp_record_distrust(fits, me, NULL);
  if (me != 0)
    g_assert_nonnull(strstr(why, "keeper-pid 1 belongs to uid 0"));
  else
    g_assert_null(why);
  stop(q);
  cleanup_dir(dir);
}

/* A shell running ARGV0 (a path) that renames itself NAME, as QEMU's
 * -name X,process=NAME does, with -m 256 on its command line; returns once
 * the name shows. */
static GPid
renamed(const char *argv0, const char *name)
{
  g_autofree char *script =
      g_strdup_printf("echo %s > /proc/self/comm; sleep 600; :", name);
  char *argv[] = {(char *)argv0, "-c", script, "sh", "-m", "256", NULL};
  GPid pid = spawn(argv);
  g_autofree char *path = g_strdup_printf("/proc/%d/comm", pid);
  for (int i = 0; i < 500; i++) {
    g_autofree char *comm = NULL;
    if (g_file_get_contents(path, &comm, NULL, NULL) &&
        strcmp(g_strchomp(comm), name) == 0)
      break;
    g_usleep(2000);
  }
  return pid;
}

/* The verdict on a record of root's for PID, judged by a process of uid
 * 65534, which may not follow root's /proc/PID/exe: "counted" or why not. */
static char *
verdict_of_another_uid(GPid pid)
{
  int fds[2];
  g_assert_cmpint(pipe(fds), ==, 0);
  pid_t child = fork();
  g_assert_cmpint(child, >=, 0);
  if (child == 0) {
    close(fds[0]);
    if (setresgid(65534, 65534, 65534) != 0 ||
        setresuid(65534, 65534, 65534) != 0)
      _exit(2);
    g_autoptr(QpClaim) c = claim_of(pid, QP_MODE_BALANCED, 256, NULL);
    g_autofree char *why = qp_record_distrust(c, 0, NULL);
    const char *text = why != NULL ? why : "counted";
    _exit(write(fds[1], text, strlen(text)) == (ssize_t)strlen(text) ? 0 : 3);
  }
  close(fds[1]);
  char buf[512];
  ssize_t n = read(fds[0], buf, sizeof buf - 1);
  close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  g_assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  g_assert_cmpint(n, >, 0);
  return g_strndup(buf, (gsize)n);
}

/* A QEMU renamed by -name X,process=NAME, judged by a reader that may not
 * follow its /proc/PID/exe (a member of a shared ledger reading another
 * member's record): its argv[0] still names QEMU, and it counts (outside
 * check, stop 55: "is not QEMU (it runs NAME)", so every other member
 * planned as if its claim were not there). A renamed process whose argv[0]
 * names no QEMU still does not count. */
static void
test_renamed_qemu(void)
{
  if (geteuid() != 0) {
    g_test_skip("needs root to judge as another uid");
    return;
  }
  char *dir = NULL;
  g_autofree char *exe = shell_as_qemu(&dir);
  GPid qemu = renamed(exe, "vm-of-a-member");
  g_autofree char *why = verdict_of_another_uid(qemu);
  g_test_message("renamed QEMU: %s", why);
  g_assert_cmpstr(why, ==, "counted");
  stop(qemu);
  GPid shell = renamed("/bin/sh", "vm-of-a-member");
  g_autofree char *not = verdict_of_another_uid(shell);
  g_test_message("renamed shell: %s", not );
  g_assert_nonnull(strstr(not, "is not QEMU (it runs vm-of-a-member)"));
  stop(shell);
  cleanup_dir(dir);
}

/* RssAnon + RssShmem of PID in MiB, 0 when unread. */
static guint64
held_mib(GPid pid)
{
  g_autofree char *path = g_strdup_printf("/proc/%d/status", pid);
  g_autofree char *text = NULL;
  if (!g_file_get_contents(path, &text, NULL, NULL))
    return 0;
  guint64 kib = 0;
  const char *keys[] = {"\nRssAnon:", "\nRssShmem:"};
  for (gsize i = 0; i < G_N_ELEMENTS(keys); i++) {
    const char *at = strstr(text, keys[i]);
    if (at != NULL)
      kib += g_ascii_strtoull(at + strlen(keys[i]), NULL, 10);
  }
  return kib / 1024;
}

/* A QEMU that holds more than its command line asks (a preallocated
 * backend plugged over QMP, which its keeper claims): its record counts up
 * to what it holds, no further. Here a shell under a QEMU name with -m 64
 * holds some 200 MiB in a variable. */
static void
test_held_beyond_command_line(void)
{
  guint me = (guint)geteuid();
  char *dir = NULL;
  g_autofree char *exe = shell_as_qemu(&dir);
  char *argv[] = {
      exe,  "-c", "x=$(head -c 209715200 /dev/zero | tr '\\0' a); sleep 600; :",
      "sh", "-m", "64",
      NULL};
  GPid q = spawn(argv);
  guint64 held = 0;
  for (int i = 0; i < 300 && (held = held_mib(q)) < 200; i++)
    g_usleep(100000);
  g_test_message("the fake QEMU holds %" G_GUINT64_FORMAT " MiB", held);
  g_assert_cmpuint(held, >=, 200);
  /* More than -m 64, within what it holds: counted. */
  g_autoptr(QpClaim) within = claim_of(q, QP_MODE_BALANCED, 192, NULL);
  g_autofree char *why = qp_record_distrust(within, me, NULL);
  g_test_message("192 MiB: %s", why ? why : "counted");
  g_assert_null(why);
  /* Beyond it: not. */
  g_autoptr(QpClaim) beyond = claim_of(q, QP_MODE_BALANCED, 4096, NULL);
  why = qp_record_distrust(beyond, me, NULL);
  g_test_message("4096 MiB: %s", why);
  g_assert_nonnull(why);
  g_assert_true(g_str_has_prefix(why,
                                 "it claims 4096 MiB, its QEMU's command "
                                 "line asks at most 64 MiB and it holds "));
  stop(q);
  cleanup_dir(dir);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/ledger/trust/command-line-bounds", test_bounds);
  g_test_add_func("/ledger/trust/qemu-names", test_names);
  g_test_add_func("/ledger/trust/memory-pluggable", test_pluggable);
  g_test_add_func("/ledger/trust/verdicts", test_verdicts);
  g_test_add_func("/ledger/trust/renamed-qemu-judged-by-another-uid",
                  test_renamed_qemu);
  g_test_add_func("/ledger/trust/held-beyond-command-line",
                  test_held_beyond_command_line);
  return g_test_run();
}
