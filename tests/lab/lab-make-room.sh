# In-lab test (shape 4n): lab-rebalance.sh's fragmented host, where one
# move makes room for a big VM, with that VM launched by
# `qemu-pin --make-room` instead of a `rebalance` first.
QP_LAB_MAKE_ROOM=1
. "$QP_LAB_SRC/lab-rebalance.sh"
