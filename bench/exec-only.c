/* exec-only: runs QEMU through one exec and nothing else, the least that
 * any program put where QEMU's binary was costs a VM's start: the floor
 * that qemu-pin's mode none (the front: decide, then exec) is measured
 * against in bench/launch-bench.sh. Linked as qemu-pin's launcher is
 * (statically where the build can), so that the floor pays the same kind
 * of exec.
 *
 *   exec-only QEMU ARGS...
 */
#include <stdio.h>
#include <unistd.h>

int
main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, "usage: exec-only QEMU [ARGS...]\n");
    return 2;
  }
  execvp(argv[1], argv + 1);
  perror("exec-only: exec");
  return 127;
}
