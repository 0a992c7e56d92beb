//! Order statistics and the description of the machine, shared by the benchmarks.

use std::fs::File;
use std::io;
use std::path::Path;

/// The median (the mean of the middle two for an even count); NaN for no values.
pub fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// The `p`-th percentile of sorted values by nearest rank; `None` for no values.
pub fn percentile<T: Copy>(sorted: &[T], p: f64) -> Option<T> {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted.get(rank.min(sorted.len()).checked_sub(1)?).copied()
}

/// What the benchmark directory is on (the figures mean little on tmpfs).
pub fn describe_fs(path: &Path) -> String {
    match nix::sys::statfs::statfs(path) {
        Ok(st) => {
            use nix::sys::statfs::*;
            let t = st.filesystem_type();
            let name = if t == EXT4_SUPER_MAGIC {
                "ext2/3/4"
            } else if t == TMPFS_MAGIC {
                "tmpfs (fsync is a no-op: figures meaningless)"
            } else if t == XFS_SUPER_MAGIC {
                "xfs"
            } else if t == BTRFS_SUPER_MAGIC {
                "btrfs"
            } else if t == OVERLAYFS_SUPER_MAGIC {
                "overlayfs"
            } else {
                "other"
            };
            format!("{name} (f_type {:#x})", t.0)
        }
        Err(e) => format!("unknown ({e})"),
    }
}

/// Mark `dir` as the top of a directory hierarchy (`chattr +T`), so that ext4's Orlov allocator
/// places each subdirectory in a block group of its own instead of next to its parent.
///
/// Why it matters: ext4 without a journal (this machine's root filesystem) will not reuse an
/// inode freed in the last minute (`recently_deleted` in `fs/ext4/ialloc.c`), so every inode
/// allocation scans past the recently freed inodes of its block group. The minimal protocol frees
/// one inode per commit (the replaced version) and a finished run frees thousands: sharing block
/// groups with those made the engine's `O_TMPFILE` (and the next run) pay for them.
pub fn spread_subdirectories(dir: &Path) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    const FS_TOPDIR_FL: nix::libc::c_int = 0x0002_0000;
    let file = File::open(dir)?;
    let mut flags: nix::libc::c_int = 0;
    // SAFETY: FS_IOC_GETFLAGS/SETFLAGS read and write one int through a valid pointer on a valid
    // descriptor (the kernel uses an int despite the ioctl number's `long`).
    unsafe {
        if nix::libc::ioctl(file.as_raw_fd(), nix::libc::FS_IOC_GETFLAGS, &mut flags) != 0 {
            return Err(io::Error::last_os_error());
        }
        flags |= FS_TOPDIR_FL;
        if nix::libc::ioctl(file.as_raw_fd(), nix::libc::FS_IOC_SETFLAGS, &flags) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}
