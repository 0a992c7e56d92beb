#!/usr/bin/env bash
# Backing syscalls per created file: `strace -c -f` of the daemon while N files of 4 KiB are
# created, written and closed through the mount (after 50 files to warm it up), counted per file
# by kind; or, with `--workload save`, per save of an editor's kind (Claude Code's Write: a temp
# file written, fsynced and renamed over one of 20 files). FUSE device traffic (`read` of requests, `writev` of replies) and `futex` hand-offs
# between the daemon's threads are printed apart: they are not calls on the backing filesystem.
# Counts, not times: they do not depend on the machine's load. With `--cpu`, nothing is traced:
# the daemon's CPU time (user + system, from /proc/PID/stat) per file or save is printed instead,
# and with `--peer` the ratio to the reference's.
#
#   integration/bench/syscalls.sh [--rwfs BIN] [--durability close|batch] [--files N] [--peer PATH]
#                                 [--workload create|save] [--cpu] [--dir DIR]
#
#   --rwfs BIN          the rwfs binary (default: target/release/rwfs, built if missing)
#   --durability MODE   close (default) or batch
#   --files N           files created (or saves made) while counting (default 1000)
#   --workload W        create (default) or save
#   --peer PATH         also count libfuse's reference passthrough_hp on the same workload
#                       (built outside the repository: integration/bench/mount.sh --help says how)
#   --cpu               measure the daemon's CPU time instead of counting its calls
#   --dir DIR           where the workspaces are made (default /tmp; a fresh filesystem gives
#                       figures free of other programs' deletions)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
rwfs=target/release/rwfs mode=close files=1000 peer=${RWFS_BENCH_PEER:-} workload=create cpu= dir=/tmp
bench_options --rwfs:rwfs --durability:mode --files:files --workload:workload --peer:peer --cpu:cpu=1 --dir:dir -- "$@"
[ -n "$cpu" ] || command -v strace > /dev/null || { echo "syscalls.sh: needs strace (apt-get install strace)" >&2; exit 2; }
[ -x "$rwfs" ] || cargo build --release --locked --bin rwfs

# cpu_ticks PID: user + system clock ticks of PID and its threads so far.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
# switches PID: context switches of PID's threads so far (a thread that sleeps and is woken
# counts one each time: the hand-offs between threads, which cost more CPU than most calls).
switches() { cat /proc/"$1"/task/*/status 2> /dev/null | awk '/ctxt_switches/ { n += $2 } END { print n + 0 }'; }

# count NAME PID MNT: create the files in MNT/d while strace counts PID's calls; print the table.
count() {
    local name=$1 pid=$2 mnt=$3 out
    out=$(mktemp)
    mkdir -p "$mnt/d"
    python3 -c "
for i in range(50):
    open('$mnt/d/warm%d' % i, 'wb').write(b'x' * 4096)"
    local tracer= ticks switched
    if [ -n "$cpu" ]; then
        ticks=$(cpu_ticks "$pid")
        switched=$(switches "$pid")
    else
        strace -f -c -p "$pid" -o "$out" & tracer=$!
        sleep 1
    fi
    case "$workload" in
        create) python3 -c "
import os
for i in range($files):
    with open('$mnt/d/f%d' % i, 'wb') as f:
        f.write(os.urandom(4096))" ;;
        save) python3 -c "
import os
for i in range($files):
    target = '$mnt/d/warm%d' % (i % 20)
    tmp = '%s.tmp.%d.%d' % (target, os.getpid(), i)
    with open(tmp, 'w') as f:
        f.write('line %d\\n' % i * 200); f.flush(); os.fsync(f.fileno())
    os.rename(tmp, target)" ;;
        *) echo "syscalls.sh: --workload create or save" >&2; exit 2 ;;
    esac
    sleep 1
    local unit; unit=$([ "$workload" = save ] && echo save || echo file)
    if [ -n "$cpu" ]; then
        # Clock ticks of 1/100 s (USER_HZ) to ms per file.
        last_ms=$(awk -v t="$(( $(cpu_ticks "$pid") - ticks ))" -v n="$files" 'BEGIN { printf "%.3f", t * 10 / n }')
        local per_switch
        per_switch=$(awk -v s="$(( $(switches "$pid") - switched ))" -v n="$files" 'BEGIN { printf "%.1f", s / n }')
        printf "%-24s daemon CPU per %s %s ms   (context switches %s)\n" "$name" "$unit" "$last_ms" "$per_switch"
        rm -f "$out"
        return
    fi
    kill -INT $tracer; wait $tracer 2> /dev/null || true
    awk -v name="$name" -v files="$files" -v unit="$([ "$workload" = save ] && echo save || echo file)" '
        $1 ~ /^[0-9.]+$/ && $NF != "total" { n[$NF] = $4 }
        END {
            for (k in n) if (k != "read" && k != "writev" && k != "futex" && k != "restart_syscall" && k != "sched_yield") {
                total += n[k]; line = line sprintf(" %s %.2f", k, n[k] / files)
            }
            printf "%-24s backing syscalls per %s %5.1f   (futex %.1f; FUSE device read %.1f, writev %.1f)\n", name, unit, total / files, n["futex"] / files, n["read"] / files, n["writev"] / files
            printf "%-24s %s\n", "", line
        }' "$out"
    rm -f "$out"
}

work=$(mktemp -d "$dir/rwfs-syscalls.XXXX")
trap 'fusermount3 -u "$work/mnt" 2> /dev/null || true; fusermount3 -u "$work/pmnt" 2> /dev/null || true; rm -rf "$work"' EXIT
mkdir -p "$work/ws" "$work/mnt"
"$rwfs" mount "$work/ws" "$work/mnt" --daemon --durability "$mode" > /dev/null 2>&1
count "rwfs ($mode)" "$(pgrep -f "mount $work/ws" | head -1)" "$work/mnt"
rwfs_ms=${last_ms:-}
"$rwfs" unmount "$work/mnt" > /dev/null 2>&1
if [ -n "$peer" ]; then
    mkdir -p "$work/src" "$work/pmnt"
    "$peer" --foreground "$work/src" "$work/pmnt" < /dev/null > /dev/null & ppid=$!
    for _ in $(seq 100); do mountpoint -q "$work/pmnt" && break; sleep 0.1; done
    count "passthrough_hp" "$ppid" "$work/pmnt"
    fusermount3 -u "$work/pmnt"; wait $ppid 2> /dev/null || true
    if [ -n "$cpu" ]; then
        awk -v a="$rwfs_ms" -v b="$last_ms" 'BEGIN { printf "rwfs / passthrough_hp     daemon CPU %.2fx\n", a / b }'
    fi
fi
