/* QEMU 7.2's vCPUs and RAM of a machine type given no -smp and -m (see
 * boards.h). */
#include "topology/base/boards.h"

#include <string.h>

/* Machine types whose vCPUs or RAM without -smp and -m are not 1 and
 * 128 MiB, as QEMU 7.2's qemu-system-aarch64, -riscv64, -s390x and
 * -loongarch64 start them (query-cpus-fast, query-memory-size-summary).
 * Boards that start only with a kernel or ROM, or have no RAM to bind, are
 * not here: a launch of theirs keeps 1 and 128 MiB. Nor is loongarch64's
 * virt (1 GiB, where arm's and riscv's virt have 128 MiB): the type's name
 * alone does not tell them apart. */
static const struct {
  const char *type;
  guint cpus, ram_mib;
} board_defaults[] = {
    {"ast2500-evb", 1, 512},
    {"ast2600-evb", 2, 1024},
    {"bletchley-bmc", 2, 2048},
    {"collie", 1, 512},
    {"cubieboard", 1, 1024},
    {"fby35", 3, 128},
    {"fby35-bmc", 2, 2048},
    {"fp5280g2-bmc", 1, 512},
    {"fuji-bmc", 2, 2048},
    {"g220a-bmc", 1, 1024},
    {"kudo-bmc", 2, 1024},
    {"mori-bmc", 2, 1024},
    {"mps2-an385", 1, 16},
    {"mps2-an386", 1, 16},
    {"mps2-an500", 1, 16},
    {"mps2-an505", 1, 16},
    {"mps2-an511", 1, 16},
    {"mps2-an521", 2, 16},
    {"mps3-an524", 2, 2048},
    {"mps3-an547", 1, 2048},
    {"musca-a", 2, 128},
    {"musca-b1", 2, 128},
    {"musicpal", 1, 32},
    {"npcm750-evb", 2, 512},
    {"nuri", 2, 128},
    {"orangepi-pc", 4, 1024},
    {"palmetto-bmc", 1, 256},
    {"qcom-dc-scm-v1-bmc", 2, 1024},
    {"qcom-firework-bmc", 2, 1024},
    {"quanta-gbs-bmc", 2, 1024},
    {"quanta-gsj", 2, 512},
    {"rainier-bmc", 2, 1024},
    {"raspi0", 1, 512},
    {"raspi1ap", 1, 512},
    {"raspi2b", 4, 1024},
    {"raspi3ap", 4, 512},
    {"raspi3b", 4, 1024},
    {"romulus-bmc", 1, 512},
    {"sbsa-ref", 4, 1024},
    {"sifive_u", 2, 128},
    {"smdkc210", 2, 128},
    {"sonorapass-bmc", 1, 512},
    {"supermicrox11-bmc", 1, 256},
    {"tacoma-bmc", 2, 1024},
    {"witherspoon-bmc", 1, 512},
    {"xlnx-versal-virt", 4, 128},
    {"xlnx-zcu102", 4, 128},
};

void
qp_board_defaults(const char *type, guint *cpus, guint *ram_mib)
{
  *cpus = 1;
  *ram_mib = 128;
  for (guint i = 0; type != NULL && i < G_N_ELEMENTS(board_defaults); i++)
    if (strcmp(type, board_defaults[i].type) == 0) {
      *cpus = board_defaults[i].cpus;
      *ram_mib = board_defaults[i].ram_mib;
    }
}
