#!/bin/bash
# run.sh: the upstream xfstests `generic` group (quick by default) against rwfs mounts.
#
#   integration/xfstests/run.sh XFSTESTS_SRC [--rwfs BIN] [--out DIR] [--group NAME] [--build-only]
#                                            [--durability close|batch] [--backing-size SIZE]
#                                            [-- TESTS]
#
# XFSTESTS_SRC is a checkout of https://git.kernel.org/pub/scm/fs/xfs/xfstests-dev.git (or a
# mirror of it) kept OUTSIDE this repository: the suite is on no package registry, so it is
# neither vendored nor run by CI. The script
#   1. checks the Debian packages the build and the tests need (and prints the apt-get line),
#   2. builds the checkout (`make`) unless it is built,
#   3. copies it to OUT/xfstests and applies there, at run time, the adjustments FUSE needs
#      (the checkout itself is never changed):
#        - unmount by mountpoint: xfstests unmounts fuse filesystems by "device", which for
#          rwfs is the workspace directory, and umount(8) cannot resolve that to the mount;
#        - the type df shows, fuse.rwfs, counts as FSTYP fuse (as fuse.glusterfs already does);
#   4. installs mount/mount.fuse.rwfs as /sbin/mount.fuse.rwfs for the run (mount -t fuse.rwfs
#      WORKSPACE MNT is how xfstests mounts), removed again at exit if it was not there before;
#   5. runs `./check -g generic/GROUP -E exclude` with FSTYP=fuse, FUSE_SUBTYP=.rwfs, TEST_DEV and
#      SCRATCH_DEV two workspaces under OUT/backing and their mounts under OUT/mnt; OUT/backing
#      is an ext4 filesystem of --backing-size (default 16g) in a sparse image file, mounted
#      through a loop device (a 4g tmpfs where loop devices are missing): some tests fill their
#      filesystem on purpose (fallocate of all free space), and rwfs keeps a deleted file's last
#      version, so on the host's own filesystem they would fill the host's disk (generic/103
#      left a 49 GB version there);
#   6. writes OUT/summary.txt: passed / failed / not run counts and the failing tests.
# Must run as root (mounts, chown, device nodes). Results of each test: OUT/xfstests/results/.
# exclude: tests no FUSE filesystem can pass, one per line with the reason (see that file).

set -euo pipefail

here=$(cd -- "$(dirname -- "$0")" && pwd)
repo=$(cd -- "$here/../.." && pwd)
src=
bin=${RWFS_BIN:-}
out=$PWD/xfstests-out
group=quick
build_only=0
durability=close
backing_size=16g
extra=()

usage() { sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
    case $1 in
        --rwfs) bin=$2; shift ;;
        --out) out=$2; shift ;;
        --group) group=$2; shift ;;
        --build-only) build_only=1 ;;
        --durability) durability=$2; shift ;;
        --backing-size) backing_size=$2; shift ;;
        -h | --help) usage; exit 0 ;;
        --) shift; extra=("$@"); break ;;
        -*) echo "run.sh: unknown option $1 (see --help)" >&2; exit 1 ;;
        *) [ -z "$src" ] || { echo "run.sh: one XFSTESTS_SRC only" >&2; exit 1; }; src=$1 ;;
    esac
    shift
done
[ -n "$src" ] || { usage >&2; exit 1; }
src=$(cd -- "$src" && pwd)
[ -f "$src/check" ] || { echo "run.sh: $src is not an xfstests checkout (no ./check)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "run.sh: run as root (xfstests mounts and unmounts)" >&2; exit 1; }

# Debian packages: building xfstests, then what its tests call.
build_pkgs="make gcc autoconf automake libtool pkg-config uuid-dev xfslibs-dev libattr1-dev libacl1-dev
libaio-dev liburing-dev libgdbm-dev libcap-dev"
run_pkgs="acl attr xfsprogs bc psmisc gawk fuse3 python3"
missing=()
for pkg in $build_pkgs $run_pkgs; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed' || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "run.sh: missing Debian packages; install them with:" >&2
    echo "  apt-get install -y ${missing[*]}" >&2
    exit 1
fi

# The users xfstests switches to (tests needing them are "not run" without them).
for user in fsgqa fsgqa2 123456-fsgqa; do
    id "$user" >/dev/null 2>&1 ||
        echo "run.sh: no user $user: tests that switch users will not run (create it: useradd -m -U $user)" >&2
done

if [ ! -x "$src/ltp/fsstress" ] || [ ! -x "$src/src/feature" ]; then
    echo "run.sh: building $src" >&2
    make -C "$src" -j"$(nproc)" >"$out.build.log" 2>&1 || { echo "run.sh: build failed, see $out.build.log" >&2; exit 1; }
fi
[ "$build_only" = 0 ] || exit 0

if [ -z "$bin" ]; then
    echo "run.sh: building rwfs (cargo build)" >&2
    (cd "$repo" && cargo build --quiet)
    bin=${CARGO_TARGET_DIR:-$repo/target}/debug/rwfs
fi
mkdir -p "$out"
# A copy of the binary: rebuilding the repository during the run must not swap it.
cp "$bin" "$out/rwfs"
bin=$out/rwfs

suite=$out/xfstests
rm -rf "$suite"
cp -a "$src" "$suite"
# Unmount by mountpoint (see above).
sed -i -e 's/_unmount \$SCRATCH_DEV$/_unmount $SCRATCH_MNT/' -e 's/_unmount \$TEST_DEV$/_unmount $TEST_DIR/' \
    "$suite/common/rc"
# fuse.rwfs is FSTYP fuse (see above).
sed -i -e "s|-e 's/fuse.glusterfs/glusterfs/'|-e 's/fuse.glusterfs/glusterfs/' -e 's/^fuse[.]rwfs\$/fuse/'|" "$suite/common/rc"
grep -q '_unmount \$SCRATCH_MNT' "$suite/common/rc" && grep -qF 's/^fuse[.]rwfs' "$suite/common/rc" ||
    { echo "run.sh: could not adjust common/rc (has xfstests changed?)" >&2; exit 1; }

for name in test scratch; do
    for m in "$out/mnt/$name"; do
        if mountpoint -q "$m"; then umount "$m" || umount -l "$m"; fi
    done
done
mkdir -p "$out/backing"
if mountpoint -q "$out/backing"; then umount "$out/backing" || umount -l "$out/backing"; fi
rm -f "$out/backing.img"
truncate -s "$backing_size" "$out/backing.img"
if ! { mkfs.ext4 -q -F "$out/backing.img" && mount -o loop "$out/backing.img" "$out/backing"; } 2>/dev/null; then
    echo "run.sh: no loop device: the workspaces live on a 4g tmpfs instead" >&2
    rm -f "$out/backing.img"
    mount -t tmpfs -o size=4g,mode=0755 rwfs-xfstests "$out/backing"
fi
for name in test scratch; do
    rm -rf "$out/backing/$name"
    mkdir -p "$out/backing/$name/.resilient_write" "$out/mnt/$name"
    # Keep the version store small on the shared disk (the run rewrites gigabytes).
    printf 'durability: %s\nretention:\n  max_bytes: 2147483648\n  interval_seconds: 30\n' "$durability" \
        >"$out/backing/$name/.resilient_write/policy.yaml"
done

helper=/sbin/mount.fuse.rwfs
installed_helper=0
if [ ! -e "$helper" ]; then
    ln -s "$repo/mount/mount.fuse.rwfs" "$helper"
    installed_helper=1
fi
cleanup() {
    for name in test scratch; do
        if mountpoint -q "$out/mnt/$name"; then umount "$out/mnt/$name" 2>/dev/null || umount -l "$out/mnt/$name"; fi
    done
    if mountpoint -q "$out/backing"; then umount "$out/backing" 2>/dev/null || umount -l "$out/backing"; fi
    rm -f "$out/backing.img"
    [ "$installed_helper" = 0 ] || rm -f "$helper"
}
trap cleanup EXIT

cat >"$suite/local.config" <<CONFIG
export FSTYP=fuse
export FUSE_SUBTYP=.rwfs
export TEST_DEV=$out/backing/test
export TEST_DIR=$out/mnt/test
export SCRATCH_DEV=$out/backing/scratch
export SCRATCH_MNT=$out/mnt/scratch
export RWFS_BIN=$bin
# Tests switch to the fsgqa users: other users must reach the mounts.
export MOUNT_OPTIONS="-o allow_other"
export TEST_FS_MOUNT_OPTS="-o allow_other"
CONFIG

# Exclusions: the test names only (comments and reasons stripped).
sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$here/exclude" | awk '{print $1}' >"$suite/exclude.list"

cd "$suite"
set +e
# Tests named after -- replace the group.
if [ ${#extra[@]} -gt 0 ]; then selection=("${extra[@]}"); else selection=(-g "generic/$group"); fi
./check -E exclude.list "${selection[@]}" 2>&1 | tee "$out/check.log"
set -e

# The summary, from check's line per test (also complete when the run was cut short).
awk '
    $1 ~ /^generic\/[0-9]+$/ {
        t = $1
        if ($0 ~ /\[expunged\]/) next
        if ($0 ~ /\[not run\]/) { status[t] = "notrun"; next }
        if ($0 ~ /output mismatch|\[failed|_check_|Interrupted/) { status[t] = "failed"; next }
        if (!(t in status)) status[t] = ($0 ~ /[0-9]+s[[:space:]]*$/) ? "passed" : "interrupted"
    }
    END {
        for (t in status) { n[status[t]]++; list[status[t]] = list[status[t]] " " t }
        printf "passed %d, failed %d, not run %d, interrupted %d\n", n["passed"], n["failed"], n["notrun"], n["interrupted"]
        print "failed:" list["failed"]
    }' "$out/check.log" >"$out/summary.txt"
cat "$out/summary.txt"
