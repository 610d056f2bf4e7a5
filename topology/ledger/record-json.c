/* A VM's holdings added to a json-glib builder, for the views (record.h).
 * A file of its own: the launch path, which writes records with jvalue.h,
 * links no json-glib. */
#include "topology/base/json.h"
#include "topology/ledger/record.h"

void
qp_json_add_holdings(JsonBuilder *b, const GArray *mem, const GArray *huge,
                     hwloc_const_bitmap_t dedicated, const GArray *load,
                     const GArray *cpu_load)
{
  g_autoptr(QpJv) o = qp_jv_object();
  qp_claim_holdings_to_jv(o, mem, huge, dedicated, load, cpu_load);
  qp_json_add_jv_members(b, o);
}
