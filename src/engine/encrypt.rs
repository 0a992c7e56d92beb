//! `rwfs gc --encrypt`: seal the plaintext objects that should be sealed (the migration of a
//! store written before encryption at rest, or while the key was missing).
//!
//! Which objects: every one a `block` row names (a refused draft), and every one in which the
//! scanner finds a credential the policy does not allow (`gate::holds_credential`, the same rule
//! as for versions leaving the tree). Each is sealed by `Objects::seal`: the sealed copy written,
//! synced and renamed over the plaintext, so a crash leaves one or the other, never neither.
//! Not at open: scanning the whole store would cost every `rwfs` command and every mount start
//! time in proportion to the store, for objects that new writes never add.

use std::collections::{HashMap, HashSet};

use crate::error::Result;
use crate::journal::Op;
use crate::sha::Sha256;

use super::Engine;
use super::gate::{SCAN_MAX, holds_credential};

/// What [`Engine::encrypt`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Encrypted {
    /// Objects looked at.
    pub objects: u64,
    /// Objects sealed now.
    pub sealed: u64,
    /// Objects that were sealed already.
    pub already: u64,
}

impl Engine {
    /// Seal every plaintext object that holds refused or credential-bearing content.
    pub fn encrypt(&self) -> Result<Encrypted> {
        let mut refused: HashSet<Sha256> = HashSet::new();
        // The path a version was written at: the policy's decision depends on it.
        let mut paths: HashMap<Sha256, String> = HashMap::new();
        self.core.ws.read_journal(|entry| {
            let row = &entry.row;
            if let Some(sha) = row.sha256 {
                if row.op() == Op::Block {
                    refused.insert(sha);
                }
                paths.entry(sha).or_insert_with(|| row.path.clone());
            }
        })?;
        let objects = &self.core.objects;
        let mut done = Encrypted::default();
        for (sha, stat) in objects.list()? {
            done.objects += 1;
            match objects.is_sealed(&sha)? {
                Some(false) => {}
                Some(true) => {
                    done.already += 1;
                    continue;
                }
                None => continue,
            }
            let credential = !refused.contains(&sha) && stat.size <= SCAN_MAX as u64 && {
                let bytes = match objects.open_object(&sha)? {
                    Some(file) => crate::store::read_all(self.core.ws.disk(), &file)?,
                    None => continue,
                };
                let path = paths.get(&sha).map_or("", String::as_str);
                self.core.gate.judge(path, &bytes).is_some_and(|j| holds_credential(&j))
            };
            if (refused.contains(&sha) || credential) && objects.seal(&sha)? {
                done.sealed += 1;
            }
        }
        Ok(done)
    }
}
