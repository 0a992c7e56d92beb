//! Encryption at rest of the objects that hold a credential (refused drafts, and kept versions
//! in which the scanner found one): the sealed format, the workspace's key, and sealing and
//! opening one object's bytes.
//!
//! A sealed object is `RWFSSEAL` (8 bytes), a format version (1 byte, [`VERSION`]), a random
//! 24-byte nonce, then the XChaCha20-Poly1305 ciphertext with its tag (RustCrypto
//! `chacha20poly1305`). The associated data is the object's name, the sha256 of the plaintext:
//! the journal keeps naming versions by their plaintext digest (dedup and `restore` unchanged),
//! and a sealed object moved to another name does not open. A plaintext object that happens to
//! start with the magic is told apart by its bytes hashing to its name.
//!
//! The key ([`Key`]) is 32 random bytes, in hex, in a file outside the workspace: `RWFS_KEY_FILE`
//! when set, else `$XDG_CONFIG_HOME/rwfs/keys/<workspace id>.key` (or `~/.config/…`), 0600 in a
//! 0700 directory, created on the first object sealed. The workspace id is
//! `.resilient_write/workspace.id` (random, not secret). A key path inside the workspace is
//! refused: the mount would show it. Not here: which objects are sealed (the engine decides,
//! `store/mod.rs` writes them), and streaming (an object is sealed in memory).

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};

use crate::durable::{Dir, Disk, Install, Source, stage};
use crate::error::{Error, IoContext, Reason, Result};
use crate::sha::Sha256;

/// What every sealed object starts with.
pub const MAGIC: &[u8; 8] = b"RWFSSEAL";
/// The sealed format's version (the byte after [`MAGIC`]).
pub const VERSION: u8 = 1;
const NONCE: usize = 24;
/// Bytes before the ciphertext.
pub const HEADER: usize = MAGIC.len() + 1 + NONCE;
/// The environment variable naming the key file (CI, tests, a key kept elsewhere).
pub const KEY_FILE_ENV: &str = "RWFS_KEY_FILE";
/// The workspace id's file in the state directory.
pub const ID_FILE: &str = crate::durable::layout::WORKSPACE_ID;

/// Does `bytes` (an object's first bytes at least) start like a sealed object?
pub fn looks_sealed(bytes: &[u8]) -> bool {
    bytes.len() >= HEADER + 16 && bytes.starts_with(MAGIC) && bytes[MAGIC.len()] == VERSION
}

/// The key of one workspace.
pub struct Key(XChaCha20Poly1305);

impl Key {
    /// Seal `plain`, the bytes named `sha`.
    pub fn seal(&self, plain: &[u8], sha: &Sha256) -> Result<Vec<u8>> {
        let mut nonce = [0u8; NONCE];
        getrandom::fill(&mut nonce).map_err(|e| Error::io("draw a nonce", std::io::Error::other(e.to_string())))?;
        let sealed = self
            .0
            .encrypt(XNonce::from_slice(&nonce), Payload { msg: plain, aad: sha.as_bytes() })
            .map_err(|_| Error::io("encrypt object", std::io::Error::other("encryption failed")))?;
        let mut out = Vec::with_capacity(HEADER + sealed.len());
        out.extend_from_slice(MAGIC);
        out.push(VERSION);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        Ok(out)
    }

    /// The plaintext of the sealed object `sealed` named `sha`: `Unsealable` when the key is
    /// not the one it was sealed with or its bytes were changed.
    pub fn open(&self, sealed: &[u8], sha: &Sha256) -> Result<Vec<u8>> {
        if !looks_sealed(sealed) {
            return Err(Reason::Unsealable { sha: *sha }.into());
        }
        let nonce = XNonce::from_slice(&sealed[MAGIC.len() + 1..HEADER]);
        self.0
            .decrypt(nonce, Payload { msg: &sealed[HEADER..], aad: sha.as_bytes() })
            .map_err(|_| Reason::Unsealable { sha: *sha }.into())
    }
}

/// Where a workspace's key is, and the key once read (or made).
pub struct Keyring {
    disk: std::sync::Arc<dyn Disk>,
    state: Dir,
    /// The workspace root, to refuse a key the mount would show.
    root: PathBuf,
    key: Mutex<Option<std::sync::Arc<Key>>>,
}

impl Keyring {
    pub fn new(disk: std::sync::Arc<dyn Disk>, state: &Dir, root: &Path) -> Result<Keyring> {
        let state = state.try_clone().step("open state directory")?;
        Ok(Keyring { disk, state, root: root.to_path_buf(), key: Mutex::default() })
    }

    /// The key, read from its file; made first when `create` (the first object sealed).
    pub fn key(&self, create: bool) -> Result<std::sync::Arc<Key>> {
        let mut cached = self.key.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(key) = &*cached {
            return Ok(key.clone());
        }
        // A key made before and lost is not replaced by a new one: objects sealed under both
        // would then need two keys. Only the first object sealed makes the key.
        let first = self.disk.stat(&self.state, ID_FILE).step("stat workspace.id")?.is_none();
        let path = self.path(create)?;
        let key = match std::fs::read_to_string(&path) {
            Ok(text) => parse_key(&text).ok_or_else(|| unavailable(&path, "not 64 hex digits"))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && create && first => make_key(&path)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(unavailable(&path, "missing")),
            Err(e) => return Err(Error::io("read the key file", e).at(path.display().to_string())),
        };
        let key = std::sync::Arc::new(Key(XChaCha20Poly1305::new((&key).into())));
        *cached = Some(key.clone());
        Ok(key)
    }

    /// The key file's path: `RWFS_KEY_FILE`, else the user's config directory by workspace id.
    pub fn path(&self, create: bool) -> Result<PathBuf> {
        let id = self.workspace_id(create);
        let path = match std::env::var_os(KEY_FILE_ENV).filter(|v| !v.is_empty()) {
            Some(path) => PathBuf::from(path),
            None => {
                let config = std::env::var_os("XDG_CONFIG_HOME")
                    .map(PathBuf::from)
                    .filter(|p| p.is_absolute())
                    .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".config")))
                    .ok_or_else(|| unavailable(Path::new("$HOME/.config/rwfs/keys"), "unknown: HOME is not set"))?;
                config.join("rwfs").join("keys").join(format!("{}.key", id?))
            }
        };
        let root = std::fs::canonicalize(&self.root).unwrap_or_else(|_| self.root.clone());
        let mut dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        // The nearest existing ancestor says where the file is (or will be) for real.
        while !dir.as_os_str().is_empty() && std::fs::symlink_metadata(&dir).is_err() {
            dir = dir.parent().map(Path::to_path_buf).unwrap_or_default();
        }
        if std::fs::canonicalize(&dir).is_ok_and(|dir| dir.starts_with(&root)) {
            return Err(Reason::KeyInsideWorkspace { path: path.display().to_string() }.into());
        }
        Ok(path)
    }

    /// The workspace's id (`.resilient_write/workspace.id`), made when `create`.
    fn workspace_id(&self, create: bool) -> Result<String> {
        let disk = &*self.disk;
        if let Ok(file) = disk.open_read(&self.state, ID_FILE) {
            let mut buf = [0u8; 64];
            let got = disk.read_at(&file, &mut buf, 0).step("read workspace.id")?;
            let id = String::from_utf8_lossy(&buf[..got]).trim().to_string();
            if !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                return Ok(id);
            }
        }
        if !create {
            return Err(unavailable(Path::new(".resilient_write/workspace.id"), "missing (no key was ever made)"));
        }
        let mut raw = [0u8; 16];
        getrandom::fill(&mut raw)
            .map_err(|e| Error::io("draw a workspace id", std::io::Error::other(e.to_string())))?;
        let id = format!("ws_{}", hex::encode(raw));
        let staged = stage(disk, &self.state, Source::Bytes(format!("{id}\n").as_bytes()), &Default::default())?;
        staged.sync(disk)?;
        staged.install(disk, &self.state, ID_FILE, Install::Replace, None)?;
        disk.sync_dir(&self.state).step("fsync state directory")?;
        Ok(id)
    }
}

fn unavailable(path: &Path, problem: &str) -> Error {
    Reason::KeyUnavailable { path: path.display().to_string(), problem: problem.to_string() }.into()
}

fn parse_key(text: &str) -> Option<[u8; 32]> {
    let bytes = hex::decode(text.trim()).ok()?;
    bytes.try_into().ok()
}

/// Make a key file at `path` (0600, its directory 0700), durably; a key another process made
/// first wins.
fn make_key(path: &Path) -> Result<[u8; 32]> {
    let at = || path.display().to_string();
    if let Some(dir) = path.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| Error::io("create the key directory", e).at(at()))?;
        if dir.file_name().is_some_and(|n| n == "keys") {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| Error::io("chmod the key directory", e).at(at()))?;
        }
    }
    let mut key = [0u8; 32];
    getrandom::fill(&mut key).map_err(|e| Error::io("draw a key", std::io::Error::other(e.to_string())))?;
    let mut file = match std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let text = std::fs::read_to_string(path).map_err(|e| Error::io("read the key file", e).at(at()))?;
            return parse_key(&text).ok_or_else(|| unavailable(path, "not 64 hex digits"));
        }
        Err(e) => return Err(Error::io("create the key file", e).at(at())),
    };
    file.write_all(format!("{}\n", hex::encode(key)).as_bytes())
        .map_err(|e| Error::io("write the key file", e).at(at()))?;
    file.sync_all().map_err(|e| Error::io("fsync the key file", e).at(at()))?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| Error::io("fsync the key directory", e).at(at()))?;
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_bytes_open_only_under_their_name_and_key() {
        let key = Key(XChaCha20Poly1305::new((&[7u8; 32]).into()));
        let plain = b"some kept version".to_vec();
        let sha = Sha256::of(&plain);
        let sealed = key.seal(&plain, &sha).expect("seal");
        assert!(looks_sealed(&sealed));
        assert!(!sealed.windows(plain.len()).any(|w| w == plain.as_slice()));
        assert_eq!(key.open(&sealed, &sha).expect("open"), plain);
        assert!(key.open(&sealed, &Sha256::of(b"other")).is_err());
        let mut flipped = sealed.clone();
        flipped[HEADER + 2] ^= 1;
        assert!(key.open(&flipped, &sha).is_err());
        let other = Key(XChaCha20Poly1305::new((&[8u8; 32]).into()));
        assert!(other.open(&sealed, &sha).is_err());
    }
}
