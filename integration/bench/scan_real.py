#!/usr/bin/env python3
"""False blocks on real code: `rwfs scan --json` over trees of code nobody wrote to leak
credentials (Python's standard library, site-packages, the cargo registry's sources), counted
as blocked files per MB, by rule and by extension.

    python3 integration/bench/scan_real.py --rwfs target/release/rwfs [--list N] DIR...

Each DIR is scanned from inside it (`cd DIR && rwfs scan --json .`), so the scanner sees paths
relative to the tree (`awscli/examples/s3/cp.rst`, `tests/test_x.py`) as a workspace's own
would be. Prints one row per DIR and a total; `--list N` also prints the first N blocked files
with their blocking rules (to stderr). `--config-only` counts only JSON/YAML/TOML/INI files
(by extension) and scans nothing else. Nothing is written anywhere.
"""

import argparse
import collections
import json
import os
import subprocess
import sys

CONFIG_EXT = {"json", "yaml", "yml", "toml", "ini", "cfg"}


def ext_of(path):
    name = path.rsplit("/", 1)[-1]
    return name.rsplit(".", 1)[-1].lower() if "." in name else "(none)"


def scan(rwfs, root, only_config):
    args = [rwfs, "scan", "--json"]
    if only_config:
        files = []
        for d, _, names in os.walk(root):
            for n in names:
                if ext_of(n) in CONFIG_EXT:
                    files.append(os.path.relpath(os.path.join(d, n), root))
        if not files:
            return {"files": []}
        files.sort()
        out = []
        # Chunks keep the argument list under the kernel's limit.
        for i in range(0, len(files), 2000):
            r = subprocess.run(args + files[i : i + 2000], cwd=root, capture_output=True, text=True)
            if r.returncode not in (0, 1):
                sys.exit(f"scan_real.py: rwfs scan failed in {root}: {r.stderr.strip()}")
            out.extend(json.loads(r.stdout)["files"])
        return {"files": out}
    r = subprocess.run(args + ["."], cwd=root, capture_output=True, text=True)
    if r.returncode not in (0, 1):
        sys.exit(f"scan_real.py: rwfs scan failed in {root}: {r.stderr.strip()}")
    return json.loads(r.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rwfs", required=True, help="the rwfs binary (a release build)")
    ap.add_argument("--list", type=int, default=0, help="print the first N blocked files to stderr")
    ap.add_argument("--config-only", action="store_true", help="only JSON/YAML/TOML/INI files")
    ap.add_argument("dirs", nargs="+")
    a = ap.parse_args()
    rwfs = os.path.abspath(a.rwfs)
    total = collections.Counter()
    rules = collections.Counter()
    exts = collections.Counter()
    listed = 0
    print(f"{'tree':<70} {'files':>7} {'MB':>8} {'blocked':>7} {'per MB':>7}")
    for d in a.dirs:
        report = scan(rwfs, d, a.config_only)
        size = 0
        blocked = 0
        for f in report["files"]:
            try:
                size += os.path.getsize(os.path.join(d, f["path"]))
            except OSError:
                pass
            if f["action"] != "block":
                continue
            blocked += 1
            exts[ext_of(f["path"])] += 1
            why = sorted({x["rule"] for x in f["findings"] if x["action"] == "block"})
            for rule in why:
                rules[rule] += 1
            if listed < a.list:
                listed += 1
                print(f"  {d}/{f['path']}: {', '.join(why)}", file=sys.stderr)
        mb = size / 1e6
        total.update(files=len(report["files"]), bytes=size, blocked=blocked)
        print(f"{d:<70} {len(report['files']):>7} {mb:>8.1f} {blocked:>7} {blocked / mb if mb else 0:>7.3f}")
    mb = total["bytes"] / 1e6
    print(f"{'total':<70} {total['files']:>7} {mb:>8.1f} {total['blocked']:>7} {total['blocked'] / mb if mb else 0:>7.3f}")
    if rules:
        print("blocked files by rule: " + ", ".join(f"{r} {n}" for r, n in rules.most_common(25)))
        print("blocked files by extension: " + ", ".join(f".{e} {n}" for e, n in exts.most_common(15)))


if __name__ == "__main__":
    main()
