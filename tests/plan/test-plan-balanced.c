/* The placement planner (topology/plan/) on hand-built hosts. Mode balanced:
 * the fewest nodes that hold the VM, the vCPUs floating over their CPUs (seed
 * 000). */
#include "tests/plan/plan-hosts.h"

#include <string.h>

/* Seed 000 config 1_pinning_balanced (seed measured: STREAM triad 44506
 * MB/s, sc-membench read 33669 MB/s, latency 168.22 ns, against 40862 /
 * 38295 / 117.74 unpinned): "allocator auto-selects host NUMA
 * nodes by uncommitted memory, binds guest memory to them with policy=bind,
 * confines the QEMU process to the selected nodes' CPUs. individual vCPU
 * threads are NOT pinned." The seed's v2 chose by memory alone and put the
 * 8 vCPUs of an 8 GiB guest on one node (its 2 allowed CPUs), which lost
 * bandwidth against no pinning. Here a VM never overcommits itself: 8 vCPUs
 * need 8 usable CPUs and every node has 2 in the affinity, so the fewest
 * nodes holding both memory and CPUs are all four. */
static void
check_seed_balanced(const QpHost *h, gboolean explicit_hostnodes)
{
  g_autoptr(QpRequest) r = seed_request(explicit_hostnodes);
  g_autoptr(Opts) o = opts_new(QP_MODE_BALANCED, SEED_AFFINITY);
  g_autoptr(QpPlan) p = plan_ok(h, NULL, r, o);
  g_assert_cmpint(p->mode, ==, QP_MODE_BALANCED);
  assert_set(p->process_cpus, "0-1,4-5,8-9,12-13");
  for (guint v = 0; v < 8; v++)
    assert_vcpu(p, v, "0-1,4-5,8-9,12-13"); /* vCPUs float */
  assert_set(p->emulator_cpus, "0-1,4-5,8-9,12-13");
  assert_set(p->startup_cpus, "0-1,4-5,8-9,12-13");
  g_assert_true(hwloc_bitmap_iszero(p->dedicated));
  g_assert_cmpuint(p->n_mem, ==, 4);
  for (guint g = 0; g < 4; g++) {
    g_assert_cmpint(p->mem[g].gnode, ==, (int)g);
    g_assert_cmpuint(p->mem[g].mem_mib, ==, 2048);
    g_assert_cmpint(p->mem[g].policy, ==, QP_POLICY_BIND);
    g_assert_cmpint(p->mem[g].caller_set, ==, explicit_hostnodes);
    g_autofree char *memdev = g_strdup_printf("ram-node%u", g);
    g_assert_cmpstr(p->mem[g].memdev, ==, memdev);
    if (explicit_hostnodes) {
      g_autofree char *k = g_strdup_printf("%u", g);
      assert_set(p->mem[g].host_nodes, k);
    } else {
      assert_set(p->mem[g].host_nodes, "0-3");
    }
  }
  assert_set(p->mem_nodes, "0-3");
  g_assert_cmpint(p->mem_policy, ==, QP_POLICY_BIND);
  /* Each guest node's 2048 MiB split evenly over 0-3 (or on its own node):
   * 2048 MiB per host node either way; 8 floating vCPUs, 2 per node. */
  for (int n = 0; n < 4; n++) {
    g_assert_cmpuint(claimed_on(p, n), ==, 2048);
    g_assert_cmpuint(load_on(p, n), ==, 2);
  }
  assert_set(p->host_nodes, "0-3");
  g_assert_true(has_text(p->reasons, "no single node holds the guest: the "
                                     "most usable CPUs on one node are 2"));
}

static void
test_seed_balanced(void)
{
  g_autoptr(TestHost) h = epyc(NULL);
  check_seed_balanced(h, FALSE);
}

static void
test_seed_balanced_hostnodes(void)
{
  g_autoptr(TestHost) h = epyc(NULL);
  check_seed_balanced(h, TRUE);
}

static void
test_recorded_seed(void)
{
  check_recorded_seed(check_seed_balanced);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/plan/seed/balanced", test_seed_balanced);
  g_test_add_func("/plan/seed/balanced-hostnodes",
                  test_seed_balanced_hostnodes);
  g_test_add_func("/plan/recorded/epyc-7351p-seed/balanced",
                  test_recorded_seed);
  return g_test_run();
}
