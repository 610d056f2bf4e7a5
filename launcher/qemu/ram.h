/* -m (and -machine memory.*): the guest's initial RAM, its maxmem and
 * slots, as QEMU 7.2's parse_memory_options() reads them, and the backend
 * -machine memory-backend= makes it of. */
#pragma once

#include "launcher/qemu/args.h"

G_BEGIN_DECLS

/* Reads the -m items KV (of QpKvPair) into A, after A->machine_memdev and
 * the backends. The first N_BYTES items are -machine memory.*: their size
 * without a suffix is in bytes, -m's in MiB. */
gboolean qp_ram_read(QpQemuArgs *a, GArray *kv, guint n_bytes, GError **error);

G_END_DECLS
