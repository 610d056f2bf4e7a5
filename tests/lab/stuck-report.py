#!/usr/bin/env python3
"""What a lab boot that made no progress was doing (run-lab.sh calls this
before it stops the boot): the host's load, the CPU time of the lab QEMU's
threads, and where each vCPU of the guest was (RIP, named from a
System.map when one is given: the lab boots with nokaslr), read over the
lab QEMU's human monitor. One line each, for the test's log.

Usage: stuck-report.py MONITOR_SOCKET QEMU_PID [SYSTEM_MAP]
"""
import bisect
import os
import re
import socket
import sys
import time


def load():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def threads(pid):
    """(name, CPU seconds) of each thread of PID."""
    tick = os.sysconf("SC_CLK_TCK")
    out = []
    try:
        tids = sorted(os.listdir(f"/proc/{pid}/task"), key=int)
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        # utime and stime are fields 14 and 15 of stat(5), 12 and 13 here
        out.append((name, (int(fields[11]) + int(fields[12])) / tick))
    return out


def monitor(path, command, timeout=5.0):
    """What the human monitor at PATH answers to COMMAND, or None."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(path)
        buf = b""
        deadline = time.monotonic() + timeout
        while b"(qemu) " not in buf and time.monotonic() < deadline:
            chunk = s.recv(65536)
            if not chunk:
                return None
            buf += chunk
        # Sent at once after the banner, the command was seen lost (QEMU
        # 7.2 reads a new client's input only once its prompt is set up).
        time.sleep(0.3)
        s.sendall(command.encode() + b"\n")
        # The monitor echoes the command after a prompt of its own: the
        # answer is complete at the prompt that follows a register dump.
        buf = b""
        while time.monotonic() < deadline:
            if b"IP=" in buf and buf.rstrip().endswith(b"(qemu)"):
                break
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
        return buf.decode(errors="replace")
    except OSError:
        return None
    finally:
        s.close()


def symbols(path):
    """Sorted (address, name) of the text symbols of System.map PATH."""
    syms = []
    try:
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 3 and parts[1] in "tTwW":
                    syms.append((int(parts[0], 16), parts[2]))
    except OSError:
        return []
    syms.sort()
    return syms


def name(syms, addr):
    if not syms or addr < syms[0][0]:
        return None
    i = bisect.bisect_right([a for a, _ in syms], addr) - 1
    a, n = syms[i]
    return f"{n}+0x{addr - a:x}"


def main():
    if len(sys.argv) < 3:
        print("usage: stuck-report.py MONITOR_SOCKET QEMU_PID [SYSTEM_MAP]",
              file=sys.stderr)
        return 2
    sock, pid = sys.argv[1], sys.argv[2]
    smap = sys.argv[3] if len(sys.argv) > 3 else ""
    ts = threads(pid)
    vcpu = [(n, t) for n, t in ts if "/TCG" in n or "/KVM" in n]
    other = sum(t for n, t in ts if (n, t) not in vcpu)
    print(f"host load {load()}; QEMU's threads used "
          f"{sum(t for _, t in ts):.1f} s of CPU: vCPUs "
          + ", ".join(f"{t:.1f}" for _, t in vcpu)
          + f"; the rest {other:.1f}")
    regs = monitor(sock, "info registers -a")
    if regs is None:
        print("its monitor did not answer")
        return 0
    # RIP= in long mode, EIP= before (a vCPU still in real or protected mode)
    rips = [int(r, 16) for r in re.findall(r"\b[RE]IP=([0-9a-f]+)", regs)]
    halted = re.findall(r"HLT=(\d)", regs)
    syms = symbols(smap) if smap else []
    where = []
    for i, rip in enumerate(rips):
        n = name(syms, rip)
        h = " halted" if i < len(halted) and halted[i] == "1" else ""
        where.append(f"{i}: {rip:x}" + (f" {n}" if n else "") + h)
    print("vCPUs at " + ("; ".join(where) if where else "(no RIP/EIP in the answer)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
