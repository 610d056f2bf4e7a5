/* The answers of a VM's keeper to `qemu-pin move` and `rebalance`
 * (launcher/move.c, qp_move_ask()): each read from a keeper of its own on
 * the real control socket, a child that answers as the keeper of a given
 * qemu-pin answered (recorded answers: CI has no older binaries), and told
 * apart as `rebalance` needs: a refusal that changed nothing (it plans
 * again without that VM) or a failure (it stops). */
#include "launcher/keeper/keeper.h"
#include "launcher/move.h"
#include "qp-error.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
  const char *name;
  const char *answer; /* the keeper's line, as it wrote it */
  int code;           /* QP_LAUNCH_ERROR_* qp_move_ask() gives */
} AnswerCase;

static const AnswerCase answer_cases[] = {
    /* A keeper of 68e4abc (before 19b0f58): a destination the VM does not
     * fit under its own reserve, answered without a code (seen in the NUMA
     * lab: its VM launched with --node-reserve-mib, `rebalance` of
     * 7fee66e then stopped at it with exit 1). */
    {"68e4abc/no-room",
     "{\"error\":\"move refused: VM does not fit: guest needs 200 MiB but "
     "the best node 1 has only 142 MiB uncommitted (495 MiB total, 0 MiB "
     "claimed, 48 MiB used outside any claim, the kernel can give 431 MiB "
     "now)\"}\n",
     QP_LAUNCH_ERROR_MOVE_REFUSED},
    /* The same refusal from a keeper of 19b0f58 and after. */
    {"7fee66e/no-room",
     "{\"error\":\"move refused: VM does not fit: guest needs 200 MiB but "
     "the best node 1 has only 142 MiB uncommitted\",\"code\":\"refused\"}\n",
     QP_LAUNCH_ERROR_MOVE_REFUSED},
    {"68e4abc/hostnodes",
     "{\"error\":\"move refused: the VM was started with --hostnodes=0-1: "
     "the destination must be inside it\",\"code\":\"refused\"}\n",
     QP_LAUNCH_ERROR_MOVE_REFUSED},
    {"68e4abc/caller-placed",
     "{\"error\":\"move refused: vCPU 0 is pinned to CPUs 1 by its caller; "
     "qemu-pin never moves what the caller placed\",\"code\":"
     "\"caller-placed\"}\n",
     QP_LAUNCH_ERROR_CALLER_PLACED},
    /* Every keeper: a client that may not ask is a failure. */
    {"68e4abc/not-allowed",
     "{\"error\":\"move refused: only root or the VM's own user may move "
     "it\"}\n",
     QP_LAUNCH_ERROR_FAILED},
    /* A move that began and did not end is a failure, coded or not. */
    {"68e4abc/unfinished",
     "{\"error\":\"move of QEMU (pid 4242) unfinished: 100 of 200 MiB of "
     "guest memory on nodes 1\"}\n",
     QP_LAUNCH_ERROR_FAILED},
};

/* A child that binds the control socket of its own pid, says so on READY,
 * and answers one request with ANSWER. */
static pid_t
fake_keeper(const char *answer)
{
  int ready[2];
  g_assert_cmpint(pipe(ready), ==, 0);
  pid_t pid = fork();
  g_assert_cmpint(pid, >=, 0);
  if (pid == 0) {
    close(ready[0]);
    struct sockaddr_un sa;
    socklen_t len = qp_keeper_control_address(getpid(), &sa);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, len) < 0 ||
        listen(fd, 1) < 0)
      _exit(2);
    (void)!write(ready[1], "r", 1);
    int c = accept(fd, NULL, NULL);
    if (c < 0)
      _exit(3);
    char buf[4096];
    while (read(c, buf, sizeof buf) > 0)
      ; /* the request, to its end */
    (void)!write(c, answer, strlen(answer));
    close(c);
    _exit(0);
  }
  close(ready[1]);
  char b = 0;
  g_assert_cmpint(read(ready[0], &b, 1), ==, 1);
  close(ready[0]);
  return pid;
}

static void
test_answer(gconstpointer data)
{
  const AnswerCase *t = data;
  pid_t keeper = fake_keeper(t->answer);
  g_autoptr(QpClaim) vm = qp_claim_new();
  vm->id = g_strdup("vm-1");
  vm->keeper_pid = keeper;
  g_autoptr(GError) error = NULL;
  g_autoptr(QpJv) reply =
      qp_move_ask(vm, "1", QP_MOVE_DEFAULT_RATE_MIB, &error);
  int status = -1;
  g_assert_cmpint(waitpid(keeper, &status, 0), ==, keeper);
  g_assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  g_assert_null(reply);
  g_assert_error(error, QP_LAUNCH_ERROR, t->code);
  /* The keeper's words, once, in one line. */
  g_autoptr(QpJv) sent = qp_jv_parse(t->answer, -1, NULL);
  g_assert_cmpstr(error->message, ==, qp_jv_get_string_or(sent, "error", NULL));
  g_assert_null(strchr(error->message, '\n'));
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  for (guint i = 0; i < G_N_ELEMENTS(answer_cases); i++) {
    g_autofree char *path =
        g_strdup_printf("/move-answer/%s", answer_cases[i].name);
    g_test_add_data_func(path, &answer_cases[i], test_answer);
  }
  return g_test_run();
}
