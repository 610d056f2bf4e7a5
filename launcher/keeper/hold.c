/* The keeper while the VM runs: QMP events (RESUME and DEVICE_DELETED
 * bring a look at the threads, memory events one at memory), a look every
 * LOOK_EVERY_MS for threads someone moved, polling for plugged vCPUs and
 * memory, and QEMU's exit, nudged when it hangs on its way out. */
#include "launcher/keeper/state.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>

#include "launcher/log.h"

static void
on_event(Keeper *k, const QpJv *ev)
{
  const char *name = qp_jv_get_string_or(ev, "event", "");
  if (qp_qmp_event_is_exit(ev) && k->exiting_since == 0) {
    /* No more queries: one in flight is what can hang QEMU's exit. */
    k->exiting_since = g_get_monotonic_time();
    qp_keeper_log(k, 1, "QEMU is exiting");
    return;
  }
  if (k->exiting_since != 0)
    return;
  if (k->mem != NULL && qp_mem_watch_event(name))
    qp_mem_watch_update(k->mem, k->qmp);
  /* RESUME: someone else may have moved threads before resuming (libvirt
   * does). DEVICE_DELETED: an unplugged vCPU gives its core back. */
  if (strcmp(name, "RESUME") != 0 && strcmp(name, "DEVICE_DELETED") != 0)
    return;
  g_autoptr(GError) error = NULL;
  guint changed = 0;
  if (!qp_keeper_query_and_apply(k, &changed, &error)) {
    /* QEMU going away while we look is no news. */
    if (!g_error_matches(error, QP_QMP_ERROR, QP_QMP_ERROR_IO))
      qp_error("keeper: re-applying the plan on resume: %s", error->message);
  } else if (changed > 0)
    qp_keeper_log(k, 1, "re-applied the plan to %u threads on resume", changed);
}

/* How long to wait for QEMU or its monitor: until the next tick when
 * POLLING (plugged vCPUs and memory have no QMP event), the next look when
 * LOOKING, the next SIGTERM at NUDGE_AT (0: none); -1 for ever. */
static int
wait_ms(const Keeper *k, gboolean polling, gboolean looking, gint64 nudge_at)
{
  int timeout = polling ? 500 : -1;
  if (looking) {
    /* Rounded up: waking before the look is due would spin. */
    gint64 in = (k->next_look_at - g_get_monotonic_time() + 999) / 1000;
    timeout = (int)CLAMP(in, 0, timeout < 0 ? LOOK_EVERY_MS : timeout);
  }
  if (looking) {
    gint64 in = (k->next_resident_at - g_get_monotonic_time() + 999) / 1000;
    in = MAX(in, 0);
    timeout = timeout < 0 ? (int)MIN(in, G_MAXINT) : (int)MIN(in, timeout);
  }
  if (nudge_at != 0)
    timeout = (int)MAX(0, (nudge_at - g_get_monotonic_time()) / 1000);
  if (k->pidfd < 0 && (timeout < 0 || timeout > 200))
    timeout = 200; /* no pidfd: look at /proc */
  return timeout;
}

/* QEMU is still there after it said it exits: SIGTERM again. */
void
qp_keeper_nudge(Keeper *k)
{
  k->nudges++;
  if (k->nudges == 1)
    qp_info("keeper: QEMU (pid %d) is still there %d ms after it began "
            "to exit: sending SIGTERM again",
            k->qemu_pid, NUDGE_AFTER_MS);
  qp_keeper_signal_qemu(k, SIGTERM);
}

/* A tick without news. vCPUs that may be plugged are looked for through
 * QMP on every tick (POLLING); otherwise a look through QMP only when a
 * thread moved (LOOK_DUE): sched_getaffinity alone tells that. */
static void
tick(Keeper *k, gboolean polling, gboolean look_due)
{
  const QpPlan *plan = k->plan;
  gboolean vcpu_poll = polling && plan->n_vcpus > plan->n_boot_vcpus;
  if (vcpu_poll || (look_due && qp_caller_pins_moved(k->pins))) {
    g_autoptr(GError) error = NULL;
    if (!qp_keeper_query_and_apply(k, NULL, &error) &&
        !g_error_matches(error, QP_QMP_ERROR, QP_QMP_ERROR_IO))
      qp_error("keeper: %s", error->message);
  } else if (look_due) {
    k->next_look_at = g_get_monotonic_time() + (gint64)LOOK_EVERY_MS * 1000;
  }
  if (polling && k->mem != NULL)
    qp_mem_watch_update(k->mem, k->qmp);
}

/* A VM without maxmem or virtio-mem can still be given memory: a backend
 * object-add'ed on the caller's monitor that no device uses holds its
 * size from the start when it preallocates or QEMU locks its memory in
 * (-overcommit mem-lock=on). No event tells, and such a VM
 * is not polled every tick: looked at with each resident measure, the
 * watch made at the first (so that a launch does not pay for it). */
void
qp_keeper_look_at_unplugged_memory(Keeper *k)
{
  if (k->cfg->mem_hotplug || k->mem_unwatched)
    return;
  if (k->mem == NULL) {
    k->mem = qp_mem_watch_new(k->cfg, &k->plan, k->claim, k->qmp);
    k->mem_unwatched = k->mem == NULL;
    if (k->mem == NULL)
      return;
  }
  qp_mem_watch_update(k->mem, k->qmp);
}

void
qp_keeper_hold(Keeper *k)
{
  gboolean monitor_open = TRUE;
  qp_keeper_resident_start(k);
  for (;;) {
    while (monitor_open && qp_qmp_has_event(k->qmp)) {
      g_autoptr(QpJv) ev = qp_qmp_next_event(k->qmp, 0, NULL);
      if (ev == NULL)
        break;
      on_event(k, ev);
    }
    struct pollfd p[3] = {
        {k->pidfd, POLLIN, 0},
        {monitor_open ? qp_qmp_get_fd(k->qmp) : -1, POLLIN, 0},
        {monitor_open && k->exiting_since == 0 ? k->control_fd : -1, POLLIN,
         0}};
    /* vCPUs and memory may be plugged: there is no QMP event for that, so
     * look. */
    const QpPlan *plan = k->plan;
    gboolean looking = monitor_open && k->exiting_since == 0;
    gboolean polling = looking && (plan->n_vcpus > plan->n_boot_vcpus ||
                                   (k->mem != NULL && k->cfg->mem_hotplug));
    /* QEMU said it exits: when the next SIGTERM is due. */
    gint64 nudge_at = k->exiting_since == 0
                          ? 0
                          : k->exiting_since +
                                (gint64)NUDGE_AFTER_MS * 1000 * (k->nudges + 1);
    int r = poll(p, 3, wait_ms(k, polling, looking, nudge_at));
    if (r < 0 && errno == EINTR)
      continue;
    if (k->pidfd < 0 && qp_keeper_qemu_gone(k, 0))
      return; /* QEMU exited */
    if (r == 0 && nudge_at != 0 && g_get_monotonic_time() >= nudge_at) {
      qp_keeper_nudge(k);
      continue;
    }
    if (looking && g_get_monotonic_time() >= k->next_resident_at) {
      qp_keeper_measure_resident(k);
      qp_keeper_look_at_unplugged_memory(k);
    }
    gboolean look_due = looking && g_get_monotonic_time() >= k->next_look_at;
    if (r == 0 && (polling || look_due))
      tick(k, polling, look_due);
    if (r == 0)
      continue;
    if (p[0].revents)
      return; /* QEMU exited */
    if (p[2].revents) {
      qp_keeper_control_serve(k);
      continue;
    }
    if (p[1].revents) {
      g_autoptr(GError) error = NULL;
      g_autoptr(QpJv) ev = qp_qmp_next_event(k->qmp, 0, &error);
      if (ev != NULL)
        on_event(k, ev);
      else if (g_error_matches(error, QP_QMP_ERROR, QP_QMP_ERROR_PROTOCOL))
        /* One message the keeper cannot read (left behind: the next one
         * is read as ever): QEMU is not leaving, and the keeper goes on
         * holding the VM, its events, hotplug and moves. */
        qp_warning("keeper: %s", error->message);
      else if (error != NULL)
        monitor_open = FALSE; /* QEMU is going away: wait for it */
    }
  }
}
