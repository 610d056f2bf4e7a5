/* Process identity: a PID names a process only as long as that process
 * lives, so a record names its processes by PID and start time. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Start time (field 22 of /proc/PID/stat, kept across exec) of PID; 0 when
 * it is gone or a zombie. */
guint64 qp_proc_start_time(int pid);

/* The same, and in *RSS_KIB (may be NULL) the process's resident set
 * (field 24), from the same read. */
guint64 qp_proc_start_and_rss(int pid, guint64 *rss_kib);

/* The parent of PID (field 4 of /proc/PID/stat), or -1 when PID is gone. */
int qp_proc_parent(int pid);

/* The value of FIELD ("Mems_allowed_list") in STATUS, the text of a
 * /proc/PID/status, its leading blanks skipped; NULL when it has none. */
char *qp_proc_status_field(const char *status, const char *field);

/* Whether a process PID exists (EPERM counts: it is another user's). */
gboolean qp_proc_exists(int pid);

G_END_DECLS
