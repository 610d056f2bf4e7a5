/* What an unreadable ledger record still holds (docs/ledger.md,
 * "Unreadable records"): the nodes its text names when every section that
 * names nodes is complete, else every node of the host. Losing a claim
 * silently would over-commit, so those nodes stay blocked until an operator
 * removes the record. */
#include "topology/ledger/store.h"

#include <string.h>

static void
add_node_keys(GRegex *keys, const char *body, hwloc_bitmap_t nodes)
{
  g_autoptr(GMatchInfo) mi = NULL;
  g_regex_match(keys, body, 0, &mi);
  while (g_match_info_matches(mi)) {
    g_autofree char *num = g_match_info_fetch(mi, 1);
    guint64 v = g_ascii_strtoull(num, NULL, 10);
    if (v <= QP_LIST_MAX_INDEX)
      hwloc_bitmap_set(nodes, (unsigned)v);
    g_match_info_next(mi, NULL);
  }
}

/* Finds the text of section FIELD (a JSON object or array without nesting
 * of the same bracket) in TEXT. NULL when the section is missing or not
 * closed. */
static char *
section(const char *text, const char *field, char open, char close)
{
  g_autofree char *pat = g_strdup_printf(
      "\"%s\"\\s*:\\s*\\%c([^\\%c\\%c]*)\\%c", field, open, open, close, close);
  g_autoptr(GRegex) re = g_regex_new(pat, G_REGEX_RAW, 0, NULL);
  g_autoptr(GMatchInfo) mi = NULL;
  if (re == NULL || !g_regex_match(re, text, 0, &mi))
    return NULL;
  return g_match_info_fetch(mi, 1);
}

/* Node numbers a damaged record names. Only when every section that names
 * nodes or CPUs is still complete (memory-mib, hugepages, dedicated-cpus,
 * load); otherwise NULL: the record may have held any node. */
static hwloc_bitmap_t
salvage_nodes(const char *text, const QpHost *host)
{
  g_autofree char *mem = section(text, "memory-mib", '{', '}');
  g_autofree char *huge = section(text, "hugepages", '[', ']');
  g_autofree char *load = section(text, "load", '{', '}');
  if (mem == NULL || huge == NULL || load == NULL)
    return NULL;
  g_autoptr(GRegex) cpus_re = g_regex_new(
      "\"dedicated-cpus\"\\s*:\\s*\"([0-9,-]*)\"", G_REGEX_RAW, 0, NULL);
  g_autoptr(GMatchInfo) cmi = NULL;
  if (!g_regex_match(cpus_re, text, 0, &cmi))
    return NULL;
  g_autofree char *cpus = g_match_info_fetch(cmi, 1);

  g_auto(hwloc_bitmap_t) nodes = hwloc_bitmap_alloc();
  g_autoptr(GRegex) keys =
      g_regex_new("\"([0-9]{1,5})\"\\s*:", G_REGEX_RAW, 0, NULL);
  g_autoptr(GRegex) hnodes =
      g_regex_new("\"node\"\\s*:\\s*([0-9]{1,5})", G_REGEX_RAW, 0, NULL);
  add_node_keys(keys, mem, nodes);
  add_node_keys(keys, load, nodes);
  add_node_keys(hnodes, huge, nodes);
  if (*cpus != '\0') {
    g_auto(hwloc_bitmap_t) set = NULL;
    if (!qp_list_parse(cpus, "dedicated-cpus", QP_LIST_MAX_INDEX, &set, NULL))
      return NULL;
    if (host == NULL)
      return NULL; /* cannot map CPUs to nodes */
    for (int cpu = hwloc_bitmap_first(set); cpu >= 0;
         cpu = hwloc_bitmap_next(set, cpu)) {
      gboolean found = FALSE;
      for (guint i = 0; i < host->n_cpus; i++)
        if (host->cpus[i].id == cpu && host->cpus[i].node >= 0) {
          hwloc_bitmap_set(nodes, (unsigned)host->cpus[i].node);
          found = TRUE;
        }
      if (!found)
        return NULL; /* a CPU this host does not know */
    }
  }
  if (hwloc_bitmap_iszero(nodes))
    return NULL;
  return g_steal_pointer(&nodes);
}

static void
all_nodes(const QpHost *host, hwloc_bitmap_t out)
{
  if (host == NULL) {
    hwloc_bitmap_set_range(out, 0, QP_LIST_MAX_INDEX);
    return;
  }
  for (guint i = 0; i < host->n_nodes; i++)
    hwloc_bitmap_set(out, (unsigned)host->nodes[i].id);
}

void
qp_ledger_block_unreadable(QpClaims *claims, const char *path, const char *text,
                           const QpHost *host)
{
  g_auto(hwloc_bitmap_t) nodes = NULL;
  if (text != NULL)
    nodes = salvage_nodes(text, host);
  if (nodes != NULL) {
    g_autofree char *list = qp_list_format(nodes);
    hwloc_bitmap_or(claims->blocked_nodes, claims->blocked_nodes, nodes);
    gboolean one = hwloc_bitmap_weight(nodes) == 1;
    g_ptr_array_add(claims->warnings,
                    g_strdup_printf("ledger record %s is unreadable: its "
                                    "%s %s %s held until an operator "
                                    "removes it",
                                    path, one ? "node" : "nodes", list,
                                    one ? "is" : "are"));
  } else {
    g_auto(hwloc_bitmap_t) all = hwloc_bitmap_alloc();
    all_nodes(host, all);
    hwloc_bitmap_or(claims->blocked_nodes, claims->blocked_nodes, all);
    g_autofree char *list = qp_list_format(all);
    g_autofree char *held =
        hwloc_bitmap_weight(all) == 1
            ? g_strdup_printf("node %s (the host's only node) is", list)
            : g_strdup_printf("all nodes %s are", list);
    g_ptr_array_add(claims->warnings,
                    g_strdup_printf("ledger record %s is unreadable and does "
                                    "not say which nodes it holds: %s held "
                                    "until an operator removes it",
                                    path, held));
  }
}
