/* The caller's own placement (launcher/caller-pinning.c): telling the
 * caller's pinning from a reset, remembering it across looks, the claim that
 * follows it, and the cheap look for moved threads on real threads. */
#include "launcher/keeper/caller-pinning.h"
#include "launcher/affinity.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static hwloc_bitmap_t
set_of(const char *text)
{
  hwloc_bitmap_t set = NULL;
  if (*text == '\0')
    return hwloc_bitmap_alloc();
  g_assert_true(qp_list_parse(text, "test", QP_LIST_MAX_INDEX, &set, NULL));
  return set;
}

static void
assert_set(hwloc_const_bitmap_t set, const char *want)
{
  g_assert_nonnull(set);
  g_autofree char *have = qp_list_format(set);
  g_assert_cmpstr(have, ==, want);
}

typedef struct {
  const char *name;
  const char *have, *want, *usable;
  const char *inherited; /* NULL: none (a thread seen before) */
  const char *beyond;    /* NULL: none (started on every usable CPU) */
  QpPinVerdict verdict;
} JudgeCase;

static const JudgeCase judge_cases[] = {
    {"planned", "0", "0", "0-1", NULL, NULL, QP_PIN_PLANNED},
    /* libvirt without <vcpupin>: every online CPU. */
    {"reset-to-every-usable-cpu", "0-1", "0", "0-1", NULL, NULL, QP_PIN_RESET},
    /* Online CPUs beyond the usable ones (isolated, or outside --affinity)
     * are still a reset. */
    {"reset-wider-than-usable", "0-7", "2", "2-3", NULL, NULL, QP_PIN_RESET},
    /* <vcpupin vcpu='0' cpuset='1'> where the plan says 0: the caller's,
     * though it is another vCPU's planned CPU. */
    {"caller-narrower", "1", "0", "0-1", NULL, NULL, QP_PIN_CALLER},
    {"caller-partly-outside-usable", "1,4", "0", "0-3", NULL, NULL,
     QP_PIN_CALLER},
    /* A thread seen for the first time with the startup CPUs it inherited
     * from the main thread is not the caller's ... */
    {"inherited-on-first-sight", "0-3", "0", "0-7", "0-3", NULL, QP_PIN_RESET},
    /* ... but the same set on a thread seen before is. */
    {"same-set-seen-before", "0-3", "0", "0-7", NULL, NULL, QP_PIN_CALLER},
    /* Started on <emulatorpin cpuset='1'> (usable 1), then set by libvirt
     * to every online CPU: the vCPU floats there, as with QEMU alone. */
    {"beyond-start-affinity", "0-1", "1", "1", NULL, "0", QP_PIN_CALLER},
    /* Started on <vcpu cpuset='1'>, reset by libvirt to that cpuset. */
    {"reset-to-start-affinity", "2-3", "2", "2-3", NULL, "0-1", QP_PIN_RESET},
    /* `virsh vcpupin` beyond that cpuset: the caller's. */
    {"pinned-beyond-start-affinity", "0-3", "2", "2-3", NULL, "0-1",
     QP_PIN_CALLER},
    /* Wider only where something else keeps the VM out (isolated CPUs,
     * outside --affinity): still a reset. */
    {"reset-wider-not-beyond", "2-7", "2", "2-3", NULL, "0-1", QP_PIN_RESET},
};

static void
test_judge(gconstpointer data)
{
  const JudgeCase *c = data;
  g_auto(hwloc_bitmap_t) have = set_of(c->have);
  g_auto(hwloc_bitmap_t) want = set_of(c->want);
  g_auto(hwloc_bitmap_t) usable = set_of(c->usable);
  g_auto(hwloc_bitmap_t) inh = c->inherited ? set_of(c->inherited) : NULL;
  g_auto(hwloc_bitmap_t) beyond = c->beyond ? set_of(c->beyond) : NULL;
  hwloc_const_bitmap_t inherited[] = {inh};
  g_assert_cmpint(qp_caller_judge(have, want, usable, beyond, inherited,
                                  inh != NULL ? 1 : 0),
                  ==, c->verdict);
}

/* Looks at the threads of a VM with 2 vCPUs planned on CPUs 0 and 1 of a
 * 2-CPU host, as the keeper does: what each look says changed. */
static void
test_pins_across_looks(void)
{
  g_auto(hwloc_bitmap_t) usable = set_of("0-1");
  g_auto(hwloc_bitmap_t) startup = set_of("0-1");
  g_auto(hwloc_bitmap_t) cpu0 = set_of("0");
  g_auto(hwloc_bitmap_t) cpu1 = set_of("1");
  hwloc_const_bitmap_t inherited[] = {startup};
  g_autoptr(QpCallerPins) pins = qp_caller_pins_new(2);

  /* 1. First look: both inherited the startup CPUs: the plan goes on. */
  qp_caller_pins_begin(pins);
  g_assert_cmpint(qp_caller_pins_judge(pins, 101, "vCPU 0", 0, startup, cpu0,
                                       usable, NULL, inherited, 1),
                  ==, QP_PIN_RESET);
  g_assert_cmpint(qp_caller_pins_judge(pins, 102, "vCPU 1", 1, startup, cpu1,
                                       usable, NULL, inherited, 1),
                  ==, QP_PIN_RESET);
  g_assert_null(qp_caller_pins_end(pins));
  g_assert_null(qp_caller_pins_vcpu(pins, 0));

  /* 2. The caller put vCPU 0 on CPU 1 (<vcpupin>): kept, and said once. */
  qp_caller_pins_begin(pins);
  g_assert_cmpint(qp_caller_pins_judge(pins, 101, "vCPU 0", 0, cpu1, cpu0,
                                       usable, NULL, inherited, 1),
                  ==, QP_PIN_CALLER);
  g_assert_cmpint(qp_caller_pins_judge(pins, 102, "vCPU 1", 1, cpu1, cpu1,
                                       usable, NULL, inherited, 1),
                  ==, QP_PIN_PLANNED);
  g_autofree char *said = qp_caller_pins_end(pins);
  g_assert_cmpstr(said, ==, "vCPU 0 on CPUs 1 kept (the caller's)");
  assert_set(qp_caller_pins_vcpu(pins, 0), "1");
  g_assert_null(qp_caller_pins_vcpu(pins, 1));

  qp_caller_pins_begin(pins);
  g_assert_cmpint(qp_caller_pins_judge(pins, 101, "vCPU 0", 0, cpu1, cpu0,
                                       usable, NULL, inherited, 1),
                  ==, QP_PIN_CALLER);
  g_assert_null(qp_caller_pins_end(pins)); /* nothing new */
  assert_set(qp_caller_pins_vcpu(pins, 0), "1");

  /* 3. Reset to every usable CPU: the plan is back. */
  qp_caller_pins_begin(pins);
  g_assert_cmpint(qp_caller_pins_judge(pins, 101, "vCPU 0", 0, usable, cpu0,
                                       usable, NULL, inherited, 1),
                  ==, QP_PIN_RESET);
  g_autofree char *back = qp_caller_pins_end(pins);
  g_assert_cmpstr(back, ==, "vCPU 0 was reset: back on the plan's CPUs 0");
  g_assert_null(qp_caller_pins_vcpu(pins, 0));

  /* 4. Pinned again, then its thread is gone (unplugged): forgotten. */
  qp_caller_pins_begin(pins);
  qp_caller_pins_judge(pins, 101, "vCPU 0", 0, cpu1, cpu0, usable, NULL, NULL,
                       0);
  g_free(qp_caller_pins_end(pins));
  assert_set(qp_caller_pins_vcpu(pins, 0), "1");
  qp_caller_pins_begin(pins);
  qp_caller_pins_judge(pins, 102, "vCPU 1", 1, cpu1, cpu1, usable, NULL, NULL,
                       0);
  g_assert_null(qp_caller_pins_end(pins));
  g_assert_null(qp_caller_pins_vcpu(pins, 0));

  /* 5. vCPU 0 plugged again with a new thread that inherited the startup
   * CPUs: not the caller's. */
  qp_caller_pins_begin(pins);
  g_assert_cmpint(qp_caller_pins_judge(pins, 103, "vCPU 0", 0, startup, cpu0,
                                       usable, NULL, inherited, 1),
                  ==, QP_PIN_RESET);
  qp_caller_pins_judge(pins, 102, "vCPU 1", 1, cpu1, cpu1, usable, NULL, NULL,
                       0);
  g_assert_null(qp_caller_pins_end(pins));
}

/* Host CPUs taken offline under a VM with 2 vCPUs planned on CPUs 2-3 of
 * an 8-CPU host, vCPU 1 pinned on CPU 6 by the caller. The kernel shows a
 * thread's affinity less the CPUs offline, nothing when they all are; once
 * the thread runs, it runs on every CPU of its cgroup. */
static void
test_pins_cpus_offline(void)
{
  g_auto(hwloc_bitmap_t) usable = set_of("0-7");
  g_auto(hwloc_bitmap_t) plan = set_of("2-3");
  g_auto(hwloc_bitmap_t) none = hwloc_bitmap_alloc();
  g_auto(hwloc_bitmap_t) cpu2 = set_of("2");
  g_auto(hwloc_bitmap_t) cpu6 = set_of("6");
  g_autoptr(QpCallerPins) pins = qp_caller_pins_new(2);

  qp_caller_pins_begin(pins);
  g_assert_cmpint(qp_caller_pins_judge(pins, 101, "vCPU 0", 0, plan, plan,
                                       usable, NULL, NULL, 0),
                  ==, QP_PIN_PLANNED);
  g_assert_cmpint(qp_caller_pins_judge(pins, 102, "vCPU 1", 1, cpu6, plan,
                                       usable, NULL, NULL, 0),
                  ==, QP_PIN_CALLER);
  g_free(qp_caller_pins_end(pins));

  /* 1. CPUs 2, 3 and 6 offline, neither thread has run since: both show
   * no CPU. vCPU 0 is no caller's (the record once claimed it on no CPU,
   * "cpus": "", which the ledger refuses to read), vCPU 1 stays the
   * caller's on CPU 6. */
  qp_caller_pins_begin(pins);
  g_assert_cmpint(qp_caller_pins_judge(pins, 101, "vCPU 0", 0, none, plan,
                                       usable, NULL, NULL, 0),
                  ==, QP_PIN_PLANNED);
  g_assert_cmpint(qp_caller_pins_judge(pins, 102, "vCPU 1", 1, none, plan,
                                       usable, NULL, NULL, 0),
                  ==, QP_PIN_CALLER);
  g_assert_null(qp_caller_pins_end(pins));
  g_assert_null(qp_caller_pins_vcpu(pins, 0));
  assert_set(qp_caller_pins_vcpu(pins, 1), "6");

  /* 2. The same, the keeper told which CPUs are online: vCPU 0 ran, and
   * the kernel put it on every CPU online. Nowhere to put the plan back:
   * left there, not the caller's. */
  g_auto(hwloc_bitmap_t) online = set_of("0-1,4-5,7");
  g_auto(hwloc_bitmap_t) fallback = set_of("0-1,4-5,7");
  qp_caller_pins_set_online(pins, online);
  qp_caller_pins_begin(pins);
  g_assert_cmpint(qp_caller_pins_judge(pins, 101, "vCPU 0", 0, fallback, plan,
                                       usable, NULL, NULL, 0),
                  ==, QP_PIN_PLANNED);
  g_assert_null(qp_caller_pins_end(pins));
  g_assert_null(qp_caller_pins_vcpu(pins, 0));

  /* 3. CPU 2 back, vCPU 0 runs on every CPU online: a reset, the plan goes
   * back on (its CPU 3 still offline). A thread on the plan less CPU 3 is
   * the plan's. */
  g_auto(hwloc_bitmap_t) online2 = set_of("0-2,4-5,7");
  g_auto(hwloc_bitmap_t) every = set_of("0-2,4-5,7");
  qp_caller_pins_set_online(pins, online2);
  qp_caller_pins_begin(pins);
  g_assert_cmpint(qp_caller_pins_judge(pins, 101, "vCPU 0", 0, every, plan,
                                       usable, NULL, NULL, 0),
                  ==, QP_PIN_RESET);
  g_assert_cmpint(qp_caller_pins_judge(pins, 103, "vCPU 0", 0, cpu2, plan,
                                       usable, NULL, NULL, 0),
                  ==, QP_PIN_PLANNED);
  g_assert_null(qp_caller_pins_end(pins));
  g_assert_cmpint(
      qp_caller_judge_online(cpu2, plan, usable, NULL, NULL, 0, online2), ==,
      QP_PIN_PLANNED);
  g_assert_cmpint(qp_caller_judge(cpu2, plan, usable, NULL, NULL, 0), ==,
                  QP_PIN_CALLER);
}

/* 2 nodes: CPUs 0-1 on node 0, 2-3 on node 1, one core per CPU. */
static QpCallerHost *
host_2x2(guint n_vcpus, const char *const *cores)
{
  QpCallerHost *h = g_new0(QpCallerHost, 1);
  h->usable = set_of("0-3");
  h->n_vcpus = n_vcpus;
  h->vcpu_core = g_new0(hwloc_bitmap_t, n_vcpus);
  for (guint v = 0; cores != NULL && v < n_vcpus; v++)
    h->vcpu_core[v] = cores[v] ? set_of(cores[v]) : NULL;
  h->n_nodes = 2;
  h->node_id = g_new0(int, 2);
  h->node_cpus = g_new0(hwloc_bitmap_t, 2);
  h->node_id[0] = 0;
  h->node_id[1] = 1;
  h->node_cpus[0] = set_of("0-1");
  h->node_cpus[1] = set_of("2-3");
  return h;
}

typedef struct {
  const char *name;
  guint n;
  const char *effective[4]; /* "" for a vCPU that runs nowhere, "-" for
                               an empty set (its CPUs all offline) */
  const char *cores[4];     /* NULL: none */
  const char *held;
  const char *dedicated; /* expected */
  int load[2];           /* expected shared vCPUs on nodes 0 and 1 */
  const char *cpu_load;  /* expected "CPUS:VCPUS ..." by CPU set */
} ClaimCase;

static const ClaimCase claim_cases[] = {
    /* One-to-one, the domain: both vCPUs on CPU 1, core 0 free. */
    {"one-to-one-core-given-back",
     2,
     {"1", "1"},
     {"0", "1"},
     "0-1",
     "1",
     {0, 0},
     ""},
    /* vCPU 0 moved to CPU 2 (another node): its core given back, and it
     * counts as a shared vCPU on node 1. */
    {"one-to-one-moved-to-shared-cpu",
     2,
     {"2", "1"},
     {"0", "1"},
     "0-1",
     "1",
     {0, 1},
     "2:1"},
    /* A vCPU running on both planned cores keeps both. */
    {"one-to-one-wide-pin-keeps-cores",
     2,
     {"0-1", "1"},
     {"0", "1"},
     "0-1",
     "0-1",
     {0, 0},
     ""},
    /* Dedicated CPUs of no vCPU's core are never given back here. */
    {"unknown-dedicated-kept", 1, {"1"}, {"1"}, "1,3", "1,3", {0, 0}, ""},
    /* A one-to-one slot not plugged runs nowhere: no load, and its core
     * (none yet) changes nothing. */
    {"one-to-one-empty-slot", 2, {"0", ""}, {"0", NULL}, "0", "0", {0, 0}, ""},
    /* Balanced: groups of vCPUs with one set, split over the nodes the set
     * touches, the remainder to the lowest. */
    {"balanced-split",
     4,
     {"1-2", "1-2", "1-2", "3"},
     {NULL, NULL, NULL, NULL},
     "",
     "",
     {2, 2},
     "1-2:3 3:1"},
    /* vCPU 0 on no CPU (its CPUs all went offline): no load anywhere, and
     * no CPU set of no CPU, which the ledger could not read back. */
    {"balanced-no-cpu", 2, {"-", "3"}, {NULL, NULL}, "", "", {0, 1}, "3:1"},
};

static void
test_claim(gconstpointer data)
{
  const ClaimCase *c = data;
  g_autoptr(QpCallerHost) h = host_2x2(c->n, c->cores);
  g_autofree hwloc_bitmap_t *eff = g_new0(hwloc_bitmap_t, c->n);
  for (guint v = 0; v < c->n; v++)
    eff[v] = strcmp(c->effective[v], "-") == 0 ? hwloc_bitmap_alloc()
             : *c->effective[v]                ? set_of(c->effective[v])
                                               : NULL;
  g_auto(hwloc_bitmap_t) held = set_of(c->held);
  g_auto(hwloc_bitmap_t) dedicated = hwloc_bitmap_alloc();
  g_autoptr(GArray) load = g_array_new(FALSE, FALSE, sizeof(QpNodeLoad));
  g_autoptr(GArray) cpu_load = qp_cpu_load_array_new();
  qp_caller_claim(h, (const hwloc_const_bitmap_t *)eff,
                  (const hwloc_const_bitmap_t *)h->vcpu_core, held, dedicated,
                  load, cpu_load);
  assert_set(dedicated, c->dedicated);
  int got[2] = {0, 0};
  for (guint i = 0; i < load->len; i++) {
    const QpNodeLoad *l = &g_array_index(load, QpNodeLoad, i);
    g_assert_cmpint(l->node, >=, 0);
    g_assert_cmpint(l->node, <, 2);
    g_assert_cmpuint(l->vcpus, >, 0);
    got[l->node] = (int)l->vcpus;
  }
  g_assert_cmpint(got[0], ==, c->load[0]);
  g_assert_cmpint(got[1], ==, c->load[1]);
  /* The same vCPUs by CPU set, as the ledger records them for best-effort
   * planning. */
  g_autoptr(GString) sets = g_string_new(NULL);
  for (guint i = 0; i < cpu_load->len; i++) {
    const QpCpuLoad *l = &g_array_index(cpu_load, QpCpuLoad, i);
    g_autofree char *cpus = qp_list_format(l->cpus);
    g_string_append_printf(sets, "%s%s:%u", i ? " " : "", cpus, l->vcpus);
  }
  g_assert_cmpstr(sets->str, ==, c->cpu_load);
  g_autoptr(GArray) copy = qp_cpu_load_array_new();
  qp_cpu_load_copy(copy, cpu_load);
  g_assert_true(qp_caller_cpu_load_equal(copy, cpu_load));
  if (copy->len > 0) {
    g_array_index(copy, QpCpuLoad, 0).vcpus++;
    g_assert_false(qp_caller_cpu_load_equal(copy, cpu_load));
  }
  for (guint v = 0; v < c->n; v++)
    hwloc_bitmap_free(eff[v]);
}

static void
test_look_text(void)
{
  g_auto(hwloc_bitmap_t) before = set_of("0-1");
  g_auto(hwloc_bitmap_t) after = set_of("1");
  g_autoptr(GArray) load = g_array_new(FALSE, FALSE, sizeof(QpNodeLoad));
  g_autofree char *a = qp_caller_look_text("vCPU 0 on CPUs 1 kept (the "
                                           "caller's)",
                                           before, after, load);
  g_assert_cmpstr(a, ==,
                  "vCPU 0 on CPUs 1 kept (the caller's); claim: dedicated "
                  "CPUs 1 (was 0-1), shared vCPUs none");
  QpNodeLoad l = {.node = 1, .vcpus = 2};
  g_array_append_val(load, l);
  g_auto(hwloc_bitmap_t) none = hwloc_bitmap_alloc();
  g_autofree char *b = qp_caller_look_text(NULL, none, none, load);
  g_assert_cmpstr(b, ==,
                  "claim: dedicated CPUs none, shared vCPUs 2 on node 1");
  g_autoptr(GArray) same = g_array_new(FALSE, FALSE, sizeof(QpNodeLoad));
  g_assert_false(qp_caller_load_equal(load, same));
  g_array_append_val(same, l);
  g_assert_true(qp_caller_load_equal(load, same));
}

/* ---- The cheap look, on a real thread ----------------------------------- */

typedef struct {
  GMutex lock;
  GCond cond;
  int tid;
  gboolean stop;
} Sleeper;

static gpointer
sleeper_main(gpointer data)
{
  Sleeper *s = data;
  g_mutex_lock(&s->lock);
  s->tid = (int)syscall(SYS_gettid);
  g_cond_broadcast(&s->cond);
  while (!s->stop)
    g_cond_wait(&s->cond, &s->lock);
  g_mutex_unlock(&s->lock);
  return NULL;
}

static void
test_moved_real_thread(void)
{
  g_auto(hwloc_bitmap_t) mine = qp_get_affinity(0, NULL);
  g_assert_nonnull(mine);
  if (hwloc_bitmap_weight(mine) < 2) {
    g_test_skip("needs 2 CPUs to move a thread between");
    return;
  }
  Sleeper s = {0};
  g_mutex_init(&s.lock);
  g_cond_init(&s.cond);
  GThread *t = g_thread_new("sleeper", sleeper_main, &s);
  g_mutex_lock(&s.lock);
  while (s.tid == 0)
    g_cond_wait(&s.cond, &s.lock);
  g_mutex_unlock(&s.lock);

  g_auto(hwloc_bitmap_t) first = hwloc_bitmap_alloc();
  hwloc_bitmap_set(first, (unsigned)hwloc_bitmap_first(mine));
  g_assert_true(qp_set_affinity(s.tid, first, NULL));
  g_autoptr(QpCallerPins) pins = qp_caller_pins_new(1);
  qp_caller_pins_begin(pins);
  qp_caller_pins_judge(pins, s.tid, "vCPU 0", 0, first, first, mine, NULL, NULL,
                       0);
  g_assert_null(qp_caller_pins_end(pins));
  g_assert_false(qp_caller_pins_moved(pins));

  /* Someone else (virsh vcpupin, taskset -p) moves it. */
  g_auto(hwloc_bitmap_t) last = hwloc_bitmap_alloc();
  hwloc_bitmap_set(last, (unsigned)hwloc_bitmap_last(mine));
  g_assert_true(qp_set_affinity(s.tid, last, NULL));
  g_assert_true(qp_caller_pins_moved(pins));

  /* The look that follows takes it as the caller's: nothing moved since. */
  qp_caller_pins_begin(pins);
  g_assert_cmpint(qp_caller_pins_judge(pins, s.tid, "vCPU 0", 0, last, first,
                                       mine, NULL, NULL, 0),
                  ==, QP_PIN_CALLER);
  g_free(qp_caller_pins_end(pins));
  g_assert_false(qp_caller_pins_moved(pins));

  g_mutex_lock(&s.lock);
  s.stop = TRUE;
  g_cond_broadcast(&s.cond);
  g_mutex_unlock(&s.lock);
  g_thread_join(t);
  /* A thread that is gone is not one that moved (QEMU may be exiting). */
  g_assert_false(qp_caller_pins_moved(pins));
  g_mutex_clear(&s.lock);
  g_cond_clear(&s.cond);
}

/* ---- The claim follows a caller's cpuset.mems (finding 51) ------------ */

/* "2:128,3:40" as QpNodeAmount entries, in that order. */
static GArray *
amounts_of(const char *text)
{
  GArray *a = g_array_new(FALSE, TRUE, sizeof(QpNodeAmount));
  g_auto(GStrv) parts = g_strsplit(text, ",", -1);
  for (guint i = 0; parts[i] != NULL; i++) {
    if (*parts[i] == '\0')
      continue;
    QpNodeAmount n = {0, 0};
    g_assert_cmpint(sscanf(parts[i], "%d:%" G_GUINT64_FORMAT, &n.node, &n.mib),
                    ==, 2);
    g_array_append_val(a, n);
  }
  return a;
}

static char *
amounts_text(const GArray *a)
{
  GString *s = g_string_new(NULL);
  for (guint i = 0; i < a->len; i++) {
    const QpNodeAmount *n = &g_array_index(a, QpNodeAmount, i);
    g_string_append_printf(s, "%s%d:%" G_GUINT64_FORMAT, i ? "," : "", n->node,
                           n->mib);
  }
  return g_string_free(s, FALSE);
}

typedef struct {
  const char *name;
  const char *claim;    /* the claim's memory, node:MiB */
  const char *allowed;  /* Mems_allowed_list */
  const char *resident; /* the VM's pages now, node:MiB */
  const char *want;     /* the claim after, or NULL: unchanged */
} MemsCase;

static const MemsCase mems_cases[] = {
    /* The lab's case: bound and claimed on node 2, cpuset.mems 2-3 then 3. */
    {"moved-to-another-node", "2:128", "3", "3:130", "3:128"},
    /* A balanced VM split over nodes 1-2, narrowed to node 2: all there. */
    {"split-narrowed-to-one", "1:170,2:224", "2", "2:392", "2:394"},
    /* Node 0 left, nodes 1-2 allowed: node 1 keeps its claim, node 2 gets
     * the pages it holds, the rest goes where most of them are. */
    {"pages-beyond-then-most", "0:100,1:100", "1-2", "1:60,2:80",
     "1:100,2:100"},
    /* Untouched memory: nothing resident, the lowest allowed node. */
    {"nothing-resident", "0:64", "2-3", "", "2:64"},
    /* Widened, or left as it was: the claim stays. */
    {"still-allowed", "1:170,2:224", "0-3", "1:150,2:240", NULL},
    {"same-nodes", "2:128", "2", "2:20", NULL},
};

static void
test_mems(gconstpointer data)
{
  const MemsCase *c = data;
  g_autoptr(GArray) claim = amounts_of(c->claim);
  g_autoptr(GArray) resident = amounts_of(c->resident);
  g_auto(hwloc_bitmap_t) allowed = set_of(c->allowed);
  g_autoptr(GArray) now = qp_caller_mems_claim(claim, allowed, resident);
  if (c->want == NULL) {
    g_assert_null(now);
    return;
  }
  g_assert_nonnull(now);
  g_autofree char *have = amounts_text(now);
  g_assert_cmpstr(have, ==, c->want);
}

/* ---- Who took the nodes away: a caller, or memory gone offline ------- */

typedef struct {
  const char *name;
  const char *had;         /* the nodes QEMU could use */
  const char *allowed;     /* Mems_allowed_list now */
  const char *with_memory; /* has_memory, or NULL: unknown */
  gboolean caller;         /* a caller narrowed them */
  const char *gone;        /* nodes that left with no memory */
} NarrowedCase;

static const NarrowedCase narrowed_cases[] = {
    /* Node 3's memory all offline (the lab's 4n-movable): no caller. */
    {"node-offline", "0-3", "0-2", "0-2", FALSE, "3"},
    /* A caller's cpuset.mems 2 with every node's memory online. */
    {"caller-narrowed", "0-3", "2", "0-3", TRUE, ""},
    /* Both: node 3 offline, and the caller took 0-1 off nodes with memory. */
    {"offline-and-narrowed", "0-3", "2", "0-2", TRUE, "3"},
    /* Two nodes offline, nothing else left. */
    {"two-offline", "0-3", "0,2", "0,2", FALSE, "1,3"},
    /* has_memory unreadable: every node that left was the caller's. */
    {"memory-unknown", "0-3", "0-2", NULL, TRUE, ""},
    /* Nothing left. */
    {"none-left", "0-3", "0-3", "0-3", FALSE, ""},
    /* Node 0 was never QEMU's (not in its mems at the start): no news. */
    {"not-had", "1-3", "1-2", "0-2", FALSE, "3"},
};

static void
test_narrowed(gconstpointer data)
{
  const NarrowedCase *c = data;
  g_auto(hwloc_bitmap_t) had = set_of(c->had);
  g_auto(hwloc_bitmap_t) allowed = set_of(c->allowed);
  g_auto(hwloc_bitmap_t) with_memory =
      c->with_memory != NULL ? set_of(c->with_memory) : NULL;
  g_auto(hwloc_bitmap_t) gone = hwloc_bitmap_alloc();
  g_assert_cmpint(qp_caller_mems_narrowed(had, allowed, with_memory, gone), ==,
                  c->caller);
  g_autofree char *text = qp_list_format(gone);
  g_assert_cmpstr(text, ==, c->gone);
  /* GONE may be NULL: the same answer. */
  g_assert_cmpint(qp_caller_mems_narrowed(had, allowed, with_memory, NULL), ==,
                  c->caller);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  for (gsize i = 0; i < G_N_ELEMENTS(judge_cases); i++) {
    g_autofree char *path =
        g_strdup_printf("/caller-pinning/judge/%s", judge_cases[i].name);
    g_test_add_data_func(path, &judge_cases[i], test_judge);
  }
  g_test_add_func("/caller-pinning/pins/across-looks", test_pins_across_looks);
  g_test_add_func("/caller-pinning/pins/cpus-offline", test_pins_cpus_offline);
  for (gsize i = 0; i < G_N_ELEMENTS(claim_cases); i++) {
    g_autofree char *path =
        g_strdup_printf("/caller-pinning/claim/%s", claim_cases[i].name);
    g_test_add_data_func(path, &claim_cases[i], test_claim);
  }
  g_test_add_func("/caller-pinning/claim/look-text", test_look_text);
  g_test_add_func("/caller-pinning/moved/real-thread", test_moved_real_thread);
  for (gsize i = 0; i < G_N_ELEMENTS(mems_cases); i++) {
    g_autofree char *path =
        g_strdup_printf("/caller-pinning/mems/%s", mems_cases[i].name);
    g_test_add_data_func(path, &mems_cases[i], test_mems);
  }
  for (gsize i = 0; i < G_N_ELEMENTS(narrowed_cases); i++) {
    g_autofree char *path = g_strdup_printf("/caller-pinning/mems/narrowed/%s",
                                            narrowed_cases[i].name);
    g_test_add_data_func(path, &narrowed_cases[i], test_narrowed);
  }
  return g_test_run();
}
