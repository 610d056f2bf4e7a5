#include "launcher/qemu/io-devices.h"

#include <linux/if_tun.h>
#include <net/if.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "launcher/qemu/host-devices.h"
#include "launcher/qemu/keyval.h"
#include "launcher/qemu/props.h"

/* What the -blockdev, -drive and -netdev options name, by id. */
typedef struct {
  GHashTable *node_file;  /* blockdev node-name -> filename */
  GHashTable *node_child; /* blockdev node-name -> node-name of its file */
  GHashTable *netdev_if;  /* netdev id -> host interface name */
  GHashTable *ctrl_io;    /* device id -> its iothread= */
  GHashTable *bus_refs;   /* device ids that a bus= names */
  const char *sysfs;
} Names;

static void
names_clear(Names *n)
{
  g_hash_table_unref(n->node_file);
  g_hash_table_unref(n->node_child);
  g_hash_table_unref(n->netdev_if);
  g_hash_table_unref(n->ctrl_io);
  g_hash_table_unref(n->bus_refs);
}

static void
put(GHashTable *t, const char *key, const char *value)
{
  if (key != NULL && value != NULL && *value != '\0')
    g_hash_table_insert(t, g_strdup(key), g_strdup(value));
}

/* A JSON blockdev (or its inline "file"), named NAME ("" when inline). */
static void
read_json_node(Names *n, const QpJv *o, const char *name)
{
  const char *key = qp_jv_get_string_or(o, "node-name", name);
  put(n->node_file, key, qp_jv_get_string(qp_jv_get(o, "filename")));
  const QpJv *file = qp_jv_get(o, "file");
  if (qp_jv_is(file, QP_JV_OBJECT)) {
    g_autofree char *inner = g_strdup_printf("%s/file", key);
    put(n->node_child, key, inner);
    read_json_node(n, file, inner);
  } else {
    put(n->node_child, key, qp_jv_get_string(file));
  }
}

static void
read_blockdev(Names *n, const char *text)
{
  g_auto(QpProps) p = {0};
  if (!qp_props_read(&p, "-blockdev", text, NULL, NULL))
    return;
  if (p.json != NULL) {
    read_json_node(n, p.json, "");
    return;
  }
  const char *name = qp_kv_get(p.kv, "node-name");
  const char *inner = qp_kv_get(p.kv, "file.filename");
  put(n->node_file, name, qp_kv_get(p.kv, "filename"));
  if (inner != NULL && name != NULL) {
    g_autofree char *child = g_strdup_printf("%s/file", name);
    put(n->node_child, name, child);
    put(n->node_file, child, inner);
  } else {
    put(n->node_child, name, qp_kv_get(p.kv, "file"));
  }
}

/* The interface behind a tap file descriptor this process holds. */
static char *
tap_fd_ifname(const char *fd_text)
{
  char *end;
  long fd = fd_text != NULL ? strtol(fd_text, &end, 10) : -1;
  if (fd_text == NULL || end == fd_text || (*end != '\0' && *end != ':') ||
      fd < 0 || fd > G_MAXINT)
    return NULL;
  struct ifreq ifr;
  memset(&ifr, 0, sizeof(ifr));
  if (ioctl((int)fd, TUNGETIFF, &ifr) != 0)
    return NULL;
  return g_strndup(ifr.ifr_name, IFNAMSIZ);
}

static void
read_netdev(Names *n, const char *text)
{
  g_auto(QpProps) p = {0};
  if (!qp_props_read(&p, "-netdev", text, "type", NULL))
    return;
  const char *type = qp_props_string(&p, "type");
  const char *id = qp_props_string(&p, "id");
  if (type == NULL || id == NULL || strcmp(type, "tap") != 0)
    return;
  const char *ifname = qp_props_string(&p, "ifname");
  g_autofree char *from_fd = NULL;
  if (ifname == NULL) {
    from_fd = tap_fd_ifname(qp_props_string(&p, "fd"));
    if (from_fd == NULL)
      from_fd = tap_fd_ifname(qp_props_string(&p, "fds"));
    ifname = from_fd;
  }
  put(n->netdev_if, id, ifname);
}

/* The file behind blockdev node NAME, following "file" children. */
static const char *
node_filename(const Names *n, const char *name)
{
  for (guint depth = 0; name != NULL && depth < 16; depth++) {
    const char *f = g_hash_table_lookup(n->node_file, name);
    if (f != NULL)
      return f;
    name = g_hash_table_lookup(n->node_child, name);
  }
  return NULL;
}

static void
add_io(QpQemuArgs *a, const char *what, char *bdf, const char *iothread,
       const QpIoPlace *place)
{
  g_array_append_val(a->io_places, *place);
  QpIoDevice *d = g_new0(QpIoDevice, 1);
  d->what = g_strdup(what);
  d->bdf = bdf;
  d->iothread = g_strdup(iothread);
  g_ptr_array_add(a->req->io, d);
}

/* A -drive: its file for "drive=ID" of a device; with if= other than none,
 * the device QEMU makes for it. */
static void
read_drive(QpQemuArgs *a, Names *n, const char *text)
{
  g_autoptr(GArray) kv = qp_kv_parse(text, "file");
  const char *id = qp_kv_get(kv, "id");
  const char *file = qp_kv_get(kv, "file");
  const char *iface = qp_kv_get(kv, "if");
  put(n->node_file, id, file);
  put(n->node_file, qp_kv_get(kv, "node-name"), file);
  if (file == NULL || (iface != NULL && strcmp(iface, "none") == 0))
    return;
  const char *why = NULL;
  g_autofree char *what =
      g_strdup_printf("drive %s (if=%s, %s)", id != NULL ? id : "",
                      iface ? iface : "default", file);
  QpIoPlace place = {.vi = QP_ARGI_IN_FILE};
  add_io(a, what, qp_sysfs_path_pci(n->sysfs, file, &why), NULL, &place);
}

/* Where -device O (read as P) is, and whether the guest side may move it
 * to a bus of qemu-pin's. */
static QpIoPlace
place_of(const Names *n, const QpOpt *o, const QpProps *p, const char *driver)
{
  QpIoPlace place = {.vi = o->vi, .json = p->json != NULL};
  const char *bus = qp_props_string(p, "bus");
  const char *id = qp_props_string(p, "id");
  g_strlcpy(place.bus, bus != NULL ? bus : "", sizeof(place.bus));
  place.movable = o->vi != QP_ARGI_IN_FILE && bus == NULL &&
                  !qp_props_has(p, "addr") &&
                  g_str_has_suffix(driver, "-pci") &&
                  (id == NULL || !g_hash_table_contains(n->bus_refs, id));
  return place;
}

/* A -device with a drive= or netdev= on the host. */
static void
read_device(QpQemuArgs *a, const Names *n, const QpOpt *o)
{
  const char *text = o->value;
  g_auto(QpProps) p = {0};
  if (!qp_props_read(&p, "-device", text, "driver", NULL))
    return;
  const char *driver = qp_props_string(&p, "driver");
  const char *id = qp_props_string(&p, "id");
  const char *drive = qp_props_string(&p, "drive");
  const char *netdev = qp_props_string(&p, "netdev");
  const char *iothread = qp_props_string(&p, "iothread");
  const char *bus = qp_props_string(&p, "bus");
  if (driver != NULL && (strcmp(driver, "vfio-pci") == 0 ||
                         strcmp(driver, "vfio-pci-nohotplug") == 0)) {
    /* In the order devices.c added it to req->vfio. */
    QpIoPlace place = place_of(n, o, &p, "-pci");
    g_array_append_val(a->vfio_places, place);
    return;
  }
  if (driver == NULL || (drive == NULL && netdev == NULL))
    return;
  if (iothread == NULL && bus != NULL) {
    /* A disk on a controller's bus ("scsi0.0") is served by the
     * controller's iothread. */
    g_autofree char *ctrl = g_strndup(bus, strcspn(bus, "."));
    iothread = g_hash_table_lookup(n->ctrl_io, ctrl);
  }
  const char *why = NULL;
  char *bdf = NULL;
  const char *source = NULL;
  if (drive != NULL) {
    source = node_filename(n, drive);
    bdf = source != NULL ? qp_sysfs_path_pci(n->sysfs, source, &why) : NULL;
  } else {
    source = g_hash_table_lookup(n->netdev_if, netdev);
    bdf = source != NULL ? qp_sysfs_netdev_pci(n->sysfs, source, &why) : NULL;
  }
  g_autofree char *what = g_strdup_printf(
      "%s%s%s (%s)", driver, id != NULL ? " " : "", id != NULL ? id : "",
      source != NULL  ? source
      : drive != NULL ? drive
                      : netdev);
  QpIoPlace place = place_of(n, o, &p, driver);
  add_io(a, what, bdf, iothread, &place);
}

/* Every device: a controller's iothread, the buses devices name, and the
 * caller's PCI buses (an expander's numa_node=, a port's or bridge's own
 * bus=). */
static void
read_controller(QpQemuArgs *a, Names *n, const char *text)
{
  g_auto(QpProps) p = {0};
  if (!qp_props_read(&p, "-device", text, "driver", NULL))
    return;
  const char *id = qp_props_string(&p, "id");
  const char *driver = qp_props_string(&p, "driver");
  const char *bus = qp_props_string(&p, "bus");
  put(n->ctrl_io, id, qp_props_string(&p, "iothread"));
  if (bus != NULL)
    g_hash_table_add(n->bus_refs, g_strndup(bus, strcspn(bus, ".")));
  if (driver != NULL && g_str_has_prefix(driver, "pxb")) {
    a->has_pxb = TRUE;
    g_autofree char *node = g_strdup_printf(
        "node=%" G_GUINT64_FORMAT, qp_props_uint_or_zero(&p, "numa_node"));
    put(a->pci_buses, id, qp_props_has(&p, "numa_node") ? node : "node=");
  } else if (bus != NULL) {
    put(a->pci_buses, id, bus);
  }
}

void
qp_io_devices_read(QpQemuArgs *a, GArray *opts, const char *sysfs)
{
  Names n = {
      .node_file =
          g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free),
      .node_child =
          g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free),
      .netdev_if =
          g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free),
      .ctrl_io = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free),
      .bus_refs = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL),
      .sysfs = sysfs,
  };
  for (guint i = 0; i < opts->len; i++) {
    const QpOpt *o = &g_array_index(opts, QpOpt, i);
    if (qp_opt_is(o, "blockdev"))
      read_blockdev(&n, o->value);
    else if (qp_opt_is(o, "drive"))
      read_drive(a, &n, o->value);
    else if (qp_opt_is(o, "netdev"))
      read_netdev(&n, o->value);
    else if (qp_opt_is(o, "device"))
      read_controller(a, &n, o->value);
  }
  for (guint i = 0; i < opts->len; i++) {
    const QpOpt *o = &g_array_index(opts, QpOpt, i);
    if (qp_opt_is(o, "device"))
      read_device(a, &n, o);
  }
  names_clear(&n);
}
