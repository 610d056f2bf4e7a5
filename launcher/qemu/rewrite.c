#include "launcher/qemu/rewrite.h"

#include <string.h>

#include "launcher/qemu/backends.h"
#include "launcher/qemu/device-buses.h"
#include "launcher/qemu/keyval.h"
#include "launcher/qemu/numbers.h"
#include "launcher/qemu/option-table.h"
#include "launcher/qemu/props.h"
#include "topology/base/cpulist.h"

typedef struct {
  const QpQemuArgs *args;
  const QpPlan *plan; /* NULL: none (QEMU starts paused) */
  char **replace;     /* per argv index: new value, or NULL */
  gboolean *drop;     /* per argv index: left out */
  GPtrArray **before; /* per argv index: arguments inserted before it */
  GPtrArray *tail;    /* arguments added at the end */
} Rewrite;

/* Adds OPT VALUE at the end of the command line. */
static void
rewrite_append(Rewrite *rw, const char *opt, char *value)
{
  g_ptr_array_add(rw->tail, g_strdup(opt));
  g_ptr_array_add(rw->tail, value);
}

/* Adds OPT VALUE before argument INDEX of the caller's. */
static void
rewrite_insert(Rewrite *rw, guint index, const char *opt, char *value)
{
  if (rw->before[index] == NULL)
    rw->before[index] = g_ptr_array_new_with_free_func(g_free);
  g_ptr_array_add(rw->before[index], g_strdup(opt));
  g_ptr_array_add(rw->before[index], value);
}

static const char *
policy_for(QpPolicy p)
{
  return qp_policy_name(p == QP_POLICY_DEFAULT ? QP_POLICY_BIND : p);
}

/* The nodes of NODES that have CPUs (sysfs): QEMU refuses a thread-context
 * whose node-affinity selects no CPU ("The nodes select no CPUs"), and
 * memory-only nodes (CXL, PMEM) have none. NULL if none has. */
static hwloc_bitmap_t
nodes_with_cpus(hwloc_const_bitmap_t nodes)
{
  hwloc_bitmap_t out = hwloc_bitmap_alloc();
  int n;
  hwloc_bitmap_foreach_begin(n, nodes)
  {
    g_autofree char *path =
        g_strdup_printf("/sys/devices/system/node/node%d/cpulist", n);
    g_autofree char *text = NULL;
    if (g_file_get_contents(path, &text, NULL, NULL) &&
        g_ascii_isdigit(text[0]))
      hwloc_bitmap_set(out, (unsigned)n);
  }
  hwloc_bitmap_foreach_end();
  if (hwloc_bitmap_iszero(out)) {
    hwloc_bitmap_free(out);
    return NULL;
  }
  return out;
}

static char *
tc_id(const char *backend)
{
  return g_strdup_printf("qemu-pin-tc-%s", backend);
}

/* Whether QEMU can use a thread-context of the command line. QEMU creates
 * the context's thread before the fork of -daemonize (the type is created
 * "pre-sandbox", in 7.2 as in later releases), so the daemon has the object
 * but not its thread: the first preallocation thread asked of it is waited
 * for forever, and the first process never exits. Preallocation then goes
 * without one: the backend's host-nodes/policy still place the memory, and
 * its threads inherit the startup CPU set of the main thread. */
static gboolean
prealloc_context_usable(const QpQemuArgs *a)
{
  return !a->daemonize;
}

static char *
thread_context(const char *backend, hwloc_const_bitmap_t nodes)
{
  g_autofree char *id = tc_id(backend);
  GString *s = g_string_new("thread-context");
  qp_kv_append(s, "id", id);
  qp_kv_append_set(s, "node-affinity", nodes);
  return g_string_free(s, FALSE);
}

/* The caller's backend B (TEXT, its value so far) with HOST_NODES/POLICY
 * added (when SET_NODES) and a prealloc-context (when WITH_TC). */
static gboolean
edit_backend(const char *text, const QpBackend *b, gboolean set_nodes,
             hwloc_const_bitmap_t nodes, QpPolicy policy, gboolean with_tc,
             char **out, GError **error)
{
  g_autofree char *tc = tc_id(b->id);
  /* The caller's policy (preferred without host-nodes) stays. */
  gboolean set_policy = set_nodes && b->policy == QP_POLICY_DEFAULT;

  g_auto(QpProps) p = {0};
  if (!qp_props_read(&p, "-object", text, "qom-type", error))
    return FALSE;
  if (set_nodes)
    qp_props_set_index_set(&p, "host-nodes", nodes);
  if (set_policy)
    qp_props_set_string(&p, "policy", policy_for(policy));
  if (with_tc)
    qp_props_set_string(&p, "prealloc-context", tc);
  *out = qp_props_to_text(&p);
  return TRUE;
}

/* A backend qemu-pin makes: memory-backend-ram ID of BYTES bound to NODES,
 * or memory-backend-file in MEM_PATH (what -mem-path made). */
static char *
new_backend(const char *id, const char *mem_path, guint64 bytes,
            hwloc_const_bitmap_t nodes, QpPolicy policy, gboolean with_tc)
{
  GString *s =
      g_string_new(mem_path ? "memory-backend-file" : "memory-backend-ram");
  g_autofree char *size = g_strdup_printf("%" G_GUINT64_FORMAT, bytes);
  qp_kv_append(s, "id", id);
  qp_kv_append(s, "size", size);
  if (mem_path != NULL)
    qp_kv_append(s, "mem-path", mem_path);
  qp_kv_append_set(s, "host-nodes", nodes);
  qp_kv_append(s, "policy", policy_for(policy));
  if (with_tc) {
    g_autofree char *tc = tc_id(id);
    qp_kv_append(s, "prealloc-context", tc);
  }
  return g_string_free(s, FALSE);
}

static void
drop_mem_path(Rewrite *rw)
{
  GArray *idx = rw->args->mem_path_argi;
  for (guint i = 0; i < idx->len; i++) {
    guint k = g_array_index(idx, guint, i);
    rw->drop[k] = rw->drop[k + 1] = TRUE;
  }
}

/* Piece M of the plan bound through the caller's backend B: host-nodes and
 * policy where the caller set none, and a thread-context where it
 * preallocates. DONE holds the backends already edited. */
static gboolean
bind_backend(Rewrite *rw, const QpPlanMem *m, const QpBackend *b,
             GHashTable *done, GError **error)
{
  const QpQemuArgs *a = rw->args;
  /* A backend of a -readconfig file stays as written: the process's memory
   * policy binds it (the parser warned). */
  if (g_hash_table_contains(done, b->id) || b->argi == QP_ARGI_IN_FILE)
    return TRUE;
  g_hash_table_add(done, b->id);
  gboolean set_nodes = b->host_nodes == NULL && !m->caller_set;
  hwloc_const_bitmap_t nodes = set_nodes ? m->host_nodes : b->host_nodes;
  g_auto(hwloc_bitmap_t) tc_nodes = NULL;
  if (b->prealloc && !b->prealloc_context && nodes != NULL &&
      prealloc_context_usable(a))
    tc_nodes = nodes_with_cpus(nodes);
  gboolean with_tc = tc_nodes != NULL;
  if (!set_nodes && !with_tc)
    return TRUE;
  char *value = NULL;
  const char *text =
      rw->replace[b->argi] ? rw->replace[b->argi] : a->argv[b->argi];
  if (!edit_backend(text, b, set_nodes, nodes, m->policy, with_tc, &value,
                    error))
    return FALSE;
  g_free(rw->replace[b->argi]);
  rw->replace[b->argi] = value;
  if (with_tc)
    rewrite_insert(rw, b->argi - 1, "-object", thread_context(b->id, tc_nodes));
  return TRUE;
}

/* The RAM of a guest without -numa, which QEMU would make itself: made here
 * as a backend bound as M says (with -mem-path's file as QEMU makes it),
 * with a thread-context of TC_NODES when not NULL. */
static gboolean
bind_guest_ram(Rewrite *rw, const QpPlanMem *m, hwloc_const_bitmap_t tc_nodes,
               GError **error)
{
  const QpQemuArgs *a = rw->args;
  if (a->req->n_gnodes > 0)
    return qp_args_invalid(error,
                           "plan: memory for the whole guest, but the guest "
                           "has %u NUMA nodes",
                           a->req->n_gnodes);
  const char *id = qp_qemu_args_ram_id(a);
  drop_mem_path(rw);
  if (tc_nodes != NULL)
    rewrite_append(rw, "-object", thread_context(id, tc_nodes));
  rewrite_append(rw, "-object",
                 new_backend(id, a->mem_path, a->ram_bytes, m->host_nodes,
                             m->policy, tc_nodes != NULL));
  rewrite_append(rw, "-machine", g_strdup_printf("memory-backend=%s", id));
  return TRUE;
}

/* Piece M of the plan bound on the command line. */
static gboolean
apply_mem(Rewrite *rw, const QpPlanMem *m, GHashTable *done, GError **error)
{
  const QpQemuArgs *a = rw->args;
  const QpRequest *r = a->req;
  const char *memdev = m->memdev;

  if (m->host_nodes == NULL || hwloc_bitmap_iszero(m->host_nodes))
    return TRUE;
  if (m->gnode >= 0 && (guint)m->gnode >= r->n_gnodes)
    return qp_args_invalid(error,
                           "plan: guest node %d does not exist (the guest has "
                           "%u)",
                           m->gnode, r->n_gnodes);
  if (memdev == NULL)
    memdev = m->gnode < 0 ? a->machine_memdev : r->gnodes[m->gnode].memdev;
  if (memdev != NULL) {
    const QpBackend *b = qp_backend_find(a, memdev);
    if (b == NULL)
      return qp_args_invalid(error,
                             "plan: memory backend '%s' is not on the command "
                             "line",
                             memdev);
    return bind_backend(rw, m, b, done, error);
  }
  if (m->caller_set)
    return TRUE;
  /* -mem-path cannot go with -machine memory-backend or memdev=: it becomes
   * the mem-path of the backends made here, as QEMU makes its own. */
  /* A node's mem= (machine types up to 5.0): no backend to bind; the
   * process's memory policy holds it. */
  if (m->gnode >= 0)
    return TRUE;
  /* --preconfig: the caller may give the guest nodes over QMP
   * (set-numa-node), and QEMU then refuses a -machine memory-backend beside
   * their memdev=. The process's memory policy holds the RAM instead. */
  if (a->preconfig)
    return TRUE;
  g_auto(hwloc_bitmap_t) tc_nodes =
      a->mem_prealloc && prealloc_context_usable(a)
          ? nodes_with_cpus(m->host_nodes)
          : NULL;
  return bind_guest_ram(rw, m, tc_nodes, error);
}

/* --vnuma=auto on a guest without -numa: a guest topology mirroring the
 * placement. -smp options merge, the last value of a key winning, so the
 * one added at the end decides. Guest nodes (with their own backends) only
 * where the caller left the RAM to QEMU. Returns TRUE if it made the guest
 * nodes, which then hold all the RAM. */
static gboolean
apply_vnuma(Rewrite *rw, const QpPlan *plan)
{
  const QpQemuArgs *a = rw->args;
  rewrite_append(
      rw, "-smp",
      g_strdup_printf(
          "cpus=%u,maxcpus=%u,sockets=%u,dies=%u,cores=%u,threads=%u",
          a->req->vcpus, plan->n_vcpus, plan->vnuma_sockets,
          MAX(plan->vnuma_dies, 1), plan->vnuma_cores, plan->vnuma_threads));
  /* The caller's modules would stay in the merge: one per die, said only
   * when the caller said modules (QEMU 7.2 refuses the key). */
  if (a->req->modules > 1)
    rewrite_append(rw, "-smp", g_strdup("modules=1"));
  if (plan->n_vnodes == 0 || a->machine_memdev != NULL || a->mem_path != NULL)
    return FALSE;
  for (guint i = 0; i < plan->n_vnodes; i++) {
    const QpPlanVnode *v = &plan->vnodes[i];
    g_autofree char *id = g_strdup_printf("qemu-pin-vnode%d", v->id);
    g_auto(hwloc_bitmap_t) host = hwloc_bitmap_alloc();
    hwloc_bitmap_set(host, (unsigned)v->host_node);
    rewrite_append(rw, "-object",
                   new_backend(id, NULL, v->mem_mib * QP_MiB, host,
                               QP_POLICY_BIND, FALSE));
    GString *node = g_string_new("node");
    g_autofree char *nodeid = g_strdup_printf("%d", v->id);
    qp_kv_append(node, "nodeid", nodeid);
    /* A list with gaps takes one cpus= per range. */
    qp_kv_append_set(node, "cpus", v->vcpus);
    qp_kv_append(node, "memdev", id);
    rewrite_append(rw, "-numa", g_string_free(node, FALSE));
  }
  for (guint x = 0; plan->vnode_distance != NULL && x < plan->n_vnodes; x++)
    for (guint y = 0; y < plan->n_vnodes; y++) {
      if (x == y)
        continue;
      rewrite_append(
          rw, "-numa",
          g_strdup_printf("dist,src=%d,dst=%d,val=%u", plan->vnodes[x].id,
                          plan->vnodes[y].id,
                          plan->vnode_distance[x * plan->n_vnodes + y]));
    }
  return TRUE;
}

char *
qp_qemu_args_prealloc_note(const QpQemuArgs *args, const QpPlan *plan)
{
  if (prealloc_context_usable(args) || !args->req->prealloc)
    return NULL;
  gboolean bound = FALSE;
  for (guint k = 0; plan != NULL && k < plan->n_mem; k++)
    bound |= plan->mem[k].host_nodes != NULL &&
             !hwloc_bitmap_iszero(plan->mem[k].host_nodes);
  if (!bound)
    return NULL;
  return g_strdup(
      "-daemonize: preallocating without a thread-context (QEMU starts its "
      "thread before the fork, and the daemon would wait for it forever); "
      "memory stays bound by host-nodes/policy, preallocation threads run on "
      "the startup CPUs");
}

char *
qp_qemu_args_file_backends_say(const QpQemuArgs *args, const QpPlan *plan,
                               gboolean *warning)
{
  g_autoptr(GString) unbound = g_string_new(NULL);
  for (guint i = 0; i < args->backends->len; i++) {
    const QpBackend *b = g_ptr_array_index(args->backends, i);
    if (b->argi == QP_ARGI_IN_FILE && b->host_nodes == NULL)
      g_string_append_printf(unbound, "%s'%s'", unbound->len ? ", " : "",
                             b->id);
  }
  if (unbound->len == 0)
    return NULL;
  *warning = plan == NULL || plan->mem_nodes == NULL ||
             hwloc_bitmap_weight(plan->mem_nodes) != 1;
  if (*warning)
    return g_strdup_printf("memory backends %s of -readconfig files cannot "
                           "be given host-nodes: the process's memory "
                           "policy binds them",
                           unbound->str);
  return g_strdup_printf("memory backends %s of -readconfig files are bound "
                         "by the process's memory policy, to the plan's one "
                         "host node",
                         unbound->str);
}

/* The id of the private monitor's chardev: "qemu-pin-qmp", else with a
 * number, so that no word of the caller's holds it (QEMU refuses an id
 * given twice, and a caller may have chosen the same one). */
static char *
monitor_id(const QpQemuArgs *args)
{
  char *id = g_strdup("qemu-pin-qmp");
  for (guint n = 1;; n++) {
    guint i = 0;
    while (i < args->argc && strstr(args->argv[i], id) == NULL)
      i++;
    if (i == args->argc)
      return id;
    g_free(id);
    id = g_strdup_printf("qemu-pin-qmp%u", n);
  }
}

/* The argv of RW: ARGV0, the caller's arguments as RW changed them, what
 * RW adds at the end, then -S and the private monitor on QMP_FD. */
static char **
rewrite_argv(const Rewrite *rw, const char *argv0, int qmp_fd)
{
  const QpQemuArgs *args = rw->args;
  GPtrArray *out = g_ptr_array_new();
  g_ptr_array_add(out, g_strdup(argv0));
  for (guint i = 0; i < args->argc; i++) {
    for (guint j = 0; rw->before[i] != NULL && j < rw->before[i]->len; j++)
      g_ptr_array_add(out, g_strdup(g_ptr_array_index(rw->before[i], j)));
    if (!rw->drop[i])
      g_ptr_array_add(
          out, g_strdup(rw->replace[i] ? rw->replace[i] : args->argv[i]));
  }
  for (guint j = 0; j < rw->tail->len; j++)
    g_ptr_array_add(out, g_strdup(g_ptr_array_index(rw->tail, j)));
  /* Paused until the keeper has pinned, when a thread needs CPUs other
   * than the startup CPUs it inherits (plan->pause). Not for -incoming:
   * the guest cannot run before the migration completes anyway, and QEMU
   * starts it then unless the caller said -S; our -S would keep it
   * paused. */
  if (!args->has_S && args->incoming == NULL &&
      (rw->plan == NULL || rw->plan->pause))
    g_ptr_array_add(out, g_strdup("-S"));
  if (qmp_fd >= 0) {
    g_autofree char *id = monitor_id(args);
    g_ptr_array_add(out, g_strdup("-chardev"));
    g_ptr_array_add(out, g_strdup_printf("socket,id=%s,fd=%d", id, qmp_fd));
    g_ptr_array_add(out, g_strdup("-mon"));
    g_ptr_array_add(out, g_strdup_printf("chardev=%s,mode=control", id));
  }
  g_ptr_array_add(out, NULL);
  return (char **)g_ptr_array_free(out, FALSE);
}

static void
rewrite_clear(Rewrite *rw)
{
  for (guint i = 0; i <= rw->args->argc; i++) {
    g_free(rw->replace[i]);
    if (rw->before[i])
      g_ptr_array_unref(rw->before[i]);
  }
  g_free(rw->replace);
  g_free(rw->before);
  g_free(rw->drop);
  g_ptr_array_unref(rw->tail);
}

char **
qp_qemu_args_rewrite(const QpQemuArgs *args, const char *argv0,
                     const QpPlan *plan, int qmp_fd, GError **error)
{
  guint argc = args->argc;
  Rewrite rw = {.args = args,
                .plan = plan,
                .replace = g_new0(char *, argc + 1),
                .drop = g_new0(gboolean, argc + 1),
                .before = g_new0(GPtrArray *, argc + 1),
                .tail = g_ptr_array_new_with_free_func(g_free)};
  g_autoptr(GHashTable) done = g_hash_table_new(g_str_hash, g_str_equal);
  gboolean ok = TRUE;

  /* With guest nodes made for --vnuma, they hold the guest's RAM. */
  gboolean vnodes = plan != NULL && plan->vnuma && args->req->n_gnodes == 0 &&
                    apply_vnuma(&rw, plan);
  for (guint k = 0; plan != NULL && ok && k < plan->n_mem; k++)
    if (!(vnodes && plan->mem[k].gnode < 0 && plan->mem[k].kind == QP_MEM_RAM))
      ok = apply_mem(&rw, &plan->mem[k], done, error);
  /* Devices on their guest node: after every device of the caller's, so
   * that none without bus= lands on qemu-pin's buses. */
  g_autoptr(GArray) moved = g_array_new(FALSE, FALSE, sizeof(guint));
  qp_device_buses(args, plan, vnodes, rw.tail, moved);
  for (guint i = 0; i < moved->len; i++)
    rw.drop[g_array_index(moved, guint, i)] = TRUE;
  char **out = ok ? rewrite_argv(&rw, argv0, qmp_fd) : NULL;
  rewrite_clear(&rw);
  return out;
}
