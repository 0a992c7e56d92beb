//! Encryption at rest (issue 30 item 4): refused drafts and kept versions holding a credential
//! are stored sealed in `objects/` under a key outside the workspace (`RWFS_KEY_FILE` here);
//! `show`, `restore` and `verify` read them back; a missing key is a typed error that breaks
//! nothing else; `rwfs gc --encrypt` seals a store written before. Every credential here is
//! generated (`aws_secret_line`), never a literal.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use serde_json::Value;

use rwfs::journal::Op;
use rwfs::sha::Sha256;

use crate::support::mount::{Mounted, rwfs};
use crate::support::*;

/// Findings of credentials warn instead of blocking: the version is committed, and kept sealed
/// once it leaves the tree.
const WARN: &str = "rules:\n  - kind: leak\n    action: warn\n";
/// Credentials allowed: kept versions are stored in plaintext (a store as before encryption).
const ALLOW: &str = "rules:\n  - kind: leak\n    action: allow\n";

/// A key file's place outside the workspace, and a generated credential.
struct Keyed {
    _dir: tempfile::TempDir,
    key: PathBuf,
    /// The credential's value alone (what must never be found in the state directory).
    value: String,
    /// A config file holding it.
    content: Vec<u8>,
}

fn keyed(seed: u64) -> Keyed {
    let dir = tempfile::Builder::new().prefix("rwfs-key-").tempdir().unwrap();
    let key = dir.path().join("keys").join("workspace.key");
    let line = aws_secret_line(seed);
    let value = line.split('"').nth(1).expect("a quoted value").to_string();
    let content = format!("# settings\nregion = \"eu-west-1\"\n{line}").into_bytes();
    Keyed { _dir: dir, key, value, content }
}

/// `rwfs ARGS --workspace WS` with the key file, `stdin` fed to it.
fn cli(ws: &Path, key: &Path, args: &[&str], stdin: &[u8]) -> Output {
    let mut child = rwfs()
        .args(args)
        .arg("--workspace")
        .arg(ws)
        .env("RWFS_KEY_FILE", key)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    child.wait_with_output().unwrap()
}

#[track_caller]
fn cli_ok(ws: &Path, key: &Path, args: &[&str], stdin: &[u8]) -> Vec<u8> {
    let out = cli(ws, key, args, stdin);
    assert!(
        out.status.success(),
        "rwfs {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// The files under the state directory that hold `needle`, by `grep -r`.
fn grep_state(ws: &Path, needle: &str) -> String {
    let out = std::process::Command::new("grep")
        .args(["-r", "-l", "-F", "-a", "-e", needle])
        .arg(ws.join(".resilient_write"))
        .output()
        .unwrap();
    assert!(out.status.code() == Some(0) || out.status.code() == Some(1), "grep failed: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The object file of `sha` in the backing tree.
fn object_path(ws: &Path, sha: &Sha256) -> PathBuf {
    let hex = sha.to_hex();
    ws.join(".resilient_write/objects").join(&hex[..2]).join(hex)
}

fn is_sealed(ws: &Path, sha: &Sha256) -> bool {
    std::fs::read(object_path(ws, sha)).unwrap().starts_with(b"RWFSSEAL")
}

fn verify(ws: &Path, key: &Path) -> Value {
    let out = cli(ws, key, &["verify", "--json"], b"");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("verify --json: {e}: {out:?}"))
}

#[test]
fn a_refused_write_through_the_mount_leaves_no_plaintext_in_the_state_directory() {
    let k = keyed(301);
    let m = Mounted::with_env(Ws::new(), false, &[], &[("RWFS_KEY_FILE", k.key.to_str().unwrap())]);
    let err = m.write("deploy.cfg", &k.content).expect_err("a credential is refused");
    assert_eq!(err.raw_os_error(), Some(nix::libc::EACCES), "{err}");
    let ws = m.ws.path();
    let block = m.ws.rows().into_iter().find(|r| r.op() == Op::Block).expect("a block row");
    let sha = block.sha256.expect("the refused draft's digest");
    assert_eq!(sha, Sha256::of(&k.content), "the journal names the plaintext's digest");
    assert!(is_sealed(ws, &sha), "the refused draft is stored sealed");
    assert_eq!(grep_state(ws, &k.value), "", "no file of the state directory holds the credential");
    assert_eq!(std::fs::metadata(&k.key).unwrap().permissions().mode() & 0o777, 0o600);
    assert_eq!(std::fs::metadata(k.key.parent().unwrap()).unwrap().permissions().mode() & 0o777, 0o700);
    assert_eq!(verify(ws, &k.key)["ok"], true, "verify opens and hashes the sealed draft");
}

#[test]
fn a_kept_version_holding_a_credential_is_sealed_restored_byte_for_byte_and_verified() {
    let k = keyed(302);
    let ws = Ws::new();
    ws.put(".resilient_write/policy.yaml", WARN.as_bytes());
    let m = Mounted::with_env(ws, false, &[], &[("RWFS_KEY_FILE", k.key.to_str().unwrap())]);
    m.write("deploy.cfg", &k.content).expect("a credential the policy warns about is written");
    m.write("deploy.cfg", b"# settings\nregion = \"eu-west-1\"\n").expect("the credential removed");
    let ws = m.ws.path();
    let sha = Sha256::of(&k.content);
    assert!(is_sealed(ws, &sha), "the version that left the tree held a credential: sealed");
    assert_eq!(grep_state(ws, &k.value), "");

    let report = verify(ws, &k.key);
    assert_eq!(report["ok"], true, "{report}");

    cli_ok(ws, &k.key, &["restore", "deploy.cfg", "--sha", &sha.to_hex()], b"");
    assert_eq!(m.read("deploy.cfg").unwrap(), k.content, "restored byte for byte");
    let diff = cli_ok(ws, &k.key, &["diff", "deploy.cfg", "--json"], b"");
    assert!(!diff.is_empty());

    // One flipped byte of the sealed object: verify finds it, and a read refuses it.
    m.write("deploy.cfg", b"# settings\n").unwrap();
    let path = object_path(ws, &sha);
    let mut sealed = std::fs::read(&path).unwrap();
    let at = sealed.len() - 20;
    sealed[at] ^= 0x01;
    std::fs::write(&path, &sealed).unwrap();
    let report = verify(ws, &k.key);
    assert_eq!(report["ok"], false, "{report}");
    let bad = report["bad_objects"].as_array().unwrap();
    assert_eq!(bad.len(), 1, "{report}");
    assert_eq!(bad[0]["name"], sha.to_hex());
    assert!(bad[0]["why"].as_str().unwrap().contains("does not open"), "{report}");
    let out = cli(ws, &k.key, &["show", &format!("deploy.cfg@{}", &sha.to_hex()[..12])], b"");
    assert!(!out.status.success());
}

#[test]
fn a_missing_key_is_reported_and_the_mount_still_works_for_clean_files() {
    let k = keyed(303);
    let env = [("RWFS_KEY_FILE", k.key.to_str().unwrap())];
    let ws = Ws::new();
    ws.put(".resilient_write/policy.yaml", WARN.as_bytes());
    let mut m = Mounted::with_env(ws, false, &[], &env);
    m.write("deploy.cfg", &k.content).unwrap();
    m.write("deploy.cfg", b"# settings\n").unwrap();
    let sha = Sha256::of(&k.content);
    assert!(is_sealed(m.ws.path(), &sha));
    m.unmount();
    std::fs::remove_file(&k.key).unwrap();
    m.remount();

    m.write("notes.md", b"# clean\n").expect("a clean file is written without the key");
    assert_eq!(m.read("notes.md").unwrap(), b"# clean\n");
    m.write("notes.md", b"# clean, again\n").expect("and overwritten");

    let out = cli(m.ws.path(), &k.key, &["show", &format!("deploy.cfg@{}", &sha.to_hex()[..12])], b"");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("is missing") && stderr.contains(k.key.to_str().unwrap()), "{stderr}");
    assert!(stderr.contains(&sha.to_hex()[..2]), "names the version: {stderr}");

    let report = verify(m.ws.path(), &k.key);
    let bad = report["bad_objects"].as_array().unwrap();
    assert_eq!(bad.len(), 1, "only the sealed version cannot be read: {report}");
    assert_eq!(bad[0]["name"], sha.to_hex());
    assert!(bad[0]["why"].as_str().unwrap().contains("missing"), "{report}");
    assert!(!k.key.exists(), "a lost key is not silently replaced by a new one");
}

#[test]
fn gc_encrypt_seals_the_plaintext_versions_of_a_store_written_before() {
    let k = keyed(304);
    let ws = Ws::new();
    ws.put(".resilient_write/policy.yaml", ALLOW.as_bytes());
    let path = ws.path();
    cli_ok(path, &k.key, &["write", "deploy.cfg"], &k.content);
    cli_ok(path, &k.key, &["write", "deploy.cfg"], b"# settings\n");
    cli_ok(path, &k.key, &["write", "notes.md"], b"one\n");
    cli_ok(path, &k.key, &["write", "notes.md"], b"two\n");
    let sha = Sha256::of(&k.content);
    assert!(!is_sealed(path, &sha), "credentials allowed: kept as before, in plaintext");
    assert_ne!(grep_state(path, &k.value), "");

    // The policy now refuses credentials; the store is migrated.
    std::fs::remove_file(ws.abs(".resilient_write/policy.yaml")).unwrap();
    let out = cli_ok(path, &k.key, &["gc", "--encrypt", "--keep-days", "36500", "--json"], b"");
    let answer: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(answer["encrypted"]["sealed"], 1, "{answer}");
    assert!(is_sealed(path, &sha));
    assert!(!is_sealed(path, &Sha256::of(b"one\n")), "a clean version stays as it was");
    assert_eq!(grep_state(path, &k.value), "");
    let shown = cli_ok(path, &k.key, &["show", &format!("deploy.cfg@{}", &sha.to_hex()[..12])], b"");
    assert_eq!(shown, k.content);
    assert_eq!(verify(path, &k.key)["ok"], true);
    // Once more: nothing left to seal.
    let out = cli_ok(path, &k.key, &["gc", "--encrypt", "--keep-days", "36500", "--json"], b"");
    let answer: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(answer["encrypted"]["sealed"], 0, "{answer}");
    assert_eq!(answer["encrypted"]["already"], 1, "{answer}");
}
