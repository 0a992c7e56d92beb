//! The real harnesses — Claude Code, Codex CLI and aider, pinned and installed by
//! `integration/agents/setup.sh` (which `scripts/test` runs and whose `env.sh` it sources:
//! `RWFS_CLAUDE`, `RWFS_CODEX`, `RWFS_AIDER`) — each run once on a mounted workspace, driven by
//! the scripted model endpoint `integration/agents/model.py` through a batch of tool calls.
//! The assertions read the request each harness sent after each call: what its model read.
//! Under CI a variable that is not set fails the test; elsewhere the tests also look in
//! setup.sh's default directory. A missing harness fails the test, it never skips.
//!
//! Claude Code's two runs on one workspace (`claude_code_runs_...`) carry the scenarios of
//! issue 24 items 4–6: identical retries through its Write tool and its Bash counting one
//! budget down, an Edit of a file holding an old credential, `rm -rf` of a directory taken back
//! by `rwfs rewind --session` of that run, `rw_rewind {session: "self"}` through its MCP server
//! (`--mcp-config` with `rwfs mcp`) in the second run touching only that run's files, and a
//! Node `fs.watch` watcher (what Claude Code watches with) seeing the MCP write.

use std::ffi::OsStr;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use crate::support::mount::{Mounted, rwfs};
use crate::support::{Ws, aws_secret_line, five_refusals_counted_down, refusals};

/// A pinned harness: `$env`, or (outside CI) where `setup.sh` installs it by default.
fn harness(env: &str, rel: &str) -> PathBuf {
    if let Some(path) = std::env::var_os(env) {
        let path = PathBuf::from(path);
        assert!(path.exists(), "{env}={} does not exist: run integration/agents/setup.sh", path.display());
        return path;
    }
    let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false");
    assert!(!ci, "{env} is not set: scripts/test exports it after integration/agents/setup.sh");
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))
        .expect("HOME or XDG_CACHE_HOME");
    let path = cache.join("rwfs/agents").join(rel);
    assert!(
        path.exists(),
        "{env} is not set and {} is missing: run integration/agents/setup.sh (Claude Code 2.1.332, Codex CLI \
         0.171.0, aider 0.86.2), or `source <its dir>/env.sh`",
        path.display()
    );
    path
}

/// The scripted model endpoint, serving one scenario and recording every request.
struct Endpoint {
    child: Child,
    port: u16,
    record: PathBuf,
    _dir: tempfile::TempDir,
}

impl Endpoint {
    fn start(turns: Vec<Value>) -> Endpoint {
        let dir = tempfile::Builder::new().prefix("rwfs-model-").tempdir().unwrap();
        let scenario = dir.path().join("scenario.json");
        std::fs::write(&scenario, json!({"turns": turns}).to_string()).unwrap();
        let record = dir.path().join("record.jsonl");
        let mut child = Command::new("python3")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("integration/agents/model.py"))
            .arg(&scenario)
            .arg(&record)
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the scripted model endpoint");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let port = line.trim().strip_prefix("PORT ").and_then(|p| p.parse().ok()).expect("the endpoint's port");
        Endpoint { child, port, record, _dir: dir }
    }

    /// The requests of the agent loop, in order (request `k` answered turn `k`).
    fn agent_requests(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.record).unwrap_or_default();
        text.lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|r| r["agent"] == true)
            .map(|r| r["body"].clone())
            .collect()
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Run `cmd` (with a time limit) and return its combined output; fails the test when it
/// does not exit 0.
fn run(mut cmd: Command, what: &str) -> String {
    let out = cmd.stdin(Stdio::null()).output().unwrap_or_else(|e| panic!("start {what}: {e}"));
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{what} failed ({}):\n{text}", out.status);
    text
}

/// `timeout 300 program`: a harness that hangs fails the test instead of the run.
fn limited(program: &Path) -> Command {
    let mut cmd = Command::new("timeout");
    cmd.arg("300").arg(program);
    cmd
}

/// Claude Code run non-interactively in `dir` on the scripted endpoint, with its own `home`
/// and `args` (`--settings`, `--mcp-config`).
fn claude_code(program: &Path, dir: &Path, home: &Path, model: &Endpoint, args: &[&OsStr]) -> Command {
    let mut cmd = limited(program);
    cmd.args(["-p", "Make the changes.", "--dangerously-skip-permissions", "--output-format", "json"])
        .args(args)
        .current_dir(dir)
        .env("HOME", home)
        .env("IS_SANDBOX", "1")
        .env("ANTHROPIC_BASE_URL", format!("http://127.0.0.1:{}", model.port))
        .env("ANTHROPIC_API_KEY", "sk-scripted")
        .env_remove("ANTHROPIC_AUTH_TOKEN")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
    cmd
}

/// `rwfs hooks --for claude` saved in `home`: the settings file for `--settings`.
fn claude_hooks(home: &Path) -> PathBuf {
    let settings = home.join("rwfs-hooks.json");
    let printed = run(
        {
            let mut c = rwfs();
            c.args(["hooks", "--for", "claude"]);
            c
        },
        "rwfs hooks",
    );
    std::fs::write(&settings, printed).unwrap();
    settings
}

/// What the model read after its call of turn `k`: Anthropic messages after its last
/// assistant message.
fn anthropic_after(request: &Value) -> String {
    let messages = request["messages"].as_array().unwrap();
    let last = messages.iter().rposition(|m| m["role"] == "assistant").unwrap_or(0);
    Value::Array(messages[last + 1..].to_vec()).to_string()
}

/// The same for a Responses API request: the input items after its last function call.
fn responses_after(request: &Value) -> String {
    let items = request["input"].as_array().unwrap();
    let last = items.iter().rposition(|m| m["type"] == "function_call").unwrap_or(0);
    Value::Array(items[last + 1..].to_vec()).to_string()
}

/// `text` names the file, the rule and the line.
#[track_caller]
fn explains(text: &str, file: &str, line: u32) {
    for part in [file.to_string(), "aws-secret-access-key".to_string(), format!("line {line}")] {
        assert!(text.contains(&part), "the model's next request lacks {part:?}:\n{text}");
    }
}

/// A distinct credential per refusal (each has its own retry budget).
fn key(seed: u64) -> String {
    let line = aws_secret_line(seed);
    line.trim_end().trim_start_matches("AWS_SECRET_ACCESS_KEY = \"").trim_end_matches('"').to_string()
}

#[test]
fn claude_code_is_told_file_rule_and_line_of_every_refused_write() {
    let claude = harness("RWFS_CLAUDE", "node/node_modules/.bin/claude");
    let m = Mounted::with(Ws::new(), false, &["--stderr-notice", "on"]);
    let at = |rel: &str| m.mountpoint().join(rel).display().to_string();
    let (k2, k3, k4, k5, k6) = (key(91), key(92), key(93), key(94), key(95));
    let turns = vec![
        json!({"calls": [{"tool": "Write", "input": {"file_path": at("hello.py"), "content": "print('hi')\n"}}]}),
        json!({"calls": [{"tool": "Edit", "input": {"file_path": at("hello.py"), "old_string": "print('hi')", "new_string": "print('hello')"}}]}),
        json!({"calls": [{"tool": "Write", "input": {"file_path": at("config.py"), "content": format!("import os\nAWS_SECRET_ACCESS_KEY = \"{k2}\"\n")}}]}),
        json!({"calls": [{"tool": "Edit", "input": {"file_path": at("hello.py"), "old_string": "print('hello')", "new_string": format!("print('hello')\nAWS_SECRET_ACCESS_KEY = \"{k3}\"")}}]}),
        json!({"calls": [{"shell": format!("echo 'AWS_SECRET_ACCESS_KEY={k4}' > .env.local")}]}),
        json!({"calls": [{"shell": format!("python3 -c \"open('settings.py', 'w').write('A = 1\\nAWS_SECRET_ACCESS_KEY = \\\"{k5}\\\"\\n')\"")}]}),
        json!({"calls": [{"shell": format!("sh -c \"echo 'AWS_SECRET_ACCESS_KEY={k6}' > dash.env\"")}]}),
        json!({"text": "done"}),
    ];
    let model = Endpoint::start(turns);
    let home = tempfile::tempdir().unwrap();
    let settings = claude_hooks(home.path());
    let cmd = claude_code(&claude, m.mountpoint(), home.path(), &model, &["--settings".as_ref(), settings.as_ref()]);
    let output = run(cmd, "claude");

    // A write and an edit land; their saves are one row each.
    assert_eq!(m.read("hello.py").unwrap(), b"print('hello')\n", "{output}");
    let rows = rwfs().args(["log", "--json", "-n", "0", "-w"]).arg(m.ws.path()).output().unwrap();
    let shown: Vec<Value> =
        String::from_utf8_lossy(&rows.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let hello: Vec<&str> =
        shown.iter().filter(|r| r["path"] == "hello.py").map(|r| r["op"].as_str().unwrap()).collect();
    assert_eq!(hello.iter().filter(|op| **op != "block").count(), 2, "one row per save: {shown:?}");
    assert!(shown.iter().all(|r| !r["path"].as_str().unwrap().contains(".tmp.")), "{shown:?}");
    for refused in ["config.py", ".env.local", "settings.py", "dash.env"] {
        assert_eq!(m.backing(refused), None, "{refused}");
    }

    // Its hooks (PreToolUse, UserPromptSubmit) name each save's tool call: the Write's and the
    // Edit's rows carry the two tool_use ids the model sent, and a tool_call row each names
    // the tool, turn 1 and the prompt's first words.
    let requests = model.agent_requests();
    let sent: String = requests.iter().map(Value::to_string).collect();
    let saves: Vec<&str> = shown
        .iter()
        .filter(|r| r["path"] == "hello.py" && r["op"] != "block")
        .map(|r| r["group"].as_str().unwrap_or_default())
        .collect();
    assert!(saves[0].starts_with("toolu_") && saves[1].starts_with("toolu_") && saves[0] != saves[1], "{saves:?}");
    assert!(saves.iter().all(|id| sent.contains(id)), "the ids the model's tool_use blocks carry: {saves:?}");
    let calls: Vec<&Value> = shown.iter().filter(|r| r["op"] == "tool_call").collect();
    for (id, tool) in saves.iter().zip(["Write", "Edit"]) {
        let call =
            calls.iter().find(|c| c["group"] == *id).unwrap_or_else(|| panic!("no tool_call row of {id}: {calls:?}"));
        let reason = call["reason"].as_str().unwrap();
        assert!(
            reason.starts_with(&format!("tool={tool} turn=1 ")) && reason.ends_with("label=Make the changes."),
            "{reason}"
        );
    }

    assert!(requests.len() >= 8, "a request after each call: {}", requests.len());
    explains(&anthropic_after(&requests[3]), "config.py", 2);
    explains(&anthropic_after(&requests[4]), "hello.py", 2);
    explains(&anthropic_after(&requests[5]), ".env.local", 1);
    explains(&anthropic_after(&requests[6]), "settings.py", 2);
    explains(&anthropic_after(&requests[7]), "dash.env", 1);
    // The replacement is in the file's language, and no notice holds the secret.
    assert!(anthropic_after(&requests[3]).contains("os.environ[\\\"AWS_SECRET_ACCESS_KEY\\\"]"));
    for k in [&k2, &k3, &k5] {
        let told = requests.iter().map(anthropic_after).collect::<String>();
        let rwfs_said: String = told.split("rwfs").skip(1).map(|s| &s[..s.len().min(600)]).collect();
        assert!(!rwfs_said.contains(k.as_str()), "a notice echoed a secret");
    }
}

/// The tool result the model read after its call of the turn before `request`: its text, and
/// whether the harness marked it an error.
fn tool_result(request: &Value) -> (String, bool) {
    let messages = request["messages"].as_array().unwrap();
    let result = messages
        .iter()
        .rev()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .find(|block| block["type"] == "tool_result")
        .expect("a tool result");
    let text = match &result["content"] {
        Value::String(text) => text.clone(),
        blocks => blocks.as_array().into_iter().flatten().filter_map(|b| b["text"].as_str()).collect(),
    };
    (text, result["is_error"] == true)
}

/// Node's `fs.watch` on a directory (what Claude Code watches the workspace with), logging
/// each event as `EVENT NAME`.
struct NodeWatch {
    child: Child,
    log: tempfile::NamedTempFile,
}

impl NodeWatch {
    fn on(dir: &Path) -> NodeWatch {
        let log = tempfile::NamedTempFile::new().unwrap();
        let script = "const fs = require('fs'); const out = fs.openSync(process.argv[2], 'a'); \
                      fs.watch(process.argv[1], (ev, name) => fs.writeSync(out, `${ev} ${name}\\n`)); \
                      console.log('ready');";
        let mut child = Command::new("node")
            .args(["-e", script])
            .arg(dir)
            .arg(log.path())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start node (scripts/test installs it)");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "ready", "the watcher started");
        NodeWatch { child, log }
    }

    /// A shell command that waits (10 s at most) until the watcher logged `event`, then prints
    /// every event it logged so far.
    fn until_seen(&self, event: &str) -> String {
        let log = self.log.path().display();
        format!("for i in $(seq 100); do grep -qx '{event}' {log} && break; sleep 0.1; done; cat {log}")
    }
}

impl Drop for NodeWatch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn claude_code_runs_are_sessions_whose_retries_count_down_and_whose_changes_rewind_apart() {
    let claude = harness("RWFS_CLAUDE", "node/node_modules/.bin/claude");
    let ws = Ws::new();
    let (app, util) = (b"print('app')\n", b"def f():\n    return 1\n");
    ws.put("src/app.py", app);
    ws.put("src/lib/util.py", util);
    // A file that held a credential before the mount.
    let settings_py = format!("REGION = \"eu-west-1\"\n{}", aws_secret_line(120));
    ws.put("settings.py", settings_py.as_bytes());
    let m = Mounted::with(ws, false, &["--stderr-notice", "on"]);
    let at = |rel: &str| m.mountpoint().join(rel).display().to_string();
    let home = tempfile::tempdir().unwrap();

    // Run 1: the same refused content five times, by its Write tool and its Bash in turn (each
    // Write a fresh temporary name, each Bash call a new POSIX session); an Edit of the file
    // holding the old credential; a new file; rm -rf of a directory.
    let secret = format!("import os\nAWS_SECRET_ACCESS_KEY = \"{}\"\n", key(121));
    let write = json!({"calls": [{"tool": "Write", "input": {"file_path": at("config.py"), "content": secret}}]});
    let echo = json!({"calls": [{"shell": format!("printf '%s' '{secret}' > config.py")}]});
    let turns = vec![
        write.clone(),
        echo.clone(),
        write.clone(),
        echo,
        write,
        json!({"calls": [{"tool": "Read", "input": {"file_path": at("settings.py")}}]}),
        json!({"calls": [{"tool": "Edit", "input": {"file_path": at("settings.py"), "old_string": "eu-west-1", "new_string": "us-east-2"}}]}),
        json!({"calls": [{"tool": "Write", "input": {"file_path": at("notes.md"), "content": "run one\n"}}]}),
        json!({"calls": [{"shell": "rm -rf src"}]}),
        json!({"text": "done"}),
    ];
    let model = Endpoint::start(turns);
    let settings = claude_hooks(home.path());
    let output = run(
        claude_code(&claude, m.mountpoint(), home.path(), &model, &["--settings".as_ref(), settings.as_ref()]),
        "claude (run 1)",
    );
    let requests = model.agent_requests();
    assert!(requests.len() >= 10, "a request after each call: {}\n{output}", requests.len());
    // One budget, counted down across both tools, and the model told so after each attempt.
    assert_eq!(refusals(&m.ws, "config.py"), five_refusals_counted_down());
    for (k, told) in [
        (1, "(3 identical retries left)"),
        (2, "(2 identical retries left)"),
        (3, "(1 identical retries left)"),
        (4, "(0 identical retries left)"),
        (5, "its retry budget is spent"),
    ] {
        let next = anthropic_after(&requests[k]);
        explains(&next, "config.py", 2);
        assert!(next.contains(told), "after attempt {k} the model reads {told:?}:\n{next}");
    }
    assert_eq!(m.backing("config.py"), None);
    // The Edit of the file holding the old credential landed, the credential where it was.
    let (edited, failed) = tool_result(&requests[7]);
    assert!(!failed, "the Edit succeeded: {edited}");
    assert_eq!(m.backing("settings.py").unwrap(), settings_py.replace("eu-west-1", "us-east-2").as_bytes());
    assert_eq!(m.backing("notes.md").unwrap(), b"run one\n");
    assert_eq!(m.backing("src/app.py"), None, "rm -rf src ran");
    // All of it one session: the run's.
    let rows = m.ws.rows();
    let session_of = |path: &str| rows.iter().rfind(|r| r.path == path).and_then(|r| r.session.clone());
    let first = session_of("notes.md").expect("a session");
    assert!(first.starts_with("claude-"), "{first}");
    for path in ["config.py", "settings.py", "src/app.py", "src/lib/util.py"] {
        assert_eq!(session_of(path).as_deref(), Some(first.as_str()), "{path}");
    }

    // Run 2, with rwfs's MCP server, watched by fs.watch: its Write tool and an MCP write, then
    // rw_rewind {session: "self"} takes back exactly those two.
    let watch = NodeWatch::on(m.mountpoint());
    let turns = vec![
        json!({"calls": [{"tool": "Write", "input": {"file_path": at("second.py"), "content": "print(2)\n"}}]}),
        json!({"calls": [{"tool": "mcp__rwfs__rw_safe_write", "input": {"path": "from-mcp.txt", "content": "m\n"}}]}),
        json!({"calls": [{"shell": watch.until_seen("change from-mcp.txt")}]}),
        json!({"calls": [{"tool": "mcp__rwfs__rw_rewind", "input": {"session": "self", "confirm": true}}]}),
        json!({"text": "done"}),
    ];
    let model = Endpoint::start(turns);
    let mcp = home.path().join("mcp.json");
    let server = json!({"type": "stdio", "command": env!("CARGO_BIN_EXE_rwfs"), "args": ["mcp", "-w", m.ws.path()]});
    std::fs::write(&mcp, json!({"mcpServers": {"rwfs": server}}).to_string()).unwrap();
    let args: [&OsStr; 3] = ["--mcp-config".as_ref(), mcp.as_ref(), "--strict-mcp-config".as_ref()];
    let output = run(claude_code(&claude, m.mountpoint(), home.path(), &model, &args), "claude (run 2)");
    let requests = model.agent_requests();
    assert!(requests.len() >= 5, "a request after each call: {}\n{output}", requests.len());
    let (written, failed) = tool_result(&requests[2]);
    assert!(!failed && written.contains("\"ok\":true"), "{written}");
    // The MCP write, made by the daemon behind the kernel's back, reached the watcher before
    // anything else touched the file: its creation and its content.
    let (seen, _) = tool_result(&requests[3]);
    for event in ["rename from-mcp.txt", "change from-mcp.txt"] {
        assert!(seen.lines().any(|l| l == event), "fs.watch saw no {event:?} of the MCP write; it saw:\n{seen}");
    }
    let (rewound, failed) = tool_result(&requests[4]);
    assert!(!failed, "{rewound}");
    let rewound: Value = serde_json::from_str(&rewound).unwrap();
    let mut paths: Vec<&str> =
        rewound["steps"].as_array().unwrap().iter().map(|s| s["path"].as_str().unwrap()).collect();
    paths.sort();
    assert_eq!(paths, ["from-mcp.txt", "second.py"], "only this run's files: {rewound}");
    assert_eq!(rewound["applied"], 2, "{rewound}");
    let selection = rewound["selection"].as_str().unwrap();
    assert!(selection.starts_with("session claude-") && !selection.ends_with(&first), "{selection}");
    assert_eq!((m.backing("second.py"), m.backing("from-mcp.txt")), (None, None));
    assert_eq!(m.backing("notes.md").unwrap(), b"run one\n", "run 1's files stay");

    // rwfs rewind --session of run 1: src/ is back, run 1's changes are undone, run 2 untouched.
    run(
        {
            let mut c = rwfs();
            c.args(["rewind", "--session", &first, "--workspace"]).arg(m.ws.path());
            c
        },
        "rwfs rewind --session",
    );
    assert_eq!(m.read("src/app.py").unwrap(), app);
    assert_eq!(m.read("src/lib/util.py").unwrap(), util);
    assert!(m.read("notes.md").is_err(), "run 1's new file is gone");
    assert_eq!(m.read("settings.py").unwrap(), settings_py.as_bytes(), "the edit is undone");
}

#[test]
fn codex_is_told_of_its_refused_patch_and_shell_writes() {
    let codex = harness("RWFS_CODEX", "node/node_modules/.bin/codex");
    let m = Mounted::with(Ws::new(), false, &["--stderr-notice", "on"]);
    let patch = |body: &str| format!("apply_patch <<'EOF'\n*** Begin Patch\n{body}\n*** End Patch\nEOF\n");
    let (k1, k2) = (key(96), key(97));
    let turns = vec![
        json!({"calls": [{"shell": patch("*** Add File: greet.py\n+print('hello')")}]}),
        json!({"calls": [{"shell": patch("*** Update File: greet.py\n@@\n-print('hello')\n+print('hello there')")}]}),
        json!({"calls": [{"shell": patch(&format!("*** Update File: greet.py\n@@\n-print('hello there')\n+print('hello there')\n+AWS_SECRET_ACCESS_KEY = \"{k1}\""))}]}),
        json!({"calls": [{"shell": format!("echo 'AWS_SECRET_ACCESS_KEY={k2}' > .env.local")}]}),
        json!({"text": "done"}),
    ];
    let model = Endpoint::start(turns);
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "model = \"scripted\"\nmodel_provider = \"mock\"\n[model_providers.mock]\nname = \"mock\"\n\
             base_url = \"http://127.0.0.1:{}/v1\"\nenv_key = \"MOCK_API_KEY\"\nwire_api = \"responses\"\n",
            model.port
        ),
    )
    .unwrap();
    run(
        {
            let mut c = rwfs();
            c.args(["hooks", "--for", "codex", "--install"]).env("CODEX_HOME", home.path());
            c
        },
        "rwfs hooks --install",
    );
    let mut cmd = limited(&codex);
    cmd.args(["exec", "--dangerously-bypass-approvals-and-sandbox", "--dangerously-bypass-hook-trust"])
        .args(["--skip-git-repo-check", "--json", "Make the changes."])
        .current_dir(m.mountpoint())
        .env("HOME", home.path())
        .env("CODEX_HOME", home.path())
        .env("MOCK_API_KEY", "scripted");
    let output = run(cmd, "codex");
    assert_eq!(m.read("greet.py").unwrap(), b"print('hello there')\n", "{output}");

    let requests = model.agent_requests();
    assert!(requests.len() >= 5, "a request after each call: {}", requests.len());
    // After the refused patch Codex itself says only "Failed to write file PATH" (its hook does
    // not run after a failed apply_patch); the hook after its next call tells why.
    assert!(responses_after(&requests[3]).contains("greet.py"));
    let next = responses_after(&requests[4]);
    explains(&next, "greet.py", 2);
    // The shell write: rwfs's line in the command's output, and the hook.
    explains(&next, ".env.local", 1);
    assert!(next.contains("rwfs: refused write to .env.local"), "{next}");
}

#[test]
fn aider_edits_land_and_a_refused_one_reaches_only_the_human() {
    let aider = harness("RWFS_AIDER", "aider/bin/aider");
    let ws = Ws::new();
    std::fs::write(ws.abs("app.py"), "REGION = \"eu\"\n").unwrap();
    std::fs::write(ws.abs("config.py"), "DEBUG = False\n").unwrap();
    let m = Mounted::with(ws, false, &["--stderr-notice", "on"]);
    let k = key(98);
    let block = |file: &str, search: &str, replace: &str| {
        format!("{file}\n```python\n<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n```\n\n")
    };
    let answer = block("app.py", "REGION = \"eu\"", "REGION = \"us\"")
        + &block("hello.py", "", "print('hello')")
        + &block("config.py", "DEBUG = False", &format!("DEBUG = False\nAWS_SECRET_ACCESS_KEY = \"{k}\""));
    let model = Endpoint::start(vec![json!({"text": answer})]);
    let home = tempfile::tempdir().unwrap();
    let mut cmd = limited(&aider);
    cmd.args(["--openai-api-base", &format!("http://127.0.0.1:{}/v1", model.port), "--model", "openai/scripted"])
        .args(["--edit-format", "diff", "--no-auto-commits", "--yes-always", "--no-git", "--no-stream"])
        .args(["--no-show-model-warnings", "--no-check-update", "--no-analytics", "--no-pretty"])
        .args(["--message", "Make the changes.", "app.py", "hello.py", "config.py"])
        .current_dir(m.mountpoint())
        .env("HOME", home.path())
        .env("OPENAI_API_KEY", "scripted");
    let output = run(cmd, "aider");
    assert_eq!(m.read("app.py").unwrap(), b"REGION = \"us\"\n", "{output}");
    assert_eq!(m.read("hello.py").unwrap(), b"print('hello')\n", "{output}");
    assert_eq!(m.backing("config.py").unwrap(), b"DEBUG = False\n", "refused: {output}");
    // What reaches aider's model of the refusal: nothing (one request, no follow-up); the human
    // reads rwfs's line in aider's output.
    assert_eq!(model.agent_requests().len(), 1, "{output}");
    assert!(output.contains("rwfs: refused write to config.py"), "{output}");
}

/// The read guard (issue 30 item 3) under a real harness: Claude Code's Read tool and its Bash
/// `cat` of a guarded `.env` give the model the redacted view, and no request it sends holds the
/// secret; a reader outside the agent run reads the real bytes.
#[test]
fn claude_code_reads_a_read_guarded_env_redacted_through_its_read_tool_and_bash() {
    let claude = harness("RWFS_CLAUDE", "node/node_modules/.bin/claude");
    let ws = Ws::new();
    ws.put(".resilient_write/policy.yaml", b"read_guard:\n  - paths: [\".env*\"]\n    action: redact\n");
    let secret = key(97);
    let real = format!("REGION=eu-west-1\nAWS_SECRET_ACCESS_KEY={secret}\n").into_bytes();
    ws.put(".env", &real);
    let m = Mounted::with(ws, false, &[]);
    let env_path = m.mountpoint().join(".env").display().to_string();
    let turns = vec![
        json!({"calls": [{"tool": "Read", "input": {"file_path": env_path}}]}),
        json!({"calls": [{"shell": "cat .env"}]}),
        json!({"text": "done"}),
    ];
    let model = Endpoint::start(turns);
    let home = tempfile::tempdir().unwrap();
    let output = run(claude_code(&claude, m.mountpoint(), home.path(), &model, &[]), "claude");
    let requests = model.agent_requests();
    assert!(requests.len() >= 3, "a request after each call: {}\n{output}", requests.len());
    for (k, tool) in [(1, "Read"), (2, "Bash")] {
        let (text, is_error) = tool_result(&requests[k]);
        assert!(!is_error, "{tool}: {text}");
        assert!(text.contains("REGION=eu-west-1"), "{tool} shows the rest of the file: {text}");
        assert!(text.contains("AWS_SECRET_ACCESS_KEY=[rwfs read guard: AWS_SECRET_ACCESS_KEY"), "{tool}: {text}");
    }
    let sent: String = requests.iter().map(Value::to_string).collect();
    assert!(!sent.contains(&secret), "the model received the secret");
    assert_eq!(m.read(".env").unwrap(), real, "outside the agent run: the real bytes");
}
