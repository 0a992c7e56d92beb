//! Retention: what leaves `objects/`, and in which order (the policy's [`Retention`]).
//!
//! Keeping every version is the point, and a busy workspace (a test suite rewriting fixtures, a
//! formatter in a loop) would fill the disk with them. So the store has a limit, enforced by
//! `rwfs gc` and, in the daemon, every `interval`:
//!
//! 1. versions that left the tree longer ago than `max_age` go (an object's ctime is the last
//!    time its content left the tree, see `store`);
//! 2. while the store is over its limit ([`Retention::limit`]: the smaller of `max_bytes` and
//!    `max_free_fraction` of the space it could use), the oldest version of the path that has
//!    the most kept versions goes, one at a time — the busiest paths pay first, and a file
//!    rewritten once keeps its previous version the longest;
//! 3. never for size: the newest version of a file that is deleted now (the only copy of it),
//!    and a version the mount acknowledged that never reached the tree (an `abort` row names
//!    it: the only copy of what its writer was told is saved); they go by age only.
//!
//! On a full disk (`room.rs`) an emergency run frees room by the same order, but keeps the
//! newest previous version of every path (the one its last change replaced or deleted),
//! unless the policy says otherwise (`retention.full_disk_keeps_previous: false`); its row says
//! how many it kept that way.
//!
//! Each run that removes anything is one `gc` row (its `reason` gives the counts and the limit).
//! Which path an object was a version of comes from the journal (the last row naming its digest
//! as the state before or after a change); an object no row names is its own group of one.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap, VecDeque};
use std::time::{Duration, SystemTime};

use crate::durable::STATE_DIR;
use crate::error::Result;
use crate::journal::{Actor, Change, Ledger, Op};
use crate::policy::Retention;
use crate::sha::Sha256;

use super::{Core, Engine};

/// One kept version, as retention sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kept {
    pub sha: Sha256,
    pub size: u64,
    /// When it last left the tree (ns since the epoch).
    pub left_ns: i64,
    /// The path it was a version of, when a row says.
    pub path: Option<String>,
    /// The newest version of a file deleted now: never removed for size.
    pub last_of_deleted: bool,
    /// The newest previous version of its path (what the path's last change replaced or
    /// deleted): an emergency run keeps it.
    pub newest_previous: bool,
    /// Acknowledged by the mount and never installed (an `abort` row names it): never removed
    /// for size, by any run.
    pub unreached: bool,
}

/// Why a version was removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    Age,
    Size,
}

/// What retention decided.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// In the order they go.
    pub evict: Vec<(Sha256, u64, Why)>,
    pub store_bytes: u64,
    pub limit: u64,
}

/// Decide what goes (see the module documentation); `now_ns` is the clock, `available` the
/// bytes still available on the store's filesystem.
pub fn plan(kept: &[Kept], now_ns: i64, retention: &Retention, available: u64) -> Plan {
    let store_bytes: u64 = kept.iter().map(|k| k.size).sum();
    let limit = retention.limit(store_bytes, available);
    let cutoff = now_ns.saturating_sub(i64::try_from(retention.max_age.as_nanos()).unwrap_or(i64::MAX));
    let mut out = Plan { evict: Vec::new(), store_bytes, limit };
    let mut total = store_bytes;
    let mut groups: HashMap<String, Vec<&Kept>> = HashMap::new();
    for k in kept {
        if k.left_ns < cutoff {
            out.evict.push((k.sha, k.size, Why::Age));
            total -= k.size;
        } else if !k.last_of_deleted && !k.unreached {
            let key = k.path.clone().unwrap_or_else(|| format!("\0{}", k.sha));
            groups.entry(key).or_default().push(k);
        }
    }
    if total <= limit {
        return out;
    }
    // Oldest first within a path; the busiest path (most versions left, then the oldest
    // version) at the top of the heap.
    let mut queues: Vec<VecDeque<&Kept>> = groups
        .into_values()
        .map(|mut v| {
            v.sort_by_key(|k| (k.left_ns, k.sha));
            v.into()
        })
        .collect();
    let mut heap: BinaryHeap<(usize, Reverse<i64>, usize)> =
        queues.iter().enumerate().map(|(i, q)| (q.len(), Reverse(q[0].left_ns), i)).collect();
    while total > limit {
        let Some((_, _, i)) = heap.pop() else { break };
        let Some(k) = queues[i].pop_front() else { continue };
        out.evict.push((k.sha, k.size, Why::Size));
        total -= k.size;
        if let Some(next) = queues[i].front() {
            heap.push((queues[i].len(), Reverse(next.left_ns), i));
        }
    }
    out
}

/// What a retention run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gc {
    pub objects: u64,
    pub bytes: u64,
    /// Removed for age, and for size.
    pub by_age: u64,
    pub by_size: u64,
    /// The store's bytes before, and its limit.
    pub store_bytes: u64,
    pub limit: u64,
    /// The `gc` row (none when a background run removed nothing).
    pub seq: Option<u64>,
}

impl Engine {
    /// Apply retention (the policy's, with `max_age` instead of its age when given) and journal
    /// a `gc` row.
    pub fn gc(&self, max_age: Option<Duration>, actor: &Actor) -> Result<Gc> {
        let mut retention = self.core.gate.policy().retention();
        if let Some(age) = max_age {
            retention.max_age = age;
        }
        self.core.retain(&retention, actor, true)
    }

    /// The background run: the policy's retention, a row only when something was removed.
    pub fn retain(&self) -> Result<Gc> {
        self.core.retain(&self.core.gate.policy().retention(), &Actor::engine(), false)
    }
}

/// What an emergency run removes (see `room.rs`): the normal order with a limit `want` bytes
/// below the store's size. With `retention.full_disk_keeps_previous` (the default) never the
/// newest previous version of a path for size; without it, those too, and then, only if that
/// did not free the `need` bytes the failed step needs, the newest versions of deleted files,
/// the oldest first, until it does. Also returns how many versions were kept as the newest
/// previous ones.
pub fn emergency_plan(kept: &[Kept], now_ns: i64, retention: &Retention, want: u64, need: u64) -> (Plan, u64) {
    let store_bytes: u64 = kept.iter().map(|k| k.size).sum();
    let squeezed = Retention { max_bytes: store_bytes.saturating_sub(want), max_free_fraction: 1.0, ..*retention };
    if retention.full_disk_keeps_previous {
        // The kept ones count as deleted files' last versions do: removed by age only.
        let marked: Vec<Kept> = kept
            .iter()
            .map(|k| Kept { last_of_deleted: k.last_of_deleted || k.newest_previous, ..k.clone() })
            .collect();
        let mut out = plan(&marked, now_ns, &squeezed, 0);
        out.store_bytes = store_bytes;
        let spared = marked.iter().filter(|k| k.last_of_deleted && !out.evict.iter().any(|e| e.0 == k.sha)).count();
        return (out, spared as u64);
    }
    let mut out = plan(kept, now_ns, &squeezed, 0);
    let mut freed: u64 = out.evict.iter().map(|(_, size, _)| size).sum();
    let mut last: Vec<&Kept> =
        kept.iter().filter(|k| k.last_of_deleted && !out.evict.iter().any(|e| e.0 == k.sha)).collect();
    last.sort_by_key(|k| (k.left_ns, k.sha));
    for k in last {
        if freed >= need {
            break;
        }
        out.evict.push((k.sha, k.size, Why::Size));
        freed += k.size;
    }
    (out, 0)
}

impl Core {
    fn retain(&self, retention: &Retention, actor: &Actor, always_row: bool) -> Result<Gc> {
        let kept = self.kept_versions()?;
        let plan = plan(&kept, now_ns(), retention, self.objects.available()?);
        self.evict(&plan, retention, None, actor, always_row)
    }

    /// Free `want` bytes of `objects/` (at least `need`) if it holds them (see `room.rs`).
    pub(crate) fn retain_emergency(&self, want: u64, need: u64, actor: &Actor) -> Result<Gc> {
        let retention = self.gate.policy().retention();
        let kept = self.kept_versions()?;
        let (plan, spared) = emergency_plan(&kept, now_ns(), &retention, want, need);
        self.evict(&plan, &retention, Some((need, spared)), actor, false)
    }

    /// Remove what `plan` says and journal it (`emergency`: the bytes a full disk asked for,
    /// and how many newest previous versions it kept).
    fn evict(
        &self,
        plan: &Plan,
        retention: &Retention,
        emergency: Option<(u64, u64)>,
        actor: &Actor,
        always_row: bool,
    ) -> Result<Gc> {
        let shas: Vec<Sha256> = plan.evict.iter().map(|(sha, _, _)| *sha).collect();
        let removed = self.objects.remove(&shas)?;
        if removed.objects > 0 {
            // Room came back: the disk reserve takes what it handed out (`reserve.rs`).
            self.reserve.refill(self.disk());
        }
        let by_age = plan.evict.iter().filter(|(_, _, why)| *why == Why::Age).count() as u64;
        let by_size = plan.evict.len() as u64 - by_age;
        let mut gc = Gc {
            objects: removed.objects,
            bytes: removed.bytes,
            by_age,
            by_size,
            store_bytes: plan.store_bytes,
            limit: plan.limit,
            seq: None,
        };
        if always_row || removed.objects > 0 {
            let appended = self.journal.append(Change {
                op: Op::Gc,
                path: format!("{STATE_DIR}/{}", crate::store::OBJECTS_DIR),
                from: None,
                sha256: None,
                prev_sha256: None,
                bytes: removed.bytes,
                mode: String::new(),
                actor: actor.clone(),
                verdict: None,
                reason: Some(format!(
                    "{}keep_seconds={} removed={} by_age={by_age} by_size={by_size} store_bytes={} limit={}",
                    emergency.map_or_else(String::new, |(want, spared)| if retention.full_disk_keeps_previous {
                        format!("no_space wanted={want} kept_newest_previous={spared} ")
                    } else {
                        format!("no_space wanted={want} ")
                    }),
                    retention.max_age.as_secs(),
                    removed.objects,
                    plan.store_bytes,
                    plan.limit
                )),
            })?;
            gc.seq = Some(appended.seq);
        }
        Ok(gc)
    }

    /// Every object with the path it was a version of and whether it is the last version of a
    /// file deleted now.
    fn kept_versions(&self) -> Result<Vec<Kept>> {
        // objects/ first: every row written before a version entered it (a version's row comes
        // first, `batch.rs`) is then in the journal read below.
        let objects = self.objects.list()?;
        let mut ledger = Ledger::default();
        let mut path_of: HashMap<Sha256, String> = HashMap::new();
        let mut last_before: HashMap<String, Option<Sha256>> = HashMap::new();
        // The newest previous version of each path; versions acknowledged and not installed.
        let mut previous: HashMap<String, Sha256> = HashMap::new();
        let mut unreached: BTreeSet<Sha256> = BTreeSet::new();
        self.ws.read_journal(|entry| {
            let row = &entry.row;
            ledger.apply(row);
            for sha in [row.prev_sha256, row.sha256].into_iter().flatten() {
                path_of.insert(sha, row.path.clone());
            }
            if row.op().states_content() {
                last_before.insert(row.path.clone(), row.prev_sha256);
            }
            match (row.op(), row.prev_sha256) {
                (Op::Abort, Some(claimed)) if row.sha256 != Some(claimed) => {
                    unreached.insert(claimed);
                }
                (
                    Op::Create | Op::Write | Op::Append | Op::Replace | Op::Restore | Op::Delete | Op::Rename,
                    Some(prev),
                ) => {
                    previous.insert(row.path.clone(), prev);
                }
                _ => {}
            }
        })?;
        let previous: BTreeSet<Sha256> = previous.into_values().collect();
        let last_of_deleted: BTreeSet<Sha256> = ledger
            .iter()
            .filter(|(_, now)| now.is_none())
            .filter_map(|(path, _)| last_before.get(path).copied().flatten())
            .collect();
        Ok(objects
            .into_iter()
            .map(|(sha, stat)| Kept {
                sha,
                size: stat.size,
                left_ns: stat.ctime_ns,
                path: path_of.get(&sha).cloned(),
                last_of_deleted: last_of_deleted.contains(&sha),
                newest_previous: previous.contains(&sha),
                unreached: unreached.contains(&sha),
            })
            .collect())
    }
}

fn now_ns() -> i64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: i64 = 86_400_000_000_000;

    fn kept(n: u8, path: &str, size: u64, left_day: i64) -> Kept {
        Kept {
            sha: Sha256::of(&[n]),
            size,
            left_ns: left_day * DAY,
            path: Some(path.into()),
            last_of_deleted: false,
            newest_previous: false,
            unreached: false,
        }
    }

    fn order(plan: &Plan) -> Vec<(Sha256, Why)> {
        plan.evict.iter().map(|(sha, _, why)| (*sha, *why)).collect()
    }

    #[test]
    fn age_first_then_the_oldest_versions_of_the_busiest_paths() {
        let retention = Retention {
            max_bytes: 40,
            max_free_fraction: 1.0,
            max_age: Duration::from_secs(30 * 86_400),
            interval: Duration::ZERO,
            full_disk_keeps_previous: true,
        };
        let kept = vec![
            kept(1, "busy", 10, 95),
            kept(2, "busy", 10, 96),
            kept(3, "busy", 10, 97),
            kept(4, "quiet", 10, 91),
            kept(5, "old", 10, 50), // past max_age (now is day 100)
            kept(6, "busy", 10, 98),
            Kept { last_of_deleted: true, ..kept(7, "gone", 10, 90) },
        ];
        let plan = plan(&kept, 100 * DAY, &retention, 1 << 40);
        assert_eq!((plan.store_bytes, plan.limit), (70, 40));
        let sha = |n: u8| Sha256::of(&[n]);
        // 70 → 60 by age; then busy's two oldest (4 versions, then 3 — still the busiest
        // until it is level with quiet), leaving 40. The deleted file's last version stays.
        assert_eq!(order(&plan), vec![(sha(5), Why::Age), (sha(1), Why::Size), (sha(2), Why::Size)]);
        // Tighter: busy and quiet level at one each; the older goes first (quiet's, day 91).
        let tight = Retention { max_bytes: 20, ..retention };
        let plan = super::plan(&kept, 100 * DAY, &tight, 1 << 40);
        assert_eq!(order(&plan)[3..], [(sha(3), Why::Size), (sha(4), Why::Size)], "{plan:?}");
        assert!(!order(&plan).contains(&(sha(7), Why::Size)), "never the last version of a deleted file");
        // Old enough, it goes too.
        let short = Retention { max_age: Duration::from_secs(5 * 86_400), ..retention };
        assert!(super::plan(&kept, 100 * DAY, &short, 1 << 40).evict.contains(&(sha(7), 10, Why::Age)));
    }

    #[test]
    fn a_version_acknowledged_and_never_installed_goes_by_age_only_in_every_run() {
        let sha = |n: u8| Sha256::of(&[n]);
        let kept = vec![
            Kept { unreached: true, ..kept(1, "new/251.txt", 10, 95) },
            kept(2, "busy", 10, 96),
            kept(3, "busy", 10, 97),
        ];
        let retention = Retention { max_bytes: 0, ..Retention::default() };
        let plan = super::plan(&kept, 100 * DAY, &retention, 1 << 40);
        assert_eq!(order(&plan), [(sha(2), Why::Size), (sha(3), Why::Size)], "{plan:?}");
        let lenient = Retention { full_disk_keeps_previous: false, ..retention };
        let (plan, _) = emergency_plan(&kept, 100 * DAY, &lenient, 30, 30);
        assert!(!order(&plan).iter().any(|(s, _)| *s == sha(1)), "{plan:?}");
        let short = Retention { max_age: Duration::from_secs(86_400), ..retention };
        assert!(super::plan(&kept, 100 * DAY, &short, 1 << 40).evict.contains(&(sha(1), 10, Why::Age)));
    }

    #[test]
    fn the_limit_is_a_share_of_the_space_the_store_could_use() {
        let retention = Retention { max_bytes: 1 << 40, max_free_fraction: 0.5, ..Retention::default() };
        assert_eq!(retention.limit(100, 300), 200);
        assert_eq!(Retention { max_bytes: 150, ..retention }.limit(100, 300), 150);
    }

    #[test]
    fn an_emergency_frees_by_the_normal_order_and_a_deleted_files_last_version_only_if_needed() {
        // As the user asked: the newest previous versions are not kept on a full disk.
        let retention = Retention { full_disk_keeps_previous: false, ..Retention::default() };
        let kept = vec![
            kept(1, "busy", 10, 95),
            Kept { newest_previous: true, ..kept(2, "busy", 10, 96) },
            Kept { newest_previous: true, ..kept(3, "quiet", 10, 97) },
            Kept { last_of_deleted: true, newest_previous: true, ..kept(4, "gone", 10, 90) },
        ];
        let sha = |n: u8| Sha256::of(&[n]);
        // 15 bytes wanted and needed: busy's oldest, then (level) the older of busy and quiet.
        let (plan, spared) = emergency_plan(&kept, 100 * DAY, &retention, 15, 15);
        assert_eq!((order(&plan), spared), (vec![(sha(1), Why::Size), (sha(2), Why::Size)], 0));
        // 100 wanted, 25 needed: everything but the deleted file's last version frees 30.
        let (plan, _) = emergency_plan(&kept, 100 * DAY, &retention, 100, 25);
        assert_eq!(plan.evict.len(), 3);
        assert!(!plan.evict.iter().any(|e| e.0 == sha(4)), "{plan:?}");
        // 35 needed: nothing else is left, so it goes too.
        let (plan, _) = emergency_plan(&kept, 100 * DAY, &retention, 100, 35);
        assert_eq!(plan.evict.last().map(|e| e.0), Some(sha(4)));
    }

    #[test]
    fn an_emergency_keeps_the_newest_previous_version_of_every_path_by_default() {
        let retention = Retention::default();
        let kept = vec![
            kept(1, "busy", 10, 95),
            Kept { newest_previous: true, ..kept(2, "busy", 10, 96) },
            Kept { newest_previous: true, ..kept(3, "quiet", 10, 97) },
            Kept { last_of_deleted: true, newest_previous: true, ..kept(4, "gone", 10, 90) },
            // Past max_age: age still applies.
            Kept { newest_previous: true, ..kept(5, "old", 10, 10) },
        ];
        let sha = |n: u8| Sha256::of(&[n]);
        // However much is needed, only busy's older version goes for size.
        let (plan, spared) = emergency_plan(&kept, 100 * DAY, &retention, 1000, 1000);
        assert_eq!(order(&plan), vec![(sha(5), Why::Age), (sha(1), Why::Size)], "{plan:?}");
        assert_eq!((plan.store_bytes, spared), (50, 3));
    }
}
