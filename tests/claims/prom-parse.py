#!/usr/bin/env python3
"""Parses Prometheus text exposition (the file named by argv[1]) with
prometheus_client's own parser, as a scraper would, and prints what it
read as JSON: {"families": {name: {"type", "help"}}, "samples": [{"name",
"labels", "value"}]}. Exits 77 (a skip) when prometheus_client is missing
(Debian: python3-prometheus-client), 1 when the text does not parse."""
import json
import sys

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:
    print("python3-prometheus-client is not installed", file=sys.stderr)
    sys.exit(77)

with open(sys.argv[1], encoding="utf-8") as f:
    text = f.read()
families = {}
samples = []
try:
    for fam in text_string_to_metric_families(text):
        families[fam.name] = {"type": fam.type, "help": fam.documentation}
        for s in fam.samples:
            samples.append({"name": s.name, "labels": s.labels,
                            "value": s.value})
except ValueError as e:
    print(f"not Prometheus text: {e}", file=sys.stderr)
    sys.exit(1)
json.dump({"families": families, "samples": samples}, sys.stdout)
