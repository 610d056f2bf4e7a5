/* The host snapshot's file (topology/host/snapshot.h) in qemu-pin's own
 * text format: what qp_host_load_live_static() makes of the host, so that a
 * launch reads it back without hwloc's XML import. The whole file:
 *
 *   qemu-pin-host-snapshot 3
 *   <the key's lines (qp_host_snapshot_key())>
 *   host <nodes> <cores> <cpus> <kinds> <domains>
 *   source <text>
 *   cpuset <list>                 hwloc's allowed CPUs, before the affinity
 *   nodeset <list>                hwloc's allowed nodes
 *   node <id> <total MiB> <all_cpus> <page KiB>:<pages>,...|-     per node
 *   kind <efficiency> <name>                                      per kind
 *   domain <level> <node> <size KiB> <cores> <cpus>             per domain
 *   core <package> <node> <L3 domain> <L2 domain> <pus>           per core
 *   cpu <id> <core> <node> <package> <kind>                        per CPU
 *   distance <value> ...                              one row per node
 *   inconsistent <text>                               only when set
 *   end <FNV-1a 64 of everything above, 16 hex digits>
 *
 * Lists are CPU lists ("0-3,8"), "-" when empty; numbers are decimal, -1
 * for none. Every line in that order, each count as the host line says:
 * anything else, and the file is not read. */
#pragma once

#include <glib.h>

#include "topology/host/host.h"

G_BEGIN_DECLS

/* The first line, with its newline. Bumped whenever the model or the
 * format changes (2: hwloc's XML with data caches kept; 3: this format). */
#define QP_HOST_SNAPSHOT_HEADER "qemu-pin-host-snapshot 3\n"

/* HOST (as qp_host_load_live_static() or a recorded XML makes it: no PCI
 * device is kept) as a snapshot under KEY; NULL when it cannot be written
 * so that it reads back the same (a name with a control character, a set
 * without end). */
char *qp_host_snapshot_format(const QpHost *host, const char *key);

/* The host of TEXT (LEN bytes, NUL-terminated) when it is a whole
 * snapshot under KEY, as qp_host_snapshot_format() was given it (with
 * cpus[].allowed and nodes[].cpus made from its allowed CPUs); else NULL. */
QpHost *qp_host_snapshot_parse(const char *text, gsize len, const char *key);

G_END_DECLS
