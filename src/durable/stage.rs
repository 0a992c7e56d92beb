//! The steps of a commit: stage a version privately, make it durable, then install it.
//!
//! ```text
//!  stage    temp in the target's directory (O_TMPFILE, else O_EXCL + random name)
//!           ← attributes of the version it replaces (mode, owner, xattrs)
//!           ← bytes from a Source
//!           → writeback started; while the device writes, one pass reads every byte back,
//!             compares it with the source and computes the sha256
//!  sync     fsync(temp)
//!  install  Create:   link / rename(NOREPLACE) onto the name
//!           Exchange: name the temp, rename(EXCHANGE) with the name; the previous
//!                     inode now sits under the temp name (a Displaced)
//!           Replace:  rename over the name; the previous inode is dropped
//!  (caller) fsync(dir)
//! ```
//!
//! Invariants: nothing is visible under the target name until `install`; `install` is a single
//! atomic directory operation; an error before `install` leaves the directory as it was except
//! for a named temp that is removed on a best-effort basis (and otherwise found by recovery,
//! since every such name satisfies [`is_temp_name`](super::is_temp_name)).
//!
//! The order of these steps relative to the journal is the engine's business
//! (`engine/commit.rs`): this module never decides *when*, only *how*.

use std::io;

use nix::libc;

use super::disk::Disk;
use super::types::{Attrs, Dir, File, Rename, Temp, temp_name};
use crate::error::{Error, IoContext, Reason, Result};
use crate::sha::{Hasher, Sha256};

/// Size of the buffer used to stream and read back content.
const CHUNK: usize = 256 * 1024;
/// Below this size starting writeback early costs more (a separate submission) than the
/// verification pass it would overlap.
const WRITEBACK_HINT_MIN: u64 = 64 * 1024;

/// Where the bytes of a new version come from.
pub enum Source<'a> {
    Bytes(&'a [u8]),
    /// The first `len` bytes of `base`, then `tail`: an append.
    Append {
        base: &'a File,
        len: u64,
        tail: &'a [u8],
    },
    /// The first `len` bytes of `file` (a version restored from `objects/`).
    File {
        file: &'a File,
        len: u64,
    },
}

/// How [`Staged::install`] treats the name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Install {
    /// The name must be free.
    Create,
    /// Swap with the existing file and keep it under a temp name.
    Exchange,
    /// Replace whatever is there (content-addressed files, where it is the same bytes).
    Replace,
}

/// A version written privately and verified, not yet visible.
#[derive(Debug)]
pub struct Staged {
    temp: Temp,
    /// Where `temp` is named when that is not the target's directory (an adopted draft).
    home: Option<std::sync::Arc<Dir>>,
    sha256: Sha256,
    len: u64,
    /// Attributes that could not be carried over (reported, not fatal).
    pub attrs_skipped: Vec<String>,
    /// An extended attribute of an adopted file that must not reach the target: removed just
    /// before the install (after the caller's row is durable), not earlier.
    drop_xattr: Option<&'static str>,
}

/// The previous inode of a name, now under a temp name in the same directory.
#[derive(Debug)]
pub struct Displaced {
    pub dir: Dir,
    pub name: String,
}

/// Write `source` into a new temp file in `dir` and verify it.
pub fn stage(disk: &dyn Disk, dir: &Dir, source: Source<'_>, attrs: &Attrs) -> Result<Staged> {
    let temp = disk.create_temp(dir, 0o666).step("create temp file")?;
    stage_into(disk, dir, temp, source, attrs)
}

/// [`stage`] into `temp`, an empty file [`Disk::create_temp`] made in `dir` beforehand.
pub fn stage_into(disk: &dyn Disk, dir: &Dir, temp: Temp, source: Source<'_>, attrs: &Attrs) -> Result<Staged> {
    match fill(disk, &temp.file, source, attrs) {
        Ok((sha256, len, attrs_skipped)) => {
            Ok(Staged { temp, home: None, sha256, len, attrs_skipped, drop_xattr: None })
        }
        Err(e) => {
            discard(disk, dir, &temp);
            Err(e)
        }
    }
}

fn fill(disk: &dyn Disk, file: &File, source: Source<'_>, attrs: &Attrs) -> Result<(Sha256, u64, Vec<String>)> {
    let skipped = disk.set_attrs(file, attrs).step("set attributes")?;
    let segments = source.segments();
    let mut buf = Vec::new();
    let mut offset = 0u64;
    for segment in &segments {
        segment.for_each_chunk(disk, &mut buf, |chunk| {
            disk.write_at(file, chunk, offset).step("write temp file")?;
            offset += chunk.len() as u64;
            Ok(())
        })?;
    }
    // The device writes while we verify: one pass reads every byte back, compares it with the
    // source (stronger than comparing digests) and computes the version's digest.
    if offset >= WRITEBACK_HINT_MIN {
        disk.start_writeback(file);
    }
    let sha = verify(disk, file, &segments, offset)?;
    Ok((sha, offset, skipped))
}

/// Compare the first `len` bytes of `temp` (and its length) with `segments`; the digest of the
/// segments on success.
fn verify(disk: &dyn Disk, temp: &File, segments: &[Segment<'_>], len: u64) -> Result<Sha256> {
    let mut hasher = Hasher::new();
    let mut source_buf = Vec::new();
    let mut back = vec![0u8; CHUNK.min(len as usize)];
    let mut offset = 0u64;
    let mut equal = true;
    for segment in segments {
        segment.for_each_chunk(disk, &mut source_buf, |chunk| {
            hasher.update(chunk);
            if back.len() < chunk.len() {
                back.resize(chunk.len(), 0);
            }
            let got = read_full(disk, temp, &mut back[..chunk.len()], offset).step("read back temp file")?;
            equal &= got == chunk.len() && back[..got] == *chunk;
            offset += chunk.len() as u64;
            Ok(())
        })?;
    }
    let mut probe = [0u8; 1];
    equal &= offset == len && disk.read_at(temp, &mut probe, len).step("read back temp file")? == 0;
    let expected = hasher.finish();
    if !equal {
        let (actual, _) = hash_file(disk, temp).step("read back temp file")?;
        return Err(Reason::ReadBackMismatch { expected, actual }.into());
    }
    Ok(expected)
}

/// Read until `buf` is full or the file ends; the number of bytes read.
fn read_full(disk: &dyn Disk, file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        let n = disk.read_at(file, &mut buf[got..], offset + got as u64)?;
        if n == 0 {
            break;
        }
        got += n;
    }
    Ok(got)
}

/// A run of a new version's bytes: in memory, or a prefix of a file.
enum Segment<'a> {
    Mem(&'a [u8]),
    File { file: &'a File, len: u64 },
}

impl Source<'_> {
    fn segments(&self) -> Vec<Segment<'_>> {
        match *self {
            Source::Bytes(bytes) => vec![Segment::Mem(bytes)],
            Source::Append { base, len, tail } => {
                vec![Segment::File { file: base, len }, Segment::Mem(tail)]
            }
            Source::File { file, len } => vec![Segment::File { file, len }],
        }
    }
}

impl Segment<'_> {
    /// Call `f` with the segment's bytes, in chunks of at most [`CHUNK`]; `buf` holds file
    /// chunks. A file shorter than promised is an error (it changed under us).
    fn for_each_chunk(&self, disk: &dyn Disk, buf: &mut Vec<u8>, mut f: impl FnMut(&[u8]) -> Result<()>) -> Result<()> {
        match *self {
            Segment::Mem(bytes) => bytes.chunks(CHUNK).try_for_each(f),
            Segment::File { file, len } => {
                buf.resize(CHUNK, 0);
                let mut offset = 0u64;
                while offset < len {
                    let want = CHUNK.min((len - offset) as usize);
                    let got = read_full(disk, file, &mut buf[..want], offset).step("read source")?;
                    if got < want {
                        return Err(Error::io("read source", io::Error::from_raw_os_error(libc::EIO)));
                    }
                    f(&buf[..want])?;
                    offset += want as u64;
                }
                Ok(())
            }
        }
    }
}

/// The digest naming a whole file's content and its length, read through `disk`: holes are not
/// read, and above 4 GiB the digest is the sparse one (`sparse.rs`).
pub fn hash_file(disk: &dyn Disk, file: &File) -> io::Result<(Sha256, u64)> {
    super::sparse::content_digest(disk, file)
}

fn discard(disk: &dyn Disk, dir: &Dir, temp: &Temp) {
    if let Some(name) = &temp.name
        && let Err(e) = disk.unlink(dir, name)
    {
        tracing::warn!(dir = dir.rel(), name, error = %e, "could not remove temp file");
    }
}

impl Staged {
    /// A file already written elsewhere (a draft, `home/name`, on the target's filesystem)
    /// whose bytes hash to `sha256`: installing it moves it into place, and failing leaves it
    /// where it is (it is never removed here). `drop_xattr`, if the file has it, is removed
    /// right before the install.
    pub fn adopt(
        file: File,
        home: std::sync::Arc<Dir>,
        name: String,
        sha256: Sha256,
        len: u64,
        drop_xattr: Option<&'static str>,
    ) -> Staged {
        let temp = Temp { file, name: Some(name), made: None };
        Staged { temp, home: Some(home), sha256, len, attrs_skipped: Vec::new(), drop_xattr }
    }

    /// The file, once installed (the adopted draft's descriptor is the live file's).
    pub fn into_file(self) -> File {
        self.temp.file
    }

    pub fn sha256(&self) -> Sha256 {
        self.sha256
    }

    /// The name the staged file has in its home directory (`None`: an unnamed temp file).
    pub fn temp_name(&self) -> Option<&str> {
        self.temp.name.as_deref()
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn file(&self) -> &File {
        &self.temp.file
    }

    /// Make the staged bytes durable.
    pub fn sync(&self, disk: &dyn Disk) -> Result<()> {
        disk.sync(&self.temp.file).step("fsync temp file")
    }

    /// Remove the staged version without installing it (an adopted file is left alone).
    pub fn abandon(&self, disk: &dyn Disk, dir: &Dir) {
        if self.home.is_none() {
            discard(disk, dir, &self.temp);
        }
    }

    /// Make the staged version visible as `dir/name`, atomically. Not yet durable: the caller
    /// syncs `dir` next (it decides what an error at that point means).
    ///
    /// `current` is the open file currently at the name; it is needed only where the filesystem
    /// cannot exchange names (the previous inode is then hard-linked aside first). On error
    /// nothing is visible under `name` that was not there before.
    pub fn install(
        &self,
        disk: &dyn Disk,
        dir: &Dir,
        name: &str,
        how: Install,
        current: Option<&File>,
    ) -> Result<Option<Displaced>> {
        let result = self.place(disk, dir, name, how, current);
        if result.is_err() && self.home.is_none() {
            discard(disk, dir, &self.temp);
        }
        result
    }

    fn place(
        &self,
        disk: &dyn Disk,
        dir: &Dir,
        name: &str,
        how: Install,
        current: Option<&File>,
    ) -> Result<Option<Displaced>> {
        let file = &self.temp.file;
        let home = self.home.as_deref().unwrap_or(dir);
        if let Some(attr) = self.drop_xattr {
            let _ = disk.remove_file_xattr(file, std::ffi::OsStr::new(attr));
        }
        if how == Install::Create {
            match &self.temp.name {
                None => disk.link(file, dir, name).step("link new file")?,
                Some(tmp) => disk.rename(home, tmp, dir, name, Rename::NoReplace).step("rename new file")?,
            }
            return Ok(None);
        }
        let (tmp, linked_here) = match &self.temp.name {
            Some(tmp) => (tmp.clone(), false),
            None => (link_under_temp_name(disk, file, dir)?, true),
        };
        let result = swap(disk, home, &tmp, dir, name, how, current);
        if result.is_err() && linked_here {
            let _ = disk.unlink(dir, &tmp);
        }
        result
    }
}

/// Put the file named `home/tmp` in place of `dir/name` ([`Install::Exchange`] or
/// [`Install::Replace`]). An exchange leaves the previous inode at `home/tmp`.
fn swap(
    disk: &dyn Disk,
    home: &Dir,
    tmp: &str,
    dir: &Dir,
    name: &str,
    how: Install,
    current: Option<&File>,
) -> Result<Option<Displaced>> {
    if how == Install::Replace {
        disk.rename(home, tmp, dir, name, Rename::Replace).step("rename into place")?;
        return Ok(None);
    }
    let displaced = |at: &Dir, name: String| -> Result<Option<Displaced>> {
        Ok(Some(Displaced { dir: at.try_clone().step("dup directory")?, name }))
    };
    match disk.rename(home, tmp, dir, name, Rename::Exchange) {
        Ok(()) => displaced(home, tmp.to_string()),
        // The name vanished under us (another process): nothing to displace.
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
            disk.rename(home, tmp, dir, name, Rename::NoReplace).step("rename new file")?;
            Ok(None)
        }
        // No RENAME_EXCHANGE on this filesystem: hard-link the current inode aside (the one the
        // caller opened, else the one the name holds), then replace.
        Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP)) => {
            let aside = match current {
                Some(current) => link_under_temp_name(disk, current, dir)?,
                None => link_name_under_temp_name(disk, dir, name)?,
            };
            if let Err(e) = disk.rename(home, tmp, dir, name, Rename::Replace) {
                let _ = disk.unlink(dir, &aside);
                return Err(Error::io("rename into place", e));
            }
            displaced(dir, aside)
        }
        Err(e) => Err(Error::io("exchange names", e)),
    }
}

/// Hard-link `file` into `dir` under a fresh temp name.
fn link_under_temp_name(disk: &dyn Disk, file: &File, dir: &Dir) -> Result<String> {
    under_temp_name(|tmp| disk.link(file, dir, tmp))
}

/// Hard-link the file `dir/name` under a fresh temp name in `dir`.
fn link_name_under_temp_name(disk: &dyn Disk, dir: &Dir, name: &str) -> Result<String> {
    under_temp_name(|tmp| disk.hard_link(dir, name, dir, tmp))
}

/// `link` to a fresh temp name, drawn again while the name is taken.
fn under_temp_name(link: impl Fn(&str) -> std::io::Result<()>) -> Result<String> {
    loop {
        let tmp = temp_name();
        match link(&tmp) {
            Ok(()) => return Ok(tmp),
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => continue,
            Err(e) => return Err(Error::io("link temp name", e)),
        }
    }
}
