"""The Python side of the scan benchmark: the reference scorer or detect-secrets on the inputs
that `scan --prepare` wrote, timed on whatever CPU the caller pinned us to.

    scan_reference.py --tool reference|detect-secrets --work DIR [--time-limit S] [--source-time-limit S]

Reads DIR/subset.txt (one corpus file path a line) and DIR/adversarial-*.txt, reads every input
into memory first (not timed), then times each case and writes DIR/tool-<tool>.json, which the
Rust binary prints next to its own figures:

  reference       resilient_write.risk_score.score_content(text, policy=default_policy(),
                  target_path=path) per file: the reference's whole L0 scorer (every pattern
                  with re.finditer over the whole content, size metrics, Eq. 1).
  detect-secrets  what detect_secrets.core.scan.scan_file does for one file (filename filters,
                  the non-eager transformers else readlines, every default plugin and filter per
                  line, then the eager transformers if nothing was found), under
                  default_settings(), on the text in memory instead of the file on disk.

Both the process's CPU time (compared with rwfs's thread CPU time) and wall-clock time are
recorded. A case that runs past its time limit (wall clock) is stopped (SIGALRM; `re` checks for
signals while it matches) and reported with the bytes it finished; a case that finishes in under
0.3 s of CPU time is repeated until 0.3 s have passed. Bytes are counted as the files' UTF-8 bytes; text is decoded with
errors="replace".
"""

import argparse
import glob
import io
import json
import os
import platform
import signal
import sys
import time
from importlib import metadata


_SETTINGS = None


class TimeLimit(Exception):
    pass


def _alarm(_signum, _frame):
    raise TimeLimit()


def reference_scanner():
    from resilient_write.policy import default_policy
    from resilient_write.risk_score import score_content

    policy = default_policy()

    def scan(path, text):
        result = score_content(text, policy=policy, target_path=path)
        return sum(1 for p in result["detected_patterns"] if p["kind"] != "size")

    return scan, "resilient_write.risk_score.score_content", f"reference (resilient-write {metadata.version('resilient-write')})"


def detect_secrets_scanner():
    from detect_secrets.core import scan as ds_scan
    from detect_secrets.settings import default_settings
    from detect_secrets.transformers import get_transformed_file

    # Entered for the life of the process: the context manager must stay referenced, or its
    # generator is collected and restores the empty settings.
    global _SETTINGS
    _SETTINGS = default_settings()
    _SETTINGS.__enter__()

    def lines_of(path, text, eager):
        handle = io.StringIO(text)
        handle.name = path
        return get_transformed_file(handle, use_eager_transformers=eager)

    def scan(path, text):
        if ds_scan._is_filtered_out(required_filter_parameters=["filename"], filename=path):
            return 0
        lines = lines_of(path, text, False) or io.StringIO(text).readlines()
        found = list(ds_scan._process_line_based_plugins(lines=list(enumerate(lines, start=1)), filename=path))
        if not found:
            eager = lines_of(path, text, True)
            if eager:
                found = list(ds_scan._process_line_based_plugins(lines=list(enumerate(eager, start=1)), filename=path))
        return len(found)

    return scan, "scan_file logic (detect_secrets.core.scan), default plugins and filters", f"detect-secrets {metadata.version('detect-secrets')}"


def run_case(scan, items, limit):
    """Scan every (path, text, nbytes) item; repeat while under 0.3 s. Returns the case record."""
    total = sum(n for _, _, n in items)
    signal.signal(signal.SIGALRM, _alarm)
    done = 0
    findings = 0
    rounds = 0
    start = time.perf_counter()
    cpu_start = time.process_time()
    timed_out = False
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        while True:
            for path, text, nbytes in items:
                n = scan(path, text)
                done += nbytes
                if rounds == 0:
                    findings += n
            rounds += 1
            if time.process_time() - cpu_start >= 0.3:
                break
    except TimeLimit:
        timed_out = True
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    seconds = time.perf_counter() - start
    cpu_seconds = time.process_time() - cpu_start
    record = {"bytes": total, "bytes_done": done, "seconds": seconds, "cpu_seconds": cpu_seconds, "rounds": rounds, "timed_out": timed_out, "limit": limit}
    if rounds > 0:
        record["findings"] = findings
    return record


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    return data.decode("utf-8", errors="replace"), len(data)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tool", choices=["reference", "detect-secrets"], required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--time-limit", type=float, default=30.0, help="seconds per adversarial case")
    parser.add_argument("--source-time-limit", type=float, default=300.0, help="seconds for the source subset")
    args = parser.parse_args()

    scan, entry, label = (reference_scanner if args.tool == "reference" else detect_secrets_scanner)()
    with open(os.path.join(args.work, "subset.txt"), encoding="utf-8") as f:
        paths = [line.rstrip("\n") for line in f if line.strip()]
    source = [(p, *load(p)) for p in paths]
    # Warm up: compile the regexes, load the plugins.
    scan(source[0][0], source[0][1])

    cases = {}
    print(f"{args.tool}: source subset, {len(source)} files", file=sys.stderr, flush=True)
    cases["source"] = run_case(scan, source, args.source_time_limit)
    cases["source"]["files"] = len(source)
    for path in sorted(glob.glob(os.path.join(args.work, "adversarial-*.txt"))):
        name = os.path.basename(path)[: -len(".txt")]
        text, nbytes = load(path)
        print(f"{args.tool}: {name}", file=sys.stderr, flush=True)
        cases[name] = run_case(scan, [(path, text, nbytes)], args.time_limit)

    out = {
        "tool": args.tool,
        "label": label,
        "entry": entry,
        "python": platform.python_version(),
        "affinity": ",".join(str(c) for c in sorted(os.sched_getaffinity(0))),
        "cases": cases,
    }
    with open(os.path.join(args.work, f"tool-{args.tool}.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1)
    if _SETTINGS is not None:
        _SETTINGS.__exit__(None, None, None)


if __name__ == "__main__":
    main()
