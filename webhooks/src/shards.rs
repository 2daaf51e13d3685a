//! The shards a process delivers and where their scans of `webhook_retries` start.
//!
//! A shard's rows are partitioned by the minute they are due, and every row is written
//! in the minute it is written or a later one (a retry is due after its attempt, a
//! first attempt written as a row is due at once): a minute that is past and was found
//! empty stays empty. So each shard keeps, in the store, its low minute (the first that
//! may hold a row; no scan reads an earlier one, however many removed rows it held) and,
//! in memory, its scan mark: a due time at or below every live row that this process
//! does not hold in memory. Whoever writes a row that nothing holds lowers the mark to
//! its due time once it is written; an attempt that ends without removing its row
//! lowers it too; a scan raises it to the earliest row it found and could not queue,
//! or to the time it scanned up to, never past a row lowered to while it ran. Every
//! sweep interval, the marks go back to [`GRACE`] before now (a row another process
//! wrote late, such as a retry recorded by a shard's former holder, is written in a
//! minute at most that old) and each low minute moves up past the minutes older than
//! that which hold nothing.
//!
//! A shard is prepared before anything is written to it or scanned in it: its state is
//! read (or, the first time any process holds it, written with the low minute at
//! [`GRACE`] before now), and the rows of `webhook_deliveries`, the table before
//! `webhook_retries`, are moved, once.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use recap_readmodel::webhooks::{minute_of, minute_start, ShardState, WebhookStore};
use recap_readmodel::StoreError;

/// How late a row may land in the minute it is due in, after that minute: the store's
/// bound on a write and the clocks' skew between processes, with room to spare.
pub const GRACE: i64 = 2 * 60 * 1_000_000;

/// Empty minutes a sweep steps the low minute over at most (a day: after a longer
/// stop, the next sweeps go on).
const LOW_STEPS: i64 = 24 * 60;

/// Rows of `webhook_deliveries` moved a write.
const LEGACY_PAGE: usize = 500;

/// The shards this process delivers (`"0"` in the embedded edition, the numbers of
/// the `recap.messages.v1` partitions it holds in the distributed one) and their marks.
/// Cheap to clone.
#[derive(Clone, Default)]
pub struct Shards(Arc<Inner>);

#[derive(Default)]
struct Inner {
    marks: Mutex<Marks>,
    /// One preparation at a time.
    preparing: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct Marks {
    by_shard: BTreeMap<String, Mark>,
    /// Whether a mark was lowered (or reset) since the last scan began: only then can
    /// a scan find what the poll's would not.
    lowered: bool,
}

/// A shard's scan mark, the lowest due time lowered to since its last scan began, and
/// its low minute once prepared.
#[derive(Clone, Copy, Debug)]
struct Mark {
    at: i64,
    lowered: i64,
    low: Option<i64>,
}

/// A shard newly held: its mark comes from its low minute, once prepared.
const NEWLY_HELD: Mark = Mark { at: i64::MAX, lowered: i64::MAX, low: None };

impl Shards {
    pub fn fixed(shards: &[&str]) -> Shards {
        let shards_held = Shards::default();
        for shard in shards {
            shards_held.add((*shard).to_owned());
        }
        shards_held
    }

    fn with<T>(&self, default: T, action: impl FnOnce(&mut Marks) -> T) -> T {
        match self.0.marks.lock() {
            Ok(mut marks) => action(&mut marks),
            Err(_) => default,
        }
    }

    pub fn add(&self, shard: String) {
        self.with((), |marks| {
            marks.by_shard.insert(shard, NEWLY_HELD);
            marks.lowered = true;
        })
    }

    pub fn remove(&self, shard: &str) {
        self.with((), |marks| {
            marks.by_shard.remove(shard);
        })
    }

    pub fn held(&self) -> Vec<String> {
        self.with(Vec::new(), |marks| marks.by_shard.keys().cloned().collect())
    }

    pub fn holds(&self, shard: &str) -> bool {
        self.with(false, |marks| marks.by_shard.contains_key(shard))
    }

    /// Where the shard's next scan starts (`i64::MAX` for a shard not held or not yet
    /// prepared).
    pub fn mark(&self, shard: &str) -> i64 {
        self.with(i64::MAX, |marks| marks.by_shard.get(shard).map_or(i64::MAX, |mark| mark.at))
    }

    /// The shard's low minute, once prepared.
    pub fn low(&self, shard: &str) -> Option<i64> {
        self.with(None, |marks| marks.by_shard.get(shard).and_then(|mark| mark.low))
    }

    /// A row due at `due_at` that nothing holds in memory is written in `shard`.
    pub fn lower(&self, shard: &str, due_at: i64) {
        self.with((), |marks| {
            if let Some(mark) = marks.by_shard.get_mut(shard) {
                mark.at = mark.at.min(due_at);
                mark.lowered = mark.lowered.min(due_at);
                marks.lowered = true;
            }
        })
    }

    /// Whether a mark was lowered since the last scan began.
    pub(crate) fn lowered(&self) -> bool {
        self.with(false, |marks| marks.lowered)
    }

    /// A scan of the shard begins; where it starts.
    pub(crate) fn begin_scan(&self, shard: &str) -> i64 {
        self.with(i64::MAX, |marks| {
            marks.lowered = false;
            let Some(mark) = marks.by_shard.get_mut(shard) else { return i64::MAX };
            mark.lowered = i64::MAX;
            mark.at
        })
    }

    /// The scan that began at `seen` left no row it could not queue before `to`.
    pub(crate) fn raise(&self, shard: &str, seen: i64, to: i64) {
        self.with((), |marks| {
            if let Some(mark) = marks.by_shard.get_mut(shard) {
                // A row lowered to while the scan ran may be one its read did not see.
                if mark.at == seen {
                    mark.at = to.min(mark.lowered).max(seen);
                }
            }
        })
    }

    /// Every prepared shard's next scan starts [`GRACE`] before `now` at the latest.
    pub fn sweep(&self, now: i64) {
        self.with((), |marks| {
            for mark in marks.by_shard.values_mut().filter(|mark| mark.low.is_some()) {
                mark.at = mark.at.min(now.saturating_sub(GRACE));
            }
            marks.lowered = true;
        })
    }

    fn set_low(&self, shard: &str, low: i64) {
        self.with((), |marks| {
            if let Some(mark) = marks.by_shard.get_mut(shard) {
                let first = mark.low.is_none();
                mark.low = Some(low);
                if first {
                    mark.at = mark.at.min(minute_start(low));
                    marks.lowered = true;
                }
            }
        })
    }

    /// Prepares a held shard for writing and scanning (see the module's doc); at once
    /// when it is prepared already.
    pub async fn prepare(&self, store: &WebhookStore, shard: &str, now: i64) -> Result<(), StoreError> {
        if self.low(shard).is_some() || !self.holds(shard) {
            return Ok(());
        }
        let _preparing = self.0.preparing.lock().await;
        if self.low(shard).is_some() {
            return Ok(());
        }
        let mut state = match store.shard_state(shard).await? {
            Some(state) => state,
            None => {
                let state = ShardState { low_minute: minute_of(now.saturating_sub(GRACE)), legacy_moved: false };
                store.write(vec![store.shard_state_row(shard, &state)]).await?;
                state
            }
        };
        if !state.legacy_moved {
            let moved = move_legacy(store, shard, now).await?;
            state.legacy_moved = true;
            store.write(vec![store.shard_state_row(shard, &state)]).await?;
            tracing::info!(shard, moved, "pending deliveries moved from webhook_deliveries to webhook_retries");
        }
        self.set_low(shard, state.low_minute);
        Ok(())
    }

    /// Moves the shard's low minute up past the minutes older than [`GRACE`] before
    /// `now` that hold no row, and writes it when it moved.
    pub async fn advance_low(&self, store: &WebhookStore, shard: &str, now: i64) -> Result<(), StoreError> {
        let Some(low) = self.low(shard) else { return Ok(()) };
        let past = minute_of(now.saturating_sub(GRACE));
        let mut next = low;
        while next < past && next - low < LOW_STEPS && store.minute_is_empty(shard, next).await? {
            next += 1;
        }
        if next > low {
            store.write(vec![store.shard_state_row(shard, &ShardState { low_minute: next, legacy_moved: true })]).await?;
            self.with((), |marks| {
                if let Some(mark) = marks.by_shard.get_mut(shard) {
                    mark.low = Some(next);
                }
            });
        }
        Ok(())
    }
}

/// Moves the shard's rows of `webhook_deliveries` into `webhook_retries` (due when they
/// were, or now if that is past), each removed only once its new row is written: in
/// the same write where writes are atomic, in the next one where they are not. A crash
/// in between leaves a delivery in both, made twice at most. How many were moved.
async fn move_legacy(store: &WebhookStore, shard: &str, now: i64) -> Result<usize, StoreError> {
    let mut moved = 0;
    let mut after = None;
    loop {
        let page = store.legacy_deliveries(shard, after.as_ref(), LEGACY_PAGE).await?;
        let Some(last) = page.last() else { return Ok(moved) };
        after = Some((last.due_at, last.delivery.id()));
        let rows: Vec<_> = page.iter().map(|due| store.retry_row(shard, due.due_at.max(now), &due.delivery)).collect();
        let removals: Vec<_> = page.iter().map(|due| store.legacy_done_row(due)).collect();
        if store.writes_atomically() {
            store.write(rows.into_iter().chain(removals).collect()).await?;
        } else {
            store.write(rows).await?;
            store.write(removals).await?;
        }
        moved += page.len();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scan_raises_its_shards_mark_unless_a_row_below_was_written_meanwhile() {
        let shards = Shards::fixed(&["0"]);
        shards.set_low("0", 0);
        assert_eq!(shards.mark("0"), 0, "a shard is first scanned from its low minute");
        let seen = shards.begin_scan("0");
        shards.raise("0", seen, 100);
        assert_eq!(shards.mark("0"), 100);
        shards.lower("0", 150);
        assert_eq!(shards.mark("0"), 100, "a row above the mark leaves it");
        // A scan started at 100; meanwhile a row due at 40 was written.
        let seen = shards.begin_scan("0");
        shards.lower("0", 40);
        shards.raise("0", seen, 200);
        assert_eq!(shards.mark("0"), 40, "the row written during the scan is found by the next");
        let seen = shards.begin_scan("0");
        shards.raise("0", seen, 200);
        assert_eq!(shards.mark("0"), 200);
        shards.sweep(GRACE + 150);
        assert_eq!(shards.mark("0"), 150, "a sweep goes back to the grace before now");
        shards.lower("1", 5);
        assert_eq!(shards.held(), vec!["0".to_owned()], "a shard not held keeps no mark");
        shards.add("1".into());
        assert_eq!(shards.mark("1"), i64::MAX, "a shard newly held is scanned once prepared");
        shards.lower("1", 7);
        shards.set_low("1", 1);
        assert_eq!(shards.mark("1"), 7, "a row written before it was prepared is not passed over");
    }

    /// A scan reads a snapshot: a row written after it began, due between the mark and
    /// the time it scans up to, may be missing from what it read, so the scan does not
    /// raise the mark past it.
    #[test]
    fn a_scan_never_raises_its_mark_past_a_row_written_while_it_ran_above_the_mark() {
        let shards = Shards::fixed(&["0"]);
        shards.set_low("0", 0);
        let seen = shards.begin_scan("0");
        shards.raise("0", seen, 100);
        let seen = shards.begin_scan("0");
        shards.lower("0", 150);
        shards.raise("0", seen, 300);
        assert_eq!(shards.mark("0"), 150, "the next scan starts at the row written during this one");
        let seen = shards.begin_scan("0");
        shards.raise("0", seen, 300);
        assert_eq!(shards.mark("0"), 300, "a scan with nothing written meanwhile raises it all the way");
    }
}
