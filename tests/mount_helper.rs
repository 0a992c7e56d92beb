//! `mount/mount.fuse.rwfs`, the mount(8) helper: the `rwfs mount` command it builds from mount's
//! arguments, printed one argument per line in dry-run mode instead of being run.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The binary the helper names when the environment picks it (deterministic, need not exist).
const BIN: &str = "/opt/rwfs/bin/rwfs";

fn helper_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("mount/mount.fuse.rwfs")
}

/// Runs the helper in dry-run mode with `args`, in `cwd`.
fn helper(args: &[&str], cwd: &Path) -> Output {
    Command::new(helper_path())
        .args(args)
        .current_dir(cwd)
        .env("MOUNT_FUSE_RWFS_DRYRUN", "1")
        .env("RWFS_BIN", BIN)
        .output()
        .expect("run mount/mount.fuse.rwfs")
}

fn argv(out: &Output) -> Vec<String> {
    String::from_utf8(out.stdout.clone()).expect("utf-8 argv").lines().map(str::to_owned).collect()
}

/// The helper turns `args` into `rwfs mount --daemon` followed by `expect`.
#[track_caller]
fn check(args: &[&str], expect: &[&str]) {
    let cwd = tempfile::tempdir().unwrap();
    check_in(cwd.path(), args, expect);
}

#[track_caller]
fn check_in(cwd: &Path, args: &[&str], expect: &[&str]) {
    let out = helper(args, cwd);
    assert_eq!(out.status.code(), Some(0), "args {args:?}, stderr: {}", String::from_utf8_lossy(&out.stderr));
    let mut want = vec![BIN, "mount", "--daemon"];
    want.extend_from_slice(expect);
    assert_eq!(argv(&out), want, "args {args:?}");
}

#[test]
fn plain_source_and_mountpoint() {
    check(&["/srv/repo", "/mnt/agent"], &["/srv/repo", "/mnt/agent"]);
}

#[test]
fn options_become_flags() {
    check(
        &[
            "/srv/repo",
            "/mnt/agent",
            "-o",
            "ro,allow_other,blocked_errno=EPERM,pass_through=build/**,pass_through=*.tmp",
        ],
        &[
            "/srv/repo",
            "/mnt/agent",
            "--read-only",
            "--allow-other",
            "--blocked-errno",
            "EPERM",
            "--pass-through",
            "build/**",
            "--pass-through",
            "*.tmp",
        ],
    );
    // -o given more than once, a later rw undoing ro, and a quoted value holding a comma.
    check(
        &["/srv/repo", "/mnt/agent", "-o", "ro,default_permissions", "-o", "rw,pass_through=\"src/{a,b}/**\""],
        &["/srv/repo", "/mnt/agent", "--pass-through", "src/{a,b}/**"],
    );
}

#[test]
fn same_source_and_mountpoint_mounts_over_the_workspace() {
    let ws = tempfile::tempdir().unwrap();
    let path = ws.path().to_str().unwrap();
    check(&[path, path], &[path]);
    // Compared after resolving: `dir/.` and a symlink to it name the same directory.
    let dotted = format!("{path}/.");
    check(&[path, &dotted], &[path]);
    let link = tempfile::tempdir().unwrap();
    let link = link.path().join("link");
    std::os::unix::fs::symlink(ws.path(), &link).unwrap();
    check(&[link.to_str().unwrap(), path], &[link.to_str().unwrap()]);
}

#[test]
fn old_mount_fuse_source_form() {
    check(&["rwfs#/srv/repo", "/mnt/agent", "-t", "fuse.rwfs"], &["/srv/repo", "/mnt/agent"]);
    check(&["rwfs#/srv/repo", "/mnt/agent", "-t", "fuse"], &["/srv/repo", "/mnt/agent"]);
}

#[test]
fn mount_and_systemd_options_are_ignored() {
    check(
        &["/srv/repo", "/mnt/agent", "-n", "-v", "-o", "defaults,nofail,_netdev,x-systemd.requires=a.target,noatime"],
        &["/srv/repo", "/mnt/agent"],
    );
}

#[test]
fn unknown_options_and_invocations_fail_with_exit_1() {
    let cwd = tempfile::tempdir().unwrap();
    for (args, message) in [
        (&["/srv/repo", "/mnt/agent", "-o", "ro,bogus"][..], "mount.fuse.rwfs: unknown option bogus"),
        (&["/srv/repo", "/mnt/agent", "-o", "blocked_errno="], "mount.fuse.rwfs: option blocked_errno= needs a value"),
        (&["/srv/repo", "/mnt/agent", "-o", "pass_through=\"a,b"], "mount.fuse.rwfs: unterminated quote"),
        (&["/srv/repo", "/mnt/agent", "-t", "ext4"], "mount.fuse.rwfs: unsupported type ext4"),
        (&["/srv/repo", "/mnt/agent", "-x"], "mount.fuse.rwfs: unknown flag -x"),
        (&["other#/srv/repo", "/mnt/agent"], "names another program"),
        (&["/srv/repo"], "usage: mount.fuse.rwfs"),
    ] {
        let out = helper(args, cwd.path());
        assert_eq!(out.status.code(), Some(1), "args {args:?}");
        assert!(out.stdout.is_empty(), "args {args:?}: {:?}", argv(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(message), "args {args:?}: {stderr}");
    }
    // Sloppy mode (-s) ignores the unknown option with a warning.
    let out = helper(&["/srv/repo", "/mnt/agent", "-s", "-o", "bogus"], cwd.path());
    assert_eq!(argv(&out), [BIN, "mount", "--daemon", "/srv/repo", "/mnt/agent"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("ignoring unknown option bogus"));
}

#[test]
fn globs_reach_rwfs_literally() {
    // Files the globs would match if a shell expanded them in the helper's working directory.
    let cwd = tempfile::tempdir().unwrap();
    for name in ["a.tmp", "b.tmp", "build/out.o"] {
        let path = cwd.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, b"x").unwrap();
    }
    check_in(
        cwd.path(),
        &["/srv/repo", "/mnt/agent", "-o", "pass_through=*.tmp,pass_through=build/*,pass_through=[ab].tmp"],
        &[
            "/srv/repo",
            "/mnt/agent",
            "--pass-through",
            "*.tmp",
            "--pass-through",
            "build/*",
            "--pass-through",
            "[ab].tmp",
        ],
    );
}

#[test]
fn binary_from_option_and_fake_flag() {
    let cwd = tempfile::tempdir().unwrap();
    // -f (mount -f) prints without the environment variable; rwfs= wins over RWFS_BIN.
    let out = Command::new(helper_path())
        .args(["/srv/repo", "/mnt/agent", "-f", "-o", "rwfs=/usr/local/bin/rwfs,ro"])
        .current_dir(cwd.path())
        .env_remove("MOUNT_FUSE_RWFS_DRYRUN")
        .env("RWFS_BIN", BIN)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(argv(&out), ["/usr/local/bin/rwfs", "mount", "--daemon", "/srv/repo", "/mnt/agent", "--read-only"]);
}

#[test]
fn generic_mount_options_are_accepted() {
    // xfstests 003 mounts with each of these.
    for opts in
        ["nodiratime", "strictatime", "relatime", "noatime", "lazytime", "sync,dirsync", "nostrictatime,diratime"]
    {
        check(&["/srv/repo", "/mnt/agent", "-o", opts], &["/srv/repo", "/mnt/agent"]);
    }
}

#[test]
fn remount_changes_the_kernels_flags_of_the_live_mount() {
    let cwd = tempfile::tempdir().unwrap();
    let out = helper(
        &["/srv/repo", "/mnt/agent", "-o", "remount,ro,strictatime,allow_other,user_id=0,group_id=0"],
        cwd.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(argv(&out), ["mount", "-i", "-o", "remount,ro,strictatime", "/mnt/agent"]);
}
