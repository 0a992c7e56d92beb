//! How the text output reads to a person: counts with their noun in the right number ("1
//! version", "2 versions"), sizes in binary units ("2.7 GiB"), the width of the TIME column
//! (a row's timestamp, to the microsecond), and colour — only on a terminal, never with
//! `NO_COLOR` set, or as `--color` says. `--json` output never goes through here: it keeps
//! exact numbers and no escape codes.

use std::cell::Cell;
use std::io::IsTerminal;

use anstyle::{AnsiColor, Style};

/// The TIME column's width: `2026-11-24T10:02:11.123456Z`.
pub const TIME_WIDTH: usize = 27;

/// `n` and its noun: `1 version`, `0 versions`.
pub fn count(n: impl Into<u64>, one: &str, many: &str) -> String {
    let n = n.into();
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A size for a person: `512 B`, `1.5 KiB`, `2.7 GiB`.
pub fn size(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 { format!("{bytes} B") } else { format!("{value:.1} {}", UNITS[unit]) }
}

/// When to colour: `--color`'s choice, set once by `run`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum When {
    Auto,
    Always,
    Never,
}

std::thread_local! {
    /// `--color` of the command this thread runs (a daemon answers read-only commands on its
    /// connection's thread, each with its own).
    static WHEN: Cell<When> = const { Cell::new(When::Auto) };
}

/// Record `--color` for the command this thread runs.
pub fn colour_when(when: When) {
    WHEN.with(|w| w.set(when));
}

/// Does this process colour its standard output? `auto`: a terminal, and `NO_COLOR` unset or
/// empty (no-color.org).
pub fn colours() -> bool {
    match WHEN.with(Cell::get) {
        When::Always => true,
        When::Never => false,
        When::Auto => std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && std::io::stdout().is_terminal(),
    }
}

/// `text` (already padded) in the colour of journal operation `op`.
pub fn op(text: &str, op: &str) -> String {
    let colour = match op {
        "block" => AnsiColor::Red,
        "create" => AnsiColor::Green,
        "delete" => AnsiColor::Yellow,
        "restore" | "rewind" => AnsiColor::Magenta,
        _ => return text.to_string(),
    };
    paint(text, Style::new().fg_color(Some(colour.into())))
}

/// One line of a unified diff, coloured as git colours it.
pub fn diff_line(line: &str) -> String {
    let style = if line.starts_with("+++") || line.starts_with("---") {
        Style::new().bold()
    } else if line.starts_with('+') {
        Style::new().fg_color(Some(AnsiColor::Green.into()))
    } else if line.starts_with('-') {
        Style::new().fg_color(Some(AnsiColor::Red.into()))
    } else if line.starts_with("@@") {
        Style::new().fg_color(Some(AnsiColor::Cyan.into()))
    } else {
        return line.to_string();
    };
    paint(line, style)
}

fn paint(text: &str, style: Style) -> String {
    if colours() { format!("{style}{text}{style:#}") } else { text.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_sizes_read_as_a_person_says_them() {
        assert_eq!(count(1u64, "version", "versions"), "1 version");
        assert_eq!(count(0u64, "version", "versions"), "0 versions");
        assert_eq!(size(0), "0 B");
        assert_eq!(size(1023), "1023 B");
        assert_eq!(size(1536), "1.5 KiB");
        assert_eq!(size(2_891_062_476), "2.7 GiB");
        assert_eq!(size(10 << 30), "10.0 GiB");
    }
}
