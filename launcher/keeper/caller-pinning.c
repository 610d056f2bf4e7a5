/* The caller's own placement: telling a caller's pinning from a reset,
 * remembering it, and the claim that follows it. See caller-pinning.h. */
#include "launcher/keeper/caller-pinning.h"

#include <string.h>

#include "launcher/affinity.h"
#include "topology/ledger/claims.h"

QpPinVerdict
qp_caller_judge(hwloc_const_bitmap_t have, hwloc_const_bitmap_t want,
                hwloc_const_bitmap_t usable, hwloc_const_bitmap_t beyond,
                const hwloc_const_bitmap_t *inherited, guint n_inherited)
{
  if (hwloc_bitmap_isequal(have, want))
    return QP_PIN_PLANNED;
  if (hwloc_bitmap_isincluded(usable, have) &&
      (beyond == NULL || !hwloc_bitmap_intersects(have, beyond)))
    return QP_PIN_RESET;
  for (guint i = 0; i < n_inherited; i++)
    if (inherited[i] != NULL && hwloc_bitmap_isequal(have, inherited[i]))
      return QP_PIN_RESET;
  return QP_PIN_CALLER;
}

/* SET less the CPUs offline, into OUT (which is returned); SET itself when
 * ONLINE is NULL or SET is. */
static hwloc_const_bitmap_t
on_line(hwloc_const_bitmap_t set, hwloc_const_bitmap_t online,
        hwloc_bitmap_t out)
{
  if (set == NULL || online == NULL)
    return set;
  hwloc_bitmap_and(out, set, online);
  return out;
}

QpPinVerdict
qp_caller_judge_online(hwloc_const_bitmap_t have, hwloc_const_bitmap_t want,
                       hwloc_const_bitmap_t usable, hwloc_const_bitmap_t beyond,
                       const hwloc_const_bitmap_t *inherited, guint n_inherited,
                       hwloc_const_bitmap_t online)
{
  /* No CPU at all: the kernel shows a thread whose CPUs all went offline
   * so until it runs again. No caller can set that. */
  if (hwloc_bitmap_iszero(have))
    return QP_PIN_PLANNED;
  g_auto(hwloc_bitmap_t) want_buf = hwloc_bitmap_alloc();
  g_auto(hwloc_bitmap_t) usable_buf = hwloc_bitmap_alloc();
  hwloc_const_bitmap_t want_on = on_line(want, online, want_buf);
  hwloc_const_bitmap_t usable_on = on_line(usable, online, usable_buf);
  hwloc_bitmap_t *inherited_buf = g_new0(hwloc_bitmap_t, MAX(n_inherited, 1));
  g_autofree hwloc_const_bitmap_t *inherited_on =
      g_new0(hwloc_const_bitmap_t, MAX(n_inherited, 1));
  for (guint i = 0; i < n_inherited; i++) {
    inherited_buf[i] = hwloc_bitmap_alloc();
    inherited_on[i] = on_line(inherited[i], online, inherited_buf[i]);
  }
  QpPinVerdict verdict = qp_caller_judge(have, want_on, usable_on, beyond,
                                         inherited_on, n_inherited);
  for (guint i = 0; i < n_inherited; i++)
    hwloc_bitmap_free(inherited_buf[i]);
  g_free(inherited_buf);
  /* The kernel ran a thread whose CPUs are all offline on every CPU of its
   * cgroup: with the plan's CPUs all offline, nowhere to put it back. */
  if (verdict == QP_PIN_RESET && hwloc_bitmap_iszero(want_on))
    return QP_PIN_PLANNED;
  return verdict;
}

/* ---- The host as the keeper needs it ------------------------------------ */

QpCallerHost *
qp_caller_host_new(const QpHost *host, const QpPlan *plan,
                   hwloc_const_bitmap_t affinity)
{
  QpCallerHost *h = g_new0(QpCallerHost, 1);
  h->usable = hwloc_bitmap_dup(host->allowed);
  if (affinity != NULL)
    hwloc_bitmap_and(h->usable, h->usable, affinity);
  if (host->beyond_affinity != NULL) {
    h->beyond = hwloc_bitmap_dup(host->beyond_affinity);
    if (affinity != NULL)
      hwloc_bitmap_and(h->beyond, h->beyond, affinity);
    if (hwloc_bitmap_iszero(h->beyond))
      g_clear_pointer(&h->beyond, hwloc_bitmap_free);
  }
  h->n_vcpus = plan->n_vcpus;
  h->vcpu_core = g_new0(hwloc_bitmap_t, MAX(plan->n_vcpus, 1));
  gboolean dedicated =
      plan->dedicated != NULL && !hwloc_bitmap_iszero(plan->dedicated);
  for (guint v = 0; dedicated && v < plan->n_vcpus; v++) {
    if (!qp_plan_vcpu_boots(plan, v) || plan->vcpu_cpus[v] == NULL ||
        !hwloc_bitmap_isincluded(plan->vcpu_cpus[v], plan->dedicated))
      continue;
    int ci = qp_host_cpu_index(host, hwloc_bitmap_first(plan->vcpu_cpus[v]));
    if (ci < 0)
      continue;
    const QpCore *core = &host->cores[host->cpus[ci].core];
    h->vcpu_core[v] = hwloc_bitmap_dup(core->pus);
  }
  h->n_nodes = host->n_nodes;
  h->node_id = g_new0(int, MAX(host->n_nodes, 1));
  h->node_cpus = g_new0(hwloc_bitmap_t, MAX(host->n_nodes, 1));
  for (guint i = 0; i < host->n_nodes; i++) {
    h->node_id[i] = host->nodes[i].id;
    h->node_cpus[i] = hwloc_bitmap_dup(host->nodes[i].all_cpus);
  }
  return h;
}

void
qp_caller_host_free(QpCallerHost *h)
{
  if (h == NULL)
    return;
  hwloc_bitmap_free(h->usable);
  hwloc_bitmap_free(h->beyond);
  for (guint v = 0; v < h->n_vcpus; v++)
    hwloc_bitmap_free(h->vcpu_core[v]);
  g_free(h->vcpu_core);
  for (guint i = 0; i < h->n_nodes; i++)
    hwloc_bitmap_free(h->node_cpus[i]);
  g_free(h->node_cpus);
  g_free(h->node_id);
  g_free(h);
}

/* ---- The claim as the VM uses it ---------------------------------------- */

/* Adds N vCPUs running on CPUS to LOADS (per node index), as the planner
 * splits a group of floating vCPUs. */
static void
add_load(const QpCallerHost *host, hwloc_const_bitmap_t cpus, guint n,
         guint *loads)
{
  guint k = 0;
  for (guint i = 0; i < host->n_nodes; i++)
    k += hwloc_bitmap_intersects(cpus, host->node_cpus[i]) ? 1 : 0;
  if (k == 0)
    return;
  guint seen = 0;
  for (guint i = 0; i < host->n_nodes; i++)
    if (hwloc_bitmap_intersects(cpus, host->node_cpus[i])) {
      loads[i] += n / k + (seen < n % k ? 1 : 0);
      seen++;
    }
}

void
qp_caller_claim(const QpCallerHost *host, const hwloc_const_bitmap_t *effective,
                const hwloc_const_bitmap_t *cores, hwloc_const_bitmap_t held,
                hwloc_bitmap_t dedicated, GArray *load, GArray *cpu_load)
{
  guint n = host->n_vcpus;
  g_auto(hwloc_bitmap_t) used = hwloc_bitmap_alloc();
  for (guint v = 0; v < n; v++)
    if (effective[v] != NULL)
      hwloc_bitmap_or(used, used, effective[v]);
  hwloc_bitmap_copy(dedicated, held);
  for (guint v = 0; v < n; v++)
    if (cores[v] != NULL && !hwloc_bitmap_intersects(cores[v], used))
      hwloc_bitmap_andnot(dedicated, dedicated, cores[v]);

  /* Shared load: the vCPUs off the dedicated cores, one group per set. */
  g_array_set_size(load, 0);
  g_array_set_size(cpu_load, 0);
  g_autofree guint *loads = g_new0(guint, MAX(host->n_nodes, 1));
  g_autofree gboolean *done = g_new0(gboolean, MAX(n, 1));
  for (guint v = 0; v < n; v++) {
    /* A set with no CPU is no load anywhere, and no list a record can
     * hold ("cpus": "" is refused). */
    if (done[v] || effective[v] == NULL || hwloc_bitmap_iszero(effective[v]) ||
        (!hwloc_bitmap_iszero(dedicated) &&
         hwloc_bitmap_isincluded(effective[v], dedicated)))
      continue;
    guint same = 0;
    for (guint w = v; w < n; w++)
      if (!done[w] && effective[w] != NULL &&
          hwloc_bitmap_isequal(effective[w], effective[v])) {
        done[w] = TRUE;
        same++;
      }
    add_load(host, effective[v], same, loads);
    QpCpuLoad l = {hwloc_bitmap_dup(effective[v]), same};
    g_array_append_val(cpu_load, l);
  }
  for (guint i = 0; i < host->n_nodes; i++)
    if (loads[i] > 0) {
      QpNodeLoad l = {.node = host->node_id[i], .vcpus = loads[i]};
      g_array_append_val(load, l);
    }
}

gboolean
qp_caller_load_equal(const GArray *a, const GArray *b)
{
  if (a->len != b->len)
    return FALSE;
  for (guint i = 0; i < a->len; i++) {
    const QpNodeLoad *x = &g_array_index(a, QpNodeLoad, i);
    const QpNodeLoad *y = &g_array_index(b, QpNodeLoad, i);
    if (x->node != y->node || x->vcpus != y->vcpus)
      return FALSE;
  }
  return TRUE;
}

gboolean
qp_caller_cpu_load_equal(const GArray *a, const GArray *b)
{
  if (a->len != b->len)
    return FALSE;
  for (guint i = 0; i < a->len; i++) {
    const QpCpuLoad *x = &g_array_index(a, QpCpuLoad, i);
    const QpCpuLoad *y = &g_array_index(b, QpCpuLoad, i);
    if (x->vcpus != y->vcpus || !hwloc_bitmap_isequal(x->cpus, y->cpus))
      return FALSE;
  }
  return TRUE;
}

char *
qp_caller_look_text(const char *changes, hwloc_const_bitmap_t before,
                    hwloc_const_bitmap_t dedicated, const GArray *load)
{
  GString *s = g_string_new(NULL);
  if (changes != NULL)
    g_string_append_printf(s, "%s; ", changes);
  g_autofree char *now = qp_list_format(dedicated);
  g_string_append_printf(s, "claim: dedicated CPUs %s", *now ? now : "none");
  if (!hwloc_bitmap_isequal(before, dedicated)) {
    g_autofree char *was = qp_list_format(before);
    g_string_append_printf(s, " (was %s)", *was ? was : "none");
  }
  g_string_append(s, ", shared vCPUs ");
  for (guint i = 0; i < load->len; i++) {
    const QpNodeLoad *l = &g_array_index(load, QpNodeLoad, i);
    g_string_append_printf(s, "%s%u on node %d", i ? ", " : "", l->vcpus,
                           l->node);
  }
  if (load->len == 0)
    g_string_append(s, "none");
  return g_string_free(s, FALSE);
}

/* ---- What the keeper has seen ------------------------------------------- */

typedef struct {
  int tid;
  char *what;
  int vcpu;              /* vCPU index, -1 for others */
  hwloc_bitmap_t seen;   /* affinity seen or set last */
  hwloc_bitmap_t caller; /* the caller's CPUs, NULL when the plan's */
  gboolean judged;       /* in the current look */
} Watched;

struct QpCallerPins {
  GHashTable *threads; /* tid -> Watched */
  guint n_vcpus;
  hwloc_bitmap_t *vcpu_caller; /* by vCPU index: the caller's CPUs or NULL */
  GString *changes;            /* of the current look */
  hwloc_bitmap_t online;       /* the CPUs online, NULL: every CPU */
};

static void
watched_free(Watched *w)
{
  g_free(w->what);
  hwloc_bitmap_free(w->seen);
  hwloc_bitmap_free(w->caller);
  g_free(w);
}

QpCallerPins *
qp_caller_pins_new(guint n_vcpus)
{
  QpCallerPins *p = g_new0(QpCallerPins, 1);
  p->threads = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL,
                                     (GDestroyNotify)watched_free);
  p->n_vcpus = n_vcpus;
  p->vcpu_caller = g_new0(hwloc_bitmap_t, MAX(n_vcpus, 1));
  p->changes = g_string_new(NULL);
  return p;
}

void
qp_caller_pins_free(QpCallerPins *pins)
{
  if (pins == NULL)
    return;
  g_hash_table_unref(pins->threads);
  for (guint v = 0; v < pins->n_vcpus; v++)
    hwloc_bitmap_free(pins->vcpu_caller[v]);
  g_free(pins->vcpu_caller);
  g_string_free(pins->changes, TRUE);
  hwloc_bitmap_free(pins->online);
  g_free(pins);
}

void
qp_caller_pins_begin(QpCallerPins *pins)
{
  GHashTableIter it;
  gpointer value;
  g_hash_table_iter_init(&it, pins->threads);
  while (g_hash_table_iter_next(&it, NULL, &value))
    ((Watched *)value)->judged = FALSE;
  g_string_truncate(pins->changes, 0);
}

void
qp_caller_pins_set_online(QpCallerPins *pins, hwloc_const_bitmap_t online)
{
  g_clear_pointer(&pins->online, hwloc_bitmap_free);
  if (online != NULL)
    pins->online = hwloc_bitmap_dup(online);
}

static void say(QpCallerPins *pins, const char *fmt, ...) G_GNUC_PRINTF(2, 3);

static void
say(QpCallerPins *pins, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  if (pins->changes->len > 0)
    g_string_append(pins->changes, ", ");
  g_string_append_vprintf(pins->changes, fmt, ap);
  va_end(ap);
}

QpPinVerdict
qp_caller_pins_judge(QpCallerPins *pins, int tid, const char *what, int vcpu,
                     hwloc_const_bitmap_t have, hwloc_const_bitmap_t want,
                     hwloc_const_bitmap_t usable, hwloc_const_bitmap_t beyond,
                     const hwloc_const_bitmap_t *inherited, guint n_inherited)
{
  Watched *w = g_hash_table_lookup(pins->threads, GINT_TO_POINTER(tid));
  gboolean fresh = w == NULL || w->vcpu != vcpu;
  if (fresh) {
    if (w != NULL)
      g_hash_table_remove(pins->threads, GINT_TO_POINTER(tid));
    w = g_new0(Watched, 1);
    w->tid = tid;
    w->what = g_strdup(what);
    w->vcpu = vcpu;
    w->seen = hwloc_bitmap_alloc();
    g_hash_table_insert(pins->threads, GINT_TO_POINTER(tid), w);
  }
  w->judged = TRUE;
  /* Its CPUs all went offline: as it was (the caller's stay the caller's,
   * and their load is counted where the caller put it). */
  if (!fresh && hwloc_bitmap_iszero(have)) {
    hwloc_bitmap_copy(w->seen, have);
    return w->caller != NULL ? QP_PIN_CALLER : QP_PIN_PLANNED;
  }
  QpPinVerdict verdict = qp_caller_judge_online(
      have, want, usable, beyond, fresh ? inherited : NULL,
      fresh ? n_inherited : 0, pins->online);
  if (verdict == QP_PIN_RESET) {
    hwloc_bitmap_copy(w->seen, want);
    if (pins->online != NULL)
      hwloc_bitmap_and(w->seen, w->seen, pins->online);
  } else {
    hwloc_bitmap_copy(w->seen, have);
  }
  if (verdict == QP_PIN_CALLER) {
    if (w->caller == NULL || !hwloc_bitmap_isequal(w->caller, have)) {
      g_autofree char *l = qp_list_format(have);
      say(pins, "%s on CPUs %s kept (the caller's)", what, l);
      g_clear_pointer(&w->caller, hwloc_bitmap_free);
      w->caller = hwloc_bitmap_dup(have);
    }
  } else if (w->caller != NULL) {
    g_autofree char *l = qp_list_format(want);
    if (verdict == QP_PIN_RESET)
      say(pins, "%s was reset: back on the plan's CPUs %s", what, l);
    else
      say(pins, "%s is on the plan's CPUs %s again", what, l);
    g_clear_pointer(&w->caller, hwloc_bitmap_free);
  }
  return verdict;
}

char *
qp_caller_pins_end(QpCallerPins *pins)
{
  GHashTableIter it;
  gpointer value;
  for (guint v = 0; v < pins->n_vcpus; v++)
    g_clear_pointer(&pins->vcpu_caller[v], hwloc_bitmap_free);
  g_hash_table_iter_init(&it, pins->threads);
  while (g_hash_table_iter_next(&it, NULL, &value)) {
    Watched *w = value;
    if (!w->judged) {
      g_hash_table_iter_remove(&it);
      continue;
    }
    if (w->caller != NULL && w->vcpu >= 0 && (guint)w->vcpu < pins->n_vcpus)
      pins->vcpu_caller[w->vcpu] = hwloc_bitmap_dup(w->caller);
  }
  if (pins->changes->len == 0)
    return NULL;
  return g_strdup(pins->changes->str);
}

hwloc_const_bitmap_t
qp_caller_pins_vcpu(const QpCallerPins *pins, guint index)
{
  return index < pins->n_vcpus ? pins->vcpu_caller[index] : NULL;
}

const char *
qp_caller_pins_other(const QpCallerPins *pins)
{
  const Watched *found = NULL;
  GHashTableIter it;
  gpointer value;
  g_hash_table_iter_init(&it, pins->threads);
  while (g_hash_table_iter_next(&it, NULL, &value)) {
    const Watched *w = value;
    if (w->vcpu < 0 && w->caller != NULL &&
        (found == NULL || w->tid < found->tid))
      found = w;
  }
  return found != NULL ? found->what : NULL;
}

gboolean
qp_caller_pins_moved(const QpCallerPins *pins)
{
  GHashTableIter it;
  gpointer value;
  g_hash_table_iter_init(&it, pins->threads);
  while (g_hash_table_iter_next(&it, NULL, &value)) {
    const Watched *w = value;
    g_auto(hwloc_bitmap_t) now = qp_get_affinity(w->tid, NULL);
    /* A thread that is gone is no news: QEMU may be on its way out (a QMP
     * query then can hang its exit), and an unplugged vCPU comes with an
     * event of its own. The next look forgets it. */
    if (now != NULL && !hwloc_bitmap_isequal(now, w->seen))
      return TRUE;
  }
  return FALSE;
}

GArray *
qp_caller_mems_claim(const GArray *mem, hwloc_const_bitmap_t allowed,
                     const GArray *resident)
{
  if (hwloc_bitmap_iszero(allowed))
    return NULL;
  gboolean left = FALSE;
  guint64 out = 0;
  GArray *now = g_array_new(FALSE, TRUE, sizeof(QpNodeAmount));
  for (guint i = 0; i < mem->len; i++) {
    const QpNodeAmount *a = &g_array_index(mem, QpNodeAmount, i);
    if (hwloc_bitmap_isset(allowed, (unsigned)a->node)) {
      g_array_append_val(now, *a);
    } else {
      left = TRUE;
      out += a->mib;
    }
  }
  if (!left) {
    g_array_unref(now);
    return NULL;
  }
  /* Where the pages went: beyond the claim on an allowed node; the rest
   * where most of them are. */
  int most = hwloc_bitmap_first(allowed);
  guint64 most_mib = 0;
  for (guint i = 0; i < resident->len; i++) {
    const QpNodeAmount *r = &g_array_index(resident, QpNodeAmount, i);
    if (!hwloc_bitmap_isset(allowed, (unsigned)r->node))
      continue;
    guint64 has = qp_node_amount_of(now, r->node);
    if (r->mib > has && out > 0) {
      guint64 take = MIN(r->mib - has, out);
      qp_node_amount_add(now, r->node, take);
      out -= take;
    }
    if (r->mib > most_mib || (r->mib == most_mib && r->node < most)) {
      most = r->node;
      most_mib = r->mib;
    }
  }
  if (out > 0)
    qp_node_amount_add(now, most, out);
  return now;
}

gboolean
qp_caller_mems_narrowed(hwloc_const_bitmap_t had, hwloc_const_bitmap_t allowed,
                        hwloc_const_bitmap_t with_memory, hwloc_bitmap_t gone)
{
  g_auto(hwloc_bitmap_t) left = hwloc_bitmap_dup(had);
  hwloc_bitmap_andnot(left, left, allowed);
  if (with_memory == NULL)
    return !hwloc_bitmap_iszero(left);
  if (gone != NULL) {
    g_auto(hwloc_bitmap_t) empty = hwloc_bitmap_dup(left);
    hwloc_bitmap_andnot(empty, empty, with_memory);
    hwloc_bitmap_or(gone, gone, empty);
  }
  return hwloc_bitmap_intersects(left, with_memory);
}
