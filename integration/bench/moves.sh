#!/usr/bin/env bash
# What moving a tree into a gated path costs through the mount (issue 25, item 7).
#
#   integration/bench/moves.sh [--files N] [--bytes B] [--durability close|batch] [--dir DIR]
#
# Builds (release) rwfs, makes a tree of N files of B bytes of text (default 100,000 files of
# 2,048 bytes, in 1,000 directories) under node_modules/ — a pass-through path, written
# natively in the backing tree — and mounts the workspace at a separate mountpoint. Then, each
# on a fresh copy of the tree, side by side with the same operation on the plain directory:
#
#   judged in place    `mv node_modules/t src/t` of the first MOVE_MAX_FILES files (the most
#                      rwfs judges in place: every file read, scanned and journaled, one rename)
#   copied by mv       `mv` of the whole tree: past the bound the rename is refused with EXDEV
#                      and mv copies it file by file, each copy a write through the gate
#   gated, alike       `mv src/t src/u` of the tree moved in above: nothing to judge (the walk
#                      only), the rename and its row
#
# Prints each wall time, the native time and the ratio. The machine may be shared: the ratios
# pair runs made back to back.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

files=100000
bytes=2048
durability=close
dir=
bench_options --files:files --bytes:bytes --durability:durability --dir:dir -- "$@"

cargo build --release --quiet
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
rwfs=$target/release/rwfs
bound=10000

dir=${dir:-$repo/target/moves-bench}
rm -rf "$dir"
mkdir -p "$dir"
ws=$dir/ws
mnt=$dir/mnt
plain=$dir/plain
mkdir -p "$ws/src" "$mnt" "$plain/src"
cleanup() {
    "$rwfs" unmount "$mnt" > /dev/null 2>&1 || umount -l "$mnt" 2> /dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT

# tree ROOT NAME N: N files of $bytes bytes of text in ROOT/node_modules/NAME.
tree() {
    python3 - "$1/node_modules/$2" "$3" "$bytes" << 'EOF'
import os, sys
root, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
line = "export const value = 'abcdefghijklmnopqrstuvwxyz0123456789';\n"
body = (line * (size // len(line) + 1))[:size]
for i in range(n):
    d = os.path.join(root, f"d{i // 100:04d}")
    if i % 100 == 0:
        os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"f{i:06d}.js"), "w") as f:
        f.write(body)
EOF
}
# secs CMD...: the wall time of CMD in seconds (3 decimals).
secs() {
    local a b
    a=$(date +%s%N)
    "$@" > /dev/null
    b=$(date +%s%N)
    python3 -c "print(f'{($b - $a) / 1e9:.3f}')"
}
row() { python3 -c "import sys; n, r, p = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]); print(f'{n:<44} {r:9.3f} s {p:9.3f} s {r / max(p, 1e-6):9.1f}x')" "$@"; }

echo "tree: $files files of $bytes bytes; durability $durability; bound $bound files judged in place"
tree "$ws" small "$bound"
tree "$plain" small "$bound"
tree "$ws" big "$files"
tree "$plain" big "$files"
sync
"$rwfs" mount "$ws" "$mnt" --daemon --durability "$durability" 2> /dev/null
printf '%-44s %11s %11s %10s\n' "operation" "rwfs" "native" "ratio"
r=$(cd "$mnt" && secs mv node_modules/small src/small)
p=$(cd "$plain" && secs mv node_modules/small src/small)
row "judged in place: mv of $bound files" "$r" "$p"
r=$(cd "$mnt" && secs mv src/small src/moved)
p=$(cd "$plain" && secs mv src/small src/moved)
row "gated, alike: mv of $bound files" "$r" "$p"
r=$(cd "$mnt" && secs mv node_modules/big src/big)
p=$(cd "$plain" && secs cp -r node_modules/big src/big)
row "copied by mv (EXDEV): $files files, vs cp -r" "$r" "$p"
rows=$(wc -l < "$ws/.resilient_write/journal.jsonl")
echo "journal: $rows rows; src/big holds $(find "$mnt/src/big" -type f | wc -l) files"
