/* The keeper's spawn (keeper.h). It must be a grandchild of the launcher:
 * the launcher becomes QEMU, and a child of QEMU that exits is a zombie
 * that QEMU never reaps. fork() twice copies the launcher's page tables
 * twice, and the launcher's later writes fault on every page it shares
 * with the copies: most of what the claim's critical section cost.
 *
 * So, for a launcher that execs QEMU in place, no copy at all: the keeper
 * shares the launcher's memory (clone with CLONE_VM, a stack of its own),
 * made by an intermediate child that shares it too (CLONE_VM, on a stack of
 * its own) and leaves at once, so that the keeper is nobody's child but
 * init's (or a subreaper's). The launcher does not wait for it there: it
 * reaps it once it has the plan (qp_keeper_spawn_configure()), so that the
 * two process creations run beside the lock and the plan, on another CPU
 * where there is one, instead of before them; the intermediate touches
 * nothing but its stack and the keeper's pid, which the launcher reads only
 * after reaping it, and every exec of QEMU comes after that reaping (a
 * launch that fails reaps it in qp_keeper_spawn_free()), so it is never a
 * zombie under QEMU. While the launcher runs
 * on, the keeper touches nothing of that memory: all signals blocked, it
 * waits in read(2) on a pipe whose write end the launcher holds with
 * O_CLOEXEC. The exec closes it (after the launcher has left the memory
 * for a new one): end of file, and the memory is the keeper's alone, as
 * the launcher left it at the exec, everything the keeper's configuration
 * points to included. A launch that fails instead writes one byte, and the
 * keeper leaves without touching anything. A launcher killed on the way
 * closes the pipe too: the keeper then finds the monitor closed and
 * releases the claim, as a forked keeper would.
 *
 * The launcher starts this keeper before it takes the ledger's lock
 * (qp_keeper_spawn_ahead()), so that the keeper's start holds up no other
 * launch, and gives it its configuration under the lock, once the plan
 * and the record are made (qp_keeper_spawn_configure()): a keeper whose
 * launcher is gone before that leaves at the end of file, touching
 * nothing, since no record names it.
 *
 * A launcher that stays (-daemonize: it waits for QEMU and the keeper), or
 * one under valgrind (which runs no process sharing memory but threads),
 * forks twice as before. */
#include "launcher/keeper/keeper.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launcher/log.h"
#include "qp-error.h"

#if defined(__SANITIZE_ADDRESS__)
#define QP_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define QP_ASAN 1
#endif
#endif
#ifdef QP_ASAN
#include <sanitizer/common_interface_defs.h>
#define QP_NO_ASAN __attribute__((no_sanitize_address))
#else
#define QP_NO_ASAN
#endif

#define KEEPER_STACK (8u << 20) /* as a main thread's, mapped as used */
#define MIDDLE_STACK (64u << 10)

/* What the keeper reads before the memory is its own: at the top of its
 * stack mapping, which the launcher never touches after the clone. */
typedef struct {
  int go;       /* read end of the pipe the exec closes */
  int go_write; /* the keeper's copy of the write end */
  int qemu_end; /* the keeper's copy of QEMU's end of the monitor */
  char byte;    /* what the launcher wrote: it failed */
  char *bottom; /* the keeper's stack, for AddressSanitizer */
  gsize size;
  QpKeeperSpawn *spawn;
} KeeperStart;

struct _QpKeeperSpawn {
  QpKeeperConfig cfg; /* the keeper's; what it points to lives until exec */
  int configured;     /* cfg is whole (a shared keeper: set once it is) */
  int go[2];          /* -1: a forked keeper */
  pid_t *tid_field;   /* the launcher's thread id in its thread's TCB */
  sigset_t mask;      /* the launcher's signal mask, the keeper's later */
  char *keeper_sp;    /* the keeper's initial stack pointer */
  KeeperStart *start;
  pid_t middle;   /* the intermediate child, until reaped; else 0 */
  int keeper_pid; /* the intermediate's to write until then */
};

/* The keeper, once the memory is its own. */
G_GNUC_NORETURN static void
keeper_run(KeeperStart *ks)
{
#ifdef QP_ASAN
  /* The thread AddressSanitizer knows ran on the launcher's stack. */
  void *fake = NULL;
  __sanitizer_start_switch_fiber(&fake, ks->bottom, ks->size);
  __sanitizer_finish_switch_fiber(fake, NULL, NULL);
#endif
  QpKeeperSpawn *s = ks->spawn;
  /* Spawned ahead, by a launcher gone before it knew the plan: it made
   * no record, and there is nothing to keep. */
  if (!__atomic_load_n(&s->configured, __ATOMIC_ACQUIRE))
    for (;;)
      syscall(SYS_exit_group, 0);
  /* The keeper runs on the launcher's thread control block: the C
   * library's locks know a thread by the id written there, which must be
   * ours now (see spawn_shared()). */
  if (s->tid_field != NULL)
    *s->tid_field = (pid_t)syscall(SYS_gettid);
  close(ks->go);
  pthread_sigmask(SIG_SETMASK, &s->mask, NULL);
  qp_keeper_main(&s->cfg);
}

/* The keeper's first steps, in memory the launcher still uses: system
 * calls only, on its own stack, errno never set on the way that counts. */
QP_NO_ASAN static int
keeper_start(void *data)
{
  KeeperStart *ks = data;
  syscall(SYS_prctl, PR_SET_NAME, "qemu-pin-keeper", 0, 0, 0);
  syscall(SYS_close, ks->go_write);
  syscall(SYS_close, ks->qemu_end);
  long n = syscall(SYS_read, ks->go, &ks->byte, 1);
  if (n != 0) /* the launch failed, and the launcher said so */
    for (;;)
      syscall(SYS_exit_group, 0);
  keeper_run(ks);
}

/* The intermediate child: makes the keeper, in a session of its own, and
 * goes; the launcher reaps it later (settle()). It runs beside the
 * launcher on the launcher's thread control block: nothing here may set
 * errno but a failed clone, which the launcher learns from keeper_pid. */
QP_NO_ASAN static int
spawn_middle(void *data)
{
  QpKeeperSpawn *s = data;
  syscall(SYS_setsid);
  __atomic_store_n(
      &s->keeper_pid,
      clone(keeper_start, s->keeper_sp, CLONE_VM | SIGCHLD, s->start),
      __ATOMIC_RELEASE);
  return 0;
}

/* Maps the keeper's stack (a guard page below it), the intermediate's above
 * it, and KeeperStart at the top. */
static gboolean
map_stacks(QpKeeperSpawn *s, int qemu_end, GError **error)
{
  gsize page = (gsize)sysconf(_SC_PAGESIZE);
  gsize size = page + KEEPER_STACK + MIDDLE_STACK + page;
  char *map =
      mmap(NULL, size, PROT_READ | PROT_WRITE,
           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (map == MAP_FAILED) {
    g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
                "cannot map the keeper's stack: %s", g_strerror(errno));
    return FALSE;
  }
  mprotect(map, page, PROT_NONE);
  KeeperStart *ks = (KeeperStart *)(map + size - page);
  *ks = (KeeperStart){.go = s->go[0],
                      .go_write = s->go[1],
                      .qemu_end = qemu_end,
                      .bottom = map + page,
                      .size = KEEPER_STACK,
                      .spawn = s};
  s->start = ks;
  s->keeper_sp = map + page + KEEPER_STACK;
  return TRUE;
}

/* The keeper sharing this process's memory; FALSE when it could not be
 * made (no keeper then). */
static gboolean
spawn_shared(QpKeeperSpawn *s, int qemu_end, GError **error)
{
  if (pipe2(s->go, O_CLOEXEC) < 0) {
    g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
                "cannot create a pipe: %s", g_strerror(errno));
    return FALSE;
  }
  if (!map_stacks(s, qemu_end, error))
    return FALSE;
  /* The C library keeps this thread's id in its TCB, which the keeper
   * will run on, and the kernel writes 0 there when this process leaves
   * memory that another one still uses (clear_child_tid, set_tid_address(2),
   * at the exec or the exit): a keeper with thread id 0 would own every
   * free lock. The kernel is told not to, and the keeper writes its own id
   * there where the kernel says which address that is. */
  if (prctl(PR_GET_TID_ADDRESS, &s->tid_field, 0, 0, 0) < 0)
    s->tid_field = NULL;
  syscall(SYS_set_tid_address, NULL);
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &s->mask);
  s->keeper_pid = -1;
  pid_t middle =
      clone(spawn_middle, s->keeper_sp + MIDDLE_STACK, CLONE_VM | SIGCHLD, s);
  int saved = errno;
  pthread_sigmask(SIG_SETMASK, &s->mask, NULL);
  /* The intermediate has its own copy of the descriptors. */
  close(s->go[0]);
  if (middle < 0) {
    g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
                "cannot start the keeper: %s", g_strerror(saved));
    close(s->go[1]);
    s->go[1] = -1;
    return FALSE;
  }
  s->middle = middle;
  return TRUE;
}

/* Reaps the intermediate child of a keeper spawned ahead, once: FALSE when
 * it could not make the keeper. */
static gboolean
settle(QpKeeperSpawn *s, GError **error)
{
  if (s->middle > 0) {
    while (waitpid(s->middle, NULL, 0) < 0 && errno == EINTR)
      ;
    s->middle = 0;
  }
  if (__atomic_load_n(&s->keeper_pid, __ATOMIC_ACQUIRE) <= 0) {
    g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
                "cannot start the keeper: %s", g_strerror(EAGAIN));
    return FALSE;
  }
  return TRUE;
}

/* The keeper as a grandchild forked twice, in a session of its own. */
static gboolean
spawn_forked(QpKeeperSpawn *s, int qemu_end, GError **error)
{
  int pfd[2];
  if (pipe2(pfd, O_CLOEXEC) < 0) {
    g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
                "cannot create a pipe: %s", g_strerror(errno));
    return FALSE;
  }
  pid_t child = fork();
  if (child < 0) {
    g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
                "cannot fork the keeper: %s", g_strerror(errno));
    close(pfd[0]);
    close(pfd[1]);
    return FALSE;
  }
  if (child == 0) {
    close(pfd[0]);
    setsid();
    pid_t keeper = fork();
    if (keeper == 0) {
      close(pfd[1]);
      close(qemu_end);
      prctl(PR_SET_NAME, "qemu-pin-keeper", 0, 0, 0);
      qp_keeper_main(&s->cfg);
    }
    int k = (int)keeper;
    (void)!write(pfd[1], &k, sizeof(k));
    _exit(keeper < 0 ? 1 : 0);
  }
  close(pfd[1]);
  ssize_t n;
  do
    n = read(pfd[0], &s->keeper_pid, sizeof(s->keeper_pid));
  while (n < 0 && errno == EINTR);
  close(pfd[0]);
  while (waitpid(child, NULL, 0) < 0 && errno == EINTR)
    ;
  if (n != sizeof(s->keeper_pid) || s->keeper_pid <= 0) {
    g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
                "cannot fork the keeper");
    return FALSE;
  }
  return TRUE;
}

/* valgrind runs no process that shares memory with another but threads. */
static gboolean
under_valgrind(void)
{
  const char *preload = g_getenv("LD_PRELOAD");
  return preload != NULL && strstr(preload, "vgpreload") != NULL;
}

QpKeeperSpawn *
qp_keeper_spawn(const QpKeeperConfig *cfg, int qemu_end, GError **error)
{
  QpKeeperSpawn *s = g_new0(QpKeeperSpawn, 1);
  s->cfg = *cfg;
  s->go[0] = s->go[1] = -1;
  if (!spawn_forked(s, qemu_end, error)) {
    g_free(s);
    return NULL;
  }
  return s;
}

QpKeeperSpawn *
qp_keeper_spawn_ahead(int qemu_end, GError **error)
{
  if (under_valgrind())
    return NULL;
  QpKeeperSpawn *s = g_new0(QpKeeperSpawn, 1);
  s->go[0] = s->go[1] = -1;
  if (!spawn_shared(s, qemu_end, error)) {
    g_free(s);
    return NULL;
  }
  return s;
}

gboolean
qp_keeper_spawn_configure(QpKeeperSpawn *s, const QpKeeperConfig *cfg,
                          GError **error)
{
  if (!settle(s, error))
    return FALSE;
  s->cfg = *cfg;
  __atomic_store_n(&s->configured, TRUE, __ATOMIC_RELEASE);
  return TRUE;
}

int
qp_keeper_spawn_pid(const QpKeeperSpawn *s)
{
  return s->keeper_pid;
}

void
qp_keeper_spawn_free(QpKeeperSpawn *s)
{
  if (s == NULL)
    return;
  if (s->go[1] >= 0) {
    /* The keeper leaves on this byte without touching our memory. */
    (void)!write(s->go[1], "x", 1);
    close(s->go[1]);
  }
  /* Whatever this process runs next, the intermediate is not its zombie. */
  settle(s, NULL);
  g_free(s);
}
