/* libFuzzer target for the ledger record reader (qp_claim_from_json): a
 * record another process (or a crash, or a hostile user) left in the state
 * directory. An accepted record writes back to JSON that reads back to the
 * same JSON; a rejected one gets a one-line error. */
#include <stdlib.h>
#include <string.h>

#include "topology/ledger/ledger.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int
LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
  if (size > 65536)
    return 0;
  g_autoptr(GError) error = NULL;
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
  g_autofree char *json = qp_claim_to_json(claim);
  g_autoptr(QpClaim) back = qp_claim_from_json(json, strlen(json), &error);
  if (back == NULL)
    abort();
  g_autofree char *json2 = qp_claim_to_json(back);
  if (strcmp(json, json2) != 0)
    abort();
  return 0;
}
