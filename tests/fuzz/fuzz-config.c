/* libFuzzer target for the config file reader (qp_options_load_config).
 * The input is written to a memfd and read through /proc/self/fd/N, as a
 * --config file would be, for a VM named "vm" with -uuid and -id, so that
 * [defaults] and every kind of VM group apply. Errors must be one line. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "launcher/options.h"
#include "launcher/qemu/vm-ids.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static int memfd = -1;
static char *path;
static QpVmIds *args;

int
LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
  if (memfd < 0) {
    memfd = memfd_create("qemu-pin.conf", 0);
    if (memfd < 0)
      abort();
    path = g_strdup_printf("/proc/self/fd/%d", memfd);
    char *argv[] = {
        "-name", "vm",  "-uuid", "6b8f2c1e-0c4e-4a8b-9f3d-2d1c0e9a7b55",
        "-id",   "101", NULL};
    args = qp_vm_ids_from_argv(6, argv);
  }
  if (size > 65536)
    return 0;
  if (ftruncate(memfd, 0) < 0 || pwrite(memfd, data, size, 0) != (ssize_t)size)
    abort();

  QpOptions opts;
  qp_options_init(&opts);
  opts.config = g_strdup(path);
  opts.config_explicit = TRUE;
  g_autoptr(GError) error = NULL;
  if (!qp_options_load_config(&opts, args, &error)) {
    /* GKeyFile turns the escapes \n and \r in a value into line breaks,
     * which the message then quotes (finding 1: escaped when printed). */
    if (error == NULL ||
        (g_strstr_len((const char *)data, (gssize)size, "\\n") == NULL &&
         g_strstr_len((const char *)data, (gssize)size, "\\r") == NULL &&
         memchr(data, '\r', size) == NULL &&
         strchr(error->message, '\n') != NULL))
      abort();
  }
  qp_options_clear(&opts);
  return 0;
}
