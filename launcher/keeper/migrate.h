/* Moving a running QEMU's memory between host nodes from outside QEMU
 * (docs/design.md, "Moving a running VM"): its pages, rate-limited, with
 * move_pages(2); its binding (the task and VMA mempolicies, which
 * migrate_pages(2) and move_pages(2) leave as they are) by a cgroup v2
 * cpuset that qemu-pin owns, whose cpuset.mems the kernel rebinds every
 * policy of the process to; and the check afterwards from numa_maps. */
#pragma once

#include <glib.h>
#include <sys/types.h>
#include <hwloc.h>

G_BEGIN_DECLS

/* Where guest memory is: pages (of every page size, in KiB) per node of
 * QEMU's mappings with a memory policy (the guest RAM qemu-pin bound), or
 * of every anonymous mapping when none has one. */
typedef struct {
  guint64 total_kib;
  guint64 on_kib; /* on the nodes asked about */
} QpMemWhere;

/* Reads /proc/PID/numa_maps: how much guest memory is on NODES. */
gboolean qp_mem_where(int pid, hwloc_const_bitmap_t nodes, QpMemWhere *out,
                      GError **error);

/* The same guest memory in ordinary pages per node (of QpNodeAmount: MiB,
 * rounded up, so that a node with a page has at least 1), nodes without any
 * left out; HUGE_NODES (may be NULL) becomes the nodes that hold hugepages
 * of it. NULL with ERROR set when numa_maps cannot be read. */
GArray *qp_mem_where_per_node(int pid, hwloc_bitmap_t huge_nodes,
                              GError **error);

/* One numa_maps token "N<node>=<pages>": TRUE with NODE and PAGES set. */
gboolean qp_numa_maps_node_pages(const char *token, int *node, guint64 *pages);

/* The page size, in KiB, that the tokens T of one numa_maps line give
 * (kernelpagesize_kB=), or 0 when they give none; HUGE: whether the line is
 * a hugetlb mapping's ("huge"). */
guint64 qp_numa_maps_page_kib(char *const *t, gboolean *huge);

/* The nodes PID may take memory from now (Mems_allowed_list in
 * /proc/PID/status: its cgroup's cpuset.mems), or NULL when it cannot be
 * read (PID gone). */
hwloc_bitmap_t qp_mem_allowed_nodes(int pid);

/* Moves every page of PID that is off TO (a page on node N goes to TO's
 * node at N's position among the host's nodes HOST_NODES, modulo TO's
 * weight: what the kernel's cpuset rebinding does too) with move_pages(2),
 * in chunks, at most RATE_MIB MiB per second (0: no limit). MOVED_MIB:
 * what moved. */
gboolean qp_mem_move_pages(int pid, hwloc_const_bitmap_t host_nodes,
                           hwloc_const_bitmap_t to, guint rate_mib,
                           guint64 *moved_mib, GError **error);

/* Evens out guest memory bound to several nodes (robustness finding 40):
 * the kernel puts a page on whichever node of its binding is nearest the
 * thread that touches it first, so a VM claimed on two nodes as the
 * planner split it can hold more than its claim on one of them, in room
 * other VMs claimed. Moves with move_pages(2), from the anonymous 4 KiB
 * pages of PID's mappings bound to two nodes or more, up to TAKE_MIB (of
 * QpNodeAmount) off each node, to nodes of the same mapping's binding with
 * room in GIVE_MIB, at most MAX_MIB in all. MOVED_MIB: what moved. */
gboolean qp_mem_even_out(int pid, const GArray *take_mib,
                         const GArray *give_mib, guint64 max_mib,
                         guint64 *moved_mib, GError **error);

/* The cgroup of PID qemu-pin may own to rebind its memory: a cgroup v2
 * cpuset it made (/sys/fs/cgroup/qemu-pin/ID), into which a QEMU in the
 * root cgroup (no orchestrator placed it) is moved. NULL with WHY (the
 * reason in words, for the command's output) when it may not: not root, no
 * cgroup v2 or cpuset controller, or QEMU in a cgroup someone else made
 * (libvirt's machine.slice, a systemd scope, Proxmox's qemu.slice). */
char *qp_mem_own_cgroup(int pid, const char *id, char **why);

/* Whether qemu-pin, run by UID, may rebind the memory of the QEMU PID whose
 * record is ID (as qp_mem_own_cgroup() would, without making anything):
 * FALSE with WHY when it may not. */
gboolean qp_mem_binding_movable(int pid, uid_t uid, const char *id, char **why);

/* Rebinds PID's memory policies to NODES through the cgroup CGROUP
 * (qp_mem_own_cgroup()): writes cpuset.mems, which also migrates what is
 * still elsewhere. */
gboolean qp_mem_rebind(const char *cgroup, hwloc_const_bitmap_t nodes,
                       GError **error);

/* Removes the cgroup qemu-pin made for the VM ID, if empty. */
void qp_mem_cgroup_remove(const char *id);

G_END_DECLS
