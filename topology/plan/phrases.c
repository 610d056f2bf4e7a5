/* The words of the planner's reasons and refusals: memory amounts, a
 * node's memory, the scope a refusal looked at, names of guest nodes and
 * pieces of memory. */
#include "topology/plan/phrases.h"

#include "topology/plan/capacity.h"

#include <string.h>

/* "8192 MiB" or "8192 MiB of 2048 KiB hugepages (4096 pages)". */
char *
qp_plan_mem_phrase(const Ctx *ctx, guint c, guint64 units)
{
  if (c == 0)
    return g_strdup_printf("%" G_GUINT64_FORMAT " MiB", units);
  return g_strdup_printf("%" G_GUINT64_FORMAT " MiB of %" G_GUINT64_FORMAT
                         " KiB hugepages (%" G_GUINT64_FORMAT " page%s)",
                         qp_plan_units_to_mib(ctx, c, units), ctx->cls_page[c],
                         units, units == 1 ? "" : "s");
}

/* What NEED (units per class) holds: "1024 MiB and 2048 MiB of 2048 KiB
 * hugepages (1024 pages)". */
char *
qp_plan_need_phrase(const Ctx *ctx, const guint64 *need)
{
  GString *s = g_string_new("");
  for (guint c = 0; c < ctx->ncls; c++)
    if (need[c] > 0) {
      g_autofree char *p = qp_plan_mem_phrase(ctx, c, need[c]);
      g_string_append_printf(s, "%s%s", s->len ? " and " : "", p);
    }
  if (s->len == 0)
    g_string_append(s, "0 MiB");
  return g_string_free(s, FALSE);
}

/* "16384 MiB uncommitted, 2048 MiB uncommitted in 2048 KiB hugepages" */
char *
qp_plan_avail_phrase(const Ctx *ctx, const guint64 *avail, guint i)
{
  GString *s = g_string_new("");
  for (guint c = 0; c < ctx->ncls; c++) {
    if (!ctx->cls_used[c])
      continue;
    g_string_append_printf(s, "%s%" G_GUINT64_FORMAT " MiB uncommitted",
                           s->len ? ", " : "",
                           qp_plan_units_to_mib(ctx, c, avail[AT(ctx, c, i)]));
    if (c > 0)
      g_string_append_printf(s, " in %" G_GUINT64_FORMAT " KiB hugepages",
                             ctx->cls_page[c]);
  }
  return g_string_free(s, FALSE);
}

/* "; 2600 MiB used outside any claim there, the kernel can give 3100 MiB,
 * 512 MiB claimed not yet resident" for a live host's node whose kernel
 * gives less than total less claims, else "". */
static char *
node_now_detail(const Ctx *ctx, guint c, guint i)
{
  if (c != 0 || !ctx->host->nodes[i].measured)
    return g_strdup("");
  g_autofree char *outstanding =
      ctx->outstanding_mib[i] > 0
          ? g_strdup_printf(", %" G_GUINT64_FORMAT
                            " MiB claimed but not yet resident",
                            ctx->outstanding_mib[i])
          : g_strdup("");
  return g_strdup_printf(
      ", %" G_GUINT64_FORMAT " MiB used outside any claim, the kernel can give "
      "%" G_GUINT64_FORMAT " MiB now%s",
      ctx->outside_mib[i], ctx->can_give_mib[i], outstanding);
}

/* "(16384 MiB total, 12028 MiB claimed, 512 MiB reserved)", and what a live
 * host's node has used (node_now_detail()). Ordinary memory is the node's
 * total less its hugepage pools: those are said when there are any
 * ("16384 MiB total, 2048 MiB of it in hugepage pools"), so that total
 * reads as the node's MemTotal and the numbers add up. A pool is "in the
 * pool". */
char *
qp_plan_node_mem_detail(const Ctx *ctx, guint c, guint i)
{
  gsize k = AT(ctx, c, i);
  g_autofree char *reserve =
      ctx->reserve_units[k] > 0
          ? g_strdup_printf(", %" G_GUINT64_FORMAT " MiB reserved",
                            qp_plan_units_to_mib(ctx, c, ctx->reserve_units[k]))
          : g_strdup("");
  /* Memory this process may not use (QEMU's cgroup cpuset.mems, an
   * inherited numactl --membind) counts as none: say why, not what the
   * kernel could give there. */
  if (qp_host_node_mem_denied(ctx->host, ctx->host->nodes[i].id))
    return g_strdup("(its memory is outside the nodes this process may "
                    "use: QEMU's cgroup cpuset.mems and inherited memory "
                    "policy)");
  g_autofree char *now = node_now_detail(ctx, c, i);
  g_autofree char *have = NULL;
  if (c == 0) {
    const QpNode *n = &ctx->host->nodes[i];
    guint64 pools = qp_node_hugepage_mib(n);
    have = pools > 0 ? g_strdup_printf("%" G_GUINT64_FORMAT
                                       " MiB total, %" G_GUINT64_FORMAT
                                       " MiB of it in hugepage pools",
                                       n->total_mib, pools)
                     : g_strdup_printf("%" G_GUINT64_FORMAT " MiB total",
                                       ctx->total_units[k]);
  } else {
    have = g_strdup_printf("%" G_GUINT64_FORMAT " MiB in the pool",
                           qp_plan_units_to_mib(ctx, c, ctx->total_units[k]));
  }
  return g_strdup_printf("(%s, %" G_GUINT64_FORMAT " MiB claimed%s%s)", have,
                         qp_plan_units_to_mib(ctx, c, ctx->claimed_units[k]),
                         reserve, now);
}

const char *
qp_plan_cap_unit_name(CapKind cap, guint n)
{
  switch (cap) {
  case CAP_CPUS:
    return n == 1 ? "usable CPU" : "usable CPUs";
  case CAP_CORES:
    return n == 1 ? "free core" : "free cores";
  case CAP_GROUPS:
    return n == 1 ? "free core with SMT siblings"
                  : "free cores with SMT siblings";
  case CAP_PUS:
    return n == 1 ? "free CPU on free cores" : "free CPUs on free cores";
  }
  return "?";
}

char *
qp_plan_gnode_name(const Ctx *ctx, int gi)
{
  if (gi < 0)
    return g_strdup("guest");
  return g_strdup_printf("guest node %d", ctx->req->gnodes[gi].id);
}

/* "guest node 1", or "pc-dimm dimm0 of guest node 1" for a device. */
char *
qp_plan_piece_name(const Ctx *ctx, const Piece *p)
{
  g_autofree char *g = qp_plan_gnode_name(ctx, p->gi);
  if (p->kind == QP_MEM_RAM)
    return g_steal_pointer(&g);
  if (p->kind == QP_MEM_UNUSED)
    return g_strdup_printf("unused memory backend %s", p->memdev);
  return g_strdup_printf("%s %s of %s", qp_mem_kind_name(p->kind),
                         p->device != NULL ? p->device : p->memdev, g);
}

/* "in affinity 0-7 on host nodes 0-1 of CPU kind 1 (4 CPUs dedicated to
 * other VMs)" */
char *
qp_plan_scope_phrase(const Ctx *ctx, const Attempt *a, const gboolean *cand)
{
  GString *s = g_string_new("");
  g_auto(hwloc_bitmap_t) nodes = hwloc_bitmap_alloc();
  for (guint i = 0; i < ctx->nn; i++)
    if (cand[i])
      hwloc_bitmap_set(nodes, ctx->host->nodes[i].id);
  if (ctx->opts->affinity != NULL) {
    g_autofree char *l = qp_list_format(ctx->opts->affinity);
    g_string_append_printf(s, " in affinity %s", l);
    /* A --affinity of another host's, or a typo: say the host's. */
    g_auto(hwloc_bitmap_t) cpus = hwloc_bitmap_alloc();
    for (guint i = 0; i < ctx->nn; i++)
      if (ctx->host->nodes[i].all_cpus != NULL)
        hwloc_bitmap_or(cpus, cpus, ctx->host->nodes[i].all_cpus);
    if (!hwloc_bitmap_intersects(ctx->opts->affinity, cpus)) {
      g_autofree char *have = qp_list_format(cpus);
      g_string_append_printf(s, " (none of this host's CPUs %s)", have);
    }
  }
  g_autofree char *nl = qp_list_format(nodes);
  if (*nl != '\0') {
    g_string_append_printf(s, " on host nodes %s", nl);
  } else {
    g_string_append(s, " on host nodes (none");
    /* A --hostnodes of another host's, or a typo: name it and the host's. */
    g_auto(hwloc_bitmap_t) all = hwloc_bitmap_alloc();
    for (guint i = 0; i < ctx->nn; i++)
      hwloc_bitmap_set(all, (unsigned)ctx->host->nodes[i].id);
    if (ctx->opts->hostnodes != NULL &&
        !hwloc_bitmap_intersects(ctx->opts->hostnodes, all)) {
      g_autofree char *given = qp_list_format(ctx->opts->hostnodes);
      g_autofree char *have = qp_list_format(all);
      g_string_append_printf(
          s, ": --hostnodes %s names none of this host's nodes %s", given,
          have);
    }
    g_string_append(s, ")");
  }
  g_string_append(s, a->kind_note);
  int ded = hwloc_bitmap_weight(ctx->dedicated_others);
  if (ded > 0)
    g_string_append_printf(s, " (%d CPU%s dedicated to other VMs)", ded,
                           ded == 1 ? "" : "s");
  if (ctx->claims != NULL && ctx->claims->blocked_nodes != NULL &&
      !hwloc_bitmap_iszero(ctx->claims->blocked_nodes)) {
    g_autofree char *bl = qp_list_format(ctx->claims->blocked_nodes);
    gboolean one = hwloc_bitmap_weight(ctx->claims->blocked_nodes) == 1;
    g_string_append_printf(s,
                           " (%s %s %s held whole by unreadable ledger "
                           "records until an operator removes them)",
                           one ? "node" : "nodes", bl, one ? "is" : "are");
  }
  return g_string_free(s, FALSE);
}

gboolean
qp_plan_error_is_memory(const GError *error)
{
  return error != NULL && strstr(error->message, " MiB uncommitted") != NULL;
}

void
qp_plan_set_node_short_error(const Ctx *ctx, const guint64 *avail, guint i,
                             guint c, guint64 need, const char *who,
                             GError **error)
{
  g_autofree char *what = qp_plan_mem_phrase(ctx, c, need);
  g_autofree char *detail = qp_plan_node_mem_detail(ctx, c, i);
  g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT,
              "%s needs %s but the best node %d has only %" G_GUINT64_FORMAT
              " MiB uncommitted %s",
              who, what, ctx->host->nodes[i].id,
              qp_plan_units_to_mib(ctx, c, avail[AT(ctx, c, i)]), detail);
}

void
qp_plan_set_device_node_error(const Ctx *ctx, guint i, GError **error)
{
  g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT,
              "--device-locality=required: no guest node fits on host "
              "node %d, which holds a vfio device of the guest",
              ctx->host->nodes[i].id);
}
