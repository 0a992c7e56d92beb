#!/usr/bin/env bash
# The second evaluation set (issue 28): realistic files made by an independent Python generator
# (integration/bench/scan_set2.py: its own services, token shapes and templates; it reads nothing
# from src/), scanned by the release `rwfs scan --json`, scored as block precision and recall.
#
#   integration/bench/scan_set2.sh [--seed N] [--per-service K] [--show N]
#
# Writes the files to target/scan-set2/ (generated anew each run, never committed), prints the
# table to stdout and the first --show wrong items (missed, false block) to stderr.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
seed=28
per=6
show=40
bench_options --seed:seed --per-service:per --show:show -- "$@"
cargo build --release --locked --quiet --bin rwfs
bin=${CARGO_TARGET_DIR:-$PWD/target}/release/rwfs
out=${CARGO_TARGET_DIR:-$PWD/target}/scan-set2
python3 integration/bench/scan_set2.py generate --out "$out" --seed "$seed" --per-service "$per" >&2
python3 integration/bench/scan_set2.py score --out "$out" --rwfs "$bin" --show "$show"
