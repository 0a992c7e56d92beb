//! Which session a change belongs to: the name every row carries in `session`, so that a person
//! can ask for "what that agent run did" (`rwfs sessions`, `rwfs log --session`, `rwfs rewind
//! --session`).
//!
//! The rule, for a change made by process P (through the mount, or the CLI):
//!
//! 1. `RWFS_SESSION=name` in P's environment (`/proc/P/environ`, the environment P was started
//!    with, which its children inherit) names the session `name`;
//! 2. else the nearest ancestor of P (P included) whose process name is one of the policy's
//!    `session_hosts` (default [`DEFAULT_HOSTS`]: agent hosts such as `claude`, `codex`,
//!    `aider`) names it `<name>-<pid>`: everything an agent runs, through its shell tool too,
//!    is that agent's session;
//! 3. else P's POSIX session (`getsid`), named after its leader, `<leader name>-<sid>`: the
//!    terminal's shell session a person typed the commands in.
//!
//! Rules 1 and 2 name an **agent run** ([`Sessions::agent_of_pid`]): the harness process is
//! its root, so its shell children and its MCP server (which the harness launches as a child,
//! `rwfs mcp`) all belong to it. MCP changes carry that agent's session when the client's
//! process has one, else one session per MCP connection (set by `mcp/`); the engine's own rows
//! (recovery, retention) carry none. A process that is gone before it is looked at has no
//! session. Names are cached per process, keyed by pid and start time so that a recycled pid
//! is looked up again.
//!
//! `node` is not a default host: many tools run on it, and naming a session after every Node
//! program would cut one agent run into pieces or merge unrelated ones; add it to
//! `session_hosts` when the agent host is a bare `node`.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError, RwLock};

use crate::process::{Pinned, Stat, stat};

/// The environment variable that names a session explicitly.
pub const ENV: &str = "RWFS_SESSION";

/// Process names that host agents, by default (the policy's `session_hosts` replaces them).
pub const DEFAULT_HOSTS: &[&str] =
    &["claude", "codex", "cursor", "cursor-agent", "aider", "gemini", "goose", "opencode", "amp", "copilot", "cline"];

/// Longest session name kept (longer explicit names are cut).
const MAX_NAME: usize = 128;
/// Cached processes, each with a descriptor (bounded: cleared when it reaches this).
const MAX_CACHED: usize = 256;
/// Ancestors looked at, at most.
const MAX_DEPTH: usize = 64;

/// Names sessions and remembers the answer per process.
#[derive(Debug)]
pub struct Sessions {
    hosts: RwLock<Vec<String>>,
    cache: Mutex<HashMap<u32, Known>>,
}

/// A process named before, pinned (one cheap call tells it is still the same process), and
/// its session.
#[derive(Debug)]
struct Known {
    process: Pinned,
    named: Option<Named>,
}

/// A session name, and whether it names an agent run (rules 1 and 2) rather than a POSIX
/// session (rule 3).
#[derive(Debug, Clone)]
struct Named {
    name: String,
    agent: bool,
}

impl Default for Sessions {
    fn default() -> Sessions {
        Sessions { hosts: RwLock::new(DEFAULT_HOSTS.iter().map(|h| h.to_string()).collect()), cache: Mutex::default() }
    }
}

impl Sessions {
    /// Use these agent host names (the policy's `session_hosts`).
    pub fn set_hosts(&self, hosts: Vec<String>) {
        *self.hosts.write().unwrap_or_else(PoisonError::into_inner) = hosts;
        self.cache.lock().unwrap_or_else(PoisonError::into_inner).clear();
    }

    /// The session of process `pid` (see the module docs), `None` when it is gone.
    pub fn of_pid(&self, pid: u32) -> Option<String> {
        self.named(pid).map(|n| n.name)
    }

    /// The agent run process `pid` belongs to (rules 1 and 2 of the module docs): `None` when
    /// neither names one (then its session is its POSIX session) or the process is gone.
    pub fn agent_of_pid(&self, pid: u32) -> Option<String> {
        self.named(pid).filter(|n| n.agent).map(|n| n.name)
    }

    fn named(&self, pid: u32) -> Option<Named> {
        {
            let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(known) = cache.get(&pid) {
                if known.process.is_alive() {
                    return known.named.clone();
                }
                cache.remove(&pid);
            }
        }
        let process = Pinned::open(pid)?;
        let named = {
            let hosts = self.hosts.read().unwrap_or_else(PoisonError::into_inner);
            resolve(pid, &hosts)
        };
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        if cache.len() >= MAX_CACHED {
            cache.clear();
        }
        cache.insert(pid, Known { process, named: named.clone() });
        named
    }
}

fn resolve(pid: u32, hosts: &[String]) -> Option<Named> {
    if let Some(name) = explicit(pid) {
        return Some(Named { name, agent: true });
    }
    let mut at = pid;
    for _ in 0..MAX_DEPTH {
        let Some(Stat { comm, parent: ppid, .. }) = stat(at) else { break };
        if hosts.contains(&comm) {
            return Some(Named { name: format!("{comm}-{at}"), agent: true });
        }
        if ppid <= 1 {
            break;
        }
        at = ppid;
    }
    let sid = nix::unistd::getsid(Some(nix::unistd::Pid::from_raw(i32::try_from(pid).ok()?))).ok()?.as_raw();
    let leader = u32::try_from(sid).ok().and_then(|s| stat(s).map(|s| s.comm));
    Some(Named { name: format!("{}-{sid}", leader.as_deref().unwrap_or("session")), agent: false })
}

/// `RWFS_SESSION` in the environment `pid` was started with.
fn explicit(pid: u32) -> Option<String> {
    let value = crate::process::env_var(pid, ENV)?;
    let name: String =
        String::from_utf8_lossy(&value).chars().filter(|c| !c.is_control()).take(MAX_NAME).collect::<String>();
    let name = name.trim().to_string();
    (!name.is_empty()).then_some(name)
}

/// One process, as a refusal's writer and its ancestors are recorded and an agent is matched:
/// its pid and start time (clock ticks after boot, so that a recycled pid is another process),
/// and its name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Process {
    pub pid: u32,
    pub start: u64,
    pub comm: String,
}

impl Process {
    /// Process `pid` now, if it exists.
    pub fn of(pid: u32) -> Option<Process> {
        stat(pid).map(|s| Process { pid, start: s.start, comm: s.comm })
    }

    /// Is `self` the same process as `other` (pid and start time)?
    pub fn is(&self, other: &Process) -> bool {
        self.pid == other.pid && self.start == other.start
    }
}

/// Process `pid` and its ancestors, nearest first (at most 64, init left out); empty when it
/// is gone.
pub fn lineage(pid: u32) -> Vec<Process> {
    let mut out = Vec::new();
    let mut at = pid;
    for _ in 0..MAX_DEPTH {
        let Some(Stat { comm, parent: ppid, start }) = stat(at) else { break };
        out.push(Process { pid: at, start, comm });
        if ppid <= 1 {
            break;
        }
        at = ppid;
    }
    out
}

/// Programs that run a command for another (shells, launchers): a hook's harness is its nearest
/// ancestor that is none of these.
const LAUNCHERS: &[&str] =
    &["sh", "bash", "dash", "zsh", "ksh", "mksh", "fish", "env", "timeout", "nice", "nohup", "rwfs"];

/// The agent harness a hook runs for: the hook's (`lineage[0]`) nearest ancestor that is not a
/// shell or a launcher — a harness runs its hook commands itself or through `sh -c`.
pub fn harness_of(lineage: &[Process]) -> Option<&Process> {
    lineage.iter().skip(1).find(|p| !LAUNCHERS.contains(&p.comm.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_a_session_and_the_answer_is_cached() {
        let sessions = Sessions::default();
        let me = std::process::id();
        let first = sessions.of_pid(me);
        assert!(first.is_some());
        assert_eq!(sessions.of_pid(me), first);
        assert_eq!(sessions.of_pid(u32::MAX), None, "no such process");
    }

    #[test]
    fn a_lineage_starts_with_the_process_and_climbs_to_its_parents() {
        let me = std::process::id();
        let mine = lineage(me);
        assert_eq!(mine[0].pid, me);
        assert!(mine[0].is(&Process::of(me).unwrap()));
        assert_eq!(mine.get(1).map(|p| p.pid), Some(std::os::unix::process::parent_id()).filter(|p| *p > 1));
        assert!(lineage(u32::MAX).is_empty());
    }

    #[test]
    fn an_agent_host_among_the_ancestors_names_the_session() {
        let me = std::process::id();
        let comm = stat(me).unwrap().comm;
        let sessions = Sessions::default();
        sessions.set_hosts(vec![comm.clone()]);
        if explicit(me).is_none() {
            assert_eq!(sessions.of_pid(me), Some(format!("{comm}-{me}")));
            assert_eq!(sessions.agent_of_pid(me), Some(format!("{comm}-{me}")));
            // Without a host among the ancestors, the POSIX session names it, and no agent.
            sessions.set_hosts(vec![]);
            assert!(sessions.of_pid(me).is_some());
            assert_eq!(sessions.agent_of_pid(me), None);
        }
    }
}
