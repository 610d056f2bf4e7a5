/* The keeper's watch over guest memory plugged while the VM runs (see
 * memory.h).
 *
 * Each memory backend QEMU has is tracked by its id. Those present when
 * the keeper starts were planned: the RAM stays as claimed for good; a
 * memory device's or an unused backend's claim is the plan's, and changes
 * from then on. A backend that appears later (object-add) is classified
 * from QOM (its type, hugetlb, mem-path) as the command line's would be.
 * What a backend should hold:
 *   - used by pc-dimm, nvdimm or virtio-pmem: its size;
 *   - used by virtio-mem: its requested-size (at most its size);
 *   - used by no device: what it holds already, or for a new backend what
 *     it takes at start (its size when it preallocates, reserves
 *     hugetlb pages or QEMU locks its memory, -overcommit mem-lock=on,
 *     else nothing);
 *   - gone (object-del): nothing.
 * More is claimed where the backend is bound (its host-nodes), else where
 * the RAM of its device's guest node is; less is given back from the
 * nodes it was claimed on. An unused backend deleted and made again under
 * the same id between two looks is told by its size or prealloc: the old
 * one's claim goes back, the new one is claimed as new. Memory that did
 * not fit is tried again every RETRY_MS, since a VM that left may have made
 * room. */
#include "launcher/keeper/memory.h"

#include <string.h>

#include "launcher/log.h"
#include "launcher/qemu/memory.h"
#include "topology/plan/claim.h"
#include "topology/ledger/ledger.h"

#define MiB (G_GUINT64_CONSTANT(1) << 20)
/* How often memory that did not fit is tried again. */
#define RETRY_MS 5000

typedef struct {
  char *id;
  gboolean tracked;  /* FALSE: RAM, or no RAM of the host (DAX, SGX) */
  gboolean fresh;    /* appeared after the start, not looked at yet */
  guint64 page_kib;  /* 0: ordinary memory */
  GArray *taken;     /* of QpNodeUnits: what the VM's claim holds for it */
  guint64 failed;    /* units it could not get (said once), 0 if none */
  gint64 retry_at;   /* when to try those again (room may have freed) */
  guint64 size;      /* as last seen, with prealloc: an object-del and */
  gboolean prealloc; /* object-add under the same id changes them */
  gboolean bound;    /* the caller gave it host-nodes (added after start) */
  gboolean device;   /* a memory device uses it, of guest node gnode */
  int gnode;
} Backend;

struct QpMemWatch {
  const QpKeeperConfig *cfg;
  const QpPlan *const *plan; /* the keeper's plan now (a move changes it) */
  QpHeldClaim *claim;        /* the keeper's */
  GHashTable *backends;      /* id -> Backend */
};

/* What QEMU says of one backend (query-memdev) and its device. */
typedef struct {
  const char *id;
  guint64 size;
  gboolean prealloc;
  gboolean reserve;
  const QpJv *host_nodes; /* an array, or NULL */
  const char *policy;
  const QpJv *device; /* "data" of its query-memory-devices entry, or NULL */
  const char *type;   /* that entry's "type" */
} Seen;

static void
backend_free(gpointer p)
{
  Backend *b = p;
  g_free(b->id);
  if (b->taken != NULL)
    g_array_unref(b->taken);
  g_free(b);
}

void
qp_mem_watch_free(QpMemWatch *w)
{
  if (w == NULL)
    return;
  g_hash_table_unref(w->backends);
  g_free(w);
}

gboolean
qp_mem_watch_event(const char *name)
{
  static const char *const events[] = {
      "DEVICE_DELETED", "MEMORY_DEVICE_SIZE_CHANGE", "ACPI_DEVICE_OST", NULL};
  return g_strv_contains(events, name);
}

static guint64
units_of(guint64 bytes, guint64 page_kib)
{
  if (page_kib == 0)
    return bytes / MiB + (bytes % MiB != 0);
  guint64 kib = bytes / 1024 + (bytes % 1024 != 0);
  return kib / page_kib + (kib % page_kib != 0);
}

static guint64
units_held(const Backend *b)
{
  guint64 n = 0;
  for (guint i = 0; i < b->taken->len; i++)
    n += g_array_index(b->taken, QpNodeUnits, i).units;
  return n;
}

static char *
amount(guint64 units, guint64 page_kib)
{
  if (page_kib == 0)
    return g_strdup_printf("%" G_GUINT64_FORMAT " MiB", units);
  return g_strdup_printf("%" G_GUINT64_FORMAT " x %" G_GUINT64_FORMAT
                         " KiB hugepages",
                         units, page_kib);
}

/* ---- what QEMU has ------------------------------------------------------ */

static const QpJv *
query(QpQmp *qmp, const char *command, QpJv **keep, GError **error)
{
  *keep = qp_qmp_execute(qmp, command, NULL, error);
  if (*keep == NULL)
    return NULL;
  if (!qp_jv_is(*keep, QP_JV_ARRAY)) {
    g_set_error(error, QP_QMP_ERROR, QP_QMP_ERROR_PROTOCOL,
                "%s: expected an array", command);
    return NULL;
  }
  return *keep;
}

/* "/objects/mem1" -> "mem1" */
static const char *
backend_of_path(const char *path)
{
  const char *prefix = "/objects/";
  return path != NULL && g_str_has_prefix(path, prefix) ? path + strlen(prefix)
                                                        : path;
}

/* The backends and their devices: an array of Seen. */
static GArray *
look(QpQmp *qmp, QpJv **keep_memdev, QpJv **keep_devices, GError **error)
{
  const QpJv *memdevs = query(qmp, "query-memdev", keep_memdev, error);
  if (memdevs == NULL)
    return NULL;
  const QpJv *devices = query(qmp, "query-memory-devices", keep_devices, error);
  if (devices == NULL)
    return NULL;
  GArray *seen = g_array_new(FALSE, TRUE, sizeof(Seen));
  for (guint i = 0; i < qp_jv_len(memdevs); i++) {
    const QpJv *o = qp_jv_item(memdevs, i);
    Seen s = {0};
    s.id = qp_jv_get_string_or(o, "id", NULL);
    if (s.id == NULL)
      continue;
    s.size = (guint64)qp_jv_get_int_or(o, "size", 0);
    s.prealloc = qp_jv_get_bool_or(o, "prealloc", FALSE);
    s.reserve = qp_jv_get_bool_or(o, "reserve", TRUE);
    s.policy = qp_jv_get_string_or(o, "policy", NULL);
    if (qp_jv_is(qp_jv_get(o, "host-nodes"), QP_JV_ARRAY))
      s.host_nodes = qp_jv_get(o, "host-nodes");
    g_array_append_val(seen, s);
  }
  for (guint i = 0; i < qp_jv_len(devices); i++) {
    const QpJv *o = qp_jv_item(devices, i);
    const QpJv *d = qp_jv_get(o, "data");
    if (!qp_jv_is(d, QP_JV_OBJECT))
      continue;
    const char *id = backend_of_path(qp_jv_get_string_or(d, "memdev", NULL));
    for (guint k = 0; id != NULL && k < seen->len; k++) {
      Seen *s = &g_array_index(seen, Seen, k);
      if (strcmp(s->id, id) == 0 && s->device == NULL) {
        s->device = d;
        s->type = qp_jv_get_string_or(o, "type", "");
      }
    }
  }
  return seen;
}

/* ---- where memory goes -------------------------------------------------- */

static hwloc_bitmap_t
claim_nodes(const QpPlanMem *m)
{
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  for (guint i = 0; m->claim != NULL && i < m->claim->len; i++)
    hwloc_bitmap_set(set,
                     (unsigned)g_array_index(m->claim, QpNodeUnits, i).node);
  return set;
}

/* Where the RAM of guest node GNODE (-1: of the guest) is. */
static hwloc_bitmap_t
guest_node_nodes(const QpPlan *plan, int gnode)
{
  for (guint i = 0; i < plan->n_mem; i++) {
    const QpPlanMem *m = &plan->mem[i];
    if (m->kind != QP_MEM_RAM || (m->gnode != gnode && m->gnode >= 0))
      continue;
    if (m->host_nodes != NULL)
      return hwloc_bitmap_dup(m->host_nodes);
    hwloc_bitmap_t set = claim_nodes(m);
    if (!hwloc_bitmap_iszero(set))
      return set;
    hwloc_bitmap_free(set);
  }
  return hwloc_bitmap_dup(plan->host_nodes);
}

static const QpPlanMem *plan_piece(const QpPlan *plan, const char *memdev);

/* Where more memory of S goes: where the plan binds its backend (QEMU
 * still reports the host-nodes of the command line after a move, which
 * rebinds the memory through a cgroup), else the backend's host-nodes when
 * bound, else its device's guest node's. */
static hwloc_bitmap_t
target_nodes(const QpMemWatch *w, const Seen *s)
{
  const QpPlanMem *m = plan_piece(*w->plan, s->id);
  if (m != NULL && m->kind != QP_MEM_RAM && m->host_nodes != NULL &&
      !hwloc_bitmap_iszero(m->host_nodes))
    return hwloc_bitmap_dup(m->host_nodes);
  if (qp_jv_len(s->host_nodes) > 0 && g_strcmp0(s->policy, "default") != 0) {
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    for (guint i = 0; i < qp_jv_len(s->host_nodes); i++)
      hwloc_bitmap_set(set,
                       (unsigned)qp_jv_get_int(qp_jv_item(s->host_nodes, i)));
    return set;
  }
  int node = (int)qp_jv_get_int_or(s->device, "node", 0);
  return guest_node_nodes(*w->plan, node);
}

/* ---- backends ----------------------------------------------------------- */

static const QpPlanMem *
plan_piece(const QpPlan *plan, const char *memdev)
{
  for (guint i = 0; i < plan->n_mem; i++)
    if (g_strcmp0(plan->mem[i].memdev, memdev) == 0)
      return &plan->mem[i];
  return NULL;
}

static Backend *
backend_new(const char *id)
{
  Backend *b = g_new0(Backend, 1);
  b->id = g_strdup(id);
  b->taken = g_array_new(FALSE, FALSE, sizeof(QpNodeUnits));
  return b;
}

static QpJv *
qom_get(QpQmp *qmp, const char *id, const char *property, GError **error)
{
  g_autoptr(QpJv) args = qp_jv_object();
  g_autofree char *path = g_strdup_printf("/objects/%s", id);
  qp_jv_set(args, "path", qp_jv_string(path));
  qp_jv_set(args, "property", qp_jv_string(property));
  return qp_qmp_execute(qmp, "qom-get", args, error);
}

/* A backend made after the start: its page size and whether it is RAM of
 * the host, from QOM, as the command line's are read. FALSE when QOM no
 * longer has it: the caller deleted it between query-memdev and this
 * question (an orchestrator's object-del right after DEVICE_DELETED, the
 * event that brought the look). It is not known then: the next look finds
 * it gone, or finds a backend made again under its id and asks again. */
static gboolean
classify(Backend *b, QpQmp *qmp, const Seen *s)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(QpJv) type = qom_get(qmp, b->id, "type", &error);
  if (type == NULL && error != NULL &&
      strstr(error->message, ": DeviceNotFound: ") != NULL)
    return FALSE;
  if (!qp_jv_is(type, QP_JV_STRING)) {
    qp_warning("keeper: memory backend %s: its type is unknown: it is not "
               "claimed",
               b->id);
    return TRUE;
  }
  QpBackend qb = {.id = b->id,
                  .qom_type = (char *)qp_jv_get_string(type),
                  .size_bytes = s->size};
  g_autoptr(QpJv) hugetlb = NULL, hugetlbsize = NULL, mem_path = NULL;
  g_autoptr(QpJv) readonly = NULL;
  if (strcmp(qb.qom_type, "memory-backend-memfd") == 0) {
    hugetlb = qom_get(qmp, b->id, "hugetlb", NULL);
    hugetlbsize = qom_get(qmp, b->id, "hugetlbsize", NULL);
    qb.hugetlb = qp_jv_get_bool(hugetlb);
    qb.hugetlbsize_kib = (guint64)qp_jv_get_int(hugetlbsize) / 1024;
  } else if (strcmp(qb.qom_type, "memory-backend-file") == 0) {
    mem_path = qom_get(qmp, b->id, "mem-path", NULL);
    qb.mem_path = (char *)qp_jv_get_string(mem_path);
    readonly = qom_get(qmp, b->id, "readonly", NULL);
    qb.readonly = qp_jv_get_bool(readonly);
  }
  qp_backend_classify(&qb);
  b->tracked = qp_backend_is_ram(&qb);
  b->page_kib = qb.page_kib;
  return TRUE;
}

/* Whether backend ID was on QEMU's command line (CFG->start_backends, or
 * one the rewrite made); without the list, every backend of the first look
 * counts as such. */
static gboolean
at_start(const QpKeeperConfig *cfg, const char *id)
{
  if (cfg->start_backends == NULL || g_str_has_prefix(id, "qemu-pin-"))
    return TRUE;
  return g_strv_contains(cfg->start_backends, id);
}

QpMemWatch *
qp_mem_watch_new(const QpKeeperConfig *cfg, const QpPlan *const *plan,
                 QpHeldClaim *claim, QpQmp *qmp)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(QpJv) keep_memdev = NULL, keep_devices = NULL;
  g_autoptr(GArray) seen = look(qmp, &keep_memdev, &keep_devices, &error);
  if (seen == NULL) {
    /* A monitor that closed is QEMU leaving (a guest that powered off as
     * the keeper asked): the keeper's next step finds it gone, which is no
     * news. */
    if (!g_error_matches(error, QP_QMP_ERROR, QP_QMP_ERROR_IO))
      qp_warning("keeper: memory plugged later is not claimed: %s",
                 error->message);
    return NULL;
  }
  QpMemWatch *w = g_new0(QpMemWatch, 1);
  w->cfg = cfg;
  w->plan = plan;
  w->claim = claim;
  w->backends =
      g_hash_table_new_full(g_str_hash, g_str_equal, NULL, backend_free);
  for (guint i = 0; i < seen->len; i++) {
    const Seen *s = &g_array_index(seen, Seen, i);
    /* Plugged before this look: the first update claims it. */
    if (!at_start(cfg, s->id))
      continue;
    Backend *b = backend_new(s->id);
    b->size = s->size;
    b->prealloc = s->prealloc;
    const QpPlanMem *m = plan_piece(*plan, s->id);
    if (m != NULL && m->kind != QP_MEM_RAM) {
      b->tracked = TRUE;
      b->page_kib = m->page_kib;
      g_array_append_vals(b->taken, m->claim->data, m->claim->len);
    }
    g_hash_table_insert(w->backends, b->id, b);
  }
  return w;
}

/* Ledger edit: UNITS more memory of PAGE_KIB on NODES, if they hold it;
 * what each node took goes to GOT. Only the claim's memory changes. */
typedef struct {
  const QpHost *host;
  const QpPlacementOptions *placement;
  hwloc_const_bitmap_t nodes;
  guint64 page_kib;
  guint64 units;
  GArray *got; /* of QpNodeUnits */
} AddMemory;

static gboolean
add_memory(QpClaim *claim, const QpClaims *claims, gpointer data,
           GError **error)
{
  const AddMemory *m = data;
  return qp_claim_add_memory(m->host, claims, m->placement, claim, m->nodes,
                             m->page_kib, m->units, m->got, error);
}

/* Ledger edit: UNITS of PAGE_KIB memory given back from TAKEN's nodes. */
typedef struct {
  GArray *taken; /* of QpNodeUnits */
  guint64 page_kib;
  guint64 units;
} DropMemory;

static gboolean
drop_memory(QpClaim *claim, const QpClaims *claims, gpointer data,
            GError **error)
{
  const DropMemory *d = data;
  qp_claim_drop_memory(claim, d->taken, d->page_kib, d->units);
  return TRUE;
}

static char *
who(const Backend *b, const Seen *s)
{
  if (s == NULL || s->device == NULL)
    return g_strdup_printf("memory backend %s", b->id);
  const char *dev = qp_jv_get_string_or(s->device, "id", NULL);
  return g_strdup_printf("%s%s%s (memory backend %s)", s->type,
                         dev != NULL ? " " : "", dev != NULL ? dev : "", b->id);
}

/* Claims WANT - held units of B more; says in the log when they do not
 * fit (once per amount). */
static void
grow(QpMemWatch *w, Backend *b, const Seen *s, guint64 want)
{
  guint64 more = want - units_held(b);
  /* What did not fit is tried again now and then: a VM that left may
   * have made room. Said once. */
  gboolean again = b->failed == want;
  if (again && g_get_monotonic_time() < b->retry_at)
    return;
  g_autoptr(GError) error = NULL;
  g_autoptr(QpHost) host = qp_host_load_full(w->cfg->topology, FALSE, &error);
  g_auto(hwloc_bitmap_t) nodes = target_nodes(w, s);
  g_autoptr(GArray) got = g_array_new(FALSE, FALSE, sizeof(QpNodeUnits));
  AddMemory add = {host, w->cfg->placement, nodes, b->page_kib, more, got};
  gboolean ok =
      host != NULL && qp_held_claim_adjust(w->claim, add_memory, &add, &error);
  if (!ok && got->len > 0) { /* the write failed: the memory is not ours */
    DropMemory undo = {got, b->page_kib, more};
    qp_held_claim_amend(w->claim, drop_memory, &undo);
  }
  g_autofree char *name = who(b, s);
  g_autofree char *what = amount(more, b->page_kib);
  if (!ok) {
    b->failed = want;
    b->retry_at = g_get_monotonic_time() + (gint64)RETRY_MS * 1000;
    if (!again)
      qp_warning("%s was plugged but its %s could not be claimed: %s", name,
                 what, error->message);
    return;
  }
  b->failed = 0;
  for (guint i = 0; i < got->len; i++) {
    const QpNodeUnits *u = &g_array_index(got, QpNodeUnits, i);
    QpNodeUnits *t = NULL;
    for (guint k = 0; k < b->taken->len && t == NULL; k++)
      if (g_array_index(b->taken, QpNodeUnits, k).node == u->node)
        t = &g_array_index(b->taken, QpNodeUnits, k);
    if (t != NULL)
      t->units += u->units;
    else
      g_array_append_val(b->taken, *u);
  }
  g_autofree char *where = qp_list_format(nodes);
  qp_info("keeper: %s: %s claimed on host nodes %s", name, what, where);
}

/* Gives back the held units of B above WANT. */
static void
shrink(QpMemWatch *w, Backend *b, const Seen *s, guint64 want)
{
  guint64 less = units_held(b) - want;
  g_autoptr(GError) error = NULL;
  DropMemory drop = {b->taken, b->page_kib, less};
  if (!qp_held_claim_adjust(w->claim, drop_memory, &drop, &error)) {
    qp_warning("keeper: cannot give back memory of %s: %s", b->id,
               error->message);
    if (units_held(b) > want)
      return; /* the ledger could not be read: nothing was given back */
  }
  b->failed = 0;
  g_autofree char *name = who(b, s);
  g_autofree char *what = amount(less, b->page_kib);
  qp_info("keeper: %s: %s given back", name, what);
}

/* What backend B should hold now. */
static guint64
wanted(const QpMemWatch *w, const Backend *b, const Seen *s)
{
  if (s == NULL)
    return 0; /* object-del */
  if (s->device == NULL) {
    if (!b->fresh)
      return units_held(b);
    return s->prealloc || w->cfg->mem_lock || (b->page_kib != 0 && s->reserve)
               ? units_of(s->size, b->page_kib)
               : 0;
  }
  guint64 bytes = s->size;
  if (g_strcmp0(s->type, "virtio-mem") == 0)
    bytes =
        MIN(bytes, (guint64)qp_jv_get_int_or(s->device, "requested-size", 0));
  return units_of(bytes, b->page_kib);
}

void
qp_mem_watch_update(QpMemWatch *w, QpQmp *qmp)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(QpJv) keep_memdev = NULL, keep_devices = NULL;
  g_autoptr(GArray) seen = look(qmp, &keep_memdev, &keep_devices, &error);
  if (seen == NULL) {
    /* QEMU going away while we look is no news. */
    if (!g_error_matches(error, QP_QMP_ERROR, QP_QMP_ERROR_IO))
      qp_warning("keeper: looking at memory devices: %s", error->message);
    return;
  }
  for (guint i = 0; i < seen->len; i++) {
    const Seen *s = &g_array_index(seen, Seen, i);
    Backend *b = g_hash_table_lookup(w->backends, s->id);
    /* Deleted and made again under the same id between two looks (only a
     * backend no device uses can be): a new backend. What the old one
     * held goes back first. */
    if (b != NULL && s->device == NULL &&
        (b->size != s->size || b->prealloc != s->prealloc)) {
      if (b->tracked && units_held(b) > 0)
        shrink(w, b, NULL, 0);
      g_hash_table_remove(w->backends, s->id);
      b = NULL;
    }
    if (b == NULL) {
      b = backend_new(s->id);
      b->fresh = TRUE;
      if (!classify(b, qmp, s)) {
        backend_free(b);
        continue;
      }
      b->bound =
          qp_jv_len(s->host_nodes) > 0 && g_strcmp0(s->policy, "default") != 0;
      g_hash_table_insert(w->backends, b->id, b);
    }
    b->size = s->size;
    b->prealloc = s->prealloc;
    b->device = s->device != NULL;
    b->gnode = (int)qp_jv_get_int_or(s->device, "node", 0);
    if (b->tracked) {
      guint64 want = wanted(w, b, s), held = units_held(b);
      if (want > held)
        grow(w, b, s, want);
      else if (want < held)
        shrink(w, b, s, want);
    }
    b->fresh = FALSE;
  }
  /* Backends QEMU no longer has. */
  GHashTableIter it;
  gpointer key, value;
  g_hash_table_iter_init(&it, w->backends);
  while (g_hash_table_iter_next(&it, &key, &value)) {
    Backend *b = value;
    gboolean present = FALSE;
    for (guint i = 0; i < seen->len && !present; i++)
      present = strcmp(g_array_index(seen, Seen, i).id, b->id) == 0;
    if (present)
      continue;
    if (b->tracked && units_held(b) > 0)
      shrink(w, b, NULL, 0);
    g_hash_table_iter_remove(&it);
  }
}

/* Backends added after the start whose memory the claim holds. */
static gboolean
plugged(const QpMemWatch *w, const Backend *b)
{
  return b->tracked && !at_start(w->cfg, b->id) && units_held(b) > 0;
}

const char *
qp_mem_watch_caller_bound(const QpMemWatch *w)
{
  if (w == NULL)
    return NULL;
  GHashTableIter it;
  gpointer value;
  g_hash_table_iter_init(&it, w->backends);
  while (g_hash_table_iter_next(&it, NULL, &value)) {
    const Backend *b = value;
    if (plugged(w, b) && b->bound)
      return b->id;
  }
  return NULL;
}

/* What backend B holds, in MiB as a request says it. */
static guint64
held_mib(const Backend *b)
{
  guint64 units = units_held(b);
  return b->page_kib != 0 ? units * b->page_kib / 1024 : units;
}

void
qp_mem_watch_request_devices(const QpMemWatch *w, gboolean vnuma,
                             GArray *devmem)
{
  if (w == NULL)
    return;
  for (guint i = 0; i < devmem->len; i++) {
    QpMemDevice *d = &g_array_index(devmem, QpMemDevice, i);
    const Backend *b =
        d->memdev != NULL ? g_hash_table_lookup(w->backends, d->memdev) : NULL;
    if (b != NULL && b->tracked)
      d->mib = held_mib(b);
  }
  GHashTableIter it;
  gpointer value;
  g_hash_table_iter_init(&it, w->backends);
  while (g_hash_table_iter_next(&it, NULL, &value)) {
    const Backend *b = value;
    if (!plugged(w, b))
      continue;
    QpMemDevice d = {.kind = b->device ? QP_MEM_DIMM : QP_MEM_UNUSED,
                     .gnode = vnuma && b->device ? b->gnode : -1,
                     .memdev = b->id,
                     .mib = held_mib(b),
                     .page_kib = b->page_kib,
                     .policy = QP_POLICY_DEFAULT};
    g_array_append_val(devmem, d);
  }
}

void
qp_mem_watch_rehome(QpMemWatch *w)
{
  if (w == NULL)
    return;
  GHashTableIter it;
  gpointer value;
  g_hash_table_iter_init(&it, w->backends);
  while (g_hash_table_iter_next(&it, NULL, &value)) {
    Backend *b = value;
    const QpPlanMem *m = plan_piece(*w->plan, b->id);
    if (!b->tracked || m == NULL || m->kind == QP_MEM_RAM || m->claim == NULL)
      continue;
    g_array_set_size(b->taken, 0);
    g_array_append_vals(b->taken, m->claim->data, m->claim->len);
  }
}
