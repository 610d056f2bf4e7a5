/* The command line made safe for -daemonize before it is read. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* With -daemonize, QEMU creates a thread-context's thread before its fork:
 * the daemon has the object but not the thread, and a backend that
 * preallocates through it waits forever. ARGV (ARGC entries) with
 * prealloc-context taken off every memory backend of -object (key=value or
 * JSON), the ids of those in *DROPPED ("m0, m1"); NULL when -daemonize is not
 * given or no backend names one. Never fails, for every mode, none included:
 * a value it cannot read stays as written. */
char **qp_argv_daemonize_safe(guint argc, char **argv, char **dropped);

G_END_DECLS
