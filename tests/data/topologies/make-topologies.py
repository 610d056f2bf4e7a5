#!/usr/bin/env python3
"""Regenerates the recorded test hosts in this directory.

Each host starts as an hwloc synthetic description exported to XML by
`lstopo -i DESC --of xml`; the script then edits what synthetic descriptions
cannot express (per-node memory, hugepage pools, SLIT distances, CPU kinds,
a cgroup-restricted allowed cpuset, PCI devices, a CPU-less node, cores with
different thread counts), recomputes every cpuset/nodeset from the PUs and
nodes, and checks the result with `HWLOC_DEBUG_CHECK=1 lstopo -i FILE`.

Run from anywhere: python3 tests/data/topologies/make-topologies.py

With --hwloc-src DIR (an unpacked hwloc 2.9.0 source tree, e.g. from
`apt-get source hwloc` on Debian 12) it also re-imports the hosts recorded by
hwloc's developers for hwloc's own test suite (see RECORDED below and the
README).
"""
import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
MIB = 1024 * 1024
GIB = 1024 * MIB


def lstopo_xml(desc):
    out = subprocess.run(
        ["lstopo-no-graphics", "-i", desc, "--of", "xml", "-"],
        check=True, capture_output=True, text=True).stdout
    return ET.fromstring(out)


def fmt_set(bits):
    if not bits:
        return "0x0"
    words = []
    v = 0
    for b in bits:
        v |= 1 << b
    while v:
        words.append(v & 0xFFFFFFFF)
        v >>= 32
    return ",".join("0x%08x" % w for w in reversed(words))


def objs(elem):
    return [c for c in elem if c.tag == "object"]


def is_memory(o):
    return o.get("type") in ("NUMANode", "MemCache")


def is_io(o):
    return o.get("type") in ("Bridge", "PCIDev", "OSDev")


def recompute(root):
    """cpuset = PUs below; a NUMA node's cpuset = its parent's; nodeset =
    nodes below plus nodes attached to ancestors (hwloc's locality)."""
    def cpus(o):
        if o.get("type") == "PU":
            s = {int(o.get("os_index"))}
        else:
            s = set()
            for c in objs(o):
                if not is_memory(c) and not is_io(c):
                    s |= cpus(c)
        o.set("_cpus", s)
        return s

    def nodes_below(o):
        s = set()
        for c in objs(o):
            if c.get("type") == "NUMANode":
                s.add(int(c.get("os_index")))
            if not is_io(c):
                s |= nodes_below(c)
        return s

    def assign(o, parent_cpus, inherited):
        if o.get("type") == "NUMANode":
            cs, ns = parent_cpus, {int(o.get("os_index"))}
        else:
            cs = o.get("_cpus")
            local = {int(c.get("os_index")) for c in objs(o)
                     if c.get("type") == "NUMANode"}
            inherited = inherited | local
            ns = inherited | nodes_below(o)
        for k, v in (("cpuset", cs), ("complete_cpuset", cs),
                     ("nodeset", ns), ("complete_nodeset", ns)):
            o.set(k, fmt_set(v))
        for c in objs(o):
            if not is_io(c):
                assign(c, cs, inherited)

    machine = objs(root)[0]
    cpus(machine)
    assign(machine, machine.get("_cpus"), set())
    for o in machine.iter("object"):
        if "_cpus" in o.attrib:
            del o.attrib["_cpus"]
    allc = machine.get("cpuset")
    machine.set("allowed_cpuset", allc)
    machine.set("allowed_nodeset", machine.get("nodeset"))
    return machine


def numa_nodes(root):
    return sorted((o for o in root.iter("object") if o.get("type") == "NUMANode"),
                  key=lambda o: int(o.get("os_index")))


def set_memory(node, total_bytes, pools=((2 * MIB, 0), (GIB, 0))):
    """Node memory and page pools: (page size, count) beyond the 4 KiB base."""
    node.set("local_memory", str(total_bytes))
    for p in list(node):
        if p.tag == "page_type":
            node.remove(p)
    huge = sum(size * count for size, count in pools)
    pts = [(4096, (total_bytes - huge) // 4096)] + list(pools)
    for i, (size, count) in enumerate(pts):
        el = ET.Element("page_type", size=str(size), count=str(count))
        node.insert(i, el)


def next_gp(root):
    return max(int(o.get("gp_index", "0")) for o in root.iter("object")) + 1


def add_pci(root, parent, devices):
    """devices: list of (busid, class) placed behind one host bridge."""
    gp = next_gp(root)
    buses = [int(b.split(":")[1], 16) for b, _ in devices]
    dom = devices[0][0].split(":")[0]
    bridge = ET.SubElement(parent, "object", type="Bridge", gp_index=str(gp),
                           bridge_type="0-1", depth="0",
                           bridge_pci="%s:[%02x-%02x]" % (dom, min(buses), max(buses)))
    for busid, cls in devices:
        gp += 1
        ET.SubElement(bridge, "object", type="PCIDev", gp_index=str(gp),
                      pci_busid=busid,
                      pci_type="%s [8086:1572] [8086:0000] 01" % cls,
                      pci_link_speed="0.000000")


def add_distances(root, ids, matrix):
    n = len(ids)
    idx = "".join("%d " % i for i in ids)
    vals = "".join("%d " % v for row in matrix for v in row)
    d = ET.Element("distances2", type="NUMANode", nbobjs=str(n), kind="5",
                   name="NUMALatency", indexing="os")
    ET.SubElement(d, "indexes", length=str(len(idx))).text = idx
    ET.SubElement(d, "u64values", length=str(len(vals))).text = vals
    # After the objects, before support/cpukind elements.
    pos = [i for i, c in enumerate(root) if c.tag == "object"][-1] + 1
    root.insert(pos, d)


def add_cpukind(root, cpus, efficiency, core_type):
    k = ET.SubElement(root, "cpukind", cpuset=fmt_set(cpus),
                      forced_efficiency=str(efficiency))
    ET.SubElement(k, "info", name="CoreType", value=core_type)


def describe(root, text):
    machine = objs(root)[0]
    for i in list(machine):
        if i.tag == "info" and i.get("name") in ("ProcessName", "SyntheticDescription"):
            machine.remove(i)
    pos = len([i for i in machine if i.tag == "info"])
    machine.insert(pos, ET.Element("info", name="QemuPinTestHost", value=text))


def write(root, name):
    path = os.path.join(HERE, name)
    ET.indent(root, space="  ")
    body = ET.tostring(root, encoding="unicode")
    with open(path, "w") as f:
        f.write('<?xml version="1.0" encoding="UTF-8"?>\n')
        f.write('<!DOCTYPE topology SYSTEM "hwloc2.dtd">\n')
        f.write(body + "\n")
    env = dict(os.environ, HWLOC_DEBUG_CHECK="1")
    subprocess.run(["lstopo-no-graphics", "-i", path, "--whole-io", "-p", "--of",
                    "console"], check=True, env=env, stdout=subprocess.DEVNULL)
    print("wrote", path)


def slit(n, fn):
    return [[fn(i, j) for j in range(n)] for i in range(n)]


def epyc():
    # node N: CPUs 4N..4N+3 and 16+4N..16+4N+3; CPU c and c+16 share a core.
    idx = []
    for c in range(16):
        idx += [c, c + 16]
    root = lstopo_xml("pack:1 numa:4(memory=16GiB) l3:2(size=8MiB) core:2 "
                      "pu:2(indexes=%s)" % ",".join(map(str, idx)))
    for node, mib in zip(numa_nodes(root), (15891, 16124, 16124, 16123)):
        set_memory(node, mib * MIB)
    return root


def make_epyc():
    root = epyc()
    recompute(root)
    add_distances(root, range(4), slit(4, lambda i, j: 10 if i == j else 16))
    describe(root, "AMD EPYC 7351P (seed 000): 4 nodes, 16 cores, SMT n/n+16, SLIT 10/16")
    write(root, "epyc-7351p.xml")


def make_cgroup_subset():
    root = epyc()
    machine = recompute(root)
    machine.set("allowed_cpuset", fmt_set(set(range(0, 6)) | set(range(16, 20))))
    add_distances(root, range(4), slit(4, lambda i, j: 10 if i == j else 16))
    describe(root, "EPYC 7351P seen from a cgroup whose cpuset is 0-3,16-19,4-5")
    write(root, "cgroup-subset.xml")


def make_intel():
    # package p, core k: CPUs 8p+k and 16+8p+k.
    idx = []
    for c in range(16):
        idx += [c, c + 16]
    root = lstopo_xml("pack:2 numa:1(memory=64GiB) core:8 pu:2(indexes=%s)"
                      % ",".join(map(str, idx)))
    for node in numa_nodes(root):
        set_memory(node, 64 * GIB, pools=((2 * MIB, 1024), (GIB, 4)))
    packs = [o for o in root.iter("object") if o.get("type") == "Package"]
    recompute(root)
    add_pci(root, packs[0], [("0000:3b:00.0", "0200"), ("0000:3b:00.1", "0200")])
    add_pci(root, packs[0], [("0000:00:14.0", "0c03")])
    add_pci(root, packs[1], [("0000:af:00.0", "0108"), ("0000:d8:00.0", "0300")])
    add_distances(root, range(2), slit(2, lambda i, j: 10 if i == j else 21))
    describe(root, "2-socket Intel, 8 cores each, SMT n/n+16, 2M and 1G hugepage pools")
    write(root, "intel-2s-smt.xml")


def make_2s8n():
    root = lstopo_xml("pack:2 numa:4(memory=32GiB) core:4 pu:1")
    for node in numa_nodes(root):
        set_memory(node, 32 * GIB)
    recompute(root)
    add_distances(root, range(8), slit(
        8, lambda i, j: 10 if i == j else (12 if i // 4 == j // 4 else 32)))
    describe(root, "2 sockets x 4 nodes, 4 cores per node, no SMT, 10/12/32")
    write(root, "2s-8node.xml")


def make_hybrid():
    root = lstopo_xml("pack:1 numa:1(memory=32GiB) core:16 pu:2")
    cores = [o for o in root.iter("object") if o.get("type") == "Core"]
    for k, core in enumerate(cores):
        pus = [p for p in objs(core) if p.get("type") == "PU"]
        if k < 8:  # P-core: threads 2k, 2k+1
            pus[0].set("os_index", str(2 * k))
            pus[1].set("os_index", str(2 * k + 1))
        else:  # E-core: one thread, 16..23
            pus[0].set("os_index", str(16 + k - 8))
            core.remove(pus[1])
    for node in numa_nodes(root):
        set_memory(node, 32 * GIB)
    recompute(root)
    add_cpukind(root, set(range(16, 24)), 0, "IntelAtom")
    add_cpukind(root, set(range(0, 16)), 1, "IntelCore")
    describe(root, "hybrid: 8 P-cores x 2 threads (0-15), 8 E-cores (16-23)")
    write(root, "hybrid.xml")


def make_cpuless():
    root = lstopo_xml("pack:2 numa:1(memory=32GiB) core:4 pu:1")
    for node in numa_nodes(root):
        set_memory(node, 32 * GIB)
    machine = objs(root)[0]
    # A CXL memory expander: node 2, no CPUs, attached to the whole machine.
    cxl = ET.Element("object", type="NUMANode", os_index="2",
                     gp_index=str(next_gp(root)), subtype="CXL-DRAM")
    set_memory(cxl, 64 * GIB)
    pos = len([i for i in machine if i.tag == "info"])
    machine.insert(pos, cxl)
    recompute(root)
    add_distances(root, range(3), [[10, 20, 30], [20, 10, 30], [30, 30, 10]])
    describe(root, "2 nodes with 4 cores each plus CPU-less node 2 (64 GiB CXL)")
    write(root, "cpuless.xml")


def make_spr_snc4():
    # The shape a 2-socket, 56-core Sapphire Rapids (Xeon Platinum 8480+
    # class) shows with SNC4: per package one 105 MB L3 over four Group0
    # objects, each a NUMA node with 14 cores; core c = CPUs c and c+112.
    idx = []
    for c in range(112):
        idx += [c, c + 112]
    root = lstopo_xml("pack:2 l3:1(size=105MiB) numa:4(memory=32256MiB) "
                      "l2:14(size=2MiB) core:1 pu:2(indexes=%s)"
                      % ",".join(map(str, idx)))
    for node in numa_nodes(root):
        set_memory(node, 32256 * MIB)
    recompute(root)
    add_distances(root, range(8), slit(
        8, lambda i, j: 10 if i == j else (12 if i // 4 == j // 4 else 21)))
    describe(root, "synthetic: 2-socket Sapphire Rapids, SNC4: 8 nodes x 14 "
             "cores x 2 threads, one L3 per package over its 4 nodes")
    write(root, "spr-snc4.xml")


def make_raptorlake():
    # Core i7-1370P: 6 P-cores with 2 threads and a private 1.25 MiB L2 (core
    # k = CPUs 2k, 2k+1), 8 E-cores with one thread in two clusters of four
    # sharing a 2 MiB L2 (CPUs 12-15, 16-19), one 24 MiB L3.
    root = lstopo_xml("pack:1 numa:1(memory=32GiB) l3:1(size=24MiB) "
                      "l2:8(size=2MiB) core:4 pu:2")
    l2s = [o for o in root.iter("object") if o.get("type") == "L2Cache"]
    cpu = 0
    for k, l2 in enumerate(l2s):
        cores = [c for c in objs(l2) if c.get("type") == "Core"]
        if k < 6:  # P-core: one core, two threads, its own L2
            l2.set("cache_size", str(1280 * 1024))
            for extra in cores[1:]:
                l2.remove(extra)
            for pu in objs(cores[0]):
                pu.set("os_index", str(cpu))
                cpu += 1
        else:  # E-core cluster: four cores with one thread each
            for core in cores:
                pus = objs(core)
                core.remove(pus[1])
                pus[0].set("os_index", str(cpu))
                cpu += 1
    for i, core in enumerate(o for o in root.iter("object")
                             if o.get("type") == "Core"):
        core.set("os_index", str(i))
    for node in numa_nodes(root):
        set_memory(node, 32 * GIB)
    recompute(root)
    add_cpukind(root, set(range(12, 20)), 0, "IntelAtom")
    add_cpukind(root, set(range(0, 12)), 1, "IntelCore")
    describe(root, "synthetic: Core i7-1370P (Raptor Lake): 6 P-cores x 2 "
             "threads (0-11), 2 clusters of 4 E-cores sharing an L2 (12-19)")
    write(root, "raptorlake.xml")


# Hosts recorded by hwloc's developers for hwloc's own test suite (hwloc
# 2.9.0, tests/hwloc/, BSD-3-Clause). file: (path in the hwloc source, how to
# import it, node memory in MiB to add when the recording has none, SLIT to
# add when it has none, description).
RECORDED = {
    # Copied as they are.
    "x3950m2-io.xml": ("xml/96em64t-4n4d3ca2co-pci.xml", "copy", None, None, None),
    "dcs8000z-io.xml": ("linux/32em64t-2n8c+1mic.output", "copy", None, None, None),
    "opteron-6272-4s.xml": ("x86+linux/64amd64-4p2n4ca2co.output", "copy",
                            None, None, None),
    # Exported by lstopo from the recorded Linux sysfs and CPUID dumps, as
    # hwloc's test does (x86+linux/test-topology.sh).
    "lakefield.xml": ("x86+linux/5intel64-hybrid-lakefield.tar.bz2",
                      "sysfs+cpuid", None, None, None),
    # Exported from the recorded Linux sysfs alone (linux/test-topology.sh),
    # with the nodes the recorded cpuset.mems leaves out (--disallowed), as
    # qemu-pin loads a live host.
    "memoryless-initiators.xml": (
        "linux/fakememinitiators-1np2c+1npp+gi.tar.bz2", "sysfs", None, None,
        None),
    "cgroup-mems-apart.xml": (
        "linux/16amd64-4n4c-cgroup-distance-merge.tar.bz2", "sysfs", None,
        None, None),
    # CPUID dumps as hwloc's x86 backend reads them (NUMA nodes from AMD
    # topoext): no memory and no SLIT were recorded, so both are added.
    "epyc-7451-2s.xml": (
        "x86/AMD-17h-Zen-2xEpyc-7451.output", "cpuid", 32768,
        lambda i, j: 10 if i == j else (16 if i // 4 == j // 4 else 32),
        "2x EPYC 7451 (Zen 1), recorded CPUID; memory 32 GiB per node and "
        "SLIT 10/16/32 added"),
    "epyc-7763-2s.xml": (
        "x86/AMD-19h-Zen3-2xEpyc-7763.output", "cpuid", 262144,
        lambda i, j: 10 if i == j else 32,
        "2x EPYC 7763 (Zen 3), recorded CPUID; memory 256 GiB per node and "
        "SLIT 10/32 added"),
}


def import_recorded(hwloc_src):
    tests = os.path.join(hwloc_src, "tests", "hwloc")
    for name, (rel, how, mib, dist, text) in RECORDED.items():
        src = os.path.join(tests, rel)
        dst = os.path.join(HERE, name)
        if how == "copy":
            shutil.copyfile(src, dst)
            print("copied", dst)
        elif how in ("sysfs+cpuid", "sysfs"):
            with tempfile.TemporaryDirectory() as tmp:
                with tarfile.open(src) as tar:
                    tar.extractall(tmp)
                top = os.path.join(tmp, os.listdir(tmp)[0])
                if how == "sysfs":
                    env = dict(os.environ, HWLOC_COMPONENTS="linux,stop",
                               HWLOC_FSROOT=top,
                               HWLOC_DUMPED_HWDATA_DIR="/var/run/hwloc")
                    extra = ["--disallowed"]
                else:
                    env = dict(os.environ, HWLOC_COMPONENTS="linux,x86,stop",
                               HWLOC_FSROOT=os.path.join(top, "fsroot"),
                               HWLOC_CPUID_PATH=os.path.join(top, "cpuid"))
                    extra = []
                env.update(HWLOC_THISSYSTEM="0",
                           HWLOC_DONT_ADD_VERSION_INFO="1")
                with open(dst, "w") as f:
                    subprocess.run(["lstopo-no-graphics"] + extra +
                                   ["--of", "xml", "-"],
                                   check=True, env=env, stdout=f)
            print("exported", dst)
        else:
            root = ET.parse(src).getroot()
            nodes = numa_nodes(root)
            for node in nodes:
                set_memory(node, mib * MIB)
            ids = [int(n.get("os_index")) for n in nodes]
            add_distances(root, ids, slit(len(ids), dist))
            describe(root, text)
            write(root, name)
            continue
        env = dict(os.environ, HWLOC_DEBUG_CHECK="1")
        subprocess.run(["lstopo-no-graphics", "-i", dst, "--of", "console"],
                       check=True, env=env, stdout=subprocess.DEVNULL)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hwloc-src", metavar="DIR",
                    help="hwloc 2.9.0 source tree: also import RECORDED")
    args = ap.parse_args()
    make_epyc()
    make_cgroup_subset()
    make_intel()
    make_2s8n()
    make_hybrid()
    make_cpuless()
    make_spr_snc4()
    make_raptorlake()
    if args.hwloc_src:
        import_recorded(args.hwloc_src)


if __name__ == "__main__":
    sys.exit(main())
