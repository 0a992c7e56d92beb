#!/usr/bin/env bash
# The MCP benchmark: rwfs (release build) and the reference server (`resilient-write` 0.3.0),
# driven by the same Python `mcp` 2.3.0 client over stdio, side by side in one run.
#
#   integration/bench/mcp.sh [OPTIONS]      (--help lists them)
#
# Workloads:
#   write    rw_safe_write of 4 KiB to a new file, 1,000 calls per server (after 20 warm-up
#            calls): p50, p99, mean latency and calls/s, and rwfs's p50 against the reference's
#            (target: at most 1/5); rounds alternate the order of the servers, each in a fresh
#            workspace
#   search   rr_search_then_page over a 100 MB log, a full scan: MB/s (rwfs only; the reference's
#            resilient-read is not installed)
#
# Options go to the driver (integration/bench/mcp_bench.py), e.g.
#   --dir DIR          benchmark in a fresh subdirectory of DIR (default: the cargo target
#                      directory, so it is on the repository's disk)
#   --calls N          measured calls per server (default 1000)
#   --only write       run only these workloads (write,search)
#   --keep             keep the benchmark directory
#
# What it does: installs the pinned clients with integration/mcp/setup.sh (into
# $RWFS_MCP_CLIENTS, default ~/.cache/rwfs/mcp-clients; offline once installed), builds rwfs
# with --release, runs the driver. The table goes to stdout, progress to stderr. About 2 minutes
# after the build on a 2-core VM.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
bench_help "$@"

clients=${RWFS_MCP_CLIENTS:-${XDG_CACHE_HOME:-$HOME/.cache}/rwfs/mcp-clients}
integration/mcp/setup.sh "$clients" >&2
# shellcheck source=/dev/null
source "$clients/env.sh"

cargo build --release --locked --quiet --bin rwfs
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
rwfs="$target/release/rwfs"
[ -x "$rwfs" ] || { echo "mcp.sh: no $rwfs after the build" >&2; exit 1; }

has_dir=false
for arg in "$@"; do [ "$arg" = "--dir" ] && has_dir=true; done
extra=()
$has_dir || extra=(--dir "$target")

RWFS_LOG=${RWFS_LOG:-warn} exec "$RWFS_MCP_PY" integration/bench/mcp_bench.py \
    --rwfs "$rwfs" --reference "$RWFS_REF_SERVER" "${extra[@]}" "$@"
