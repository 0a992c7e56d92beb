#!/usr/bin/env bash
# The commit benchmark: durable commits/s of the engine's safe_write vs a minimal
# temp + fsync + rename + fsync(dir) protocol, side by side in one run.
#
#   integration/bench/commit.sh [OPTIONS]      (--help lists them)
#
# Options are passed to the benchmark binary, e.g.
#   --dir DIR            benchmark in a fresh subdirectory of DIR (default: the repository's
#                        target/, whatever CARGO_TARGET_DIR is, so it is on the repository's disk)
#   --rounds N           rounds per cell, engine/minimal alternating (default 9)
#   --commits-4k N       commits per cell per round with 4 KiB payloads (default 400)
#   --commits-1m N       commits per cell per round with 1 MiB payloads (default 100)
#   --files N            files each writer rotates over (default 64)
#   --writers 1,8        writer thread counts
#   --sizes 4k,1m        payload sizes
#   --impl engine,minimal  implementations (one alone is handy under strace/perf)
#   --keep               keep the benchmark directory
#
# The table goes to stdout, progress to stderr. The run holds ~3 GiB of kept versions in the
# benchmark directory until it ends, and takes about a minute with the defaults.
set -euo pipefail
cd "$(dirname "$0")/../.."
exec cargo bench --quiet --bench commit -- "$@"
