/* qemu-args-only: runs QEMU with what a balanced qemu-pin launch on node 0
 * adds to its command line and process, and nothing of qemu-pin itself:
 * QEMU's own share of a launch's cost (bench/launch-bench.sh).
 *
 *   qemu-args-only [--parts=LIST] MIB QEMU ARGS...
 *
 * adds "-object memory-backend-ram,id=pc.ram,size=MIB MiB,host-nodes=0,
 * policy=bind -machine memory-backend=pc.ram" and the private monitor on a
 * socket pair ("-chardev socket,id=qemu-pin-qmp,fd=N -mon
 * chardev=qemu-pin-qmp,mode=control", the other end kept open and never
 * read), binds the process's memory to node 0 (MPOL_BIND), and execs QEMU.
 * A copy of qemu-pin's rewrite for this one case, for measuring only.
 *
 * --parts=LIST (a comma-separated subset of "backend", "monitor", "mpol";
 * default all three; QP_ARGS_ONLY_PARTS when not given) adds only those
 * parts, to tell which of them costs QEMU what. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MPOL_BIND_MODE 2

int
main(int argc, char **argv)
{
  const char *parts = getenv("QP_ARGS_ONLY_PARTS");
  if (argc > 1 && strncmp(argv[1], "--parts=", 8) == 0) {
    parts = argv[1] + 8;
    argv++;
    argc--;
  }
  if (argc < 3) {
    fprintf(stderr,
            "usage: qemu-args-only [--parts=LIST] MIB QEMU [ARGS...]\n");
    return 2;
  }
  char *end = NULL;
  unsigned long long mib = strtoull(argv[1], &end, 10);
  if (end == argv[1] || *end != '\0' || mib == 0) {
    fprintf(stderr, "qemu-args-only: '%s' is not a size in MiB\n", argv[1]);
    return 2;
  }
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0) {
    perror("qemu-args-only: socketpair");
    return 1;
  }
  int want_backend = parts == NULL || strstr(parts, "backend") != NULL;
  int want_monitor = parts == NULL || strstr(parts, "monitor") != NULL;
  int want_mpol = parts == NULL || strstr(parts, "mpol") != NULL;
  unsigned long mask = 1;
  if (want_mpol && syscall(SYS_set_mempolicy, MPOL_BIND_MODE, &mask, 64) < 0) {
    perror("qemu-args-only: set_mempolicy");
    return 1;
  }
  char backend[160], chardev[64];
  snprintf(backend, sizeof backend,
           "memory-backend-ram,id=pc.ram,size=%llu,host-nodes=0,policy=bind",
           mib << 20);
  snprintf(chardev, sizeof chardev, "socket,id=qemu-pin-qmp,fd=%d", sv[1]);
  const char *extra[8];
  int k = 0;
  if (want_backend) {
    extra[k++] = "-object";
    extra[k++] = backend;
    extra[k++] = "-machine";
    extra[k++] = "memory-backend=pc.ram";
  }
  if (want_monitor) {
    extra[k++] = "-chardev";
    extra[k++] = chardev;
    extra[k++] = "-mon";
    extra[k++] = "chardev=qemu-pin-qmp,mode=control";
  }
  int n = argc - 2;
  char **args = calloc((size_t)(n + k + 1), sizeof(char *));
  if (args == NULL)
    return 1;
  for (int i = 0; i < n; i++)
    args[i] = argv[i + 2];
  for (int i = 0; i < k; i++)
    args[n + i] = (char *)extra[i];
  execvp(args[0], args);
  perror("qemu-args-only: exec");
  return 127;
}
