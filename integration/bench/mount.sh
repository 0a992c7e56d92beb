#!/usr/bin/env bash
# The mount benchmark: workloads through `rwfs mount` against the same workloads on the native
# filesystem underneath, side by side in one run, printed as a table of ratios.
#
#   integration/bench/mount.sh [OPTIONS]      (--help lists them)
#
# Workloads (each mount run in a fresh workspace with a fresh daemon, each native run in a fresh
# directory on the same filesystem; rounds alternate mount-first and native-first):
#   files   create + write 4 KiB + close of 5,000 files; the same with fsync before close; the
#           mount's plain close against native temp + fsync + rename + fsync(dir); and the
#           plain loop on a pass-through path (FUSE alone, no gate)
#   cp      cp -r of this repository's registry dependencies (Cargo.lock, minus the two
#           winapi-*-pc-windows-gnu crates: 124 crates, ~7,200 files, ~110 MB); also against
#           a native copy as durable as the mount's (temp + fsync + rename + fsync(dir) per file)
#   clone   git clone --no-hardlinks of a local repository of ~2,500 of those files
#   build   cargo build (debug, offline) of a crate using regex-automata, dependencies vendored
#   seq     1 GiB sequential write + fsync (throughput), also on a pass-through path
#   stat    lstat of 10,000 files, first pass after mounting and second pass; statvfs as the
#           bare cost of one round trip to the daemon
#   read    a committed git repository of 10,000 text files: grep -rn twice (first run, second
#           run: the kernel's page cache), then git diff --stat after editing 50 of them
#   status  a repository of 2,000 files indexed natively before the mount: the first git status
#           through the side, git status after editing 50 files, again (warm); then 200 saves
#           the way Claude Code's Write tool saves (temp file, fsync, rename over the target)
#   tar     tar x of an archive of 40 crates' sources
#   format  a formatter-like rewrite in place of 2,000 files (read, change, write back)
#   agent   an agent session replayed: 300 read-modify-write edits over a committed repository
#           of 2,000 files, grep -rn every 30 edits, git diff --stat every 50
#   rss     the daemon's peak RSS (VmHWM) while a 2 GiB file is written
#
# Options go to the benchmark binary, e.g.
#   --dir DIR          benchmark in a fresh subdirectory of DIR (default: the repository's
#                      target/, whatever CARGO_TARGET_DIR is, so it is on the repository's disk)
#   --rounds N         rounds for every workload (default: 3 for files, cp, build; 5 for the rest)
#   --only cp,stat     run only these workloads
#   --keep             keep the benchmark directory
#   --durability MODE  mount with --durability close (default) or batch
#   --peer PATH        also run libfuse's reference passthrough_hp (built outside the repository:
#                      g++ -O2 -std=c++17 -DHAVE_UTIMENSAT -DHAVE_POSIX_FALLOCATE -DHAVE_SETXATTR
#                      -DHAVE_COPY_FILE_RANGE passthrough_hp.cc $(pkg-config --cflags --libs fuse3))
#                      on the same workloads in the same rounds: a peer column and mount/peer
#                      ratios (or set RWFS_BENCH_PEER)
#
# What it does: `cargo fetch --locked` (the cp, clone and build inputs are the registry's
# sources), builds rwfs and the benchmark with --release, runs it as root (rwfs mounts through
# /dev/fuse), and lazily unmounts anything left mounted below the benchmark directory on exit.
# The table goes to stdout, progress to stderr. About 6 to 7 minutes after the build on a busy
# 2-core VM (the build itself: 3 to 5 minutes from scratch).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
bench_help "$@"
[ "$(id -u)" -eq 0 ] || { echo "mount.sh: run as root (rwfs mounts through /dev/fuse)" >&2; exit 1; }
[ -e /dev/fuse ] || { echo "mount.sh: /dev/fuse is missing" >&2; exit 1; }
for tool in cp git cargo; do
    command -v "$tool" >/dev/null || { echo "mount.sh: $tool is needed" >&2; exit 1; }
done

cargo fetch --locked --quiet
# One release build for both: the benchmark target links the same rwfs library.
artifacts=$(cargo build --release --locked --quiet --bin rwfs --bench mount --message-format=json)
pick() {
    python3 -c 'import json, sys
kind = sys.argv[1]
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == sys.argv[2] and m.get("executable"):
        if kind in m["target"]["kind"]:
            print(m["executable"])' "$@"
}
rwfs=$(pick bin rwfs <<<"$artifacts")
bench=$(pick bench mount <<<"$artifacts")
[ -x "$rwfs" ] && [ -x "$bench" ] || { echo "mount.sh: build produced no rwfs or benchmark binary" >&2; exit 1; }

# Whatever happens, leave no mount behind (the daemons exit when their mount goes).
cleanup() {
    awk '$2 ~ /\/mount-bench-[0-9]+\/mnt$/ { print $2 }' /proc/mounts | while read -r m; do
        echo "mount.sh: unmounting stale $m" >&2
        umount -l "$m" || true
    done
}
trap cleanup EXIT

"$bench" --rwfs "$rwfs" "$@"
