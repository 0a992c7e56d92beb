//! Temporary names: which file a program's temporary copy, swap or backup file stands for.
//!
//! Programs rarely write a file in place. Claude Code's Write and Edit tools write
//! `config.py.tmp.<pid>.<12 hex>`, fsync it and rename it over `config.py`; `sed -i` writes
//! `sedXXXXXX` and renames it; JetBrains IDEs write `x___jb_tmp___`; npm's `write-file-atomic`
//! writes `package.json.<decimal hash>`; vim keeps its swap in `.x.swp` and its backup in `x~`,
//! emacs its autosave in `#x#`, kate in `.x.kate-swp`. The gate judges, names and counts such a
//! file as the file it stands for ([`Temporary::target`]): the scanner's file kind (hence the
//! language of a suggested replacement), the envelope's `path` and `temporary_for`, the retry
//! budget's key. `rwfs log` leaves out the rows of copies renamed over their target
//! ([`Role::Copy`]) as it leaves out editors' files, so that one save reads as one row.
//!
//! Pure: names in, names out. Where the name alone does not say which file (sed's), the engine
//! asks the writer's command line (`engine/gate.rs`); this module does no I/O.

/// What a temporary name is to the file it stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A new version, written whole and then renamed over the file (Claude Code, sed, JetBrains,
    /// `write-file-atomic`).
    Copy,
    /// An editor's own file beside it: swap, backup, autosave (policy `editor_files` decides
    /// which of their rows `rwfs log` shows).
    Editor,
}

/// A temporary name (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Temporary {
    /// The workspace path of the file it stands for, when the name says it.
    pub target: Option<String>,
    pub role: Role,
}

/// The temporary name `path` is, if it is one.
pub fn of(path: &str) -> Option<Temporary> {
    let (dir, name) = match path.rsplit_once('/') {
        Some((dir, name)) => (Some(dir), name),
        None => (None, path),
    };
    let (target, role) = match name_of(name)? {
        (Some(target), role) if !target.is_empty() && target != "." && target != ".." => (Some(target), role),
        (Some(_), _) => return None,
        (None, role) => (None, role),
    };
    let target = target.map(|t| match dir {
        Some(dir) => format!("{dir}/{t}"),
        None => t.to_string(),
    });
    Some(Temporary { target, role })
}

/// Is `path` a copy renamed over its target ([`Role::Copy`])? Their rows are left out of `rwfs log`.
pub fn is_copy(path: &str) -> bool {
    of(path).is_some_and(|t| t.role == Role::Copy)
}

/// The target's name and the role of a temporary file name; `None` for an ordinary name.
fn name_of(name: &str) -> Option<(Option<&str>, Role)> {
    if let Some(target) = claude_code(name).or_else(|| write_file_atomic(name)) {
        return Some((Some(target), Role::Copy));
    }
    if let Some(target) = name.strip_suffix("___jb_tmp___") {
        return Some((Some(target), Role::Copy));
    }
    if is_sed(name) {
        return Some((None, Role::Copy));
    }
    editor(name).map(|target| (Some(target), Role::Editor))
}

/// Claude Code's `NAME.tmp.<pid>.<hex>` (12 hex digits in 2.1.x).
fn claude_code(name: &str) -> Option<&str> {
    let (rest, hex) = name.rsplit_once('.')?;
    let (rest, pid) = rest.rsplit_once('.')?;
    let target = rest.strip_suffix(".tmp")?;
    let hex_ok = (6..=32).contains(&hex.len()) && hex.bytes().all(|b| b.is_ascii_hexdigit());
    let pid_ok = (1..=10).contains(&pid.len()) && pid.bytes().all(|b| b.is_ascii_digit());
    (hex_ok && pid_ok).then_some(target)
}

/// npm's `write-file-atomic`: `NAME.<murmurhash as a decimal number>`, for a NAME with an
/// extension (`package.json.3194726542`): a bare `data.20240101` is left alone.
fn write_file_atomic(name: &str) -> Option<&str> {
    let (target, hash) = name.rsplit_once('.')?;
    let hash_ok = (7..=10).contains(&hash.len()) && hash.bytes().all(|b| b.is_ascii_digit());
    let named = target
        .rsplit_once('.')
        .is_some_and(|(stem, ext)| !stem.is_empty() && !ext.is_empty() && !ext.bytes().all(|b| b.is_ascii_digit()));
    (hash_ok && named).then_some(target)
}

/// GNU sed's `sedXXXXXX` (`mkostemp` with six letters or digits).
fn is_sed(name: &str) -> bool {
    name.strip_prefix("sed").is_some_and(|x| x.len() == 6 && x.bytes().all(|b| b.is_ascii_alphanumeric()))
}

/// Editors' files beside the one they edit: vim's swap `.NAME.swp` (`.swo`, …, `.swa`, and the
/// probe `.swx`), kate's `.NAME.kate-swp`, emacs's autosave `#NAME#` and lock `.#NAME`, vim's and
/// emacs's backup `NAME~`, JetBrains' `NAME___jb_old___`.
fn editor(name: &str) -> Option<&str> {
    if let Some(hidden) = name.strip_prefix('.') {
        if let Some(target) = hidden.strip_suffix(".kate-swp") {
            return Some(target);
        }
        if let Some((target, ext)) = hidden.rsplit_once('.')
            && ext.len() == 3
            && ext.starts_with("sw")
            && (ext.as_bytes()[2].is_ascii_lowercase())
        {
            return Some(target);
        }
        if let Some(target) = hidden.strip_prefix('#') {
            return Some(target);
        }
    }
    if let Some(target) = name.strip_prefix('#').and_then(|n| n.strip_suffix('#')) {
        return Some(target);
    }
    if let Some(target) = name.strip_suffix("___jb_old___") {
        return Some(target);
    }
    name.strip_suffix('~')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check(path: &str, expect: Option<(Option<&str>, Role)>) {
        let got = of(path).map(|t| (t.target, t.role));
        assert_eq!(got, expect.map(|(t, r)| (t.map(str::to_string), r)), "{path}");
    }

    #[test]
    fn temporary_copies_name_their_target() {
        check("app/config.py.tmp.12345.0123456789ab", Some((Some("app/config.py"), Role::Copy)));
        check("notes.txt.tmp.7.deadbeefcafe", Some((Some("notes.txt"), Role::Copy)));
        check(".env.tmp.4242.a1b2c3d4e5f6", Some((Some(".env"), Role::Copy)));
        check("src/Main.java___jb_tmp___", Some((Some("src/Main.java"), Role::Copy)));
        check("package.json.3194726542", Some((Some("package.json"), Role::Copy)));
        check("app/sedAb12Cd", Some((None, Role::Copy)));
    }

    #[test]
    fn editors_files_name_the_file_they_edit() {
        check("src/.main.rs.swp", Some((Some("src/main.rs"), Role::Editor)));
        check(".config.py.swx", Some((Some("config.py"), Role::Editor)));
        check("config.py~", Some((Some("config.py"), Role::Editor)));
        check("#config.py#", Some((Some("config.py"), Role::Editor)));
        check(".#config.py", Some((Some("config.py"), Role::Editor)));
        check(".app.yaml.kate-swp", Some((Some("app.yaml"), Role::Editor)));
        check("Main.java___jb_old___", Some((Some("Main.java"), Role::Editor)));
    }

    #[test]
    fn ordinary_names_are_not_temporary() {
        for path in [
            "config.py",
            "data.20240101",
            "notes.tmp",
            "a.tmp.b.c",
            "build.tmp.12.xyz",
            "sed",
            "sedimentary",
            "seds.py",
            ".env",
            ".env.local",
            ".gitignore",
            "v1.2.3",
            "release.1.2345678",
            "~",
            ".swp",
            "#",
            "##",
        ] {
            check(path, None);
        }
    }

    #[test]
    fn only_copies_are_left_out_of_the_log() {
        assert!(is_copy("a.py.tmp.1.0123456789ab"));
        assert!(is_copy("sedXXXXXX"));
        assert!(!is_copy("a.py~"));
        assert!(!is_copy("a.py"));
    }
}
