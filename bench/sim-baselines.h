/* The placers qemu-pin is compared with in the placement simulator, written
 * after /work/shared/anchors.md (facts about what they do, not their code).
 *
 * Every placer sees the same host state (per node: memory left, CPUs, vCPUs
 * and instances already there) and returns the node set of one VM, or FALSE
 * to refuse it. Memory of a VM on several nodes is split as qemu-pin's
 * planner splits it (even shares, the remainder on the first node, a node
 * short of its share leaving the rest to the others in order), so that the
 * placers differ only in the nodes they choose. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  guint n;            /* nodes */
  int *id;            /* OS node id per index */
  guint64 *total_mib; /* memory a VM may take (pools excluded) */
  guint64 *free_mib;  /* total minus what VMs hold */
  guint *cpus;        /* usable CPUs */
  guint *vcpus;       /* vCPUs of the VMs that may run there */
  guint *instances;   /* VMs with a share of the node */
} SimState;

typedef struct {
  guint vcpus;
  guint64 mem_mib;
} SimVm;

typedef enum {
  SIM_FIRST_FIT, /* lowest node ids with room */
  SIM_INCUS,     /* fewest instances per node, ceil(vcpus/cpus-per-node) */
  SIM_XEN,       /* libxl: fewest nodes, fewest vCPUs, most free memory */
  SIM_PROXMOX,   /* Proxmox RFC balanced: most uncommitted memory */
  SIM_N_BASELINES,
} SimBaseline;

const char *sim_baseline_name(SimBaseline b);

SimState *sim_state_new(guint n);
SimState *sim_state_copy(const SimState *s);
void sim_state_free(SimState *s);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SimState, sim_state_free)

/* Chooses the nodes (indexes, ascending, *K of them) for VM. FALSE: the
 * placer refuses the VM (no node set it would choose holds it). */
gboolean sim_baseline_place(const SimState *s, const SimVm *vm, SimBaseline b,
                            guint *nodes, guint *k);

/* Splits VM's memory over NODES (the caller checked they hold it) into
 * AMOUNTS (per index into NODES). */
void sim_split(const SimState *s, const SimVm *vm, const guint *nodes, guint k,
               guint64 *amounts);

/* Records VM on NODES with AMOUNTS MiB each. */
void sim_commit(SimState *s, const SimVm *vm, const guint *nodes, guint k,
                const guint64 *amounts);

/* Gives back what sim_commit() recorded for VM on NODES. */
void sim_release(SimState *s, const SimVm *vm, const guint *nodes, guint k,
                 const guint64 *amounts);

G_END_DECLS
