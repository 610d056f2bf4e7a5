/* Whether a record of a shared ledger counts (docs/ledger.md, "Shared
 * ledger"): a member of the ledger's group claims only what a VM of its
 * own holds. Root's records, and every record of a private ledger, count
 * as they are; another owner's only for a live QEMU of that owner, up to
 * what that QEMU's command line asks. */
#pragma once

#include <glib.h>

#include "topology/host/host.h"
#include "topology/ledger/claims.h"

G_BEGIN_DECLS

/* Why CLAIM, a live record whose file belongs to uid OWNER, does not
 * count: one line, or NULL when it counts. Reads /proc of the record's
 * processes (its owner, executable and command line; the keeper's owner);
 * HOST (may be NULL) maps dedicated CPUs to cores. */
char *qp_record_distrust(const QpClaim *claim, guint owner, const QpHost *host);

G_END_DECLS
