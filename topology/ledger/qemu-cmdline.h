/* What a QEMU command line asks at most, read from /proc/PID/cmdline to
 * bound what a shared ledger's member may claim for that QEMU
 * (docs/ledger.md, "Shared ledger"). A small reader, not the launcher's
 * parser (the ledger is below it): it reads only what bounds a claim, and
 * reads it generously (the largest -m and -smp taken, every memory backend
 * that is not guest RAM or a memory device added), since a bound too high
 * costs nothing that running that VM would not, and one too low would drop
 * a real VM's claim. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  guint64 memory_mib; /* max(-m size, maxmem) + the backends that are not
                         guest memory (-machine memory-backend=, memdev=) */
  guint vcpus;        /* max(-smp cpus, maxcpus, its topology's product) */
} QpQemuBounds;

/* The bounds of the command line ARGS (LEN bytes, NUL-separated as in
 * /proc/PID/cmdline). Without -m QEMU gives 128 MiB, without -smp one
 * vCPU. */
void qp_qemu_cmdline_bounds(const char *args, gsize len, QpQemuBounds *out);

/* How the command line ARGS (as above) lets memory be plugged while the
 * VM runs: a virtio-mem device (whose size changes), else an -m with
 * maxmem= (DIMMs plugged), else not. */
typedef enum {
  QP_PLUGGABLE_NONE,
  QP_PLUGGABLE_MAXMEM,
  QP_PLUGGABLE_VIRTIO_MEM,
} QpPluggable;

QpPluggable qp_qemu_cmdline_memory_pluggable(const char *args, gsize len);

/* Whether NAME (an executable's basename) is QEMU's or qemu-pin's (which
 * runs under the VM's PID before it execs QEMU in place): qemu-system-*,
 * qemu-kvm, kvm, qemu-pin, qemu-pin-full (the full program, which a launch
 * may be handed over to). A "(deleted)" tail (upgraded) is allowed. */
gboolean qp_qemu_is_qemu_name(const char *name);

G_END_DECLS
