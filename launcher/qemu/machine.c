#include "launcher/qemu/machine.h"

#include <string.h>

#include "launcher/qemu/numbers.h"
#include "topology/base/boards.h"

#define QP_CPU_HARD_CAP 1024 /* unknown machine types */

/* "7.2" -> 702; -1 if TEXT is not MAJOR.MINOR. */
static int
machine_version(const char *text)
{
  guint64 major, minor;
  g_auto(GStrv) parts = g_strsplit(text, ".", -1);
  if (g_strv_length(parts) != 2 || !qp_parse_uint(parts[0], 99, &major) ||
      !qp_parse_uint(parts[1], 99, &minor))
    return -1;
  return (int)(major * 100 + minor);
}

/* The newest machine types qemu-pin knows: QEMU 10.0's. */
#define ALIAS_VERSION 1000

/* pc-q35-VERSION's vCPU limit: 288, 1024 from pc-q35-8.1, 4096 from
 * pc-q35-9.0 (what QEMU 10.0 says of each with -smp 5000). */
static guint
q35_max_cpus(int version)
{
  return version >= 900 ? 4096 : version >= 801 ? 1024 : 288;
}

QpMachine
qp_machine_lookup(const char *type)
{
  QpMachine m = {.known = FALSE,
                 .prefer_sockets = FALSE,
                 .clusters_supported = TRUE,
                 .dies_supported = TRUE,
                 .numa_mem_supported = TRUE,
                 .max_cpus = QP_CPU_HARD_CAP,
                 .default_cpus = 1,
                 .default_ram_mib = 128,
                 .ram_id = NULL};
  /* The aliases pc and q35 name the newest type of the QEMU that runs, 7.2's
   * or a later one's: what they decide here is the same from 6.2 on, but
   * their vCPU limit is that of the newest QEMU (ALIAS_VERSION), QEMU
   * refusing above its own. */
  int version = 702;
  gboolean q35 = FALSE, i440fx = FALSE, alias = FALSE;

  if (strcmp(type, "q35") == 0) {
    q35 = alias = TRUE;
  } else if (strcmp(type, "pc") == 0) {
    i440fx = alias = TRUE;
  } else if (g_str_has_prefix(type, "pc-q35-")) {
    q35 = TRUE;
    version = machine_version(type + strlen("pc-q35-"));
  } else if (g_str_has_prefix(type, "pc-i440fx-")) {
    i440fx = TRUE;
    version = machine_version(type + strlen("pc-i440fx-"));
  } else if (g_str_has_prefix(type, "pc-")) {
    i440fx = TRUE;
    version = machine_version(type + strlen("pc-"));
  } else if (strcmp(type, "isapc") == 0) {
    m.known = TRUE;
    m.clusters_supported = FALSE;
    m.max_cpus = 1;
    m.ram_id = "pc.ram";
    return m;
  } else if (strcmp(type, "microvm") == 0) {
    m.known = TRUE;
    m.clusters_supported = FALSE;
    m.numa_mem_supported = FALSE;
    m.max_cpus = 288;
    m.ram_id = "microvm.ram";
    return m;
  }
  if (!q35 && !i440fx) {
    qp_board_defaults(type, &m.default_cpus, &m.default_ram_mib);
    return m;
  }
  if (version < 0)
    version = 702;
  m.known = TRUE;
  m.clusters_supported = FALSE;
  m.prefer_sockets = version < 602;
  m.numa_mem_supported = version < 501;
  m.max_cpus = q35 ? q35_max_cpus(alias ? ALIAS_VERSION : version) : 255;
  m.ram_id = "pc.ram";
  return m;
}
