/* Where a device's host side is: the PCI device behind a file or block
 * device (storage) or a network interface, found in sysfs. Each function
 * takes the sysfs root ("/sys" on a live host) so that tests can build a
 * tree of their own. What is followed and what is not: docs/design.md,
 * "Device locality". */
#pragma once

#include <glib.h>
#include <sys/types.h>

G_BEGIN_DECLS

/* The PCI device (canonical "0000:01:00.0") behind block device MAJ:MIN:
 * a partition is its disk, a dm or md device its slaves (all of them on
 * one PCI device, else NULL), an NVMe namespace its controller. NULL when
 * none is found; *WHY (static text) then says why. */
char *qp_sysfs_block_pci(const char *sysfs, guint maj, guint min,
                         const char **why);

/* The same for PATH: a block device itself, else the block device of the
 * file system that holds the file. */
char *qp_sysfs_path_pci(const char *sysfs, const char *path, const char **why);

/* The PCI device behind network interface IFNAME: its own (a physical
 * port), the lower device of a macvtap/macvlan/vlan, or the one physical
 * port of the bridge it is a port of. NULL, with *WHY, otherwise. */
char *qp_sysfs_netdev_pci(const char *sysfs, const char *ifname,
                          const char **why);

/* numa_node of PCI device BDF under SYSFS: -1 when unknown. */
int qp_sysfs_pci_node(const char *sysfs, const char *bdf);

G_END_DECLS
