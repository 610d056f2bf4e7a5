/* vCPU hotplug by the caller (device_add / device_del on the caller's own
 * monitor) of a VM launched by qemu-pin, real QEMU (TCG), one-to-one
 * unless said:
 *  - a hot-plugged vCPU is pinned to a core of its own within moments and
 *    that core is counted in the VM's ledger record;
 *  - an unplugged vCPU gives its core back (the record forgets it, and
 *    another VM may then have that core);
 *  - with no free core left, the log says so clearly;
 *  - balanced with room for the boot vCPU only: the record's shared load
 *    counts the vCPUs there are, plugged or unplugged, with or without
 *    the caller's own pinning.
 *
 * The plug and unplug tests use -smp 1,maxcpus=min(4, host CPUs), so that
 * the plugged vCPU has a free core on any host; the no-free-core test uses
 * the issue's -smp 1,maxcpus=4 on a host with fewer than 4 CPUs.
 *
 * x86 unplug needs the guest's consent: the firmware here (unplug_fw) is a
 * tiny real-mode loop that switches the ACPI CPU hotplug block to its modern
 * interface and ejects every CPU that QEMU marks "removing", which is what
 * the guest's ACPI code does on a real OS. */
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/orchestrators/orch-common.h"

typedef struct {
  gboolean run;
  char *dir;
  char *marker;
  char *state;
  char *qmp;
  char *fw;
  GPid pid;
} Fixture;

/* Real mode at F000:E000 (see the header comment):
 *   cli; mov dx,0xcd8; xor al,al; out dx,al        ; legacy -> modern
 * l: mov cx,1
 * s: mov dx,0xcd8; xor eax,eax; mov ax,cx; out dx,eax  ; selector = cx
 *    mov dx,0xcdc; in al,dx; test al,4; jz n          ; removing?
 *    mov al,8; out dx,al                              ; eject
 * n: inc cx; cmp cx,4; jb s; pause; jmp l
 * and at the reset vector: jmp far F000:E000. */
static const guint8 unplug_code[] = {
    0xFA, 0xBA, 0xD8, 0x0C, 0x30, 0xC0, 0xEE, 0xB9, 0x01, 0x00, 0xBA,
    0xD8, 0x0C, 0x66, 0x31, 0xC0, 0x89, 0xC8, 0x66, 0xEF, 0xBA, 0xDC,
    0x0C, 0xEC, 0xA8, 0x04, 0x74, 0x03, 0xB0, 0x08, 0xEE, 0x41, 0x83,
    0xF9, 0x04, 0x72, 0xE5, 0xF3, 0x90, 0xEB, 0xDE,
};
static const guint8 reset_jump[] = {0xEA, 0x00, 0xE0, 0x00, 0xF0};

static char *
unplug_fw(const char *dir)
{
  guint8 *image = g_malloc0(65536);
  memcpy(image + 0xE000, unplug_code, sizeof(unplug_code));
  memcpy(image + 0xFFF0, reset_jump, sizeof(reset_jump));
  char *path = g_build_filename(dir, "unplug.fw", NULL);
  GError *error = NULL;
  g_file_set_contents(path, (const char *)image, 65536, &error);
  g_assert_no_error(error);
  g_free(image);
  return path;
}

static void
setup(Fixture *f, gconstpointer data)
{
  if (g_get_num_processors() < 2) {
    g_test_skip("one-to-one hotplug needs at least 2 host CPUs");
    return;
  }
  f->run = TRUE;
  f->dir = qp_test_tmpdir();
  f->marker = g_path_get_basename(f->dir);
  orch_cleanup_on_abort(f->marker, NULL, NULL);
  f->state = g_build_filename(f->dir, "state", NULL);
  f->qmp = g_build_filename(f->dir, "qmp.sock", NULL);
  f->fw = unplug_fw(f->dir);
}

static void
teardown(Fixture *f, gconstpointer data)
{
  orch_cleanup_on_abort(NULL, NULL, NULL);
  if (!f->run)
    return;
  g_autoptr(GArray) left = qp_test_pids_with(f->marker);
  for (guint i = 0; i < left->len; i++)
    kill(g_array_index(left, int, i), SIGKILL);
  if (f->pid > 0)
    qp_test_wait(f->pid, 10000);
  qp_test_wait_no_process(f->marker, 10000);
  qp_test_rmtree(f->dir);
  g_free(f->dir);
  g_free(f->marker);
  g_free(f->state);
  g_free(f->qmp);
  g_free(f->fw);
}

static char *stderr_text(Fixture *f);

/* Launches the VM with -smp 1,maxcpus=MAXCPUS in MODE ("--mode=..."),
 * within AFFINITY ("--affinity=...") when not NULL. */
static void
launch_in(Fixture *f, const char *mode, const char *affinity, guint maxcpus)
{
  g_autofree char *smp = g_strdup_printf("1,maxcpus=%u", maxcpus);
  g_autofree char *state = g_strdup_printf("--state-dir=%s", f->state);
  g_autofree char *name = g_strdup_printf("%s,debug-threads=on", f->marker);
  g_autofree char *qmp = g_strdup_printf("unix:%s,server=on,wait=off", f->qmp);
  g_autoptr(GPtrArray) argv = g_ptr_array_new();
  g_ptr_array_add(argv, (char *)qp_test_binary());
  g_ptr_array_add(argv, state);
  g_ptr_array_add(argv, (char *)mode);
  if (affinity != NULL)
    g_ptr_array_add(argv, (char *)affinity);
  const char *qemu[] = {
      "--",    qp_test_qemu(), "-accel",   "tcg",   "-machine",
      "q35",   "-nodefaults",  "-display", "none",  "-smp",
      smp,     "-m",           "64",       "-bios", f->fw,
      "-name", name,           "-qmp",     qmp};
  for (guint i = 0; i < G_N_ELEMENTS(qemu); i++)
    g_ptr_array_add(argv, (char *)qemu[i]);
  g_ptr_array_add(argv, NULL);
  f->pid = qp_test_spawn((char **)argv->pdata, NULL, f->dir);
  if (!orch_wait_status(f->qmp, "running", 30000)) {
    g_autofree char *err = stderr_text(f);
    g_test_message("qemu-pin's stderr:\n%s", err);
    g_assert_not_reached();
  }
}

static void
launch(Fixture *f, guint maxcpus)
{
  launch_in(f, "--mode=one-to-one", NULL, maxcpus);
}

static guint
small_maxcpus(void)
{
  return MIN(4, (guint)g_get_num_processors());
}

static char *
stderr_text(Fixture *f)
{
  g_autofree char *path = g_build_filename(f->dir, "stderr", NULL);
  char *text = NULL;
  g_file_get_contents(path, &text, NULL, NULL);
  return text ? text : g_strdup("");
}

/* Affinity of vCPU INDEX's thread once it exists and is a single CPU
 * other than ALL (our whole set), or NULL. */
static char *
wait_single_cpu(Fixture *f, guint index, guint timeout_ms)
{
  g_autofree char *all = orch_own_cpus();
  gint64 deadline = g_get_monotonic_time() + (gint64)timeout_ms * 1000;
  do {
    g_auto(GStrv) aff = orch_vcpu_affinities(f->pid);
    if (g_strv_length(aff) > index && *aff[index] != '\0' &&
        strpbrk(aff[index], ",-") == NULL && strcmp(aff[index], all) != 0)
      return g_strdup(aff[index]);
    g_usleep(20000);
  } while (g_get_monotonic_time() < deadline);
  g_auto(GStrv) aff = orch_vcpu_affinities(f->pid);
  g_autofree char *have = g_strjoinv(" ", aff);
  g_test_message("vCPU affinities: %s", have);
  return NULL;
}

static char *
dedicated(Fixture *f)
{
  g_autoptr(JsonObject) rec = orch_record(f->state);
  g_assert_nonnull(rec);
  return g_strdup(json_object_get_string_member(rec, "dedicated-cpus"));
}

static gboolean
wait_dedicated(Fixture *f, const char *want, guint timeout_ms)
{
  gint64 deadline = g_get_monotonic_time() + (gint64)timeout_ms * 1000;
  g_autofree char *have = NULL;
  do {
    g_free(have);
    have = dedicated(f);
    if (strcmp(have, want) == 0)
      return TRUE;
    g_usleep(20000);
  } while (g_get_monotonic_time() < deadline);
  g_test_message("dedicated-cpus is \"%s\", not \"%s\"", have, want);
  return FALSE;
}

/* device_add of the hotpluggable CPU slot for vCPU INDEX, with id cpuINDEX
 * and the slot's props as QEMU lists them. */
static void
plug(Fixture *f, guint index)
{
  g_autoptr(JsonNode) slots =
      orch_qmp(f->qmp, "{\"execute\":\"query-hotpluggable-cpus\"}", NULL);
  g_assert_nonnull(slots);
  JsonArray *a = json_node_get_array(slots);
  JsonObject *slot = NULL;
  /* The list is in reverse order of the possible CPUs. */
  guint n = json_array_get_length(a);
  g_assert_cmpuint(index, <, n);
  slot = json_array_get_object_element(a, n - 1 - index);
  g_assert_false(json_object_has_member(slot, "qom-path"));
  g_autoptr(JsonBuilder) b = json_builder_new();
  json_builder_begin_object(b);
  json_builder_set_member_name(b, "execute");
  json_builder_add_string_value(b, "device_add");
  json_builder_set_member_name(b, "arguments");
  json_builder_begin_object(b);
  json_builder_set_member_name(b, "driver");
  json_builder_add_string_value(b, json_object_get_string_member(slot, "type"));
  json_builder_set_member_name(b, "id");
  g_autofree char *id = g_strdup_printf("cpu%u", index);
  json_builder_add_string_value(b, id);
  JsonObject *props = json_object_get_object_member(slot, "props");
  g_autoptr(GList) names = json_object_get_members(props);
  for (GList *l = names; l != NULL; l = l->next) {
    json_builder_set_member_name(b, l->data);
    json_builder_add_int_value(b, json_object_get_int_member(props, l->data));
  }
  json_builder_end_object(b);
  json_builder_end_object(b);
  g_autoptr(JsonNode) root = json_builder_get_root(b);
  g_autofree char *cmd = json_to_string(root, FALSE);
  g_autofree char *err = NULL;
  g_autoptr(JsonNode) r = orch_qmp(f->qmp, cmd, &err);
  if (r == NULL)
    g_test_message("%s: %s", cmd, err);
  g_assert_nonnull(r);
}

static guint
vcpu_count(Fixture *f)
{
  g_autoptr(JsonNode) r =
      orch_qmp(f->qmp, "{\"execute\":\"query-cpus-fast\"}", NULL);
  g_assert_nonnull(r);
  return json_array_get_length(json_node_get_array(r));
}

static char *
boot_vcpu_cpu(Fixture *f)
{
  char *cpu = wait_single_cpu(f, 0, 30000);
  g_assert_nonnull(cpu);
  return cpu;
}

static void
test_plug_pinned_and_counted(Fixture *f, gconstpointer data)
{
  if (!f->run)
    return;
  launch(f, small_maxcpus());
  g_autofree char *cpu0 = boot_vcpu_cpu(f);
  plug(f, 1);
  g_assert_cmpuint(vcpu_count(f), ==, 2);
  g_autofree char *cpu1 = wait_single_cpu(f, 1, 5000);
  if (cpu1 == NULL) {
    g_autofree char *err = stderr_text(f);
    g_test_message("qemu-pin's stderr:\n%s", err);
  }
  g_assert_nonnull(cpu1);
  g_assert_cmpstr(cpu1, !=, cpu0);
  /* vCPU 0 kept its core. */
  g_auto(GStrv) aff = orch_vcpu_affinities(f->pid);
  g_assert_cmpstr(aff[0], ==, cpu0);
  char *both[] = {cpu0, cpu1, NULL};
  g_autofree char *want = orch_union(both);
  g_assert_true(wait_dedicated(f, want, 5000));
}

/* device_del of the vCPU cpu1 (the firmware ejects it afterwards). */
static void
unplug_cpu1(Fixture *f)
{
  g_autofree char *err = NULL;
  g_autoptr(JsonNode) r = orch_qmp(
      f->qmp, "{\"execute\":\"device_del\",\"arguments\":{\"id\":\"cpu1\"}}",
      &err);
  if (r == NULL)
    g_test_message("device_del: %s", err);
  g_assert_nonnull(r);
}

/* Whether a one-vCPU VM restricted to CPU may be planned one-to-one on
 * this VM's ledger now (`qemu-pin plan`: a core another VM holds is not
 * free). */
static gboolean
other_vm_gets(Fixture *f, const char *cpu)
{
  g_autofree char *state = g_strdup_printf("--state-dir=%s", f->state);
  g_autofree char *affinity = g_strdup_printf("--affinity=%s", cpu);
  char *argv[] = {(char *)qp_test_binary(),
                  "plan",
                  state,
                  affinity,
                  "--mode=one-to-one",
                  "--",
                  (char *)qp_test_qemu(),
                  "-accel",
                  "tcg",
                  "-smp",
                  "1",
                  "-m",
                  "64",
                  NULL};
  QpTestRun r;
  qp_test_run(argv, NULL, &r);
  gboolean ok = r.status == 0;
  if (ok) {
    g_autoptr(JsonParser) p = json_parser_new();
    g_assert_true(json_parser_load_from_data(p, r.out, -1, NULL));
    JsonObject *plan = json_node_get_object(json_parser_get_root(p));
    g_auto(GStrv) sets = qp_test_plan_vcpu_sets(plan);
    g_assert_cmpstr(sets[0], ==, cpu);
  } else {
    g_test_message("plan for another VM on CPU %s: %s", cpu, r.err);
    g_assert_cmpint(r.status, ==, 1);
  }
  qp_test_run_clear(&r);
  return ok;
}

static void
test_unplug_releases(Fixture *f, gconstpointer data)
{
  if (!f->run)
    return;
  launch(f, small_maxcpus());
  g_autofree char *cpu0 = boot_vcpu_cpu(f);
  /* Issue 5: only the plugged vCPUs' cores are claimed. */
  g_assert_true(wait_dedicated(f, cpu0, 5000));
  plug(f, 1);
  g_autofree char *cpu1 = wait_single_cpu(f, 1, 5000);
  g_assert_nonnull(cpu1);
  char *both[] = {cpu0, cpu1, NULL};
  g_autofree char *want = orch_union(both);
  g_assert_true(wait_dedicated(f, want, 5000));
  /* Another VM cannot have vCPU 1's core now... */
  g_assert_false(other_vm_gets(f, cpu1));

  unplug_cpu1(f);
  /* The firmware ejects it; then the core goes back. */
  gint64 deadline = g_get_monotonic_time() + 20 * G_USEC_PER_SEC;
  while (vcpu_count(f) != 1 && g_get_monotonic_time() < deadline)
    g_usleep(20000);
  g_assert_cmpuint(vcpu_count(f), ==, 1);
  g_assert_true(qp_test_wait_vcpu_affinity(
      f->pid, (const char *const[]){cpu0, NULL}, 5000));
  g_assert_true(wait_dedicated(f, cpu0, 5000));
  /* ...and can once it is unplugged. (Not a second plug into this VM:
   * QEMU 7.2 under TCG segfaults on any vCPU plug after an eject, with or
   * without qemu-pin; checked with plain QEMU and this firmware.) */
  g_assert_true(other_vm_gets(f, cpu1));
  g_assert_cmpuint(vcpu_count(f), ==, 1);
}

static void
test_no_free_core_warns(Fixture *f, gconstpointer data)
{
  if (!f->run)
    return;
  guint ncpus = (guint)g_get_num_processors();
  if (ncpus > 3) {
    g_test_skip("needs a host where 4 vCPUs outnumber the CPUs");
    return;
  }
  launch(f, 4);
  g_autofree char *cpu0 = boot_vcpu_cpu(f);
  g_assert_nonnull(cpu0);
  /* Plug until there are more vCPUs than host CPUs. */
  for (guint i = 1; i <= ncpus; i++)
    plug(f, i);
  g_assert_cmpuint(vcpu_count(f), ==, ncpus + 1);
  g_autofree char *warned = g_strdup_printf("vCPU %u", ncpus);
  gint64 deadline = g_get_monotonic_time() + 5 * G_USEC_PER_SEC;
  g_autofree char *err = NULL;
  do {
    g_free(err);
    err = stderr_text(f);
    if (strstr(err, "warning") != NULL && strstr(err, warned) != NULL)
      break;
    g_usleep(20000);
  } while (g_get_monotonic_time() < deadline);
  g_test_message("qemu-pin's stderr:\n%s", err);
  g_assert_nonnull(strstr(err, "warning"));
  g_assert_nonnull(strstr(err, warned));
  /* The VM still runs; the cores it has are still its own. */
  g_autofree char *status = orch_status(f->qmp);
  g_assert_cmpstr(status, ==, "running");
  g_autofree char *all = orch_own_cpus();
  g_autofree char *d = dedicated(f);
  g_assert_cmpstr(d, ==, all);
}

/* The shared vCPUs the one record claims: the sum of its "load" (by
 * node) when MEMBER is "load", of its "cpu-load" sets' vCPUs else. */
static guint
shared_vcpus(Fixture *f, const char *member)
{
  g_autoptr(JsonObject) rec = orch_record(f->state);
  g_assert_nonnull(rec);
  guint n = 0;
  if (strcmp(member, "load") == 0) {
    JsonObject *load = json_object_get_object_member(rec, "load");
    g_autoptr(GList) nodes = json_object_get_members(load);
    for (GList *l = nodes; l != NULL; l = l->next)
      n += (guint)json_object_get_int_member(load, l->data);
  } else {
    JsonArray *sets = json_object_get_array_member(rec, "cpu-load");
    for (guint i = 0; i < json_array_get_length(sets); i++)
      n += (guint)json_object_get_int_member(
          json_array_get_object_element(sets, i), "vcpus");
  }
  return n;
}

static gboolean
wait_shared(Fixture *f, guint want, guint timeout_ms)
{
  gint64 deadline = g_get_monotonic_time() + (gint64)timeout_ms * 1000;
  guint load, cpu_load;
  do {
    load = shared_vcpus(f, "load");
    cpu_load = shared_vcpus(f, "cpu-load");
    if (load == want && cpu_load == want)
      return TRUE;
    g_usleep(20000);
  } while (g_get_monotonic_time() < deadline);
  g_test_message("the record claims %u shared vCPUs by node and %u by CPU "
                 "set, not %u",
                 load, cpu_load, want);
  return FALSE;
}

/* Balanced with room for the boot vCPU only (3 possible vCPUs, 2 CPUs):
 * those plugged later share its CPUs, and the record counts every vCPU
 * there is, no fewer (plugged ones were not counted) and no more (once
 * the caller pinned one, every possible vCPU was). */
static void
test_balanced_plugged_counted(Fixture *f, gconstpointer data)
{
  if (!f->run)
    return;
  cpu_set_t mask;
  g_assert_cmpint(sched_getaffinity(0, sizeof(mask), &mask), ==, 0);
  int cpus[2], found = 0;
  for (int c = 0; c < CPU_SETSIZE && found < 2; c++)
    if (CPU_ISSET(c, &mask))
      cpus[found++] = c;
  g_assert_cmpint(found, ==, 2);
  g_autofree char *affinity =
      g_strdup_printf("--affinity=%d,%d", cpus[0], cpus[1]);
  launch_in(f, "--mode=balanced", affinity, 3);
  g_assert_true(wait_shared(f, 1, 5000));

  plug(f, 1);
  g_assert_cmpuint(vcpu_count(f), ==, 2);
  g_assert_true(wait_shared(f, 2, 5000));

  /* The caller pins vCPU 0 itself: still the 2 vCPUs there are. */
  g_autoptr(GArray) tids = qp_test_vcpu_threads(f->pid);
  g_assert_cmpuint(tids->len, ==, 2);
  g_autofree char *first = g_strdup_printf("%d", cpus[0]);
  qp_test_set_affinity(g_array_index(tids, int, 0), first);
  gint64 deadline = g_get_monotonic_time() + 15 * G_USEC_PER_SEC;
  gboolean placed = FALSE;
  while (!placed && g_get_monotonic_time() < deadline) {
    g_autoptr(JsonObject) rec = orch_record(f->state);
    placed = json_object_get_boolean_member_with_default(rec, "caller-placed",
                                                         FALSE);
    if (!placed)
      g_usleep(50000);
  }
  g_assert_true(placed);
  g_assert_true(wait_shared(f, 2, 2000));

  /* Unplugged (the firmware ejects it): 1 again. */
  unplug_cpu1(f);
  deadline = g_get_monotonic_time() + 20 * G_USEC_PER_SEC;
  while (vcpu_count(f) != 1 && g_get_monotonic_time() < deadline)
    g_usleep(20000);
  g_assert_cmpuint(vcpu_count(f), ==, 1);
  g_assert_true(wait_shared(f, 1, 5000));
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add("/orchestrators/hotplug/device-add/pinned-to-new-core-and-counted",
             Fixture, NULL, setup, test_plug_pinned_and_counted, teardown);
  g_test_add("/orchestrators/hotplug/device-del/core-released", Fixture, NULL,
             setup, test_unplug_releases, teardown);
  g_test_add("/orchestrators/hotplug/no-free-core/clear-warning", Fixture, NULL,
             setup, test_no_free_core_warns, teardown);
  g_test_add("/orchestrators/hotplug/balanced/plugged-vcpus-counted", Fixture,
             NULL, setup, test_balanced_plugged_counted, teardown);
  return g_test_run();
}
