/* Every test program runs with the suites' own qemu-pin settings, never
 * the host's or the caller's: before main(), every QEMU_PIN_* variable of
 * the caller's environment is removed and QEMU_PIN_CONFIG names an empty
 * configuration (/dev/null). So neither /etc/qemu-pin/qemu-pin.conf nor a
 * QEMU_PIN_MODE of whoever runs the tests reaches the qemu-pin a test
 * starts (g_get_environ() is clean) or the library code it calls in
 * process, whether meson runs the test or someone runs the program by
 * hand. A test that wants a setting gives it itself.
 *
 * Linked whole into every test program (qp_test_env_dep in
 * tests/meson.build); the shell tests do the same with
 * tests/common/hermetic.sh. */
#include <stdlib.h>
#include <string.h>

extern char **environ;

#define QP_ENV_PREFIX "QEMU_PIN_"

/* The name of the first QEMU_PIN_* variable of the environment, or NULL. */
static char *
qp_test_env_first(void)
{
  for (char **e = environ; e != NULL && *e != NULL; e++)
    if (strncmp(*e, QP_ENV_PREFIX, strlen(QP_ENV_PREFIX)) == 0)
      return strndup(*e, strcspn(*e, "="));
  return NULL;
}

__attribute__((constructor)) static void
qp_test_env_hermetic(void)
{
  char *name;
  while ((name = qp_test_env_first()) != NULL) {
    if (unsetenv(name) != 0)
      abort();
    free(name);
  }
  if (setenv("QEMU_PIN_CONFIG", "/dev/null", 1) != 0)
    abort();
}
