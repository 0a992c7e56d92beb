#!/usr/bin/env bash
# The diff benchmark: a line diff of two 20,000-line versions (every tenth line changed) in the
# engine and through `rwfs diff` / `rwfs diff --since`, wall time and peak RSS, in one run.
#
#   integration/bench/diff.sh [OPTIONS]      (--help lists them)
#
# Options go to the benchmark binary (integration/bench/diff.rs), e.g.
#   --baseline PATH   also run the same commands with this rwfs binary (a release build of an
#                     earlier commit: `git worktree add /tmp/old COMMIT && cargo build --release`
#                     there), side by side, with ratios
#   --runs N          runs per figure (default 5)
#   --lines N         lines of the file (default 20,000)
#   --dir DIR         where the workspace goes (default: the repository's target/)
#
# Builds rwfs and the benchmark with --release; the table goes to stdout. Targets for
# `rwfs diff big.txt`: ≤ 100 ms and ≤ 50 MB peak RSS.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
bench_help "$@"
cargo build --release --locked --quiet --bin rwfs
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
exec cargo bench --locked --quiet --bench diff -- --rwfs "$target/release/rwfs" "$@"
