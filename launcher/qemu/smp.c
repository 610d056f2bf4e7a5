/* machine_parse_smp_config() of QEMU 7.2: omitted values are computed from
 * the given ones; before the 6.2 machine types sockets are preferred over
 * cores, since then cores over sockets; threads last. */
#include "launcher/qemu/smp.h"

#include "launcher/qemu/keyval.h"
#include "launcher/qemu/numbers.h"

gboolean
qp_smp_read(QpQemuArgs *a, GArray *kv, const char *last_text, GError **error)
{
  static const char *const keys[] = {"cpus",     "maxcpus", "sockets", "dies",
                                     "clusters", "cores",   "threads", NULL};
  const QpMachine *m = &a->machine_info;
  guint64 val[7] = {0};
  const char *unknown = qp_kv_unknown_key(kv, keys);

  if (unknown != NULL) {
    QpKvPair *p = qp_kv_last(kv, unknown);
    return qp_args_invalid(
        error,
        "-smp '%s': unknown parameter '%s': expected cpus, maxcpus, "
        "sockets, dies, clusters, cores or threads",
        p->text, unknown);
  }
  for (guint k = 0; keys[k]; k++) {
    QpKvPair *p = qp_kv_last(kv, keys[k]);
    if (p == NULL)
      continue;
    if (!qp_parse_uint(p->value, G_MAXUINT32, &val[k]))
      return qp_args_invalid(
          error,
          "-smp '%s': %s '%s' is not a number: expected a positive "
          "integer",
          p->text, keys[k], p->value);
    /* QEMU 7.2 warns that 0 is deprecated and reads it as omitted. */
  }
  guint64 cpus = val[0], maxcpus = val[1], sockets = val[2], dies = val[3],
          clusters = val[4], cores = val[5], threads = val[6];
  const char *text =
      kv->len ? g_array_index(kv, QpKvPair, kv->len - 1).text : last_text;

  if (!m->dies_supported && dies > 1)
    return qp_args_invalid(error,
                           "-smp '%s': dies=%" G_GUINT64_FORMAT " is not "
                           "supported by machine '%s'",
                           text, dies, a->machine);
  if (!m->clusters_supported && clusters > 1)
    return qp_args_invalid(error,
                           "-smp '%s': clusters=%" G_GUINT64_FORMAT
                           " is not supported "
                           "by machine '%s' (x86 has no clusters in QEMU 7.2)",
                           text, clusters, a->machine);
  dies = dies ? dies : 1;
  clusters = clusters ? clusters : 1;

  if (cpus == 0 && maxcpus == 0) {
    sockets = sockets ? sockets : 1;
    cores = cores ? cores : 1;
    threads = threads ? threads : 1;
  } else {
    maxcpus = maxcpus ? maxcpus : cpus;
    if (m->prefer_sockets) {
      if (sockets == 0) {
        cores = cores ? cores : 1;
        threads = threads ? threads : 1;
        sockets = maxcpus / (dies * clusters * cores * threads);
      } else if (cores == 0) {
        threads = threads ? threads : 1;
        cores = maxcpus / (sockets * dies * clusters * threads);
      }
    } else {
      if (cores == 0) {
        sockets = sockets ? sockets : 1;
        threads = threads ? threads : 1;
        cores = maxcpus / (sockets * dies * clusters * threads);
      } else if (sockets == 0) {
        threads = threads ? threads : 1;
        sockets = maxcpus / (dies * clusters * cores * threads);
      }
    }
    if (threads == 0)
      threads = maxcpus / (sockets * dies * clusters * cores);
  }
  guint64 product = sockets * dies * clusters * cores * threads;
  maxcpus = maxcpus ? maxcpus : product;
  cpus = cpus ? cpus : maxcpus;

  if (product != maxcpus)
    return qp_args_invalid(
        error,
        "-smp '%s': sockets (%" G_GUINT64_FORMAT ") * dies (%" G_GUINT64_FORMAT
        ") * clusters (%" G_GUINT64_FORMAT ") * cores (%" G_GUINT64_FORMAT
        ") * threads (%" G_GUINT64_FORMAT ") = %" G_GUINT64_FORMAT
        " does not equal maxcpus (%" G_GUINT64_FORMAT ")",
        text, sockets, dies, clusters, cores, threads, product, maxcpus);
  if (maxcpus < cpus)
    return qp_args_invalid(error,
                           "-smp '%s': maxcpus (%" G_GUINT64_FORMAT
                           ") must be at least "
                           "cpus (%" G_GUINT64_FORMAT ")",
                           text, maxcpus, cpus);
  if (maxcpus > m->max_cpus)
    return qp_args_invalid(error,
                           "-smp '%s': %" G_GUINT64_FORMAT
                           " vCPUs exceed the maximum "
                           "of %u of machine '%s'%s",
                           text, maxcpus, m->max_cpus, a->machine,
                           m->known ? ""
                                    : " (qemu-pin's cap for machine types it "
                                      "does not know)");

  QpRequest *r = a->req;
  r->vcpus = (guint)cpus;
  r->maxcpus = (guint)maxcpus;
  r->sockets = (guint)sockets;
  r->dies = (guint)dies;
  r->clusters = (guint)clusters;
  r->cores = (guint)cores;
  r->threads = (guint)threads;
  return TRUE;
}

QpTopoIds
qp_smp_topo_ids(const QpRequest *r, guint index)
{
  QpTopoIds t;
  guint64 i = index;
  t.thread = i % r->threads;
  i /= r->threads;
  t.core = i % r->cores;
  i /= r->cores;
  t.cluster = i % r->clusters;
  i /= r->clusters;
  t.die = i % r->dies;
  t.socket = i / r->dies;
  return t;
}
