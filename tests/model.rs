//! Model-based test: random operation sequences applied to the engine and to a plain in-memory
//! model, compared after every step (content of every path, kept versions, journal length).

use std::collections::{BTreeMap, BTreeSet};

use rwfs::engine::{Expect, Restored, WriteMode};
use rwfs::history::RestoreTo;

use crate::support::{Rng, Ws, actor, sha, tree, write_expect};

#[derive(Default)]
struct Model {
    files: BTreeMap<String, Vec<u8>>,
    /// Every version that ever left the tree.
    kept: BTreeSet<Vec<u8>>,
    /// Every version each path ever had.
    seen: BTreeMap<String, Vec<Vec<u8>>>,
    rows: usize,
}

const PATHS: &[&str] = &["a.txt", "dir/b.txt", "dir/sub/c.txt", "d.md"];

#[test]
fn random_sequences_match_the_model() {
    for seed in 1..=6u64 {
        run(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15), 120);
    }
}

fn run(seed: u64, steps: usize) {
    let ws = Ws::new();
    let engine = ws.open();
    let mut rng = Rng(seed);
    let mut model = Model::default();
    for step in 0..steps {
        let path = PATHS[rng.below(PATHS.len() as u64) as usize];
        let payload = format!("{seed:x}/{step}/{}\n", rng.next()).into_bytes();
        let current = model.files.get(path).cloned();
        let context = format!("seed {seed:#x} step {step} path {path}");
        match rng.below(7) {
            0 => {
                let r = write_expect(&engine, path, &payload, WriteMode::Create, None);
                match &current {
                    Some(_) => assert_eq!(r.unwrap_err().reason().code(), "file_already_exists", "{context}"),
                    None => {
                        r.unwrap();
                        model.set(path, payload);
                    }
                }
            }
            1 | 2 => {
                write_expect(&engine, path, &payload, WriteMode::Overwrite, None).unwrap();
                model.set(path, payload);
            }
            3 => {
                write_expect(&engine, path, &payload, WriteMode::Append, None).unwrap();
                let appended = [current.unwrap_or_default(), payload].concat();
                model.set(path, appended);
            }
            4 => {
                // A compare-and-swap that is right half of the time.
                let right = rng.below(2) == 0;
                let expect = match (&current, right) {
                    (Some(c), true) => Expect::Sha(sha(c)),
                    (None, true) => Expect::Absent,
                    (_, false) => Expect::Sha(sha(b"never written")),
                };
                let r = write_expect(&engine, path, &payload, WriteMode::Overwrite, Some(expect));
                if right {
                    r.unwrap();
                    model.set(path, payload);
                } else {
                    assert_eq!(r.unwrap_err().reason().code(), "expected_prev_sha256_mismatch", "{context}");
                }
            }
            5 => {
                let r = engine.delete(path, None, &actor());
                match current {
                    Some(c) => {
                        r.unwrap();
                        model.kept.insert(c);
                        model.files.remove(path);
                        model.rows += 1;
                    }
                    None => assert_eq!(r.unwrap_err().reason().code(), "not_found", "{context}"),
                }
            }
            _ => {
                // Restore a random earlier version of this path, if any.
                let versions = model.seen.get(path).cloned().unwrap_or_default();
                if versions.is_empty() {
                    continue;
                }
                let wanted = versions[rng.below(versions.len() as u64) as usize].clone();
                match engine.restore(path, &RestoreTo::Sha(sha(&wanted).to_hex()), &actor()).unwrap() {
                    Restored::Committed(_) => model.set(path, wanted),
                    Restored::AlreadyCurrent { .. } => assert_eq!(current.as_ref(), Some(&wanted), "{context}"),
                }
            }
        }
        // Compare after every step.
        let on_disk: BTreeMap<String, Vec<u8>> = tree(ws.path()).into_iter().collect();
        assert_eq!(on_disk, model.files, "{context}: tree differs from the model");
        for version in &model.kept {
            assert!(ws.object(&sha(version)).is_some(), "{context}: a kept version is missing");
        }
        assert_eq!(ws.rows().len(), model.rows, "{context}: one row per change");
    }
    engine.close().unwrap();
    assert!(rwfs::history::verify(&ws.workspace()).unwrap().is_clean());
}

impl Model {
    fn set(&mut self, path: &str, content: Vec<u8>) {
        if let Some(old) = self.files.insert(path.to_string(), content.clone()) {
            self.kept.insert(old);
        }
        self.seen.entry(path.to_string()).or_default().push(content);
        self.rows += 1;
    }
}
