/* The command line edge: which of qemu-pin's faces was invoked (drop-in
 * QEMU binary, launcher, plan, topology, status) and the exit status. */
#pragma once

G_BEGIN_DECLS

int qp_main(int argc, char **argv);

/* TRUE if NAME (a basename) is one a QEMU binary goes by: qemu-system-*,
 * kvm, qemu-kvm. */
gboolean qp_is_qemu_name(const char *name);

/* The real QEMU binary for a drop-in invoked as ARGV0: the next match for
 * its basename on PATH that is not this executable (device and inode
 * compared with /proc/self/exe). */
char *qp_find_real_qemu(const char *argv0, GError **error);

G_END_DECLS
