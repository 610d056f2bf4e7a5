/* Whole files in a directory opened as a file descriptor: read with a
 * bound, and replaced atomically (a temporary file renamed over the name).
 * The ledger's records, its summary and the host snapshot are written and
 * read this way. */
#pragma once

#include <glib.h>
#include <sys/stat.h>

G_BEGIN_DECLS

/* Reads the regular file NAME of DIRFD (symlinks not followed) into *OUT
 * (NUL-terminated, its length in *OUT_LEN) and its fstat() into *ST (may be
 * NULL). At most MAX + 1 bytes are read, so that the caller can tell a file
 * larger than MAX. FALSE with errno in *ERRSV (EINVAL: not a regular file)
 * when it cannot be read. */
gboolean qp_dir_file_read(int dirfd, const char *name, gsize max, char **out,
                          gsize *out_len, struct stat *st, int *errsv);

/* The text of PATH (a file of /proc or /sys, or any other; symlinks
 * followed), NUL-terminated, at most MAX bytes of it; NULL when it cannot
 * be opened or read. open, read until the end, close: none of the fstat()
 * and stdio g_file_get_contents() adds for a file of size 0 (a launch reads
 * a dozen). */
char *qp_file_read_text(const char *path, gsize max);

/* Replaces NAME of DIRFD with the LEN bytes of TEXT: written to TMP
 * (created anew; a leftover of the same name is removed first), given MODE
 * whatever the umask, synced to disk when SYNC, then renamed over NAME. The
 * new file's inode in *INO (may be NULL). On failure TMP is removed, *ERRSV
 * holds errno and *STEP (may be NULL) the step that failed: "create",
 * "write" or "rename". */
gboolean qp_dir_file_replace(int dirfd, const char *name, const char *tmp,
                             const char *text, gsize len, mode_t mode,
                             gboolean sync, guint64 *ino, int *errsv,
                             const char **step);

/* FNV-1a 64 of the N bytes at P: what a file written whole ends with (the
 * ledger's summary, the host snapshot), so that a reader tells a damaged
 * one from a whole one. */
guint64 qp_dir_file_hash(const char *p, gsize n);

G_END_DECLS
