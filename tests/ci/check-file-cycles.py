#!/usr/bin/env python3
"""No circle of calls between files of different folders.

Usage: check-file-cycles.py BUILD_DIR

Reads BUILD_DIR/compile_commands.json for the production sources (launcher/,
qmp/, topology/), asks nm which global symbols each object defines and which
it uses, and draws one arrow from a file to every file whose symbols it uses.
A strongly connected group of files (each reaches every other) is a circle;
one that spans two folders means two folders use each other, which the
layers forbid (docs/design.md, "Layers"). Circles inside one folder are
allowed. Prints each offending circle and exits 1; prints the counts and
exits 0 otherwise.
"""
import json
import os
import subprocess
import sys

PRODUCTION = ("launcher/", "qmp/", "topology/")


def objects(build):
    with open(os.path.join(build, "compile_commands.json"), encoding="utf-8") as f:
        entries = json.load(f)
    root = None
    out = {}
    for e in entries:
        src = os.path.normpath(os.path.join(e["directory"], e["file"]))
        if root is None:
            # the source root: the directory above the first production folder
            for p in PRODUCTION:
                i = src.find("/" + p)
                if i >= 0:
                    root = src[:i]
                    break
        rel = os.path.relpath(src, root) if root else src
        if not rel.startswith(PRODUCTION):
            continue
        obj = os.path.join(e["directory"], e["output"])
        if os.path.exists(obj):
            out[obj] = rel
    return out


def symbols(obj):
    res = subprocess.run(["nm", obj], capture_output=True, text=True, check=True)
    defined, used = set(), set()
    for line in res.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "U":
            used.add(parts[1])
        elif len(parts) == 3 and parts[1] in "TDBRVWG":
            defined.add(parts[2])
    return defined, used


def sccs(nodes, edges):
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        work = [(v, iter(sorted(edges.get(v, ()))))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is None:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        group.append(w)
                        if w == node:
                            break
                    out.append(group)
                continue
            if nxt not in index:
                index[nxt] = low[nxt] = counter[0]
                counter[0] += 1
                stack.append(nxt)
                on.add(nxt)
                work.append((nxt, iter(sorted(edges.get(nxt, ())))))
            elif nxt in on:
                low[node] = min(low[node], index[nxt])

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def main():
    objs = objects(sys.argv[1])
    if not objs:
        sys.exit(f"{sys.argv[1]}: no production objects in compile_commands.json")
    owner, uses = {}, {}
    for obj, rel in objs.items():
        defined, used = symbols(obj)
        for s in defined:
            owner.setdefault(s, rel)
        uses[rel] = used
    edges = {f: {owner[s] for s in u if s in owner and owner[s] != f}
             for f, u in uses.items()}
    bad = 0
    circles = 0
    for group in sccs(uses.keys(), edges):
        if len(group) < 2:
            continue
        circles += 1
        folders = {os.path.dirname(f) for f in group}
        if len(folders) > 1:
            bad += 1
            print(f"circle across folders {', '.join(sorted(folders))}: "
                  f"{' '.join(sorted(group))}")
    n_edges = sum(len(v) for v in edges.values())
    print(f"{len(uses)} files, {n_edges} arrows, {circles - bad} circles "
          f"inside one folder, {bad} across folders")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
