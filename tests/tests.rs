//! The one integration test binary (docs/architecture.md, Testing): every module drives rwfs through its public
//! API or the `rwfs` binary.

mod support;

mod commit;
mod concurrency;
mod crash;
mod faults;
mod journal;
mod journal_index;
mod model;
mod vfs;

mod agents;
mod approve;
mod bad_state;
mod cli;
mod encryption;
mod full_disk;
mod fuzz;
mod gate;
mod history;
mod hostile_paths;
mod inside;
mod layout;
mod mcp;
mod mount;
mod mount_helper;
mod policy;
mod posix;
mod programs;
mod protect;
mod read_guard;
mod retention;
mod scan;
mod sessions;
mod side_doors;
mod sparse;
mod state_layout;
mod tool_calls;
mod ui;
mod watch;
