#include "launcher/qemu/devices.h"

#include <stdlib.h>
#include <string.h>

#include "launcher/qemu/numbers.h"
#include "launcher/qemu/option-table.h"
#include "launcher/qemu/props.h"
#include "launcher/qemu/smp.h"

/* A hex field of a PCI address at *P, at most MAX; *P left after it. */
static gboolean
hex_field(const char **p, guint64 max, guint64 *out)
{
  const char *s = *p;
  guint64 v = 0;
  if (!g_ascii_isxdigit(*s) || !qp_read_digits(&s, 16, &v) || v > max)
    return FALSE;
  *p = s;
  *out = v;
  return TRUE;
}

/* "[domain:]bus:slot.function" (hex, function decimal 0-7) to the canonical
 * "0000:01:00.0", or NULL. */
static char *
normalise_bdf(const char *text)
{
  const char *p = text;
  guint64 a, b, dom = 0, bus, slot, fn;
  if (!hex_field(&p, 0xffff, &a) || *p++ != ':' || !hex_field(&p, 0xffff, &b))
    return NULL;
  if (*p == ':') {
    p++;
    dom = a;
    bus = b;
    if (!hex_field(&p, 0x1f, &slot))
      return NULL;
  } else {
    bus = a;
    slot = b;
  }
  if (bus > 0xff || slot > 0x1f || *p++ != '.' || *p < '0' || *p > '7' || p[1])
    return NULL;
  fn = (guint64)(*p - '0');
  return g_strdup_printf("%04" G_GINT64_MODIFIER "x:%02" G_GINT64_MODIFIER
                         "x:%02" G_GINT64_MODIFIER "x.%" G_GINT64_MODIFIER "x",
                         dom, bus, slot, fn);
}

/* The PCI device behind a vfio-pci sysfsdev= path: the path resolved
 * (symlinks and all, as QEMU opens it) is the device's sysfs directory, and
 * the nearest component that is a PCI address is the device itself
 * (/sys/bus/pci/devices/BDF) or, for a mediated device
 * (/sys/bus/mdev/devices/UUID, which resolves under its parent), the parent
 * whose locality it shares. A path that does not resolve (the device is on
 * another host) names the device by its last component when that is an
 * address. NULL when neither gives one. */
static char *
sysfsdev_bdf(const char *path)
{
  g_autofree char *real = realpath(path, NULL);
  g_auto(GStrv) parts = g_strsplit(real != NULL ? real : path, "/", -1);
  for (guint n = g_strv_length(parts); n > 0; n--) {
    char *bdf = normalise_bdf(parts[n - 1]);
    if (bdf != NULL || real == NULL)
      return bdf;
  }
  return NULL;
}

/* Whether DRIVER is an x86 vCPU ("qemu64-x86_64-cpu", "max-i386-cpu"). */
static gboolean
is_cpu_driver(const char *driver)
{
  return driver != NULL && (g_str_has_suffix(driver, "-x86_64-cpu") ||
                            g_str_has_suffix(driver, "-i386-cpu"));
}

/* The id KEY of a vCPU -device P: 1 given (in *OUT), 0 not given, -1 not a
 * number. */
static int
cpu_id(const QpProps *p, const char *key, guint64 *out)
{
  if (!qp_props_has(p, key))
    return 0;
  if (p->json != NULL) {
    *out = qp_props_uint_or_zero(p, key);
    return 1;
  }
  return qp_parse_uint(qp_props_string(p, key), G_MAXUINT32, out) ? 1 : -1;
}

/* Bits of an APIC ID field for COUNT items (apicid_bitwidth_for_count). */
static guint
apic_width(guint count)
{
  return count > 1 ? g_bit_storage(count - 1) : 0;
}

/* The APIC ID of vCPU INDEX in R's topology (x86_apicid_from_topo_ids:
 * thread, core, module, die and socket fields, each as wide as its count
 * needs). */
static guint64
apic_id_of(const QpRequest *r, guint index)
{
  QpTopoIds t = qp_smp_topo_ids(r, index);
  guint tw = apic_width(r->threads), cw = apic_width(r->cores);
  guint mw = apic_width(r->modules), dw = apic_width(r->dies);
  return t.thread | t.core << tw | t.module << (tw + cw) |
         t.die << (tw + cw + mw) | t.socket << (tw + cw + mw + dw);
}

/* The slot (cpu-index) of maxcpus that a vCPU -device P fills, as QEMU
 * 7.2's x86_cpu_pre_plug() finds it: by its apic-id, else by its socket-id,
 * die-id, core-id and thread-id (die-id and module-id may be left out with
 * one per socket). -1 when qemu-pin cannot tell which (QEMU refuses such a
 * device, or knows of ids qemu-pin does not). */
static int
cpu_device_slot(const QpRequest *r, const QpProps *p)
{
  static const char *const keys[] = {"socket-id", "die-id", "module-id",
                                     "core-id", "thread-id"};
  const guint counts[] = {r->sockets, r->dies, r->modules, r->cores,
                          r->threads};
  guint64 ids[G_N_ELEMENTS(keys)] = {0}, apic = 0;
  int has[G_N_ELEMENTS(keys)];
  int has_apic = cpu_id(p, "apic-id", &apic);
  if (has_apic < 0)
    return -1;
  for (guint k = 0; k < G_N_ELEMENTS(keys); k++) {
    has[k] = cpu_id(p, keys[k], &ids[k]);
    if (has[k] < 0 || (has[k] == 0 && has_apic == 0 &&
                       !((k == 1 || k == 2) && counts[k] <= 1)))
      return -1;
  }
  for (guint c = 0; c < r->maxcpus; c++) {
    QpTopoIds t = qp_smp_topo_ids(r, c);
    const guint64 v[] = {t.socket, t.die, t.module, t.core, t.thread};
    gboolean match = TRUE;
    if (has_apic)
      match = apic_id_of(r, c) == apic;
    for (guint k = 0; !has_apic && k < G_N_ELEMENTS(keys); k++)
      match = match && ids[k] == v[k];
    if (match)
      return (int)c;
  }
  return -1;
}

/* Whether DRIVER is a ppc64 pseries vCPU core ("power9_v2.0-spapr-cpu-core",
 * "host-spapr-cpu-core"): threads vCPUs in one device. */
static gboolean
is_spapr_core_driver(const char *driver)
{
  return driver != NULL && g_str_has_suffix(driver, "-spapr-cpu-core");
}

/* The vCPUs of a spapr core -device P plugged at start, added to
 * CPU_SLOTS: QEMU 7.2 gives its threads the cpu-indexes core-id to
 * core-id + threads - 1 (spapr_create_vcpu()); core-id is a multiple of
 * threads below maxcpus, else QEMU refuses the device (the slots are then
 * not known, -1). */
static void
add_spapr_core(const QpRequest *r, const QpProps *p, GArray *cpu_slots)
{
  guint threads = MAX(r->threads, 1);
  guint64 core = 0;
  gboolean known = cpu_id(p, "core-id", &core) == 1 && core % threads == 0 &&
                   core + threads <= r->maxcpus;
  for (guint t = 0; t < threads; t++) {
    int slot = known ? (int)(core + t) : -1;
    g_array_append_val(cpu_slots, slot);
  }
}

/* -device TEXT: a vfio-pci device's host address goes to VFIO; a vCPU
 * plugged at start adds its slot to CPU_SLOTS (of int, -1: not known). */
static gboolean
parse_device(const QpRequest *r, GPtrArray *vfio, GArray *cpu_slots,
             const char *text, GError **error)
{
  g_auto(QpProps) p = {0};
  const char *driver, *host, *sysfsdev;

  if (!qp_props_read(&p, "-device", text, "driver", error) ||
      !qp_props_get_string(&p, "driver", &driver, error) ||
      !qp_props_get_string(&p, "host", &host, error) ||
      !qp_props_get_string(&p, "sysfsdev", &sysfsdev, error))
    return FALSE;
  if (is_cpu_driver(driver)) {
    int slot = cpu_device_slot(r, &p);
    g_array_append_val(cpu_slots, slot);
  } else if (is_spapr_core_driver(driver)) {
    add_spapr_core(r, &p, cpu_slots);
  }
  if (driver == NULL || (strcmp(driver, "vfio-pci") != 0 &&
                         strcmp(driver, "vfio-pci-nohotplug") != 0))
    return TRUE;
  if (host == NULL && sysfsdev != NULL) {
    /* Any path: QEMU reads it. A device whose address cannot be found
     * there keeps the path, and its locality is unknown to the plan. */
    char *bdf = sysfsdev_bdf(sysfsdev);
    g_ptr_array_add(vfio, bdf != NULL ? bdf : g_strdup(sysfsdev));
    return TRUE;
  }
  if (host == NULL)
    return qp_args_invalid(
        error, "-device '%s': vfio-pci needs host= or sysfsdev=", text);
  char *bdf = normalise_bdf(host);
  if (bdf == NULL)
    return qp_args_invalid(
        error,
        "-device '%s': host '%s' is not a PCI address: expected "
        "[domain:]bus:slot.function such as 0000:01:00.0",
        text, host);
  g_ptr_array_add(vfio, bdf);
  return TRUE;
}

/* The boot vCPUs of R with the vCPUs plugged at start in CPU_SLOTS: each
 * fills the free slot its ids name, one whose slot qemu-pin cannot tell
 * the lowest free one. A slot already filled, or none left below maxcpus,
 * is QEMU's to refuse. */
static void
add_cpu_devices(QpRequest *r, GArray *cpu_slots)
{
  g_auto(hwloc_bitmap_t) boot = qp_request_boot_set(r);
  guint unknown = 0;
  for (guint i = 0; i < cpu_slots->len; i++) {
    int slot = g_array_index(cpu_slots, int, i);
    if (slot < 0)
      unknown++;
    else
      hwloc_bitmap_set(boot, (unsigned)slot);
  }
  guint max = MAX(r->maxcpus, 1);
  for (guint c = 0; unknown > 0 && c < max; c++)
    if (!hwloc_bitmap_isset(boot, c)) {
      hwloc_bitmap_set(boot, c);
      unknown--;
    }
  r->vcpus = (guint)hwloc_bitmap_weight(boot);
  hwloc_bitmap_free(r->boot);
  r->boot = g_steal_pointer(&boot);
}

gboolean
qp_devices_read(QpQemuArgs *a, GArray *opts, GPtrArray *devices, GError **error)
{
  g_autoptr(GPtrArray) vfio = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GArray) cpu_slots = g_array_new(FALSE, FALSE, sizeof(int));
  for (guint i = 0; i < opts->len; i++) {
    const QpOpt *o = &g_array_index(opts, QpOpt, i);
    if (!qp_opt_is(o, "device"))
      continue;
    if (!parse_device(a->req, vfio, cpu_slots, o->value, error))
      return FALSE;
    g_ptr_array_add(devices, (gpointer)o->value);
  }
  /* A vCPU -device fills a free slot of maxcpus at start (libvirt's
   * hot-pluggable vCPUs enabled at boot): it runs from the start like
   * the -smp cpus ones, in the slot its ids name. */
  if (cpu_slots->len > 0)
    add_cpu_devices(a->req, cpu_slots);
  if (vfio->len > 0) {
    g_ptr_array_add(vfio, NULL);
    a->req->vfio = (char **)g_ptr_array_steal(vfio, NULL);
  }
  return TRUE;
}
