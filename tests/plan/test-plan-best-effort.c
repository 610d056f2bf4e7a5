/* The placement planner (topology/plan/) on hand-built hosts. Mode auto when
 * the vCPUs do not fit: placed best effort, CPUs shared, one warning saying
 * what was not given; memory still refused. */
#include "tests/plan/plan-hosts.h"

#include <string.h>

/* ---- Best effort: mode auto never refuses a VM for CPUs ------------------ */

/* NODES nodes of CPUS CPUs each (one PU per core, CPU ids consecutive),
 * MIB of memory each, SLIT 10/20. */
static QpHost *
flat_host(guint nodes, guint cpus, guint64 mib)
{
  QpHost *h = host_new(nodes, mib, 20);
  for (guint n = 0; n < nodes; n++)
    for (guint c = 0; c < cpus; c++)
      host_core(h, (int)n, (int)n, 0, (int)(n * cpus + c), -1);
  host_done(h);
  return h;
}

/* The plan is best effort, and its one warning (among WARNINGS in all) names
 * every NEEDLE. */
static void
assert_best_effort(const QpPlan *p, guint warnings, const char *const *needles)
{
  g_assert_true(p->best_effort);
  g_assert_cmpuint(p->not_given->len, >, 0);
  g_assert_cmpuint(p->warnings->len, ==, warnings);
  guint hits = 0;
  for (guint w = 0; w < p->warnings->len; w++) {
    const char *line = g_ptr_array_index(p->warnings, w);
    if (!g_str_has_prefix(line, "best effort (mode auto): "))
      continue;
    hits++;
    g_assert_null(strchr(line, '\n'));
    for (guint i = 0; needles[i] != NULL; i++)
      if (strstr(line, needles[i]) == NULL)
        g_error("warning \"%s\" lacks \"%s\"", line, needles[i]);
  }
  g_assert_cmpuint(hits, ==, 1);
}

/* MODE given explicitly refuses the request for CPUs. */
static void
assert_refused_for_cpus(const QpHost *h, const QpClaims *c, const QpRequest *r,
                        QpMode mode)
{
  g_autoptr(Opts) o = opts_new(mode, NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(QpPlan) p = qp_plan_compute(h, c, r, &o->o, &error);
  g_assert_null(p);
  assert_nofit(error, "VM does not fit: ");
  if (strstr(error->message, "CPU") == NULL &&
      strstr(error->message, "cores") == NULL)
    g_error("%s refuses for something else than CPUs: %s", qp_mode_name(mode),
            error->message);
}

/* The same request in every explicit mode is refused for CPUs. */
static void
assert_explicit_modes_refuse(const QpHost *h, const QpClaims *c,
                             const QpRequest *r)
{
  assert_refused_for_cpus(h, c, r, QP_MODE_BALANCED);
  assert_refused_for_cpus(h, c, r, QP_MODE_NUMA);
  assert_refused_for_cpus(h, c, r, QP_MODE_ONE_TO_ONE);
}

/* This host's shape (2 CPUs, one node): -smp 8 floats on both CPUs. */
static void
test_best_effort_one_node(void)
{
  g_autoptr(TestHost) h = flat_host(1, 2, 4096);
  g_autoptr(QpRequest) r = request(8, 1024);
  g_autoptr(Opts) o = opts_new(QP_MODE_AUTO, NULL);
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  g_assert_cmpint(p->mode, ==, QP_MODE_BALANCED);
  for (guint v = 0; v < 8; v++)
    assert_vcpu(p, v, "0-1");
  assert_set(p->process_cpus, "0-1");
  assert_set(p->mem_nodes, "0");
  g_assert_cmpuint(claimed_on(p, 0), ==, 1024);
  g_assert_cmpuint(load_on(p, 0), ==, 8);
  g_assert_cmpuint(p->cpu_load->len, ==, 1);
  assert_set(g_array_index(p->cpu_load, QpCpuLoad, 0).cpus, "0-1");
  g_assert_cmpuint(g_array_index(p->cpu_load, QpCpuLoad, 0).vcpus, ==, 8);
  const char *want[] = {"8 vCPUs share 2 usable CPUs on host node 0 (4.00 per "
                        "CPU)",
                        "--mode=balanced refuses", NULL};
  assert_best_effort(p, 1, want);
  g_autoptr(JsonNode) json = qp_plan_to_json(p);
  JsonObject *jo = json_node_get_object(json);
  g_assert_true(json_object_get_boolean_member(jo, "best-effort"));
  g_assert_cmpuint(
      json_array_get_length(json_object_get_array_member(jo, "not-given")), ==,
      1);
  JsonArray *cl = json_object_get_array_member(
      json_object_get_object_member(jo, "claims"), "cpu-load");
  g_assert_cmpuint(json_array_get_length(cl), ==, 1);
  g_assert_cmpstr(json_object_get_string_member(
                      json_array_get_object_element(cl, 0), "cpus"),
                  ==, "0-1");
  assert_explicit_modes_refuse(h, NULL, r);

  /* A VM that fits is no best effort: no warning, no not-given. */
  g_autoptr(QpRequest) r2 = request(2, 1024);
  g_autoptr(QpPlan) p2 = plan_ok(h, NULL, r2, o);
  g_assert_false(p2->best_effort);
  g_assert_cmpuint(p2->not_given->len, ==, 0);
  g_assert_cmpuint(p2->warnings->len, ==, 0);
}

/* A 2-node guest with 4 vCPUs per node on that host: both guest nodes on
 * host node 0, memory bound per guest node there. */
static void
test_best_effort_vnuma_one_node(void)
{
  g_autoptr(TestHost) h = flat_host(1, 2, 4096);
  g_autoptr(QpRequest) r = request(8, 2048);
  request_vnuma(r, 2, 4, 1024);
  g_autoptr(Opts) o = opts_new(QP_MODE_AUTO, NULL);
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  g_assert_cmpint(p->mode, ==, QP_MODE_NUMA);
  for (guint v = 0; v < 8; v++)
    assert_vcpu(p, v, "0-1");
  g_assert_cmpuint(p->n_mem, ==, 2);
  for (guint m = 0; m < 2; m++) {
    g_assert_cmpint(p->mem[m].gnode, ==, (int)m);
    assert_set(p->mem[m].host_nodes, "0");
    g_assert_cmpint(p->mem[m].policy, ==, QP_POLICY_BIND);
  }
  g_assert_cmpuint(claimed_on(p, 0), ==, 2048);
  g_assert_cmpuint(load_on(p, 0), ==, 8);
  const char *want[] = {"8 vCPUs share 2 usable CPUs (4.00 per CPU)",
                        "guest nodes 0-1 share host node 0",
                        "--mode=numa refuses", NULL};
  assert_best_effort(p, 1, want);
  assert_explicit_modes_refuse(h, NULL, r);
}

/* More vCPUs than the host has CPUs: every usable CPU; the memory, which
 * one node holds, bound to that node alone (the tightest, the first on a
 * tie), as balanced binds a guest that spans nodes for its vCPUs. */
static void
test_best_effort_every_cpu(void)
{
  g_autoptr(TestHost) h = epyc(NULL);
  g_autoptr(QpRequest) r = request(40, 4096);
  g_autoptr(Opts) o = opts_new(QP_MODE_AUTO, NULL);
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  assert_set(p->process_cpus, "0-31");
  assert_vcpu(p, 39, "0-31");
  assert_set(p->mem_nodes, "0");
  g_assert_cmpuint(claimed_on(p, 0), ==, 4096);
  for (int n = 0; n < 4; n++)
    g_assert_cmpuint(load_on(p, n), ==, 10);
  const char *want[] = {"40 vCPUs share 32 usable CPUs on host nodes 0-3 "
                        "(1.25 per CPU)",
                        NULL};
  assert_best_effort(p, 1, want);
  assert_explicit_modes_refuse(h, NULL, r);

  /* Inside --affinity (and the cgroup): never beyond it. */
  g_autoptr(Opts) oa = opts_new(QP_MODE_AUTO, "4-7");
  g_autoptr(QpPlan) pa = plan_ok(h, NULL, r, oa);
  assert_set(pa->process_cpus, "4-7");
  assert_set(pa->mem_nodes, "1");
  const char *want_a[] = {"40 vCPUs share 4 usable CPUs on host node 1 "
                          "(10.00 per CPU)",
                          NULL};
  assert_best_effort(pa, 1, want_a);
}

/* Guest nodes whose vCPUs do not fit one host node span the nearest nodes'
 * spare CPUs ("more nodes") before any CPU is shared. */
static void
test_best_effort_more_nodes(void)
{
  g_autoptr(TestHost) h = flat_host(2, 4, 8192);
  g_autoptr(QpRequest) r = request(8, 2048);
  request_vnuma(r, 2, 4, 1024);
  /* Guest node 0 gets vCPUs 0-5, guest node 1 vCPUs 6-7. */
  hwloc_bitmap_set_range(r->gnodes[0].vcpus, 0, 5);
  hwloc_bitmap_zero(r->gnodes[1].vcpus);
  hwloc_bitmap_set_range(r->gnodes[1].vcpus, 6, 7);
  g_autoptr(Opts) o = opts_new(QP_MODE_AUTO, NULL);
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  assert_vcpu(p, 0, "0-7");
  assert_vcpu(p, 5, "0-7");
  assert_vcpu(p, 6, "4-7");
  assert_vcpu(p, 7, "4-7");
  assert_set(p->mem[0].host_nodes, "0");
  assert_set(p->mem[1].host_nodes, "1");
  g_assert_cmpuint(load_on(p, 0), ==, 4);
  g_assert_cmpuint(load_on(p, 1), ==, 4);
  const char *want[] = {"guest node 0's vCPUs span host nodes 0-1", NULL};
  assert_best_effort(p, 1, want);
  g_assert_false(has_text(p->not_given, "per CPU"));
  /* Balanced and one-to-one without vNUMA would fit 8 vCPUs on 8 CPUs. */
  assert_refused_for_cpus(h, NULL, r, QP_MODE_NUMA);
}

/* More vCPUs than CPUs on uneven nodes: each guest node gets its share of
 * the CPUs (vCPUs x usable / all vCPUs), spilling to the nearest node. */
static void
test_best_effort_even_share(void)
{
  g_autoptr(TestHost) h = host_new(2, 8192, 20);
  for (int c = 0; c < 8; c++)
    host_core(h, c < 6 ? 0 : 1, 0, 0, c, -1);
  host_done(h);
  g_autoptr(QpRequest) r = request(12, 2048);
  request_vnuma(r, 2, 6, 1024);
  g_autoptr(Opts) o = opts_new(QP_MODE_AUTO, NULL);
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  assert_vcpu(p, 0, "0-5"); /* 6 vCPUs on 6 of the 8 CPUs: its share */
  assert_vcpu(p, 6, "0-7"); /* node 1's 2 CPUs and node 0's 2 spare */
  assert_set(p->mem[1].host_nodes, "1");
  g_assert_cmpuint(load_on(p, 0), ==, 9);
  g_assert_cmpuint(load_on(p, 1), ==, 3);
  const char *want[] = {"12 vCPUs share 8 usable CPUs (1.50 per CPU)",
                        "guest node 1's vCPUs span host nodes 0-1", NULL};
  assert_best_effort(p, 1, want);
}

/* Another VM's dedicated cores are never used while other CPUs exist; a
 * guest node's memory goes where its vCPUs run when it fits there. */
static void
test_best_effort_dedicated(void)
{
  g_autoptr(TestHost) h = flat_host(2, 2, 8192);
  g_autoptr(QpClaims) c = qp_claims_new();
  QpClaim *o2o = claim_add(c, "o2o");
  o2o->mode = QP_MODE_ONE_TO_ONE;
  hwloc_bitmap_set_range(o2o->dedicated, 0, 1); /* all of node 0 */
  claim_mem(o2o, 0, 1024);

  g_autoptr(QpRequest) r = request(4, 2048);
  request_vnuma(r, 2, 2, 1024);
  g_autoptr(Opts) o = opts_new(QP_MODE_AUTO, NULL);
  g_autoptr(QpPlan) p = plan_ok(h, c, r, o);
  for (guint v = 0; v < 4; v++)
    assert_vcpu(p, v, "2-3");
  assert_set(p->mem[0].host_nodes, "1");
  assert_set(p->mem[1].host_nodes, "1");
  const char *want[] = {"guest nodes 0-1 share host node 1",
                        "4 vCPUs share 2 usable CPUs", NULL};
  assert_best_effort(p, 1, want);
  g_assert_false(has_text(p->not_given, "dedicated"));
  assert_explicit_modes_refuse(h, c, r);

  /* Memory that fits only on node 0 stays there; the vCPUs run on the
   * nearest CPUs that are not dedicated. */
  g_autoptr(QpRequest) r2 = request(4, 10240);
  request_vnuma(r2, 2, 2, 5120);
  claim_mem(o2o, 1, 2048); /* node 1 has 6144 left */
  g_autoptr(QpPlan) p2 = plan_ok(h, c, r2, o);
  assert_set(p2->mem[0].host_nodes, "1");
  assert_set(p2->mem[1].host_nodes, "0");
  assert_vcpu(p2, 0, "2-3");
  assert_vcpu(p2, 3, "2-3");
  const char *want2[] = {"guest node 1's memory is on host node 0, its vCPUs "
                         "on 1",
                         NULL};
  assert_best_effort(p2, 1, want2);
}

/* When other VMs have dedicated every usable CPU, the VM shares their cores
 * rather than being refused, and says so. */
static void
test_best_effort_all_dedicated(void)
{
  g_autoptr(TestHost) h = flat_host(1, 2, 4096);
  g_autoptr(QpClaims) c = qp_claims_new();
  QpClaim *o2o = claim_add(c, "o2o");
  o2o->mode = QP_MODE_ONE_TO_ONE;
  hwloc_bitmap_set_range(o2o->dedicated, 0, 1);
  g_autoptr(QpRequest) r = request(2, 1024);
  g_autoptr(Opts) o = opts_new(QP_MODE_AUTO, NULL);
  g_autoptr(QpPlan) p = plan_ok(h, c, r, o);
  assert_vcpu(p, 0, "0-1");
  assert_vcpu(p, 1, "0-1");
  g_assert_true(hwloc_bitmap_iszero(p->dedicated));
  const char *want[] = {"every usable CPU is dedicated to a one-to-one VM, "
                        "so the vCPUs share those cores (0-1)",
                        NULL};
  assert_best_effort(p, 1, want);
  assert_explicit_modes_refuse(h, c, r);
}

/* Hybrid hosts: the CPUs of every kind count when no single kind holds the
 * vCPUs. */
static void
test_best_effort_kinds(void)
{
  g_autoptr(TestHost) h = hybrid(); /* 8 P CPUs, 12 E CPUs */
  g_autoptr(Opts) o = opts_new(QP_MODE_AUTO, NULL);
  g_autoptr(QpRequest) r = request(16, 4096);
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  assert_set(p->process_cpus, "0-19");
  assert_set(p->startup_cpus, "8-19"); /* the largest same-kind subset */
  const char *want[] = {"the vCPUs straddle CPU kinds", NULL};
  assert_best_effort(p, 1, want);
  g_assert_false(has_text(p->not_given, "per CPU"));

  g_autoptr(QpRequest) r2 = request(24, 4096);
  g_autoptr(QpPlan) p2 = plan_ok(h, NULL, r2, o);
  assert_set(p2->process_cpus, "0-19");
  const char *want2[] = {"24 vCPUs share 20 usable CPUs", "straddle", NULL};
  assert_best_effort(p2, 1, want2);
}

/* --device-locality=required keeps the VM on the devices' nodes, sharing
 * their CPUs. */
static void
test_best_effort_device_required(void)
{
  g_autoptr(TestHost) h = intel_2s();
  add_pci(h, "0000:af:00.0", 1);
  g_autoptr(QpRequest) r = request(20, 4096);
  r->vfio = g_new0(char *, 2);
  r->vfio[0] = g_strdup("0000:af:00.0");
  g_autoptr(Opts) o = opts_new(QP_MODE_AUTO, NULL);
  o->o.device_locality = QP_DEVLOC_REQUIRED;
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  assert_set(p->process_cpus, "8-15,24-31");
  assert_set(p->mem_nodes, "1");
  const char *want[] = {"20 vCPUs share 16 usable CPUs on host node 1", NULL};
  assert_best_effort(p, 1, want);
}

/* Memory that does not fit is refused in every mode, auto included, also
 * when the CPUs do not fit either; options that leave no CPU at all too. */
static void
test_best_effort_memory_refused(void)
{
  g_autoptr(TestHost) h = flat_host(1, 2, 4096);
  const QpMode modes[] = {QP_MODE_AUTO, QP_MODE_BALANCED, QP_MODE_NUMA,
                          QP_MODE_ONE_TO_ONE};
  for (gsize m = 0; m < G_N_ELEMENTS(modes); m++) {
    g_autoptr(Opts) o = opts_new(modes[m], NULL);
    for (guint vcpus = 1; vcpus <= 8; vcpus *= 8) {
      g_autoptr(QpRequest) r = request(vcpus, 8192);
      g_autoptr(GError) error = NULL;
      g_autoptr(QpPlan) p = qp_plan_compute(h, NULL, r, &o->o, &error);
      g_assert_null(p);
      if (modes[m] == QP_MODE_AUTO || vcpus == 1)
        assert_nofit(error, "guest needs 8192 MiB but the best node 0 has "
                            "only 4096 MiB uncommitted");
    }
  }
  /* A guest node that fits no node, in auto. */
  g_autoptr(QpRequest) r = request(8, 6144);
  request_vnuma(r, 2, 4, 3072);
  g_autoptr(Opts) o = opts_new(QP_MODE_AUTO, NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(QpPlan) p = qp_plan_compute(h, NULL, r, &o->o, &error);
  g_assert_null(p);
  assert_nofit(error, "guest node 1 needs 3072 MiB but the best node 0 has "
                      "only 1024 MiB uncommitted");

  /* --affinity outside the host leaves no CPU: its own bad option. */
  g_autoptr(QpRequest) r2 = request(8, 1024);
  g_autoptr(Opts) o2 = opts_new(QP_MODE_AUTO, "4000");
  plan_refused(h, NULL, r2, o2,
               "no CPU may run the guest's 8 vCPUs in affinity 4000 (none of "
               "this host's CPUs 0-1)");

  /* --hostnodes naming none of the host's nodes: the refusal names it and
   * the host's nodes, in every mode. */
  g_autoptr(TestHost) h4 = flat_host(4, 2, 4096);
  for (gsize m = 0; m < G_N_ELEMENTS(modes); m++) {
    g_autoptr(Opts) o3 = opts_new(modes[m], NULL);
    o3->o.hostnodes = hwloc_bitmap_alloc();
    hwloc_bitmap_set_range(o3->o.hostnodes, 5, 6);
    g_autoptr(QpRequest) r3 = request(2, 1024);
    plan_refused(h4, NULL, r3, o3,
                 "on host nodes (none: --hostnodes 5-6 names none of this "
                 "host's nodes 0-3)");
  }
  /* No CPU for a reason the caller did not give as an option: the
   * refusal does not blame --affinity or --hostnodes. Every node held
   * whole by unreadable ledger records: the scope says so. */
  g_autoptr(TestHost) h2 = flat_host(2, 2, 4096);
  g_autoptr(QpClaims) blocked = qp_claims_new();
  hwloc_bitmap_set_range(blocked->blocked_nodes, 0, 1);
  g_autoptr(QpRequest) r5 = request(1, 1024);
  g_autoptr(Opts) o5 = opts_new(QP_MODE_AUTO, NULL);
  g_autoptr(GError) e5 = NULL;
  g_autoptr(QpPlan) p5 = qp_plan_compute(h2, blocked, r5, &o5->o, &e5);
  g_assert_null(p5);
  assert_nofit(e5, "no CPU may run the guest's 1 vCPU on host nodes (none) "
                   "(nodes 0-1 are held whole by unreadable ledger records "
                   "until an operator removes them)");
  g_assert_null(strstr(e5->message, "--affinity"));
  /* A cpuset whose CPUs are on node 1 and memory on node 0: the CPUs this
   * process may run on are named. */
  g_autoptr(TestHost) h3 = flat_host(2, 2, 4096);
  g_auto(hwloc_bitmap_t) node1 = hwloc_bitmap_alloc();
  hwloc_bitmap_set_range(node1, 2, 3);
  qp_host_set_allowed(h3, node1);
  h3->allowed_nodes = hwloc_bitmap_alloc();
  hwloc_bitmap_set(h3->allowed_nodes, 0);
  g_autoptr(QpRequest) r6 = request(2, 1024);
  g_autoptr(Opts) o6 = opts_new(QP_MODE_AUTO, NULL);
  plan_refused(h3, NULL, r6, o6,
               "no CPU may run the guest's 2 vCPUs on host nodes 0: this "
               "process may run only on CPUs 2-3 (its CPU affinity and "
               "cpuset, less the host's isolated CPUs)");

  /* Some of them the host's: those are used, as without the others. */
  g_autoptr(Opts) o4 = opts_new(QP_MODE_BALANCED, NULL);
  o4->o.hostnodes = hwloc_bitmap_alloc();
  hwloc_bitmap_set(o4->o.hostnodes, 2);
  hwloc_bitmap_set(o4->o.hostnodes, 7);
  g_autoptr(QpRequest) r4 = request(2, 1024);
  g_autoptr(QpPlan) p4 = plan_ok(h4, NULL, r4, o4);
  assert_set(p4->mem_nodes, "2");
}

/* Hot-pluggable vCPUs: the boot vCPUs share the CPUs, those plugged later
 * join them; the load counts the boot vCPUs, one warning. */
static void
test_best_effort_hotplug(void)
{
  g_autoptr(TestHost) h = flat_host(1, 2, 4096);
  g_autoptr(QpRequest) r = request(4, 1024);
  r->maxcpus = 8;
  g_autoptr(Opts) o = opts_new(QP_MODE_AUTO, NULL);
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  g_assert_cmpuint(p->n_boot_vcpus, ==, 4);
  assert_vcpu(p, 7, "0-1");
  g_assert_cmpuint(load_on(p, 0), ==, 4);
  const char *want[] = {"4 vCPUs share 2 usable CPUs", NULL};
  assert_best_effort(p, 1, want);
}

/* Mode numa with hot-pluggable vCPUs beyond the host's room: planned for
 * the boot vCPUs, the rest sharing theirs, in one warning whose numbers
 * read right for one vCPU as for several. */
static void
test_numa_room_for_boot_vcpus(void)
{
  static const struct {
    guint cpus, boot, max;
    const char *head, *tail;
  } rows[] = {
      {2, 1, 3, "room for the 1 boot vCPU only (",
       "): vCPUs 1-2, if plugged, share the CPUs of their guest node's boot "
       "vCPUs"},
      {1, 1, 2, "room for the 1 boot vCPU only (",
       "): vCPU 1, if plugged, shares the CPUs of its guest node's boot "
       "vCPUs"},
      {2, 2, 4, "room for the 2 boot vCPUs only (",
       "): vCPUs 2-3, if plugged, share the CPUs of their guest node's boot "
       "vCPUs"},
  };
  for (gsize i = 0; i < G_N_ELEMENTS(rows); i++) {
    g_autoptr(TestHost) h = flat_host(1, rows[i].cpus, 4096);
    g_autoptr(QpRequest) r = request(rows[i].boot, 1024);
    r->maxcpus = rows[i].max;
    g_autoptr(Opts) o = opts_new(QP_MODE_NUMA, NULL);
    g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
    g_assert_cmpuint(p->warnings->len, ==, 1);
    const char *line = g_ptr_array_index(p->warnings, 0);
    g_test_message("%s", line);
    g_assert_true(g_str_has_prefix(line, rows[i].head));
    g_assert_true(g_str_has_suffix(line, rows[i].tail));
  }
}

/* The ledger records the load a best-effort VM adds, per CPU set, and a
 * later auto VM puts its guest nodes on the less loaded node. */
static void
test_best_effort_sees_load(void)
{
  g_autoptr(TestHost) h = flat_host(2, 2, 8192);
  g_autoptr(QpClaims) c = qp_claims_new();
  /* First VM: 6 vCPUs inside --hostnodes=0. */
  g_autoptr(QpRequest) r1 = request(6, 1024);
  g_autoptr(Opts) o1 = opts_new(QP_MODE_AUTO, NULL);
  o1->o.hostnodes = list("0");
  g_autoptr(QpPlan) p1 = plan_ok(h, c, r1, o1);
  g_assert_true(p1->best_effort);
  QpClaim *first = qp_claim_from_plan(p1, "first", "first");
  g_assert_true(first->best_effort);
  g_assert_cmpuint(first->cpu_load->len, ==, 1);
  assert_set(g_array_index(first->cpu_load, QpCpuLoad, 0).cpus, "0-1");
  g_assert_cmpuint(g_array_index(first->cpu_load, QpCpuLoad, 0).vcpus, ==, 6);
  g_ptr_array_add(c->claims, first);
  /* Another VM holds as much memory on node 1, so that only the load tells
   * the nodes apart. */
  claim_mem(claim_add(c, "memory"), 1, claimed_on(p1, 0));
  g_autofree double *load = qp_claims_cpu_load(h, c);
  g_assert_cmpfloat(load[0], ==, 3.0);
  g_assert_cmpfloat(load[1], ==, 3.0);
  g_assert_cmpfloat(load[2], ==, 0.0);

  /* Second VM: 3 guest nodes of 2 vCPUs on the 4 CPUs; two of them go to
   * the node the first VM does not load. */
  g_autoptr(QpRequest) r2 = request(6, 3072);
  request_vnuma(r2, 3, 2, 1024);
  g_autoptr(Opts) o2 = opts_new(QP_MODE_AUTO, NULL);
  g_autoptr(QpPlan) p2 = plan_ok(h, c, r2, o2);
  guint on1 = 0;
  for (guint m = 0; m < p2->n_mem; m++)
    on1 += hwloc_bitmap_isset(p2->mem[m].host_nodes, 1);
  g_assert_cmpuint(on1, ==, 2);
  assert_set(p2->mem[0].host_nodes, "1");
}

/* Shared load per CPU: from a record's CPU sets, or spread over the node's
 * CPUs that are not dedicated when the record predates CPU sets. */
static void
test_best_effort_cpu_load(void)
{
  g_autoptr(TestHost) h = flat_host(2, 4, 8192);
  g_autoptr(QpClaims) c = qp_claims_new();
  QpClaim *old = claim_add(c, "old");
  QpNodeLoad l = {.node = 0, .vcpus = 3};
  g_array_append_val(old->load, l);
  QpClaim *o2o = claim_add(c, "o2o");
  hwloc_bitmap_set(o2o->dedicated, 0);
  QpClaim *sets = claim_add(c, "sets");
  QpNodeLoad l1 = {.node = 1, .vcpus = 4};
  g_array_append_val(sets->load, l1);
  QpCpuLoad cl = {list("6-7"), 4};
  g_array_append_val(sets->cpu_load, cl);
  g_autofree double *load = qp_claims_cpu_load(h, c);
  const double want[] = {0, 1, 1, 1, 0, 0, 2, 2};
  for (guint i = 0; i < 8; i++)
    g_assert_cmpfloat(load[i], ==, want[i]);
}

/* Best effort on recorded hosts: this machine (2 CPUs, one node), the
 * cgroup subset and the seed's EPYC. */
static void
test_recorded_best_effort(void)
{
  g_autoptr(Opts) o = opts_new(QP_MODE_AUTO, NULL);
  g_autoptr(QpHost) me = recorded("this-machine.xml");
  g_autoptr(QpRequest) r = request(8, 512);
  g_autoptr(QpPlan) p = plan_ok(me, NULL, r, o);
  for (guint v = 0; v < 8; v++)
    assert_vcpu(p, v, "0-1");
  const char *want[] = {"8 vCPUs share 2 usable CPUs", NULL};
  assert_best_effort(p, 1, want);
  g_autoptr(QpRequest) r2 = request(8, 512);
  request_vnuma(r2, 2, 4, 256);
  g_autoptr(QpPlan) p2 = plan_ok(me, NULL, r2, o);
  assert_set(p2->mem[0].host_nodes, "0");
  assert_set(p2->mem[1].host_nodes, "0");
  const char *want2[] = {"guest nodes 0-1 share host node 0", NULL};
  assert_best_effort(p2, 1, want2);

  /* The cgroup allows 0-5,16-19: never anything else. */
  g_autoptr(QpHost) cg = recorded("cgroup-subset.xml");
  g_autoptr(QpRequest) r3 = request(12, 4096);
  g_autoptr(QpPlan) p3 = plan_ok(cg, NULL, r3, o);
  assert_set(p3->process_cpus, "0-5,16-19");
  const char *want3[] = {"12 vCPUs share 10 usable CPUs", NULL};
  assert_best_effort(p3, 1, want3);

  /* 4 guest nodes of 10 vCPUs on the EPYC's 4 nodes of 8 CPUs: each guest
   * node's share is exactly its own host node. */
  g_autoptr(QpHost) epyc_rec = recorded("epyc-7351p.xml");
  g_autoptr(QpRequest) r4 = request(40, 8192);
  request_vnuma(r4, 4, 10, 2048);
  g_autoptr(QpPlan) p4 = plan_ok(epyc_rec, NULL, r4, o);
  for (guint g = 0; g < 4; g++) {
    g_autofree char *cpus = g_strdup_printf("%u-%u,%u-%u", 4 * g, 4 * g + 3,
                                            16 + 4 * g, 16 + 4 * g + 3);
    g_autofree char *node = g_strdup_printf("%u", g);
    assert_vcpu(p4, 10 * g, cpus);
    assert_vcpu(p4, 10 * g + 9, cpus);
    assert_set(p4->mem[g].host_nodes, node);
    g_assert_cmpuint(load_on(p4, (int)g), ==, 10);
  }
  const char *want4[] = {"40 vCPUs share 32 usable CPUs (1.25 per CPU)", NULL};
  assert_best_effort(p4, 1, want4);
  g_assert_cmpuint(p4->not_given->len, ==, 1);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/plan/best-effort/one-node-overcommit",
                  test_best_effort_one_node);
  g_test_add_func("/plan/best-effort/vnuma-on-one-node",
                  test_best_effort_vnuma_one_node);
  g_test_add_func("/plan/best-effort/every-usable-cpu",
                  test_best_effort_every_cpu);
  g_test_add_func("/plan/best-effort/more-nodes-before-sharing",
                  test_best_effort_more_nodes);
  g_test_add_func("/plan/best-effort/even-share-of-cpus",
                  test_best_effort_even_share);
  g_test_add_func("/plan/best-effort/never-others-dedicated-cores",
                  test_best_effort_dedicated);
  g_test_add_func("/plan/best-effort/all-cpus-dedicated",
                  test_best_effort_all_dedicated);
  g_test_add_func("/plan/best-effort/cpu-kinds", test_best_effort_kinds);
  g_test_add_func("/plan/best-effort/device-locality-required",
                  test_best_effort_device_required);
  g_test_add_func("/plan/best-effort/memory-still-refused",
                  test_best_effort_memory_refused);
  g_test_add_func("/plan/best-effort/hotplug", test_best_effort_hotplug);
  g_test_add_func("/plan/best-effort/later-vm-sees-load",
                  test_best_effort_sees_load);
  g_test_add_func("/plan/best-effort/cpu-load-per-cpu",
                  test_best_effort_cpu_load);
  g_test_add_func("/plan/recorded/best-effort", test_recorded_best_effort);
  g_test_add_func("/plan/numa/room-for-boot-vcpus-only",
                  test_numa_room_for_boot_vcpus);
  return g_test_run();
}
