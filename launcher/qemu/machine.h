/* What -smp, -numa and the RAM's name depend on, per machine type, as QEMU
 * 7.2 has it: pc-*-6.1 and older prefer sockets over cores when filling in
 * -smp; q35 takes up to 288 vCPUs (1024 from pc-q35-8.1 and 4096 from
 * pc-q35-9.0 in later QEMUs, and the alias q35 may be either),
 * i440fx 255, isapc 1; x86 has dies but no clusters; -numa node,mem=
 * exists only up to the 5.0 machine types; the RAM of pc and q35 is called
 * "pc.ram". Without -smp and -m a machine type has QEMU's default vCPUs and
 * RAM: 1 and 128 MiB for most, more for boards (sbsa-ref: 4 and 1 GiB), and
 * some boards take only their own RAM size. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define QP_MAX_NODES 128 /* QEMU's MAX_NODES: guest and host node numbers */

typedef struct {
  gboolean known; /* a machine type qemu-pin knows */
  gboolean prefer_sockets;
  gboolean clusters_supported;
  gboolean dies_supported;
  gboolean numa_mem_supported;
  guint max_cpus;
  guint default_cpus;    /* vCPUs without -smp */
  guint default_ram_mib; /* RAM without -m (or -m 0) */
  const char *ram_id;    /* QEMU's id of the RAM it makes, NULL if unknown */
} QpMachine;

/* The machine type TYPE ("pc", "pc-q35-6.2", "microvm", ...). */
QpMachine qp_machine_lookup(const char *type);

G_END_DECLS
