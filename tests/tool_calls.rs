//! Issue 31: tool calls in the journal, through a real mount. A scripted harness (a Python
//! process, as a harness is any program that runs hooks around its tools) reports a prompt
//! and three tool calls through `rwfs hook` exactly as Claude Code runs it — a Write by the
//! harness itself, a Bash `sed -i`, a Bash script that writes two files — and a person edits
//! afterwards. Every row names the call it answered (its `group`); blame credits each line to
//! its call or to the person; `rwfs rewind --tool-call` undoes exactly one call, merging
//! around the person's edit and leaving a conflicting one alone; `--undo` takes it back byte
//! for byte; `--turn` undoes a turn.

use std::process::Command;

use serde_json::Value;

use crate::support::mount::{Mounted, rwfs};

/// The harness: for each step of its plan (JSON lines on stdin), runs `rwfs hook` with the
/// hook input Claude Code sends, or does the tool's work — itself (`write`) or through a shell
/// it spawns (`bash`).
const HARNESS: &str = r#"
import json, subprocess, sys
rwfs, root = sys.argv[1], sys.argv[2]
def hook(event, **fields):
    fields.update(hook_event_name=event, session_id="sess-1", cwd=root)
    out = subprocess.run([rwfs, "hook"], input=json.dumps(fields).encode(), capture_output=True, check=True)
    print(event, fields.get("tool_use_id", ""), out.stdout.decode().strip(), out.stderr.decode().strip(), flush=True)
for line in sys.stdin:
    step = json.loads(line)
    if step["do"] == "prompt":
        hook("UserPromptSubmit", prompt=step["prompt"])
        continue
    tool = "Write" if step["do"] == "write" else "Bash"
    hook("PreToolUse", tool_name=tool, tool_use_id=step["id"], tool_input={})
    if step["do"] == "write":
        with open(root + "/" + step["path"], "w") as f:
            f.write(step["text"])
    else:
        subprocess.run(["bash", "-c", step["command"]], cwd=root, check=True)
    hook("PostToolUse", tool_name=tool, tool_use_id=step["id"], tool_input={})
"#;

fn harness(m: &Mounted, steps: &[Value]) {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("harness.py");
    std::fs::write(&script, HARNESS).unwrap();
    let plan: String = steps.iter().map(|s| format!("{s}\n")).collect();
    let mut child = Command::new("python3")
        .arg(&script)
        .arg(env!("CARGO_BIN_EXE_rwfs"))
        .arg(m.mountpoint())
        .env("RWFS_SESSION", "agent-1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    child.stdin.take().unwrap().write_all(plan.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "harness failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(printed.lines().all(|l| l.contains(" {}")), "every hook answers {{}} here: {printed}");
}

fn rows(m: &Mounted) -> Vec<Value> {
    let out = rwfs().arg("-w").arg(m.ws.path()).args(["log", "--json", "--all"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn rewind(m: &Mounted, args: &[&str]) -> Value {
    let out = rwfs().arg("-w").arg(m.ws.path()).arg("rewind").args(args).arg("--json").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

const A: &str = "one\ntwo\nthree\nfour\nfive\n";
const D: &str = "alpha\nbeta\ngamma\n";

/// The session of the issue: a prompt, then Write (a.txt, d.txt), Bash `sed -i` on both, a
/// second prompt, Bash writing b.txt and c.txt.
fn session(m: &Mounted) {
    let write_both = format!("printf '{}' > d.txt", D.replace('\n', "\\n"));
    harness(
        m,
        &[
            serde_json::json!({"do": "prompt", "prompt": "make the notes louder please"}),
            serde_json::json!({"do": "write", "id": "toolu_1", "path": "a.txt", "text": A}),
            serde_json::json!({"do": "bash", "id": "toolu_1b", "command": write_both}),
            serde_json::json!({"do": "bash", "id": "toolu_2", "command": "sed -i 's/two/TWO/; s/beta/BETA/' a.txt d.txt"}),
            serde_json::json!({"do": "prompt", "prompt": "now add b and c"}),
            serde_json::json!({"do": "bash", "id": "toolu_3", "command": "echo b > b.txt && echo c > c.txt"}),
        ],
    );
}

#[test]
fn rows_name_the_tool_call_they_answered_and_blame_credits_each_line() {
    let m = Mounted::new();
    session(&m);
    // A person, outside the agent's run, edits a.txt's last line afterwards.
    m.write("a.txt", b"one\nTWO\nthree\nfour\nfive (person)\n").unwrap();

    let rows = rows(&m);
    let group_of = |path: &str| -> Vec<Option<&str>> {
        rows.iter().filter(|r| r["path"] == path && r["op"] != "tool_call").map(|r| r["group"].as_str()).collect()
    };
    assert_eq!(group_of("b.txt"), [Some("toolu_3")]);
    assert_eq!(group_of("c.txt"), [Some("toolu_3")]);
    assert_eq!(group_of("d.txt")[0], Some("toolu_1b"));
    let a = group_of("a.txt");
    assert_eq!((a[0], a.last().copied().flatten()), (Some("toolu_1"), None), "the harness's write, the person's");
    assert!(a.contains(&Some("toolu_2")), "sed -i's rename over a.txt: {a:?}");
    let starts: Vec<&Value> = rows.iter().filter(|r| r["op"] == "tool_call").collect();
    assert_eq!(starts.len(), 4);
    assert_eq!(starts[0]["reason"], "tool=Write turn=1 agent_session=sess-1 label=make the notes louder please");
    assert_eq!(starts[3]["reason"], "tool=Bash turn=2 agent_session=sess-1 label=now add b and c");
    assert_eq!(starts[0]["session"], "agent-1");
    assert!(starts.iter().all(|r| r["caller"] == "python3" && r["sha256"].is_string()), "{starts:?}");

    let out = rwfs().arg("-w").arg(m.ws.path()).args(["blame", "a.txt", "--json"]).output().unwrap();
    let b: Value = serde_json::from_slice(&out.stdout).unwrap();
    let groups: Vec<Option<&str>> =
        b["lines"].as_array().unwrap().iter().map(|l| l["origin"]["group"].as_str()).collect();
    assert_eq!(groups, [Some("toolu_1"), Some("toolu_2"), Some("toolu_1"), Some("toolu_1"), None], "{b}");
    let text =
        String::from_utf8_lossy(&rwfs().arg("-w").arg(m.ws.path()).arg("log").output().unwrap().stdout).into_owned();
    assert!(text.contains("toolu_2") && text.contains("label=now add b and c"), "{text}");
    let out = rwfs().arg("-w").arg(m.ws.path()).args(["sessions", "--json"]).output().unwrap();
    let agent: Value = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|s| s["name"] == "agent-1")
        .unwrap();
    assert_eq!(agent["tool_calls"], 4, "{agent}");
}

#[test]
fn rewinding_one_tool_call_merges_around_a_person_s_edit_and_leaves_a_conflict_alone() {
    let m = Mounted::new();
    session(&m);
    let theirs_a = "one\nTWO\nthree\nfour\nfive (person)\n";
    let theirs_d = "alpha\nBETA (person)\ngamma\n";
    m.write("a.txt", theirs_a.as_bytes()).unwrap();
    m.write("d.txt", theirs_d.as_bytes()).unwrap();

    let plan = rewind(&m, &["--tool-call", "toolu_2", "--dry-run"]);
    let step = |plan: &Value, path: &str| plan["steps"].as_array().unwrap().iter().find(|s| s["path"] == path).cloned();
    assert_eq!(step(&plan, "a.txt").unwrap()["action"], "merge", "{plan}");
    let d = step(&plan, "d.txt").unwrap();
    assert!(d["skipped"].as_str().unwrap().starts_with("merge_conflict"), "{plan}");
    assert!(d["conflict"].as_str().unwrap().contains("BETA (person)"), "{plan}");
    assert_eq!(plan["steps"].as_array().unwrap().len(), 2, "only what toolu_2 changed: {plan}");
    assert_eq!(m.read("a.txt").unwrap(), theirs_a.as_bytes(), "a dry run changes nothing");

    let done = rewind(&m, &["--tool-call", "toolu_2"]);
    assert_eq!(done["applied"], 1, "{done}");
    assert_eq!(m.read("a.txt").unwrap(), b"one\ntwo\nthree\nfour\nfive (person)\n", "merged");
    assert_eq!(m.read("d.txt").unwrap(), theirs_d.as_bytes(), "the conflict is not clobbered");
    assert_eq!(m.read("b.txt").unwrap(), b"b\n", "other calls' changes stay");

    let group = done["group"].as_str().unwrap();
    let undone = rewind(&m, &["--undo", group]);
    assert_eq!(undone["applied"], 1, "{undone}");
    assert_eq!(m.read("a.txt").unwrap(), theirs_a.as_bytes(), "undo restores byte for byte");

    // A turn: everything the agent did since its second prompt.
    let turn = rewind(&m, &["--turn", "agent-1:2"]);
    assert_eq!(turn["applied"], 2, "{turn}");
    assert!(m.read("b.txt").is_err() && m.read("c.txt").is_err());
    assert_eq!(m.read("a.txt").unwrap(), theirs_a.as_bytes());
    let none = rwfs().arg("-w").arg(m.ws.path()).args(["rewind", "--turn", "7"]).output().unwrap();
    assert!(!none.status.success());
    assert!(String::from_utf8_lossy(&none.stderr).contains("no tool call of that turn"), "{none:?}");
}
