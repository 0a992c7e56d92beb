//! The real harnesses — Claude Code, Codex CLI and aider, pinned and installed by
//! `integration/agents/setup.sh` (which `scripts/test` runs and whose `env.sh` it sources:
//! `RWFS_CLAUDE`, `RWFS_CODEX`, `RWFS_AIDER`) — each run once on a mounted workspace, driven by
//! the scripted model endpoint `integration/agents/model.py` through a batch of tool calls.
//! The assertions read the request each harness sent after each call: what its model read.
//! Under CI a variable that is not set fails the test; elsewhere the tests also look in
//! setup.sh's default directory. A missing harness fails the test, it never skips.
//!
//! Not here yet (they depend on issue 24 items 4–8, another branch): identical retries
//! counting one budget down across a harness's calls, `rm -rf` then a rewind of that agent's
//! session, `rw_rewind self` in a second run, a file holding an old credential being editable,
//! an MCP write raising an inotify event on the mount. Each is a scenario batch of the same
//! shape: turns for the endpoint, then assertions on the requests and the tree.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use crate::support::mount::{Mounted, rwfs};
use crate::support::{Ws, aws_secret_line};

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
    let settings = home.path().join("rwfs-hooks.json");
    let printed = run(
        {
            let mut c = rwfs();
            c.args(["hooks", "--for", "claude"]);
            c
        },
        "rwfs hooks",
    );
    std::fs::write(&settings, printed).unwrap();

    let mut cmd = limited(&claude);
    cmd.args(["-p", "Make the changes.", "--dangerously-skip-permissions", "--output-format", "json", "--settings"])
        .arg(&settings)
        .current_dir(m.mountpoint())
        .env("HOME", home.path())
        .env("IS_SANDBOX", "1")
        .env("ANTHROPIC_BASE_URL", format!("http://127.0.0.1:{}", model.port))
        .env("ANTHROPIC_API_KEY", "sk-scripted")
        .env_remove("ANTHROPIC_AUTH_TOKEN")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
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

    let requests = model.agent_requests();
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
