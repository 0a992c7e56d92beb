#!/usr/bin/env bash
# The blame benchmark (issue 31 item 2): `rwfs blame` of a file with many versions, first and
# after, in one run.
#
#   integration/bench/blame.sh [--versions N] [--lines N] [--rwfs BIN] [--keep]
#
# Builds (release) rwfs unless --rwfs is given, makes a workspace, writes --versions versions
# (default 1,000) of one text file of --lines lines (default 300) with `rwfs write` (each
# version changes two lines and appends one, in one of five sessions), then times, each as a
# user runs it (a new `rwfs` process, unmounted):
#
#   first blame        .resilient_write/index/blame/ deleted: the walk through every version
#   again              the same version, cached (median of 5)
#   after one write    one more version: the cache continued by one diff (median of 5, each
#                      after its own new version); target ≤ 100 ms
#
# The blame's output is checked: every line has an origin, and the last version's lines name
# the last row. --keep: keep the workspace (printed) afterwards.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

versions=1000
lines=300
rwfs=
keep=0
bench_options --versions:versions --lines:lines --rwfs:rwfs --keep:keep=1 -- "$@"

if [ -z "$rwfs" ]; then
    cargo build --release --quiet
    target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
    rwfs=$target/release/rwfs
fi
ws=$(mktemp -d /tmp/rwfs-blame-bench.XXXXXX)
[ "$keep" = 1 ] && echo "workspace: $ws" >&2 || trap 'rm -rf "$ws"' EXIT

python3 - "$rwfs" "$ws" "$versions" "$lines" <<'EOF'
import json, os, statistics, subprocess, sys, time

rwfs, ws, versions, lines = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
text = [f"line {i}: the quick brown fox jumps over the lazy dog" for i in range(lines)]


def write(v):
    # Two lines changed, one appended: a version a formatter or an agent's edit would make.
    text[(v * 7) % len(text)] = f"line changed by version {v}"
    text[(v * 13) % len(text)] = f"another change of version {v}"
    text.append(f"appended by version {v}")
    env = dict(os.environ, RWFS_SESSION=f"agent-{v % 5}")
    subprocess.run([rwfs, "write", "-w", ws, "notes.md"], input=("\n".join(text) + "\n").encode(),
                   env=env, check=True, stdout=subprocess.DEVNULL)


def blame():
    t = time.perf_counter()
    out = subprocess.run([rwfs, "blame", "-w", ws, "--json", "notes.md"], check=True, capture_output=True).stdout
    return time.perf_counter() - t, json.loads(out)


t0 = time.perf_counter()
for v in range(versions):
    write(v)
print(f"setup      {versions} versions of notes.md ({len(text)} lines at the end) in {time.perf_counter() - t0:.1f} s")

cache = os.path.join(ws, ".resilient_write", "index", "blame")
subprocess.run(["rm", "-rf", cache], check=True)
first, answer = blame()
got = answer["lines"]
assert len(got) == len(text), (len(got), len(text))
assert all(l["origin"] for l in got), "a line without an origin"
last_seq = max(l["origin"]["seq"] for l in got)
assert got[-1]["origin"]["seq"] == last_seq, "the last appended line names the last row"
again = statistics.median(blame()[0] for _ in range(5))
after = []
for v in range(versions, versions + 5):
    write(v)
    took, answer = blame()
    assert answer["lines"][-1]["text"] == f"appended by version {v}"
    after.append(took)
after = statistics.median(after)
print(f"first blame      {first * 1000:8.1f} ms   (no cache: every version walked)")
print(f"again            {again * 1000:8.1f} ms   (median of 5, cached)")
print(f"after one write  {after * 1000:8.1f} ms   (median of 5; target <= 100 ms) {'ok' if after <= 0.1 else 'MISSED'}")
EOF
