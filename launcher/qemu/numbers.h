/* Numbers, sizes, booleans and index ranges as QEMU 7.2 reads them in its
 * options. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define QP_MiB (G_GUINT64_CONSTANT(1) << 20)

/* Reads the digits of BASE (up to 16) at *P into *V, leaving *P after
 * them. FALSE when the number does not fit in 64 bits. */
gboolean qp_read_digits(const char **p, guint base, guint64 *v);

/* An unsigned integer as QEMU's qemu_strtou64(.., base 0) reads it:
 * decimal, 0x hex, or 0-prefixed octal; no sign, no blanks, nothing after;
 * at most MAX. */
gboolean qp_parse_uint(const char *text, guint64 max, guint64 *out);

/* A list item of QEMU's options visitor: "3" or "0-3" (numbers as
 * qp_parse_uint reads them, LO <= HI <= MAX). */
gboolean qp_parse_range(const char *text, guint64 max, guint64 *lo,
                        guint64 *hi);

/* on/yes/true/y or off/no/false/n. */
gboolean qp_parse_bool(const char *text, gboolean *out);

/* A size in bytes, with QEMU 7.2's qemu_strtosz rules: suffixes B K M G T
 * P E (either case), a fraction only with a suffix, "0x" hex. Without a
 * suffix the unit is MiB if DEFAULT_MIB (as -m has it), else bytes. WHAT
 * names the value in the error. */
gboolean qp_parse_size(const char *text, const char *what, gboolean default_mib,
                       guint64 *out, GError **error);

/* The same in MiB, rounded up to a whole MiB. */
gboolean qp_parse_size_mib(const char *text, const char *what,
                           gboolean default_mib, guint64 *out, GError **error);

/* BYTES in MiB, rounded up. */
guint64 qp_bytes_to_mib(guint64 bytes);

G_END_DECLS
