/* The keeper's log (see state.h): one line a step at its verbosity, with
 * the time since the keeper started; the keeper's every file writes it. */
#include "launcher/keeper/state.h"

#include "launcher/log.h"

void
qp_keeper_log(Keeper *k, int level, const char *fmt, ...)
{
  if (k->cfg->verbose < level)
    return;
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  qp_info("keeper: +%.3f ms: %s",
          (double)(g_get_monotonic_time() - k->t0) / 1000.0, msg);
}
