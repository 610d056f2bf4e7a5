/* qemu-pin as the <emulator> of a libvirt domain, with the real libvirtd and
 * virsh from Debian's packages and real QEMU (TCG). Needs root: the test
 * configures and starts the system libvirtd (libvirt-setup.sh); without
 * root or libvirt every test is skipped with the reason.
 *
 * The domain's <emulator> is a symlink named qemu-system-x86_64 pointing to
 * the built qemu-pin, exactly how qemu-pin is installed in place of QEMU.
 * libvirtd runs the emulator with an environment of its own; the domain's
 * <qemu:env> gives QEMU_PIN_CONFIG, the test's config (real QEMU binary,
 * state directory, one-to-one). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/orchestrators/orch-common.h"

#define VIRSH_URI "qemu:///system"

typedef struct {
  gboolean ready; /* libvirtd runs and we are root */
  char *dir;
  char *marker; /* the domain's name too */
  char *state;  /* the ledger the domain's qemu-pin uses */
  char *plan_state;
  char *dropin;
  char *config;
  char *fw;
  char *xml; /* the domain's XML file */
  char *pidfile;
  char *log;
  gboolean verbose; /* the domain's qemu-pin runs with QEMU_PIN_VERBOSE=1 */
} Fixture;

static char *setup_skip_reason; /* set when the setup script said 77 */
static gboolean setup_done;
static char *virsh_bin;

/* PROG on PATH, else in the sbin/bin directory Debian installs it to. */
static char *
find_program(const char *prog, const char *fallback)
{
  char *p = g_find_program_in_path(prog);
  return p ? p : g_strdup(fallback);
}

/* Runs libvirt-setup.sh [ARG]; returns its exit status (77: skip, with the
 * reason kept in setup_skip_reason). */
static int
run_setup(const char *arg)
{
  g_autofree char *script = g_test_build_filename(G_TEST_DIST, "orchestrators",
                                                  "libvirt-setup.sh", NULL);
  char *argv[] = {script, (char *)arg, NULL};
  QpTestRun r;
  qp_test_run(argv, NULL, &r);
  int status = r.status;
  if (status == 77) {
    g_free(setup_skip_reason);
    setup_skip_reason = g_strstrip(g_strdup(r.out));
  } else if (status != 0) {
    g_test_message("libvirt-setup.sh %s: exit %d: %s%s", arg ? arg : "", status,
                   r.out, r.err);
  }
  qp_test_run_clear(&r);
  return status;
}

/* Runs libvirt-setup.sh once per program. */
static gboolean
libvirt_ready(void)
{
  if (setup_done)
    return setup_skip_reason == NULL;
  setup_done = TRUE;
  virsh_bin = find_program("virsh", "/usr/bin/virsh");
  int status = run_setup(NULL);
  if (status == 77)
    return FALSE;
  g_assert_cmpint(status, ==, 0);
  return TRUE;
}

static void
virsh(QpTestRun *r, const char *const *args)
{
  g_autoptr(GPtrArray) a = g_ptr_array_new();
  g_ptr_array_add(a, virsh_bin);
  g_ptr_array_add(a, "-c");
  g_ptr_array_add(a, VIRSH_URI);
  for (guint i = 0; args[i] != NULL; i++)
    g_ptr_array_add(a, (char *)args[i]);
  g_ptr_array_add(a, NULL);
  qp_test_run((char **)a->pdata, NULL, r);
}

/* virsh ARGS... must succeed; returns its stdout. */
#define VIRSH_OK(...) virsh_ok((const char *const[]){__VA_ARGS__, NULL})

static char *
virsh_ok(const char *const *args)
{
  QpTestRun r;
  virsh(&r, args);
  if (r.status != 0) {
    g_autofree char *cmd = g_strjoinv(" ", (char **)args);
    g_test_message("virsh %s: exit %d: %s", cmd, r.status, r.err);
  }
  g_assert_cmpint(r.status, ==, 0);
  char *out = g_steal_pointer(&r.out);
  qp_test_run_clear(&r);
  return out;
}

/* The domain: 2 vCPUs, 128 MiB, the halting firmware; CPU_XML (may be "")
 * goes inside <domain>, e.g. a <cpu> with NUMA cells or a <cputune>. */
static char *
domain_xml(Fixture *f, const char *cpu_xml)
{
  const char *verbose =
      f->verbose ? "    <qemu:env name='QEMU_PIN_VERBOSE' value='1'/>\n" : "";
  return g_strdup_printf(
      "<domain type='qemu' "
      "xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>\n"
      "  <name>%s</name>\n"
      "  <memory unit='MiB'>128</memory>\n"
      "  <vcpu>2</vcpu>\n"
      "%s"
      "  <os>\n"
      "    <type arch='x86_64' machine='q35'>hvm</type>\n"
      "    <loader type='rom'>%s</loader>\n"
      "  </os>\n"
      "  <on_poweroff>destroy</on_poweroff>\n"
      "  <on_reboot>destroy</on_reboot>\n"
      "  <on_crash>destroy</on_crash>\n"
      "  <devices>\n"
      "    <emulator>%s</emulator>\n"
      "    <memballoon model='none'/>\n"
      "  </devices>\n"
      "  <qemu:commandline>\n"
      "    <qemu:env name='QEMU_PIN_CONFIG' value='%s'/>\n"
      "%s"
      "  </qemu:commandline>\n"
      "</domain>\n",
      f->marker, cpu_xml, f->fw, f->dropin, f->config, verbose);
}

/* libvirt keeps the probed capabilities of each emulator path in a file
 * named by the path's SHA-256: drop ours. */
static void
forget_capabilities(const char *emulator)
{
  g_autofree char *sum =
      g_compute_checksum_for_string(G_CHECKSUM_SHA256, emulator, -1);
  g_autofree char *file =
      g_strdup_printf("/var/cache/libvirt/qemu/capabilities/%s.xml", sum);
  unlink(file);
}

static void
setup(Fixture *f, gconstpointer data)
{
  if (!libvirt_ready()) {
    g_test_skip(setup_skip_reason);
    return;
  }
  if (g_get_num_processors() < 2) {
    g_test_skip("one-to-one with 2 vCPUs needs at least 2 host CPUs");
    return;
  }
  f->ready = TRUE;
  f->dir = qp_test_tmpdir();
  f->marker = g_path_get_basename(f->dir);
  f->state = g_build_filename(f->dir, "state", NULL);
  f->plan_state = g_build_filename(f->dir, "plan-state", NULL);
  f->dropin = orch_dropin(f->dir, "qemu-system-x86_64");
  f->fw = qp_test_firmware(f->dir, QP_TEST_FW_HALT);
  g_autofree char *conf =
      g_strdup_printf("# qemu-pin for the libvirt test domain %s\n"
                      "[defaults]\n"
                      "qemu = %s\n"
                      "state-dir = %s\n"
                      "mode = one-to-one\n",
                      f->marker, qp_test_qemu(), f->state);
  f->config = orch_write(f->dir, "qemu-pin.conf", conf);
  g_autofree char *xml = domain_xml(f, "");
  f->xml = orch_write(f->dir, "domain.xml", xml);
  f->pidfile = g_strdup_printf("/run/libvirt/qemu/%s.pid", f->marker);
  f->log = g_strdup_printf("/var/log/libvirt/qemu/%s.log", f->marker);
  orch_cleanup_on_abort(f->marker, virsh_bin, f->marker);
}

static void
teardown(Fixture *f, gconstpointer data)
{
  if (!f->ready)
    return;
  orch_cleanup_on_abort(NULL, NULL, NULL);
  QpTestRun r;
  virsh(&r, (const char *const[]){"destroy", f->marker, NULL});
  qp_test_run_clear(&r);
  virsh(&r, (const char *const[]){"undefine", f->marker, NULL});
  qp_test_run_clear(&r);
  g_autoptr(GArray) left = qp_test_pids_with(f->marker);
  for (guint i = 0; i < left->len; i++)
    kill(g_array_index(left, int, i), SIGKILL);
  forget_capabilities(f->dropin);
  unlink(f->log);
  qp_test_rmtree(f->dir);
  g_free(f->dir);
  g_free(f->marker);
  g_free(f->state);
  g_free(f->plan_state);
  g_free(f->dropin);
  g_free(f->config);
  g_free(f->fw);
  g_free(f->xml);
  g_free(f->pidfile);
  g_free(f->log);
}

/* The QEMU command line libvirt runs for the domain (without the
 * environment it sets), from `virsh domxml-to-native`. */
static GPtrArray *
native_argv(Fixture *f)
{
  g_autofree char *out = VIRSH_OK("domxml-to-native", "qemu-argv", f->xml);
  g_auto(GStrv) words = NULL;
  GError *error = NULL;
  g_shell_parse_argv(g_strstrip(out), NULL, &words, &error);
  g_assert_no_error(error);
  GPtrArray *a = g_ptr_array_new_with_free_func(g_free);
  guint i = 0;
  while (words[i] != NULL && strchr(words[i], '=') != NULL &&
         words[i][0] != '-' && words[i][0] != '/')
    i++; /* LC_ALL=C PATH=... */
  g_assert_nonnull(words[i]);
  g_assert_cmpstr(words[i], ==, f->dropin);
  for (; words[i] != NULL; i++)
    g_ptr_array_add(a, g_strdup(words[i]));
  g_ptr_array_add(a, NULL);
  return a;
}

/* What qemu-pin would plan for the domain on an empty ledger: the vCPU
 * sets, by vCPU index. */
static char **
planned_vcpu_sets(Fixture *f)
{
  g_autoptr(GPtrArray) native = native_argv(f);
  g_autoptr(GPtrArray) args = g_ptr_array_new_with_free_func(g_free);
  g_ptr_array_add(args, g_strdup_printf("--state-dir=%s", f->plan_state));
  g_ptr_array_add(args, g_strdup("--mode=one-to-one"));
  g_ptr_array_add(args, g_strdup("--"));
  g_ptr_array_add(args, g_strdup(qp_test_qemu()));
  for (guint i = 1; i < native->len && native->pdata[i] != NULL; i++)
    g_ptr_array_add(args, g_strdup(native->pdata[i]));
  g_ptr_array_add(args, NULL);
  g_autoptr(JsonObject) plan = qp_test_plan((char **)args->pdata);
  g_assert_cmpstr(json_object_get_string_member(plan, "mode"), ==,
                  "one-to-one");
  char **sets = qp_test_plan_vcpu_sets(plan);
  g_assert_cmpuint(g_strv_length(sets), ==, 2);
  /* One CPU each, not the same one: a plan unlike "all CPUs". */
  g_assert_null(strpbrk(sets[0], ",-"));
  g_assert_null(strpbrk(sets[1], ",-"));
  g_assert_cmpstr(sets[0], !=, sets[1]);
  return sets;
}

static int
domain_pid(Fixture *f)
{
  g_autofree char *text = NULL;
  if (!g_file_get_contents(f->pidfile, &text, NULL, NULL))
    return -1;
  return atoi(text);
}

static void
start_domain(Fixture *f)
{
  QpTestRun r;
  virsh(&r, (const char *const[]){"start", f->marker, NULL});
  if (r.status != 0) {
    g_test_message("virsh start: %s", r.err);
    orch_show_file("domain log", f->log);
  }
  g_assert_cmpint(r.status, ==, 0);
  qp_test_run_clear(&r);
}

/* `virsh vcpuinfo`'s "CPU Affinity" of each vCPU ("y-", "-y"). */
static char **
vcpuinfo_affinities(Fixture *f)
{
  g_autofree char *out = VIRSH_OK("vcpuinfo", f->marker);
  g_auto(GStrv) lines = g_strsplit(out, "\n", -1);
  GPtrArray *a = g_ptr_array_new();
  for (guint i = 0; lines[i] != NULL; i++)
    if (g_str_has_prefix(lines[i], "CPU Affinity:"))
      g_ptr_array_add(a, g_strstrip(g_strdup(lines[i] + 13)));
  g_ptr_array_add(a, NULL);
  return (char **)g_ptr_array_free(a, FALSE);
}

/* A CPU list as virsh prints an affinity: one 'y' or '-' per host CPU. */
static char *
as_yn(const char *list, gsize width)
{
  g_autofree char *bits = g_strnfill(width, '-');
  g_auto(GStrv) parts = g_strsplit(list, ",", -1);
  for (guint i = 0; parts[i] != NULL; i++) {
    guint lo, hi;
    if (sscanf(parts[i], "%u-%u", &lo, &hi) != 2)
      hi = lo = (guint)atoi(parts[i]);
    for (guint c = lo; c <= hi && c < width; c++)
      bits[c] = 'y';
  }
  return g_steal_pointer(&bits);
}

/* The running domain has its vCPUs where the plan says, both in /proc and
 * as libvirt reports them, and its claim in the ledger. Returns its PID. */
static int
check_pinned_to_plan(Fixture *f, char **want)
{
  g_autofree char *state = VIRSH_OK("domstate", f->marker);
  g_assert_cmpstr(g_strstrip(state), ==, "running");
  int pid = domain_pid(f);
  g_assert_cmpint(pid, >, 0);

  /* libvirt sets every vCPU to all host CPUs before its `cont`; the
   * keeper's re-check on RESUME must win. */
  if (!qp_test_wait_vcpu_affinity(pid, (const char *const *)want, 30000)) {
    g_auto(GStrv) have = orch_vcpu_affinities(pid);
    g_autofree char *h = g_strjoinv(" ", have);
    g_autofree char *w = g_strjoinv(" ", want);
    g_test_message("vCPU affinities are %s, the plan says %s", h, w);
    orch_show_file("domain log", f->log);
    g_assert_not_reached();
  }
  g_auto(GStrv) yn = vcpuinfo_affinities(f);
  g_assert_cmpuint(g_strv_length(yn), ==, 2);
  for (guint i = 0; i < 2; i++) {
    g_autofree char *w = as_yn(want[i], strlen(yn[i]));
    g_assert_cmpstr(yn[i], ==, w);
  }

  /* QEMU is the process libvirt started (exec in place), under the name
   * libvirt gave it. */
  g_autofree char *exe_link = g_strdup_printf("/proc/%d/exe", pid);
  g_autofree char *exe = g_file_read_link(exe_link, NULL);
  g_autofree char *real = realpath(qp_test_qemu(), NULL);
  g_assert_cmpstr(exe, ==, real);
  g_auto(GStrv) cmdline = orch_cmdline(pid);
  g_assert_cmpstr(cmdline[0], ==, f->dropin);

  g_autoptr(JsonObject) rec = orch_record(f->state);
  g_assert_nonnull(rec);
  g_assert_cmpint(json_object_get_int_member(rec, "qemu-pid"), ==, pid);
  g_assert_cmpstr(json_object_get_string_member(rec, "mode"), ==, "one-to-one");
  g_assert_cmpstr(json_object_get_string_member(rec, "name"), ==, f->marker);
  g_autofree char *all = orch_union(want);
  g_assert_cmpstr(json_object_get_string_member(rec, "dedicated-cpus"), ==,
                  all);
  return pid;
}

static void
destroy_and_check_released(Fixture *f, int pid)
{
  g_free(VIRSH_OK("destroy", f->marker));
  g_autofree char *state = VIRSH_OK("domstate", f->marker);
  g_assert_cmpstr(g_strstrip(state), ==, "shut off");
  g_assert_true(qp_test_wait_no_process(f->marker, 20000));
  g_assert_cmpuint(orch_start_time(pid), ==, 0);
  g_assert_true(orch_wait_records(f->state, 0, 20000));
}

static void
test_probe_passes_through(Fixture *f, gconstpointer data)
{
  if (!f->ready)
    return;
  /* libvirt probes the emulator (-machine none, QMP, -daemonize); the
   * capabilities it learns through qemu-pin are the real QEMU's. */
  g_autofree char *direct =
      VIRSH_OK("domcapabilities", "--virttype", "qemu", "--arch", "x86_64",
               "--machine", "q35", "--emulatorbin", qp_test_qemu());
  g_autofree char *pinned =
      VIRSH_OK("domcapabilities", "--virttype", "qemu", "--arch", "x86_64",
               "--machine", "q35", "--emulatorbin", f->dropin);
  g_autofree char *path_direct =
      g_strdup_printf("<path>%s</path>", qp_test_qemu());
  g_autofree char *path_pinned = g_strdup_printf("<path>%s</path>", f->dropin);
  g_assert_nonnull(strstr(direct, path_direct));
  g_assert_nonnull(strstr(pinned, path_pinned));
  g_auto(GStrv) parts = g_strsplit(pinned, path_pinned, 2);
  g_autofree char *as_direct = g_strjoinv(path_direct, parts);
  g_assert_cmpstr(as_direct, ==, direct);
  /* The probe is not a VM: nothing was planned or claimed in the state
   * directory of our config (the probe does not see QEMU_PIN_CONFIG, but a
   * launch through the domain below would use it). */
  g_assert_cmpuint(qp_test_count_records(f->state), ==, 0);
}

static void
test_start_pinned(Fixture *f, gconstpointer data)
{
  if (!f->ready)
    return;
  g_auto(GStrv) want = planned_vcpu_sets(f);
  g_free(VIRSH_OK("define", f->xml));
  start_domain(f);
  int pid = check_pinned_to_plan(f, want);
  destroy_and_check_released(f, pid);
}

static void
test_destroy_frees_and_restart(Fixture *f, gconstpointer data)
{
  if (!f->ready)
    return;
  g_auto(GStrv) want = planned_vcpu_sets(f);
  g_free(VIRSH_OK("define", f->xml));
  start_domain(f);
  int first = check_pinned_to_plan(f, want);
  destroy_and_check_released(f, first);

  /* The freed cores are free again: the same plan, a new QEMU. */
  start_domain(f);
  int second = check_pinned_to_plan(f, want);
  g_assert_cmpint(second, !=, first);
  destroy_and_check_released(f, second);
}

static int
libvirtd_pid(void)
{
  g_autofree char *text = NULL;
  if (!g_file_get_contents("/run/libvirtd.pid", &text, NULL, NULL))
    return -1;
  return atoi(text);
}

static void
test_survives_libvirtd_restart(Fixture *f, gconstpointer data)
{
  if (!f->ready)
    return;
  g_auto(GStrv) want = planned_vcpu_sets(f);
  g_free(VIRSH_OK("define", f->xml));
  start_domain(f);
  int pid = check_pinned_to_plan(f, want);
  guint64 started = orch_start_time(pid);
  g_autoptr(JsonObject) before = orch_record(f->state);
  g_autofree char *record_id =
      g_strdup(json_object_get_string_member(before, "id"));
  int keeper = (int)json_object_get_int_member(before, "keeper-pid");
  g_assert_cmpint(keeper, >, 0);

  /* Stop libvirtd and start it again while the domain runs. */
  int old = libvirtd_pid();
  g_assert_cmpint(old, >, 0);
  g_assert_cmpint(run_setup("restart"), ==, 0);
  g_assert_cmpuint(orch_start_time(old), ==, 0);
  g_free(VIRSH_OK("domstate", f->marker));
  g_assert_cmpint(libvirtd_pid(), !=, old);

  /* The same QEMU, still running, still pinned, still claimed, and the
   * keeper still there to release the claim. */
  g_assert_cmpint(domain_pid(f), ==, pid);
  g_assert_cmpuint(orch_start_time(pid), ==, started);
  g_assert_true(qp_test_wait_vcpu_affinity(pid, (const char *const *)want, 0));
  int again = check_pinned_to_plan(f, want);
  g_assert_cmpint(again, ==, pid);
  g_autoptr(JsonObject) after = orch_record(f->state);
  g_assert_cmpstr(json_object_get_string_member(after, "id"), ==, record_id);
  g_assert_cmpuint(orch_start_time(keeper), >, 0);
  destroy_and_check_released(f, pid);
}

typedef struct {
  const char *mode;    /* of the domain's [name:NAME] group */
  const char *cpu_xml; /* NUMA cells, or "" */
  guint64 map_kib;     /* size of each guest RAM mapping */
  guint n_maps;
} MemCase;

static const MemCase mem_without_vnuma = {"balanced", "", 128 * 1024, 1};
static const MemCase mem_with_vnuma = {
    "numa",
    "  <cpu>\n"
    "    <numa>\n"
    "      <cell id='0' cpus='0' memory='64' unit='MiB'/>\n"
    "      <cell id='1' cpus='1' memory='64' unit='MiB'/>\n"
    "    </numa>\n"
    "  </cpu>\n",
    64 * 1024, 2};

/* libvirt gives guest RAM as JSON backends (`-machine memory-backend=pc.ram`
 * with `-object {"qom-type":"memory-backend-ram","id":"pc.ram",...}`, or one
 * backend per NUMA cell); qemu-pin binds them on the command line: every
 * guest RAM mapping of the running domain has the plan's policy. The mode
 * comes from the domain's [name:NAME] group, matched through libvirt's
 * `-name guest=NAME,...`. */
static void
test_memory_bound(Fixture *f, gconstpointer data)
{
  const MemCase *c = data;
  if (!f->ready)
    return;
  g_autofree char *conf =
      g_strdup_printf("[defaults]\n"
                      "qemu = %s\n"
                      "state-dir = %s\n"
                      "mode = one-to-one\n"
                      "\n"
                      "[name:%s]\n"
                      "mode = %s\n",
                      qp_test_qemu(), f->state, f->marker, c->mode);
  g_free(orch_write(f->dir, "qemu-pin.conf", conf));
  g_autofree char *xml = domain_xml(f, c->cpu_xml);
  g_free(orch_write(f->dir, "domain.xml", xml));

  /* The plan for libvirt's command line: memory bound where? */
  g_autoptr(GPtrArray) native = native_argv(f);
  g_autoptr(GPtrArray) args = g_ptr_array_new_with_free_func(g_free);
  g_ptr_array_add(args, g_strdup_printf("--state-dir=%s", f->plan_state));
  g_ptr_array_add(args, g_strdup_printf("--config=%s", f->config));
  g_ptr_array_add(args, g_strdup("--"));
  g_ptr_array_add(args, g_strdup(qp_test_qemu()));
  for (guint i = 1; i < native->len && native->pdata[i] != NULL; i++)
    g_ptr_array_add(args, g_strdup(native->pdata[i]));
  g_ptr_array_add(args, NULL);
  g_autoptr(JsonObject) plan = qp_test_plan((char **)args->pdata);
  g_assert_cmpstr(json_object_get_string_member(plan, "mode"), ==, c->mode);
  g_assert_cmpstr(json_object_get_string_member(plan, "memory-policy"), ==,
                  "bind");
  g_autofree char *want = g_strdup_printf(
      "bind:%s", json_object_get_string_member(plan, "memory-nodes"));

  g_free(VIRSH_OK("define", f->xml));
  start_domain(f);
  g_autofree char *state = VIRSH_OK("domstate", f->marker);
  g_assert_cmpstr(g_strstrip(state), ==, "running");
  int pid = domain_pid(f);
  g_assert_cmpint(pid, >, 0);
  g_auto(GStrv) policies = qp_test_policies_of_mappings(pid, c->map_kib);
  g_autofree char *have = g_strjoinv(" ", policies);
  g_test_message("guest RAM mappings of %" G_GUINT64_FORMAT
                 " KiB: %s (want %s)",
                 c->map_kib, have, want);
  g_assert_cmpuint(g_strv_length(policies), ==, c->n_maps);
  for (guint i = 0; i < c->n_maps; i++)
    g_assert_cmpstr(policies[i], ==, want);
  g_autoptr(JsonObject) rec = orch_record(f->state);
  g_assert_nonnull(rec);
  g_assert_cmpstr(json_object_get_string_member(rec, "mode"), ==, c->mode);
  destroy_and_check_released(f, pid);
}

/* ---- The caller's own placement ---------------------------------------- */

/* The dedicated CPUs of the one-to-one plan for the domain, less the host
 * core holding CPU: what the claim holds once no vCPU runs there. */
static char *
dedicated_without_core_of(char **plan, const char *cpu)
{
  g_autofree char *all = orch_union(plan);
  return qp_test_cpus_without_core_of(all, cpu);
}

/* Waits until the domain's ledger record holds the dedicated CPUs WANT. */
static void
wait_record_dedicated(Fixture *f, const char *want)
{
  if (qp_test_wait_record_string(f->state, "dedicated-cpus", want, 30000))
    return;
  orch_show_file("domain log", f->log);
  g_assert_not_reached();
}

/* Every vCPU thread of PID runs on WANT[i] (/proc), and libvirt says so
 * too (virsh vcpuinfo). */
static void
check_vcpus_on(Fixture *f, int pid, const char *const *want, guint timeout_ms)
{
  if (!qp_test_wait_vcpu_affinity(pid, want, timeout_ms)) {
    g_auto(GStrv) have = orch_vcpu_affinities(pid);
    g_autofree char *h = g_strjoinv(" ", have);
    g_autofree char *w = g_strjoinv(" ", (char **)want);
    g_test_message("vCPU affinities are %s, not %s", h, w);
    orch_show_file("domain log", f->log);
    g_assert_not_reached();
  }
  g_auto(GStrv) yn = vcpuinfo_affinities(f);
  g_assert_cmpuint(g_strv_length(yn), ==, g_strv_length((char **)want));
  for (guint i = 0; yn[i] != NULL; i++) {
    g_autofree char *w = as_yn(want[i], strlen(yn[i]));
    g_assert_cmpstr(yn[i], ==, w);
  }
}

/* Cpus_allowed_list of the thread of PID named COMM (libvirt runs QEMU with
 * debug-threads=on: "IO iothread1"), or of PID itself when COMM is NULL. */
static char *
thread_cpus(int pid, const char *comm)
{
  if (comm == NULL)
    return qp_test_task_field(pid, pid, "Cpus_allowed_list");
  g_autofree char *task = g_strdup_printf("/proc/%d/task", pid);
  g_autoptr(GDir) dir = g_dir_open(task, 0, NULL);
  const char *name;
  while (dir != NULL && (name = g_dir_read_name(dir)) != NULL) {
    g_autofree char *path = g_strdup_printf("%s/%s/comm", task, name);
    g_autofree char *have = NULL;
    if (g_file_get_contents(path, &have, NULL, NULL) &&
        strcmp(g_strstrip(have), comm) == 0)
      return qp_test_task_field(pid, atoi(name), "Cpus_allowed_list");
  }
  return NULL;
}

/* Longer than the keeper's look at the threads' affinities (5 s), so that
 * a check after it sees what the keeper left. */
#define AFTER_A_LOOK_US (7 * G_USEC_PER_SEC)

/* <vcpupin> puts both vCPUs on the CPU the plan gives vCPU 1, and
 * <iothreadpin> the iothread there too: libvirt applies them after QEMU
 * starts and before its cont; qemu-pin keeps them, and the one-to-one claim
 * gives back the core vCPU 0 was planned on. */
static void
test_vcpupin_at_start(Fixture *f, gconstpointer data)
{
  if (!f->ready)
    return;
  g_auto(GStrv) plan = planned_vcpu_sets(f);
  g_autofree char *cputune =
      g_strdup_printf("  <iothreads>1</iothreads>\n"
                      "  <cputune>\n"
                      "    <vcpupin vcpu='0' cpuset='%s'/>\n"
                      "    <vcpupin vcpu='1' cpuset='%s'/>\n"
                      "    <iothreadpin iothread='1' cpuset='%s'/>\n"
                      "  </cputune>\n",
                      plan[1], plan[1], plan[1]);
  g_autofree char *xml = domain_xml(f, cputune);
  g_free(orch_write(f->dir, "domain.xml", xml));
  g_free(VIRSH_OK("define", f->xml));
  start_domain(f);
  int pid = domain_pid(f);
  g_assert_cmpint(pid, >, 0);

  const char *want[] = {plan[1], plan[1], NULL};
  check_vcpus_on(f, pid, want, 30000);
  g_autofree char *left = dedicated_without_core_of(plan, plan[0]);
  wait_record_dedicated(f, left);
  g_usleep(AFTER_A_LOOK_US);
  check_vcpus_on(f, pid, want, 0);
  g_autofree char *io = thread_cpus(pid, "IO iothread1");
  g_assert_cmpstr(io, ==, plan[1]);
  destroy_and_check_released(f, pid);
}

/* `virsh vcpupin` and `virsh emulatorpin` on the running domain stick: the
 * keeper's looks (its own, and the one on RESUME after virsh
 * suspend/resume) keep them and the claim follows; a later reset of the
 * vCPU to every usable CPU brings the plan back and the core is claimed
 * again. */
static void
test_vcpupin_live_sticks(Fixture *f, gconstpointer data)
{
  if (!f->ready)
    return;
  g_auto(GStrv) plan = planned_vcpu_sets(f);
  g_free(VIRSH_OK("define", f->xml));
  start_domain(f);
  int pid = check_pinned_to_plan(f, plan);
  g_autofree char *all = orch_union(plan);

  g_free(VIRSH_OK("vcpupin", f->marker, "0", plan[1]));
  g_free(VIRSH_OK("emulatorpin", f->marker, plan[0]));
  const char *want[] = {plan[1], plan[1], NULL};
  check_vcpus_on(f, pid, want, 0);
  g_autofree char *left = dedicated_without_core_of(plan, plan[0]);
  wait_record_dedicated(f, left);
  g_usleep(AFTER_A_LOOK_US);
  check_vcpus_on(f, pid, want, 0);
  g_autofree char *emulator = thread_cpus(pid, NULL);
  g_assert_cmpstr(emulator, ==, plan[0]);

  /* Suspend, reset vCPU 1 behind libvirt's back, resume: the keeper's look
   * on RESUME puts vCPU 1 back on the plan, and leaves vCPU 0 where the
   * caller put it. */
  g_free(VIRSH_OK("suspend", f->marker));
  g_autofree char *own = orch_own_cpus();
  g_autoptr(GArray) tids = qp_test_vcpu_threads(pid);
  g_assert_cmpuint(tids->len, ==, 2);
  qp_test_set_affinity(g_array_index(tids, int, 1), own);
  g_free(VIRSH_OK("resume", f->marker));
  check_vcpus_on(f, pid, want, 30000);
  wait_record_dedicated(f, left);
  g_autofree char *emulator_after = thread_cpus(pid, NULL);
  g_assert_cmpstr(emulator_after, ==, plan[0]);

  /* vCPU 0 back to every usable CPU: a reset, not a decision. */
  g_free(VIRSH_OK("vcpupin", f->marker, "0", own));
  check_vcpus_on(f, pid, (const char *const *)plan, 30000);
  wait_record_dedicated(f, all);
  destroy_and_check_released(f, pid);
}

/* The first NUMA node of this host that has memory. */
static int
first_memory_node(void)
{
  g_autofree char *text = NULL;
  if (!g_file_get_contents("/sys/devices/system/node/has_memory", &text, NULL,
                           NULL) &&
      !g_file_get_contents("/sys/devices/system/node/online", &text, NULL,
                           NULL))
    return 0;
  return atoi(text);
}

/* <numatune mode='strict' nodeset=N> without guest NUMA cells: libvirt
 * puts host-nodes=[N] on the guest RAM backend; qemu-pin keeps it, claims
 * the guest's memory on N and says so in its log (-v). */
static void
test_numatune_claimed_there(Fixture *f, gconstpointer data)
{
  if (!f->ready)
    return;
  int node = first_memory_node();
  f->verbose = TRUE;
  g_autofree char *numatune =
      g_strdup_printf("  <numatune>\n"
                      "    <memory mode='strict' nodeset='%d'/>\n"
                      "  </numatune>\n",
                      node);
  g_autofree char *xml = domain_xml(f, numatune);
  g_free(orch_write(f->dir, "domain.xml", xml));
  g_autofree char *node_text = g_strdup_printf("%d", node);

  /* The plan for libvirt's command line: the caller's binding, kept. */
  g_autoptr(GPtrArray) native = native_argv(f);
  g_autoptr(GPtrArray) args = g_ptr_array_new_with_free_func(g_free);
  g_ptr_array_add(args, g_strdup_printf("--state-dir=%s", f->plan_state));
  g_ptr_array_add(args, g_strdup_printf("--config=%s", f->config));
  g_ptr_array_add(args, g_strdup("--"));
  g_ptr_array_add(args, g_strdup(qp_test_qemu()));
  for (guint i = 1; i < native->len && native->pdata[i] != NULL; i++)
    g_ptr_array_add(args, g_strdup(native->pdata[i]));
  g_ptr_array_add(args, NULL);
  g_autoptr(JsonObject) plan = qp_test_plan((char **)args->pdata);
  JsonArray *mem = json_object_get_array_member(plan, "memory");
  g_assert_cmpuint(json_array_get_length(mem), ==, 1);
  JsonObject *m = json_array_get_object_element(mem, 0);
  g_assert_true(json_object_get_boolean_member(m, "caller-set"));
  g_assert_cmpstr(json_object_get_string_member(m, "host-nodes"), ==,
                  node_text);
  g_assert_cmpstr(json_object_get_string_member(m, "policy"), ==, "bind");

  g_free(VIRSH_OK("define", f->xml));
  start_domain(f);
  int pid = domain_pid(f);
  g_assert_cmpint(pid, >, 0);
  g_autofree char *bind = g_strdup_printf("bind:%d", node);
  g_auto(GStrv) policies = qp_test_policies_of_mappings(pid, 128 * 1024);
  g_assert_cmpuint(g_strv_length(policies), ==, 1);
  g_assert_cmpstr(policies[0], ==, bind);

  g_autoptr(JsonObject) rec = orch_record(f->state);
  g_assert_nonnull(rec);
  JsonObject *claimed = json_object_get_object_member(rec, "memory-mib");
  g_assert_cmpuint(json_object_get_size(claimed), ==, 1);
  g_assert_cmpint(json_object_get_int_member(claimed, node_text), ==, 128);

  g_autofree char *line = g_strdup_printf(
      "the caller's memory binding kept: the guest's memory on host nodes "
      "%d, claimed there",
      node);
  g_autofree char *log = NULL;
  g_assert_true(g_file_get_contents(f->log, &log, NULL, NULL));
  if (strstr(log, line) == NULL) {
    g_test_message("the domain log does not say \"%s\"", line);
    orch_show_file("domain log", f->log);
    g_assert_not_reached();
  }
  destroy_and_check_released(f, pid);
}

/* The guide's "Check it" line (docs/orchestrators/libvirt.md), run as
 * written on the domain's own XML (virsh dumpxml, as the guide makes
 * db1.xml) while the domain runs: `qemu-pin plan` of the domain's command
 * line leaves the domain's own record out, succeeds and prints the plan the
 * domain runs with. */
static void
test_check_it_while_running(Fixture *f, gconstpointer data)
{
  if (!f->ready)
    return;
  g_auto(GStrv) want = planned_vcpu_sets(f);
  g_free(VIRSH_OK("define", f->xml));
  start_domain(f);
  int pid = check_pinned_to_plan(f, want);
  g_autoptr(JsonObject) rec = orch_record(f->state);
  const char *id = json_object_get_string_member(rec, "id");
  g_autofree char *dumped =
      VIRSH_OK("dumpxml", "--inactive", "--security-info", f->marker);
  g_autofree char *own_xml = orch_write(f->dir, "db1.xml", dumped);

  /* The guide's pipeline; qemu-pin and QEMU where this build has them. */
  g_autofree char *line = g_strdup_printf(
      "%s -c %s domxml-to-native qemu-argv %s |\n"
      "  sed 's|^.* /[^ ]*/qemu-system-x86_64 |%s plan --human -- %s |' | sh",
      virsh_bin, VIRSH_URI, own_xml, qp_test_binary(), qp_test_qemu());
  char *argv[] = {"/bin/sh", "-c", line, NULL};
  g_auto(GStrv) env =
      g_environ_setenv(g_get_environ(), "QEMU_PIN_CONFIG", f->config, TRUE);
  QpTestRun r;
  qp_test_run(argv, env, &r);
  g_test_message("Check it: exit %d\n%s%s", r.status, r.out, r.err);
  g_assert_cmpint(r.status, ==, 0);
  g_assert_null(strstr(r.err, "does not fit"));
  g_assert_true(g_str_has_prefix(r.out, "mode            one-to-one\n"));
  g_autofree char *ignored = g_strdup_printf(
      "\nignored record  %s (%s), qemu pid %d: the running VM of this -uuid, "
      "planned as if it were not there\n",
      f->marker, id, pid);
  g_assert_nonnull(strstr(r.out, ignored));
  for (guint v = 0; v < 2; v++) {
    g_autofree char *vs = g_strdup_printf("%u", v);
    g_autofree char *row = g_strdup_printf("\n%-11s %s\n", vs, want[v]);
    g_assert_nonnull(strstr(r.out, row));
  }
  qp_test_run_clear(&r);
  /* Planning launched and claimed nothing: the domain's record alone. */
  g_assert_cmpuint(qp_test_count_records(f->state), ==, 1);
  destroy_and_check_released(f, pid);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
#define ADD(path, fn) g_test_add(path, Fixture, NULL, setup, fn, teardown)
  ADD("/orchestrators/libvirt/capability-probe-passes-through",
      test_probe_passes_through);
  ADD("/orchestrators/libvirt/start/vcpus-pinned-to-plan-after-libvirt-cont",
      test_start_pinned);
  ADD("/orchestrators/libvirt/destroy/frees-claim-and-start-again-works",
      test_destroy_frees_and_restart);
  ADD("/orchestrators/libvirt/check-it/plan-of-running-domain-succeeds",
      test_check_it_while_running);
  ADD("/orchestrators/libvirt/libvirtd-restart/vm-undisturbed",
      test_survives_libvirtd_restart);
  g_test_add("/orchestrators/libvirt/memory/json-pc-ram-bound", Fixture,
             &mem_without_vnuma, setup, test_memory_bound, teardown);
  g_test_add("/orchestrators/libvirt/memory/json-numa-cells-bound", Fixture,
             &mem_with_vnuma, setup, test_memory_bound, teardown);
  ADD("/orchestrators/libvirt/caller/vcpupin-honoured-at-start",
      test_vcpupin_at_start);
  ADD("/orchestrators/libvirt/caller/virsh-vcpupin-on-running-vm-sticks",
      test_vcpupin_live_sticks);
  ADD("/orchestrators/libvirt/caller/numatune-strict-honoured-and-claimed",
      test_numatune_claimed_there);
  int rc = g_test_run();
  g_free(setup_skip_reason);
  g_free(virsh_bin);
  return rc;
}
