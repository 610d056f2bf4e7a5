/* Whether a record of a shared ledger counts (see trust.h). Each check is
 * a few reads of /proc, made once per record: the summary keeps the
 * verdict with the record's line (topology/ledger/summary.c). */
#include "topology/ledger/trust.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "topology/base/cpulist.h"
#include "topology/base/proc.h"
#include "topology/ledger/qemu-cmdline.h"

#define CMDLINE_MAX (256 * 1024)

/* /proc/PID/NAME, at most MAX bytes, into *OUT (NUL-terminated); its
 * length, or -1 with errno. */
static gssize
proc_read(int pid, const char *name, gsize max, char **out)
{
  char path[64];
  g_snprintf(path, sizeof path, "/proc/%d/%s", pid, name);
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    return -1;
  char *buf = g_malloc(max + 1);
  gsize len = 0;
  while (len < max) {
    ssize_t n = read(fd, buf + len, max - len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    len += (gsize)n;
  }
  close(fd);
  buf[len] = '\0';
  *out = buf;
  return (gssize)len;
}

/* The real and effective uid of PID (its status's Uid line: /proc/PID
 * itself is root's when the process is not dumpable). */
static gboolean
proc_uids(int pid, guint *ruid, guint *euid)
{
  g_autofree char *text = NULL;
  if (proc_read(pid, "status", 4096, &text) < 0)
    return FALSE;
  const char *uid = strstr(text, "\nUid:");
  return uid != NULL && sscanf(uid + 5, "%u %u", ruid, euid) == 2;
}

/* The memory PID holds of its own, in MiB: its resident anonymous and
 * shared memory (RssAnon + RssShmem of its status: guest RAM, memfd and
 * /dev/shm backends), 0 when it cannot be read. */
static guint64
proc_held_mib(int pid)
{
  g_autofree char *text = NULL;
  if (proc_read(pid, "status", 4096, &text) < 0)
    return 0;
  guint64 kib = 0, v = 0;
  const char *anon = strstr(text, "\nRssAnon:");
  if (anon != NULL && sscanf(anon + 9, "%" G_GUINT64_FORMAT, &v) == 1)
    kib += v;
  const char *shmem = strstr(text, "\nRssShmem:");
  if (shmem != NULL && sscanf(shmem + 10, "%" G_GUINT64_FORMAT, &v) == 1)
    kib += v;
  return kib / 1024;
}

/* The name of PID's executable: the basename of /proc/PID/exe, or, when
 * this reader may not follow that link (another user's process), its
 * command name, and when that names no QEMU, the basename of its argv[0]:
 * QEMU's -name NAME,process=PROC renames the process, not its argv (both
 * are the process's own words, which only the link is not). */
static char *
proc_exe_name(int pid)
{
  char path[64], target[4096];
  g_snprintf(path, sizeof path, "/proc/%d/exe", pid);
  ssize_t n = readlink(path, target, sizeof target - 1);
  if (n > 0) {
    target[n] = '\0';
    return g_path_get_basename(target);
  }
  g_autofree char *comm = NULL;
  if (proc_read(pid, "comm", 64, &comm) <= 0)
    return NULL;
  g_strchomp(comm);
  g_autofree char *argv = NULL;
  if (!qp_qemu_is_qemu_name(comm) &&
      proc_read(pid, "cmdline", 4096, &argv) > 0) {
    g_autofree char *arg0 = g_path_get_basename(argv);
    if (qp_qemu_is_qemu_name(arg0))
      return g_steal_pointer(&arg0);
  }
  return g_steal_pointer(&comm);
}

/* Why PID, which keeps a record of uid OWNER alive, is no QEMU of that
 * owner; NULL when it is one. WHAT names its field. */
static char *
not_owners_qemu(int pid, const char *what, guint owner)
{
  guint ruid = 0, euid = 0;
  if (!proc_uids(pid, &ruid, &euid))
    return g_strdup_printf("its %s %d cannot be read", what, pid);
  if (ruid != owner && euid != owner)
    return g_strdup_printf("its %s %d belongs to uid %u, not to the "
                           "record's owner",
                           what, pid, euid);
  g_autofree char *exe = proc_exe_name(pid);
  if (exe == NULL || !qp_qemu_is_qemu_name(exe))
    return g_strdup_printf("its %s %d is not QEMU (it runs %s)", what, pid,
                           exe ? exe : "something unreadable");
  return NULL;
}

/* Cores of HOST (NULL: each CPU its own) that CPUS touch. */
static guint
cores_of(hwloc_const_bitmap_t cpus, const QpHost *host)
{
  g_auto(hwloc_bitmap_t) cores = hwloc_bitmap_alloc();
  guint alone = 0;
  int cpu;
  hwloc_bitmap_foreach_begin(cpu, cpus)
  {
    int core = -1;
    for (guint i = 0; host != NULL && i < host->n_cpus && core < 0; i++)
      if (host->cpus[i].id == cpu)
        core = host->cpus[i].core;
    if (core >= 0)
      hwloc_bitmap_set(cores, (unsigned)core);
    else
      alone++;
  }
  hwloc_bitmap_foreach_end();
  return alone + (guint)hwloc_bitmap_weight(cores);
}

/* Why the fields of C disagree with each other; NULL when they agree. */
static char *
fields_disagree(const QpClaim *c)
{
  if (c->mode != QP_MODE_ONE_TO_ONE && !hwloc_bitmap_iszero(c->dedicated)) {
    g_autofree char *cpus = qp_list_format(c->dedicated);
    return g_strdup_printf("mode %s dedicates CPUs %s (only one-to-one "
                           "dedicates CPUs)",
                           qp_mode_name(c->mode), cpus);
  }
  return NULL;
}

/* Why what C claims is more than BOUNDS allow; NULL when it is not. A
 * QEMU (QEMU_PID, 0 for a launcher) may also claim what it holds: memory
 * plugged over QMP beyond its command line (a preallocated backend no
 * device uses) is memory its VM really has. */
static char *
claims_too_much(const QpClaim *c, const QpQemuBounds *b, const QpHost *host,
                int qemu_pid)
{
  guint64 mib = 0;
  for (guint i = 0; i < c->mem->len; i++)
    mib += g_array_index(c->mem, QpNodeAmount, i).mib;
  for (guint i = 0; i < c->huge->len; i++) {
    const QpHugeClaim *h = &g_array_index(c->huge, QpHugeClaim, i);
    mib += h->pages * h->page_kib / 1024;
  }
  guint64 held =
      mib > b->memory_mib && qemu_pid > 0 ? proc_held_mib(qemu_pid) : 0;
  if (mib > MAX(b->memory_mib, held))
    return qemu_pid > 0
               ? g_strdup_printf("it claims %" G_GUINT64_FORMAT
                                 " MiB, its QEMU's command line asks at most "
                                 "%" G_GUINT64_FORMAT
                                 " MiB and it holds %" G_GUINT64_FORMAT " MiB",
                                 mib, b->memory_mib, held)
               : g_strdup_printf("it claims %" G_GUINT64_FORMAT
                                 " MiB, its QEMU's command line asks at most "
                                 "%" G_GUINT64_FORMAT " MiB",
                                 mib, b->memory_mib);
  guint64 shared = 0, floating = 0;
  for (guint i = 0; i < c->load->len; i++)
    shared += g_array_index(c->load, QpNodeLoad, i).vcpus;
  for (guint i = 0; i < c->cpu_load->len; i++)
    floating += g_array_index(c->cpu_load, QpCpuLoad, i).vcpus;
  guint cores = cores_of(c->dedicated, host);
  if (cores + MAX(shared, floating) > b->vcpus)
    return g_strdup_printf("it claims %u dedicated cores and %" G_GUINT64_FORMAT
                           " shared vCPUs, its QEMU has at most %u vCPUs",
                           cores, MAX(shared, floating), b->vcpus);
  return NULL;
}

char *
qp_record_distrust(const QpClaim *c, guint owner, const QpHost *host)
{
  char *why = fields_disagree(c);
  if (why != NULL)
    return why;
  /* The process that keeps the record alive: QEMU, else the qemu-pin that
   * waits for a -daemonize QEMU (docs/ledger.md, "Liveness"). */
  gboolean qemu = c->qemu_pid > 0 && c->qemu_start != 0 &&
                  qp_proc_start_time(c->qemu_pid) == c->qemu_start;
  int pid = qemu ? c->qemu_pid : c->launcher_pid;
  why = not_owners_qemu(pid, qemu ? "qemu-pid" : "launcher-pid", owner);
  if (why != NULL)
    return why;
  /* A keeper that is gone (killed, out of memory) leaves the claim
   * counted while its QEMU runs, as in any ledger (docs/ledger.md,
   * "Liveness"): it held nothing of its own. One that runs is the
   * owner's. */
  guint ruid = 0, euid = 0;
  if (c->keeper_pid > 0 && proc_uids(c->keeper_pid, &ruid, &euid) &&
      ruid != owner && euid != owner)
    return g_strdup_printf("its keeper-pid %d belongs to uid %u, not to the "
                           "record's owner",
                           c->keeper_pid, euid);
  g_autofree char *args = NULL;
  gssize len = proc_read(pid, "cmdline", CMDLINE_MAX, &args);
  if (len <= 0)
    return g_strdup_printf("the command line of its %s %d cannot be read",
                           qemu ? "qemu-pid" : "launcher-pid", pid);
  QpQemuBounds bounds;
  qp_qemu_cmdline_bounds(args, (gsize)len, &bounds);
  return claims_too_much(c, &bounds, host, qemu ? pid : 0);
}
