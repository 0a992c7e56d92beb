//! Wiring for the `rwfs` binary's long-running parts: the mount daemon (`daemon.rs`: start and
//! stop order, signals, detaching) and its control socket (`control.rs`: how the CLI reaches
//! the engine of a mounted workspace).

pub mod control;
pub mod daemon;
