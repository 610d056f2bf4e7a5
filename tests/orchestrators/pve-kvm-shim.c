/* Stands in for Proxmox's QEMU build (pve-qemu-kvm) in the Proxmox-style
 * test: Proxmox patches QEMU to accept `-id VMID`, upstream QEMU does not.
 * This drops `-id N` and runs upstream QEMU (QP_SHIM_QEMU, default
 * /usr/bin/qemu-system-x86_64) with everything else, argv[0] included, as
 * given: what pve-qemu-kvm would see from qemu-pin. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int
main(int argc, char **argv)
{
  const char *real = getenv("QP_SHIM_QEMU");
  if (real == NULL || *real == '\0')
    real = "/usr/bin/qemu-system-x86_64";
  char **out = calloc((size_t)argc + 1, sizeof(char *));
  if (out == NULL)
    return 127;
  int n = 0;
  for (int i = 0; i < argc; i++) {
    if (i > 0 && strcmp(argv[i], "-id") == 0 && i + 1 < argc) {
      i++;
      continue;
    }
    out[n++] = argv[i];
  }
  out[n] = NULL;
  execv(real, out);
  fprintf(stderr, "pve-kvm-shim: cannot run %s\n", real);
  free(out);
  return 127;
}
