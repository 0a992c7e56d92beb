//! What a mount call acts on ([`Entry`]): a path of the tree, or a draft by its [`DraftId`].
//!
//! The vocabulary the write path's files share, kept below all of them: the draft table
//! (`drafts.rs`) hands out the ids, the drafts' operations (`draft.rs`), the batch queue
//! (`batch.rs`) and the tree (`tree.rs`, where `Core::on` and `Core::locate` find an entry's
//! directory and name) take them, and the gate and protections name paths through `Entry`.
//! This file imports none of them, so none of them imports another only for these names (the
//! engine's files import each other in no circle: `tests/layout.rs`).

/// A draft in the engine's table (`drafts.rs`): plain `Copy` data the mount keeps; the draft
/// itself never leaves the engine. An id is never reused within an engine's life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DraftId(pub(super) u64);

/// What a mount call acts on: a path of the tree, or the draft of a file being written.
#[derive(Debug, Clone, Copy)]
pub enum Entry<'a> {
    Path(&'a str),
    Draft(DraftId),
}
