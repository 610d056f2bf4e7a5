#include "launcher/qemu/host-devices.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

/* Stacks deeper than this (dm on md on a loop file on dm ...) are not
 * followed: a loop in sysfs would otherwise never end. */
#define MAX_DEPTH 8

/* Whether S is a canonical PCI address as sysfs writes it: 0000:00:1f.2. */
static gboolean
is_bdf(const char *s)
{
  static const char form[] = "hhhh:hh:hh.h";
  if (strlen(s) != sizeof(form) - 1)
    return FALSE;
  for (guint i = 0; form[i]; i++)
    if (form[i] == 'h' ? !g_ascii_isxdigit(s[i]) : s[i] != form[i])
      return FALSE;
  return TRUE;
}

/* The nearest PCI device above sysfs directory DIR (a resolved path). */
static char *
nearest_bdf(const char *dir)
{
  g_auto(GStrv) parts = g_strsplit(dir, "/", -1);
  for (guint n = g_strv_length(parts); n > 0; n--)
    if (is_bdf(parts[n - 1]))
      return g_strdup(parts[n - 1]);
  return NULL;
}

/* Merges FOUND into *ACC: the one PCI device of every member so far;
 * FALSE (and *WHY) when two members differ or one has none. */
static gboolean
merge_one(char **acc, char *found, const char **why, const char *differ)
{
  if (found == NULL)
    return FALSE;
  if (*acc != NULL && strcmp(*acc, found) != 0) {
    *why = differ;
    g_free(found);
    return FALSE;
  }
  g_free(*acc);
  *acc = found;
  return TRUE;
}

static char *block_dir_pci(const char *sysfs, const char *dir, guint depth,
                           const char **why);

/* The one PCI device of every entry of SUB (slaves, multipath) of DIR, or
 * NULL; *ANY says whether SUB had entries. */
static char *
members_pci(const char *sysfs, const char *dir, const char *sub, guint depth,
            gboolean *any, const char **why)
{
  g_autofree char *path = g_build_filename(dir, sub, NULL);
  g_autoptr(GDir) d = g_dir_open(path, 0, NULL);
  const char *name;
  char *acc = NULL;
  *any = FALSE;
  while (d != NULL && (name = g_dir_read_name(d)) != NULL) {
    *any = TRUE;
    g_autofree char *link = g_build_filename(path, name, NULL);
    g_autofree char *real = realpath(link, NULL);
    char *found =
        real != NULL ? block_dir_pci(sysfs, real, depth + 1, why) : NULL;
    if (!merge_one(&acc, found, why,
                   "its members are on different PCI devices")) {
      g_free(acc);
      return NULL;
    }
  }
  return acc;
}

/* The PCI device of block device directory DIR (resolved). */
static char *
block_dir_pci(const char *sysfs, const char *dir, guint depth, const char **why)
{
  if (depth > MAX_DEPTH) {
    *why = "its stack of block devices is too deep";
    return NULL;
  }
  g_autofree char *part = g_build_filename(dir, "partition", NULL);
  if (g_file_test(part, G_FILE_TEST_EXISTS)) {
    g_autofree char *disk = g_path_get_dirname(dir);
    return block_dir_pci(sysfs, disk, depth + 1, why);
  }
  gboolean any = FALSE;
  /* dm and md: their slaves; an NVMe multipath head: its paths. */
  char *bdf = members_pci(sysfs, dir, "slaves", depth, &any, why);
  if (!any)
    bdf = members_pci(sysfs, dir, "multipath", depth, &any, why);
  if (any)
    return bdf;
  g_autofree char *backing =
      g_build_filename(dir, "loop", "backing_file", NULL);
  g_autofree char *file = NULL;
  if (g_file_get_contents(backing, &file, NULL, NULL)) {
    g_strchomp(file);
    return qp_sysfs_path_pci(sysfs, file, why);
  }
  bdf = nearest_bdf(dir);
  if (bdf == NULL)
    *why = "it is a virtual block device with no PCI device below it";
  return bdf;
}

char *
qp_sysfs_block_pci(const char *sysfs, guint maj, guint min, const char **why)
{
  g_autofree char *link =
      g_strdup_printf("%s/dev/block/%u:%u", sysfs, maj, min);
  g_autofree char *real = realpath(link, NULL);
  if (real == NULL) {
    *why = "its block device is not in sysfs";
    return NULL;
  }
  return block_dir_pci(sysfs, real, 0, why);
}

char *
qp_sysfs_path_pci(const char *sysfs, const char *path, const char **why)
{
  struct stat st;
  if (stat(path, &st) != 0) {
    *why = "it cannot be read here";
    return NULL;
  }
  dev_t dev = S_ISBLK(st.st_mode) ? st.st_rdev : st.st_dev;
  if (major(dev) == 0) {
    *why = "its file system has no block device (tmpfs, overlay, btrfs, "
           "a network file system)";
    return NULL;
  }
  return qp_sysfs_block_pci(sysfs, major(dev), minor(dev), why);
}

static char *netdev_pci(const char *sysfs, const char *ifname, guint depth,
                        gboolean via_bridge, const char **why);

/* The one physical port among the ports of bridge BRIDGE (IFNAME aside). */
static char *
bridge_port_pci(const char *sysfs, const char *bridge, const char *ifname,
                guint depth, const char **why)
{
  g_autofree char *brif =
      g_strdup_printf("%s/class/net/%s/brif", sysfs, bridge);
  g_autoptr(GDir) d = g_dir_open(brif, 0, NULL);
  const char *name, *ignored;
  char *acc = NULL;
  guint ports = 0;
  while (d != NULL && (name = g_dir_read_name(d)) != NULL) {
    if (strcmp(name, ifname) == 0)
      continue;
    char *found = netdev_pci(sysfs, name, depth + 1, FALSE, &ignored);
    if (found == NULL)
      continue;
    ports++;
    if (acc != NULL && strcmp(acc, found) != 0) {
      g_free(found);
      g_free(acc);
      *why = "its bridge has more than one physical port";
      return NULL;
    }
    g_free(acc);
    acc = found;
  }
  if (ports == 0)
    *why = "its bridge has no physical port";
  return acc;
}

/* The one lower device of IFNAME's directory DIR (macvtap, macvlan, vlan,
 * a bond of ports of one PCI device); *ANY says whether it has lower
 * devices. */
static char *
lower_pci(const char *sysfs, const char *dir, guint depth, gboolean *any,
          const char **why)
{
  g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
  const char *name;
  char *acc = NULL;
  *any = FALSE;
  while (d != NULL && (name = g_dir_read_name(d)) != NULL) {
    if (!g_str_has_prefix(name, "lower_"))
      continue;
    *any = TRUE;
    char *found = netdev_pci(sysfs, name + 6, depth + 1, FALSE, why);
    if (!merge_one(&acc, found, why,
                   "its lower devices are on different PCI devices")) {
      g_free(acc);
      return NULL;
    }
  }
  return acc;
}

static char *
netdev_pci(const char *sysfs, const char *ifname, guint depth,
           gboolean via_bridge, const char **why)
{
  if (depth > MAX_DEPTH) {
    *why = "its stack of network devices is too deep";
    return NULL;
  }
  g_autofree char *dir = g_strdup_printf("%s/class/net/%s", sysfs, ifname);
  g_autofree char *device = g_build_filename(dir, "device", NULL);
  g_autofree char *real = realpath(device, NULL);
  if (real != NULL) {
    char *bdf = nearest_bdf(real);
    if (bdf == NULL)
      *why = "its device is not on PCI";
    return bdf;
  }
  if (!g_file_test(dir, G_FILE_TEST_IS_DIR)) {
    *why = "it is not an interface of this host";
    return NULL;
  }
  gboolean any;
  char *bdf = lower_pci(sysfs, dir, depth, &any, why);
  if (any)
    return bdf;
  g_autofree char *master = g_build_filename(dir, "master", NULL);
  g_autofree char *bridge = realpath(master, NULL);
  if (via_bridge && bridge != NULL) {
    g_autofree char *name = g_path_get_basename(bridge);
    return bridge_port_pci(sysfs, name, ifname, depth, why);
  }
  *why = "it is a virtual interface with no physical port below it";
  return NULL;
}

char *
qp_sysfs_netdev_pci(const char *sysfs, const char *ifname, const char **why)
{
  return netdev_pci(sysfs, ifname, 0, TRUE, why);
}

int
qp_sysfs_pci_node(const char *sysfs, const char *bdf)
{
  g_autofree char *path =
      g_strdup_printf("%s/bus/pci/devices/%s/numa_node", sysfs, bdf);
  g_autofree char *text = NULL;
  if (!g_file_get_contents(path, &text, NULL, NULL))
    return -1;
  char *end;
  long n = strtol(text, &end, 10);
  return end != text && n >= 0 && n < 65536 ? (int)n : -1;
}
