/* Thread CPU affinity and process memory policy (see affinity.h). */
#include "launcher/affinity.h"

#include <errno.h>
#include <sched.h>

#include "launcher/numa-sys.h"
#include "qp-error.h"

#define QP_MAX_CPUS (QP_LIST_MAX_INDEX + 1)

gboolean
qp_set_affinity(int tid, hwloc_const_bitmap_t set, GError **error)
{
  cpu_set_t *mask = CPU_ALLOC(QP_MAX_CPUS);
  size_t size = CPU_ALLOC_SIZE(QP_MAX_CPUS);
  int i;
  CPU_ZERO_S(size, mask);
  hwloc_bitmap_foreach_begin(i, set)
  {
    if (i < QP_MAX_CPUS)
      CPU_SET_S((size_t)i, size, mask);
  }
  hwloc_bitmap_foreach_end();
  int rc = sched_setaffinity(tid, size, mask);
  int saved = errno;
  CPU_FREE(mask);
  if (rc < 0) {
    g_autofree char *list = qp_list_format(set);
    g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
                "cannot pin thread %d to CPUs %s: %s", tid, list,
                g_strerror(saved));
    return FALSE;
  }
  return TRUE;
}

hwloc_bitmap_t
qp_get_affinity(int tid, GError **error)
{
  cpu_set_t *mask = CPU_ALLOC(QP_MAX_CPUS);
  size_t size = CPU_ALLOC_SIZE(QP_MAX_CPUS);
  CPU_ZERO_S(size, mask);
  if (sched_getaffinity(tid, size, mask) < 0) {
    int saved = errno;
    CPU_FREE(mask);
    g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
                "cannot read the CPU affinity of thread %d: %s", tid,
                g_strerror(saved));
    return NULL;
  }
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  for (int i = 0; i < QP_MAX_CPUS; i++)
    if (CPU_ISSET_S((size_t)i, size, mask))
      hwloc_bitmap_set(set, (unsigned)i);
  CPU_FREE(mask);
  return set;
}

gboolean
qp_set_mempolicy(QpPolicy policy, hwloc_const_bitmap_t nodes, GError **error)
{
  unsigned long mask[QP_MAX_CPUS / (8 * sizeof(unsigned long))] = {0};
  int i, mode;
  switch (policy) {
  case QP_POLICY_PREFERRED:
    mode = MPOL_PREFERRED;
    /* MPOL_PREFERRED takes one node: the first. */
    i = hwloc_bitmap_first(nodes);
    if (i >= 0)
      mask[i / (8 * sizeof(unsigned long))] |=
          1UL << (i % (8 * sizeof(unsigned long)));
    break;
  case QP_POLICY_INTERLEAVE:
    mode = MPOL_INTERLEAVE;
    break;
  default:
    mode = MPOL_BIND;
    break;
  }
  if (mode != MPOL_PREFERRED) {
    hwloc_bitmap_foreach_begin(i, nodes)
    {
      if (i < QP_MAX_CPUS)
        mask[i / (8 * sizeof(unsigned long))] |=
            1UL << (i % (8 * sizeof(unsigned long)));
    }
    hwloc_bitmap_foreach_end();
  }
  if (qp_sys_set_mempolicy(mode, mask, QP_MAX_CPUS + 1) < 0) {
    g_autofree char *list = qp_list_format(nodes);
    g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
                "cannot set memory policy %s on nodes %s: %s",
                qp_policy_name(policy), list, g_strerror(errno));
    return FALSE;
  }
  return TRUE;
}
