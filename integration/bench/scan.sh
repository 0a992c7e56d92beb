#!/usr/bin/env bash
# The scan benchmark: MB/s, findings per MB and latency of the risk scorer
# (rwfs::score::Scanner::builtin()) on ONE core, side by side with the reference scorer
# (resilient-write 0.3.0) and detect-secrets 1.5.0, printed as one table.
#
#   integration/bench/scan.sh [--no-tools] [--time-limit S] [OPTIONS]
#
# Script options:
#   --no-tools           skip the Python tools (no venv, no reference/detect-secrets columns)
#   --against REV        A/B instead of the table: build the bench binary at git revision REV
#                        too (a detached worktree under target/, same CARGO_TARGET_DIR), then run
#                        the old and the new binary alternately (--rounds N, default 3; each
#                        round one process per build, `--only source,latency`) and print their
#                        source MB/s and 100 KB p99 side by side with the new/old ratio of the
#                        medians: measured in one run, under the same load
#   --time-limit S       seconds per tool per 100 KB adversarial input (default 30; the
#                        reference's email regex is quadratic: a 100 KB line takes ~10 s)
# Other options go to the benchmark binary (`--help` lists them), e.g.
#   --passes N           timed passes over the corpus (default 5)
#   --tool-mb MB         size of the corpus subset the tools scan (default 10)
#   --latency-scans N    timed 100 KB scans (default 2000)
#   --corpus DIR         scan DIR's .rs files instead of the cargo registry's
#   --only eval          only the block evaluation: precision and recall per credential type
#                        on a labelled set built at run time (integration/bench/scan_eval.rs)
#
# What it does: `cargo fetch --locked` (the corpus is the registry's sources), builds the bench
# binary, creates target/scan-bench-venv (Python >= 3.12, which resilient-write needs) with the
# two tools, then, every step pinned to CPU 0 with `taskset -c 0`: writes the tool inputs
# (target/scan-bench/), runs scan_reference.py for each tool, and runs the binary, which prints
# the table to stdout (progress goes to stderr). About 3 minutes with the defaults, most of it
# detect-secrets (~0.2 MB/s).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

tools=1
time_limit=30
against=
rounds=3
pass=()
bench_options --no-tools:tools=0 --against:against --rounds:rounds --time-limit:time_limit '*:@pass' -- "$@"

cpu=0
command -v taskset >/dev/null || { echo "scan.sh: taskset (util-linux) is needed to pin to one core" >&2; exit 1; }

cargo fetch --locked --quiet
# The bench binary built from the sources in the current directory.
build_bench() {
    cargo bench --no-run --quiet --bench scan --message-format=json \
        | python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "scan" and m.get("executable"):
        print(m["executable"])'
}
bin=$(build_bench)
[ -x "$bin" ] || { echo "scan.sh: no bench binary built" >&2; exit 1; }

if [ -n "$against" ]; then
    mkdir -p "$repo/target"
    base_src=$repo/target/scan-bench-base
    rev=$(git rev-parse --verify "$against^{commit}") \
        || { echo "scan.sh: --against $against is not a commit (give a branch, tag or hash)" >&2; exit 1; }
    # Both binaries are copied out of the target directory, so that a build during the run
    # (or the worktree's removal) does not change what is measured; the old one is kept with
    # its revision and reused by the next run against the same revision.
    cp "$bin" "$repo/target/scan-bench-new.bin"
    bin=$repo/target/scan-bench-new.bin
    base_bin=$repo/target/scan-bench-base.bin
    if [ ! -x "$base_bin" ] || [ "$(cat "$base_bin.rev" 2>/dev/null)" != "$rev" ]; then
        git worktree remove --force "$base_src" 2>/dev/null || rm -rf "$base_src"
        git worktree add --quiet --detach "$base_src" "$rev"
        cp "$(cd "$base_src" && CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$repo/target} build_bench)" "$base_bin"
        echo "$rev" > "$base_bin.rev"
        git worktree remove --force "$base_src"
    fi
    # One line per process: source MB/s (CPU time, median of its passes) and 100 KB p99 (ms).
    measure() {
        taskset -c "$cpu" "$1" --only source,latency ${pass[@]+"${pass[@]}"} 2>/dev/null | python3 -c '
import re, sys
text = sys.stdin.read()
rate = re.search(r"^1 MB/s +\| all source[^|]*\| +([0-9.]+)", text, re.M)
p99 = re.search(r"p99 ([0-9.]+) ms", text)
if not (rate and p99):
    sys.exit("scan.sh: the bench printed no source MB/s or p99 row")
print(rate.group(1), p99.group(1))'
    }
    old=(); new=()
    for round in $(seq "$rounds"); do
        echo "round $round of $rounds: old, then new" >&2
        old+=("$(measure "$base_bin")")
        new+=("$(measure "$bin")")
    done
    python3 - "$against" "$(git rev-parse --short "$rev")" "$(git describe --always --dirty)" "${old[@]}" -- "${new[@]}" <<'PY'
import statistics, sys
against, old_rev, new_rev, *rest = sys.argv[1:]
cut = rest.index("--")
old = [tuple(map(float, r.split())) for r in rest[:cut]]
new = [tuple(map(float, r.split())) for r in rest[cut + 1:]]
med = lambda rows, k: statistics.median(r[k] for r in rows)
print(f"scan A/B, one core, {len(old)} alternating rounds (old {against} = {old_rev}, new = {new_rev})")
print(f"{'measure':<28}| {'old':>10} | {'new':>10} | new/old | rounds old / new")
for k, name, unit in [(0, "source MB/s (CPU time)", ""), (1, "100 KB p99 (ms, CPU time)", "")]:
    o, n = med(old, k), med(new, k)
    each = " ".join(f"{r[k]:g}" for r in old) + " / " + " ".join(f"{r[k]:g}" for r in new)
    print(f"{name:<28}| {o:>10g} | {n:>10g} | {n / o:7.3f} | {each}")
PY
    exit 0
fi

work=$repo/target/scan-bench
mkdir -p "$work"
taskset -c "$cpu" "$bin" --prepare --work "$work" ${pass[@]+"${pass[@]}"}

if [ "$tools" = 1 ]; then
    venv=$repo/target/scan-bench-venv
    want="resilient-write==0.3.0 detect-secrets==1.5.0"
    if [ ! -f "$venv/.installed" ] || [ "$(cat "$venv/.installed")" != "$want" ]; then
        python=
        for candidate in python3.13 python3.12 python3; do
            if command -v "$candidate" >/dev/null \
                && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
                python=$(command -v "$candidate"); break
            fi
        done
        if [ -z "$python" ] && command -v pyenv >/dev/null; then
            for v in $(pyenv versions --bare 2>/dev/null | grep -E '^3\.(1[2-9]|[2-9][0-9])' | sort -rV); do
                python=$(pyenv root)/versions/$v/bin/python3; [ -x "$python" ] && break; python=
            done
        fi
        [ -n "$python" ] || { echo "scan.sh: resilient-write 0.3.0 needs Python >= 3.12 (not found; or use --no-tools)" >&2; exit 1; }
        rm -rf "$venv"
        "$python" -m venv "$venv"
        "$venv/bin/pip" install --quiet --disable-pip-version-check $want
        echo "$want" > "$venv/.installed"
    fi
    for tool in reference detect-secrets; do
        # Backstop over the driver's own per-case limits.
        timeout 1800 taskset -c "$cpu" "$venv/bin/python" integration/bench/scan_reference.py \
            --tool "$tool" --work "$work" --time-limit "$time_limit" \
            || echo "scan.sh: $tool failed (exit $?); its columns stay empty" >&2
    done
fi

taskset -c "$cpu" "$bin" --work "$work" ${pass[@]+"${pass[@]}"}
