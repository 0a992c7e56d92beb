//! rwfs: every write a coding agent makes, durable, scanned, journaled and reversible.
//!
//! # Architecture
//!
//! ```text
//!   cli (clap) ── app (wiring) ──┬── fuse/ (fuser adapter)     ┬── mcp/ (rmcp adapter)
//!                                │     vfs/ (the mount's fs)   │     tools/ (the paper's tools)
//!                                └──────────────┬──────────────┘
//!                                            engine/          drafts → decide → commit
//!                                            history/         the read side (page, tools read it)
//!                                 ┌─────────┬───┴──────┬───────────┐
//!                              score/    journal/    store/        │
//!                                 (pure)    └────┬─────┴───────────┘
//!                                             durable/            the only code that changes the disk
//! ```
//!
//! - [`durable`]: the I/O seam ([`durable::Disk`] and [`durable::Meta`]), path resolution
//!   beneath the root (`openat2(RESOLVE_BENEATH)`), the state directory's layout table, and the
//!   steps of a commit (stage, sync, install), digests that read only a sparse file's data.
//! - [`journal`]: `journal.jsonl` — rows, the group-commit writer thread, the tolerant reader,
//!   the keyed chain and its anchored head (`seal.rs`), sessions, following, and the history
//!   queries ([`journal::query`]) every caller asks through, so an index can replace their scans.
//! - [`store`]: `objects/`, content-addressed versions that left the tree.
//! - [`engine`]: the owner of a workspace: open (lock, recovery), the commit protocol
//!   (`engine/commit.rs`), delete, restore, rewind, retention; which class a path is in
//!   ([`engine::PathClass`]); change events ([`engine::Changed`]).
//! - [`history`]: the read side, under the engine and never importing it: a workspace opened
//!   for reading ([`history::Workspace`]), a file's history, status, diff, blame, verify,
//!   approvals — what the CLI's read commands, the page and the MCP history tools ask.
//! - [`vfs`]: the mount's filesystem without a kernel — nodes, handles, each file's draft state
//!   machine, the commit points; [`fuse`] serves it through fuser.
//! - [`tools`]: the Resilient Write tools without a transport; [`mcp`] serves them through rmcp.
//! - [`notice`] and [`temporary`]: what a refusal says to the agent that caused it (the
//!   writer's stderr line, a hook's paragraph), and which file a temporary name stands for.
//! - `cli` and `app`: argument parsing and wiring for the `rwfs` binary.
//! - [`http`]: loopback HTTP written once — access checks, connection cap, serve loop — for MCP
//!   over HTTP and the history page.
//! - [`process`]: who is calling — what `/proc` says of a process (name, `stat`, command line,
//!   environment, groups, mounts), read in this one place.
//! - [`time`]: the journal's sub-second stamp and the one parser of times given to rwfs.
//! - [`wake`]: blocking hand-over between threads (a queue, a one-shot reply) that never spins.
//!
//! Boundaries (checked by `tests/layout.rs`): arrows only point down; `engine`, `journal`,
//! `store`, `durable`, `tools` and `vfs` never import `fuser`, `rmcp`, `tokio` or `clap`; `fuse`
//! imports only `vfs` and the types it converts; `fuse` and `mcp` never import each other;
//! `score` does no I/O; `history` never imports `engine`, and `app` and `tools` read through
//! `history`.
//!
//! The contract, the invariants and the mount's rules are in `docs/architecture.md`.

pub mod app;
pub mod cli;
pub mod durable;
pub mod engine;
pub mod envelope;
pub mod error;
pub mod fuse;
pub mod history;
pub mod http;
pub mod journal;
pub mod mcp;
pub mod notice;
pub mod policy;
pub mod process;
pub mod score;
pub mod sha;
pub mod store;
pub mod temporary;
pub mod time;
pub mod tools;
pub mod vfs;
pub mod wake;

pub use error::{Error, ErrorKind, Reason, Result};
