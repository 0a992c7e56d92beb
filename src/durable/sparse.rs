//! Digests of sparse and huge files, bounded by the data they hold, not their length.
//!
//! A file's holes are known (`SEEK_DATA`/`SEEK_HOLE`, [`Meta::data_extents`]) and read as zeros,
//! so they are never read. The digest that names a version is:
//!
//! - up to [`SPARSE_DIGEST_MIN`] bytes (4 GiB, the policy's default `max_gated_bytes`): the
//!   SHA-256 of the content, holes fed to the hash as zeros without reading them (CPU only,
//!   bounded by the limit);
//! - above it, the **sparse digest**: SHA-256 of `"rwfs-sparse-1\0"`, the length (8 bytes, big
//!   endian), then for each 1 MiB block that is not all zeros, in order, its index (8 bytes, big
//!   endian) and the SHA-256 of its bytes. It depends on the content only (a hole and written
//!   zeros give the same digest), and costs the data blocks' bytes: a 16 TiB file with a few
//!   bytes written is one block read.
//!
//! So a gated version (never over `max_gated_bytes`) is named by its true SHA-256 unless the
//! policy raises the limit past 4 GiB; the refused, orphaned or displaced huge files that reach
//! `objects/` are named by the sparse digest, and `rwfs verify` checks them by the same rule.

use std::io;

use super::Disk;
#[cfg(doc)]
use super::Meta;
use super::types::File;
use crate::sha::{Hasher, Sha256};

/// Above this many bytes a file is named by its sparse digest (see the module documentation).
pub const SPARSE_DIGEST_MIN: u64 = 4 << 30;
/// The block of the sparse digest.
const BLOCK: u64 = 1 << 20;
const DOMAIN: &[u8] = b"rwfs-sparse-1\0";

/// The digest naming `file`'s content (see the module documentation) and its length.
pub fn content_digest(disk: &dyn Disk, file: &File) -> io::Result<(Sha256, u64)> {
    let len = disk.file_stat(file)?.size;
    let extents = disk.data_extents(file, len)?;
    let sha =
        if len <= SPARSE_DIGEST_MIN { plain(disk, file, len, &extents)? } else { sparse(disk, file, len, &extents)? };
    Ok((sha, len))
}

/// SHA-256 of the content; holes hashed as zeros, unread.
///
/// Its buffer is the file's length up to a block: most versions hashed are a few KiB, and
/// zeroing a block for each costs more than hashing them.
fn plain(disk: &dyn Disk, file: &File, len: u64, extents: &[(u64, u64)]) -> io::Result<Sha256> {
    let mut hasher = Hasher::new();
    let mut buf = vec![0u8; len.min(BLOCK) as usize];
    let mut at = 0u64;
    for &(start, end) in extents.iter().chain(std::iter::once(&(len, len))) {
        if at < start {
            hash_zeros(&mut hasher, start - at);
            at = start;
        }
        while at < end {
            let want = (end - at).min(buf.len() as u64) as usize;
            let n = disk.read_at(file, &mut buf[..want], at)?;
            if n == 0 {
                // Shorter than its length said (truncated meanwhile): the read-back stops here.
                return Err(io::Error::from_raw_os_error(nix::libc::EIO));
            }
            hasher.update(&buf[..n]);
            at += n as u64;
        }
    }
    Ok(hasher.finish())
}

/// Feed `len` zero bytes to `hasher` (a hole), from a static page of zeros.
fn hash_zeros(hasher: &mut Hasher, mut len: u64) {
    static ZEROS: [u8; 64 << 10] = [0; 64 << 10];
    while len > 0 {
        let n = len.min(ZEROS.len() as u64) as usize;
        hasher.update(&ZEROS[..n]);
        len -= n as u64;
    }
}

/// The sparse digest: only blocks that hold data are read.
fn sparse(disk: &dyn Disk, file: &File, len: u64, extents: &[(u64, u64)]) -> io::Result<Sha256> {
    let mut outer = Hasher::new();
    outer.update(DOMAIN);
    outer.update(&len.to_be_bytes());
    let mut buf = vec![0u8; BLOCK as usize];
    let mut next_block = 0u64;
    for &(start, end) in extents {
        let first = (start / BLOCK).max(next_block);
        let last = end.div_ceil(BLOCK);
        for block in first..last {
            let offset = block * BLOCK;
            let want = (len - offset).min(BLOCK) as usize;
            let mut got = 0;
            while got < want {
                match disk.read_at(file, &mut buf[got..want], offset + got as u64)? {
                    0 => return Err(io::Error::from_raw_os_error(nix::libc::EIO)),
                    n => got += n,
                }
            }
            if buf[..want].iter().any(|&b| b != 0) {
                outer.update(&block.to_be_bytes());
                outer.update(Sha256::of(&buf[..want]).as_bytes());
            }
        }
        next_block = next_block.max(last);
    }
    Ok(outer.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::durable::OsDisk;
    use std::os::unix::fs::FileExt;

    fn digest(f: &std::fs::File) -> Sha256 {
        use std::os::unix::fs::MetadataExt;
        let meta = f.metadata().unwrap();
        let id = crate::durable::FileId { dev: meta.dev(), ino: meta.ino() };
        let file = File::new(f.try_clone().unwrap().into(), id);
        content_digest(&OsDisk, &file).unwrap().0
    }

    #[test]
    fn holes_hash_as_zeros_and_the_rule_is_the_content_s() {
        // Small: the true SHA-256, holes or not.
        let sparse = tempfile::tempfile().unwrap();
        sparse.write_all_at(b"end", 3 << 20).unwrap();
        let mut dense = vec![0u8; 3 << 20];
        dense.extend_from_slice(b"end");
        assert_eq!(digest(&sparse), Sha256::of(&dense));
        // Huge: the same digest for a hole and for written zeros, and a different one for
        // different data.
        let huge = tempfile::tempfile().unwrap();
        huge.write_all_at(b"x", SPARSE_DIGEST_MIN + 5).unwrap();
        let zeros_written = tempfile::tempfile().unwrap();
        zeros_written.write_all_at(&[0u8; 4096], 1 << 30).unwrap();
        zeros_written.write_all_at(b"x", SPARSE_DIGEST_MIN + 5).unwrap();
        assert_eq!(digest(&huge), digest(&zeros_written));
        let other = tempfile::tempfile().unwrap();
        other.write_all_at(b"y", SPARSE_DIGEST_MIN + 5).unwrap();
        assert_ne!(digest(&huge), digest(&other));
    }
}
