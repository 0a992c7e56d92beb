#!/usr/bin/env bash
# The history benchmark (issue 17): time-travel commands on a big journal, in one run.
#
#   integration/bench/history.sh [--dir DIR] [--rows N] [--paths N] [--files N] [--keep]
#
# Builds (release) rwfs and the generator (integration/bench/history.rs), which makes a
# workspace whose journal holds --rows real, chained rows over --paths paths (default
# 1,000,000 over 50,000) followed by --files files (default 10,000) written in session `base`
# and rewritten in session `agent` through the engine. Then, each command as a user runs it
# (a new `rwfs` process, unmounted; median of 5 runs where the command changes nothing):
#
#   index rebuild      `rwfs log -n 20` with .resilient_write/index/ deleted (the index is
#                      built from the whole journal before answering)
#   log -n 20          target ≤ 20 ms; and again after each `touch` of the journal (what an
#                      append does to its times: the index checks the bytes it covers first)
#   history PATH       a generated path (20 rows) and a real one; target ≤ 50 ms
#   diff --since T     the per-file summary of the --files changed files; target ≤ 2 s
#   rewind plan        `rwfs rewind --session agent --dry-run`
#   rewind             `rwfs rewind --session agent`: performed, durable, journaled (one group);
#                      plan + perform target ≤ 10 s; the files are checked afterwards
#   ui first view      when `rwfs ui` exists: the page and its first timeline page
#
# --dir DIR: where the workspace goes (default: the repository's target/history-bench);
# --keep: keep it afterwards.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

dir=
keep=0
gen=()
bench_options --dir:dir --keep:keep=1 --rows:@gen --paths:@gen --files:@gen -- "$@"

cargo build --release --quiet
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
rwfs=$target/release/rwfs
bin=$(cargo bench --no-run --quiet --bench history --message-format=json \
    | python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "history" and m.get("executable"):
        print(m["executable"])')
[ -x "$bin" ] || { echo "history.sh: no generator built" >&2; exit 1; }

dir=${dir:-$repo/target/history-bench}
ws=$dir/ws
rm -rf "$ws"
mkdir -p "$dir"
[ "$keep" = 1 ] || trap 'rm -rf "$ws"' EXIT

echo "generating the workspace in $ws ..." >&2
t0=$(date +%s%N)
eval "$("$bin" --ws "$ws" ${gen[@]+"${gen[@]}"})"
t1=$(date +%s%N)
rows=$(wc -l < "$ws/.resilient_write/journal.jsonl")
echo "journal: $rows rows, $(( $(stat -c %s "$ws/.resilient_write/journal.jsonl") / 1000000 )) MB (generated in $(( (t1 - t0) / 1000000000 )) s)"

cd "$ws"
# ms CMD...: run once, print the wall time in milliseconds.
ms() {
    local a b
    a=$(date +%s%N)
    "$@" > /dev/null
    b=$(date +%s%N)
    echo $(( (b - a) / 1000000 ))
}
# median5 CMD...: the median of 5 runs, in milliseconds.
median5() {
    local runs=()
    for _ in 1 2 3 4 5; do runs+=("$(ms "$@")"); done
    printf '%s\n' "${runs[@]}" | sort -n | sed -n 3p
}
row() { printf '%-34s %10s ms   %s\n' "$1" "$2" "$3"; }

real=real/d07/f00007.txt
rm -rf .resilient_write/index
row "index rebuild (first log -n 20)" "$(ms "$rwfs" log -n 20)" ""
row "log -n 20" "$(median5 "$rwfs" log -n 20)" "target ≤ 20"
# The journal touched (its times change, as an append does): the index re-hashes the bytes it
# covers before it answers again (it is never believed over the journal).
touched() { touch .resilient_write/journal.jsonl; "$rwfs" log -n 20; }
row "log -n 20, journal touched" "$(median5 touched)" "covered bytes re-hashed"
row "history $path" "$(median5 "$rwfs" history "$path")" "target ≤ 50"
row "history $real" "$(median5 "$rwfs" history "$real")" "target ≤ 50"
row "sessions" "$(median5 "$rwfs" sessions)" ""
row "diff --since (10,000 files)" "$(median5 "$rwfs" diff --since "$since")" "target ≤ 2000"
changed=$("$rwfs" diff --since "$since" | grep -c 'real/')
plan=$(median5 "$rwfs" rewind --session agent --dry-run)
row "rewind plan (--dry-run)" "$plan" ""
a=$(date +%s%N)
"$rwfs" rewind --session agent --json > "$dir/rewind.json"
b=$(date +%s%N)
row "rewind (performed)" "$(( (b - a) / 1000000 ))" "plan + perform target ≤ 10000"
grep -qx "line 3 of 7" "$real" || { echo "history.sh: $real was not rewound" >&2; exit 1; }
python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
applied, group, failed = r["applied"], r["group"], len(r["failed"])
print(f"diff --since listed {sys.argv[2]} files; the rewind applied {applied} steps as group {group}, {failed} failed")' \
    "$dir/rewind.json" "$changed"
if "$rwfs" ui --help > /dev/null 2>&1; then
    python3 "$repo/integration/bench/ui_first_view.py" "$rwfs" "$ws"
fi
