//! When deliveries are tried: the clock the runtime reads (injectable, so tests fast
//! forward through days of retries) and the retry schedule.
//!
//! The schedule follows Svix's: after the first attempt fails, retries come 5 s, 5 min,
//! 30 min, 2 h, 5 h, 10 h, 14 h, 20 h and 24 h after the previous one (about 3 days and
//! 3½ hours in all), each delay moved by up to ±20 % at random so that the retries of
//! many deliveries that failed together (an endpoint that was down) do not arrive
//! together.

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

/// The delays between attempts and how much each is moved at random.
#[derive(Clone, Debug, PartialEq)]
pub struct RetrySchedule {
    /// The delay before attempt `n + 2` after attempt `n + 1` failed.
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

    /// When attempt `failed + 1` is due after attempt `failed` (1-based) failed at
    /// `now`; None when `failed` was the last.
    pub fn next_due(&self, failed: u32, now: i64) -> Option<i64> {
        let index = usize::try_from(failed).ok()?.checked_sub(1)?;
        let delay = micros(*self.delays.get(index)?) as f64;
        let factor = if self.jitter > 0.0 { 1.0 + rand::random_range(-self.jitter..=self.jitter) } else { 1.0 };
        Some(now.saturating_add((delay * factor) as i64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        for _ in 0..200 {
            let due = schedule.next_due(1, 1_000_000).unwrap();
            assert!((1_000_000 + 4_000_000..=1_000_000 + 6_000_000).contains(&due), "{due}");
            let due = schedule.next_due(9, 0).unwrap();
            assert!((micros(Duration::from_secs(24 * 3600)) * 8 / 10..=micros(Duration::from_secs(24 * 3600)) * 12 / 10).contains(&due), "{due}");
        }
    }

    #[test]
    fn without_jitter_the_delays_are_exact() {
        let schedule = RetrySchedule { jitter: 0.0, ..RetrySchedule::default() };
        assert_eq!(schedule.next_due(2, 10), Some(10 + 300_000_000));
    }

    #[test]
    fn after_the_last_attempt_nothing_is_due() {
        let schedule = RetrySchedule::default();
        assert_eq!(schedule.next_due(10, 0), None);
        assert_eq!(schedule.next_due(0, 0), None);
    }
}
