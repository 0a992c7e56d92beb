#!/usr/bin/env bash
# The agent session benchmark: the real Claude Code through one scripted 30-call session (12
# Write, 8 Edit, 5 Read, 2 Grep, 3 Bash git; integration/agents/model.py plays the model) on a
# plain directory and on an rwfs mount over it in close and batch durability, and in close
# durability with Claude Code running `rwfs hook` after its tools, side by side in one run; then
# the cost of one Write and one Edit (Claude Code's exact syscalls: a temporary name, write,
# fsync, close, rename) on each. Prints a table of medians and ratios to plain.
#
#   integration/bench/agents.sh [--rounds N] [--dir DIR] [--keep]
#
# Targets (issue 24): the session in close durability at most 10 % slower than plain; a Write
# or Edit at most 1.5 x its plain cost.
#
# What it does: installs the pinned harnesses with integration/agents/setup.sh (into
# $RWFS_AGENTS, default ~/.cache/rwfs/agents; offline once installed), builds rwfs with
# --release, runs the driver (integration/bench/agents_bench.py) as root (rwfs mounts through
# /dev/fuse). Default directory: the cargo target directory, on the repository's disk. About
# 1 minute after the build.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
bench_help "$@"

agents=${RWFS_AGENTS:-${XDG_CACHE_HOME:-$HOME/.cache}/rwfs/agents}
integration/agents/setup.sh "$agents" >&2
# shellcheck source=/dev/null
source "$agents/env.sh"
cargo build --release --locked --bin rwfs >&2
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
dir=$target
args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --dir) dir=$2; shift 2 ;;
        *) args+=("$1"); shift ;;
    esac
done
exec python3 integration/bench/agents_bench.py --rwfs "$target/release/rwfs" --claude "$RWFS_CLAUDE" --dir "$dir" "${args[@]}"
