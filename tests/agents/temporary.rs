//! Temporary names resolve to their target (`rwfs::temporary`): a Claude Code-style save
//! (`X.tmp.<pid>.<hex>`, fsync, rename) is judged as `X` (its language, its retry budget), its
//! refusal names `X`, and `rwfs log` shows one row per save.

use std::process::Command;

use serde_json::Value;

use crate::support::aws_secret_line;
use crate::support::mount::{Mounted, rwfs};

/// Write `bytes` to `rel` as Claude Code's Write tool does: a temporary file beside it, fsync,
/// rename over it. The errno of the refusal, if any (the temporary file is gone then).
fn claude_style_save(m: &Mounted, rel: &str, bytes: &[u8], hex: &str) -> Option<i32> {
    use std::io::Write;
    let temp = format!("{rel}.tmp.{}.{hex}", std::process::id());
    let saved = (|| {
        let mut f = std::fs::OpenOptions::new().write(true).create_new(true).open(m.path(&temp))?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(m.path(&temp), m.path(rel))
    })();
    match saved {
        Ok(()) => None,
        Err(e) => {
            let _ = std::fs::remove_file(m.path(&temp));
            Some(e.raw_os_error().unwrap_or(0))
        }
    }
}

fn latest(m: &Mounted) -> Value {
    serde_json::from_slice(&m.read(".resilient_write/rejections/latest.json").unwrap()).unwrap()
}

#[test]
fn a_temporary_copy_is_judged_counted_and_named_as_the_file_it_replaces() {
    let m = Mounted::new();
    m.write("app/config.py", b"REGION = \"eu-west-1\"\n").unwrap();
    let secret = aws_secret_line(61);
    let refused = claude_style_save(&m, "app/config.py", secret.as_bytes(), "0123456789ab");
    assert_eq!(refused, Some(nix::libc::EACCES));
    assert_eq!(m.backing("app/config.py").unwrap(), b"REGION = \"eu-west-1\"\n");

    let envelope = latest(&m);
    let context = &envelope["context"];
    assert_eq!(context["path"], "app/config.py", "{context}");
    assert_eq!(context["temporary_for"], "app/config.py", "{context}");
    assert!(context["written_as"].as_str().is_some_and(|w| w.starts_with("app/config.py.tmp.")), "{context}");
    let replacement = context["findings"][0]["replacement"].as_str().unwrap();
    assert!(
        replacement.contains("os.environ[\"AWS_SECRET_ACCESS_KEY\"]"),
        "Python's syntax for a .py file: {replacement}"
    );
    assert_eq!(envelope["retry_budget"], 3);

    // The same bytes again under a fresh temporary name: the same file's budget counts down.
    assert_eq!(claude_style_save(&m, "app/config.py", secret.as_bytes(), "ba9876543210"), Some(nix::libc::EACCES));
    assert_eq!(latest(&m)["retry_budget"], 2, "one budget for the file, whatever the temporary name");

    let blocks: Vec<_> = m.ws.rows().into_iter().filter(|r| r.op() == rwfs::journal::Op::Block).collect();
    assert_eq!(blocks.len(), 2);
    for block in &blocks {
        assert_eq!(block.path, "app/config.py", "{block:?}");
        assert!(block.from.as_deref().is_some_and(|f| f.starts_with("app/config.py.tmp.")), "{block:?}");
    }
}

#[test]
fn a_save_through_a_temporary_copy_is_one_row_in_rwfs_log() {
    let m = Mounted::new();
    m.write("notes.md", b"# notes\n").unwrap();
    assert_eq!(claude_style_save(&m, "notes.md", b"# notes\nsecond line\n", "00aa11bb22cc"), None);
    assert_eq!(m.backing("notes.md").unwrap(), b"# notes\nsecond line\n");
    let log = |all: bool| {
        let mut cmd = rwfs();
        cmd.args(["log", "--json", "-w"]).arg(m.ws.path());
        if all {
            cmd.arg("--all");
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .collect::<Vec<_>>()
    };
    let rows = log(false);
    let paths: Vec<(&str, &str)> =
        rows.iter().map(|r| (r["op"].as_str().unwrap(), r["path"].as_str().unwrap())).collect();
    assert_eq!(paths, [("create", "notes.md"), ("rename", "notes.md")], "one row per save: {rows:?}");
    assert!(
        log(true).iter().any(|r| r["path"].as_str().is_some_and(|p| p.starts_with("notes.md.tmp."))),
        "--all shows it"
    );
}

#[test]
fn sed_i_is_judged_in_the_language_of_the_file_it_edits() {
    let m = Mounted::new();
    m.write("app/settings.py", b"REGION = \"eu\"\n").unwrap();
    let secret = aws_secret_line(62);
    let out = Command::new("sed")
        .args(["-i", &format!("s|REGION = \"eu\"|{}|", secret.trim_end().replace('|', "\\|"))])
        .arg(m.path("app/settings.py"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let envelope = latest(&m);
    assert_eq!(envelope["context"]["path"], "app/settings.py", "{envelope}");
    assert!(envelope["context"]["written_as"].as_str().is_some_and(|w| w.starts_with("app/sed")), "{envelope}");
    let replacement = envelope["context"]["findings"][0]["replacement"].as_str().unwrap();
    assert!(replacement.contains("os.environ["), "{replacement}");
}
