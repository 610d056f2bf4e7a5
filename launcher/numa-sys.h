/* The two NUMA system calls the launch path and the keeper make, called
 * directly: libnuma's are the same one-line wrappers, and loading libnuma
 * runs its constructor (sysfs and /proc/self/status read, set_mempolicy
 * probed), about 0.1 ms of every launch before QEMU starts. The MPOL_*
 * constants still come from <numaif.h>. */
#pragma once

#include <numaif.h>
#include <sys/syscall.h>
#include <unistd.h>

static inline long
qp_sys_set_mempolicy(int mode, const unsigned long *nodemask,
                     unsigned long maxnode)
{
  return syscall(SYS_set_mempolicy, mode, nodemask, maxnode);
}

static inline long
qp_sys_move_pages(int pid, unsigned long count, void **pages, const int *nodes,
                  int *status, int flags)
{
  return syscall(SYS_move_pages, pid, count, pages, nodes, status, flags);
}
