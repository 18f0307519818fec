#!/usr/bin/env python3
"""The symbol order of `toolgate` (crates/cli/symbol-order.txt): build it from callgrind dumps,
or check a built binary against it. Used by scripts/code-order.sh.

  code_order.py build OUT --object NAME --after DUMP... --startup DUMP...
      Writes the functions of object NAME (the toolgate executable) that ran in the --after
      dumps (what runs once serving: the background tasks and every call), hottest first by
      their own instructions, then those that ran only in the --startup dumps.
  code_order.py check BINARY ORDER [--min-found PERCENT]
      How many of ORDER's functions BINARY defines and whether the linker laid them out in
      one run (their span against their total size); exit 1 if fewer than PERCENT were found.
"""

import argparse
import collections
import re
import subprocess
import sys

# callgrind's compressed names: "fn=(12) name" the first time, "fn=(12)" after.
NAME_LINE = re.compile(r"^(ob|fn|cob|cfn|fl|fi|fe|cfl|cfi)=\((\d+)\)(?: (.*))?$")
# callgrind marks the recursion depth of a function with a "'N" suffix.
RECURSION = re.compile(r"'\d+$")


def self_costs(path, object_name):
    """Instructions spent in each function of `object_name` (its own, not its callees')."""
    costs = collections.Counter()
    objects, functions = {}, {}
    current_object = current_function = None
    owner = {}
    skip_next = False
    with open(path, encoding="utf-8", errors="replace") as dump:
        for line in dump:
            line = line.rstrip("\n")
            match = NAME_LINE.match(line)
            if match:
                kind, index, name = match.group(1), int(match.group(2)), match.group(3)
                table = {"ob": objects, "cob": objects, "fn": functions, "cfn": functions}.get(kind)
                if table is not None and name is not None:
                    table[index] = name
                if kind == "ob":
                    current_object = objects.get(index)
                elif kind == "fn":
                    current_function = functions.get(index)
                    owner[current_function] = current_object
                continue
            if line.startswith("calls="):
                # The next cost line is the callee's inclusive cost, not this function's.
                skip_next = True
                continue
            if line[:1] and (line[:1].isdigit() or line[:1] in "+-*"):
                if skip_next:
                    skip_next = False
                    continue
                fields = line.split()
                if current_function and len(fields) >= 2:
                    obj = owner.get(current_function) or ""
                    if obj.rsplit("/", 1)[-1] == object_name:
                        costs[RECURSION.sub("", current_function)] += int(fields[1])
    return costs


def build(args):
    after = collections.Counter()
    for path in args.after:
        after.update(self_costs(path, args.object))
    startup = collections.Counter()
    for path in args.startup:
        startup.update(self_costs(path, args.object))
    hot = [name for name, cost in after.most_common() if cost > 0]
    seen = set(hot)
    cold = [name for name, cost in startup.most_common() if cost > 0 and name not in seen]
    if len(hot) < 100:
        sys.exit(f"only {len(hot)} functions ran after startup: did the load reach the server?")
    with open(args.out, "w", encoding="utf-8") as out:
        out.write("".join(name + "\n" for name in hot + cold))
    print(f"{len(hot)} functions run while serving, {len(cold)} more only at startup -> {args.out}")


def defined_functions(binary):
    """name -> (address, size) of the functions `binary` defines."""
    listing = subprocess.run(
        ["nm", "--defined-only", "-S", binary], capture_output=True, text=True, check=True
    ).stdout
    functions = {}
    for line in listing.splitlines():
        fields = line.split()
        if len(fields) == 4 and fields[2] in "tT":
            functions[fields[3]] = (int(fields[0], 16), int(fields[1], 16))
    return functions


def check(args):
    with open(args.order, encoding="utf-8") as order:
        names = [line.strip() for line in order if line.strip()]
    functions = defined_functions(args.binary)
    found = [functions[name] for name in names if name in functions]
    share = 100.0 * len(found) / max(len(names), 1)
    size = sum(length for _, length in found)
    span = (max(a + n for a, n in found) - min(a for a, _ in found)) if found else 0
    print(
        f"symbol order: {len(found)} of {len(names)} functions found ({share:.0f}%), "
        f"{size / 2**20:.1f} MiB of code laid out over {span / 2**20:.1f} MiB"
    )
    if share < args.min_found:
        print(
            f"the symbol order is stale (under {args.min_found:.0f}% of its functions found): "
            "regenerate it with scripts/code-order.sh and commit crates/cli/symbol-order.txt",
            file=sys.stderr,
        )
        sys.exit(1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build")
    b.add_argument("out")
    b.add_argument("--object", required=True)
    b.add_argument("--after", nargs="+", required=True)
    b.add_argument("--startup", nargs="*", default=[])
    c = sub.add_parser("check")
    c.add_argument("binary")
    c.add_argument("order")
    c.add_argument("--min-found", type=float, default=90.0)
    args = parser.parse_args()
    (build if args.command == "build" else check)(args)


if __name__ == "__main__":
    main()
