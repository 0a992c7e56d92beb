//! Which tool call of an agent a change answers: the open tool calls of agent harnesses, as
//! their hooks report them, and the prompt turn each harness is in.
//!
//! A harness with hooks (Claude Code's `PreToolUse`, `PostToolUse`, `UserPromptSubmit`) runs
//! `rwfs hook` around each tool call; the hook asks the daemon, which finds the harness as the
//! hook's nearest ancestor that is not a shell (`session::harness_of`) and records here:
//!
//! - a prompt: the harness's turn counter goes up (turn 1 is its first prompt), with the
//!   prompt's digest and a short label (`rwfs hook` keeps no more; see `cli/hook.rs`);
//! - a call's start: the call is open for that harness (pid and start time), under its id;
//! - a call's end: it is closed.
//!
//! The rule for a change made by process P through the mount, the CLI or MCP: walk P's lineage
//! (P, its parent, …); the first process that is a harness with an open call names the call —
//! the harness's own writes (its Write and Edit tools) and everything its shell tool runs. With
//! several calls open at once (a harness may run tools in parallel), the newest is named: rows
//! cannot tell two concurrent shell commands of one harness apart, and this says so rather than
//! guess better. The call's id is journaled as the row's `group`, the field for "the rows one
//! command made together": `rwfs rewind --tool-call ID` is a rewind of that group, indexed.
//!
//! In memory and bounded (at most `OPEN` open calls, `HARNESSES` harnesses' turns): a call
//! whose end never came is dropped when its harness is gone or when newer calls push it out. A
//! daemon that restarts forgets open calls; rows written meanwhile carry none. The journal's
//! `tool_call` rows (`Op::ToolCall`) keep what is known of each call for good.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use super::session::{Process, lineage};
use crate::sha::Sha256;

/// Open calls kept, at most (the oldest goes first).
const OPEN: usize = 256;
/// Harnesses whose turn is remembered, at most.
const HARNESSES: usize = 256;

/// See the module documentation.
#[derive(Default)]
pub struct ToolCalls(Mutex<Inner>);

#[derive(Default)]
struct Inner {
    /// Oldest first.
    open: Vec<(Process, String)>,
    turns: HashMap<(u32, u64), Turn>,
}

/// A harness's current prompt turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Turn {
    /// 1 for the harness's first prompt rwfs heard of.
    pub n: u64,
    pub prompt: Option<Sha256>,
    pub label: Option<String>,
}

impl ToolCalls {
    /// A new prompt of `harness`: its turn, counted from 1.
    pub fn prompt(&self, harness: &Process, prompt: Option<Sha256>, label: Option<String>) -> u64 {
        let mut inner = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let key = (harness.pid, harness.start);
        if !inner.turns.contains_key(&key) && inner.turns.len() >= HARNESSES {
            // Forget harnesses that are gone; failing that, one at random.
            inner.turns.retain(|(pid, start), _| Process::of(*pid).is_some_and(|p| p.start == *start));
            if inner.turns.len() >= HARNESSES
                && let Some(any) = inner.turns.keys().next().copied()
            {
                inner.turns.remove(&any);
            }
        }
        let n = inner.turns.get(&key).map_or(1, |t| t.n + 1);
        inner.turns.insert(key, Turn { n, prompt, label });
        n
    }

    /// The turn `harness` is in, if it reported a prompt.
    pub fn turn(&self, harness: &Process) -> Option<Turn> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).turns.get(&(harness.pid, harness.start)).cloned()
    }

    /// `harness` started the call `id`.
    pub fn start(&self, harness: Process, id: String) {
        let mut inner = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        inner.open.retain(|(h, open)| !(h.is(&harness) && *open == id));
        if inner.open.len() >= OPEN {
            inner.open.retain(|(h, _)| Process::of(h.pid).is_some_and(|p| p.is(h)));
            if inner.open.len() >= OPEN {
                inner.open.remove(0);
            }
        }
        inner.open.push((harness, id));
    }

    /// `harness`'s call `id` ended; `false` when it was not open.
    pub fn end(&self, harness: &Process, id: &str) -> bool {
        let mut inner = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let before = inner.open.len();
        inner.open.retain(|(h, open)| !(h.is(harness) && open == id));
        inner.open.len() != before
    }

    /// The open call a change by process `pid` answers (see the rule in the module docs).
    pub fn of_pid(&self, pid: u32) -> Option<String> {
        if self.0.lock().unwrap_or_else(PoisonError::into_inner).open.is_empty() {
            return None;
        }
        let lineage = lineage(pid);
        let inner = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        lineage.iter().find_map(|p| inner.open.iter().rev().find(|(h, _)| h.is(p)).map(|(_, id)| id.clone()))
    }
}

/// A tool call's id as journaled: the harness's id (`toolu_…`, `call_…`) kept to the characters
/// ids use, at most 128; `None` when nothing is left.
pub fn clean_id(id: &str) -> Option<String> {
    let id: String =
        id.chars().filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':')).take(128).collect();
    (!id.is_empty()).then_some(id)
}

/// The parts of a `tool_call` row's reason (`tool`, `turn`, `agent_session`, `label`).
pub fn reason_parts(reason: &str) -> Vec<(&str, &str)> {
    let (head, label) = match reason.split_once("label=") {
        Some((head, label)) => (head, Some(label)),
        None => (reason, None),
    };
    let mut parts: Vec<(&str, &str)> = head.split_whitespace().filter_map(|p| p.split_once('=')).collect();
    parts.extend(label.map(|l| ("label", l)));
    parts
}

/// The turn a `tool_call` row's reason names.
pub fn turn_of(reason: &str) -> Option<u64> {
    reason_parts(reason).into_iter().find(|(k, _)| *k == "turn").and_then(|(_, v)| v.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me() -> Process {
        Process::of(std::process::id()).unwrap()
    }

    #[test]
    fn a_change_by_the_harness_or_a_descendant_names_its_newest_open_call() {
        let calls = ToolCalls::default();
        let me = me();
        assert_eq!(calls.of_pid(me.pid), None, "no call open");
        // This test process stands for the harness; a child of it for its shell tool.
        calls.start(me.clone(), "toolu_1".into());
        calls.start(me.clone(), "toolu_2".into());
        assert_eq!(calls.of_pid(me.pid).as_deref(), Some("toolu_2"));
        let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
        assert_eq!(calls.of_pid(child.id()).as_deref(), Some("toolu_2"), "the harness's child");
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(calls.end(&me, "toolu_2"));
        assert!(!calls.end(&me, "toolu_2"), "ended once");
        assert_eq!(calls.of_pid(me.pid).as_deref(), Some("toolu_1"));
        assert!(calls.end(&me, "toolu_1"));
        assert_eq!(calls.of_pid(me.pid), None);
    }

    #[test]
    fn another_process_s_calls_do_not_name_this_one_s_changes() {
        let calls = ToolCalls::default();
        let other = Process { pid: std::process::id(), start: me().start + 1, comm: "claude".into() };
        calls.start(other, "toolu_x".into());
        assert_eq!(calls.of_pid(std::process::id()), None, "same pid, another start time");
    }

    #[test]
    fn turns_count_from_one_per_harness() {
        let calls = ToolCalls::default();
        let me = me();
        assert_eq!(calls.turn(&me), None);
        assert_eq!(calls.prompt(&me, None, Some("fix the test".into())), 1);
        assert_eq!(calls.prompt(&me, None, None), 2);
        assert_eq!(calls.turn(&me).map(|t| t.n), Some(2));
    }

    #[test]
    fn a_reason_reads_back_with_its_label_whole() {
        let reason = "tool=Bash turn=3 agent_session=abc label=fix a=b in the test";
        assert_eq!(
            reason_parts(reason),
            [("tool", "Bash"), ("turn", "3"), ("agent_session", "abc"), ("label", "fix a=b in the test")]
        );
        assert_eq!(turn_of(reason), Some(3));
        assert_eq!(turn_of("tool=Bash"), None);
    }

    #[test]
    fn ids_keep_the_characters_ids_use() {
        assert_eq!(clean_id("toolu_01AbC-9.x:y").as_deref(), Some("toolu_01AbC-9.x:y"));
        assert_eq!(clean_id("a b\nc;d").as_deref(), Some("abcd"));
        assert_eq!(clean_id("  "), None);
        assert_eq!(clean_id(&"x".repeat(500)).map(|s| s.len()), Some(128));
    }
}
