/* The simulator's baseline placers on small hosts worked out by hand. */
#include <glib.h>
#include <string.h>

#include "bench/sim-baselines.h"

/* A host of N nodes with CPUS CPUs each and the given free memory. */
static SimState *
host(guint n, guint cpus, const guint64 *free_mib)
{
  SimState *s = sim_state_new(n);
  for (guint i = 0; i < n; i++) {
    s->cpus[i] = cpus;
    s->total_mib[i] = 16384;
    s->free_mib[i] = free_mib[i];
  }
  return s;
}

static char *
place(const SimState *s, SimBaseline b, guint vcpus, guint64 mib)
{
  SimVm vm = {vcpus, mib};
  guint nodes[16], k = 0;
  if (!sim_baseline_place(s, &vm, b, nodes, &k))
    return g_strdup("refused");
  GString *out = g_string_new("");
  for (guint j = 0; j < k; j++)
    g_string_append_printf(out, "%s%u", j ? "," : "", nodes[j]);
  return g_string_free(out, FALSE);
}

#define assert_place(s, b, vcpus, mib, expect)                                 \
  do {                                                                         \
    g_autofree char *got_ = place(s, b, vcpus, mib);                           \
    g_assert_cmpstr(got_, ==, expect);                                         \
  } while (0)

static void
test_first_fit_lowest_node_with_room(void)
{
  const guint64 f[] = {4096, 8192, 8192};
  g_autoptr(SimState) s = host(3, 4, f);
  /* Node 0 lacks memory; 1 is the lowest with room. */
  assert_place(s, SIM_FIRST_FIT, 2, 6144, "1");
  assert_place(s, SIM_FIRST_FIT, 2, 4096, "0");
}

static void
test_first_fit_spans_lowest_ids(void)
{
  const guint64 f[] = {4096, 8192, 8192};
  g_autoptr(SimState) s = host(3, 4, f);
  /* 5 vCPUs need two 4-CPU nodes: the lowest ids. */
  assert_place(s, SIM_FIRST_FIT, 5, 2048, "0,1");
  /* 14 GiB: 4 + 8 GiB on nodes 0 and 1 do not hold it, 0-2 do. */
  assert_place(s, SIM_FIRST_FIT, 2, 14336, "0,1,2");
  assert_place(s, SIM_FIRST_FIT, 2, 30000, "refused");
}

static void
test_incus_fewest_instances(void)
{
  const guint64 f[] = {8192, 8192, 8192};
  g_autoptr(SimState) s = host(3, 4, f);
  s->instances[0] = 2;
  s->instances[1] = 0;
  s->instances[2] = 1;
  assert_place(s, SIM_INCUS, 2, 4096, "1");
  /* ceil(6 / 4) = 2 nodes: the two with the fewest instances. */
  assert_place(s, SIM_INCUS, 6, 4096, "1,2");
  /* Ties go to the lowest id. */
  s->instances[2] = 0;
  assert_place(s, SIM_INCUS, 2, 4096, "1");
}

static void
test_incus_ignores_memory(void)
{
  const guint64 f[] = {1024, 8192, 8192};
  g_autoptr(SimState) s = host(3, 4, f);
  s->instances[1] = s->instances[2] = 1;
  /* Node 0 has the fewest instances but 1 GiB left: Incus still picks it,
   * and the 4 GiB guest does not fit there. */
  assert_place(s, SIM_INCUS, 2, 4096, "refused");
  assert_place(s, SIM_INCUS, 2, 1024, "0");
}

static void
test_xen_fewest_nodes_then_vcpus_then_memory(void)
{
  const guint64 f[] = {8192, 6144, 6144, 16384};
  g_autoptr(SimState) s = host(4, 4, f);
  s->vcpus[0] = 4;
  s->vcpus[1] = 0;
  s->vcpus[2] = 2;
  s->vcpus[3] = 8;
  /* Every node holds 6 GiB: node 1 has the fewest vCPUs. */
  assert_place(s, SIM_XEN, 2, 6144, "1");
  /* Only nodes 0 and 3 hold 8 GiB: 0 has fewer vCPUs. */
  assert_place(s, SIM_XEN, 2, 8192, "0");
  /* Same vCPUs everywhere: the most free memory wins. */
  memset(s->vcpus, 0, 4 * sizeof(guint));
  assert_place(s, SIM_XEN, 2, 2048, "3");
}

static void
test_xen_pairs_when_no_node_fits(void)
{
  const guint64 f[] = {8192, 6144, 6144, 8192};
  g_autoptr(SimState) s = host(4, 4, f);
  s->vcpus[0] = 4;
  s->vcpus[1] = 0;
  s->vcpus[2] = 2;
  s->vcpus[3] = 8;
  /* 10 GiB: no node alone; of the pairs, {1,2} has the fewest vCPUs (2)
   * and holds 12 GiB. */
  assert_place(s, SIM_XEN, 2, 10240, "1,2");
  /* 16 GiB: pairs holding it are {0,3} only (16 GiB). */
  assert_place(s, SIM_XEN, 2, 16384, "0,3");
  /* 6 vCPUs on 4-CPU nodes: pairs; {1,2} again. */
  assert_place(s, SIM_XEN, 6, 1024, "1,2");
}

static void
test_proxmox_most_uncommitted_memory(void)
{
  const guint64 f[] = {8192, 16384, 12288};
  g_autoptr(SimState) s = host(3, 4, f);
  assert_place(s, SIM_PROXMOX, 2, 4096, "1");
  /* 20000 MiB: node 1 then node 2 by uncommitted memory. */
  assert_place(s, SIM_PROXMOX, 2, 20000, "1,2");
  /* 5 vCPUs: the two nodes with the most memory. */
  assert_place(s, SIM_PROXMOX, 5, 1024, "1,2");
  assert_place(s, SIM_PROXMOX, 2, 40000, "refused");
}

static void
test_split_and_commit(void)
{
  const guint64 f[] = {1000, 5000};
  g_autoptr(SimState) s = host(2, 4, f);
  SimVm vm = {4, 4001};
  guint nodes[] = {0, 1};
  guint64 amounts[2];
  /* Shares 2001 + 2000; node 0 holds only 1000, node 1 takes the rest. */
  sim_split(s, &vm, nodes, 2, amounts);
  g_assert_cmpuint(amounts[0], ==, 1000);
  g_assert_cmpuint(amounts[1], ==, 3001);
  sim_commit(s, &vm, nodes, 2, amounts);
  g_assert_cmpuint(s->free_mib[0], ==, 0);
  g_assert_cmpuint(s->free_mib[1], ==, 1999);
  g_assert_cmpuint(s->vcpus[0], ==, 4);
  g_assert_cmpuint(s->vcpus[1], ==, 4);
  g_assert_cmpuint(s->instances[0], ==, 1);
  g_assert_cmpuint(s->instances[1], ==, 1);
}

static void
test_storm_on_three_nodes(void)
{
  /* Three 8 GiB nodes, VMs of 6, 4, 4 and 6 GiB with 2 vCPUs each, worked
   * out by hand for every placer. */
  const guint64 f[] = {8192, 8192, 8192};
  const guint64 sizes[] = {6144, 4096, 4096, 6144};
  struct {
    SimBaseline b;
    const char *expect;
  } cases[] = {
      /* 6->0 (2 left), 4->1 (4 left), 4->1 (0 left), 6->2. */
      {SIM_FIRST_FIT, "0;1;1;2"},
      /* 6->0, 4->1 (fewest: 1,2 tie -> 1), 4->2, 6: fewest instances all
       * 1 -> node 0 with 2 GiB left: refused. */
      {SIM_INCUS, "0;1;2;refused"},
      /* 6->0 (ties -> most free: all equal, lowest), 4->1 (vCPUs 0, free
       * 8 GiB beats node 2's? equal -> lowest), 4->2 (vCPUs 0), 6: no node
       * holds 6 GiB (2, 4, 4 left): pairs holding it with fewest vCPUs:
       * {1,2} (4) holds 8 GiB. */
      {SIM_XEN, "0;1;2;1,2"},
      /* 6->0, 4->1 (8 > 2; 1 before 2), 4->2, 6: 4 (node 1) + 4 (node 2). */
      {SIM_PROXMOX, "0;1;2;1,2"},
  };
  for (guint c = 0; c < G_N_ELEMENTS(cases); c++) {
    g_autoptr(SimState) s = host(3, 4, f);
    GString *got = g_string_new("");
    for (guint v = 0; v < G_N_ELEMENTS(sizes); v++) {
      SimVm vm = {2, sizes[v]};
      guint nodes[3], k = 0;
      guint64 amounts[3];
      if (v > 0)
        g_string_append_c(got, ';');
      if (!sim_baseline_place(s, &vm, cases[c].b, nodes, &k)) {
        g_string_append(got, "refused");
        continue;
      }
      for (guint j = 0; j < k; j++)
        g_string_append_printf(got, "%s%u", j ? "," : "", nodes[j]);
      sim_split(s, &vm, nodes, k, amounts);
      sim_commit(s, &vm, nodes, k, amounts);
    }
    g_autofree char *str = g_string_free(got, FALSE);
    g_test_message("%s: %s", sim_baseline_name(cases[c].b), str);
    g_assert_cmpstr(str, ==, cases[c].expect);
  }
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/sim/first-fit/lowest-node-with-room",
                  test_first_fit_lowest_node_with_room);
  g_test_add_func("/sim/first-fit/spans-lowest-ids",
                  test_first_fit_spans_lowest_ids);
  g_test_add_func("/sim/incus/fewest-instances", test_incus_fewest_instances);
  g_test_add_func("/sim/incus/ignores-memory", test_incus_ignores_memory);
  g_test_add_func("/sim/xen/fewest-nodes-then-vcpus-then-memory",
                  test_xen_fewest_nodes_then_vcpus_then_memory);
  g_test_add_func("/sim/xen/pairs-when-no-node-fits",
                  test_xen_pairs_when_no_node_fits);
  g_test_add_func("/sim/proxmox/most-uncommitted-memory",
                  test_proxmox_most_uncommitted_memory);
  g_test_add_func("/sim/split-and-commit", test_split_and_commit);
  g_test_add_func("/sim/storm/three-nodes", test_storm_on_three_nodes);
  return g_test_run();
}
