//! One delegating [`Disk`] for every test that needs to watch or disturb the engine's disk
//! calls: [`Hooked`] forwards to [`OsDisk`] and lets an [`Intercept`] act before and after each
//! call (record it, fail it, swap a symlink in), or replace how temp files are made.
//!
//! Every method of [`Disk`] and [`Meta`] is forwarded by hand (the traits have no defaults):
//! each change, [`Meta`]'s included, is a [`Call`] the intercept sees; reads other than `stat`
//! and the two cache hints pass straight through.

#![allow(dead_code)]

use std::ffi::{OsStr, OsString};
use std::io;
use std::path::Path;

use rwfs::durable::{Attrs, Dir, Disk, File, FileKind, FsStats, Meta, OsDisk, Rename, SetTime, Stat, Temp};

/// A disk call, as an intercept sees it.
#[derive(Debug)]
pub enum Call<'a> {
    Stat {
        dir: &'a Dir,
        name: &'a str,
    },
    Mkdir {
        dir: &'a Dir,
        name: &'a str,
    },
    CreateTemp {
        dir: &'a Dir,
    },
    /// `existed`: whether the name existed before (so the call did not create it).
    OpenWrite {
        dir: &'a Dir,
        name: &'a str,
        existed: bool,
    },
    Write {
        file: &'a File,
        data: &'a [u8],
        offset: u64,
    },
    SetLen {
        file: &'a File,
        len: u64,
    },
    /// Mode, owner and extended attributes applied to an open file ([`Disk::set_attrs`]).
    SetAttrs {
        file: &'a File,
    },
    Sync {
        file: &'a File,
    },
    SyncDir {
        dir: &'a Dir,
    },
    /// [`Disk::sync_fs`]: everything on the filesystem durable.
    SyncFs {
        file: &'a File,
    },
    Link {
        file: &'a File,
        dir: &'a Dir,
        name: &'a str,
    },
    Rename {
        from: &'a Dir,
        from_name: &'a str,
        to: &'a Dir,
        to_name: &'a str,
        how: Rename,
    },
    Unlink {
        dir: &'a Dir,
        name: &'a str,
    },
    // The changes of [`Meta`].
    CreateNew {
        dir: &'a Dir,
        name: &'a str,
    },
    Symlink {
        dir: &'a Dir,
        name: &'a str,
    },
    /// A fifo, socket or device node.
    Mknod {
        dir: &'a Dir,
        name: &'a str,
    },
    HardLink {
        from: &'a Dir,
        from_name: &'a str,
        to: &'a Dir,
        to_name: &'a str,
    },
    Rmdir {
        dir: &'a Dir,
        name: &'a str,
    },
    /// Mode, owner, times or an extended attribute of `name` in `dir`.
    SetMeta {
        dir: &'a Dir,
        name: &'a str,
    },
    CopyRange {
        from: &'a File,
        to: &'a File,
        len: u64,
    },
}

impl Call<'_> {
    /// Does this call change the disk?
    pub fn is_change(&self) -> bool {
        !matches!(self, Call::Stat { .. })
    }
}

/// A file a call created, and its name (`None`: an anonymous `O_TMPFILE`).
#[derive(Debug, Clone, Copy)]
pub struct Created<'a> {
    pub file: &'a File,
    pub name: Option<&'a str>,
}

/// What a test does around disk calls. Every method has a do-nothing default.
pub trait Intercept: Send + Sync {
    /// Before the call; an error is returned instead of performing it.
    fn before(&self, _call: &Call<'_>) -> io::Result<()> {
        Ok(())
    }
    /// After a successful call; `created` is the file a `CreateTemp`, a creating `OpenWrite` or a
    /// `CreateNew` made.
    fn after(&self, _call: &Call<'_>, _created: Option<Created<'_>>) {}
    /// How temp files are made (default: the real disk's way).
    fn create_temp(&self, dir: &Dir, perm: u32) -> io::Result<Temp> {
        OsDisk.create_temp(dir, perm)
    }
    /// How named temp files are made (default: the real disk's way).
    fn create_named_temp(&self, dir: &Dir, perm: u32) -> io::Result<Temp> {
        OsDisk.create_named_temp(dir, perm)
    }
}

/// [`OsDisk`] with an [`Intercept`] around every call that matters.
pub struct Hooked<I>(pub I);

impl<I> std::ops::Deref for Hooked<I> {
    type Target = I;
    fn deref(&self) -> &I {
        &self.0
    }
}

impl<I: Intercept> Hooked<I> {
    fn around<T>(&self, call: Call<'_>, op: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
        self.0.before(&call)?;
        let out = op()?;
        self.0.after(&call, None);
        Ok(out)
    }

    /// [`Hooked::around`] for a temp file `make` makes in `dir`: `after` is told the file.
    fn temp_around(&self, dir: &Dir, make: impl FnOnce() -> io::Result<Temp>) -> io::Result<Temp> {
        let call = Call::CreateTemp { dir };
        self.0.before(&call)?;
        let temp = make()?;
        self.0.after(&call, Some(Created { file: &temp.file, name: temp.name.as_deref() }));
        Ok(temp)
    }
}

impl<I: Intercept> Disk for Hooked<I> {
    fn open_root(&self, path: &Path) -> io::Result<Dir> {
        OsDisk.open_root(path)
    }
    fn open_dir(&self, base: &Dir, rel: &str) -> io::Result<Dir> {
        OsDisk.open_dir(base, rel)
    }
    fn stat(&self, dir: &Dir, name: &str) -> io::Result<Option<Stat>> {
        self.around(Call::Stat { dir, name }, || OsDisk.stat(dir, name))
    }
    fn file_stat(&self, file: &File) -> io::Result<Stat> {
        OsDisk.file_stat(file)
    }
    fn open_read(&self, dir: &Dir, name: &str) -> io::Result<File> {
        OsDisk.open_read(dir, name)
    }
    fn read_at(&self, file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        OsDisk.read_at(file, buf, offset)
    }
    fn read_link(&self, dir: &Dir, name: &str) -> io::Result<OsString> {
        OsDisk.read_link(dir, name)
    }
    fn list(&self, dir: &Dir) -> io::Result<Vec<(OsString, FileKind)>> {
        OsDisk.list(dir)
    }
    fn xattrs(&self, file: &File) -> io::Result<Vec<(OsString, Vec<u8>)>> {
        OsDisk.xattrs(file)
    }
    fn try_lock(&self, file: &File, exclusive: bool) -> io::Result<bool> {
        OsDisk.try_lock(file, exclusive)
    }

    fn mkdir(&self, dir: &Dir, name: &str, perm: u32) -> io::Result<()> {
        self.around(Call::Mkdir { dir, name }, || OsDisk.mkdir(dir, name, perm))
    }
    fn create_temp(&self, dir: &Dir, perm: u32) -> io::Result<Temp> {
        self.temp_around(dir, || self.0.create_temp(dir, perm))
    }
    fn create_named_temp(&self, dir: &Dir, perm: u32) -> io::Result<Temp> {
        self.temp_around(dir, || self.0.create_named_temp(dir, perm))
    }
    fn open_write(&self, dir: &Dir, name: &str, create: bool, perm: u32) -> io::Result<File> {
        let existed = OsDisk.stat(dir, name)?.is_some();
        let call = Call::OpenWrite { dir, name, existed };
        self.0.before(&call)?;
        let file = OsDisk.open_write(dir, name, create, perm)?;
        self.0.after(&call, (!existed).then_some(Created { file: &file, name: Some(name) }));
        Ok(file)
    }
    fn write_at(&self, file: &File, data: &[u8], offset: u64) -> io::Result<()> {
        self.around(Call::Write { file, data, offset }, || OsDisk.write_at(file, data, offset))
    }
    fn set_len(&self, file: &File, len: u64) -> io::Result<()> {
        self.around(Call::SetLen { file, len }, || OsDisk.set_len(file, len))
    }
    fn set_attrs(&self, file: &File, attrs: &Attrs) -> io::Result<Vec<String>> {
        self.around(Call::SetAttrs { file }, || OsDisk.set_attrs(file, attrs))
    }
    fn sync(&self, file: &File) -> io::Result<()> {
        self.around(Call::Sync { file }, || OsDisk.sync(file))
    }
    fn sync_data(&self, file: &File) -> io::Result<()> {
        self.around(Call::Sync { file }, || OsDisk.sync_data(file))
    }
    fn sync_dir(&self, dir: &Dir) -> io::Result<()> {
        self.around(Call::SyncDir { dir }, || OsDisk.sync_dir(dir))
    }
    fn sync_fs(&self, file: &File) -> io::Result<()> {
        self.around(Call::SyncFs { file }, || OsDisk.sync_fs(file))
    }
    fn link(&self, file: &File, dir: &Dir, name: &str) -> io::Result<()> {
        self.around(Call::Link { file, dir, name }, || OsDisk.link(file, dir, name))
    }
    fn rename(&self, from: &Dir, from_name: &str, to: &Dir, to_name: &str, how: Rename) -> io::Result<()> {
        self.around(Call::Rename { from, from_name, to, to_name, how }, || {
            OsDisk.rename(from, from_name, to, to_name, how)
        })
    }
    fn unlink(&self, dir: &Dir, name: &str) -> io::Result<()> {
        self.around(Call::Unlink { dir, name }, || OsDisk.unlink(dir, name))
    }
    fn start_writeback(&self, file: &File) {
        OsDisk.start_writeback(file)
    }
    fn drop_cache(&self, file: &File) {
        OsDisk.drop_cache(file)
    }
    fn quiet_reads(&self, file: &File) {
        OsDisk.quiet_reads(file)
    }
    fn reserve(&self, file: &File, offset: u64, len: u64) -> io::Result<()> {
        OsDisk.reserve(file, offset, len)
    }
}

impl<I: Intercept> Meta for Hooked<I> {
    fn create_new(&self, dir: &Dir, name: &str, perm: u32) -> io::Result<File> {
        let call = Call::CreateNew { dir, name };
        self.0.before(&call)?;
        let file = OsDisk.create_new(dir, name, perm)?;
        self.0.after(&call, Some(Created { file: &file, name: Some(name) }));
        Ok(file)
    }
    fn symlink(&self, target: &OsStr, dir: &Dir, name: &str) -> io::Result<()> {
        self.around(Call::Symlink { dir, name }, || OsDisk.symlink(target, dir, name))
    }
    fn mknod(&self, dir: &Dir, name: &str, kind: FileKind, perm: u32, rdev: u64) -> io::Result<()> {
        self.around(Call::Mknod { dir, name }, || OsDisk.mknod(dir, name, kind, perm, rdev))
    }
    fn hard_link(&self, from: &Dir, from_name: &str, to: &Dir, to_name: &str) -> io::Result<()> {
        self.around(Call::HardLink { from, from_name, to, to_name }, || OsDisk.hard_link(from, from_name, to, to_name))
    }
    fn rmdir(&self, dir: &Dir, name: &str) -> io::Result<()> {
        self.around(Call::Rmdir { dir, name }, || OsDisk.rmdir(dir, name))
    }
    fn set_perm(&self, dir: &Dir, name: &str, perm: u32) -> io::Result<()> {
        self.around(Call::SetMeta { dir, name }, || OsDisk.set_perm(dir, name, perm))
    }
    fn set_owner(&self, dir: &Dir, name: &str, uid: Option<u32>, gid: Option<u32>) -> io::Result<()> {
        self.around(Call::SetMeta { dir, name }, || OsDisk.set_owner(dir, name, uid, gid))
    }
    fn set_times(&self, dir: &Dir, name: &str, atime: SetTime, mtime: SetTime) -> io::Result<()> {
        self.around(Call::SetMeta { dir, name }, || OsDisk.set_times(dir, name, atime, mtime))
    }
    fn set_xattr(&self, dir: &Dir, name: &str, attr: &OsStr, value: &[u8], flags: i32) -> io::Result<()> {
        self.around(Call::SetMeta { dir, name }, || OsDisk.set_xattr(dir, name, attr, value, flags))
    }
    fn remove_xattr(&self, dir: &Dir, name: &str, attr: &OsStr) -> io::Result<()> {
        self.around(Call::SetMeta { dir, name }, || OsDisk.remove_xattr(dir, name, attr))
    }
    fn remove_file_xattr(&self, file: &File, attr: &OsStr) -> io::Result<()> {
        self.around(Call::SetAttrs { file }, || OsDisk.remove_file_xattr(file, attr))
    }
    fn get_xattr(&self, dir: &Dir, name: &str, attr: &OsStr) -> io::Result<Vec<u8>> {
        OsDisk.get_xattr(dir, name, attr)
    }
    fn file_xattr(&self, file: &File, attr: &OsStr) -> io::Result<Vec<u8>> {
        OsDisk.file_xattr(file, attr)
    }
    fn list_xattrs(&self, dir: &Dir, name: &str) -> io::Result<Vec<OsString>> {
        OsDisk.list_xattrs(dir, name)
    }
    fn statfs(&self, dir: &Dir) -> io::Result<FsStats> {
        OsDisk.statfs(dir)
    }
    fn copy_range(&self, from: &File, to: &File, len: u64) -> io::Result<()> {
        self.around(Call::CopyRange { from, to, len }, || OsDisk.copy_range(from, to, len))
    }
}
