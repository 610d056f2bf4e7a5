/* What a program started by exec sees of its start: argv (argv[0]
 * included), the environment in order, every open descriptor with its
 * flags, the signal mask and the ignored signals; one item a line on
 * stdout, then exit status 3. tests/launch/test-start.c runs it directly
 * and through qemu-pin in mode none and compares. C library only. */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

/* Pipes and sockets differ in inode from one run to the next. */
static void
print_fd(int fd)
{
  char link[64], target[4096];
  snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, target, sizeof(target) - 1);
  target[n > 0 ? n : 0] = '\0';
  char *bracket = strchr(target, '[');
  if (bracket != NULL &&
      (strncmp(target, "pipe:", 5) == 0 || strncmp(target, "socket:", 7) == 0))
    *bracket = '\0';
  printf("fd %d %s fd-flags %d fl-flags %d\n", fd, target, fcntl(fd, F_GETFD),
         fcntl(fd, F_GETFL));
}

int
main(int argc, char **argv)
{
  for (int i = 0; i < argc; i++)
    printf("argv[%d] %s\n", i, argv[i]);
  for (char **e = environ; *e != NULL; e++)
    printf("env %s\n", *e);
  DIR *d = opendir("/proc/self/fd");
  struct dirent *de;
  while (d != NULL && (de = readdir(d)) != NULL) {
    int fd = atoi(de->d_name);
    if (de->d_name[0] != '.' && fd != dirfd(d))
      print_fd(fd);
  }
  if (d != NULL)
    closedir(d);
  sigset_t mask;
  sigprocmask(SIG_SETMASK, NULL, &mask);
  for (int s = 1; s < NSIG; s++) {
    struct sigaction sa;
    if (sigismember(&mask, s) == 1)
      printf("blocked %d\n", s);
    if (sigaction(s, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN)
      printf("ignored %d\n", s);
  }
  return 3;
}
