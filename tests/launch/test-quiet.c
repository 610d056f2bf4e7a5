/* A launch whose plan succeeds prints nothing on stderr unless asked (-v):
 * not qemu-pin, not its keeper, not a library. Real command lines, launched
 * through the real qemu-pin with real QEMU (TCG): libvirt's shape (JSON
 * -object and -device, -S, its own monitor), Proxmox's (-readconfig of its
 * q35 file, -daemonize with a pidfile; without -id, which only Proxmox's
 * QEMU takes), Incus's (-readconfig of its machine, memory and vCPUs) and a
 * plain -daemonize. Each VM
 * is stopped with "quit" on its caller's monitor, which QEMU does without a
 * word, and stderr is read once QEMU and the keeper are gone. */
#include <string.h>

#include "tests/common/qp-test.h"

typedef struct {
  const char *name;
  const char *mode;     /* qemu-pin's --mode */
  gboolean daemonize;   /* QEMU's -daemonize: qemu-pin returns once ready */
  const char *args[48]; /* @FW@ firmware, @QMP@ monitor socket, @NAME@
                           -name, @PID@ pidfile, @DATA@ tests/data */
} Shape;

static const Shape shapes[] = {
    /* one-to-one: the keeper moves each vCPU from the startup CPUs to a
     * CPU of its own, which shows when it has pinned them. */
    {"libvirt",
     "--mode=one-to-one",
     FALSE,
     {"-name",
      "guest=@NAME@,debug-threads=on",
      "-S",
      "-machine",
      "pc-q35-7.2,usb=off,dump-guest-core=off,memory-backend=pc.ram",
      "-accel",
      "tcg",
      "-cpu",
      "qemu64",
      "-m",
      "64",
      "-object",
      "{\"qom-type\":\"memory-backend-ram\",\"id\":\"pc.ram\",\"size\":"
      "67108864}",
      "-overcommit",
      "mem-lock=off",
      "-smp",
      "2,sockets=2,cores=1,threads=1",
      "-uuid",
      "c7a5fdbd-edaf-9455-926a-d65c16db1809",
      "-display",
      "none",
      "-no-user-config",
      "-nodefaults",
      "-chardev",
      "socket,id=charmonitor,path=@QMP@,server=on,wait=off",
      "-mon",
      "chardev=charmonitor,id=monitor,mode=control",
      "-rtc",
      "base=utc",
      "-no-shutdown",
      "-boot",
      "strict=on",
      "-bios",
      "@FW@",
      "-device",
      "{\"driver\":\"pcie-root-port\",\"port\":8,\"chassis\":1,\"id\":\"pci."
      "1\",\"bus\":\"pcie.0\",\"multifunction\":true,\"addr\":\"0x1\"}",
      "-device",
      "{\"driver\":\"virtio-balloon-pci\",\"id\":\"balloon0\",\"bus\":\"pci."
      "1\",\"addr\":\"0x0\"}",
      "-msg",
      "timestamp=on",
      NULL}},
    {"proxmox-q35",
     "--mode=auto",
     TRUE,
     {"-name",
      "@NAME@,debug-threads=on",
      "-no-shutdown",
      "-chardev",
      "socket,id=qmp,path=@QMP@,server=on,wait=off",
      "-mon",
      "chardev=qmp,mode=control",
      "-pidfile",
      "@PID@",
      "-daemonize",
      "-smbios",
      "type=1,uuid=6ac9e6c4-7a0c-4e5a-9e51-f4e2b8c1d001",
      "-smp",
      "2,sockets=1,cores=2,maxcpus=2",
      "-nodefaults",
      "-boot",
      "menu=on,strict=on,reboot-timeout=1000",
      "-display",
      "none",
      "-cpu",
      "qemu64",
      "-m",
      "64",
      "-readconfig",
      "@DATA@/proxmox/pve-q35-4.0.cfg",
      "-device",
      "usb-tablet,id=tablet,bus=ehci.0,port=1",
      "-machine",
      "type=pc-q35-7.2",
      "-accel",
      "tcg",
      "-bios",
      "@FW@",
      NULL}},
    /* Incus: the machine, memory, vCPUs and an unbound memfd backend in a
     * -readconfig file, which the process's memory policy binds. */
    {"incus",
     "--mode=auto",
     TRUE,
     {"-name",       "@NAME@",
      "-uuid",       "0e2d3c4b-5a69-4788-96a5-b4c3d2e1f001",
      "-daemonize",  "-cpu",
      "qemu64",      "-nographic",
      "-serial",     "chardev:console",
      "-nodefaults", "-no-user-config",
      "-readconfig", "@DATA@/readconfig/incus.cfg",
      "-qmp",        "unix:@QMP@,server=on,wait=off",
      "-pidfile",    "@PID@",
      "-smbios",     "type=2,manufacturer=LinuxContainers,product=Incus",
      "-accel",      "tcg",
      "-bios",       "@FW@",
      NULL}},
    {"daemonize",
     "--mode=auto",
     TRUE,
     {"-name",
      "@NAME@,debug-threads=on",
      "-machine",
      "q35",
      "-accel",
      "tcg",
      "-nodefaults",
      "-display",
      "none",
      "-smp",
      "2",
      "-m",
      "64",
      "-qmp",
      "unix:@QMP@,server=on,wait=off",
      "-pidfile",
      "@PID@",
      "-daemonize",
      "-bios",
      "@FW@",
      NULL}},
};

static char *
substitute(const char *arg, const char *const *keys, const char *const *vals)
{
  char *out = g_strdup(arg);
  for (guint k = 0; keys[k] != NULL; k++) {
    g_auto(GStrv) parts = g_strsplit(out, keys[k], -1);
    g_free(out);
    out = g_strjoinv(vals[k], parts);
  }
  return out;
}

/* TRUE once the keeper of MARKER's VM waits in poll(): after it pinned the
 * vCPUs, that is holding the claim with the plan applied (it pins the
 * other threads and reads every one back before it waits again). A VM
 * quit before that makes the keeper report QEMU gone, which is no news of
 * a successful launch. */
static gboolean
keeper_holds(const char *marker)
{
  for (guint tries = 0; tries < 1000; tries++) {
    g_autoptr(GArray) pids = qp_test_pids_with(marker);
    for (guint i = 0; i < pids->len; i++) {
      int pid = g_array_index(pids, int, i);
      g_autofree char *cp = g_strdup_printf("/proc/%d/comm", pid);
      g_autofree char *wp = g_strdup_printf("/proc/%d/wchan", pid);
      g_autofree char *comm = NULL, *wchan = NULL;
      if (g_file_get_contents(cp, &comm, NULL, NULL) &&
          strcmp(g_strstrip(comm), "qemu-pin-keeper") == 0 &&
          g_file_get_contents(wp, &wchan, NULL, NULL) &&
          strstr(wchan, "poll") != NULL)
        return TRUE;
    }
    g_usleep(20000);
  }
  return FALSE;
}

static void
test_quiet(gconstpointer data)
{
  const Shape *s = data;
  g_autofree char *dir = qp_test_tmpdir();
  g_autofree char *marker = g_path_get_basename(dir);
  g_autofree char *fw = qp_test_firmware(dir, QP_TEST_FW_HALT);
  g_autofree char *qmp = g_build_filename(dir, "qmp.sock", NULL);
  g_autofree char *pidfile = g_build_filename(dir, "qemu.pid", NULL);
  g_autofree char *state = g_build_filename(dir, "state", NULL);
  g_autofree char *data_dir =
      g_build_filename(g_getenv("G_TEST_SRCDIR"), "data", NULL);
  const char *keys[] = {"@FW@", "@QMP@", "@NAME@", "@PID@", "@DATA@", NULL};
  const char *vals[] = {fw, qmp, marker, pidfile, data_dir, NULL};

  g_autoptr(GPtrArray) argv = g_ptr_array_new_with_free_func(g_free);
  g_ptr_array_add(argv, g_strdup(qp_test_binary()));
  g_ptr_array_add(argv, g_strdup_printf("--state-dir=%s", state));
  g_ptr_array_add(argv, g_strdup("--config=/dev/null"));
  g_ptr_array_add(argv, g_strdup(s->mode));
  g_ptr_array_add(argv, g_strdup("--"));
  g_ptr_array_add(argv, g_strdup(qp_test_qemu()));
  for (guint i = 0; s->args[i] != NULL; i++)
    g_ptr_array_add(argv, substitute(s->args[i], keys, vals));
  g_ptr_array_add(argv, NULL);
  g_auto(GStrv) envp = g_get_environ();
  g_auto(GStrv) names = g_listenv();
  for (guint i = 0; names[i] != NULL; i++)
    if (g_str_has_prefix(names[i], "QEMU_PIN_"))
      envp = g_environ_unsetenv(envp, names[i]);

  g_autofree char *err = NULL;
  if (s->daemonize) {
    /* qemu-pin returns once the daemon runs with the plan in force. */
    QpTestRun r;
    qp_test_run((char **)argv->pdata, envp, &r);
    err = g_strdup(r.err);
    g_test_message("status %d, stderr: %s", r.status, r.err);
    g_assert_cmpint(r.status, ==, 0);
    qp_test_run_clear(&r);
  } else {
    /* Exec in place: wait until the keeper has pinned the vCPUs. */
    g_autoptr(JsonObject) plan = qp_test_plan((char **)argv->pdata + 1);
    g_auto(GStrv) want = qp_test_plan_vcpu_sets(plan);
    GPid pid = qp_test_spawn((char **)argv->pdata, envp, dir);
    g_assert_true(
        qp_test_wait_vcpu_affinity(pid, (const char *const *)want, 30000));
    g_assert_true(keeper_holds(marker));
  }
  g_assert_true(
      qp_test_wait_status(qmp, s->daemonize ? "running" : "prelaunch", 10000) ||
      qp_test_wait_status(qmp, "paused", 1000));
  JsonNode *quit = qp_test_qmp_command(qmp, "quit");
  if (quit != NULL)
    json_node_unref(quit);
  g_assert_true(qp_test_wait_no_process(marker, 20000));
  if (!s->daemonize) {
    g_autofree char *path = g_build_filename(dir, "stderr", NULL);
    g_assert_true(g_file_get_contents(path, &err, NULL, NULL));
  }
  g_test_message("stderr: \"%s\"", err);
  g_assert_cmpstr(err, ==, "");
  g_assert_cmpuint(qp_test_count_records(state), ==, 0);
  qp_test_rmtree(dir);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  for (gsize i = 0; i < G_N_ELEMENTS(shapes); i++) {
    g_autofree char *path = g_strdup_printf("/quiet/%s", shapes[i].name);
    g_test_add_data_func(path, &shapes[i], test_quiet);
  }
  return g_test_run();
}
