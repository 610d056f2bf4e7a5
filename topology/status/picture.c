/* `qemu-pin status --picture`: the host drawn by lstopo with the VMs that
 * hold claims (see status.h). */
#include "topology/status/status.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "topology/plan/capacity.h"
#include "topology/status/usage.h"
#include "topology/base/cpulist.h"
#include "topology/host/host.h"

G_DEFINE_AUTO_CLEANUP_FREE_FUNC(hwloc_topology_t, hwloc_topology_destroy, NULL)

/* Colours that stay apart from each other and from lstopo's own greys. */
static const char *const palette[] = {
    "#e6194b", "#3cb44b", "#4363d8", "#f58231", "#911eb4", "#42d4f4",
    "#f032e6", "#bfef45", "#fabed4", "#469990", "#dcbeff", "#9a6324",
};

static void
style(hwloc_obj_t obj, const char *colour)
{
  g_autofree char *v = g_strdup_printf("Background=%s;Text=#ffffff", colour);
  hwloc_obj_add_info(obj, "lstopoStyle", v);
}

/* lstopo's output format for OUT, from its extension; NULL: none. */
static const char *
picture_format(const char *out)
{
  if (g_str_has_suffix(out, ".png"))
    return "png";
  if (g_str_has_suffix(out, ".svg"))
    return "nativesvg"; /* text stays text */
  return NULL;
}

gboolean
qp_status_picture_format_known(const char *out, GError **error)
{
  if (picture_format(out) != NULL)
    return TRUE;
  g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_INVALID,
              "--picture '%s': expected a file name ending in .png or .svg",
              out);
  return FALSE;
}

/* Colours claim C's dedicated CPUs and the nodes holding its memory in
 * TOPO, and adds its legend line to ARGV. */
static void
style_vm(hwloc_topology_t topo, const QpClaim *c, const char *colour,
         GPtrArray *argv)
{
  int cpu;
  hwloc_bitmap_foreach_begin(cpu, c->dedicated)
  {
    hwloc_obj_t pu = hwloc_get_pu_obj_by_os_index(topo, (unsigned)cpu);
    if (pu != NULL)
      style(pu, colour);
  }
  hwloc_bitmap_foreach_end();
  g_autoptr(GString) mem = g_string_new(NULL);
  for (guint m = 0; m < c->mem->len; m++) {
    const QpNodeAmount *a = &g_array_index(c->mem, QpNodeAmount, m);
    hwloc_obj_t node =
        hwloc_get_numanode_obj_by_os_index(topo, (unsigned)a->node);
    /* A node shared by several VMs keeps the colour of the first. */
    if (node != NULL && hwloc_obj_get_info_by_name(node, "lstopoStyle") == NULL)
      style(node, colour);
    g_string_append_printf(mem, "%snode %d: %" G_GUINT64_FORMAT " MiB",
                           m ? ", " : "", a->node, a->mib);
  }
  g_autofree char *ded = qp_list_format(c->dedicated);
  g_ptr_array_add(argv, g_strdup("--append-legend"));
  g_ptr_array_add(
      argv, g_strdup_printf("%s = %s (pid %d, %s): CPUs %s; memory %s", colour,
                            c->name ? c->name : c->id, c->qemu_pid,
                            qp_mode_name(c->mode), *ded ? ded : "shared",
                            mem->len ? mem->str : "none"));
}

/* Shades each L3 domain of HOST that VMs use (amber: partly, red: every
 * core dedicated or a vCPU per CPU) and adds a legend line for it. */
static void
style_domains(hwloc_topology_t topo, const QpHost *host, const QpClaims *claims,
              GPtrArray *argv)
{
  g_auto(hwloc_bitmap_t) dedicated = qp_claims_dedicated(claims);
  g_autofree double *load = qp_claims_cpu_load(host, claims);
  for (guint d = 0; d < host->n_domains; d++) {
    const QpCacheDomain *cd = &host->domains[d];
    QpCacheUsage u;
    qp_cache_usage(host, dedicated, load, d, &u);
    if (cd->level != QP_CACHE_L3 ||
        (u.dedicated_cores == 0 && u.shared_vcpus <= 0))
      continue;
    gboolean full = u.dedicated_cores == cd->n_cores || u.per_cpu >= 1.0;
    for (hwloc_obj_t o =
             hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_L3CACHE, NULL);
         o != NULL; o = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_L3CACHE, o))
      if (hwloc_bitmap_isequal(o->complete_cpuset, cd->cpus))
        hwloc_obj_add_info(o, "lstopoStyle",
                           full ? "Background=#f4a6a6" : "Background=#ffe08a");
    g_autofree char *cpus = qp_list_format(cd->cpus);
    g_ptr_array_add(argv, g_strdup("--append-legend"));
    g_ptr_array_add(argv,
                    g_strdup_printf("L3 %s (node %d): %u of %u cores "
                                    "dedicated, %.2f shared vCPUs (%.2f per "
                                    "CPU)",
                                    cpus, cd->node, u.dedicated_cores,
                                    cd->n_cores, u.shared_vcpus, u.per_cpu));
  }
}

/* Runs lstopo with ARGV (without its input) on TOPO, exported to a
 * temporary XML file, drawing OUT. */
static gboolean
run_lstopo(hwloc_topology_t topo, GPtrArray *argv, const char *format,
           const char *out, GError **error)
{
  g_autofree char *tmpl =
      g_build_filename(g_get_tmp_dir(), "qemu-pin-XXXXXX.xml", NULL);
  int fd = g_mkstemp(tmpl);
  if (fd < 0) {
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_LOAD,
                "cannot create a temporary file: %s", g_strerror(errno));
    return FALSE;
  }
  close(fd);
  if (hwloc_topology_export_xml(topo, tmpl, 0) < 0) {
    unlink(tmpl);
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_LOAD,
                "cannot write the topology to %s: %s", tmpl, g_strerror(errno));
    return FALSE;
  }
  g_ptr_array_add(argv, g_strdup("-i"));
  g_ptr_array_add(argv, g_strdup(tmpl));
  g_ptr_array_add(argv, g_strdup("--of"));
  g_ptr_array_add(argv, g_strdup(format));
  g_ptr_array_add(argv, g_strdup("-f"));
  g_ptr_array_add(argv, g_strdup(out));
  g_ptr_array_add(argv, NULL);

  g_autofree char *err = NULL;
  int status = 0;
  g_autoptr(GError) local = NULL;
  gboolean ok = g_spawn_sync(NULL, (char **)argv->pdata, NULL,
                             G_SPAWN_SEARCH_PATH | G_SPAWN_STDOUT_TO_DEV_NULL,
                             NULL, NULL, NULL, &err, &status, &local);
  unlink(tmpl);
  if (!ok) {
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_LOAD,
                "cannot run lstopo (Debian package hwloc): %s", local->message);
    return FALSE;
  }
  if (!g_spawn_check_wait_status(status, NULL)) {
    g_strstrip(err);
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_LOAD,
                "lstopo could not draw %s: %s", out,
                *err ? err : "unknown error");
    return FALSE;
  }
  return TRUE;
}

gboolean
qp_status_picture(const char *xml_path, const QpClaims *claims, const char *out,
                  GError **error)
{
  if (!qp_status_picture_format_known(out, error))
    return FALSE;
  const char *format = picture_format(out);

  g_auto(hwloc_topology_t) topo = NULL;
  if (qp_hwloc_topology_init(&topo) < 0 ||
      (xml_path != NULL && hwloc_topology_set_xml(topo, xml_path) < 0) ||
      hwloc_topology_load(topo) < 0) {
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_LOAD,
                "cannot load the host topology%s%s: %s",
                xml_path ? " from " : "", xml_path ? xml_path : "",
                g_strerror(errno));
    return FALSE;
  }

  g_autoptr(GPtrArray) argv = g_ptr_array_new_with_free_func(g_free);
  g_ptr_array_add(argv, g_strdup("lstopo"));
  g_ptr_array_add(argv, g_strdup("--no-io"));
  g_ptr_array_add(argv, g_strdup("--no-default-legend"));
  g_ptr_array_add(argv, g_strdup("--append-legend"));
  g_ptr_array_add(argv,
                  g_strdup("qemu-pin status: VMs by colour (dedicated CPUs, "
                           "nodes holding their memory)"));
  guint n = claims ? claims->claims->len : 0;
  for (guint i = 0; i < n; i++)
    style_vm(topo, g_ptr_array_index(claims->claims, i),
             palette[i % G_N_ELEMENTS(palette)], argv);
  if (n == 0) {
    g_ptr_array_add(argv, g_strdup("--append-legend"));
    g_ptr_array_add(argv, g_strdup("no VM holds a claim"));
  }
  /* Cache domains in use, from the host model of the same topology. */
  g_autoptr(QpHost) host = qp_host_load_full(xml_path, FALSE, NULL);
  if (host != NULL && n > 0)
    style_domains(topo, host, claims, argv);
  return run_lstopo(topo, argv, format, out, error);
}
