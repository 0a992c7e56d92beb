//! Real programs through a real mount (docs/architecture.md, The mount): git, cp, sed, python, an editor's save, tar,
//! sqlite, cargo and mmap writers do their usual work in the mount, and the results are checked
//! through the mount, in the backing tree and in the journal. A missing program fails the test
//! (`scripts/test` installs them); it never skips.

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rwfs::journal::{Op, Row};
use serde_json::Value;

use crate::support::mount::{Mounted, rwfs};
use crate::support::*;

/// `name`, found on `PATH`, as a command; panics when it is not installed.
fn program(name: &str) -> Command {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&path).any(|dir| dir.join(name).is_file());
    assert!(found, "`{name}` is not installed: the program tests need it (scripts/test installs it)");
    Command::new(name)
}

/// Run `cmd` to success; its standard output.
#[track_caller]
fn run(cmd: &mut Command) -> String {
    String::from_utf8_lossy(&run_ok(cmd).stdout).into_owned()
}

/// `git args` in `dir`, with a fixed identity and no user or system configuration (no
/// background auto-gc either: it could outlive the test's mount).
#[track_caller]
fn git(dir: &Path, args: &[&str]) -> String {
    let mut cmd = program("git");
    cmd.args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_COUNT", "2")
        .env("GIT_CONFIG_KEY_0", "gc.auto")
        .env("GIT_CONFIG_VALUE_0", "0")
        .env("GIT_CONFIG_KEY_1", "maintenance.auto")
        .env("GIT_CONFIG_VALUE_1", "false")
        .env("GIT_AUTHOR_NAME", "Program Test")
        .env("GIT_AUTHOR_EMAIL", "programs@rwfs.test")
        .env("GIT_COMMITTER_NAME", "Program Test")
        .env("GIT_COMMITTER_EMAIL", "programs@rwfs.test")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE");
    run(&mut cmd)
}

/// Every journal row, by path, in order.
fn rows_by_path(m: &Mounted) -> BTreeMap<String, Vec<Row>> {
    let mut by_path: BTreeMap<String, Vec<Row>> = BTreeMap::new();
    for row in m.ws.rows() {
        by_path.entry(row.path.clone()).or_default().push(row);
    }
    by_path
}

fn rows_of(m: &Mounted, path: &str) -> Vec<Row> {
    m.ws.rows().into_iter().filter(|r| r.path == path).collect()
}

/// `rwfs history PATH --json`: the versions, oldest first.
fn history(m: &Mounted, path: &str) -> Vec<Value> {
    let out = run(rwfs().args(["history", "--json", path, "-w"]).arg(m.ws.path()));
    let history: Value = serde_json::from_str(&out).unwrap();
    history["versions"].as_array().unwrap().clone()
}

/// The mount's names directly in `rel` (the state directory aside), sorted.
fn names_in(m: &Mounted, rel: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(m.path(rel))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n != ".resilient_write")
        .collect();
    names.sort();
    names
}

#[test]
fn git_init_add_commit_branch_checkout_and_gc_in_the_mount_leave_a_repository_fsck_accepts() {
    let m = Mounted::new();
    let root = m.mountpoint();
    let v1 = b"pub fn one() -> u32 {\n    1\n}\n";
    let v2 = b"pub fn one() -> u32 {\n    1\n}\n\npub fn two() -> u32 {\n    2\n}\n";
    m.write("README.md", b"# demo\n").unwrap();
    m.write("src/lib.rs", v1).unwrap();
    git(root, &["init", "-q", "-b", "main"]);
    std::fs::write(m.path(".git/info/exclude"), ".resilient_write/\n").unwrap();
    git(root, &["add", "."]);
    git(root, &["commit", "-q", "-m", "first"]);
    git(root, &["branch", "feature"]);
    git(root, &["checkout", "-q", "feature"]);
    m.write("src/lib.rs", v2).unwrap();
    m.write("NOTES.md", b"feature notes\n").unwrap();
    git(root, &["add", "."]);
    git(root, &["commit", "-q", "-m", "second"]);
    git(root, &["checkout", "-q", "main"]);

    // The checkout rewrote and removed working-tree files through the gate.
    assert_eq!(m.read("src/lib.rs").unwrap(), v1);
    assert_eq!(m.backing("src/lib.rs").unwrap(), v1);
    assert_eq!(m.backing("NOTES.md"), None);
    git(root, &["gc", "-q", "--prune=now"]);
    git(root, &["fsck", "--full", "--strict", "--no-dangling"]);
    assert_eq!(git(root, &["log", "--format=%s", "feature"]), "second\nfirst\n");
    assert_eq!(git(root, &["log", "--format=%s", "main"]), "first\n");
    assert_eq!(git(root, &["status", "--porcelain"]), "");
    git(root, &["checkout", "-q", "feature"]);
    assert_eq!(m.read("src/lib.rs").unwrap(), v2);
    assert_eq!(m.backing("NOTES.md").unwrap(), b"feature notes\n");

    // The backing tree holds the same repository.
    let backing = m.ws.path();
    git(backing, &["fsck", "--full", "--strict", "--no-dangling"]);
    for rev in ["main", "feature", "HEAD"] {
        assert_eq!(git(backing, &["rev-parse", rev]), git(root, &["rev-parse", rev]), "{rev}");
    }
    assert_eq!(git(backing, &["status", "--porcelain"]), "");

    // Working-tree files are versions git wrote; `.git/` is written in place.
    let rows = rows_by_path(&m);
    let lib = &rows["src/lib.rs"];
    assert!(lib.iter().any(|r| r.comm.as_deref() == Some("git") && r.sha256 == Some(sha(v1))), "{lib:?}");
    assert!(lib.iter().any(|r| r.comm.as_deref() == Some("git") && r.sha256 == Some(sha(v2))), "{lib:?}");
    let notes = &rows["NOTES.md"];
    assert!(notes.iter().any(|r| r.op() == Op::Delete && r.comm.as_deref() == Some("git")), "{notes:?}");
    assert!(rows.keys().all(|p| !p.starts_with(".git/")), "no rows for .git/: {:?}", rows.keys());
}

#[test]
fn local_clones_into_the_mount_copied_or_hard_linked_are_clean_and_pass_fsck() {
    // A repository outside the mount, with a few commits.
    let outside = tempfile::Builder::new().prefix("rwfs-origin-").tempdir().unwrap();
    let origin = outside.path();
    git(origin, &["init", "-q", "-b", "main"]);
    for i in 1..=4 {
        let dir = origin.join(format!("pkg{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("mod.rs"), format!("pub const N: u32 = {i};\n")).unwrap();
        std::fs::write(origin.join("CHANGES"), format!("release {i}\n")).unwrap();
        git(origin, &["add", "-A"]);
        git(origin, &["commit", "-q", "-m", &format!("release {i}")]);
    }
    std::fs::write(origin.join("run.sh"), "#!/bin/sh\necho run\n").unwrap();
    std::fs::set_permissions(origin.join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("pkg1/mod.rs", origin.join("first.rs")).unwrap();
    git(origin, &["add", "-A"]);
    git(origin, &["commit", "-q", "-m", "script and link"]);
    let head = git(origin, &["rev-parse", "HEAD"]);

    let m = Mounted::new();
    let root = m.mountpoint();
    let origin_arg = origin.to_str().unwrap();
    // Every object copied; then a plain local clone from another filesystem (git's hard links
    // fail with EXDEV, it copies); then a plain local clone inside the mount: hard links.
    git(root, &["clone", "-q", "--no-hardlinks", origin_arg, "copied"]);
    git(root, &["clone", "-q", origin_arg, "plain"]);
    git(root, &["clone", "-q", "copied", "linked"]);
    for clone in ["copied", "plain", "linked"] {
        let dir = m.path(clone);
        assert_eq!(git(&dir, &["status", "--porcelain"]), "", "{clone}");
        git(&dir, &["fsck", "--full", "--strict"]);
        assert_eq!(git(&dir, &["rev-parse", "HEAD"]), head, "{clone}");
        assert_eq!(git(&dir, &["log", "--format=%s"]).lines().count(), 5, "{clone}");
        assert_eq!(std::fs::read_link(dir.join("first.rs")).unwrap().to_str(), Some("pkg1/mod.rs"));
        assert_eq!(std::fs::metadata(dir.join("run.sh")).unwrap().mode() & 0o777, 0o755);
    }

    // The linked clone's objects are the copied clone's files under a second name: one inode
    // through the mount, and one in the backing tree.
    let objects = support_objects(&m.path("copied/.git/objects"));
    assert!(!objects.is_empty());
    for object in &objects {
        let (a, b) = (format!("copied/.git/objects/{object}"), format!("linked/.git/objects/{object}"));
        let (ma, mb) = (std::fs::metadata(m.path(&a)).unwrap(), std::fs::metadata(m.path(&b)).unwrap());
        assert_eq!((ma.ino(), ma.nlink()), (mb.ino(), 2), "{object} through the mount");
        let (ba, bb) = (std::fs::metadata(m.ws.abs(&a)).unwrap(), std::fs::metadata(m.ws.abs(&b)).unwrap());
        assert_eq!((ba.ino(), ba.nlink()), (bb.ino(), 2), "{object} in the backing tree");
    }

    // Work in the linked clone: a commit, then gc drops its names of the shared objects; the
    // copied clone keeps its own.
    m.write("linked/pkg5/mod.rs", b"pub const N: u32 = 5;\n").unwrap();
    git(&m.path("linked"), &["add", "-A"]);
    git(&m.path("linked"), &["commit", "-q", "-m", "release 5"]);
    git(&m.path("linked"), &["gc", "-q", "--prune=now"]);
    for clone in ["copied", "linked"] {
        git(&m.path(clone), &["fsck", "--full", "--strict"]);
        git(&m.ws.abs(clone), &["fsck", "--full", "--strict"]);
        assert_eq!(git(&m.ws.abs(clone), &["rev-parse", "HEAD"]), git(&m.path(clone), &["rev-parse", "HEAD"]));
    }
    assert_eq!(git(&m.path("linked"), &["log", "--format=%s", "-1"]), "release 5\n");
    assert_eq!(git(&m.ws.abs("linked"), &["status", "--porcelain"]), "");
}

/// The files below a `.git/objects` directory (loose objects and packs), relative to it.
fn support_objects(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        if name == "info" || !entry.file_type().unwrap().is_dir() {
            continue;
        }
        for file in std::fs::read_dir(entry.path()).unwrap() {
            out.push(format!("{name}/{}", file.unwrap().file_name().into_string().unwrap()));
        }
    }
    out.sort();
    out
}

#[test]
fn cp_r_of_a_source_tree_is_equal_through_the_mount_and_in_the_backing_tree_with_one_version_per_file() {
    let m = Mounted::new();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::create_dir(m.path("copy")).unwrap();
    run(program("cp").arg("-r").arg(repo.join("src")).arg(repo.join("tests")).arg(m.path("copy")));
    for dir in ["src", "tests"] {
        run(program("diff").arg("-r").arg(repo.join(dir)).arg(m.path(&format!("copy/{dir}"))));
        run(program("diff").arg("-r").arg(repo.join(dir)).arg(m.ws.abs(&format!("copy/{dir}"))));
    }
    let rows = rows_by_path(&m);
    let mut files = 0;
    for dir in ["src", "tests"] {
        for (rel, bytes) in tree(&repo.join(dir)) {
            let path = format!("copy/{dir}/{rel}");
            let versions = rows.get(&path).unwrap_or_else(|| panic!("no row for {path}"));
            assert_eq!(versions.len(), 1, "{path}: {versions:?}");
            let row = &versions[0];
            assert_eq!((row.op(), row.sha256, row.comm.as_deref()), (Op::Create, Some(sha(&bytes)), Some("cp")));
            files += 1;
        }
    }
    assert!(files > 50, "a real tree: {files} files");
    // The daemon holds no descriptor per file it committed or served (the kernel keeps the
    // inodes cached): a large tree would exhaust its descriptors.
    let status = run(rwfs().args(["status", "--json", "-w"]).arg(m.ws.path()));
    let status: Value = serde_json::from_str(&status).unwrap();
    let ours = status["mounts"].as_array().unwrap().iter().find(|mt| mt["workspace"] == m.ws.path().to_str().unwrap());
    let pid = ours.and_then(|mt| mt["pid"].as_u64()).unwrap_or_else(|| panic!("the daemon's pid: {status}"));
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap().count();
    assert!(fds < files, "{fds} descriptors open after copying {files} files");
}

#[test]
fn sed_i_renames_its_new_version_over_the_file_and_the_old_one_is_kept() {
    let m = Mounted::new();
    let old = b"name = \"demo\"\nlevel = 1\n";
    let new = b"name = \"demo\"\nlevel = 2\n";
    m.write("conf/app.toml", old).unwrap();
    std::fs::set_permissions(m.path("conf/app.toml"), std::fs::Permissions::from_mode(0o640)).unwrap();
    run(program("sed").args(["-i", "s/level = 1/level = 2/"]).arg(m.path("conf/app.toml")));
    assert_eq!(m.read("conf/app.toml").unwrap(), new);
    assert_eq!(m.backing("conf/app.toml").unwrap(), new);
    assert_eq!(std::fs::metadata(m.ws.abs("conf/app.toml")).unwrap().mode() & 0o7777, 0o640);
    assert_eq!(names_in(&m, "conf"), ["app.toml"], "sed's temporary file is gone");

    let versions = history(&m, "conf/app.toml");
    assert_eq!(versions.len(), 2, "{versions:?}");
    assert_eq!(versions[0]["sha256"], sha(old).to_hex());
    assert_eq!(versions[1]["sha256"], sha(new).to_hex());
    assert_eq!((versions[1]["op"].as_str(), versions[1]["comm"].as_str()), (Some("rename"), Some("sed")));
    assert!(versions[1]["from"].as_str().is_some_and(|f| f.starts_with("conf/sed")), "{}", versions[1]);
    assert_eq!(m.ws.object(&sha(old)).unwrap(), old, "the replaced version is kept");
}

#[test]
fn a_refused_sed_i_names_the_file_it_edits_not_only_its_temporary_file() {
    let m = Mounted::new();
    let old = b"region = \"eu\"\n";
    m.write("conf/app.toml", old).unwrap();
    let secret = aws_secret_line(47);
    let out = program("sed")
        .args(["-i", &format!("s|region = \"eu\"|{}|", secret.trim_end().replace('|', "\\|"))])
        .arg(m.path("conf/app.toml"))
        .output()
        .unwrap();
    assert!(!out.status.success(), "sed reports the refusal");
    assert_eq!(m.backing("conf/app.toml").unwrap(), old, "the file is unchanged");
    let envelope: serde_json::Value =
        serde_json::from_slice(&m.ws.read(".resilient_write/rejections/latest.json").unwrap()).unwrap();
    let context = &envelope["context"];
    assert_eq!(context["path"], "conf/app.toml", "{context}");
    assert!(context["written_as"].as_str().is_some_and(|p| p.starts_with("conf/sed")), "{context}");
    assert_eq!(context["temporary_for"], "conf/app.toml", "{context}");
    let message = context["message"].as_str().unwrap();
    assert!(message.contains("conf/app.toml is unchanged") && message.contains("sed"), "{message}");
    // A plain new file is nobody's temporary file.
    assert!(m.write("fresh.py", secret.as_bytes()).is_err());
    let envelope: serde_json::Value =
        serde_json::from_slice(&m.ws.read(".resilient_write/rejections/latest.json").unwrap()).unwrap();
    assert!(envelope["context"]["temporary_for"].is_null(), "{envelope}");
}

#[test]
fn python_open_write_close_and_os_replace_are_versions_of_their_writer() {
    let m = Mounted::new();
    let script = r#"
import os, sys
path = sys.argv[1]
os.makedirs(os.path.dirname(path), exist_ok=True)
with open(path, "w") as f:
    f.write("v1\n")
tmp = path + ".tmp"
with open(tmp, "w") as f:
    f.write("v2\n")
os.replace(tmp, path)
with open(path, "a") as f:
    f.write("v3\n")
print(os.getpid())
"#;
    let out = run(program("python3").arg("-c").arg(script).arg(m.path("app/state.txt")));
    let pid: u32 = out.trim().parse().unwrap();
    assert_eq!(m.read("app/state.txt").unwrap(), b"v2\nv3\n");
    assert_eq!(m.backing("app/state.txt").unwrap(), b"v2\nv3\n");
    assert_eq!(m.backing("app/state.txt.tmp"), None);
    let rows = rows_of(&m, "app/state.txt");
    let shas: Vec<_> = rows.iter().map(|r| r.sha256).collect();
    assert_eq!(shas, [Some(sha(b"v1\n")), Some(sha(b"v2\n")), Some(sha(b"v2\nv3\n"))]);
    assert_eq!(rows[0].op(), Op::Create);
    assert_eq!((rows[1].op(), rows[1].from.as_deref()), (Op::Rename, Some("app/state.txt.tmp")));
    assert_eq!(rows[1].prev_sha256, Some(sha(b"v1\n")));
    assert!(rows.iter().all(|r| r.pid == Some(pid) && r.comm.as_deref() == Some("python3")), "{rows:?}");
    assert_eq!(m.ws.object(&sha(b"v1\n")).unwrap(), b"v1\n");
}

#[test]
fn an_editor_style_save_keeps_the_old_version_restorable() {
    let m = Mounted::new();
    let original = b"# Notes\n\nfirst draft\n";
    m.write("docs/notes.md", original).unwrap();
    // As VS Code and other editors save: a temporary file, fsync, rename over, fsync the dir.
    let save = r#"
import os, sys
path, text = sys.argv[1], sys.argv[2]
tmp = os.path.join(os.path.dirname(path), "." + os.path.basename(path) + ".save")
fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
os.write(fd, text.encode())
os.fsync(fd)
os.close(fd)
os.rename(tmp, path)
dfd = os.open(os.path.dirname(path), os.O_RDONLY)
os.fsync(dfd)
os.close(dfd)
"#;
    let saved = "# Notes\n\nsecond draft\n";
    run(program("python3").arg("-c").arg(save).arg(m.path("docs/notes.md")).arg(saved));
    assert_eq!(m.backing("docs/notes.md").unwrap(), saved.as_bytes());
    // vim with `backupcopy=no`: the original is renamed to a backup, the new file written and
    // fsynced, the backup removed.
    run(program("vim")
        .args(["-Nu", "NONE", "-i", "NONE", "-es", "-c", "set backupcopy=no writebackup nobackup"])
        .args(["-c", "%s/second/third/", "-c", "wq"])
        .arg(m.path("docs/notes.md")));
    let third = b"# Notes\n\nthird draft\n";
    assert_eq!(m.read("docs/notes.md").unwrap(), third);
    assert_eq!(m.backing("docs/notes.md").unwrap(), third);
    assert_eq!(names_in(&m, "docs"), ["notes.md"], "no temporary, backup or swap file left");

    let versions = history(&m, "docs/notes.md");
    let shas: Vec<&str> = versions.iter().map(|v| v["sha256"].as_str().unwrap()).collect();
    assert_eq!(shas, [sha(original).to_hex(), sha(saved.as_bytes()).to_hex(), sha(third).to_hex()]);
    // The first draft comes back through the CLI, which reaches the daemon.
    run(rwfs().args(["restore", "docs/notes.md", "--sha", &sha(original).to_hex()[..12], "-w"]).arg(m.ws.path()));
    assert_eq!(m.read("docs/notes.md").unwrap(), original);
    assert_eq!(m.backing("docs/notes.md").unwrap(), original);
    let versions = history(&m, "docs/notes.md");
    assert_eq!(versions.last().unwrap()["op"], "restore");
}

#[test]
fn a_vim_save_with_its_swap_file_reads_as_one_version_in_the_log() {
    let m = Mounted::new();
    m.write("notes.txt", b"hello\n").unwrap();
    // vim with a swap file and a backup: probes, swap file writes and deletes, the save.
    run(program("vim")
        .args(["-Nu", "NONE", "-i", "NONE", "-es", "-c", "set swapfile backup writebackup backupcopy=yes"])
        .args(["-c", "%s/hello/hello there/", "-c", "wq"])
        .arg(m.path("notes.txt")));
    assert_eq!(m.backing("notes.txt").unwrap(), b"hello there\n");
    let log = |extra: &[&str]| -> Vec<Value> {
        let out = rwfs().args(["log", "--json", "-n", "0", "-w"]).arg(m.ws.path()).args(extra).output().unwrap();
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    };
    let all = log(&["--all"]);
    let editor: Vec<&str> = all.iter().map(|r| r["path"].as_str().unwrap()).filter(|p| *p != "notes.txt").collect();
    assert!(!editor.is_empty(), "vim's own files are journaled (nothing that changed the tree goes unrecorded)");
    assert!(
        editor.iter().all(|p| p.ends_with(".swp") || p.ends_with(".swx") || p.ends_with('~') || *p == "4913"),
        "{editor:?}"
    );
    let shown: Vec<Value> = log(&[]).iter().map(|r| r["path"].clone()).collect();
    assert_eq!(shown, ["notes.txt", "notes.txt"], "the log shows the create and the one save");
    // A refusal in an editor's file is never left out, and names the file it stands for.
    let err = m.write(".secret.py.swp", aws_secret_line(48).as_bytes()).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(nix::libc::EACCES), "still gated");
    assert!(log(&[]).iter().any(|r| r["op"] == "block" && r["path"] == "secret.py" && r["from"] == ".secret.py.swp"));
}

#[test]
fn tar_x_into_the_mount_keeps_modes_mtimes_symlinks_and_hard_links() {
    let outside = tempfile::Builder::new().prefix("rwfs-tar-").tempdir().unwrap();
    let src = outside.path().join("tree");
    let at = |secs: u64| UNIX_EPOCH + Duration::from_secs(secs);
    let file = |rel: &str, bytes: &[u8], mode: u32, mtime: SystemTime| {
        let path = src.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, bytes).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        std::fs::File::options().write(true).open(&path).unwrap().set_modified(mtime).unwrap();
    };
    file("bin/run.sh", b"#!/bin/sh\necho run\n", 0o755, at(1_000_000_000));
    file("etc/private.conf", b"mode 600\n", 0o600, at(1_100_000_000));
    file("share/doc/README", &b"a longer file\n".repeat(5000), 0o644, at(1_200_000_000));
    file("share/empty", b"", 0o444, at(1_300_000_000));
    std::os::unix::fs::symlink("../share/doc/README", src.join("bin/readme")).unwrap();
    std::os::unix::fs::symlink("nowhere", src.join("dangling")).unwrap();
    std::fs::hard_link(src.join("bin/run.sh"), src.join("bin/run")).unwrap();
    std::fs::create_dir_all(src.join("var/empty")).unwrap();
    for (dir, secs) in [("share/doc", 1_400_000_000), ("var/empty", 1_500_000_000), ("bin", 1_600_000_000)] {
        std::fs::File::open(src.join(dir)).unwrap().set_modified(at(secs)).unwrap();
    }
    let archive = outside.path().join("tree.tar");
    run(program("tar").arg("-cf").arg(&archive).arg("-C").arg(&src).arg("."));

    let m = Mounted::new();
    std::fs::create_dir(m.path("x")).unwrap();
    run(program("tar").arg("-xf").arg(&archive).arg("-C").arg(m.path("x")));
    // `tar d` compares contents, modes, owners, mtimes, symlink targets and hard links.
    for dir in [m.path("x"), m.ws.abs("x")] {
        let diff = run(program("tar").arg("-df").arg(&archive).arg("-C").arg(&dir));
        assert_eq!(diff, "", "{}", dir.display());
    }
    for base in [m.path("x"), m.ws.abs("x")] {
        let meta = |rel: &str| std::fs::symlink_metadata(base.join(rel)).unwrap();
        assert_eq!(meta("bin/run.sh").mode() & 0o7777, 0o755);
        assert_eq!(meta("etc/private.conf").mode() & 0o7777, 0o600);
        assert_eq!(meta("share/empty").mode() & 0o7777, 0o444);
        assert_eq!(meta("share/doc/README").modified().unwrap(), at(1_200_000_000));
        assert_eq!(meta("share/doc").modified().unwrap(), at(1_400_000_000), "directory mtimes too");
        assert_eq!(meta("var/empty").modified().unwrap(), at(1_500_000_000));
        assert_eq!(meta("bin").modified().unwrap(), at(1_600_000_000));
        assert_eq!(std::fs::read_link(base.join("bin/readme")).unwrap().to_str(), Some("../share/doc/README"));
        assert_eq!(std::fs::read_link(base.join("dangling")).unwrap().to_str(), Some("nowhere"));
        assert_eq!((meta("bin/run").ino(), meta("bin/run").nlink()), (meta("bin/run.sh").ino(), 2));
    }
    let rows = rows_by_path(&m);
    assert_eq!(rows["x/share/doc/README"].last().unwrap().sha256, Some(sha(&b"a longer file\n".repeat(5000))));
    assert!(rows["x/bin/run.sh"].iter().all(|r| r.comm.as_deref() == Some("tar")));
}

#[test]
fn vim_editing_one_name_of_a_hard_linked_file_changes_every_name() {
    let m = Mounted::new();
    m.write("etc/app.conf", b"port = 80\n").unwrap();
    run(program("ln").arg(m.path("etc/app.conf")).arg(m.path("app.conf")));
    // With two links vim keeps them: it writes the file in place (`backupcopy=auto`).
    run(program("vim")
        .args(["-Nu", "NONE", "-i", "NONE", "-n", "-es", "-c", "set backupcopy=auto"])
        .args(["-c", "%s/80/8080/", "-c", "wq"])
        .arg(m.path("app.conf")));
    for base in [m.mountpoint().to_path_buf(), m.ws.path().to_path_buf()] {
        let (a, b) = (base.join("etc/app.conf"), base.join("app.conf"));
        assert_eq!(std::fs::read(&a).unwrap(), b"port = 8080\n", "{}", a.display());
        assert_eq!(std::fs::read(&b).unwrap(), b"port = 8080\n", "{}", b.display());
        let (ma, mb) = (std::fs::metadata(&a).unwrap(), std::fs::metadata(&b).unwrap());
        assert_eq!((ma.ino(), ma.nlink()), (mb.ino(), 2), "still one file: {}", base.display());
    }
    // The versions each name had (history also lists the link's row under its source, with
    // `to` set).
    let shas = |path: &str| -> Vec<String> {
        let versions = history(&m, path);
        versions.iter().filter(|v| v["to"].is_null()).map(|v| v["sha256"].as_str().unwrap().to_string()).collect()
    };
    let (old, new) = (sha(b"port = 80\n").to_hex(), sha(b"port = 8080\n").to_hex());
    assert_eq!(shas("etc/app.conf"), [old.clone(), new.clone()]);
    assert_eq!(shas("app.conf"), [old.clone(), new]);
    assert_eq!(m.ws.object(&sha(b"port = 80\n")).unwrap(), b"port = 80\n");
}

#[test]
fn sqlite_transactions_in_pass_through_databases_are_sound_and_unjournaled() {
    let m = Mounted::with(Ws::new(), false, &["--pass-through", "var/**"]);
    std::fs::create_dir(m.path("var")).unwrap();
    let fill = "create table t(id integer primary key, name text not null);\
                begin;\
                with recursive n(i) as (select 1 union all select i + 1 from n where i < 2000)\
                insert into t(name) select 'row ' || i from n;\
                update t set name = upper(name) where id % 7 = 0;\
                commit;\
                pragma integrity_check;\
                select count(*), sum(id) from t;";
    // `*.db` by default (a rollback journal beside it), `var/**` by `--pass-through` (WAL).
    for (db, mode) in [("app.db", "delete"), ("var/state", "wal")] {
        let out = run(program("sqlite3").arg(m.path(db)).arg(format!("pragma journal_mode={mode};{fill}")));
        assert_eq!(out, format!("{mode}\nok\n2000|2001000\n"), "{db}");
        let out = run(program("sqlite3")
            .arg(m.path(db))
            .arg("pragma integrity_check; select count(*) from t where name glob 'ROW*';"));
        assert_eq!(out, "ok\n285\n", "{db}");
        // Written in place: the backing file is the database.
        let out = run(program("sqlite3").arg(m.ws.abs(db)).arg("select count(*) from t;"));
        assert_eq!(out, "2000\n", "{db} in the backing tree");
    }
    let rows = m.ws.rows();
    assert!(
        rows.iter().all(|r| !r.path.starts_with("app.db") && !r.path.starts_with("var/")),
        "no rows for the databases or their journals: {:?}",
        rows.iter().map(|r| &r.path).collect::<Vec<_>>()
    );
}

#[test]
fn cargo_builds_a_crate_in_the_mount_and_the_binary_runs() {
    let m = Mounted::new();
    let manifest = |name: &str| {
        format!("[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n")
    };
    let main = b"mod greeting;\n\nfn main() {\n    println!(\"{}\", greeting::text());\n}\n";
    m.write("Cargo.toml", manifest("hello").as_bytes()).unwrap();
    m.write("src/main.rs", main).unwrap();
    m.write("src/greeting.rs", b"pub fn text() -> &'static str {\n    \"hello from the mount\"\n}\n").unwrap();
    // A second crate below the root: its `target/` is pass-through too (the default globs
    // match at any depth); built again into a directory of its own, the compiler's and the
    // linker's output go through the gate.
    m.write("tools/count/Cargo.toml", manifest("count").as_bytes()).unwrap();
    m.write("tools/count/src/main.rs", b"fn main() {\n    println!(\"{}\", (1..=10).sum::<u32>());\n}\n").unwrap();
    let cargo_with = |dir: &Path, args: &[&str]| {
        let mut cmd = program("cargo");
        cmd.args(["build", "--offline", "--quiet"])
            .args(args)
            .current_dir(dir)
            .env_remove("CARGO_TARGET_DIR")
            .env_remove("CARGO_BUILD_TARGET_DIR")
            .env_remove("RUSTC_WRAPPER")
            .env_remove("CARGO_BUILD_RUSTC_WRAPPER");
        run(&mut cmd);
    };
    let cargo = |dir: &Path| cargo_with(dir, &[]);
    cargo(m.mountpoint());
    assert_eq!(run(&mut Command::new(m.path("target/debug/hello"))), "hello from the mount\n");
    // An edit through the mount, an incremental rebuild.
    m.write("src/greeting.rs", b"pub fn text() -> &'static str {\n    \"rebuilt\"\n}\n").unwrap();
    cargo(m.mountpoint());
    assert_eq!(run(&mut Command::new(m.path("target/debug/hello"))), "rebuilt\n");
    cargo(&m.path("tools/count"));
    assert_eq!(run(&mut Command::new(m.path("tools/count/target/debug/count"))), "55\n");
    cargo_with(&m.path("tools/count"), &["--target-dir", "gated"]);
    let binary = "tools/count/gated/debug/count";
    assert_eq!(run(&mut Command::new(m.path(binary))), "55\n");
    assert_eq!(m.backing(binary).unwrap(), m.read(binary).unwrap());
    assert_eq!(run(&mut Command::new(m.ws.abs(binary))), "55\n", "the backing tree's binary runs too");

    let rows = rows_by_path(&m);
    assert_eq!(rows["src/main.rs"].len(), 1);
    assert_eq!(rows["src/greeting.rs"].len(), 2);
    assert!(rows["Cargo.lock"].iter().all(|r| r.comm.as_deref() == Some("cargo")), "cargo wrote Cargo.lock");
    assert!(rows.keys().all(|p| !p.starts_with("target/")), "target/ is written in place");
    assert!(rows.keys().all(|p| !p.starts_with("tools/count/target/")), "a nested target/ is written in place");
    assert!(rows.keys().any(|p| p.starts_with("tools/count/gated/")), "a build directory of another name is gated");
}

#[test]
fn mmap_writes_are_visible_after_close_and_committed_as_the_writers() {
    let m = Mounted::new();
    let script = r#"
import mmap, os, sys
path = sys.argv[1]
os.makedirs(os.path.dirname(path), exist_ok=True)
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
os.ftruncate(fd, 3 * 4096)
mm = mmap.mmap(fd, 3 * 4096)
mm[0:5] = b"first"
mm[4093:4099] = b"across"
mm[-4:] = b"last"
mm.close()
os.close(fd)
# Pages dirtied after close() reach the file when the mapping goes (before the release).
with open(path, "r+b") as f:
    mm = mmap.mmap(f.fileno(), 0)
mm[8192:8197] = b"later"
mm.close()
print(os.getpid())
"#;
    let out =
        run(program("python3").arg("-c").arg(script).arg(m.path("data/pages.bin")).env("PYTHONDONTWRITEBYTECODE", "1"));
    let pid: u32 = out.trim().parse().unwrap();
    let mut first = vec![0u8; 3 * 4096];
    first[0..5].copy_from_slice(b"first");
    first[4093..4099].copy_from_slice(b"across");
    first[3 * 4096 - 4..].copy_from_slice(b"last");
    let mut last = first.clone();
    last[8192..8197].copy_from_slice(b"later");
    assert_eq!(m.read("data/pages.bin").unwrap(), last);
    // The last pages are committed at the release, just after the process's close returned.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while m.backing("data/pages.bin").unwrap() != last && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(m.backing("data/pages.bin").unwrap(), last);
    let rows = rows_of(&m, "data/pages.bin");
    let versions: Vec<_> = rows.iter().map(|r| (r.op(), r.sha256)).collect();
    assert_eq!(versions, [(Op::Create, Some(sha(&first))), (Op::Write, Some(sha(&last)))]);
    // The kernel writes mapped pages back without a pid: the rows name the process that mapped them.
    assert!(rows.iter().all(|r| r.pid == Some(pid) && r.comm.as_deref() == Some("python3")), "{rows:?}");
}
