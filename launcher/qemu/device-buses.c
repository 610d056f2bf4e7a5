#include "launcher/qemu/device-buses.h"

#include <stdlib.h>
#include <string.h>

#include "launcher/qemu/props.h"

/* Bus numbers of qemu-pin's expanders: from the top down, 16 each (the
 * expander's bus and its root ports'), far above what the main hierarchy
 * numbers. Chassis numbers of its root ports: from 224 up. */
#define FIRST_BUS_NR 0xf0
#define BUS_NR_STEP 0x10
#define FIRST_CHASSIS 224

typedef enum { BUS_NONE, BUS_Q35, BUS_PC } BusKind;

static BusKind
bus_kind(const char *machine)
{
  if (machine == NULL)
    return BUS_NONE;
  if (strstr(machine, "q35") != NULL)
    return BUS_Q35;
  if (strcmp(machine, "pc") == 0 || g_str_has_prefix(machine, "pc-"))
    return BUS_PC;
  return BUS_NONE;
}

/* The guest node on host node HOST: the suggested node mirroring it, or
 * the first guest node whose RAM is bound there alone; -1 when none. */
static int
guest_node_of(const QpQemuArgs *a, const QpPlan *plan, gboolean vnodes,
              int host)
{
  for (guint i = 0; vnodes && i < plan->n_vnodes; i++)
    if (plan->vnodes[i].host_node == host)
      return plan->vnodes[i].id;
  if (a->req->n_gnodes == 0 ||
      (plan->mode != QP_MODE_NUMA && plan->mode != QP_MODE_ONE_TO_ONE))
    return -1;
  for (guint m = 0; m < plan->n_mem; m++) {
    const QpPlanMem *pm = &plan->mem[m];
    if (pm->kind == QP_MEM_RAM && pm->gnode >= 0 && pm->host_nodes != NULL &&
        hwloc_bitmap_weight(pm->host_nodes) == 1 &&
        hwloc_bitmap_isset(pm->host_nodes, (unsigned)host))
      return pm->gnode;
  }
  return -1;
}

/* Device D of the plan (the vfio devices, then req->io), and where it is
 * written; FALSE past the last. */
static gboolean
device_at(const QpQemuArgs *a, const QpPlan *plan, guint d, int *host,
          const QpIoPlace **place)
{
  if (a->vfio_places == NULL || a->io_places == NULL || plan->devices == NULL)
    return FALSE;
  guint n_vfio = a->vfio_places->len;
  if (d >= plan->devices->len || d >= n_vfio + a->io_places->len)
    return FALSE;
  *host = ((const QpPlanDevice *)plan->devices->pdata[d])->node;
  *place = d < n_vfio ? &g_array_index(a->vfio_places, QpIoPlace, d)
                      : &g_array_index(a->io_places, QpIoPlace, d - n_vfio);
  return TRUE;
}

static void
add_device(GPtrArray *tail, char *value)
{
  g_ptr_array_add(tail, g_strdup("-device"));
  g_ptr_array_add(tail, value);
}

/* The expander of guest node G (made on first use); its id. */
static const char *
expander(GHashTable *made, GPtrArray *tail, BusKind kind, int g)
{
  const char *id = g_hash_table_lookup(made, GINT_TO_POINTER(g));
  if (id != NULL)
    return id;
  guint k = g_hash_table_size(made);
  char *new_id = g_strdup_printf("qemu-pin-pxb%d", g);
  add_device(tail, g_strdup_printf("%s,id=%s,bus_nr=%u,numa_node=%d,bus=%s",
                                   kind == BUS_Q35 ? "pxb-pcie" : "pxb", new_id,
                                   FIRST_BUS_NR - BUS_NR_STEP * k, g,
                                   kind == BUS_Q35 ? "pcie.0" : "pci.0"));
  g_hash_table_insert(made, GINT_TO_POINTER(g), new_id);
  return new_id;
}

void
qp_device_buses(const QpQemuArgs *a, const QpPlan *plan, gboolean vnodes,
                GPtrArray *tail, GArray *drop)
{
  BusKind kind = bus_kind(a->machine);
  if (plan == NULL || !plan->device_locality || kind == BUS_NONE || a->has_pxb)
    return;
  g_autoptr(GHashTable) made =
      g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
  guint ports = 0;
  int host;
  const QpIoPlace *place;
  for (guint d = 0; device_at(a, plan, d, &host, &place); d++) {
    int g =
        host >= 0 && place->movable ? guest_node_of(a, plan, vnodes, host) : -1;
    if (g < 0)
      continue;
    const char *bus = expander(made, tail, kind, g);
    g_autofree char *port = NULL;
    if (kind == BUS_Q35) {
      port = g_strdup_printf("qemu-pin-rp%u", ports);
      add_device(tail, g_strdup_printf("pcie-root-port,id=%s,bus=%s,chassis=%u",
                                       port, bus, FIRST_CHASSIS + ports));
      ports++;
      bus = port;
    }
    g_auto(QpProps) p = {0};
    if (!qp_props_read(&p, "-device", a->argv[place->vi], "driver", NULL))
      continue;
    qp_props_set_string(&p, "bus", bus);
    add_device(tail, qp_props_to_text(&p));
    guint opt = place->vi - 1, val = place->vi;
    g_array_append_val(drop, opt);
    g_array_append_val(drop, val);
  }
}

/* The guest node of the caller's bus BUS: the numa_node= of the expander
 * it is on, through ports and bridges; -1 when none. */
static int
caller_bus_node(const QpQemuArgs *a, const char *bus)
{
  g_autofree char *cur = g_strndup(bus, strcspn(bus, "."));
  for (guint depth = 0; depth < 8; depth++) {
    const char *up = g_hash_table_lookup(a->pci_buses, cur);
    if (up == NULL)
      return -1;
    if (g_str_has_prefix(up, "node="))
      return up[5] != '\0' ? atoi(up + 5) : -1;
    g_free(cur);
    cur = g_strndup(up, strcspn(up, "."));
  }
  return -1;
}

char *
qp_device_buses_warning(const QpQemuArgs *a, const QpPlan *plan)
{
  if (plan == NULL || !plan->device_locality || a->io_places == NULL ||
      a->pci_buses == NULL)
    return NULL;
  g_autoptr(GString) s = g_string_new(NULL);
  int host;
  const QpIoPlace *place;
  for (guint d = 0; device_at(a, plan, d, &host, &place); d++) {
    int g = place->bus[0] != '\0' ? caller_bus_node(a, place->bus) : -1;
    if (host < 0 || g < 0)
      continue;
    int want = guest_node_of(a, plan, FALSE, host);
    if (want < 0 || want == g)
      continue;
    const QpPlanDevice *dev = plan->devices->pdata[d];
    g_string_append_printf(s,
                           "%s%s is on guest node %d (bus %s) but its host "
                           "node %d is guest node %d's",
                           s->len ? "; " : "", dev->what, g, place->bus, host,
                           want);
  }
  return s->len > 0 ? g_strdup(s->str) : NULL;
}
