/* The argv qemu-pin execs: the caller's, with what the plan needs added. */
#pragma once

#include "launcher/qemu/args.h"

G_BEGIN_DECLS

/* The argv to exec (ARGV0 first, NULL-terminated): the caller's arguments
 * with -S added, the private monitor on QMP_FD
 * (-chardev socket,id=qemu-pin-qmp,fd=N -mon
 * chardev=qemu-pin-qmp,mode=control), memory backends given host-nodes/policy
 * where the caller set none, backends created where there are none, and
 * thread-context objects for preallocating backends (none with -daemonize:
 * see qp_qemu_args_prealloc_note). PLAN may be NULL (mode none: only -S and
 * the monitor). A negative QMP_FD leaves the monitor out (for printing the
 * argv). */
char **qp_qemu_args_rewrite(const QpQemuArgs *args, const char *argv0,
                            const QpPlan *plan, int qmp_fd, GError **error);

/* With -daemonize QEMU cannot use a thread-context of its command line (its
 * thread does not survive the fork; preallocating through it never ends), so
 * the rewrite adds none (the caller's are taken off before parsing:
 * qp_argv_daemonize_safe). One line saying so, for -v, when that leaves
 * bound memory to preallocate without one; else NULL. */
char *qp_qemu_args_prealloc_note(const QpQemuArgs *args, const QpPlan *plan);

/* The memory backends of -readconfig files the caller left unbound: the
 * rewrite cannot give them host-nodes (the file is not rewritten), and the
 * process's memory policy binds them instead. That is the plan's binding
 * when PLAN's memory is on one host node: then one line for -v, and
 * *WARNING FALSE; else a warning (*WARNING TRUE). NULL when there is no
 * such backend. */
char *qp_qemu_args_file_backends_say(const QpQemuArgs *args, const QpPlan *plan,
                                     gboolean *warning);

G_END_DECLS
