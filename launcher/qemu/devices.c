#include "launcher/qemu/devices.h"

#include <stdlib.h>
#include <string.h>

#include "launcher/qemu/numbers.h"
#include "launcher/qemu/option-table.h"
#include "launcher/qemu/props.h"

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

/* -device TEXT: a vfio-pci device's host address goes to VFIO; *CPUS
 * counts the vCPUs plugged at start. */
static gboolean
parse_device(GPtrArray *vfio, guint *cpus, const char *text, GError **error)
{
  g_auto(QpProps) p = {0};
  const char *driver, *host, *sysfsdev;

  if (!qp_props_read(&p, "-device", text, "driver", error) ||
      !qp_props_get_string(&p, "driver", &driver, error) ||
      !qp_props_get_string(&p, "host", &host, error) ||
      !qp_props_get_string(&p, "sysfsdev", &sysfsdev, error))
    return FALSE;
  if (is_cpu_driver(driver))
    (*cpus)++;
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

gboolean
qp_devices_read(QpQemuArgs *a, GArray *opts, GPtrArray *devices, GError **error)
{
  g_autoptr(GPtrArray) vfio = g_ptr_array_new_with_free_func(g_free);
  guint cpus = 0;
  for (guint i = 0; i < opts->len; i++) {
    const QpOpt *o = &g_array_index(opts, QpOpt, i);
    if (!qp_opt_is(o, "device"))
      continue;
    if (!parse_device(vfio, &cpus, o->value, error))
      return FALSE;
    g_ptr_array_add(devices, (gpointer)o->value);
  }
  /* A vCPU -device fills a free slot of maxcpus at start (libvirt's
   * hot-pluggable vCPUs enabled at boot): it runs from the start like
   * the -smp cpus ones. Beyond maxcpus QEMU refuses the line itself. */
  a->req->vcpus = MIN(a->req->vcpus + cpus, MAX(a->req->maxcpus, 1));
  if (vfio->len > 0) {
    g_ptr_array_add(vfio, NULL);
    a->req->vfio = (char **)g_ptr_array_steal(vfio, NULL);
  }
  return TRUE;
}
