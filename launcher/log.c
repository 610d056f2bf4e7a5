#include "launcher/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int verbosity;
static gboolean to_journal;
static char *vm_name;
static struct timespec timing_t0;
static gboolean timing_on;

void
qp_timing_start(const struct timespec *t0)
{
  const char *v = getenv("QEMU_PIN_TIMING");
  timing_on = v != NULL && strcmp(v, "1") == 0;
  if (timing_on && t0 != NULL)
    timing_t0 = *t0;
  else if (timing_on)
    clock_gettime(CLOCK_MONOTONIC, &timing_t0);
}

void
qp_timing(const char *step)
{
  if (!timing_on)
    return;
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  double ms = (double)(t.tv_sec - timing_t0.tv_sec) * 1e3 +
              (double)(t.tv_nsec - timing_t0.tv_nsec) / 1e6;
  fprintf(stderr, "qemu-pin: timing: %s %.3f\n", step, ms);
}

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
  g_autofree char *raw = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  /* One line, whatever the bad value had in it. */
  GString *clean = g_string_sized_new(strlen(raw));
  for (const char *p = raw; *p; p++) {
    if (*p == '\n')
      g_string_append(clean, "\\n");
    else if ((guchar)*p < 0x20 || *p == 0x7f)
      g_string_append_printf(clean, "\\x%02x", (guchar)*p);
    else
      g_string_append_c(clean, *p);
  }
  g_autofree char *msg = g_string_free(clean, FALSE);

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

void
qp_print(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stdout, fmt, ap);
  va_end(ap);
}
