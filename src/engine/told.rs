//! Which agent has been told of which refusal: the memory behind `rwfs hook`, the entry point an
//! agent harness runs after its tools (Claude Code's `PostToolUse`/`PostToolUseFailure`, Codex's
//! `PostToolUse`). Each refusal of a write through the mount is kept here with what matching
//! needs — the target file, the content's digest, the writer's lineage (it and its ancestors,
//! each by pid and start time), when it happened — and the [`Notice`] that explains it.
//!
//! The rule: a refusal is an agent's when the agent process (the harness, by pid and start
//! time) is the writer or one of its ancestors — its own write tools, and every command its
//! shell tool runs — or when it was a refusal of a file the tool named and happened after the
//! agent started (a writer the agent started but that left its tree: a daemonised helper). An
//! agent is told of each of its refusals once, however many hooks ask; attempts of the same
//! content on the same file (Claude Code's atomic write and its direct fallback) are one notice.
//!
//! In memory, bounded (the newest [`KEEP`] refusals, the newest [`AGENTS`] agents): a
//! daemon that restarts forgets whom it told, and a hook then reports only what happens next.
//! The state directory is read-only through the mount, so this memory could not live in the
//! workspace anyway. What it does not do: judge, store or journal anything (the gate does).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Mutex, PoisonError};

use crate::journal::session::Process;
use crate::notice::Notice;
use crate::sha::Sha256;

/// Refusals remembered.
const KEEP: usize = 1024;
/// Agents whose told refusals are remembered.
const AGENTS: usize = 256;

/// See the module documentation.
#[derive(Default)]
pub(crate) struct Told(Mutex<Inner>);

#[derive(Default)]
struct Inner {
    refusals: VecDeque<Refused>,
    next: u64,
    /// Agent (pid, start) → refusals it was told of, and when it last asked (for eviction).
    told: HashMap<(u32, u64), (HashSet<u64>, u64)>,
    asked: u64,
}

struct Refused {
    id: u64,
    /// Clock ticks after boot (the unit of a process's start time).
    at: u64,
    path: String,
    sha: Option<Sha256>,
    lineage: Vec<Process>,
    notice: Notice,
}

impl Told {
    /// Remember a refusal of `path` (content `sha`) written by the process `lineage[0]`.
    pub(crate) fn record(&self, path: &str, sha: Option<Sha256>, lineage: Vec<Process>, notice: Notice) {
        let at = crate::process::ticks_since_boot();
        let mut inner = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let id = inner.next;
        inner.next += 1;
        if inner.refusals.len() == KEEP {
            inner.refusals.pop_front();
        }
        inner.refusals.push_back(Refused { id, at, path: path.to_string(), sha, lineage, notice });
    }

    /// The refusals `agent` has not been told of (see the rule in the module docs), one notice
    /// per file and content, oldest first; they count as told from now on.
    pub(crate) fn untold(&self, agent: &Process, paths: &[String]) -> Vec<Notice> {
        let mut inner = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        inner.asked += 1;
        let asked = inner.asked;
        let key = (agent.pid, agent.start);
        if !inner.told.contains_key(&key) && inner.told.len() >= AGENTS {
            let oldest = inner.told.iter().min_by_key(|(_, (_, last))| *last).map(|(k, _)| *k);
            if let Some(oldest) = oldest {
                inner.told.remove(&oldest);
            }
        }
        let Inner { refusals, told, .. } = &mut *inner;
        let (told, last) = told.entry(key).or_default();
        *last = asked;
        let mut notices: Vec<(String, Option<Sha256>, Notice)> = Vec::new();
        for refused in refusals.iter() {
            let theirs = refused.lineage.iter().any(|p| p.is(agent))
                || (refused.at >= agent.start && paths.contains(&refused.path));
            if !theirs || !told.insert(refused.id) {
                continue;
            }
            match notices
                .iter_mut()
                .find(|(path, sha, _)| *path == refused.path && sha.is_some() && *sha == refused.sha)
            {
                // The same content again: the newest attempt's notice (its budget) stands.
                Some(seen) => seen.2 = refused.notice.clone(),
                None => notices.push((refused.path.clone(), refused.sha, refused.notice.clone())),
            }
        }
        notices.into_iter().map(|(_, _, notice)| notice).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn process(pid: u32, start: u64) -> Process {
        Process { pid, start, comm: format!("p{pid}") }
    }

    #[test]
    fn an_agent_is_told_of_its_own_refusals_once_and_of_another_agents_never() {
        let told = Told::default();
        let claude = process(100, 5);
        let other = process(200, 6);
        let sha = Some(Sha256::of(b"x"));
        // Its Write tool (the harness itself), and a command of its shell tool.
        told.record("a.py", sha, vec![claude.clone(), process(1, 1)], Notice::spent("a.py"));
        told.record("b.env", sha, vec![process(150, 9), claude.clone()], Notice::spent("b.env"));
        told.record("c.txt", sha, vec![other.clone()], Notice::spent("c.txt"));
        let paths: Vec<String> = told.untold(&claude, &[]).into_iter().map(|n| n.path).collect();
        assert_eq!(paths, ["a.py", "b.env"]);
        assert!(told.untold(&claude, &[]).is_empty(), "once each");
        assert_eq!(told.untold(&other, &[]).len(), 1);
        // A recycled pid is another process.
        told.record("d.py", sha, vec![process(100, 77)], Notice::spent("d.py"));
        assert!(told.untold(&claude, &[]).is_empty());
    }

    #[test]
    fn a_refusal_of_the_file_the_tool_named_is_the_agents_if_it_came_after_it_started() {
        let told = Told::default();
        let helper = process(300, 1);
        told.record("app/config.py", None, vec![helper], Notice::spent("app/config.py"));
        let old_agent = process(400, 0);
        let young_agent = process(401, u64::MAX);
        assert!(told.untold(&young_agent, &["app/config.py".into()]).is_empty(), "before it started");
        assert_eq!(told.untold(&old_agent, &["app/config.py".into()]).len(), 1);
        assert!(told.untold(&old_agent, &["other.py".into()]).is_empty());
    }

    #[test]
    fn attempts_of_the_same_content_are_one_notice() {
        let told = Told::default();
        let agent = process(10, 1);
        let sha = Some(Sha256::of(b"secret"));
        told.record("x.py", sha, vec![agent.clone()], Notice::spent("x.py"));
        told.record("x.py", sha, vec![agent.clone()], Notice::spent("x.py"));
        told.record("x.py", Some(Sha256::of(b"other")), vec![agent.clone()], Notice::spent("x.py"));
        assert_eq!(told.untold(&agent, &[]).len(), 2);
    }
}
