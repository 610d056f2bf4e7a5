/* A picture of the host with the VMs that hold claims, drawn by hwloc's own
 * renderer (lstopo) from per-object styles. */
#pragma once

#include <glib.h>

#include "topology/claims.h"

G_BEGIN_DECLS

/* Draws the host (live, or the recorded XML_PATH) with each VM of CLAIMS in
 * its own colour (its dedicated CPUs and the nodes holding its memory) and a
 * legend, to OUT; the format follows OUT's extension (.png or .svg). */
gboolean qp_status_picture(const char *xml_path, const QpClaims *claims,
                           const char *out, GError **error);

G_END_DECLS
