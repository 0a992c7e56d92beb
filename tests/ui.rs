//! Issue 17, item 6: `rwfs ui` over HTTP (the token, Host and Origin checks, pagination, a
//! rewind by POST changing the files on disk) and in a real browser (Debian's chromium driven
//! through chromedriver by `integration/ui/browser.py`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};

use serde_json::{Value, json};

use rwfs::engine::{Engine, WriteMode};

use crate::support::mount::rwfs;
use crate::support::{Ws, in_session};

fn write_as(engine: &Engine, path: &str, bytes: &[u8], session: &str) {
    let actor = in_session(session);
    let req =
        rwfs::engine::WriteRequest { path, content: bytes, mode: WriteMode::Overwrite, expect: None, actor: &actor };
    engine.safe_write(&req).unwrap();
}

/// A scripted history: `setup` writes 12 files, `agent` rewrites 5 of them and creates one.
fn scripted(ws: &Ws) {
    let engine = ws.open();
    for i in 0..12 {
        write_as(&engine, &format!("src/f{i}.txt"), format!("one\ntwo {i}\nthree\n").as_bytes(), "setup");
    }
    for i in 0..5 {
        write_as(&engine, &format!("src/f{i}.txt"), format!("one\nTWO {i} (agent)\nthree\n").as_bytes(), "agent");
    }
    write_as(&engine, "src/new.txt", b"made by the agent\n", "agent");
    engine.close().unwrap();
}

/// `rwfs ui` on the workspace; its address and token.
struct Page {
    child: Child,
    addr: String,
    token: String,
}

impl Page {
    fn start(ws: &Ws) -> Page {
        let mut child =
            rwfs().arg("-w").arg(ws.path()).arg("ui").stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let url =
            line.split_whitespace().find(|w| w.starts_with("http://")).unwrap_or_else(|| panic!("no URL in {line:?}"));
        let (base, token) = url.split_once("/#token=").unwrap();
        Page { child, addr: base.trim_start_matches("http://").to_string(), token: token.to_string() }
    }

    fn url(&self) -> String {
        format!("http://{}/#token={}", self.addr, self.token)
    }

    /// One request; status and body.
    fn request(&self, method: &str, target: &str, headers: &[(&str, &str)], body: &str) -> (u16, String) {
        let mut stream = TcpStream::connect(&self.addr).unwrap();
        let mut head = format!("{method} {target} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
        if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
            head.push_str(&format!("Host: {}\r\n", self.addr));
        }
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        stream.write_all(format!("{head}\r\n{body}").as_bytes()).unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        let status = response.split_whitespace().nth(1).unwrap().parse().unwrap();
        let body = response.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        // Chunked bodies: the JSON is the one chunk between the size lines.
        let body = if response.to_ascii_lowercase().contains("transfer-encoding: chunked") {
            body.lines()
                .filter(|l| !l.is_empty() && !l.chars().all(|c| c.is_ascii_hexdigit()))
                .collect::<Vec<_>>()
                .join("\n")
        } else {
            body.to_string()
        };
        (status, body)
    }

    fn api(&self, method: &str, target: &str, body: &str) -> Value {
        let auth = format!("Bearer {}", self.token);
        let (status, text) = self.request(method, target, &[("Authorization", &auth)], body);
        assert_eq!(status, 200, "{method} {target}: {text}");
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{target}: {e}: {text}"))
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn the_page_compares_no_version_over_its_cap_and_says_so() {
    let ws = Ws::new();
    let engine = ws.open();
    write_as(&engine, "big.txt", &crate::history::big_text("line 00000007"), "setup");
    write_as(&engine, "big.txt", &crate::history::big_text("seven"), "agent");
    engine.close().unwrap();
    let page = Page::start(&ws);
    let diff = page.api("GET", "/api/diff?path=big.txt", "");
    assert_eq!(diff["unified"], "", "{diff}");
    assert!(diff["note"].as_str().unwrap().contains("not compared"), "{diff}");
    assert_eq!(diff["from_bytes"], crate::history::big_text("line 00000007").len());
}

#[test]
fn the_api_needs_the_token_refuses_other_origins_and_hosts_pages_the_journal_and_rewinds_by_post() {
    let ws = Ws::new();
    scripted(&ws);
    let page = Page::start(&ws);
    let auth = format!("Bearer {}", page.token);

    // The page itself carries no data; every API route needs the token.
    assert_eq!(page.request("GET", "/", &[], "").0, 200);
    for target in ["/api/sessions", "/api/rows?limit=5", "/api/history?path=src/f1.txt"] {
        assert_eq!(page.request("GET", target, &[], "").0, 401, "{target} without a token");
        assert_eq!(page.request("GET", target, &[("Authorization", "Bearer wrong")], "").0, 401, "{target}");
    }
    let post = json!({"session": "agent", "confirm": true}).to_string();
    assert_eq!(page.request("POST", "/api/rewind", &[], &post).0, 401, "a rewind without the token");
    let evil = [("Authorization", auth.as_str()), ("Origin", "http://evil.example")];
    assert_eq!(page.request("POST", "/api/rewind", &evil, &post).0, 403, "another site's page is refused");
    let rebound = [("Authorization", auth.as_str()), ("Host", "evil.example:80")];
    assert_eq!(page.request("GET", "/api/sessions", &rebound, "").0, 403, "a non-loopback Host is refused");
    assert_eq!(ws.read("src/f1.txt").unwrap(), b"one\nTWO 1 (agent)\nthree\n", "nothing was rewound");
    let same_origin = [("Authorization", auth.as_str()), ("Origin", &format!("http://{}", page.addr))];
    assert_eq!(page.request("GET", "/api/sessions", &same_origin, "").0, 200, "the page's own origin");

    // Pagination: pages of 4 rows, newest first, cover the journal once.
    let all = page.api("GET", "/api/rows?limit=500", "")["rows"].as_array().unwrap().clone();
    assert!(all.len() >= 18, "{} rows", all.len());
    let mut seen: Vec<Value> = Vec::new();
    let mut target = "/api/rows?limit=4".to_string();
    loop {
        let p = page.api("GET", &target, "");
        let rows = p["rows"].as_array().unwrap();
        assert!(rows.len() <= 4);
        seen.splice(0..0, rows.iter().cloned());
        match p["next"].as_u64() {
            Some(before) => target = format!("/api/rows?limit=4&before={before}"),
            None => break,
        }
    }
    assert_eq!(seen, all, "the pages, joined, are the journal in order");
    let agent = page.api("GET", "/api/rows?limit=500&session=agent", "");
    assert_eq!(agent["rows"].as_array().unwrap().len(), 6);

    let sessions = page.api("GET", "/api/sessions", "");
    let names: Vec<&str> = sessions["sessions"].as_array().unwrap().iter().filter_map(|s| s["name"].as_str()).collect();
    assert!(names.contains(&"setup") && names.contains(&"agent"), "{names:?}");
    let diff = page.api("GET", "/api/diff?path=src%2Ff1.txt", "");
    assert_eq!(
        diff["unified"].as_str().unwrap().lines().filter(|l| l.starts_with('+') && !l.starts_with("+++")).count(),
        1
    );
    assert_eq!(page.request("GET", "/api/blame?path=src%2Ff1.txt", &[], "").0, 401, "blame needs the token too");
    let blame = page.api("GET", "/api/blame?path=src%2Ff1.txt", "");
    let sessions: Vec<&str> =
        blame["lines"].as_array().unwrap().iter().map(|l| l["origin"]["session"].as_str().unwrap()).collect();
    assert_eq!((sessions, blame["total_lines"].as_u64()), (vec!["setup", "agent", "setup"], Some(3)), "{blame}");

    // The preview changes nothing; the confirmed POST rewinds the agent's files on disk.
    let plan = page.api("POST", "/api/rewind", &json!({"session": "agent"}).to_string());
    assert_eq!(plan["steps"].as_array().unwrap().len(), 6, "{plan}");
    assert_eq!(ws.read("src/f1.txt").unwrap(), b"one\nTWO 1 (agent)\nthree\n");
    let done = page.api("POST", "/api/rewind", &post);
    assert_eq!(done["applied"], 6, "{done}");
    for i in 0..5 {
        assert_eq!(ws.read(&format!("src/f{i}.txt")).unwrap(), format!("one\ntwo {i}\nthree\n").as_bytes());
    }
    assert_eq!(ws.read("src/new.txt"), None, "the file the agent created is removed");
}

impl Page {
    /// The first event of `/api/feed?after=OFFSET`: its `data:` line.
    fn first_feed_event(&self, offset: u64) -> String {
        let event = self.first_feed_event_raw(offset);
        event.split_once("data: ").map(|(_, data)| data.to_string()).unwrap_or_else(|| panic!("{event}"))
    }
}

#[test]
fn the_feed_from_an_offset_inside_a_row_starts_at_the_next_whole_row() {
    let ws = Ws::new();
    scripted(&ws);
    let journal = std::fs::read_to_string(ws.abs(".resilient_write/journal.jsonl")).unwrap();
    let lines: Vec<&str> = journal.lines().collect();
    let page = Page::start(&ws);
    let second = lines[0].len() as u64 + 1;
    for (offset, want) in
        [(0, lines[0]), (5, lines[1]), (second - 1, lines[1]), (second, lines[1]), (second + 7, lines[2])]
    {
        let event = page.first_feed_event(offset);
        assert!(serde_json::from_str::<Value>(&event).is_ok(), "after={offset}: {event}");
        assert_eq!(event, want, "after={offset}");
    }
}

#[test]
fn the_page_answers_for_a_file_the_mount_hides_as_for_one_that_never_existed() {
    let ws = Ws::new();
    scripted(&ws);
    let page = Page::start(&ws);
    let auth = format!("Bearer {}", page.token);
    let ask = |route: &str, path: &str| {
        let target = format!("{route}?path={}", path.replace('/', "%2F"));
        let (status, body) = page.request("GET", &target, &[("Authorization", &auth)], "");
        (status, body.replace(path, "PATH"))
    };
    for route in ["/api/history", "/api/diff"] {
        let never = ask(route, "never.txt");
        for hidden in [".resilient_write/keys/journal.key", ".resilient_write/keys/journal.head"] {
            assert!(ws.abs(hidden).exists());
            assert_eq!(ask(route, hidden), never, "{route} {hidden}");
        }
        assert_ne!(ask(route, ".resilient_write/journal.jsonl"), never, "{route}: shown read-only by the mount");
    }
}

#[test]
fn in_a_browser_the_page_shows_the_session_opens_a_diff_and_the_blame_and_rewinds() {
    let ws = Ws::new();
    scripted(&ws);
    let page = Page::start(&ws);
    let shot = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target").join("ui-timeline.png");
    in_browser(&page, "browser.py", &shot);
    for i in 0..5 {
        assert_eq!(
            ws.read(&format!("src/f{i}.txt")).unwrap(),
            format!("one\ntwo {i}\nthree\n").as_bytes(),
            "rewound from the page"
        );
    }
    assert_eq!(ws.read("src/new.txt"), None);
    assert!(std::fs::metadata(&shot).unwrap().len() > 1000, "the timeline's screenshot is saved");
}

/// Run `integration/ui/SCRIPT` on the page in Debian's chromium (`SHOT`: its screenshot).
fn in_browser(page: &Page, script: &str, shot: &std::path::Path) {
    for program in ["chromium", "chromedriver"] {
        assert!(
            std::process::Command::new("sh")
                .args(["-c", &format!("command -v {program}")])
                .output()
                .unwrap()
                .status
                .success(),
            "{program} is needed (scripts/test installs Debian's chromium and chromium-driver)"
        );
    }
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("integration/ui").join(script);
    let out = std::process::Command::new("python3").arg(script).arg(page.url()).arg(shot).output().unwrap();
    assert!(
        out.status.success(),
        "browser script failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn in_a_browser_a_person_approves_and_denies_parked_versions_behind_the_token_and_origin_checks() {
    let ws = Ws::new();
    let policy = "protect:\n  - name: docs\n    paths: [\"docs/**\"]\n    write: approve\n    create: approve\n";
    ws.put(".resilient_write/policy.yaml", policy.as_bytes());
    ws.put("docs/a.md", b"# A\n");
    {
        let engine = ws.open();
        for (path, content) in [("docs/a.md", &b"# B\n"[..]), ("docs/b.md", b"# new\n")] {
            let err = crate::support::write(&engine, path, content, WriteMode::Overwrite).unwrap_err();
            assert_eq!(err.code(), "approval_required", "{err}");
        }
    }
    let page = Page::start(&ws);
    let pending = page.api("GET", "/api/approvals", "");
    let pending = pending["approvals"].as_array().unwrap();
    assert_eq!(pending.len(), 2, "{pending:?}");
    assert!(pending[0]["diff"]["unified"].as_str().unwrap().contains("+# B"), "{pending:?}");
    // A decision needs the token and the page's own origin.
    let approve = json!({"id": pending[0]["id"], "decision": "approve"}).to_string();
    assert_eq!(page.request("GET", "/api/approvals", &[], "").0, 401);
    assert_eq!(page.request("POST", "/api/approvals", &[], &approve).0, 401, "an approval without the token");
    let auth = format!("Bearer {}", page.token);
    let evil = [("Authorization", auth.as_str()), ("Origin", "http://evil.example")];
    assert_eq!(page.request("POST", "/api/approvals", &evil, &approve).0, 403, "another site's page is refused");
    assert_eq!(ws.read("docs/a.md").unwrap(), b"# A\n", "nothing approved");

    let shot = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target").join("ui-approvals.png");
    in_browser(&page, "approve.py", &shot);
    assert_eq!(ws.read("docs/a.md").unwrap(), b"# B\n", "approved from the page");
    assert_eq!(ws.read("docs/b.md"), None, "denied from the page");
    let states: Vec<String> =
        ws.workspace().approvals().unwrap().iter().map(|a| format!("{} {}", a.path, a.state.as_str())).collect();
    assert_eq!(states, ["docs/a.md approved", "docs/b.md denied"]);
    let decided = ws.rows().into_iter().filter(|r| r.op() == rwfs::journal::Op::Approval).count();
    assert_eq!(decided, 2);
}

#[test]
fn mounted_the_daemon_serves_the_page_beside_mcp_over_http_and_its_rewind_is_seen_through_the_mount() {
    let ws = Ws::new();
    scripted(&ws);
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let addr = format!("127.0.0.1:{port}");
    let mnt = crate::support::mount::Mounted::with(ws, true, &["--mcp-http", &addr]);
    // `rwfs ui` on the mounted workspace names the daemon's page, with the MCP token.
    let page = Page::start(&mnt.ws);
    assert_eq!(page.addr, addr);
    let token = std::fs::read_to_string(mnt.ws.abs(".resilient_write/mcp-http.token"));
    assert!(token.is_err(), "the token stays hidden through the mount");
    assert_eq!(page.request("GET", "/", &[], "").0, 200, "the page itself needs no token");
    assert_eq!(page.request("GET", "/api/sessions", &[], "").0, 401);
    assert_eq!(page.request("POST", "/mcp", &[], "{}").0, 401, "MCP keeps its token");
    let rows = page.api("GET", "/api/rows?limit=3&session=agent", "");
    assert_eq!(rows["rows"].as_array().unwrap().len(), 3);
    assert!(rows["next"].as_u64().is_some());
    let done = page.api("POST", "/api/rewind", &json!({"session": "agent", "confirm": true}).to_string());
    assert_eq!(done["applied"], 6, "{done}");
    assert_eq!(mnt.read("src/f3.txt").unwrap(), b"one\ntwo 3\nthree\n", "the mount sees the rewind at once");
    assert!(mnt.read("src/new.txt").is_err());
}

#[test]
fn mounted_without_mcp_http_the_daemon_serves_the_page_with_the_refusal_and_without_swap_rows() {
    let ws = Ws::new();
    scripted(&ws);
    let mnt = crate::support::mount::Mounted::with(ws, true, &[]);
    // Through the mount, as a program under `rwfs run` does: a refusal and a vim swap file.
    assert!(mnt.write("settings.py", crate::support::aws_secret_line(7).as_bytes()).is_err(), "refused");
    mnt.write(".notes.txt.swp", b"vim swap").unwrap();
    mnt.write("notes.txt", b"saved\n").unwrap();
    let page = Page::start(&mnt.ws);
    assert_eq!(page.request("GET", "/api/sessions", &[], "").0, 401, "the page's token is its own");

    let rows = page.api("GET", "/api/rows?limit=500", "");
    let paths: Vec<&str> = rows["rows"].as_array().unwrap().iter().filter_map(|r| r["path"].as_str()).collect();
    assert!(paths.contains(&"notes.txt") && paths.contains(&"settings.py"), "{paths:?}");
    assert!(!paths.contains(&".notes.txt.swp"), "the swap file's rows are left out, as rwfs log does: {paths:?}");
    let all = page.api("GET", "/api/rows?limit=500&all=1", "");
    assert!(all["rows"].as_array().unwrap().iter().any(|r| r["path"] == ".notes.txt.swp"), "all=1 shows them");
    // The feed marks them hidden instead of dropping them (the page counts their bytes).
    let swap_at = {
        let journal = crate::support::mount::rwfs()
            .args(["log", "--json", "-n", "0", "--all"])
            .current_dir(mnt.mountpoint())
            .output()
            .unwrap();
        let text = String::from_utf8(journal.stdout).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let i = lines.iter().position(|l| l.contains(".notes.txt.swp")).expect("the swap file's row");
        lines[..i].iter().map(|l| l.len() as u64 + 1).sum::<u64>()
    };
    let event = page.first_feed_event_raw(swap_at);
    assert!(event.starts_with("event: hidden\ndata: ") && event.contains(".notes.txt.swp"), "{event}");

    // "why refused": the envelope's rule, line and action, and what to do, never the secret.
    let block = rows["rows"].as_array().unwrap().iter().find(|r| r["op"] == "block").expect("a block row");
    let shown = page.api("GET", &format!("/api/blocked?seq={}", block["seq"]), "")["envelope"].clone();
    assert_eq!(shown["path"], "settings.py", "{shown}");
    assert!(shown["message"].as_str().is_some_and(|m| m.contains("aws-secret-access-key")), "{shown}");
    let finding = &shown["findings"][0];
    assert_eq!(
        (finding["rule"].as_str(), finding["line"].as_u64()),
        (Some("aws-secret-access-key"), Some(1)),
        "{shown}"
    );
    assert_eq!(shown["suggested_actions"][0]["action"], "redact", "{shown}");
    let secret = crate::support::aws_secret_line(7);
    let key = secret.split('"').nth(1).unwrap();
    assert!(!shown.to_string().contains(key), "the page never shows the secret");
}

impl Page {
    /// The first event of `/api/feed?after=OFFSET`, whole (its `event:` line included).
    fn first_feed_event_raw(&self, offset: u64) -> String {
        let mut stream = TcpStream::connect(&self.addr).unwrap();
        stream.set_read_timeout(Some(std::time::Duration::from_secs(30))).unwrap();
        let head = format!(
            "GET /api/feed?after={offset} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n\r\n",
            self.addr, self.token
        );
        stream.write_all(head.as_bytes()).unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let text = String::from_utf8_lossy(&got).into_owned();
            // After the headers, the first chunk: its size line, then the event up to its blank line.
            if let Some((_, body)) = text.split_once("\r\n\r\n")
                && let Some((_, chunk)) = body.split_once("\r\n")
                && let Some((event, _)) = chunk.split_once("\n\n")
            {
                return event.to_string();
            }
            let n = stream.read(&mut buf).expect("the feed sends an event");
            assert!(n > 0, "the feed ended: {text}");
            got.extend_from_slice(&buf[..n]);
        }
    }
}
