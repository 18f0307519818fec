#!/usr/bin/env python3
"""Prints criterion results as a table of medians, each with its ratio to the baseline of its group.

Run `cargo bench -p toolgate-core --bench core` first; this reads target/criterion/*/*/new/estimates.json.
"""
import json
import pathlib
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "target/criterion")
groups = {}
for est in sorted(root.glob("*/*/new/estimates.json")):
    group, bench = est.parts[-4], est.parts[-3]
    median_ns = json.loads(est.read_text())["median"]["point_estimate"]
    groups.setdefault(group, {})[bench] = median_ns


# Which baseline each benchmark is compared with (all measured in the same run).
BASELINE = {
    "definition_10_params": "baseline_deserialize_10_params",
    "noop_call_full_pipeline": "baseline_direct_handler_call",
    "lookup": "baseline_hashmap_get",
    "list_category_page50": "baseline_vec_filter_category_page50",
    "list_category_effect_tag_page50": "baseline_vec_filter_category_effect_tag_page50",
    "list_text_full_scan": "baseline_hashmap_full_scan",
    "list_text_first_after_change": "baseline_hashmap_full_scan",
    "command_true_none": "baseline_plain_spawn_true",
    "command_true_standard": "baseline_plain_spawn_true",
    "command_true_strict": "baseline_plain_spawn_true",
    "command_true_restricted": "baseline_plain_spawn_true",
}


def fmt(ns):
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.2f} µs"
    return f"{ns:.0f} ns"


print(f"| {'group':<16} | {'benchmark':<46} | {'median':>10} | {'vs baseline (same run)':<52} |")
print(f"|{'-' * 18}|{'-' * 48}|{'-' * 12}|{'-' * 54}|")
for group, benches in groups.items():
    baselines = {k: v for k, v in benches.items() if k.startswith("baseline")}
    for bench, ns in benches.items():
        ratio = ""
        base = BASELINE.get(bench)
        if base in baselines:
            ratio = f"{ns / baselines[base]:.1f}x ({base.removeprefix('baseline_')})"
        print(f"| {group:<16} | {bench:<46} | {fmt(ns):>10} | {ratio:<52} |")
