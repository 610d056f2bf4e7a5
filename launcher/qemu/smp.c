/* machine_parse_smp_config() of QEMU 7.2: omitted values are computed from
 * the given ones; before the 6.2 machine types sockets are preferred over
 * cores, since then cores over sockets; threads last. */
#include "launcher/qemu/smp.h"

#include "launcher/qemu/keyval.h"
#include "launcher/qemu/numbers.h"

/* -smp's values, 0 where omitted (QEMU 7.2 reads 0 as omitted, with a
 * warning that it is deprecated). modules: x86's level between die and
 * core in QEMU 9.1 and later (7.2 refuses the key itself); like dies, 1
 * when omitted, and a factor of every product. */
typedef struct {
  guint64 cpus, maxcpus, sockets, dies, modules, clusters, cores, threads;
} Smp;

static const char *const smp_keys[] = {"cpus",  "maxcpus", "sockets",
                                       "dies",  "modules", "clusters",
                                       "cores", "threads", NULL};

/* The values of KV in S, each a number as QEMU's visitor reads it. */
static gboolean
smp_values(GArray *kv, Smp *s, GError **error)
{
  guint64 *val[] = {&s->cpus,    &s->maxcpus,  &s->sockets, &s->dies,
                    &s->modules, &s->clusters, &s->cores,   &s->threads};

  if (!qp_kv_check_keys(kv, smp_keys, "-smp",
                        "cpus, maxcpus, sockets, dies, modules, clusters, "
                        "cores or threads",
                        error))
    return FALSE;
  for (guint k = 0; smp_keys[k]; k++) {
    QpKvPair *p = qp_kv_last(kv, smp_keys[k]);
    if (p != NULL && !qp_parse_uint(p->value, G_MAXUINT32, val[k]))
      return qp_args_invalid(
          error,
          "-smp '%s': %s '%s' is not a number: expected a positive "
          "integer",
          p->text, smp_keys[k], p->value);
  }
  return TRUE;
}

static guint64
or_one(guint64 v)
{
  return v != 0 ? v : 1;
}

/* The product of four -smp values as QEMU 7.2 computes it: in unsigned
 * int, wrapping. */
static guint64
product32(guint64 a, guint64 b, guint64 c, guint64 d)
{
  return (guint32)((guint32)a * (guint32)b * (guint32)c * (guint32)d);
}

/* S with what the caller omitted filled in, as QEMU 7.2 fills it (unsigned
 * int arithmetic). Where QEMU divides by a product that wraps to 0 it dies of
 * SIGFPE: refused. */
static gboolean
smp_fill(Smp *s, gboolean prefer_sockets, const char *text, GError **error)
{
  s->dies = or_one(s->dies);
  s->modules = or_one(s->modules);
  /* Modules and clusters are one factor: x86 has no clusters, the others
   * no modules. */
  s->clusters = or_one(s->clusters) * s->modules;
  if (s->cpus == 0 && s->maxcpus == 0) {
    s->sockets = or_one(s->sockets);
    s->cores = or_one(s->cores);
    s->threads = or_one(s->threads);
  } else {
    s->maxcpus = s->maxcpus ? s->maxcpus : s->cpus;
    /* The preferred of sockets and cores takes what the others leave; the
     * other is 1 when omitted too. */
    guint64 *first = prefer_sockets ? &s->sockets : &s->cores;
    guint64 *second = prefer_sockets ? &s->cores : &s->sockets;
    guint64 *fill = NULL, div = 1;
    if (*first == 0) {
      *second = or_one(*second);
      s->threads = or_one(s->threads);
      fill = first;
      div = product32(*second, s->dies, s->clusters, s->threads);
    } else if (*second == 0) {
      s->threads = or_one(s->threads);
      fill = second;
      div = product32(*first, s->dies, s->clusters, s->threads);
    } else if (s->threads == 0) {
      fill = &s->threads;
      div = product32(s->sockets, s->dies, s->clusters, s->cores);
    }
    if (fill != NULL && div == 0)
      return qp_args_invalid(
          error,
          "-smp '%s': the product of the given topology values overflows "
          "(QEMU 7.2 dies of a division by zero on it)",
          text);
    if (fill != NULL)
      *fill = s->maxcpus / div;
  }
  guint64 product =
      product32(s->sockets * s->dies, s->clusters, s->cores, s->threads);
  s->maxcpus = s->maxcpus ? s->maxcpus : product;
  s->clusters /= s->modules;
  s->cpus = s->cpus ? s->cpus : s->maxcpus;
  return TRUE;
}

/* What QEMU 7.2 refuses of the topology S (from the -smp TEXT) once it is
 * filled in. */
static gboolean
smp_check(const Smp *s, const QpMachine *m, const char *machine,
          const char *text, GError **error)
{
  guint64 product = product32(s->sockets * s->dies, s->modules * s->clusters,
                              s->cores, s->threads);
  if (product != s->maxcpus && s->modules > 1)
    return qp_args_invalid(
        error,
        "-smp '%s': sockets (%" G_GUINT64_FORMAT ") * dies (%" G_GUINT64_FORMAT
        ") * modules (%" G_GUINT64_FORMAT ") * cores (%" G_GUINT64_FORMAT
        ") * threads (%" G_GUINT64_FORMAT ") = %" G_GUINT64_FORMAT
        " does not equal maxcpus (%" G_GUINT64_FORMAT ")",
        text, s->sockets, s->dies, s->modules, s->cores, s->threads, product,
        s->maxcpus);
  if (product != s->maxcpus)
    return qp_args_invalid(
        error,
        "-smp '%s': sockets (%" G_GUINT64_FORMAT ") * dies (%" G_GUINT64_FORMAT
        ") * clusters (%" G_GUINT64_FORMAT ") * cores (%" G_GUINT64_FORMAT
        ") * threads (%" G_GUINT64_FORMAT ") = %" G_GUINT64_FORMAT
        " does not equal maxcpus (%" G_GUINT64_FORMAT ")",
        text, s->sockets, s->dies, s->clusters, s->cores, s->threads, product,
        s->maxcpus);
  if (s->maxcpus < s->cpus)
    return qp_args_invalid(error,
                           "-smp '%s': maxcpus (%" G_GUINT64_FORMAT
                           ") must be at least "
                           "cpus (%" G_GUINT64_FORMAT ")",
                           text, s->maxcpus, s->cpus);
  if (s->maxcpus > m->max_cpus)
    return qp_args_invalid(error,
                           "-smp '%s': %" G_GUINT64_FORMAT
                           " vCPUs exceed the maximum "
                           "of %u of machine '%s'%s",
                           text, s->maxcpus, m->max_cpus, machine,
                           m->known ? ""
                                    : " (qemu-pin's cap for machine types it "
                                      "does not know)");
  return TRUE;
}

gboolean
qp_smp_read(QpQemuArgs *a, GArray *kv, GError **error)
{
  const QpMachine *m = &a->machine_info;
  const char *text =
      kv->len ? g_array_index(kv, QpKvPair, kv->len - 1).text : "";
  Smp s = {0};

  if (!smp_values(kv, &s, error))
    return FALSE;
  /* Without -smp QEMU gives the machine type's default vCPUs (4 on
   * sbsa-ref and raspi3b), not 1. */
  if (kv->len == 0)
    s.cpus = m->default_cpus;
  if (!m->dies_supported && s.dies > 1)
    return qp_args_invalid(error,
                           "-smp '%s': dies=%" G_GUINT64_FORMAT " is not "
                           "supported by machine '%s'",
                           text, s.dies, a->machine);
  if (!m->clusters_supported && s.clusters > 1)
    return qp_args_invalid(error,
                           "-smp '%s': clusters=%" G_GUINT64_FORMAT
                           " is not supported "
                           "by machine '%s' (x86 has no clusters in QEMU 7.2)",
                           text, s.clusters, a->machine);
  if (!smp_fill(&s, m->prefer_sockets, text, error) ||
      !smp_check(&s, m, a->machine, text, error))
    return FALSE;

  QpRequest *r = a->req;
  r->vcpus = (guint)s.cpus;
  r->maxcpus = (guint)s.maxcpus;
  r->sockets = (guint)s.sockets;
  r->dies = (guint)s.dies;
  r->clusters = (guint)s.clusters;
  r->modules = (guint)s.modules;
  r->cores = (guint)s.cores;
  r->threads = (guint)s.threads;
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
  t.module = i % r->modules;
  i /= r->modules;
  t.die = i % r->dies;
  t.socket = i / r->dies;
  return t;
}
