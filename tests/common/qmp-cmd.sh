# Sourced (POSIX sh) by the shell tests that speak to a VM's own QMP
# socket, as its caller would (tests/launch/check-move.sh,
# tests/lab/lab-move.sh).
# qmp_cmd SOCKET COMMAND ARGS_JSON: one command after the handshake; fails,
# QEMU's error on stderr, when QEMU answers with an error.
qmp_cmd() {
  python3 - "$@" <<'PY'
import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); f = s.makefile("rw")
f.readline()
def cmd(c, a):
    f.write(json.dumps({"execute": c, "arguments": a}) + "\n"); f.flush()
    while True:
        r = json.loads(f.readline())
        if "return" in r or "error" in r:
            return r
cmd("qmp_capabilities", {})
r = cmd(sys.argv[2], json.loads(sys.argv[3]))
if "error" in r:
    sys.exit("%s: %s" % (sys.argv[2], r["error"].get("desc", r["error"])))
PY
}
