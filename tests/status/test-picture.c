/* status --picture: lstopo draws the host with each VM's claim in its
 * colour and a legend naming it. SVG is text, so the drawing is checked. */
#include <string.h>
#include <unistd.h>

#include "topology/status/status.h"

static QpClaim *
claim(const char *name, const char *dedicated, int node, guint64 mib)
{
  QpClaim *c = qp_claim_new();
  c->id = g_strdup(name);
  c->name = g_strdup(name);
  c->qemu_pid = 4242;
  c->mode = QP_MODE_ONE_TO_ONE;
  if (dedicated != NULL) {
    hwloc_bitmap_t set = NULL;
    g_assert_true(
        qp_list_parse(dedicated, "test", QP_LIST_MAX_INDEX, &set, NULL));
    hwloc_bitmap_copy(c->dedicated, set);
    hwloc_bitmap_free(set);
  }
  QpNodeAmount a = {node, mib};
  g_array_append_val(c->mem, a);
  return c;
}

static void
test_two_vms_svg(void)
{
  g_autofree char *lstopo = g_find_program_in_path("lstopo");
  if (lstopo == NULL) {
    g_test_skip("lstopo (Debian package hwloc) is not installed");
    return;
  }
  g_autofree char *xml =
      g_build_filename(g_getenv("QP_TOPOLOGIES"), "epyc-7351p.xml", NULL);
  g_autoptr(QpClaims) claims = qp_claims_new();
  g_ptr_array_add(claims->claims, claim("web", "0-1", 0, 8192));
  g_ptr_array_add(claims->claims, claim("db", NULL, 2, 4096));
  g_autofree char *dir = g_dir_make_tmp("qp-picture-XXXXXX", NULL);
  g_autofree char *out = g_build_filename(dir, "host.svg", NULL);
  g_autoptr(GError) error = NULL;
  g_assert_true(qp_status_picture(xml, claims, out, &error));
  g_assert_no_error(error);
  g_autofree char *svg = NULL;
  g_assert_true(g_file_get_contents(out, &svg, NULL, NULL));
  g_assert_nonnull(strstr(svg, "<svg"));
  /* Each VM in the legend, with its CPUs and memory. */
  g_assert_nonnull(strstr(
      svg, "web (pid 4242, one-to-one): CPUs 0-1; memory node 0: 8192 MiB"));
  g_assert_nonnull(strstr(
      svg, "db (pid 4242, one-to-one): CPUs shared; memory node 2: 4096 MiB"));
  /* Their colours (#e6194b, #3cb44b) fill the objects they hold: web's two
   * PUs and node 0, db's node 2; nothing else has them. */
  g_auto(GStrv) rects = g_strsplit(svg, "<rect ", -1);
  guint web_pu = 0, web_node = 0, db_node = 0, other = 0;
  for (guint i = 0; rects[i] != NULL; i++) {
    gboolean w = strstr(rects[i], "fill='rgb(230,25,75)'") != NULL;
    gboolean d = strstr(rects[i], "fill='rgb(60,180,75)'") != NULL;
    if (!w && !d)
      continue;
    if (w && g_str_has_prefix(rects[i], "id='PU_"))
      web_pu++;
    else if (w && g_str_has_prefix(rects[i], "id='NUMANode_0_"))
      web_node++;
    else if (d && g_str_has_prefix(rects[i], "id='NUMANode_2_"))
      db_node++;
    else
      other++;
  }
  g_assert_cmpuint(web_pu, ==, 2);
  g_assert_cmpuint(web_node, ==, 1);
  g_assert_cmpuint(db_node, ==, 1);
  g_assert_cmpuint(other, ==, 0);
  /* The L3 web's cores fill, shaded and in the legend; db's node-wide
   * claim has no load. */
  g_assert_nonnull(strstr(svg, "L3 0-1,16-17 (node 0): 2 of 2 cores "
                               "dedicated, 0.00 shared vCPUs (0.00 per CPU)"));
  g_assert_null(strstr(svg, "L3 2-3,18-19"));
  g_assert_nonnull(strstr(svg, "fill='rgb(244,166,166)'"));
  unlink(out);
  rmdir(dir);
}

static void
test_bad_extension(void)
{
  g_autoptr(QpClaims) claims = qp_claims_new();
  g_autoptr(GError) error = NULL;
  g_assert_false(qp_status_picture(NULL, claims, "/tmp/host.jpg", &error));
  g_assert_nonnull(strstr(error->message, "'/tmp/host.jpg'"));
  g_assert_nonnull(strstr(error->message, ".png or .svg"));
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/picture/two-vms-coloured-with-legend", test_two_vms_svg);
  g_test_add_func("/picture/rejects-unknown-format", test_bad_extension);
  return g_test_run();
}
