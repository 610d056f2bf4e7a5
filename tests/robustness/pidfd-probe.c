/* Exits 0 when pidfd_open(2) and pidfd_send_signal(2) work here: run under
 * valgrind, it tells whether this valgrind knows those system calls (3.19
 * does not), without which the keeper cannot watch QEMU. */
#include <sys/pidfd.h>
#include <unistd.h>

int
main(void)
{
  int fd = pidfd_open(getpid(), 0);
  if (fd < 0)
    return 1;
  if (pidfd_send_signal(fd, 0, NULL, 0) < 0)
    return 1;
  close(fd);
  return 0;
}
