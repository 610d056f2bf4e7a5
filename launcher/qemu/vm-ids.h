/* What names the VM in qemu-pin's config file ([name:VM], [uuid:UUID],
 * [id:N]), read from the command line before anything else. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* -name (plain or guest=), -uuid and Proxmox's -id, NULL when not given. */
typedef struct {
  char *name;
  char *uuid;
  char *id;
} QpVmIds;

/* Reads only the VM's names from ARGV (the binary excluded), with no check
 * that can fail: mode none, which can come from the VM's config group, must
 * run QEMU whatever else the command line holds. */
QpVmIds *qp_vm_ids_from_argv(guint argc, char **argv);
void qp_vm_ids_free(QpVmIds *ids);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(QpVmIds, qp_vm_ids_free)

G_END_DECLS
