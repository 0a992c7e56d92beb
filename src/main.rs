//! The `rwfs` binary: parse arguments, set up logging, run, map the outcome to an exit code.

use std::process::ExitCode;

use clap::Parser;
use rwfs::cli::{Cli, Exit};

fn main() -> ExitCode {
    init_tracing();
    let cli = Cli::parse();
    match rwfs::cli::run(cli) {
        Ok(exit) => ExitCode::from(exit as u8),
        Err(e) => {
            eprintln!("rwfs: {}/{}: {e}", e.kind(), e.code());
            ExitCode::from(Exit::Error as u8)
        }
    }
}

/// Logs go to stderr, filtered by `RWFS_LOG` (falling back to `RUST_LOG`, then `warn`).
fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    let filter = std::env::var("RWFS_LOG")
        .ok()
        .or_else(|| std::env::var("RUST_LOG").ok())
        .and_then(|f| EnvFilter::try_new(f).ok())
        .unwrap_or_else(|| EnvFilter::new("warn"));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
}
