//! The per-minute limit and the billing-period quota of the REST API, behind one
//! [`Limiter`] trait whose one call both checks and counts a request. The distributed
//! edition answers it with one Redis script round trip; [`InProcessLimiter`] answers it
//! under one mutex, which makes the check-then-count exact under concurrency within a
//! process. Billing periods are whole calendar months counted from the plan's
//! `billing_cycle_anchor` ([`billing_period`]).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use chrono::{DateTime, Datelike, NaiveDate, TimeZone, Utc};
use recap_schemas::Timestamp;
use serde::{Deserialize, Serialize};

/// Length of the sliding window of the per-minute limit.
pub const MINUTE_MICROS: i64 = 60_000_000;

/// What the limiter enforces for one account on one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Counted requests allowed in any sliding 60 s window.
    pub per_minute: u32,
    /// Counted requests allowed in one billing period.
    pub period_quota: u64,
    /// The instant billing periods are counted from.
    pub billing_cycle_anchor: Timestamp,
}

/// A billing period, `start` inclusive and `end` exclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Period {
    pub start: Timestamp,
    pub end: Timestamp,
}

/// The counters after (or without) counting a request: what the quota and
/// `RateLimit` headers show.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Usage {
    pub period: Period,
    pub quota_limit: u64,
    /// Counted requests of the period, this one included when it was admitted.
    pub quota_used: u64,
    pub minute_limit: u32,
    /// Requests left in the sliding minute.
    pub minute_remaining: u32,
    /// Seconds until the oldest counted request leaves the window (0 when none is in it).
    pub minute_reset_seconds: u64,
}

impl Usage {
    pub fn quota_remaining(&self) -> u64 {
        self.quota_limit.saturating_sub(self.quota_used)
    }
}

/// The limiter's verdict on one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Counted once in the minute window and once in the period.
    Admitted,
    /// The sliding minute is full: nothing was counted.
    RateLimited { retry_after_seconds: u64 },
    /// The period's requests are used up: nothing was counted.
    QuotaExhausted,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    pub verdict: Verdict,
    pub usage: Usage,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimiterError {
    /// The limiter's backend did not answer (503, retry shortly).
    #[error("the limiter is unavailable: {0}")]
    Unavailable(String),
}

/// Checks the per-minute limit, then the period quota, and counts the request in both
/// only when both admit it, as one atomic step. A refused request counts nowhere.
///
/// An implementation answers within a bound of its own (a shared limiter decides
/// locally when its backend does not answer in time): callers put no further time
/// bound on it, so a limiter's trouble never turns into a 5xx.
#[async_trait]
pub trait Limiter: Send + Sync + 'static {
    async fn admit(&self, account_id: &str, limits: &Limits) -> Result<Decision, LimiterError>;

    /// Whether the account's next request is so likely to be admitted that its reads may
    /// start while [`Limiter::admit`] decides. The decision still rules: a refused
    /// request answers its refusal and its read is dropped, so a wrong guess costs one
    /// read, never a response. A limiter in process memory decides at once and says no.
    fn admits_likely(&self, _account_id: &str) -> bool {
        false
    }
}

/// Where "now" comes from, so tests can move time.
pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> Timestamp;
}

/// The wall clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// A clock that only moves when told to (tests).
#[derive(Clone, Debug, Default)]
pub struct ManualClock {
    micros: Arc<AtomicI64>,
}

impl ManualClock {
    pub fn at(now: Timestamp) -> ManualClock {
        ManualClock { micros: Arc::new(AtomicI64::new(now.micros())) }
    }

    pub fn set(&self, now: Timestamp) {
        self.micros.store(now.micros(), Ordering::SeqCst);
    }

    pub fn advance_micros(&self, micros: i64) {
        self.micros.fetch_add(micros, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp(self.micros.load(Ordering::SeqCst))
    }
}

fn days_in_month(year: i32, month: u32) -> u32 {
    let (next_year, next_month) = if month == 12 { (year + 1, 1) } else { (year, month + 1) };
    match (NaiveDate::from_ymd_opt(year, month, 1), NaiveDate::from_ymd_opt(next_year, next_month, 1)) {
        (Some(first), Some(next)) => (next - first).num_days() as u32,
        _ => 28,
    }
}

/// The anchor moved by `months` whole calendar months; a day the target month lacks
/// falls on its last day. Always counted from the anchor itself, so an anchor on the
/// 31st gives Feb 28 (or 29) and then Mar 31 again, never Mar 28.
fn shift_months(anchor: DateTime<Utc>, months: i64) -> Option<DateTime<Utc>> {
    let total = i64::from(anchor.year()) * 12 + i64::from(anchor.month0()) + months;
    let year = i32::try_from(total.div_euclid(12)).ok()?;
    let month = u32::try_from(total.rem_euclid(12)).ok()? + 1;
    let day = anchor.day().min(days_in_month(year, month));
    let date = NaiveDate::from_ymd_opt(year, month, day)?;
    Some(Utc.from_utc_datetime(&date.and_time(anchor.time())))
}

/// The billing period that contains `now`: whole calendar months from `anchor` (also
/// before it, for an anchor in the future).
pub fn billing_period(anchor: Timestamp, now: Timestamp) -> Period {
    let anchor_time = anchor.to_datetime();
    let now_time = now.to_datetime();
    let mut months = (i64::from(now_time.year()) - i64::from(anchor_time.year())) * 12 + i64::from(now_time.month0()) - i64::from(anchor_time.month0());
    let start_of = |months: i64| shift_months(anchor_time, months).map(|start| Timestamp(start.timestamp_micros()));
    // The month difference is off by at most one either way (day and time of month).
    for _ in 0..3 {
        match (start_of(months), start_of(months + 1)) {
            (Some(start), _) if start > now => months -= 1,
            (_, Some(next)) if next <= now => months += 1,
            (Some(start), Some(end)) => return Period { start, end },
            _ => break,
        }
    }
    // Only reachable for instants chrono cannot represent: a one-month period from now.
    Period { start: now, end: Timestamp(now.micros().saturating_add(30 * 24 * 3600 * 1_000_000)) }
}

#[derive(Default)]
struct AccountCounters {
    /// Instants (µs) of the counted requests of the last minute, oldest first.
    minute: VecDeque<i64>,
    period_start: i64,
    period_used: u64,
    /// Requests the shared limiter (Redis) had left for the account in both its minute
    /// and its period at its last decision here; 0 after a refusal.
    shared_headroom: u64,
}

/// How many requests an account has counted in a billing period: what the embedded
/// edition keeps across restarts ([`InProcessLimiter::period_counts`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeriodCount {
    pub account_id: String,
    pub period_start: Timestamp,
    pub used: u64,
}

/// The limiter of the embedded edition: exact, in process memory. The period counts
/// can be saved and restored ([`InProcessLimiter::period_counts`],
/// [`InProcessLimiter::restore`]), so a quota holds across restarts; the minute window
/// starts afresh.
pub struct InProcessLimiter {
    clock: Arc<dyn Clock>,
    accounts: Mutex<HashMap<String, AccountCounters>>,
    /// Requests counted since the limiter was created: a saver writes when it moved.
    counted: AtomicU64,
}

impl InProcessLimiter {
    pub fn new(clock: Arc<dyn Clock>) -> InProcessLimiter {
        InProcessLimiter { clock, accounts: Mutex::new(HashMap::new()), counted: AtomicU64::new(0) }
    }

    /// Each account's count in the period it last counted in.
    pub fn period_counts(&self) -> Vec<PeriodCount> {
        let accounts = self.accounts.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut counts: Vec<PeriodCount> = accounts
            .iter()
            .filter(|(_, counters)| counters.period_used > 0)
            .map(|(account_id, counters)| PeriodCount {
                account_id: account_id.clone(),
                period_start: Timestamp(counters.period_start),
                used: counters.period_used,
            })
            .collect();
        counts.sort_by(|a, b| a.account_id.cmp(&b.account_id));
        counts
    }

    /// Resumes counting from saved counts. A count of a period that has ended is dropped
    /// by the account's first request in the current one, as a live count would be.
    pub fn restore(&self, counts: impl IntoIterator<Item = PeriodCount>) {
        let mut accounts = self.accounts.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        for count in counts {
            let counters = accounts.entry(count.account_id).or_default();
            counters.period_start = count.period_start.micros();
            counters.period_used = count.used;
        }
    }

    /// Takes note of an account's count in a period as the shared limiter (Redis)
    /// reported it, so that this limiter, should it have to decide alone, goes on from
    /// there rather than from zero: an account that used up its quota stays refused.
    /// A count lower than the one kept for the same period changes nothing.
    pub fn note_period_count(&self, account_id: &str, period_start: Timestamp, used: u64) {
        self.with_counters(account_id, |counters| note_period_count(counters, period_start, used));
    }

    /// Takes note of a decision of the shared limiter (Redis): its period count, as
    /// [`InProcessLimiter::note_period_count`], and the room it left the account
    /// ([`InProcessLimiter::shared_headroom`]).
    pub fn note_shared_decision(&self, account_id: &str, decision: &Decision) {
        let usage = &decision.usage;
        let headroom = match decision.verdict {
            Verdict::Admitted => u64::from(usage.minute_remaining).min(usage.quota_remaining()),
            Verdict::RateLimited { .. } | Verdict::QuotaExhausted => 0,
        };
        self.with_counters(account_id, |counters| {
            note_period_count(counters, usage.period.start, usage.quota_used);
            counters.shared_headroom = headroom;
        });
    }

    /// Requests the shared limiter had left for the account, in both its minute and its
    /// period, at its last decision noted here (0 when none was, or after a refusal).
    pub fn shared_headroom(&self, account_id: &str) -> u64 {
        let accounts = self.accounts.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        accounts.get(account_id).map_or(0, |counters| counters.shared_headroom)
    }

    fn with_counters(&self, account_id: &str, update: impl FnOnce(&mut AccountCounters)) {
        let mut accounts = self.accounts.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match accounts.get_mut(account_id) {
            Some(counters) => update(counters),
            None => update(accounts.entry(account_id.to_string()).or_default()),
        }
    }

    /// Requests counted since this limiter was created.
    pub fn counted(&self) -> u64 {
        self.counted.load(Ordering::Relaxed)
    }

    pub fn with_system_clock() -> InProcessLimiter {
        InProcessLimiter::new(Arc::new(SystemClock))
    }

    fn decide(&self, account_id: &str, limits: &Limits) -> Decision {
        let now = self.clock.now();
        let period = billing_period(limits.billing_cycle_anchor, now);
        // A poisoned lock only means another request panicked mid-update; the counters
        // are still consistent (every update is a few plain assignments).
        let mut accounts = self.accounts.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match accounts.get_mut(account_id) {
            Some(counters) => decide(counters, limits, period, now),
            None => {
                let mut counters = AccountCounters::default();
                let decision = decide(&mut counters, limits, period, now);
                accounts.insert(account_id.to_string(), counters);
                decision
            }
        }
    }
}

/// A count the shared limiter reported: the local count goes on from the higher of the
/// two within one period, and from the reported one in a new period.
fn note_period_count(counters: &mut AccountCounters, period_start: Timestamp, used: u64) {
    if counters.period_start != period_start.micros() {
        counters.period_start = period_start.micros();
        counters.period_used = used;
    } else {
        counters.period_used = counters.period_used.max(used);
    }
}

/// Seconds (at least 1) until the counted request at `instant` leaves the window.
fn seconds_until_leaving(instant: i64, now: Timestamp) -> u64 {
    ((instant + MINUTE_MICROS - now.micros()).max(1) as u64).div_ceil(1_000_000)
}

fn decide(counters: &mut AccountCounters, limits: &Limits, period: Period, now: Timestamp) -> Decision {
    if counters.period_start != period.start.micros() {
        counters.period_start = period.start.micros();
        counters.period_used = 0;
    }
    let window_start = now.micros() - MINUTE_MICROS;
    while counters.minute.front().is_some_and(|&instant| instant <= window_start) {
        counters.minute.pop_front();
    }
    let per_minute = limits.per_minute as usize;
    let usage = |counters: &AccountCounters| Usage {
        period,
        quota_limit: limits.period_quota,
        quota_used: counters.period_used,
        minute_limit: limits.per_minute,
        minute_remaining: per_minute.saturating_sub(counters.minute.len()) as u32,
        minute_reset_seconds: counters.minute.front().map_or(0, |&oldest| seconds_until_leaving(oldest, now)),
    };
    if counters.minute.len() >= per_minute {
        // The request could pass once enough of the oldest ones have left the window.
        // (A limit of 0 admits nothing: retry after a whole minute.)
        let must_leave = (counters.minute.len() + 1).saturating_sub(per_minute);
        let retry_after_seconds = match must_leave.checked_sub(1).and_then(|index| counters.minute.get(index)) {
            Some(&instant) if per_minute > 0 => seconds_until_leaving(instant, now),
            _ => MINUTE_MICROS as u64 / 1_000_000,
        };
        return Decision { verdict: Verdict::RateLimited { retry_after_seconds }, usage: usage(counters) };
    }
    if counters.period_used >= limits.period_quota {
        return Decision { verdict: Verdict::QuotaExhausted, usage: usage(counters) };
    }
    counters.minute.push_back(now.micros());
    counters.period_used += 1;
    Decision { verdict: Verdict::Admitted, usage: usage(counters) }
}

#[async_trait]
impl Limiter for InProcessLimiter {
    async fn admit(&self, account_id: &str, limits: &Limits) -> Result<Decision, LimiterError> {
        let decision = self.decide(account_id, limits);
        if decision.verdict == Verdict::Admitted {
            self.counted.fetch_add(1, Ordering::Relaxed);
        }
        crate::telemetry::record_decision(&decision.verdict);
        Ok(decision)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        Timestamp::parse(text).expect("a valid RFC 3339 timestamp")
    }

    #[test]
    fn periods_are_calendar_months_from_the_anchor() {
        let period = billing_period(at("2026-01-15T00:00:00Z"), at("2026-03-20T10:00:00Z"));
        assert_eq!(period, Period { start: at("2026-03-15T00:00:00Z"), end: at("2026-04-15T00:00:00Z") });
        let period = billing_period(at("2026-01-15T00:00:00Z"), at("2026-03-15T00:00:00Z"));
        assert_eq!(period.start, at("2026-03-15T00:00:00Z"), "the boundary belongs to the new period");
        let period = billing_period(at("2026-01-15T00:00:00Z"), at("2026-03-14T23:59:59Z"));
        assert_eq!(period.start, at("2026-02-15T00:00:00Z"));
    }

    #[test]
    fn a_day_the_month_lacks_falls_on_its_last_day() {
        // docs/events.md, account.upserted: "a day of month that a month lacks falls on its last day".
        let anchor = at("2026-01-31T12:00:00Z");
        assert_eq!(billing_period(anchor, at("2026-02-10T00:00:00Z")).end, at("2026-02-28T12:00:00Z"));
        assert_eq!(billing_period(anchor, at("2026-03-01T00:00:00Z")), Period { start: at("2026-02-28T12:00:00Z"), end: at("2026-03-31T12:00:00Z") });
        assert_eq!(billing_period(anchor, at("2028-02-10T00:00:00Z")).end, at("2028-02-29T12:00:00Z"));
        assert_eq!(billing_period(anchor, at("2026-04-30T12:00:00Z")).start, at("2026-04-30T12:00:00Z"));
    }

    #[test]
    fn an_anchor_in_the_future_still_gives_the_current_month() {
        let period = billing_period(at("2030-06-10T00:00:00Z"), at("2026-03-20T00:00:00Z"));
        assert_eq!(period, Period { start: at("2026-03-10T00:00:00Z"), end: at("2026-04-10T00:00:00Z") });
    }

    fn limits(per_minute: u32, period_quota: u64) -> Limits {
        Limits { per_minute, period_quota, billing_cycle_anchor: at("2026-01-01T00:00:00Z") }
    }

    #[tokio::test]
    async fn the_minute_window_slides() {
        let clock = ManualClock::at(at("2026-03-01T10:00:00Z"));
        let limiter = InProcessLimiter::new(Arc::new(clock.clone()));
        for _ in 0..3 {
            assert_eq!(limiter.admit("a", &limits(3, 100)).await.expect("the in-process limiter decides").verdict, Verdict::Admitted);
            clock.advance_micros(10_000_000);
        }
        // 30 s after the first: the window still holds three.
        let refused = limiter.admit("a", &limits(3, 100)).await.expect("the in-process limiter decides");
        assert_eq!(refused.verdict, Verdict::RateLimited { retry_after_seconds: 30 });
        assert_eq!(refused.usage.quota_used, 3, "a refused request is not counted");
        assert_eq!(limiter.admit("b", &limits(3, 100)).await.expect("the in-process limiter decides").verdict, Verdict::Admitted, "per account");
        clock.advance_micros(30_000_000);
        assert_eq!(limiter.admit("a", &limits(3, 100)).await.expect("the in-process limiter decides").verdict, Verdict::Admitted);
    }

    #[tokio::test]
    async fn the_quota_resets_with_the_period() {
        let clock = ManualClock::at(at("2026-03-31T23:59:00Z"));
        let limiter = InProcessLimiter::new(Arc::new(clock.clone()));
        let first = limiter.admit("a", &limits(100, 2)).await.expect("the in-process limiter decides");
        assert_eq!((first.usage.quota_used, first.usage.quota_remaining()), (1, 1));
        limiter.admit("a", &limits(100, 2)).await.expect("the in-process limiter decides");
        let exhausted = limiter.admit("a", &limits(100, 2)).await.expect("the in-process limiter decides");
        assert_eq!(exhausted.verdict, Verdict::QuotaExhausted);
        assert_eq!(exhausted.usage.period.end, at("2026-04-01T00:00:00Z"));
        assert_eq!(exhausted.usage.minute_remaining, 98, "an exhausted request is not counted in the minute either");
        clock.set(at("2026-04-01T00:00:00Z"));
        let renewed = limiter.admit("a", &limits(100, 2)).await.expect("the in-process limiter decides");
        assert_eq!((renewed.verdict, renewed.usage.quota_used), (Verdict::Admitted, 1));
    }

    #[tokio::test]
    async fn a_noted_period_count_is_where_local_counting_goes_on() {
        let clock = ManualClock::at(at("2026-03-20T10:00:00Z"));
        let limiter = InProcessLimiter::new(Arc::new(clock.clone()));
        let march = at("2026-03-01T00:00:00Z");
        limiter.note_period_count("a", march, 3);
        limiter.note_period_count("a", march, 1);
        let refused = limiter.admit("a", &limits(100, 3)).await.expect("the in-process limiter decides");
        assert_eq!((refused.verdict, refused.usage.quota_used), (Verdict::QuotaExhausted, 3), "a lower note changes nothing");
        limiter.note_period_count("b", march, 1);
        let admitted = limiter.admit("b", &limits(100, 3)).await.expect("the in-process limiter decides");
        assert_eq!((admitted.verdict, admitted.usage.quota_used), (Verdict::Admitted, 2));
        assert_eq!(limiter.counted(), 1, "a note is not a counted request");
        // A note from an older period is replaced by the new period's first count.
        clock.set(at("2026-04-01T00:00:00Z"));
        let renewed = limiter.admit("a", &limits(100, 3)).await.expect("the in-process limiter decides");
        assert_eq!((renewed.verdict, renewed.usage.quota_used), (Verdict::Admitted, 1));
    }

    #[test]
    fn the_shared_headroom_is_what_the_last_shared_decision_left_in_both_windows() {
        let limiter = InProcessLimiter::with_system_clock();
        assert_eq!(limiter.shared_headroom("a"), 0, "nothing noted yet");
        let period = Period { start: at("2026-03-01T00:00:00Z"), end: at("2026-04-01T00:00:00Z") };
        let usage = |minute_remaining: u32, quota_used: u64| Usage {
            period,
            quota_limit: 1_000,
            quota_used,
            minute_limit: 120,
            minute_remaining,
            minute_reset_seconds: 60,
        };
        limiter.note_shared_decision("a", &Decision { verdict: Verdict::Admitted, usage: usage(100, 10) });
        assert_eq!(limiter.shared_headroom("a"), 100, "the minute is the tighter");
        limiter.note_shared_decision("a", &Decision { verdict: Verdict::Admitted, usage: usage(100, 995) });
        assert_eq!(limiter.shared_headroom("a"), 5, "the period is the tighter");
        limiter.note_shared_decision("a", &Decision { verdict: Verdict::RateLimited { retry_after_seconds: 3 }, usage: usage(0, 995) });
        assert_eq!(limiter.shared_headroom("a"), 0, "refused: no room");
        limiter.note_shared_decision("a", &Decision { verdict: Verdict::QuotaExhausted, usage: usage(50, 1_000) });
        assert_eq!(limiter.shared_headroom("a"), 0);
        assert_eq!(limiter.shared_headroom("b"), 0, "per account");
        assert_eq!(
            limiter.period_counts(),
            vec![PeriodCount { account_id: "a".into(), period_start: period.start, used: 1_000 }],
            "the period count is noted too"
        );
    }

    #[tokio::test]
    async fn period_counts_saved_and_restored_carry_the_quota_over() {
        let clock = ManualClock::at(at("2026-03-20T10:00:00Z"));
        let first = InProcessLimiter::new(Arc::new(clock.clone()));
        for _ in 0..2 {
            first.admit("a", &limits(100, 3)).await.expect("the in-process limiter decides");
        }
        first.admit("b", &limits(100, 3)).await.expect("the in-process limiter decides");
        assert_eq!(first.counted(), 3);
        let saved = first.period_counts();
        assert_eq!(
            saved,
            vec![
                PeriodCount { account_id: "a".into(), period_start: at("2026-03-01T00:00:00Z"), used: 2 },
                PeriodCount { account_id: "b".into(), period_start: at("2026-03-01T00:00:00Z"), used: 1 },
            ]
        );
        let saved: Vec<PeriodCount> = serde_json::from_str(&serde_json::to_string(&saved).expect("period counts serialize")).expect("period counts parse back");

        let second = InProcessLimiter::new(Arc::new(clock.clone()));
        second.restore(saved);
        let last = second.admit("a", &limits(100, 3)).await.expect("the in-process limiter decides");
        assert_eq!((last.verdict, last.usage.quota_used), (Verdict::Admitted, 3));
        assert_eq!(second.admit("a", &limits(100, 3)).await.expect("the in-process limiter decides").verdict, Verdict::QuotaExhausted);
        assert_eq!(second.counted(), 1, "refusals are not counted");

        // A saved count of a period that has ended does not carry over.
        clock.set(at("2026-04-02T00:00:00Z"));
        let third = InProcessLimiter::new(Arc::new(clock.clone()));
        third.restore(second.period_counts());
        assert_eq!(third.admit("a", &limits(100, 3)).await.expect("the in-process limiter decides").usage.quota_used, 1);
    }
}
