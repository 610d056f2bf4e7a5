/* A Proxmox VE style launch: qemu-server starts `/usr/bin/kvm` with `-id N`,
 * two monitors (its own QMP socket and a client socket to qmeventd),
 * `-pidfile /var/run/qemu-server/N.pid -daemonize`, sockets/cores in -smp and
 * one preallocated memory backend per guest NUMA node (a hugepage VM's:
 * memory-backend-file, share=on, prealloc=yes; /dev/shm stands in for
 * /run/hugepages/kvm/2048kB). Proxmox cannot run here, so the
 * test reproduces that command line shape and runs it through qemu-pin
 * installed as `kvm` (a symlink), with real QEMU (TCG; behind pve-kvm-shim,
 * which accepts Proxmox's `-id N` like pve-qemu-kvm does), and checks what
 * qemu-server relies on: the first process exits 0 when the VM is up, the
 * pidfile's process has argv[0] ending in `kvm` and the same -pidfile
 * (qemu-server's check_running()), the VM's own QMP socket answers, each
 * guest node's memory is all there on its bound host node, and `kill PID`
 * stops it. qemu-pin's settings come from the config group matched by
 * `-id N`. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "tests/orchestrators/orch-common.h"

#define VMID "4217"

typedef struct {
  char *dir;
  char *marker;
  char *kvm; /* DIR/bin/kvm -> qemu-pin */
  char *config;
  char *state;          /* state-dir of [id:VMID] */
  char *state_defaults; /* state-dir of [defaults]: must stay unused */
  char *qmp;            /* DIR/VMID.qmp: qemu-server's monitor */
  char *event;          /* DIR/qmeventd.sock: the event daemon's */
  char *pidfile;
  char *fw;
  char *shim;       /* pve-qemu-kvm's stand-in: the "real" QEMU here */
  char *readconfig; /* like /usr/share/qemu-server/pve-q35-4.0.cfg */
  int event_listen; /* our qmeventd stand-in */
} Fixture;

static void
setup(Fixture *f, gconstpointer data)
{
  f->dir = qp_test_tmpdir();
  f->marker = g_path_get_basename(f->dir);
  orch_cleanup_on_abort(f->marker, NULL, NULL);
  f->kvm = orch_dropin(f->dir, "kvm");
  f->state = g_build_filename(f->dir, "state", NULL);
  f->state_defaults = g_build_filename(f->dir, "state-defaults", NULL);
  f->qmp = g_build_filename(f->dir, VMID ".qmp", NULL);
  f->event = g_build_filename(f->dir, "qmeventd.sock", NULL);
  f->pidfile = g_build_filename(f->dir, VMID ".pid", NULL);
  f->fw = qp_test_firmware(f->dir, QP_TEST_FW_HALT);
  f->shim = g_test_build_filename(G_TEST_BUILT, "orchestrators", "pve-kvm-shim",
                                  NULL);
  g_assert_true(g_file_test(f->shim, G_FILE_TEST_IS_EXECUTABLE));
  f->readconfig = orch_write(f->dir, "pve-q35.cfg",
                             "[device \"pcidmi\"]\n"
                             "  driver = \"i82801b11-bridge\"\n"
                             "  bus = \"pcie.0\"\n"
                             "  addr = \"1e.0\"\n"
                             "\n"
                             "[device \"pci.0\"]\n"
                             "  driver = \"pci-bridge\"\n"
                             "  bus = \"pcidmi\"\n"
                             "  addr = \"1.0\"\n"
                             "  chassis_nr = \"1\"\n");
  /* [defaults] says balanced and another ledger; the VM's group, matched by
   * -id, says one-to-one and this ledger. The record shows which was used. */
  g_autofree char *conf = g_strdup_printf("[defaults]\n"
                                          "qemu = %s\n"
                                          "mode = balanced\n"
                                          "state-dir = %s\n"
                                          "\n"
                                          "[id:" VMID "]\n"
                                          "mode = one-to-one\n"
                                          "start-timeout = 30000\n"
                                          "state-dir = %s\n",
                                          f->shim, f->state_defaults, f->state);
  f->config = orch_write(f->dir, "qemu-pin.conf", conf);

  f->event_listen = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  g_assert_cmpint(f->event_listen, >=, 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  g_strlcpy(sa.sun_path, f->event, sizeof(sa.sun_path));
  g_assert_cmpint(bind(f->event_listen, (struct sockaddr *)&sa, sizeof(sa)), ==,
                  0);
  g_assert_cmpint(listen(f->event_listen, 4), ==, 0);
}

static void
teardown(Fixture *f, gconstpointer data)
{
  orch_cleanup_on_abort(NULL, NULL, NULL);
  g_autoptr(GArray) left = qp_test_pids_with(f->marker);
  for (guint i = 0; i < left->len; i++)
    kill(g_array_index(left, int, i), SIGKILL);
  qp_test_wait_no_process(f->marker, 10000);
  close(f->event_listen);
  qp_test_rmtree(f->dir);
  g_free(f->dir);
  g_free(f->marker);
  g_free(f->kvm);
  g_free(f->config);
  g_free(f->state);
  g_free(f->state_defaults);
  g_free(f->qmp);
  g_free(f->event);
  g_free(f->pidfile);
  g_free(f->fw);
  g_free(f->shim);
  g_free(f->readconfig);
}

/* The command line, in qemu-server's order (config_to_command), with what
 * needs KVM, VNC, disks or NICs left out and -accel tcg added. qemu-pin never
 * overcommits a VM (docs/plan-schema.md), so the guest has 2 sockets of 2
 * cores (-smp 4) where the host has 4 CPUs, else 2 sockets of 1 core: the
 * same shape, as qemu-server writes it for either VM. */
static GPtrArray *
proxmox_argv_full(Fixture *f, const char *argv0, const char *qmp,
                  const char *pidfile, const char *const *extra)
{
  GPtrArray *a = g_ptr_array_new_with_free_func(g_free);
#define ADD(...) g_ptr_array_add(a, g_strdup_printf(__VA_ARGS__))
  ADD("%s", argv0);
  ADD("-id");
  ADD(VMID);
  ADD("-name");
  ADD("%s,debug-threads=on", f->marker);
  ADD("-no-shutdown");
  ADD("-chardev");
  ADD("socket,id=qmp,path=%s,server=on,wait=off", qmp);
  ADD("-mon");
  ADD("chardev=qmp,mode=control");
  ADD("-chardev");
  ADD("socket,id=qmp-event,path=%s,reconnect=5", f->event);
  ADD("-mon");
  ADD("chardev=qmp-event,mode=control");
  ADD("-pidfile");
  ADD("%s", pidfile);
  ADD("-daemonize");
  ADD("-smbios");
  ADD("type=1,uuid=5f7a3b52-54f1-4c4e-9d8e-6c1f0e2a4217");
  gboolean big = g_get_num_processors() >= 4;
  ADD("-smp");
  ADD(big ? "4,sockets=2,cores=2,maxcpus=4" : "2,sockets=2,cores=1,maxcpus=2");
  ADD("-nodefaults");
  ADD("-boot");
  ADD("menu=on,strict=on,reboot-timeout=1000");
  ADD("-display");
  ADD("none");
  ADD("-cpu");
  ADD("kvm64,enforce,+lahf_lm,+sep");
  ADD("-m");
  ADD("256");
  ADD("-object");
  ADD("memory-backend-file,id=ram-node0,size=128M,mem-path=/dev/shm,"
      "share=on,prealloc=yes");
  ADD("-numa");
  ADD("node,nodeid=0,cpus=%s,memdev=ram-node0", big ? "0-1" : "0");
  ADD("-object");
  ADD("memory-backend-file,id=ram-node1,size=128M,mem-path=/dev/shm,"
      "share=on,prealloc=yes");
  ADD("-numa");
  ADD("node,nodeid=1,cpus=%s,memdev=ram-node1", big ? "2-3" : "1");
  /* qemu-server adds -readconfig pve-q35-4.0.cfg on q35: devices only. */
  ADD("-readconfig");
  ADD("%s", f->readconfig);
  ADD("-bios");
  ADD("%s", f->fw);
  ADD("-machine");
  ADD("type=q35");
  ADD("-accel");
  ADD("tcg");
  for (guint i = 0; extra != NULL && extra[i] != NULL; i++)
    ADD("%s", extra[i]);
#undef ADD
  g_ptr_array_add(a, NULL);
  return a;
}

static GPtrArray *
proxmox_argv(Fixture *f, const char *argv0)
{
  return proxmox_argv_full(f, argv0, f->qmp, f->pidfile, NULL);
}

/* What qemu-pin plans for the same command with the same config. */
static char **
planned_vcpu_sets(Fixture *f, GPtrArray *cmd)
{
  g_autoptr(GPtrArray) args = g_ptr_array_new_with_free_func(g_free);
  g_ptr_array_add(args, g_strdup_printf("--config=%s", f->config));
  g_ptr_array_add(args, g_strdup_printf("--state-dir=%s/plan-state", f->dir));
  g_ptr_array_add(args, g_strdup("--"));
  g_ptr_array_add(args, g_strdup(qp_test_qemu()));
  for (guint i = 1; cmd->pdata[i] != NULL; i++)
    g_ptr_array_add(args, g_strdup(cmd->pdata[i]));
  g_ptr_array_add(args, NULL);
  g_autoptr(JsonObject) plan = qp_test_plan((char **)args->pdata);
  /* The [id:N] group was used: one-to-one (not balanced). */
  g_assert_cmpstr(json_object_get_string_member(plan, "mode"), ==,
                  "one-to-one");
  char **sets = qp_test_plan_vcpu_sets(plan);
  guint n = g_get_num_processors() >= 4 ? 4 : 2;
  g_assert_cmpuint(g_strv_length(sets), ==, n);
  /* A CPU of its own for each vCPU: unlike anything QEMU does alone. */
  for (guint i = 0; i < n; i++) {
    g_assert_null(strpbrk(sets[i], ",-"));
    for (guint j = 0; j < i; j++)
      g_assert_cmpstr(sets[i], !=, sets[j]);
  }
  return sets;
}

/* qemu-server's check_running(): argv[0] matches m|kvm$| or
 * m@(?:^|/)qemu-system-[^/]+$@, and the -pidfile argument is the pidfile. */
static gboolean
proxmox_check_running(int pid, const char *pidfile)
{
  g_auto(GStrv) argv = orch_cmdline(pid);
  if (argv[0] == NULL)
    return FALSE;
  g_autofree char *base = g_path_get_basename(argv[0]);
  if (!g_str_has_suffix(argv[0], "kvm") &&
      !g_str_has_prefix(base, "qemu-system-"))
    return FALSE;
  for (guint i = 0; argv[i] != NULL; i++)
    if (strcmp(argv[i], "-pidfile") == 0 || strcmp(argv[i], "--pidfile") == 0)
      return argv[i + 1] != NULL && strcmp(argv[i + 1], pidfile) == 0;
  return FALSE;
}

static int
read_pidfile(const char *path)
{
  g_autofree char *text = NULL;
  if (!g_file_get_contents(path, &text, NULL, NULL))
    return -1;
  return atoi(text);
}

/* Accepts QEMU's connection on the event socket and reads its greeting. */
static char *
event_greeting(Fixture *f)
{
  struct pollfd p = {f->event_listen, POLLIN, 0};
  if (poll(&p, 1, 20000) != 1)
    return NULL;
  int c = accept4(f->event_listen, NULL, NULL, SOCK_CLOEXEC);
  if (c < 0)
    return NULL;
  GString *line = g_string_new(NULL);
  char ch;
  struct pollfd q = {c, POLLIN, 0};
  while (poll(&q, 1, 20000) == 1 && read(c, &ch, 1) == 1 && ch != '\n')
    g_string_append_c(line, ch);
  close(c);
  return g_string_free(line, FALSE);
}

static void
test_launch_as_kvm(Fixture *f, gconstpointer data)
{
  if (g_get_num_processors() < 2) {
    g_test_skip("one-to-one with 2 vCPUs needs at least 2 host CPUs");
    return;
  }
  g_autoptr(GPtrArray) cmd = proxmox_argv(f, f->kvm);
  g_auto(GStrv) want = planned_vcpu_sets(f, cmd);
  g_autofree char *conf_env = g_strdup_printf("QEMU_PIN_CONFIG=%s", f->config);
  g_autofree char *shim_env =
      g_strdup_printf("QP_SHIM_QEMU=%s", qp_test_qemu());
  const char *extra[] = {conf_env, shim_env, NULL};
  g_auto(GStrv) env = orch_env(extra);

  QpTestRun r;
  qp_test_run((char **)cmd->pdata, env, &r);
  g_test_message("kvm: exit %d, stderr: %s", r.status, r.err);
  g_assert_cmpint(r.status, ==, 0);
  qp_test_run_clear(&r);

  /* The first process has exited 0: the daemon runs with the plan. */
  int pid = read_pidfile(f->pidfile);
  g_assert_cmpint(pid, >, 0);
  if (!qp_test_wait_vcpu_affinity(pid, (const char *const *)want, 0)) {
    g_auto(GStrv) have = orch_vcpu_affinities(pid);
    g_autofree char *h = g_strjoinv(" ", have);
    g_autofree char *w = g_strjoinv(" ", want);
    g_test_message("vCPU affinities when kvm returned: %s (plan: %s)", h, w);
    g_assert_not_reached();
  }
  g_assert_true(proxmox_check_running(pid, f->pidfile));
  g_auto(GStrv) argv = orch_cmdline(pid);
  g_assert_cmpstr(argv[0], ==, f->kvm);
  /* Each guest node's backend: bound, and preallocated (all of it in
   * memory) on the node it is bound to. */
  g_auto(GStrv) maps = qp_test_wait_mappings(pid, 128 * 1024, 2, 5000);
  g_assert_cmpuint(g_strv_length(maps), ==, 2);
  for (guint i = 0; maps[i] != NULL; i++) {
    g_test_message("guest node memory: %s", maps[i]);
    gboolean on_bound = FALSE;
    g_assert_cmpuint(qp_test_numa_maps_resident_kib(maps[i], &on_bound), ==,
                     128 * 1024);
    g_assert_true(g_str_has_prefix(maps[i], "bind:"));
    g_assert_true(on_bound);
  }
  g_autofree char *exe_link = g_strdup_printf("/proc/%d/exe", pid);
  g_autofree char *exe = g_file_read_link(exe_link, NULL);
  g_autofree char *real = realpath(qp_test_qemu(), NULL);
  g_assert_cmpstr(exe, ==, real);

  /* qemu-server's own monitor: the guest runs (no -S was given). */
  g_autofree char *status = orch_status(f->qmp);
  g_assert_cmpstr(status, ==, "running");
  g_autoptr(JsonNode) cpus =
      orch_qmp(f->qmp, "{\"execute\":\"query-cpus-fast\"}", NULL);
  g_assert_nonnull(cpus);
  g_assert_cmpuint(json_array_get_length(json_node_get_array(cpus)), ==,
                   g_strv_length(want));
  /* qmeventd's socket got QEMU's greeting. */
  g_autofree char *greeting = event_greeting(f);
  g_assert_nonnull(greeting);
  g_assert_nonnull(strstr(greeting, "\"QMP\""));

  /* The claim, in the ledger of the [id:N] group, with its mode. */
  g_autoptr(JsonObject) rec = orch_record(f->state);
  g_assert_nonnull(rec);
  g_assert_cmpstr(json_object_get_string_member(rec, "mode"), ==, "one-to-one");
  g_autofree char *all = orch_union(want);
  g_assert_cmpstr(json_object_get_string_member(rec, "dedicated-cpus"), ==,
                  all);
  g_assert_cmpint(json_object_get_int_member(rec, "qemu-pid"), ==, pid);
  g_assert_cmpuint(qp_test_count_records(f->state_defaults), ==, 0);

  /* qm stop's last resort: kill PID. */
  g_assert_cmpint(kill(pid, SIGTERM), ==, 0);
  g_assert_true(qp_test_wait_no_process(f->marker, 20000));
  g_assert_true(orch_wait_records(f->state, 0, 20000));
}

static void
test_refused_launch_fails(Fixture *f, gconstpointer data)
{
  /* A plan that cannot be met (affinity on a CPU this host does not have)
   * is refused before QEMU starts: qemu-server sees a non-zero exit, no
   * pidfile, no process, no claim. */
  g_autofree char *conf = g_strdup_printf("[defaults]\nqemu = %s\n\n[id:" VMID
                                          "]\nmode = one-to-one\n"
                                          "affinity = 4095\nstate-dir = %s\n",
                                          f->shim, f->state);
  g_autofree char *path = orch_write(f->dir, "refuse.conf", conf);
  g_autoptr(GPtrArray) cmd = proxmox_argv(f, f->kvm);
  g_autofree char *conf_env = g_strdup_printf("QEMU_PIN_CONFIG=%s", path);
  g_autofree char *shim_env =
      g_strdup_printf("QP_SHIM_QEMU=%s", qp_test_qemu());
  const char *extra[] = {conf_env, shim_env, NULL};
  g_auto(GStrv) env = orch_env(extra);
  QpTestRun r;
  qp_test_run((char **)cmd->pdata, env, &r);
  g_test_message("kvm: exit %d, stderr: %s", r.status, r.err);
  g_assert_cmpint(r.status, !=, 0);
  g_assert_true(g_str_has_prefix(r.err, "qemu-pin: "));
  qp_test_run_clear(&r);
  g_assert_false(g_file_test(f->pidfile, G_FILE_TEST_EXISTS));
  g_assert_true(qp_test_wait_no_process(f->marker, 10000));
  g_assert_cmpuint(qp_test_count_records(f->state), ==, 0);
}

/* qemu-server reads `kvm --version` (and lists machines and CPUs): QEMU's
 * own answers, byte for byte, with no plan, claim or keeper. */
static void
test_queries_pass_through(Fixture *f, gconstpointer data)
{
  const char *queries[][3] = {{"--version", NULL, NULL},
                              {"-machine", "help", NULL},
                              {"-cpu", "help", NULL}};
  g_autofree char *conf_env = g_strdup_printf("QEMU_PIN_CONFIG=%s", f->config);
  g_autofree char *shim_env =
      g_strdup_printf("QP_SHIM_QEMU=%s", qp_test_qemu());
  const char *extra[] = {conf_env, shim_env, NULL};
  g_auto(GStrv) env = orch_env(extra);
  for (guint i = 0; i < G_N_ELEMENTS(queries); i++) {
    char *direct_argv[] = {(char *)qp_test_qemu(), (char *)queries[i][0],
                           (char *)queries[i][1], NULL};
    char *kvm_argv[] = {f->kvm, (char *)queries[i][0], (char *)queries[i][1],
                        NULL};
    QpTestRun direct, pinned;
    qp_test_run(direct_argv, NULL, &direct);
    qp_test_run(kvm_argv, env, &pinned);
    g_assert_cmpint(direct.status, ==, 0);
    g_assert_cmpint(pinned.status, ==, direct.status);
    g_assert_cmpstr(pinned.out, ==, direct.out);
    g_assert_cmpstr(pinned.err, ==, direct.err);
    qp_test_run_clear(&direct);
    qp_test_run_clear(&pinned);
  }
  /* No launch: neither ledger directory was even created. */
  g_assert_false(g_file_test(f->state_defaults, G_FILE_TEST_EXISTS));
  g_assert_false(g_file_test(f->state, G_FILE_TEST_EXISTS));
}

/* A Proxmox live migration's target: `kvm ... -daemonize -incoming
 * unix:/run/qemu-server/VMID.migrate -S`; once the source has migrated,
 * qemu-server's `qm resume` sends `cont`. Here the source is the same VM
 * started by qemu-pin with a ledger of its own (another "node"). */
static void
test_incoming_migration(Fixture *f, gconstpointer data)
{
  if (g_get_num_processors() < 2) {
    g_test_skip("one-to-one with 2 vCPUs needs at least 2 host CPUs");
    return;
  }
  g_autofree char *shim_env =
      g_strdup_printf("QP_SHIM_QEMU=%s", qp_test_qemu());

  /* The source "node": its own config and ledger. */
  g_autofree char *src_state = g_build_filename(f->dir, "src-state", NULL);
  g_autofree char *src_conf_text = g_strdup_printf(
      "[defaults]\nqemu = %s\n\n[id:" VMID "]\nmode = one-to-one\n"
      "state-dir = %s\n",
      f->shim, src_state);
  g_autofree char *src_conf = orch_write(f->dir, "src.conf", src_conf_text);
  g_autofree char *src_qmp = g_build_filename(f->dir, "src.qmp", NULL);
  g_autofree char *src_pidfile = g_build_filename(f->dir, "src.pid", NULL);
  g_autoptr(GPtrArray) src =
      proxmox_argv_full(f, f->kvm, src_qmp, src_pidfile, NULL);
  g_autofree char *src_conf_env =
      g_strdup_printf("QEMU_PIN_CONFIG=%s", src_conf);
  const char *src_extra[] = {src_conf_env, shim_env, NULL};
  g_auto(GStrv) src_env = orch_env(src_extra);
  QpTestRun r;
  qp_test_run((char **)src->pdata, src_env, &r);
  g_test_message("source kvm: exit %d, stderr: %s", r.status, r.err);
  g_assert_cmpint(r.status, ==, 0);
  qp_test_run_clear(&r);
  int src_pid = read_pidfile(src_pidfile);
  g_assert_cmpint(src_pid, >, 0);
  g_assert_true(orch_wait_status(src_qmp, "running", 10000));

  /* The target, as qemu-server starts it for an incoming migration. */
  g_autofree char *migrate = g_build_filename(f->dir, VMID ".migrate", NULL);
  g_autofree char *incoming = g_strdup_printf("unix:%s", migrate);
  const char *target_args[] = {"-incoming", incoming, "-S", NULL};
  g_autoptr(GPtrArray) cmd =
      proxmox_argv_full(f, f->kvm, f->qmp, f->pidfile, target_args);
  g_auto(GStrv) want = planned_vcpu_sets(f, cmd);
  g_autofree char *conf_env = g_strdup_printf("QEMU_PIN_CONFIG=%s", f->config);
  const char *extra[] = {conf_env, shim_env, NULL};
  g_auto(GStrv) env = orch_env(extra);
  qp_test_run((char **)cmd->pdata, env, &r);
  g_test_message("target kvm: exit %d, stderr: %s", r.status, r.err);
  g_assert_cmpint(r.status, ==, 0);
  qp_test_run_clear(&r);
  int pid = read_pidfile(f->pidfile);
  g_assert_cmpint(pid, >, 0);
  /* Up and pinned when kvm returned, waiting for the migration. */
  g_assert_true(qp_test_wait_vcpu_affinity(pid, (const char *const *)want, 0));
  g_autofree char *waiting = orch_status(f->qmp);
  g_assert_cmpstr(waiting, ==, "inmigrate");
  g_assert_true(proxmox_check_running(pid, f->pidfile));

  g_autofree char *go = g_strdup_printf(
      "{\"execute\":\"migrate\",\"arguments\":{\"uri\":\"%s\"}}", incoming);
  g_autofree char *err = NULL;
  g_autoptr(JsonNode) started = orch_qmp(src_qmp, go, &err);
  if (started == NULL)
    g_test_message("migrate: %s", err);
  g_assert_nonnull(started);
  orch_wait_migrated(src_qmp);

  /* -S was given: nobody but qemu-server may start the guest. */
  g_assert_true(orch_wait_status(f->qmp, "paused", 30000));
  g_autoptr(JsonNode) resumed =
      orch_qmp(f->qmp, "{\"execute\":\"cont\"}", NULL);
  g_assert_nonnull(resumed);
  g_assert_true(orch_wait_status(f->qmp, "running", 10000));
  g_assert_true(
      qp_test_wait_vcpu_affinity(pid, (const char *const *)want, 10000));
  g_autoptr(JsonObject) rec = orch_record(f->state);
  g_assert_nonnull(rec);
  g_assert_cmpint(json_object_get_int_member(rec, "qemu-pid"), ==, pid);

  /* qemu-server stops the source after a migration, then the target's
   * life ends some day: both claims go. */
  g_assert_cmpint(kill(src_pid, SIGTERM), ==, 0);
  g_assert_cmpint(kill(pid, SIGTERM), ==, 0);
  g_assert_true(qp_test_wait_no_process(f->marker, 20000));
  g_assert_true(orch_wait_records(src_state, 0, 20000));
  g_assert_true(orch_wait_records(f->state, 0, 20000));
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add("/orchestrators/proxmox/kvm-daemonize-pidfile-qmp-kill", Fixture,
             NULL, setup, test_launch_as_kvm, teardown);
  g_test_add("/orchestrators/proxmox/incoming-migration-daemonized-target",
             Fixture, NULL, setup, test_incoming_migration, teardown);
  g_test_add("/orchestrators/proxmox/version-and-help-pass-through", Fixture,
             NULL, setup, test_queries_pass_through, teardown);
  g_test_add("/orchestrators/proxmox/refused-plan-exits-nonzero", Fixture, NULL,
             setup, test_refused_launch_fails, teardown);
  return g_test_run();
}
