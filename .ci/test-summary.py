#!/usr/bin/env python3
"""CI's closing lines: what meson's test logs say, skips counted truthfully.

Usage: test-summary.py ALLOWED_SKIPS TESTLOG.json...

Every failed test is named first, with the last lines of its output
(standard output, then standard error: a sanitizer's report is there).

Reads each meson testlog.json (missing ones are left out) and counts tests
passed, failed and skipped, and the GTest subtests inside them (TAP lines
"ok N PATH # SKIP REASON": meson calls such a test OK). Every skip, of a
test or of a subtest, is printed with its reason; one that ALLOWED_SKIPS
does not list fails (exit 1): CI installs everything the tests need
(.ci/setup), so a skip there means a test did not run for no good reason.

ALLOWED_SKIPS has one skip a line, "TEST: WHY" or "TEST SUBTEST: WHY", where
TEST is meson's test name (ledger, lab-devices) and SUBTEST a GTest path
(/ledger/dir/default); blank lines and lines starting with # are left out.
"""
import json
import os
import re
import sys

TAP_OK = re.compile(r"^ok\s+\d+\s*(.*?)\s*#\s*SKIP\b\s*(.*)$", re.IGNORECASE)
TAP_RESULT = re.compile(r"^(not ok|ok)\s+\d+")
TAP_PLAN = re.compile(r"^1\.\.\d+", re.MULTILINE)


def read_allowed(path):
    allowed = {}
    if not os.path.exists(path):
        return allowed
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            key, sep, why = line.partition(": ")
            if not sep or not why.strip():
                sys.exit(f"{path}:{n}: '{line}' is not 'TEST[ SUBTEST]: WHY'")
            allowed[key.strip()] = why.strip()
    return allowed


def short_name(name):
    # "qemu-pin:unit+ledger / ledger" -> "ledger"
    return name.split(" / ", 1)[-1]


def skip_reason(stdout):
    # A whole test's skip: the last line that says why (TAP plan, or a
    # script's own "SKIP: ..." line), else its last line.
    lines = [l.strip() for l in (stdout or "").splitlines() if l.strip()]
    for l in reversed(lines):
        m = re.search(r"(?:#\s*SKIP\b|\bSKIP\b:?)\s*(.*)$", l, re.IGNORECASE)
        if m:
            return m.group(1) or l
    return lines[-1] if lines else "(no output)"


def main():
    allowed = read_allowed(sys.argv[1])
    passed = failed = skipped = 0
    sub_ok = sub_failed = sub_skipped = 0
    skips = []  # (key, reason)
    failures = []  # (name, result, stdout)
    for path in sys.argv[2:]:
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8") as f:
            for line in f:
                r = json.loads(line)
                name = short_name(r.get("name", "?"))
                res = r.get("result")
                if res in ("OK", "EXPECTEDFAIL"):
                    passed += 1
                elif res == "SKIP":
                    skipped += 1
                    skips.append((name, skip_reason(r.get("stdout"))))
                else:
                    failed += 1
                    failures.append((name, res, (r.get("stdout") or "") +
                                     (r.get("stderr") or "")))
                stdout = r.get("stdout") or ""
                if not TAP_PLAN.search(stdout):
                    continue  # not TAP: no subtests
                for out in stdout.splitlines():
                    m = TAP_OK.match(out.strip())
                    if m:
                        sub_skipped += 1
                        skips.append((f"{name} {m.group(1)}".strip(),
                                      m.group(2) or "(no reason)"))
                        continue
                    t = TAP_RESULT.match(out.strip())
                    if t and t.group(1) == "ok":
                        sub_ok += 1
                    elif t:
                        sub_failed += 1
    # Each failed test by name with the last lines it printed: the log's
    # tail is often all a reader gets.
    for name, res, stdout in failures:
        print(f"FAILED: {name} ({res})")
        for out in [l for l in stdout.splitlines() if l.strip()][-8:]:
            print(f"    {out}")
    bad = 0
    for key, reason in skips:
        if key in allowed:
            print(f"allowed skip: {key}: {reason} (allowed: {allowed[key]})")
        else:
            print(f"SKIP NOT ALLOWED: {key}: {reason} "
                  f"(CI installs what tests need; fix the test or list it "
                  f"in .ci/allowed-skips with the reason)")
            bad += 1
    print(f"{passed} passed, {failed} failed, {skipped} skipped; subtests: "
          f"{sub_ok} passed, {sub_failed} failed, {sub_skipped} skipped"
          f"{f' ({bad} skips not allowed)' if bad else ''}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
