//! Wiring for the `rwfs` binary's long-running parts: the mount daemon (`daemon.rs`: start and
//! stop order, signals, detaching) and its control socket (`control.rs`: how the CLI reaches
//! the engine of a mounted workspace, and MCP sessions reach it), and `rwfs mcp` (`mcp.rs`:
//! relay to the owner of the workspace, or own it), and `rwfs ui` (`ui.rs`: the time-travel page's
//! HTTP routes, answered by the journal's and the engine's questions).

pub mod control;
pub mod daemon;
pub mod log;
pub mod mcp;
pub mod ui;
