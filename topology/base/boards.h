/* The vCPUs and RAM QEMU 7.2 gives a machine type without -smp and -m: 1
 * and 128 MiB for most (pc, q35, arm's and riscv's virt), more for boards
 * (sbsa-ref: 4 and 1 GiB). Both the launch (launcher/qemu/machine.c) and
 * the judge of another user's record (topology/ledger/qemu-cmdline.c)
 * read a command line with them. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* *CPUS and *RAM_MIB of machine type TYPE (NULL: pc's). */
void qp_board_defaults(const char *type, guint *cpus, guint *ram_mib);

G_END_DECLS
