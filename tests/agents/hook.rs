//! `rwfs hook` without a harness: a small Python program plays one (it runs tools as children,
//! then its hook through `sh -c`, as Claude Code and Codex do), so the matching rule is tested
//! exactly — every refusal of the agent's tree, the silent ones included, once each; another
//! agent's never; a file the tool named, written by a process outside its tree — and the
//! hook's answer when there is no daemon or no sense in its input.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::support::mount::{Mounted, rwfs};
use crate::support::{Ws, aws_secret_line};

/// A pretend harness: for each line of stdin, a JSON command — `{"run": [argv]}` runs a tool
/// child, `{"hook": INPUT}` runs `rwfs hook` through `sh -c` with INPUT on stdin and prints its
/// stdout as one line.
const HARNESS: &str = r#"
import json, subprocess, sys
rwfs = sys.argv[1]
for line in sys.stdin:
    cmd = json.loads(line)
    if "run" in cmd:
        subprocess.run(cmd["run"], cwd=cmd.get("cwd"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        print("ran", flush=True)
    else:
        out = subprocess.run(["sh", "-c", f"'{rwfs}' hook"], input=json.dumps(cmd["hook"]), capture_output=True, text=True)
        print(json.dumps({"code": out.returncode, "stdout": out.stdout}), flush=True)
"#;

struct Harness {
    child: std::process::Child,
    out: std::io::BufReader<std::process::ChildStdout>,
}

impl Harness {
    fn start(m: &Mounted) -> Harness {
        let mut child = Command::new("python3")
            .args(["-c", HARNESS, env!("CARGO_BIN_EXE_rwfs")])
            .env("LEAK", aws_secret_line(81).trim_end())
            .current_dir(m.mountpoint())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let out = std::io::BufReader::new(child.stdout.take().unwrap());
        Harness { child, out }
    }

    fn say(&mut self, command: Value) -> String {
        use std::io::BufRead;
        writeln!(self.child.stdin.as_mut().unwrap(), "{command}").unwrap();
        let mut line = String::new();
        self.out.read_line(&mut line).unwrap();
        line
    }

    fn tool(&mut self, m: &Mounted, script: &str) {
        let ran = self.say(json!({"run": ["bash", "-c", script], "cwd": m.mountpoint()}));
        assert_eq!(ran.trim(), "ran");
    }

    /// The additional context its hook returns after a tool call (empty: `{}`).
    fn hook(&mut self, m: &Mounted, event: &str, tool_input: Value) -> String {
        let input = json!({"hook_event_name": event, "tool_name": "Bash", "tool_input": tool_input,
            "cwd": m.mountpoint(), "session_id": "s1"});
        let answer: Value = serde_json::from_str(&self.say(json!({"hook": input}))).unwrap();
        assert_eq!(answer["code"], 0, "{answer}");
        let out: Value = serde_json::from_str(answer["stdout"].as_str().unwrap()).unwrap();
        if out == json!({}) {
            return String::new();
        }
        assert_eq!(out["hookSpecificOutput"]["hookEventName"], event, "{out}");
        out["hookSpecificOutput"]["additionalContext"].as_str().unwrap().to_string()
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

#[test]
fn the_hook_tells_its_agent_every_refusal_once_the_silent_ones_included() {
    let m = Mounted::new();
    m.write("app/config.py", b"REGION = 'eu'\n").unwrap();
    let mut claude = Harness::start(&m);
    let mut codex = Harness::start(&m);
    assert_eq!(claude.hook(&m, "PostToolUse", json!({"command": "ls"})), "", "nothing refused yet");

    // bash's `echo > f` refused at close: exit 0; Python's unclosed file: exit 0.
    claude.tool(&m, "echo \"$LEAK\" > notes.env");
    claude.tool(&m, "python3 -c \"import os; open('app/config.py', 'w').write(os.environ['LEAK'])\"");
    codex.tool(&m, "echo \"$LEAK\" > other.env");

    let told = claude.hook(&m, "PostToolUse", json!({"command": "echo ..."}));
    for part in [
        "rwfs refused a write to notes.env and nothing was written",
        "aws-secret-access-key at line 1",
        "${AWS_SECRET_ACCESS_KEY}",
        "rwfs refused a write to app/config.py",
        "os.environ[\"AWS_SECRET_ACCESS_KEY\"]",
        "Details: .resilient_write/rejections/rj_",
    ] {
        assert!(told.contains(part), "{part}:\n{told}");
    }
    assert!(!told.contains("other.env"), "another agent's refusal is not this one's:\n{told}");
    assert!(!told.contains(&aws_secret_line(81)[26..60]), "never a character of the secret");
    assert_eq!(claude.hook(&m, "PostToolUseFailure", json!({"command": "ls"})), "", "each refusal once");

    let told = codex.hook(&m, "PostToolUse", json!({"command": "echo"}));
    assert!(told.contains("other.env") && !told.contains("notes.env"), "{told}");
}

#[test]
fn a_refusal_of_the_file_the_tool_named_is_reported_whoever_wrote_it() {
    let m = Mounted::new();
    let mut agent = Harness::start(&m);
    assert_eq!(agent.hook(&m, "PostToolUse", json!({})), "");
    // A writer outside the agent's process tree (a daemonised helper, a language server).
    assert!(m.write("svc/settings.py", aws_secret_line(82).as_bytes()).is_err());
    assert_eq!(agent.hook(&m, "PostToolUse", json!({"command": "ls"})), "", "not its tree, not its file");
    let path = m.mountpoint().join("svc/settings.py");
    let told = agent.hook(&m, "PostToolUseFailure", json!({"file_path": path, "content": "…"}));
    assert!(told.contains("rwfs refused a write to svc/settings.py"), "{told}");
}

#[test]
fn without_a_daemon_or_with_nonsense_the_hook_answers_nothing_and_exits_0() {
    let ws = Ws::new();
    for input in [
        json!({"hook_event_name": "PostToolUse", "cwd": ws.path(), "tool_input": {"file_path": ws.abs("a.py")}})
            .to_string(),
        "not json at all".to_string(),
        String::new(),
    ] {
        let mut child = rwfs()
            .arg("hook")
            .current_dir(ws.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "{}", "{input}");
    }
}

#[test]
fn rwfs_hooks_prints_and_installs_each_harness_configuration() {
    let ws = Ws::new();
    let out = rwfs().args(["hooks", "--for", "claude", "-w"]).arg(ws.path()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let settings: Value = serde_json::from_slice(&out.stdout).unwrap();
    for event in ["PreToolUse", "PostToolUse", "PostToolUseFailure"] {
        let group = &settings["hooks"][event][0];
        assert_eq!(group["matcher"], "Write|Edit|MultiEdit|NotebookEdit|Bash", "{settings}");
        assert!(group["hooks"][0]["command"].as_str().unwrap().ends_with("rwfs hook"), "{settings}");
    }
    let prompt = &settings["hooks"]["UserPromptSubmit"][0];
    assert!(prompt["hooks"][0]["command"].as_str().unwrap().ends_with("rwfs hook"), "{settings}");
    let out = rwfs().args(["hooks", "--for", "claude", "--install", "-w"]).arg(ws.path()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let installed: Value = serde_json::from_slice(&std::fs::read(ws.abs(".claude/settings.json")).unwrap()).unwrap();
    assert_eq!(installed, settings);

    let home = tempfile::tempdir().unwrap();
    let out = rwfs().args(["hooks", "--for", "codex", "--install"]).env("CODEX_HOME", home.path()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let hooks: Value = serde_json::from_slice(&std::fs::read(home.path().join("hooks.json")).unwrap()).unwrap();
    assert!(hooks["hooks"]["PostToolUse"][0]["hooks"][0]["command"].as_str().unwrap().ends_with("rwfs hook"));

    let out = rwfs().args(["hooks", "--for", "aider"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("aider has no hooks") && text.contains("CONVENTIONS.md"), "{text}");
}
