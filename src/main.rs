//! The `rwfs` binary: parse arguments, set up logging, run, map the outcome to an exit code.

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;
use rwfs::cli::{Cli, Command, Exit};

fn main() -> ExitCode {
    let cli = Cli::parse();
    // A daemon's stderr becomes its log file: colour only for a terminal that stays one.
    let detaches = matches!(&cli.command, Command::Mount(args) if args.daemon);
    init_tracing(std::io::stderr().is_terminal() && !detaches);
    match rwfs::cli::run(cli) {
        Ok(exit) => ExitCode::from(exit as u8),
        Err(e) => {
            rwfs::cli::emit_err(format_args!("rwfs: {}/{}: {e}\n", e.kind(), e.code()));
            ExitCode::from(Exit::Error as u8)
        }
    }
}

/// Logs go to stderr (a line that cannot be written is dropped and counted), filtered by `RWFS_LOG` (falling back to `RUST_LOG`, then `warn`), with
/// ANSI colours only when `ansi`.
///
/// fuser's own unmount when its session is dropped is always redundant here: rwfs detaches the
/// mount itself first (and reports its own failure), so fuser's second `umount` can only fail
/// with EINVAL; its warning (`fuser::mnt`) is kept to errors.
fn init_tracing(ansi: bool) {
    use tracing_subscriber::EnvFilter;
    let filter = std::env::var("RWFS_LOG")
        .ok()
        .or_else(|| std::env::var("RUST_LOG").ok())
        .and_then(|f| EnvFilter::try_new(format!("{f},fuser::mnt=error")).ok())
        .unwrap_or_else(|| EnvFilter::new("warn,fuser::mnt=error"));
    // A line that cannot be written is dropped and counted, never an error (`app/log.rs`).
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(rwfs::app::log::Log)
        .log_internal_errors(false)
        .init();
}
