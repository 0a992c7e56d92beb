//! `rwfs hook` and `rwfs hooks`: how a refusal reaches an agent harness's model.
//!
//! `rwfs hook` is the entry point a harness runs around its tools and prompts. It reads the
//! harness's hook JSON on stdin (`hook_event_name`, `session_id`, `tool_name`, `tool_use_id`,
//! `tool_input` with `file_path` or a shell `command` holding an `apply_patch` envelope,
//! `prompt`, `cwd`), finds the workspace (`-w`, else the nearest directory above `cwd` or a
//! named file whose state directory links the daemon's socket), and tells the daemon, by event:
//!
//! - `UserPromptSubmit` (Claude Code): a new prompt turn (`Request::ToolEvent` `prompt`; the
//!   daemon keeps the prompt's digest and a label of its first words, see
//!   `engine/tool_call.rs`); prints `{}`;
//! - `PreToolUse` (Claude Code): the tool call starts (`start`, with `tool_use_id`): the rows
//!   written while it runs, by the harness or anything it spawned, carry its id as their
//!   `group`; prints `{}`;
//! - `PostToolUse`, `PostToolUseFailure` (Claude Code; Codex's `PostToolUse`): the call ends
//!   (`end`), then the daemon is asked for the refusals the hook's agent has not been told of
//!   (`Request::Untold`: it matches the writer's lineage against the hook's harness, and the
//!   tool's paths), and the harness's output is printed: `{"hookSpecificOutput":
//!   {"hookEventName": …, "additionalContext": …}}`, or `{}` when there is nothing to say.
//!
//! It never fails the harness's tool call: bad input, no workspace, no daemon (nothing was
//! refused through a mount then), a daemon that does not answer within [`DAEMON_WAIT`] — each
//! prints `{}` and exits 0.
//!
//! `rwfs hooks --for AGENT` prints (or with `--install`, merges into the harness's file) the
//! configuration that runs `rwfs hook`: Claude Code's `settings.json` `hooks`, Codex's
//! `hooks.json`; for aider, which has no hooks, what reaches its model instead.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use super::{Agent, HookArgs, HooksArgs, emit, errln};
use crate::app::control::{self, Request};
use crate::durable::STATE_DIR;
use crate::error::{Error, IoContext, Reason, Result};

/// How long the hook waits for the daemon before it answers `{}`.
const DAEMON_WAIT: Duration = Duration::from_secs(5);
/// The most hook input read.
const MAX_INPUT: u64 = 4 << 20;
/// Claude Code's tools that write files, and its shell tool.
const CLAUDE_TOOLS: &str = "Write|Edit|MultiEdit|NotebookEdit|Bash";

/// `rwfs hook`: see the module documentation. Always exits 0.
pub fn hook(workspace: Option<&Path>, args: &HookArgs) {
    let mut input = Vec::new();
    let _ = std::io::stdin().take(MAX_INPUT).read_to_end(&mut input);
    let input: Value = serde_json::from_slice(&input).unwrap_or(Value::Null);
    let event = input.get("hook_event_name").and_then(Value::as_str).unwrap_or("PostToolUse");
    // Found once: the tool event and the refusals are asked of the same daemon.
    let root = workspace_of(workspace, &input);
    if let Some(request) = tool_event(event, &input) {
        if let Ok(root) = &root
            && let Err(e) = control::call_within(root, request, &[], Some(DAEMON_WAIT))
        {
            tracing::debug!(error = %e, event, "rwfs hook: the tool event was not recorded");
        }
        if matches!(event, "UserPromptSubmit" | "PreToolUse") {
            if !args.text {
                emit(format_args!("{{}}\n"));
            }
            return;
        }
    }
    let texts = match root.and_then(|root| untold(&root, &input)) {
        Ok(texts) => texts,
        Err(e) => {
            tracing::debug!(error = %e, "rwfs hook: nothing to report");
            Vec::new()
        }
    };
    if args.text {
        for text in &texts {
            emit(format_args!("{text}\n"));
        }
        return;
    }
    emit(format_args!("{}\n", output(&input, &texts)));
}

/// The harness's answer: the notices as additional context of the event that ran the hook.
fn output(input: &Value, texts: &[String]) -> Value {
    if texts.is_empty() {
        return json!({});
    }
    let event = input.get("hook_event_name").and_then(Value::as_str).unwrap_or("PostToolUse");
    json!({"hookSpecificOutput": {"hookEventName": event, "additionalContext": texts.join("\n\n")}})
}

/// What the daemon is told of `event` (see the module docs); `None` for an event that is not
/// about a prompt or a tool call, or one without what it needs (a call without its id).
fn tool_event(event: &str, input: &Value) -> Option<Request> {
    let text = |key: &str| input.get(key).and_then(Value::as_str).map(str::to_string);
    let (event, id) = match event {
        "UserPromptSubmit" => ("prompt", None),
        "PreToolUse" => ("start", Some(text("tool_use_id")?)),
        "PostToolUse" | "PostToolUseFailure" => ("end", Some(text("tool_use_id")?)),
        _ => return None,
    };
    Some(Request::ToolEvent {
        event: event.to_string(),
        id,
        tool: text("tool_name"),
        agent_session: text("session_id"),
        prompt: text("prompt"),
    })
}

/// The workspace a hook is about: `-w`, else the served one above the hook's `cwd`, a file its
/// tool names, or the current directory.
fn workspace_of(workspace: Option<&Path>, input: &Value) -> Result<PathBuf> {
    if let Some(root) = workspace {
        return Ok(root.to_path_buf());
    }
    let cwd = input.get("cwd").and_then(Value::as_str).map(PathBuf::from);
    let mut starts: Vec<PathBuf> = cwd.into_iter().collect();
    starts.extend(named_paths(input).iter().map(PathBuf::from));
    starts.extend(std::env::current_dir().ok());
    starts.iter().find_map(|start| served_root(start)).ok_or_else(|| Reason::NotMounted.into())
}

/// The texts of the refusals this hook's agent has not been told of.
fn untold(root: &Path, input: &Value) -> Result<Vec<String>> {
    let named = named_paths(input);
    let cwd = input.get("cwd").and_then(Value::as_str).map(PathBuf::from);
    let paths: Vec<String> = named
        .iter()
        .filter_map(|p| relative(root, &cwd.as_deref().map_or_else(|| PathBuf::from(p), |c| c.join(p))))
        .collect();
    let answer = control::call_within(root, Request::Untold { paths }, &[], Some(DAEMON_WAIT))?;
    Ok(answer["notices"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| n["text"].as_str().map(str::to_string))
        .collect())
}

/// The files a tool call names: `file_path`/`notebook_path`/`path` of a write tool, and the
/// files of an `apply_patch` envelope anywhere in its input (Codex applies patches through its
/// shell tool: `*** Update File: PATH`).
fn named_paths(input: &Value) -> Vec<String> {
    let tool = input.get("tool_input").unwrap_or(&Value::Null);
    let mut paths: Vec<String> = ["file_path", "notebook_path", "path"]
        .iter()
        .filter_map(|k| tool.get(*k).and_then(Value::as_str).map(str::to_string))
        .collect();
    let mut strings = Vec::new();
    collect_strings(tool, &mut strings);
    for text in strings {
        for line in text.lines() {
            let line = line.trim();
            for marker in ["*** Update File: ", "*** Add File: ", "*** Delete File: ", "*** Move to: "] {
                if let Some(path) = line.strip_prefix(marker) {
                    paths.push(path.trim().to_string());
                }
            }
        }
    }
    paths.dedup();
    paths
}

fn collect_strings<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
    match value {
        Value::String(s) => out.push(s),
        Value::Array(items) => items.iter().for_each(|v| collect_strings(v, out)),
        Value::Object(map) => map.values().for_each(|v| collect_strings(v, out)),
        _ => {}
    }
}

/// The nearest directory at or above `start` whose state directory links a daemon's socket.
fn served_root(start: &Path) -> Option<PathBuf> {
    start.ancestors().find(|dir| dir.join(STATE_DIR).join(control::SOCKET_LINK).is_symlink()).map(Path::to_path_buf)
}

/// `path` (absolute) as a workspace path of `root`, if it is inside.
fn relative(root: &Path, path: &Path) -> Option<String> {
    let inside: PathBuf = match path.strip_prefix(root) {
        Ok(rest) => rest.to_path_buf(),
        Err(_) => {
            let canonical_root = std::fs::canonicalize(root).ok()?;
            let parent = std::fs::canonicalize(path.parent()?).ok()?;
            parent.strip_prefix(&canonical_root).ok()?.join(path.file_name()?)
        }
    };
    let text = inside.to_str()?.trim_start_matches('/');
    (!text.is_empty()).then(|| text.to_string())
}

/// `rwfs hooks --for AGENT [--install [--file FILE]]`.
pub fn hooks(root: &Path, args: &HooksArgs) -> Result<()> {
    let command = hook_command();
    let config = match args.agent {
        Agent::Claude => claude_settings(&command),
        Agent::Codex => codex_hooks(&command),
        Agent::Aider => {
            emit(format_args!("{}", AIDER));
            return Ok(());
        }
        Agent::Cursor | Agent::Copilot | Agent::Generic => {
            return Err(Reason::InvalidArgument {
                what: "--for: rwfs hooks knows claude (settings.json hooks), codex (hooks.json) and aider (no hooks: what reaches its model)",
            }
            .into());
        }
    };
    if !args.install {
        emit(format_args!("{}\n", serde_json::to_string_pretty(&config).expect("JSON serializes")));
        return Ok(());
    }
    let file = match (&args.file, args.agent) {
        (Some(file), _) => file.clone(),
        (None, Agent::Claude) => root.join(".claude/settings.json"),
        (None, _) => codex_home().join("hooks.json"),
    };
    install(&file, &config)?;
    errln!("rwfs: {} now runs `{command}` at its tool calls ({})", file.display(), args.agent.name());
    Ok(())
}

/// The shell command that runs this binary's `rwfs hook`.
fn hook_command() -> String {
    let exe = std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_else(|_| "rwfs".into());
    let quoted = if exe.bytes().all(|b| b.is_ascii_alphanumeric() || b"/._-+".contains(&b)) {
        exe
    } else {
        format!("'{}'", exe.replace('\'', "'\\''"))
    };
    format!("{quoted} hook")
}

/// Claude Code's `settings.json` hooks: before and after its write tools and its shell tool,
/// failed or not (`PostToolUse` on Bash catches a refusal whose command still exited 0), and at
/// each prompt (its turn).
fn claude_settings(command: &str) -> Value {
    let group = json!([{"matcher": CLAUDE_TOOLS, "hooks": [{"type": "command", "command": command, "timeout": 10}]}]);
    let prompt = json!([{"hooks": [{"type": "command", "command": command, "timeout": 10}]}]);
    json!({"hooks": {"UserPromptSubmit": prompt, "PreToolUse": group, "PostToolUse": group, "PostToolUseFailure": group}})
}

/// Codex's `hooks.json` (`$CODEX_HOME/hooks.json`): after its shell tool, the one its
/// `PostToolUse` fires for (it applies patches through it).
fn codex_hooks(command: &str) -> Value {
    json!({"hooks": {"PostToolUse": [{"hooks": [{"type": "command", "command": command, "timeout": 10}]}]}})
}

fn codex_home() -> PathBuf {
    match std::env::var_os("CODEX_HOME").filter(|h| !h.is_empty()) {
        Some(home) => PathBuf::from(home),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".codex"),
    }
}

/// Merge `config`'s hook groups into the JSON file `file` (created if missing), leaving every
/// other key and hook as it is; a group that already runs `rwfs hook` is replaced, not doubled.
fn install(file: &Path, config: &Value) -> Result<()> {
    let at = || file.display().to_string();
    let mut current: Value = match std::fs::read(file) {
        Ok(bytes) if bytes.iter().all(u8::is_ascii_whitespace) => json!({}),
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|_| {
            Error::from(Reason::InvalidArgument { what: "hook settings: the file is not JSON; fix or move it first" })
                .at(at())
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => json!({}),
        Err(e) => return Err(Error::io("read hook settings", e).at(at())),
    };
    let Some(root) = current.as_object_mut() else {
        return Err(Error::from(Reason::InvalidArgument { what: "hook settings: not a JSON object" }).at(at()));
    };
    let hooks = root.entry("hooks").or_insert_with(|| json!({}));
    let Some(hooks) = hooks.as_object_mut() else {
        return Err(Error::from(Reason::InvalidArgument { what: "hook settings: `hooks` is not an object" }).at(at()));
    };
    for (event, groups) in config["hooks"].as_object().into_iter().flatten() {
        let list = hooks.entry(event.clone()).or_insert_with(|| json!([]));
        let Some(list) = list.as_array_mut() else {
            return Err(Error::from(Reason::InvalidArgument {
                what: "hook settings: an event's hooks are not a list",
            })
            .at(at()));
        };
        list.retain(|group| !runs_rwfs_hook(group));
        list.extend(groups.as_array().into_iter().flatten().cloned());
    }
    if let Some(dir) = file.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).step("create the settings directory")?;
    }
    let text = serde_json::to_string_pretty(&current).expect("JSON serializes") + "\n";
    std::fs::write(file, text).map_err(|e| Error::io("write hook settings", e).at(at()))
}

/// Does this hook group run `rwfs hook`?
fn runs_rwfs_hook(group: &Value) -> bool {
    group["hooks"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|h| h["command"].as_str().is_some_and(|c| c.ends_with(" hook") && c.contains("rwfs")))
}

/// What `rwfs hooks --for aider` says.
const AIDER: &str = "\
aider has no hooks. What reaches its model about a refused write:
- nothing from the write itself: aider retries a failed write 5 times and tells only the human
  (its terminal, where rwfs's one-line reason also goes when the mount tells writers why);
- the instructions file you load with `--read CONVENTIONS.md` (write it with
  `rwfs agent-rules --for aider > CONVENTIONS.md`): it names the failure texts and says to
  check `rwfs log` / `.resilient_write/rejections/latest.json`;
- the output of commands aider runs for the model (`/run`, `--test-cmd`, `--lint-cmd`): a
  refused write inside them prints rwfs's line on their stderr, which aider shows the model.
";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_come_from_write_tools_and_from_patches_in_shell_commands() {
        let claude = json!({"tool_name": "Write", "tool_input": {"file_path": "/w/app/config.py", "content": "x"}});
        assert_eq!(named_paths(&claude), ["/w/app/config.py"]);
        let codex = json!({"tool_name": "Bash", "tool_input": {"command": ["bash", "-lc",
            "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: app/config.py\n@@\n-a\n+b\n*** Add File: new.py\n+x\n*** End Patch\nEOF"]}});
        assert_eq!(named_paths(&codex), ["app/config.py", "new.py"]);
        assert!(named_paths(&json!({"tool_input": {"command": "ls"}})).is_empty());
    }

    #[test]
    fn the_output_is_the_events_additional_context_or_nothing() {
        let input = json!({"hook_event_name": "PostToolUseFailure"});
        assert_eq!(output(&input, &[]), json!({}));
        let out = output(&input, &["a".into(), "b".into()]);
        assert_eq!(out["hookSpecificOutput"]["hookEventName"], "PostToolUseFailure");
        assert_eq!(out["hookSpecificOutput"]["additionalContext"], "a\n\nb");
    }

    #[test]
    fn install_merges_and_never_doubles() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("sub/settings.json");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, r#"{"model": "x", "hooks": {"PostToolUse": [{"matcher": "Read", "hooks": [{"type": "command", "command": "lint"}]}]}}"#).unwrap();
        let config = claude_settings("/usr/bin/rwfs hook");
        install(&file, &config).unwrap();
        install(&file, &config).unwrap();
        let merged: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        assert_eq!(merged["model"], "x");
        assert_eq!(merged["hooks"]["PostToolUse"].as_array().unwrap().len(), 2, "{merged}");
        assert_eq!(merged["hooks"]["PostToolUseFailure"].as_array().unwrap().len(), 1);
        std::fs::write(&file, "not json").unwrap();
        assert!(install(&file, &config).is_err(), "a broken file is left alone");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "not json");
    }
}
