/* The placement planner (topology/plan/) on hand-built hosts. Mode one-to-one:
 * a physical core per vCPU, SMT siblings last, per guest node with vNUMA (seed
 * 000). */
#include "tests/plan/plan-hosts.h"

#include <string.h>

/* Seed 000 configs 3_pinning_one_to_one_auto (seed measured: triad 53016
 * MB/s, read 60624 MB/s, latency 113.36 ns) and 5_pinning_one_to_one
 * (52362, 60387, 112.71) -- 3: ("same auto-assignment as 2,
 * but each vCPU is pinned to exactly one host core") and
 * 5_pinning_one_to_one (explicit hostnodes): vCPU 0 -> CPU 0, 1 -> 1,
 * 2 -> 4, 3 -> 5, 4 -> 8, 5 -> 9, 6 -> 12, 7 -> 13. The whole cores are
 * dedicated (with their siblings 16,17,20,21,...); memory is bound per guest
 * node because the guest has numa: 1. */
static void
check_seed_o2o(const QpHost *h, gboolean explicit_hostnodes)
{
  g_autoptr(QpRequest) r = seed_request(explicit_hostnodes);
  g_autoptr(Opts) o = opts_new(QP_MODE_ONE_TO_ONE, SEED_AFFINITY);
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  g_assert_cmpint(p->mode, ==, QP_MODE_ONE_TO_ONE);
  const char *cpu[] = {"0", "1", "4", "5", "8", "9", "12", "13"};
  for (guint v = 0; v < 8; v++)
    assert_vcpu(p, v, cpu[v]);
  assert_set(p->dedicated, "0-1,4-5,8-9,12-13,16-17,20-21,24-25,28-29");
  for (guint g = 0; g < 4; g++) {
    g_autofree char *k = g_strdup_printf("%u", g);
    assert_set(p->mem[g].host_nodes, k);
    g_assert_cmpint(p->mem[g].caller_set, ==, explicit_hostnodes);
    g_assert_cmpuint(claimed_on(p, (int)g), ==, 2048);
  }
  /* Every usable CPU is a vCPU's: the emulator shares the VM's CPUs. */
  assert_set(p->emulator_cpus, "0-1,4-5,8-9,12-13");
  assert_set(p->iothread_cpus, "0-1,4-5,8-9,12-13");
  assert_set(p->process_cpus, "0-1,4-5,8-9,12-13");
  g_assert_cmpuint(p->load->len, ==, 0);
  g_assert_cmpuint(p->warnings->len, ==, 0);
}

static void
test_seed_o2o_auto(void)
{
  g_autoptr(TestHost) h = epyc(NULL);
  check_seed_o2o(h, FALSE);
}

static void
test_seed_o2o_hostnodes(void)
{
  g_autoptr(TestHost) h = epyc(NULL);
  check_seed_o2o(h, TRUE);
}

/* ---- One-to-one and SMT ------------------------------------------------- */

static void
test_o2o_avoids_siblings(void)
{
  g_autoptr(TestHost) h = intel_2s();
  g_autoptr(QpRequest) r = request(4, 4096);
  g_autoptr(Opts) o = opts_new(QP_MODE_ONE_TO_ONE, NULL);
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  /* One PU per physical core, never two siblings; no vNUMA: no binding. */
  for (guint v = 0; v < 4; v++) {
    g_autofree char *c = g_strdup_printf("%u", v);
    assert_vcpu(p, v, c);
  }
  assert_set(p->dedicated, "0-3,16-19");
  /* The RAM is listed with its claim but not bound. */
  g_assert_cmpuint(p->n_mem, ==, 1);
  g_assert_null(p->mem[0].host_nodes);
  g_assert_null(p->mem_nodes);
  g_assert_cmpuint(claimed_on(p, 0), ==, 4096); /* claimed, not bound */
  /* Emulator off the dedicated cores, on the rest of node 0. */
  assert_set(p->emulator_cpus, "4-7,20-23");
  assert_set(p->process_cpus, "0-7,20-23");
  g_assert_cmpuint(p->warnings->len, ==, 0);
}

static void
test_o2o_threads2_pairs(void)
{
  g_autoptr(TestHost) h = intel_2s();
  g_autoptr(QpRequest) r = request(4, 4096);
  r->cores = 2;
  r->threads = 2;
  g_autoptr(Opts) o = opts_new(QP_MODE_ONE_TO_ONE, NULL);
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  /* vCPUs 2k and 2k+1 on the two PUs of one core. */
  assert_vcpu(p, 0, "0");
  assert_vcpu(p, 1, "16");
  assert_vcpu(p, 2, "1");
  assert_vcpu(p, 3, "17");
  assert_set(p->dedicated, "0-1,16-17");
  g_assert_true(has_text(p->reasons, "threads=2"));
}

/* No sibling pairs in the affinity: with --smt=prefer each vCPU gets a core
 * of its own (and a warning); with --smt=strict that is an error. */
static void
test_o2o_threads2_without_pairs(void)
{
  g_autoptr(TestHost) h = intel_2s();
  g_autoptr(QpRequest) r = request(4, 4096);
  r->cores = 2;
  r->threads = 2;
  g_autoptr(Opts) o = opts_new(QP_MODE_ONE_TO_ONE, "0-7");
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  for (guint v = 0; v < 4; v++) {
    g_autofree char *c = g_strdup_printf("%u", v);
    assert_vcpu(p, v, c);
  }
  g_assert_true(has_text(p->warnings, "the guest has threads=2 but too few "
                                      "free cores have 2 usable SMT "
                                      "siblings"));
  o->o.smt = QP_SMT_STRICT;
  g_autoptr(GError) error = NULL;
  g_autoptr(QpPlan) p2 = qp_plan_compute(h, NULL, r, &o->o, &error);
  g_assert_null(p2);
  assert_nofit(error, "one-to-one with threads=2 needs 2 free cores with 2 "
                      "usable SMT siblings but only 0 are free in affinity "
                      "0-7");
}

static void
test_o2o_strict_shortage(void)
{
  g_autoptr(TestHost) h = intel_2s();
  g_autoptr(QpRequest) r = request(8, 4096);
  g_autoptr(Opts) o = opts_new(QP_MODE_ONE_TO_ONE, "0-5,16-21");
  o->o.smt = QP_SMT_STRICT;
  g_autoptr(GError) error = NULL;
  g_autoptr(QpPlan) p = qp_plan_compute(h, NULL, r, &o->o, &error);
  g_assert_null(p);
  assert_nofit(error, "one-to-one needs 8 free cores but only 6 are free in "
                      "affinity 0-5,16-21");
  assert_nofit(error, "--smt=strict");
}

static void
test_o2o_prefer_siblings_last(void)
{
  g_autoptr(TestHost) h = intel_2s();
  g_autoptr(QpRequest) r = request(8, 4096);
  g_autoptr(Opts) o = opts_new(QP_MODE_ONE_TO_ONE, "0-5,16-21");
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  /* Six cores first, then the siblings of the first two. */
  const char *cpu[] = {"0", "1", "2", "3", "4", "5", "16", "17"};
  for (guint v = 0; v < 8; v++)
    assert_vcpu(p, v, cpu[v]);
  assert_set(p->dedicated, "0-5,16-21");
  g_assert_cmpuint(p->warnings->len, ==, 1);
  g_assert_true(has_text(p->warnings, "vCPUs 0-1,6-7 share physical cores"));
}

/* A guest with vNUMA whose nodes land on different sockets. */
static void
test_o2o_vnuma(void)
{
  g_autoptr(TestHost) h = intel_2s();
  g_autoptr(QpRequest) r = request(4, 4096);
  request_vnuma(r, 2, 2, 2048);
  g_autoptr(Opts) o = opts_new(QP_MODE_ONE_TO_ONE, NULL);
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  assert_vcpu(p, 0, "0");
  assert_vcpu(p, 1, "1");
  assert_vcpu(p, 2, "8");
  assert_vcpu(p, 3, "9");
  assert_set(p->mem[0].host_nodes, "0");
  assert_set(p->mem[1].host_nodes, "1");
  assert_set(p->emulator_cpus, "2-7,10-15,18-23,26-31");
}

/* Hotplug: the plan covers maxcpus, but only the boot vCPUs' cores are
 * dedicated; a vCPU plugged later takes one of the spare cores (the VM's
 * node first) when it comes, and until then shares the VM's CPUs. */
static void
test_maxcpus(void)
{
  g_autoptr(TestHost) h = intel_2s();
  g_autoptr(QpRequest) r = request(2, 1024);
  r->maxcpus = 4;
  g_autoptr(Opts) o = opts_new(QP_MODE_ONE_TO_ONE, NULL);
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  g_assert_cmpuint(p->n_vcpus, ==, 4);
  g_assert_cmpuint(p->n_boot_vcpus, ==, 2);
  assert_vcpu(p, 0, "0");
  assert_vcpu(p, 1, "1");
  assert_vcpu(p, 3, "0-1");
  assert_set(p->dedicated, "0-1,16-17");
  g_assert_nonnull(p->hotplug_cores);
  /* The 6 other cores of node 0, then the 8 of node 1. */
  g_assert_cmpuint(p->hotplug_cores->len, ==, 6 + 8);
  assert_set(g_ptr_array_index(p->hotplug_cores, 0), "2,18");
  assert_set(g_ptr_array_index(p->hotplug_cores, 6), "8,24");
}

/* A vCPU plugged with -device at start in a later slot (-smp 1,maxcpus=4
 * and one in the slot of vCPU 3: cpu-indexes 0 and 3 run from the start)
 * gets a core of its own as vCPU 0 does; the hole (1-2) is what may be
 * plugged later, and shares the VM's cores until then. */
static void
test_boot_after_hole(void)
{
  g_autoptr(TestHost) h = intel_2s();
  g_autoptr(QpRequest) r = request(2, 1024);
  r->maxcpus = 4;
  r->boot = list("0,3");
  g_autoptr(Opts) o = opts_new(QP_MODE_ONE_TO_ONE, NULL);
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  g_assert_cmpuint(p->n_vcpus, ==, 4);
  g_assert_cmpuint(p->n_boot_vcpus, ==, 2);
  assert_vcpu(p, 0, "0");
  assert_vcpu(p, 3, "1");
  assert_vcpu(p, 1, "0-1");
  assert_vcpu(p, 2, "0-1");
  assert_set(p->boot_vcpus, "0,3");
  g_assert_true(qp_plan_vcpu_boots(p, 3));
  g_assert_false(qp_plan_vcpu_boots(p, 1));
  assert_set(p->dedicated, "0-1,16-17");
  g_assert_true(p->pause);
  g_assert_true(has_text(p->reasons, "vCPUs 0,3 -> CPUs 0-1 on host node 0"));
  g_assert_true(has_text(p->reasons, "vCPUs 1-2 are hot-pluggable"));
}

static void
test_recorded_seed(void)
{
  check_recorded_seed(check_seed_o2o);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/plan/seed/one-to-one-auto", test_seed_o2o_auto);
  g_test_add_func("/plan/seed/one-to-one-hostnodes", test_seed_o2o_hostnodes);
  g_test_add_func("/plan/one-to-one/avoids-smt-siblings",
                  test_o2o_avoids_siblings);
  g_test_add_func("/plan/one-to-one/threads2-gets-sibling-pairs",
                  test_o2o_threads2_pairs);
  g_test_add_func("/plan/one-to-one/threads2-without-host-pairs",
                  test_o2o_threads2_without_pairs);
  g_test_add_func("/plan/one-to-one/strict-shortage-is-an-error",
                  test_o2o_strict_shortage);
  g_test_add_func("/plan/one-to-one/prefer-uses-siblings-last",
                  test_o2o_prefer_siblings_last);
  g_test_add_func("/plan/one-to-one/follows-vnuma", test_o2o_vnuma);
  g_test_add_func("/plan/one-to-one/covers-maxcpus", test_maxcpus);
  g_test_add_func("/plan/one-to-one/boot-vcpu-after-hole",
                  test_boot_after_hole);
  g_test_add_func("/plan/recorded/epyc-7351p-seed/one-to-one",
                  test_recorded_seed);
  return g_test_run();
}
