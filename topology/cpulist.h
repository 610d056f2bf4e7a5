/* CPU and node lists ("0-3,8,10-11") parsed strictly and printed canonically.
 *
 * hwloc_bitmap_list_sscanf() accepts "0-" (meaning "to infinity") and ignores
 * trailing garbage; a user who typed either meant something else, so we parse
 * ourselves and keep hwloc bitmaps as the representation. */
#pragma once

#include <glib.h>
#include <hwloc.h>

G_BEGIN_DECLS

G_DEFINE_AUTO_CLEANUP_FREE_FUNC(hwloc_bitmap_t, hwloc_bitmap_free, NULL)

/* Highest index accepted in a list: Linux's NR_CPUS tops out at 8192. */
#define QP_LIST_MAX_INDEX 8191

#define QP_TOPOLOGY_ERROR (qp_topology_error_quark())
GQuark qp_topology_error_quark(void);

typedef enum {
  QP_TOPOLOGY_ERROR_INVALID, /* malformed input (list, XML, record) */
  QP_TOPOLOGY_ERROR_LOAD,    /* hwloc could not load the host */
  QP_TOPOLOGY_ERROR_NOFIT,   /* the request does not fit */
  QP_TOPOLOGY_ERROR_LEDGER,  /* state directory / ledger I/O */
} QpTopologyError;

/* Parses TEXT as a list of non-negative integers and ranges ("0-3,8").
 * WHAT names the value in the error ("--affinity", "host-nodes of ram0").
 * Every index must be <= MAX. An empty list is an error. */
gboolean qp_list_parse(const char *text, const char *what, guint max,
                       hwloc_bitmap_t *out, GError **error);

/* Canonical "0-3,8" form; "" for an empty set. Free with g_free(). */
char *qp_list_format(hwloc_const_bitmap_t set);

G_END_DECLS
