//! rwfs: every write a coding agent makes, durable, scanned, journaled and reversible.
//!
//! # Architecture
//!
//! ```text
//!   cli (clap) ── app (wiring) ──┬── fuse/ (mount glue)      ┬── mcp/ (MCP glue)
//!                                └──────────────┬────────────┘
//!                                            engine/          drafts → decide → commit
//!                                 ┌─────────┬───┴──────┬───────────┐
//!                              score/    journal/    store/        │
//!                                 (pure)    └────┬─────┴───────────┘
//!                                             durable/            the only code that changes the disk
//! ```
//!
//! - [`durable`]: the I/O seam ([`durable::Disk`] and [`durable::Meta`]), path resolution beneath the root
//!   (`openat2(RESOLVE_BENEATH)`), and the steps of a commit (stage, sync, install).
//! - [`journal`]: `journal.jsonl` — rows, the group-commit writer thread, the tolerant reader.
//! - [`store`]: `objects/`, content-addressed versions that left the tree.
//! - [`engine`]: the owner of a workspace: open (lock, recovery), the commit protocol
//!   (`engine/commit.rs`), delete, history, restore, retention, verify.
//! - `cli` and `app`: argument parsing and wiring for the `rwfs` binary.
//!
//! Boundaries (checked by `tests/layout.rs`): arrows only point down; `engine`, `journal`,
//! `store` and `durable` never import `fuser`, `rmcp`, `tokio` or `clap`; `fuse` and `mcp` never
//! import each other; `score` does no I/O.

pub mod app;
pub mod cli;
pub mod durable;
pub mod engine;
pub mod envelope;
pub mod error;
pub mod fuse;
pub mod journal;
pub mod mcp;
pub mod policy;
pub mod score;
pub mod sha;
pub mod store;
pub mod tools;
pub mod vfs;

pub use error::{Error, ErrorKind, Reason, Result};
