/* libFuzzer target for QEMU's command line as qemu-pin reads it
 * (launcher/qemu/), both syntaxes: the input is split at '\n' into
 * argv, so that "-object\n{...JSON...}" and "-numa\nnode,cpus=0-1" reach the
 * key=value and the JSON readers alike. What parses is then planned on a
 * fixed two-node synthetic host (the mode chosen by the first byte) and
 * rewritten for launch, and its claim is written and read back: the
 * rewrite must not fail on what the parser accepted, and the record must
 * survive its own round trip. */
#include <stdlib.h>
#include <string.h>

#include "launcher/qemu/args.h"
#include "launcher/qemu/rewrite.h"
#include "topology/host/host.h"
#include "topology/ledger/ledger.h"
#include "topology/plan/claim.h"
#include "topology/plan/plan.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static QpHost *host;

static const QpMode modes[] = {QP_MODE_AUTO, QP_MODE_BALANCED, QP_MODE_NUMA,
                               QP_MODE_ONE_TO_ONE};

int
LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
  if (host == NULL) {
    host =
        qp_host_load_synthetic("pack:2 numa:1(memory=16GiB) core:4 pu:2", NULL);
    if (host == NULL)
      abort();
  }
  if (size < 1 || size > 4096)
    return 0;
  QpMode mode = modes[data[0] % G_N_ELEMENTS(modes)];
  g_autofree char *text = g_strndup((const char *)data + 1, size - 1);
  g_auto(GStrv) argv = g_strsplit(text, "\n", 64);
  guint argc = g_strv_length(argv);

  g_autoptr(GError) error = NULL;
  g_autoptr(QpQemuArgs) args = qp_qemu_args_parse(argc, argv, &error);
  if (args == NULL) {
    /* The contract: one line naming what was wrong. */
    if (error == NULL || error->message[0] == '\0' ||
        strchr(error->message, '\n') != NULL)
      abort();
    return 0;
  }
  if (args->passthrough || args->req == NULL)
    return 0;

  QpPlacementOptions opts;
  qp_placement_options_init(&opts);
  opts.mode = mode;
  g_autoptr(QpClaims) claims = qp_claims_new();
  g_autoptr(QpPlan) plan =
      qp_plan_compute(host, claims, args->req, &opts, &error);
  qp_placement_options_clear(&opts);
  if (plan == NULL) {
    if (error == NULL || strchr(error->message, '\n') != NULL)
      abort();
    return 0;
  }
  g_auto(GStrv) out =
      qp_qemu_args_rewrite(args, "qemu-system-x86_64", plan, 3, &error);
  if (out == NULL && (error == NULL || strchr(error->message, '\n') != NULL))
    abort();

  g_autoptr(QpClaim) claim = qp_claim_from_plan(plan, "fuzz", args->name);
  g_autofree char *json = qp_claim_to_json(claim);
  g_autoptr(QpClaim) back = qp_claim_from_json(json, strlen(json), &error);
  if (back == NULL)
    abort(); /* a record we wrote must read back */
  g_autofree char *json2 = qp_claim_to_json(back);
  if (strcmp(json, json2) != 0)
    abort();
  return 0;
}
