/* CPU and node lists ("0-3,8,10-11") parsed strictly and printed canonically.
 *
 * hwloc_bitmap_list_sscanf() accepts "0-" (meaning "to infinity") and ignores
 * trailing garbage; a user who typed either meant something else, so we parse
 * ourselves and keep hwloc bitmaps as the representation. */
#pragma once

#include <glib.h>
#include <hwloc.h>

#include "qp-error.h"

G_BEGIN_DECLS

G_DEFINE_AUTO_CLEANUP_FREE_FUNC(hwloc_bitmap_t, hwloc_bitmap_free, NULL)

/* Highest index accepted in a list: Linux's NR_CPUS tops out at 8192. */
#define QP_LIST_MAX_INDEX 8191

/* The decimal number at *P, up to END (NULL: the text's end) or the first
 * character that is no digit, into *OUT: at least one digit, at most MAX
 * (exactly), and with CANONICAL no leading zero (as qemu-pin's own files
 * write numbers). *P is moved past the digits; FALSE (*P unmoved) when
 * there is no such number. The caller says what may follow it. */
gboolean qp_decimal_read(const char **p, const char *end, guint64 max,
                         gboolean canonical, guint64 *out);

/* Parses TEXT as a list of non-negative integers and ranges ("0-3,8").
 * WHAT names the value in the error ("--affinity", "host-nodes of ram0").
 * Every index must be <= MAX. An empty list is an error. */
gboolean qp_list_parse(const char *text, const char *what, guint max,
                       hwloc_bitmap_t *out, GError **error);

/* Reads the list in the file PATH (a kernel's: /sys/devices/system/cpu/
 * online, isolated) into *OUT; *OUT NULL when the file is missing or
 * empty. FALSE, ERROR naming PATH, when it holds no list. */
gboolean qp_list_read_file(const char *path, hwloc_bitmap_t *out,
                           GError **error);

/* Canonical "0-3,8" form; "" for an empty set. Free with g_free(). */
char *qp_list_format(hwloc_const_bitmap_t set);

G_END_DECLS
