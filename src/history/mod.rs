//! The read side: a workspace opened for reading and every question about what happened in it
//! and what is kept — a file's history and versions, `status`, `diff`, `blame`, `verify`,
//! approvals — answered from the journal ([`crate::journal::query`]), the store
//! ([`crate::store`]) and the tree, whether or not an engine owns the workspace.
//!
//! Named `history` because that is what every answer here is: the CLI's read commands, the
//! page (`app/ui.rs`) and the MCP history tools (`tools/`) read through it, and the engine uses
//! it too (a write first reads what it replaces). The arrow runs one way, `engine → history`:
//! nothing here imports `engine` (`tests/layout.rs`), so the pure pieces both sides need — the
//! state directory's names and what a query may show of a path (`durable::layout`), how a
//! refusal's envelope is named and shown (`envelope`), who owns the workspace (`owner.rs`) —
//! live here or below.
//!
//! Key types: [`Workspace`] (opened with [`Options`]), [`History`] and [`Version`], [`Status`],
//! [`FileDiff`], [`Blame`], [`Report`] (verify), [`Approval`]. Not here: anything that changes
//! the workspace — writes, restores, rewinds, retention, deciding approvals are the engine's.

pub mod approvals;
mod blame;
mod diff;
pub mod lines;
pub mod owner;
pub mod read;
mod verify;
mod workspace;

pub use approvals::{APPROVAL_REQUIRED, Approval, ApprovalState, approvals};
pub use blame::{Blame, BlameLine, Origin};
pub use diff::{FileDiff, FileStat, Limit, Rev, SHOWN_MAX, compare};
pub use owner::{LOCK_FILE, LockInfo};
pub use read::{Opened, RestoreTo, pick_version};
pub(crate) use verify::found_at;
pub use verify::{Drift, Found, Report, verify};
pub(crate) use workspace::open_root;
pub use workspace::{Availability, History, Options, POLICY_FILE, Status, Version, Workspace, is_unsafe_root};
