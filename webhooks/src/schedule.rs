//! When deliveries are tried: the clock the runtime reads (injectable, so tests fast
//! forward through days of retries) and the retry schedule.
//!
//! The schedule follows Svix's: after the first attempt fails, retries come 5 s, 5 min,
//! 30 min, 2 h, 5 h, 10 h, 14 h, 20 h and 24 h apart (about 3 days and 3½ hours in all),
//! each delay moved by up to ±20 % so that the retries of many deliveries that failed
//! together (an endpoint that was down) do not arrive together. How much is the
//! delivery's own: a hash of its id and the attempt decides it. A delay counts from the
//! failed attempt, or from when a retry was planned if it was made on time, so that a
//! retry made twice schedules the same next one ([`RetrySchedule::next_due`]).

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A source of wall-clock time in microseconds since the epoch.
pub trait Clock: Send + Sync + 'static {
    fn now_micros(&self) -> i64;
}

/// The system clock.
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_micros(&self) -> i64 {
        recap_readmodel::driver::now_micros()
    }
}

/// A clock tests set and move by hand.
#[derive(Clone, Default)]
pub struct ManualClock(Arc<AtomicI64>);

impl ManualClock {
    pub fn at(micros: i64) -> ManualClock {
        ManualClock(Arc::new(AtomicI64::new(micros)))
    }

    pub fn set(&self, micros: i64) {
        self.0.store(micros, Ordering::SeqCst);
    }

    pub fn advance(&self, by: Duration) {
        self.0.fetch_add(micros(by), Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_micros(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

pub(crate) fn micros(duration: Duration) -> i64 {
    i64::try_from(duration.as_micros()).unwrap_or(i64::MAX)
}

/// The delays between attempts and how much each is moved by its jitter.
#[derive(Clone, Debug, PartialEq)]
pub struct RetrySchedule {
    /// The delay before attempt `n + 2` once attempt `n + 1` failed (counted as
    /// [`RetrySchedule::next_due`] says).
    pub delays: Vec<Duration>,
    /// The largest fraction a delay is moved by, either way (0.2 = ±20 %).
    pub jitter: f64,
}

impl Default for RetrySchedule {
    fn default() -> RetrySchedule {
        let minutes = |count: u64| Duration::from_secs(60 * count);
        let hours = |count: u64| Duration::from_secs(3600 * count);
        RetrySchedule {
            delays: vec![Duration::from_secs(5), minutes(5), minutes(30), hours(2), hours(5), hours(10), hours(14), hours(20), hours(24)],
            jitter: 0.2,
        }
    }
}

impl RetrySchedule {
    /// How many attempts a delivery gets in all.
    pub fn attempts(&self) -> u32 {
        u32::try_from(self.delays.len()).unwrap_or(u32::MAX).saturating_add(1)
    }

    /// The whole span from the first attempt to the last, without jitter.
    pub fn span(&self) -> Duration {
        self.delays.iter().sum()
    }

    /// The shortest time, in microseconds, from a delivery's first attempt to its last
    /// (every delay shortened by the whole jitter): an endpoint that failed without a
    /// success for this long when a delivery runs out of attempts is disabled.
    pub fn shortest_span(&self) -> i64 {
        (micros(self.span()) as f64 * (1.0 - self.jitter.clamp(0.0, 1.0))) as i64
    }

    /// When attempt `failed + 1` of the delivery `delivery_id` is due after attempt
    /// `failed` (1-based), planned for `planned` and made at `made` (unix µs), failed;
    /// None when `failed` was the last.
    ///
    /// The delay is the schedule's, moved by the jitter a hash of the delivery and the
    /// attempt decides. After the first attempt it counts from when that attempt was
    /// made. After a retry it counts from when the retry was planned (its row's due
    /// time), if it was made within half the delay of that: a retry made twice (its
    /// row's removal lost to a crash, or made by two processes over a rebalance) then
    /// schedules the same next attempt, the same row, rather than a second chain of
    /// retries. A retry made later than that (the deliverer was down, or far behind)
    /// counts from when it was made, so that no delay between two attempts is shorter
    /// than half the schedule's.
    pub fn next_due(&self, delivery_id: &str, failed: u32, planned: i64, made: i64) -> Option<i64> {
        let index = usize::try_from(failed).ok()?.checked_sub(1)?;
        let delay = micros(*self.delays.get(index)?) as f64;
        let jitter = self.jitter.clamp(0.0, 1.0);
        let delay = (delay * (1.0 + jitter * (2.0 * unit(delivery_id, failed) - 1.0))) as i64;
        let from_plan = failed > 1 && made.saturating_sub(planned) <= delay / 2;
        Some(if from_plan { planned } else { made }.saturating_add(delay))
    }
}

/// A number in [0, 1) that `delivery_id` and `attempt` decide, the same in every process
/// and every build: the first 8 bytes of a SHA-256 of both.
fn unit(delivery_id: &str, attempt: u32) -> f64 {
    use sha2::{Digest, Sha256};
    let digest = Sha256::new().chain_update(delivery_id.as_bytes()).chain_update(attempt.to_be_bytes()).finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    (u64::from_be_bytes(first) >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: i64 = 1_000_000;

    #[test]
    fn the_default_schedule_spans_about_three_days_in_ten_attempts() {
        let schedule = RetrySchedule::default();
        assert_eq!(schedule.attempts(), 10);
        assert_eq!(schedule.span(), Duration::from_secs(5 + 300 + 1800 + 3600 * (2 + 5 + 10 + 14 + 20 + 24)));
        assert_eq!(schedule.span().as_secs() / 60, 75 * 60 + 35, "three days, three hours and 35 minutes");
    }

    #[test]
    fn retries_wait_the_scheduled_delay_moved_by_at_most_twenty_percent() {
        let schedule = RetrySchedule::default();
        let mut dues = std::collections::BTreeSet::new();
        for delivery in 0..200 {
            let id = format!("del_{delivery}");
            let due = schedule.next_due(&id, 1, 1_000_000, 1_000_000).unwrap();
            assert!((1_000_000 + 4_000_000..=1_000_000 + 6_000_000).contains(&due), "{due}");
            dues.insert(due);
            let due = schedule.next_due(&id, 9, 0, 0).unwrap();
            assert!((micros(Duration::from_secs(24 * 3600)) * 8 / 10..=micros(Duration::from_secs(24 * 3600)) * 12 / 10).contains(&due), "{due}");
        }
        assert!(dues.len() > 190, "the deliveries' retries spread out: {} distinct due times of 200", dues.len());
        let (first, last) = (dues.first().unwrap(), dues.last().unwrap());
        assert!(*first < 1_000_000 + 4_200_000 && *last > 1_000_000 + 5_800_000, "over the whole ±20 %: {first}..{last}");
    }

    #[test]
    fn a_retry_made_twice_on_time_schedules_the_same_next_one() {
        let schedule = RetrySchedule::default();
        let planned = 1_000 * SECOND;
        // Attempt 2 failed, made on time and again 40 s later (its row's removal lost):
        // both schedule attempt 3, 5 min on, at the same instant, from the plan.
        let first = schedule.next_due("del_a", 2, planned, planned + 10_000).unwrap();
        let again = schedule.next_due("del_a", 2, planned, planned + 40 * SECOND).unwrap();
        assert_eq!(first, again);
        assert!((planned + 240 * SECOND..=planned + 360 * SECOND).contains(&first), "5 min ± 20 % after the plan: {first}");
        // Another delivery, or another attempt of it, is moved by its own jitter.
        assert_ne!(schedule.next_due("del_b", 2, planned, planned).unwrap(), first);
        assert_ne!(schedule.next_due("del_a", 3, planned, planned).unwrap(), first);
    }

    #[test]
    fn a_retry_made_late_counts_its_delay_from_when_it_was_made() {
        let schedule = RetrySchedule { jitter: 0.0, ..RetrySchedule::default() };
        let planned = 1_000 * SECOND;
        // After attempt 3, 30 min: made 14 min late it still counts from the plan, made
        // an hour late (the deliverer was down) from when it was made.
        assert_eq!(schedule.next_due("del_a", 3, planned, planned + 14 * 60 * SECOND), Some(planned + 30 * 60 * SECOND));
        assert_eq!(schedule.next_due("del_a", 3, planned, planned + 3600 * SECOND), Some(planned + 3600 * SECOND + 30 * 60 * SECOND));
        // A process whose clock is behind the planner's counts from the plan.
        assert_eq!(schedule.next_due("del_a", 3, planned, planned - 5 * SECOND), Some(planned + 30 * 60 * SECOND));
    }

    #[test]
    fn the_first_retry_counts_from_when_the_first_attempt_was_made() {
        let schedule = RetrySchedule { jitter: 0.0, ..RetrySchedule::default() };
        // A first attempt's planned time is its message's: the first retry still comes
        // the whole 5 s after the attempt.
        assert_eq!(schedule.next_due("del_a", 1, 1_000 * SECOND, 1_001 * SECOND), Some(1_006 * SECOND));
    }

    #[test]
    fn without_jitter_the_delays_are_exact() {
        let schedule = RetrySchedule { jitter: 0.0, ..RetrySchedule::default() };
        assert_eq!(schedule.next_due("del_a", 2, 10, 10), Some(10 + 300_000_000));
    }

    #[test]
    fn after_the_last_attempt_nothing_is_due() {
        let schedule = RetrySchedule::default();
        assert_eq!(schedule.next_due("del_a", 10, 0, 0), None);
        assert_eq!(schedule.next_due("del_a", 0, 0, 0), None);
    }
}
