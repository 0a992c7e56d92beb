//! The gate: content the policy blocks never reaches the tree, is quarantined, journaled and
//! explained, and identical retries spend the retry budget.

use rwfs::engine::Options;
use rwfs::engine::{Engine, WriteMode};
use rwfs::journal::Op;
use rwfs::{ErrorKind, Reason};
use serde_json::Value;

use crate::support::*;

fn config(secret_line: &str) -> Vec<u8> {
    format!("import os\nREGION = \"eu-west-1\"\n{secret_line}DEBUG = False\n").into_bytes()
}

#[test]
fn blocked_content_never_reaches_the_tree_and_is_kept_and_explained() {
    let ws = Ws::new();
    let engine = ws.open();
    let before = b"REGION = \"eu-west-1\"\n";
    write(&engine, "app/config.py", before, WriteMode::Create).unwrap();
    let refused = config(&aws_secret_line(7));

    let err = write(&engine, "app/config.py", &refused, WriteMode::Overwrite).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Blocked);
    assert_eq!(err.path(), Some("app/config.py"));
    let Reason::Blocked(rejection) = err.reason() else { panic!("{err:?}") };
    assert_eq!(rejection.rules, [("aws-secret-access-key".to_string(), 3)]);
    assert_eq!(rejection.sha256, sha(&refused));

    assert_eq!(ws.read("app/config.py").unwrap(), before, "the tree keeps the committed version");
    assert_eq!(ws.object(&rejection.sha256).unwrap(), refused, "the refused bytes are in objects/");

    let latest = ws.read(".resilient_write/rejections/latest.json").unwrap();
    assert_eq!(ws.read(&format!(".resilient_write/rejections/{}.json", rejection.id)).unwrap(), latest);
    let envelope: Value = serde_json::from_slice(&latest).unwrap();
    for key in [
        "ok",
        "schema_version",
        "error",
        "reason_hint",
        "detected_patterns",
        "suggested_action",
        "retry_budget",
        "context",
    ] {
        assert!(envelope.get(key).is_some(), "envelope lacks {key}: {envelope}");
    }
    assert_eq!(envelope["ok"], false);
    assert_eq!(envelope["error"], "blocked");
    assert_eq!(envelope["reason_hint"], "content_filter");
    assert_eq!(envelope["suggested_action"], "redact");
    assert_eq!(envelope["retry_budget"], 3);
    assert_eq!(envelope["context"]["path"], "app/config.py");
    let finding = &envelope["context"]["findings"][0];
    assert_eq!(finding["rule"], "aws-secret-access-key");
    assert_eq!(finding["line"], 3);
    assert_eq!(finding["replacement"], "os.environ[\"AWS_SECRET_ACCESS_KEY\"]");
    let text = String::from_utf8(latest).unwrap();
    let secret = aws_secret_line(7);
    let value = secret.split('"').nth(1).unwrap();
    assert!(!text.contains(value), "the envelope never shows the secret");

    let row = ws.rows().pop().unwrap();
    assert_eq!(row.op(), Op::Block);
    assert_eq!(row.path, "app/config.py");
    assert_eq!(row.sha256, Some(rejection.sha256));
    assert_eq!(row.prev_sha256, Some(sha(before)));
    assert_eq!(row.pid, Some(std::process::id()));
    assert!(row.reason.unwrap().contains("aws-secret-access-key"));

    // The fix the envelope suggests commits.
    let fixed = config("AWS_SECRET_ACCESS_KEY = os.environ[\"AWS_SECRET_ACCESS_KEY\"]\n");
    write(&engine, "app/config.py", &fixed, WriteMode::Overwrite).unwrap();
    assert_eq!(ws.read("app/config.py").unwrap(), fixed);
}

#[test]
fn identical_retries_spend_the_budget_then_are_refused_outright() {
    let ws = Ws::new();
    let engine = ws.open();
    let refused = config(&aws_secret_line(8));
    let budget = |e: &rwfs::Error| match e.reason() {
        Reason::Blocked(r) => serde_json::from_str::<Value>(&r.envelope).unwrap()["retry_budget"].as_u64().unwrap(),
        other => panic!("{other:?}"),
    };
    let budgets: Vec<u64> =
        (0..4).map(|_| budget(&write(&engine, "c.py", &refused, WriteMode::Overwrite).unwrap_err())).collect();
    assert_eq!(budgets, [3, 2, 1, 0]);
    let rows = ws.rows().len();
    let spent = assert_reason(write(&engine, "c.py", &refused, WriteMode::Overwrite), "retry_budget_exhausted");
    assert_eq!(spent.kind(), ErrorKind::Blocked);
    // Refused outright, and still journaled and explained like every refusal.
    let row = ws.rows().pop().unwrap();
    assert_eq!((ws.rows().len(), row.op()), (rows + 1, Op::Block), "a refusal past the budget has its row");
    let Reason::RetryBudgetSpent(rejection) = spent.reason() else { unreachable!() };
    let envelope: Value = serde_json::from_str(&rejection.envelope).unwrap();
    assert_eq!((envelope["retry_budget"].as_u64(), envelope["suggested_action"].as_str()), (Some(0), Some("abort")));
    assert_eq!(envelope["context"]["reason"], "retry_budget_exhausted");
    assert_eq!(row.sha256, Some(rejection.sha256));
    // Different content, or the same content elsewhere, has its own budget.
    let other = config(&aws_secret_line(9));
    assert_eq!(budget(&write(&engine, "c.py", &other, WriteMode::Overwrite).unwrap_err()), 3);
    assert_eq!(budget(&write(&engine, "d.py", &refused, WriteMode::Overwrite).unwrap_err()), 3);
    assert_eq!(ws.read("c.py"), None);
}

#[test]
fn appends_and_restores_pass_the_gate_too() {
    let ws = Ws::new();
    let engine = ws.open();
    write(&engine, "log.txt", b"start\n", WriteMode::Create).unwrap();
    let line = aws_secret_line(10);
    let err = write(&engine, "log.txt", line.as_bytes(), WriteMode::Append).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Blocked, "the whole appended version is judged");
    assert_eq!(ws.read("log.txt").unwrap(), b"start\n");
    let Reason::Blocked(rejection) = err.reason() else { unreachable!() };
    let err =
        engine.restore("log.txt", &rwfs::history::RestoreTo::Sha(rejection.sha256.to_hex()), &actor()).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::Blocked | ErrorKind::StalePrecondition), "{err:?}");
    assert_eq!(ws.read("log.txt").unwrap(), b"start\n", "a quarantined draft cannot be restored into the tree");
}

#[test]
fn the_policy_decides_and_a_broken_policy_changes_nothing() {
    let ws = Ws::new();
    ws.put(".resilient_write/policy.yaml", b"allow_paths: [\"fixtures/**\"]\n");
    let engine = ws.open();
    let content = config(&aws_secret_line(11));
    write(&engine, "fixtures/creds.py", &content, WriteMode::Create).unwrap();
    assert_eq!(write(&engine, "src/creds.py", &content, WriteMode::Create).unwrap_err().kind(), ErrorKind::Blocked);
    drop(engine);

    ws.put(".resilient_write/policy.yaml", b"rules:\n  - action: maybe\n");
    let rows = ws.rows().len();
    let err = Engine::open(ws.path(), &Options::default()).unwrap_err();
    assert_eq!(err.reason().code(), "bad_policy", "{err}");
    assert!(err.to_string().contains("line 2"), "{err}");
    assert_eq!(ws.rows().len(), rows);
}

#[test]
fn content_larger_than_the_scan_limit_is_judged_in_windows() {
    let ws = Ws::new();
    let engine = ws.open();
    let size = rwfs::engine::SCAN_MAX + (1 << 20);
    for at in [100, rwfs::engine::SCAN_MAX - 30, size - 200] {
        // A secret at the start, across the first window's end, and in the last window.
        let mut big = vec![b'x'; size];
        for (i, chunk) in big.chunks_mut(80).enumerate() {
            if i % 2 == 0 {
                *chunk.last_mut().unwrap() = b'\n';
            }
        }
        let line = aws_secret_line(at as u64);
        let at = big[..at].iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        big.splice(at..at + line.len(), line.bytes());
        let err = write(&engine, "big.txt", &big, WriteMode::Overwrite).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Blocked, "secret at byte {at} of {size}");
        assert!(ws.read("big.txt").is_none());
        let Reason::Blocked(rejection) = err.reason() else { panic!("{err:?}") };
        assert_eq!(ws.object(&rejection.sha256).unwrap().len(), size, "the whole refused content is kept");
    }
    let clean = vec![b'y'; rwfs::engine::SCAN_MAX + 10];
    write(&engine, "big.txt", &clean, WriteMode::Overwrite).unwrap();
}

#[test]
fn retry_budget_scope_is_the_writer_s_posix_session_issue_16_item_1() {
    let ws = Ws::new();
    let engine = ws.open();
    let refused = config(&aws_secret_line(10));
    let write_as = |actor: &rwfs::journal::Actor| {
        let request = rwfs::engine::WriteRequest {
            path: "c.py",
            content: &refused,
            mode: WriteMode::Overwrite,
            expect: None,
            actor,
        };
        engine.safe_write(&request).unwrap_err()
    };
    let here = actor();
    while write_as(&here).reason().code() != "retry_budget_exhausted" {}
    // A process of this POSIX session (a command the same shell runs) shares the spent budget.
    let mut sibling = std::process::Command::new("sleep").arg("30").spawn().unwrap();
    let sibling_actor = rwfs::journal::Actor { pid: Some(sibling.id()), ..actor() };
    assert_eq!(write_as(&sibling_actor).reason().code(), "retry_budget_exhausted");
    // Another session (another terminal, another agent) starts fresh.
    let mut other = std::process::Command::new("setsid").args(["sleep", "30"]).spawn().unwrap();
    let other_actor = rwfs::journal::Actor { pid: Some(other.id()), ..actor() };
    std::thread::sleep(std::time::Duration::from_millis(200)); // setsid has run
    assert_eq!(write_as(&other_actor).reason().code(), "content_blocked");
    for child in [&mut sibling, &mut other] {
        child.kill().unwrap();
        child.wait().unwrap();
    }
}

#[test]
fn a_credential_already_in_the_committed_file_does_not_freeze_it_and_a_new_one_still_blocks() {
    // A file that held a credential before rwfs: an edit of another line commits, the old
    // credential stays where it was; a new credential is refused, and the envelope says the old
    // one is still there, and where.
    let ws = Ws::new();
    let old = aws_secret_line(100);
    ws.put("app/settings.py", &config(&old));
    let engine = ws.open();
    let edited = String::from_utf8(config(&old)).unwrap().replace("eu-west-1", "us-east-2");
    write(&engine, "app/settings.py", edited.as_bytes(), WriteMode::Overwrite).expect("an unrelated edit commits");
    assert_eq!(ws.read("app/settings.py").unwrap(), edited.as_bytes());
    // The same credential moved to another line is still the committed one.
    let moved = format!("{old}{}", edited.replace(&old, ""));
    write(&engine, "app/settings.py", moved.as_bytes(), WriteMode::Overwrite).expect("moving it commits");

    let new = aws_secret_line(101);
    let with_new = format!("{moved}{new}");
    let err = write(&engine, "app/settings.py", with_new.as_bytes(), WriteMode::Overwrite).unwrap_err();
    let Reason::Blocked(rejection) = err.reason() else { panic!("{err:?}") };
    assert_eq!(rejection.rules, [("aws-secret-access-key".to_string(), 5)], "only the new one blocks");
    let envelope: Value = serde_json::from_str(&rejection.envelope).unwrap();
    let findings = envelope["context"]["findings"].as_array().unwrap();
    let kept: Vec<(u64, bool, &str)> = findings
        .iter()
        .map(|f| {
            (f["line"].as_u64().unwrap(), f["already_committed"].as_bool().unwrap(), f["action"].as_str().unwrap())
        })
        .collect();
    assert_eq!(kept, [(1, true, "warn"), (5, false, "block")], "{envelope}");
    let message = envelope["context"]["message"].as_str().unwrap();
    assert!(message.contains("already holds aws-secret-access-key at line 1"), "{message}");
    assert_eq!(ws.read("app/settings.py").unwrap(), moved.as_bytes());
    // The same credential in another file is new there.
    let err = write(&engine, "app/other.py", &config(&old), WriteMode::Create).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Blocked);
}
