//! Real MCP clients against the `rwfs` binary over stdio (`rwfs mcp -w DIR`): the Python `mcp`
//! SDK running the scripts of `integration/mcp/` (the issue's scenario, the paper's scenarios
//! S0–S5 and its motivating incident, MCP and the mount side by side, field compatibility with
//! the reference server), and the MCP Inspector CLI (tool listing with its schema lint, a
//! call, a refusal).
//!
//! The clients are pinned and installed by `integration/mcp/setup.sh`, which `scripts/test` runs and
//! whose `env.sh` it sources: `RWFS_MCP_PY` (the client venv's python), `RWFS_REF_SERVER` (the
//! reference's `resilient-write`), `RWFS_INSPECTOR` (`mcp-inspector`). Under CI a variable that
//! is not set fails the test; elsewhere the tests also look in setup.sh's default directory.
//! A missing client fails the test, it never skips. Each script prints what it did (shown with
//! `--nocapture`) and ends with `PASS <name>`, or exits non-zero with `FAIL <name>: why`.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::Ws;
use crate::support::mount::Mounted;

/// A pinned client: `$env`, or (outside CI) where `setup.sh` installs it by default.
fn client(env: &str, rel: &str) -> PathBuf {
    if let Some(path) = std::env::var_os(env) {
        let path = PathBuf::from(path);
        assert!(path.is_file(), "{env}={} is not a file: run integration/mcp/setup.sh", path.display());
        return path;
    }
    let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false");
    assert!(!ci, "{env} is not set: scripts/test exports it after integration/mcp/setup.sh");
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))
        .expect("HOME or XDG_CACHE_HOME");
    let path = cache.join("rwfs/mcp-clients").join(rel);
    assert!(
        path.is_file(),
        "{env} is not set and {} is missing: run integration/mcp/setup.sh (the Python mcp 2.3.0 client, \
         resilient-write 0.3.0, MCP Inspector 2.12.0), or `source <its dir>/env.sh`",
        path.display()
    );
    path
}

pub(super) fn python() -> PathBuf {
    client("RWFS_MCP_PY", "client/bin/python")
}

pub(super) fn reference_server() -> PathBuf {
    client("RWFS_REF_SERVER", "reference/bin/resilient-write")
}

fn inspector() -> PathBuf {
    client("RWFS_INSPECTOR", "node/node_modules/.bin/mcp-inspector")
}

pub(super) fn rwfs() -> &'static str {
    env!("CARGO_BIN_EXE_rwfs")
}

/// Run `integration/mcp/<script> args...` with the pinned client; its stdout. Fails the test
/// with the script's output when it does not pass.
#[track_caller]
fn script<S: AsRef<OsStr>>(name: &str, args: &[S]) -> String {
    let stdout = python_script(&format!("integration/mcp/{name}"), args);
    assert!(stdout.lines().any(|l| l.starts_with("PASS ")), "{name} did not report PASS:\n{stdout}");
    stdout
}

/// Run the repository's Python script `rel` with the pinned client; its stdout (also printed).
/// Fails the test with the script's output when it exits non-zero.
#[track_caller]
pub(super) fn python_script<S: AsRef<OsStr>>(rel: &str, args: &[S]) -> String {
    let out = Command::new(python())
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join(rel))
        .args(args)
        .env("PYTHONUNBUFFERED", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("RWFS_LOG", "warn")
        .output()
        .expect("run the Python client");
    let (stdout, stderr) = texts(&out);
    print!("{stdout}");
    assert!(
        out.status.success(),
        "{rel} {:?} failed ({}):\n{stdout}{stderr}",
        args.iter().map(|a| a.as_ref()).collect::<Vec<_>>(),
        out.status
    );
    stdout
}

fn texts(out: &Output) -> (String, String) {
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// A paper scenario of `scenarios.py` against a fresh workspace; its stdout.
#[track_caller]
fn scenario(name: &str) -> String {
    let ws = Ws::new();
    script(
        "scenarios.py",
        &[OsStr::new(name), "--rwfs".as_ref(), rwfs().as_ref(), "-w".as_ref(), ws.path().as_os_str()],
    )
}

#[test]
fn python_client_drives_the_issue_scenario_end_to_end() {
    let ws = Ws::new();
    let out =
        script("issue_scenario.py", &[OsStr::new("--rwfs"), rwfs().as_ref(), "-w".as_ref(), ws.path().as_os_str()]);
    assert!(out.contains("handoff_read (second client): drift [('REPORT.md', 'hash_mismatch')]"), "{out}");
    assert!(ws.read("deploy/NOTES.md").is_some_and(|b| !String::from_utf8_lossy(&b).contains("sk_live_")));
}

#[test]
fn scenario_s0_reads_a_550_kb_log_by_cursor_and_by_search_pages() {
    let out = scenario("S0");
    assert!(out.contains("271 ERROR lines"), "{out}");
}

#[test]
fn scenario_s1_recovers_from_a_content_filter_block_by_redacting() {
    scenario("S1");
}

#[test]
fn scenario_s2_composes_a_chunked_report_only_once_complete() {
    scenario("S2");
}

#[test]
fn scenario_s3_cursor_drift_is_refused_then_resumed_from_the_offset() {
    let out = scenario("S3");
    assert!(out.contains("S3 drift: stale_precondition"), "{out}");
}

#[test]
fn scenario_s4_hands_off_across_two_clients() {
    scenario("S4");
}

#[test]
fn scenario_s5_moves_a_stripe_key_to_the_scratchpad_and_reads_the_environment() {
    scenario("S5");
}

/// The paper's Table 3 row for rwfs: the refusal is structured, nothing is lost, and identical
/// retries end in a refusal instead of going on forever.
#[test]
fn motivating_incident_loses_nothing_and_identical_retries_exhaust_the_budget() {
    let out = scenario("incident");
    let row = out.lines().find(|l| l.starts_with("TABLE3 ")).unwrap_or_else(|| panic!("no TABLE3 line:\n{out}"));
    assert!(row.contains("content_lost_bytes=0 structured_error=yes"), "{row}");
    assert!(out.contains("retry_budget_exhausted -> abort"), "{out}");
}

#[test]
fn mcp_and_the_mount_see_each_other_s_writes_at_once() {
    let mounted = Mounted::new();
    script(
        "mount_visibility.py",
        &[
            OsStr::new("--rwfs"),
            rwfs().as_ref(),
            "-w".as_ref(),
            mounted.ws.path().as_os_str(),
            "--mountpoint".as_ref(),
            mounted.mountpoint().as_os_str(),
        ],
    );
}

#[test]
fn reference_server_answers_with_fields_rwfs_also_has() {
    let dir = Ws::new();
    let reference = reference_server();
    script(
        "reference_compat.py",
        &[
            OsStr::new("--rwfs"),
            rwfs().as_ref(),
            "--reference".as_ref(),
            reference.as_os_str(),
            "-w".as_ref(),
            dir.path().as_os_str(),
        ],
    );
}

/// `mcp-inspector --cli <target...> -- <options...>` (v2: the target before `--`).
fn inspect(ws: &Ws, options: &[&str]) -> Output {
    Command::new(inspector())
        .arg("--cli")
        .arg(rwfs())
        .arg("mcp")
        .arg("-w")
        .arg(ws.path())
        .arg("--")
        .args(options)
        .env("RWFS_LOG", "warn")
        .env("NO_COLOR", "1")
        .output()
        .expect("run mcp-inspector")
}

#[test]
fn inspector_lists_every_tool_and_its_strict_lint_finds_no_schema_problem() {
    let ws = Ws::new();
    let out = inspect(&ws, &["--method", "tools/list", "--strict"]);
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "mcp-inspector --strict failed ({}):\n{stdout}\n{stderr}", out.status);
    let listed: serde_json::Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("tools/list JSON: {e}\n{stdout}"));
    let tools = listed["tools"].as_array().expect("tools");
    assert!(tools.iter().any(|t| t["name"] == "rw_safe_write"), "{stdout}");
    for tool in tools {
        assert_eq!(tool["inputSchema"]["additionalProperties"], false, "{tool}");
        assert!(tool["annotations"].is_object(), "{tool}");
    }
    let problems = lint_problems(&stderr);
    let known = |tool: &str, path: &str| KNOWN_LINT.iter().any(|(t, p)| *t == tool && *p == path);
    let unexplained: Vec<&(String, String, String)> =
        problems.iter().filter(|(level, tool, path)| level != "Warning" || !known(tool, path)).collect();
    assert!(unexplained.is_empty(), "the Inspector's --strict lint found schema problems {unexplained:?}:\n{stderr}");
}

/// Lint warnings that are the contract: (tool, schema path).
const KNOWN_LINT: &[(&str, &str)] = &[
    // The reference's `data` is any JSON value (object, array, string, number, ...): a schema
    // with no type keyword says exactly that.
    ("rw_checkpoint", "inputSchema.properties.data"),
];

/// The `--strict` lint's findings: (Warning|Error, tool, schema path).
fn lint_problems(stderr: &str) -> Vec<(String, String, String)> {
    let mut found = Vec::new();
    let mut lines = stderr.lines();
    while let Some(line) = lines.next() {
        for level in ["Warning", "Error"] {
            if let Some(tool) = line.strip_prefix(&format!("{level}: tool \"")) {
                let tool = tool.trim_end_matches('"').to_string();
                let path = lines.next().and_then(|l| l.trim().strip_prefix("Path: ")).unwrap_or("?").to_string();
                found.push((level.to_string(), tool, path));
            }
        }
    }
    let summary = stderr.lines().find(|l| l.contains(" errors, ") || l.contains(" error, "));
    assert!(summary.is_none_or(|s| s.starts_with("0 errors")), "the lint reports errors: {summary:?}");
    found
}

#[test]
fn inspector_calls_a_tool_and_sees_a_refusal_as_is_error() {
    let ws = Ws::new();
    let call = |args: &str| {
        inspect(
            &ws,
            &["--format", "json", "--method", "tools/call", "--tool-name", "rw_safe_write", "--tool-args-json", args],
        )
    };
    let out = call(r#"{"path": "hello.txt", "content": "hello\n"}"#);
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "tools/call failed ({}):\n{stdout}\n{stderr}", out.status);
    let answer: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(answer["result"]["structuredContent"]["ok"], true, "{stdout}");
    assert_eq!(ws.read("hello.txt").unwrap(), b"hello\n");
    // The same create again: refused, which the Inspector reports as isError (exit code 5).
    let out = call(r#"{"path": "hello.txt", "content": "again\n"}"#);
    let (stdout, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(5), "a refusal is isError:true (exit 5):\n{stdout}\n{stderr}");
    let answer: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(answer["result"]["isError"], true, "{stdout}");
    assert_eq!(answer["result"]["structuredContent"]["error"], "stale_precondition", "{stdout}");
    assert!(stderr.contains("tool_is_error"), "{stderr}");
    assert_eq!(ws.read("hello.txt").unwrap(), b"hello\n");
}

/// What the Inspector's lint checks, in-process: no input schema uses a type array (an optional
/// field is just left out of `required`).
#[test]
fn no_input_schema_uses_a_type_array() {
    fn walk(value: &serde_json::Value, at: &str) {
        match value {
            serde_json::Value::Object(map) => {
                assert!(!map.get("type").is_some_and(|t| t.is_array()), "a type array at {at}: {value}");
                for (key, inner) in map {
                    walk(inner, &format!("{at}.{key}"));
                }
            }
            serde_json::Value::Array(items) => items.iter().for_each(|item| walk(item, at)),
            _ => {}
        }
    }
    let mcp = crate::support::mcp::Mcp::start();
    for tool in mcp.tools_json() {
        walk(&tool["inputSchema"], tool["name"].as_str().unwrap());
    }
}
