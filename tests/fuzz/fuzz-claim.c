/* libFuzzer target for the ledger record's two readers: the record file
 * (qp_claim_from_json), which another process (or a crash, or a hostile
 * user) left in the state directory, and the summary's line
 * (qp_claim_from_summary_line), the input read as one. An accepted record
 * writes back to JSON, and to a line, that read back to the same JSON; a
 * rejected one gets a one-line error. */
#include <stdlib.h>
#include <string.h>

#include "topology/ledger/ledger.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

/* CLAIM, accepted, writes JSON and a line that both read back to the same
 * JSON. */
static void
check_round_trip(const QpClaim *claim)
{
  g_autofree char *json = qp_claim_to_json(claim);
  g_autoptr(QpClaim) back = qp_claim_from_json(json, strlen(json), NULL);
  if (back == NULL)
    abort();
  g_autofree char *json2 = qp_claim_to_json(back);
  g_autofree char *line = qp_claim_to_summary_line(claim);
  g_autoptr(QpClaim) from_line = qp_claim_from_summary_line(line, NULL);
  if (from_line == NULL)
    abort();
  g_autofree char *json3 = qp_claim_to_json(from_line);
  if (strcmp(json, json2) != 0 || strcmp(json, json3) != 0)
    abort();
}

int
LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
  if (size > 65536)
    return 0;
  g_autoptr(GError) error = NULL;
  g_autofree char *line = g_strndup((const char *)data, size);
  g_autoptr(QpClaim) from_line = qp_claim_from_summary_line(line, &error);
  if (from_line == NULL) {
    if (error == NULL || error->message[0] == '\0')
      abort();
    g_clear_error(&error);
  } else {
    check_round_trip(from_line);
  }
  g_autoptr(QpClaim) claim =
      qp_claim_from_json((const char *)data, size, &error);
  if (claim == NULL) {
    /* Errors quote the bad value as given, line breaks and all (finding 1
     * in docs/robustness.md: escaped when printed), so only their presence is
     * checked here. */
    if (error == NULL || error->message[0] == '\0')
      abort();
    return 0;
  }
  check_round_trip(claim);
  return 0;
}
