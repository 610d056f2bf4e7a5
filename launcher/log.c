#include "launcher/log.h"

#include <stdio.h>
#include <unistd.h>

static int verbosity;
static gboolean to_journal;
static char *vm_name;

void
qp_log_init(int verbose)
{
  verbosity = verbose;
  to_journal = g_log_writer_is_journald(STDERR_FILENO);
}

void
qp_log_set_vm(const char *name)
{
  g_free(vm_name);
  vm_name = g_strdup(name);
}

void
qp_log(GLogLevelFlags level, const char *fmt, ...)
{
  if (level == G_LOG_LEVEL_INFO && verbosity < 1)
    return;
  if (level == G_LOG_LEVEL_DEBUG && verbosity < 2)
    return;
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);

  if (to_journal) {
    /* The writer is called directly, not through g_log_structured(), so
     * that an error has the journal's "err" priority without GLib treating
     * a critical as fatal (G_DEBUG=fatal-criticals). */
    const GLogField fields[] = {
      {"MESSAGE", msg, -1},
      {"SYSLOG_IDENTIFIER", "qemu-pin", -1},
      {"GLIB_DOMAIN", G_LOG_DOMAIN, -1},
      {"QEMU_PIN_VM", vm_name ? vm_name : "", -1},
    };
    if (g_log_writer_journald(level, fields, G_N_ELEMENTS(fields), NULL) ==
        G_LOG_WRITER_HANDLED)
      return;
  }
  fprintf(stderr, "qemu-pin: %s%s\n",
          level == G_LOG_LEVEL_WARNING ? "warning: " : "", msg);
  fflush(stderr);
}
