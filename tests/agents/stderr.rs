//! The reason on the writer's stderr (`vfs/stderr.rs`): a refused writer's fd 2 gets one line
//! naming the file, the rule, the line and what to do — when it is a pipe, a socket or a
//! terminal, never a file the user redirected it to; and only when the mount does that
//! (`--stderr-notice on`, the policy's `stderr_notice`, or `rwfs run`).

use std::io::Read;
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};

use crate::support::mount::{Mounted, rwfs};
use crate::support::{Ws, aws_secret_line};

/// A mount that tells refused writers why.
fn telling() -> Mounted {
    Mounted::with(Ws::new(), false, &["--stderr-notice", "on"])
}

/// `sh -c script` in the mount's root with `$LEAK` set to a secret: (exit code, stdout, stderr).
fn shell(m: &Mounted, shell: &str, script: &str) -> (i32, String, String) {
    let out = Command::new(shell)
        .args(["-c", script])
        .env("LEAK", aws_secret_line(71).trim_end())
        .current_dir(m.mountpoint())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

const LINE: &str = "rwfs: refused write to notes.env: aws-secret-access-key at line 1 — nothing was written; use ${AWS_SECRET_ACCESS_KEY}";

#[test]
fn a_refused_shell_redirect_reads_the_reason_on_its_stderr_pipe() {
    let m = telling();
    let (code, _, stderr) = shell(&m, "bash", "echo \"$LEAK\" > notes.env");
    assert_ne!(code, 0, "bash reports the failed write: {stderr}");
    assert!(stderr.starts_with(LINE), "the reason comes first, before bash's own message:\n{stderr}");
    assert!(stderr.contains("(why: .resilient_write/rejections/rj_"), "{stderr}");
    assert!(!stderr.contains(&aws_secret_line(71)[26..60]), "never a character of the secret: {stderr}");
    // dash says only "I/O error" of the same refusal.
    let (_, _, stderr) = shell(&m, "sh", "echo \"$LEAK\" > notes.env");
    assert!(stderr.contains("rwfs: refused write to notes.env"), "{stderr}");
}

#[test]
fn the_silent_exit_zero_cases_are_not_silent_any_more() {
    let m = telling();
    // Python leaves the close to the garbage collector, which swallows its error.
    let (code, _, stderr) = shell(&m, "python3", "import os; open('notes.env', 'w').write(os.environ['LEAK'] + '\\n')");
    assert_eq!(code, 0, "Python still exits 0: {stderr}");
    assert!(stderr.starts_with(LINE), "{stderr}");
    assert_eq!(m.backing("notes.env"), None);
}

#[test]
fn a_socket_as_stderr_gets_the_line_too() {
    // Node (libuv) gives a child's stdio as socketpairs: a harness's shell tool reads them.
    let m = telling();
    let (mine, theirs) = UnixStream::pair().unwrap();
    let status = Command::new("bash")
        .args(["-c", "echo \"$LEAK\" > notes.env"])
        .env("LEAK", aws_secret_line(71).trim_end())
        .current_dir(m.mountpoint())
        .stdout(Stdio::null())
        .stderr(std::os::fd::OwnedFd::from(theirs))
        .status()
        .unwrap();
    assert!(!status.success());
    mine.set_nonblocking(true).unwrap();
    let mut text = String::new();
    let _ = (&mine).read_to_string(&mut text);
    assert!(text.starts_with(LINE), "{text}");
}

#[test]
fn never_into_a_file_the_user_redirected_stderr_to() {
    let m = telling();
    let log = tempfile::NamedTempFile::new().unwrap();
    let (_, _, stderr) = shell(&m, "bash", &format!("echo \"$LEAK\" > notes.env 2> {}", log.path().display()));
    assert!(!stderr.contains("rwfs:"), "{stderr}");
    let (_, _, _) = shell(&m, "bash", &format!("exec 2>> {}; echo \"$LEAK\" > notes.env", log.path().display()));
    let logged = std::fs::read_to_string(log.path()).unwrap();
    assert!(
        logged.contains("Permission denied") && !logged.contains("rwfs:"),
        "the user's file is left alone: {logged}"
    );
    // Nor into the file being written itself (a gated file on the mount).
    let (_, _, _) = shell(&m, "bash", "exec 2> notes.txt; echo \"$LEAK\" > notes.env; exec 2>&-");
    let own = m.read("notes.txt").unwrap_or_default();
    assert!(!String::from_utf8_lossy(&own).contains("rwfs:"), "{}", String::from_utf8_lossy(&own));
}

#[test]
fn a_plain_mount_is_quiet_unless_asked_and_rwfs_run_speaks() {
    let m = Mounted::new();
    let (_, _, stderr) = shell(&m, "bash", "echo \"$LEAK\" > notes.env");
    assert!(!stderr.contains("rwfs:"), "off by default under rwfs mount: {stderr}");
    drop(m);

    let ws = Ws::new();
    let run = || {
        let out = rwfs()
            .arg("-w")
            .arg(ws.path())
            .args(["run", "--", "bash", "-c", "echo \"$LEAK\" > notes.env"])
            .env("LEAK", aws_secret_line(71).trim_end())
            .current_dir(ws.path())
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let stderr = run();
    assert!(stderr.contains(LINE), "on by default under rwfs run:\n{stderr}");

    // The policy can turn it off there.
    std::fs::write(ws.abs(".resilient_write/policy.yaml"), "stderr_notice: false\n").unwrap();
    let stderr = run();
    assert!(!stderr.contains("rwfs: refused"), "{stderr}");
}
