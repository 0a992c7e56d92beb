//! An agent's tool calls and prompt turns, as its harness's hooks report them (`rwfs hook`):
//! kept open in the journal's registry (`journal::tool_calls`, whose rule names the `group` of
//! the rows written while a call runs) and journaled as a `tool_call` row at each call's start.
//!
//! What is kept of a prompt: its digest and a label of its first words, dropped whole when the
//! scanner finds anything in it (a credential pasted into a prompt never reaches the journal).
//! Nothing here judges or blocks a write.

use crate::error::{Reason, Result};
use crate::journal::session::Process;
use crate::journal::tool_calls::clean_id;
use crate::journal::{Actor, Change, Op};
use crate::sha::Sha256;

use super::Engine;

/// Words of a prompt kept in its label.
const LABEL_WORDS: usize = 8;
/// Characters of a label, at most.
const LABEL_CHARS: usize = 80;

/// What a harness's hook reports.
#[derive(Debug, Clone)]
pub enum HookEvent {
    /// A prompt was submitted: a new turn.
    Prompt { text: String },
    /// A tool call starts: `id` as the harness names it, `tool` its tool, `agent_session` the
    /// harness's own session id.
    Start { id: String, tool: String, agent_session: Option<String> },
    /// A tool call ended (failed or not).
    End { id: String },
}

/// What came of a [`HookEvent`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookOutcome {
    /// The turn a prompt began.
    Turn(u64),
    /// The call's id as journaled, and the seq of its `tool_call` row.
    Started { id: String, seq: u64 },
    /// Whether the call was open.
    Ended(bool),
}

impl Engine {
    /// Record `event` of the agent harness `harness` (see the module docs); `actor` is the hook.
    pub fn hook_event(&self, harness: &Process, event: HookEvent, actor: &Actor) -> Result<HookOutcome> {
        let calls = self.core.journal.tool_calls();
        match event {
            HookEvent::Prompt { text } => {
                let label = label(&text).filter(|l| !self.core.gate.finds_anything(l.as_bytes()));
                Ok(HookOutcome::Turn(calls.prompt(harness, Some(Sha256::of(text.as_bytes())), label)))
            }
            HookEvent::Start { id, tool, agent_session } => {
                let id = clean_id(&id).ok_or(Reason::InvalidArgument { what: "tool call: its id (tool_use_id)" })?;
                calls.start(harness.clone(), id.clone());
                let turn = calls.turn(harness);
                let mut reason = vec![format!("tool={}", word(&tool))];
                if let Some(turn) = &turn {
                    reason.push(format!("turn={}", turn.n));
                }
                if let Some(session) = agent_session.as_deref().map(word).filter(|s| !s.is_empty()) {
                    reason.push(format!("agent_session={session}"));
                }
                if let Some(label) = turn.as_ref().and_then(|t| t.label.as_deref()) {
                    reason.push(format!("label={label}"));
                }
                let change = Change {
                    op: Op::ToolCall,
                    path: ".".into(),
                    from: None,
                    sha256: turn.and_then(|t| t.prompt),
                    prev_sha256: None,
                    bytes: 0,
                    mode: "start".into(),
                    actor: Actor { tool_call: Some(id.clone()), caller: harness.comm.clone(), ..actor.clone() },
                    verdict: None,
                    reason: Some(reason.join(" ")),
                };
                let seq = self.core.journal.append(change)?.seq;
                Ok(HookOutcome::Started { id, seq })
            }
            HookEvent::End { id } => Ok(HookOutcome::Ended(clean_id(&id).is_some_and(|id| calls.end(harness, &id)))),
        }
    }

    /// The open tool call a change by process `pid` answers (`journal::tool_calls`).
    pub fn tool_call_of_pid(&self, pid: u32) -> Option<String> {
        self.core.journal.tool_calls().of_pid(pid)
    }
}

/// A prompt's label: its first words, control characters out, at most [`LABEL_CHARS`].
fn label(prompt: &str) -> Option<String> {
    let words: Vec<&str> = prompt.split_whitespace().take(LABEL_WORDS).collect();
    let mut label: String = words.join(" ").chars().filter(|c| !c.is_control()).take(LABEL_CHARS).collect();
    if prompt.split_whitespace().count() > LABEL_WORDS || label.chars().count() == LABEL_CHARS {
        label.push('…');
    }
    (!label.is_empty()).then_some(label)
}

/// A name as one word of a `tool_call` row's reason.
fn word(name: &str) -> String {
    name.chars().filter(|c| c.is_ascii_graphic() && *c != '=').take(64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_is_the_first_words_of_the_prompt() {
        assert_eq!(label("  fix the\nfailing test  ").as_deref(), Some("fix the failing test"));
        assert_eq!(
            label("one two three four five six seven eight nine").as_deref(),
            Some("one two three four five six seven eight…")
        );
        assert_eq!(label(" \n "), None);
    }

    #[test]
    fn a_reason_word_is_one_word() {
        assert_eq!(word("Ba sh=x\n"), "Bashx");
    }
}
