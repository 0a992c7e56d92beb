//! What a new entry takes from the directory it is made in, decided as ext4 decides it.
//!
//! rwfs makes every entry as its own (privileged) process on behalf of the caller, so the
//! rules the kernel would apply to the caller are applied here, once, for every kind of entry
//! (directories, symlinks, nodes, files written in place, and the drafts of new gated files,
//! which are made in `drafts/` and only later installed in their directory):
//!
//! - **setgid directories** (`inode_init_owner`): the entry's group is the directory's, and a
//!   new subdirectory is setgid too. Dropping the setgid bit a non-member asks for on a new
//!   file is the kernel's job before the request reaches rwfs (`mode_strip_sgid`).
//! - **default ACLs** (`posix_acl_create`): when the directory has a
//!   `system.posix_acl_default`, the umask is not applied; the mode asked for is bounded by
//!   the default ACL (owner, mask — or the owning group when there is no mask — and other),
//!   the entry gets that ACL as its access ACL when it says more than a mode can, and a new
//!   directory inherits the default ACL itself. Symlinks take no ACL.
//! - otherwise the caller's **umask** applies (the mount asks the kernel not to apply it,
//!   `FUSE_DONT_MASK`, because only the filesystem can tell whether a default ACL rules it
//!   out).
//!
//! Invariant: the mode returned is the one the entry must end with; an access ACL returned is
//! consistent with it (the ACL's owner, mask or group, and other entries are the mode's), so
//! setting both in either order leaves the same result.

use std::ffi::OsString;

use crate::durable::{Dir, FileKind, Inheritable};

use super::{Core, Owner};

/// The access ACL's extended attribute name.
pub const ACL_ACCESS: &str = "system.posix_acl_access";
/// The default ACL's extended attribute name.
pub const ACL_DEFAULT: &str = "system.posix_acl_default";

const ACL_VERSION: u32 = 2;
const TAG_USER_OBJ: u16 = 0x01;
const TAG_GROUP_OBJ: u16 = 0x04;
const TAG_MASK: u16 = 0x10;
const TAG_OTHER: u16 = 0x20;
const SETGID: u32 = 0o2000;

/// The attributes a new entry must end with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inherited {
    /// Permission bits, setuid/setgid/sticky included.
    pub perm: u32,
    pub uid: u32,
    pub gid: u32,
    /// ACLs to set on the entry (`system.posix_acl_access`, and `system.posix_acl_default`
    /// for a directory).
    pub xattrs: Vec<(OsString, Vec<u8>)>,
}

impl Core {
    /// What an entry of `kind` asked with `perm` by `owner` inherits from the directory `dir`.
    /// What the directory gives is read once while it is kept open (`durable/dirs.rs`: a
    /// change of its mode, owner or ACL through rwfs forgets it).
    pub(crate) fn inherit(&self, dir: &Dir, kind: FileKind, perm: u32, owner: Owner) -> std::io::Result<Inherited> {
        Ok(inherit(&self.given(dir)?, kind, perm, owner))
    }

    /// What `dir` gives a new entry, read once while it is kept open.
    pub(crate) fn given(&self, dir: &Dir) -> std::io::Result<Inheritable> {
        let disk = self.disk();
        dir.inheritable(|| {
            let parent = disk.stat(dir, ".")?.ok_or_else(|| std::io::Error::from_raw_os_error(nix::libc::ENOENT))?;
            let default_acl = match disk.get_xattr(dir, ".", std::ffi::OsStr::new(ACL_DEFAULT)) {
                Ok(value) => Some(value),
                Err(e) if matches!(e.raw_os_error(), Some(nix::libc::ENODATA | nix::libc::EOPNOTSUPP)) => None,
                Err(e) => return Err(e),
            };
            Ok(Inheritable { dev: parent.id.dev, perm: parent.perm, gid: parent.gid, default_acl })
        })
    }
}

/// The rules of the module documentation, as a pure function of the directory's attributes
/// and default ACL (an unreadable ACL counts as none).
pub fn inherit(parent: &Inheritable, kind: FileKind, perm: u32, owner: Owner) -> Inherited {
    let default_acl = parent.default_acl.as_deref();
    let setgid_dir = parent.perm & SETGID != 0;
    let gid = if setgid_dir { parent.gid } else { owner.gid };
    let mut perm = perm & 0o7777;
    if kind == FileKind::Dir && setgid_dir {
        perm |= SETGID;
    }
    let mut xattrs = Vec::new();
    match default_acl.and_then(Acl::parse).filter(|_| kind != FileKind::Symlink) {
        Some(acl) => {
            let (access, masked) = acl.create_masq(perm);
            perm = masked;
            if access.is_extended() {
                xattrs.push((OsString::from(ACL_ACCESS), access.encode()));
            }
            if kind == FileKind::Dir {
                xattrs.push((OsString::from(ACL_DEFAULT), acl.encode()));
            }
        }
        None => perm &= !(owner.umask & 0o777),
    }
    Inherited { perm, uid: owner.uid, gid, xattrs }
}

/// A POSIX ACL in the kernel's extended-attribute form: a version, then (tag, perm, id)
/// entries.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Acl {
    entries: Vec<(u16, u16, u32)>,
}

impl Acl {
    fn parse(bytes: &[u8]) -> Option<Acl> {
        let (version, rest) = bytes.split_first_chunk::<4>()?;
        if u32::from_le_bytes(*version) != ACL_VERSION || rest.len() % 8 != 0 || rest.is_empty() {
            return None;
        }
        let entries = rest
            .chunks_exact(8)
            .map(|e| {
                let tag = u16::from_le_bytes([e[0], e[1]]);
                let perm = u16::from_le_bytes([e[2], e[3]]);
                let id = u32::from_le_bytes([e[4], e[5], e[6], e[7]]);
                (tag, perm, id)
            })
            .collect();
        Some(Acl { entries })
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = ACL_VERSION.to_le_bytes().to_vec();
        for &(tag, perm, id) in &self.entries {
            out.extend_from_slice(&tag.to_le_bytes());
            out.extend_from_slice(&perm.to_le_bytes());
            out.extend_from_slice(&id.to_le_bytes());
        }
        out
    }

    /// More than the owner, owning group and other entries: not expressible as a mode.
    fn is_extended(&self) -> bool {
        self.entries.iter().any(|&(tag, ..)| !matches!(tag, TAG_USER_OBJ | TAG_GROUP_OBJ | TAG_OTHER))
    }

    /// The kernel's `posix_acl_create_masq`: the new entry's access ACL and mode from this
    /// default ACL and the mode asked for.
    fn create_masq(&self, mode: u32) -> (Acl, u32) {
        let mut acl = self.clone();
        let mut mode = mode;
        let mut group_obj = None;
        let mut mask = None;
        for (i, entry) in acl.entries.iter_mut().enumerate() {
            let perm = u32::from(entry.1);
            match entry.0 {
                TAG_USER_OBJ => {
                    entry.1 = (perm & (mode >> 6) & 7) as u16;
                    mode &= (perm << 6) | !0o700;
                }
                TAG_OTHER => {
                    entry.1 = (perm & mode & 7) as u16;
                    mode &= perm | !0o007;
                }
                TAG_GROUP_OBJ => group_obj = Some(i),
                TAG_MASK => mask = Some(i),
                _ => {}
            }
        }
        if let Some(i) = mask.or(group_obj) {
            let entry = &mut acl.entries[i];
            let perm = u32::from(entry.1);
            entry.1 = (perm & (mode >> 3) & 7) as u16;
            mode &= (perm << 3) | !0o070;
        }
        (acl, mode)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(entries: &[(u16, u16, u32)]) -> Vec<u8> {
        Acl { entries: entries.to_vec() }.encode()
    }

    fn dir(perm: u32, gid: u32, default_acl: Option<&[u8]>) -> Inheritable {
        Inheritable { dev: 0, perm, gid, default_acl: default_acl.map(<[u8]>::to_vec) }
    }

    const CALLER: Owner = Owner { uid: 1000, gid: 1000, umask: 0o022 };

    #[test]
    fn umask_applies_without_a_default_acl() {
        let got = inherit(&dir(0o755, 0, None), FileKind::File, 0o666, CALLER);
        assert_eq!((got.perm, got.gid, got.xattrs.len()), (0o644, 1000, 0));
    }

    #[test]
    fn a_default_acl_bounds_the_mode_and_ignores_the_umask() {
        // setfacl -d -m u::r,g::r,o::- : a new file asked 0666 is r--r-----.
        let default = acl(&[(TAG_USER_OBJ, 4, u32::MAX), (TAG_GROUP_OBJ, 4, u32::MAX), (TAG_OTHER, 0, u32::MAX)]);
        let open = Owner { umask: 0, ..CALLER };
        let got = inherit(&dir(0o755, 0, Some(&default)), FileKind::File, 0o666, open);
        assert_eq!((got.perm, got.xattrs.len()), (0o440, 0));
        let strict = Owner { umask: 0o722, ..CALLER };
        let got = inherit(&dir(0o755, 0, Some(&default)), FileKind::File, 0o666, strict);
        assert_eq!(got.perm, 0o440, "the umask does not apply under a default ACL");
        let sub = inherit(&dir(0o755, 0, Some(&default)), FileKind::Dir, 0o777, open);
        assert_eq!(sub.perm, 0o440);
        assert_eq!(sub.xattrs, vec![(OsString::from(ACL_DEFAULT), default)]);
    }

    #[test]
    fn a_mask_bounds_the_group_bits_and_named_entries_make_an_access_acl() {
        let default = acl(&[
            (TAG_USER_OBJ, 7, u32::MAX),
            (0x02, 7, 1234),
            (TAG_GROUP_OBJ, 5, u32::MAX),
            (TAG_MASK, 5, u32::MAX),
            (TAG_OTHER, 1, u32::MAX),
        ]);
        let got = inherit(&dir(0o755, 0, Some(&default)), FileKind::File, 0o666, CALLER);
        assert_eq!(got.perm, 0o640);
        let access = Acl::parse(&got.xattrs[0].1).unwrap();
        assert_eq!(got.xattrs[0].0, ACL_ACCESS);
        let perms: Vec<u16> = access.entries.iter().map(|e| e.1).collect();
        // owner rw, the named user keeps rwx (bounded by the mask), group r-x, mask r--, other ---
        assert_eq!(perms, vec![6, 7, 5, 4, 0]);
    }

    #[test]
    fn setgid_directories_give_their_group_and_their_bit_to_subdirectories() {
        let parent = dir(0o2775, 50, None);
        let file = inherit(&parent, FileKind::File, 0o666, CALLER);
        assert_eq!((file.perm, file.gid), (0o644, 50));
        let sub = inherit(&parent, FileKind::Dir, 0o777, CALLER);
        assert_eq!((sub.perm, sub.gid), (0o2755, 50));
        let link = inherit(&parent, FileKind::Symlink, 0o777, CALLER);
        assert_eq!(link.gid, 50);
    }

    #[test]
    fn a_broken_default_acl_counts_as_none() {
        let got = inherit(&dir(0o755, 0, Some(b"junk")), FileKind::File, 0o666, CALLER);
        assert_eq!(got.perm, 0o644);
    }
}
