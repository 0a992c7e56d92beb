//! The journal's keyed chain and its anchored head: what makes a rewrite of the journal
//! detectable by someone who cannot read the workspace's keys.
//!
//! The plain `chain` (sha256 of the previous line) catches accidents and careless edits, but
//! anyone can recompute it. So every row rwfs writes also carries `mac`, an HMAC-SHA256 under a
//! per-workspace key (`keys/journal.key`, 32 random bytes, 0600, in the state directory's
//! hidden `keys/`: the mount neither lists nor opens it, MCP tools refuse it):
//!
//! ```text
//!   mac(row n)  = HMAC(key, "rwfs journal row\0"  || chain(row n))      chain = sha256(line n-1)
//!   head        = generation, seq, len, chain_next = sha256(last line),
//!                 tag = HMAC(key, "rwfs journal head\0" || generation || seq || len || chain_next)
//! ```
//!
//! The head (`keys/journal.head`) vouches for the end of the journal: the last row, which no
//! later row covers, and the length, so a truncation (to 0 bytes included) or a rewrite of the
//! tail is caught. It is two fixed-width slots rewritten in turn (generation `generation` goes to slot
//! `generation % 2`), and the valid slot with the highest generation counts: a write torn by a power
//! loss spoils one slot and leaves the previous head in the other.
//!
//! Invariants:
//! - The key and an initial head exist, durably, before the first keyed row is written; once a
//!   keyed row exists every later row is keyed (`Unkeyed` otherwise), so a forged row needs the
//!   key whatever chain value it carries.
//! - The head is written after its batch's `fdatasync`, never before: it never vouches for bytes
//!   that are not durable. It is not synced per batch (it is at close): after a crash it may lag
//!   behind the journal by the last batches, whose rows the keyed chain still covers; it is
//!   never ahead.
//! - A head the journal does not match is evidence that must outlive the next append: the
//!   engine records it as a `tamper` row (keyed like any other) before it rewrites the head.
//!
//! Not covered, by design: whoever can read the key (root, or a process of the user's uid that
//! reaches the state directory without going through the mount) can rewrite the journal, the
//! head and the key together. Rows written before the key existed keep only the plain chain.

use std::io;

use crate::durable::{Dir, Disk, File, FileKind};
use crate::error::{Error, Result};
use crate::sha::{Sha256, hmac_sha256};

/// The keys' directory inside the state directory.
pub const KEYS_DIR: &str = crate::durable::layout::KEYS;
/// The journal's key, inside `KEYS_DIR`.
pub const KEY_FILE: &str = "journal.key";
/// The journal's head, inside `KEYS_DIR`.
pub const HEAD_FILE: &str = "journal.head";

const ROW_DOMAIN: &[u8] = b"rwfs journal row\0";
const HEAD_DOMAIN: &[u8] = b"rwfs journal head\0";
const HEAD_MAGIC: &str = "rwfs-journal-head";

/// The workspace's journal key.
#[derive(Clone)]
pub struct Seal {
    key: [u8; 32],
}

impl std::fmt::Debug for Seal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Seal(..)")
    }
}

impl Seal {
    pub fn new(key: [u8; 32]) -> Seal {
        Seal { key }
    }

    /// The `mac` of the row whose `chain` is `chain`.
    pub fn row_mac(&self, chain: &Sha256) -> Sha256 {
        let mut message = Vec::with_capacity(ROW_DOMAIN.len() + 32);
        message.extend_from_slice(ROW_DOMAIN);
        message.extend_from_slice(chain.as_bytes());
        Sha256::from_bytes(hmac_sha256(&self.key, &message))
    }

    /// Head generation `generation`, vouching for a journal of `len` bytes whose highest seq is `seq`
    /// and whose last row line hashes to `chain_next`.
    pub fn head(&self, generation: u64, seq: u64, len: u64, chain_next: Sha256) -> Head {
        Head { generation, seq, len, chain_next, tag: self.head_tag(generation, seq, len, &chain_next) }
    }

    fn head_tag(&self, generation: u64, seq: u64, len: u64, chain_next: &Sha256) -> Sha256 {
        let mut message = Vec::with_capacity(HEAD_DOMAIN.len() + 56);
        message.extend_from_slice(HEAD_DOMAIN);
        message.extend_from_slice(&generation.to_be_bytes());
        message.extend_from_slice(&seq.to_be_bytes());
        message.extend_from_slice(&len.to_be_bytes());
        message.extend_from_slice(chain_next.as_bytes());
        Sha256::from_bytes(hmac_sha256(&self.key, &message))
    }

    /// Does `head` carry this key's tag?
    pub fn vouches(&self, head: &Head) -> bool {
        self.head_tag(head.generation, head.seq, head.len, &head.chain_next) == head.tag
    }

    /// The slot this key vouches for with the highest generation.
    pub fn newest(&self, slots: &[Head]) -> Option<Head> {
        slots.iter().filter(|h| self.vouches(h)).max_by_key(|h| h.generation).copied()
    }
}

/// What the head file says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    pub generation: u64,
    pub seq: u64,
    pub len: u64,
    pub chain_next: Sha256,
    pub tag: Sha256,
}

/// The width of a head slot.
const SLOT: usize = 235;

impl Head {
    /// One line, always `SLOT` bytes (so it is rewritten in place with one `pwrite`).
    pub fn to_line(&self) -> String {
        let (generation, seq, len, chain, tag) = (self.generation, self.seq, self.len, self.chain_next, self.tag);
        format!("{HEAD_MAGIC} 1 gen={generation:020} seq={seq:020} len={len:020} chain={chain} mac={tag}\n")
    }

    pub fn parse(text: &[u8]) -> Option<Head> {
        let text = std::str::from_utf8(text).ok()?;
        let mut parts = text.strip_suffix('\n')?.split(' ');
        if parts.next()? != HEAD_MAGIC || parts.next()? != "1" {
            return None;
        }
        let mut field = |name: &str| parts.next()?.strip_prefix(name).map(str::to_string);
        let generation = field("gen=")?.parse().ok()?;
        let seq = field("seq=")?.parse().ok()?;
        let len = field("len=")?.parse().ok()?;
        let chain_next = field("chain=")?.parse().ok()?;
        let tag = field("mac=")?.parse().ok()?;
        Some(Head { generation, seq, len, chain_next, tag })
    }

    /// The slots of a head file that parse (their tags are the key's to check).
    pub fn parse_slots(bytes: &[u8]) -> Vec<Head> {
        bytes.chunks(SLOT).filter_map(Head::parse).collect()
    }
}

/// What [`load`] found in `keys/`.
#[derive(Debug, Default)]
pub struct Keys {
    pub seal: Option<Seal>,
    /// `None`: no head file; else its slots that parse.
    pub head: Option<Vec<Head>>,
}

/// Read the key and the head, if there are any (nothing is created). An error names the file
/// it concerns. A head that is there but cannot be read as a file (a directory, say) reads as
/// a head with no valid slot: the scan reports it (`HeadForged`), and the engine's open, which
/// must rewrite it, fails naming it.
pub fn load(disk: &dyn Disk, state: &Dir) -> Result<Keys> {
    let keys = match disk.open_dir(state, KEYS_DIR) {
        Ok(keys) => keys,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Keys::default()),
        Err(e) => return Err(Error::io("open journal keys directory", e).at(state_path(KEYS_DIR))),
    };
    let key_error = |e| Error::io("read journal key", e).at(state_path(&format!("{KEYS_DIR}/{KEY_FILE}")));
    let seal = match read_small(disk, &keys, KEY_FILE).map_err(key_error)? {
        Some(bytes) if bytes.len() >= 32 => {
            let mut key = [0u8; 32];
            key.copy_from_slice(&bytes[..32]);
            Some(Seal::new(key))
        }
        Some(_) => return Err(key_error(io::Error::other("keys/journal.key is shorter than 32 bytes"))),
        None => None,
    };
    let head = match read_small(disk, &keys, HEAD_FILE) {
        Ok(bytes) => bytes.map(|bytes| Head::parse_slots(&bytes)),
        Err(e) => {
            tracing::warn!(error = %e, "the journal head (keys/journal.head) cannot be read");
            Some(Vec::new())
        }
    };
    Ok(Keys { seal, head })
}

/// `name` inside the state directory, as errors name it.
fn state_path(name: &str) -> String {
    format!("{}/{name}", crate::durable::STATE_DIR)
}

/// The key, created (durably, before any row uses it) when there is none; the keys directory.
pub fn ensure_key(disk: &dyn Disk, state: &Dir) -> io::Result<(Seal, Dir)> {
    let keys = match disk.stat(state, KEYS_DIR)? {
        Some(stat) if stat.kind == FileKind::Dir => disk.open_dir(state, KEYS_DIR)?,
        Some(_) => return Err(io::Error::from_raw_os_error(nix::libc::ENOTDIR)),
        None => {
            match disk.mkdir(state, KEYS_DIR, 0o700) {
                Ok(()) => disk.sync_dir(state)?,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
            disk.open_dir(state, KEYS_DIR)?
        }
    };
    if let Some(bytes) = read_small(disk, &keys, KEY_FILE)? {
        if bytes.len() < 32 {
            return Err(io::Error::other("keys/journal.key is shorter than 32 bytes"));
        }
        let mut key = [0u8; 32];
        key.copy_from_slice(&bytes[..32]);
        return Ok((Seal::new(key), keys));
    }
    let mut key = [0u8; 32];
    getrandom::fill(&mut key).map_err(|e| io::Error::other(e.to_string()))?;
    let file = disk.create_new(&keys, KEY_FILE, 0o600)?;
    disk.write_at(&file, &key, 0)?;
    disk.sync(&file)?;
    disk.sync_dir(&keys)?;
    Ok((Seal::new(key), keys))
}

/// Open (creating) the head file for rewriting.
pub fn open_head(disk: &dyn Disk, keys: &Dir) -> io::Result<(File, bool)> {
    let existed = disk.stat(keys, HEAD_FILE)?.is_some();
    let file = disk.open_write(keys, HEAD_FILE, true, 0o600)?;
    Ok((file, existed))
}

/// Write `head` into its slot (`generation % 2`); `sync` makes it durable.
pub fn write_head(disk: &dyn Disk, file: &File, head: &Head, sync: bool) -> io::Result<()> {
    disk.write_at(file, head.to_line().as_bytes(), (head.generation % 2) * SLOT as u64)?;
    if sync { disk.sync_data(file) } else { Ok(()) }
}

fn read_small(disk: &dyn Disk, dir: &Dir, name: &str) -> io::Result<Option<Vec<u8>>> {
    let file = match disk.open_read(dir, name) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut buf = vec![0u8; 2 * SLOT];
    let mut got = 0;
    while got < buf.len() {
        match disk.read_at(&file, &mut buf[got..], got as u64)? {
            0 => break,
            n => got += n,
        }
    }
    buf.truncate(got);
    Ok(Some(buf))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_line_round_trips_at_a_fixed_width() {
        let seal = Seal::new([7; 32]);
        let small = seal.head(0, 1, 2, Sha256::of(b"x"));
        let big = seal.head(u64::MAX, u64::MAX, u64::MAX, Sha256::of(b"y"));
        assert_eq!((small.to_line().len(), big.to_line().len()), (SLOT, SLOT));
        assert_eq!(Head::parse(small.to_line().as_bytes()), Some(small));
        assert!(seal.vouches(&small));
        assert!(!Seal::new([8; 32]).vouches(&small));
        let forged = Head { len: 1, ..small };
        assert!(!seal.vouches(&forged));
        assert_eq!(Head::parse(b"garbage"), None);
        // Two slots; the newest valid one counts, a torn one is skipped.
        let next = seal.head(1, 5, 9, Sha256::of(b"z"));
        let mut file = [small.to_line(), next.to_line()].concat().into_bytes();
        assert_eq!(seal.newest(&Head::parse_slots(&file)), Some(next));
        file[SLOT + 40] ^= 1;
        assert_eq!(seal.newest(&Head::parse_slots(&file)), Some(small));
    }
}
