//! Durable changes to the backing tree, and the seam beneath them.
//!
//! This is the only module that issues system calls which change the disk: everything above it
//! (journal, store, engine) goes through the [`Disk`] trait and its supertrait [`Meta`] (the
//! namespace and metadata calls of the mount), whose production implementation is [`OsDisk`].
//! Tests wrap a `Disk` to record every change and enumerate crash states, or to fail the n-th
//! call.
//!
//! - [`resolve`](resolve::resolve) turns an untrusted string into a [`Target`] beneath the root
//!   (`openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`), or a typed refusal.
//! - [`stage`] writes a version to a private temp file in the target's directory, carrying the
//!   previous version's mode, owner and xattrs, and verifies it by reading it back;
//!   [`Staged::sync`] makes it durable; [`Staged::install`] makes it visible atomically
//!   (`linkat`/`RENAME_NOREPLACE` for a create, `RENAME_EXCHANGE` to keep the previous inode
//!   aside as a [`Displaced`] temp name for an overwrite).
//! - Linux specifics live in `sys.rs` with their macOS equivalents named.
//! - [`layout`] names every entry of the state directory and what the mount may show of it.
//!
//! Inside, imports point one way: `sys.rs` (raw system calls on descriptors) and `dirs.rs`
//! (directories kept open by path) ← `types.rs` (the handles and values of the seam) ← `disk.rs` (the traits, which use nothing but `types.rs`) ←
//! `os.rs` and `meta.rs` (the real disk's `Disk` and `Meta`); `resolve.rs` and `stage.rs` use the
//! traits.
//!
//! It deliberately does not decide the order of steps relative to the journal, nor where
//! displaced versions go: that is the commit protocol in `engine/commit.rs`.

mod dirs;
mod disk;
pub mod layout;
mod meta;
mod os;
pub mod resolve;
mod sparse;
mod stage;
mod sys;
mod types;

pub use dirs::Inheritable;
pub use disk::{Disk, Meta};
pub use layout::STATE_DIR;
pub use os::OsDisk;
pub use resolve::{Scope, Target, WorkspacePath};
pub use sparse::{SPARSE_DIGEST_MIN, content_digest};
pub use stage::{Displaced, Install, Source, Staged, hash_file, stage, stage_into};
pub use types::{
    Attrs, Dir, File, FileId, FileKind, FsStats, Rename, SetTime, Stat, TEMP_PREFIX, TEMP_SUFFIX, Temp, is_temp_name,
    temp_name,
};
