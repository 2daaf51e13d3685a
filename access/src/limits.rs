//! The per-minute limit and the billing-period quota of the REST API (and the MCP
//! server's counts of tool calls and client registrations), behind one
//! [`Limiter`] trait whose one call both checks and counts a request. The distributed
//! edition answers it with one Redis script round trip; [`InProcessLimiter`] answers it
//! under one mutex, which makes the check-then-count exact under concurrency within a
//! process. Billing periods are whole calendar months counted from the plan's
//! `billing_cycle_anchor` ([`billing_period`]). The in-process limiter forgets a key
//! once both its windows have passed, so that keys nobody uses any more (a client
//! address that registered once) do not stay in memory for ever.

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

struct AccountCounters {
    /// Instants (µs) of the counted requests of the last minute, oldest first.
    minute: VecDeque<i64>,
    period_start: i64,
    /// The end of the period `period_start` begins, when a decision told it
    /// (`i64::MAX`, unknown, for a count restored or noted without one).
    period_end: i64,
    period_used: u64,
    /// Requests the shared limiter (Redis) had left for the account in both its minute
    /// and its period at its last decision here; 0 after a refusal.
    shared_headroom: u64,
}

impl Default for AccountCounters {
    fn default() -> AccountCounters {
        AccountCounters { minute: VecDeque::new(), period_start: 0, period_end: i64::MAX, period_used: 0, shared_headroom: 0 }
    }
}

impl AccountCounters {
    /// Whether forgetting the key changes no later decision: nothing of it is left in
    /// the minute window, its period count is zero or of a period that has ended (the
    /// next decision would start the count afresh anyway), and it holds no room noted
    /// from the shared limiter.
    fn forgettable(&self, now: i64) -> bool {
        self.minute.back().is_none_or(|&newest| newest <= now - MINUTE_MICROS) && (self.period_used == 0 || now >= self.period_end) && self.shared_headroom == 0
    }
}

/// Fewest keys at which the limiter looks for keys to forget.
const MIN_SWEEP_KEYS: usize = 1_024;

/// The counters of every key, and the size at which the next sweep runs.
struct Accounts {
    counters: HashMap<String, AccountCounters>,
    sweep_at: usize,
}

impl Accounts {
    /// Runs `update` on the key's counters, made when it has none. A key made when the
    /// map has doubled since the last sweep first sweeps it: each sweep is paid for by
    /// the new keys since the last one, and the map holds at most twice the keys the
    /// last sweep kept (or [`MIN_SWEEP_KEYS`]), however many keys come and go.
    fn with<R>(&mut self, key: &str, now: i64, update: impl FnOnce(&mut AccountCounters) -> R) -> R {
        if let Some(counters) = self.counters.get_mut(key) {
            return update(counters);
        }
        if self.counters.len() >= self.sweep_at {
            self.sweep(now);
        }
        update(self.counters.entry(key.to_string()).or_default())
    }

    fn sweep(&mut self, now: i64) {
        self.counters.retain(|_, counters| {
            if counters.forgettable(now) {
                return false;
            }
            // What left the window is dropped now rather than at the key's next request,
            // and an idle key's window gives its buffer back.
            while counters.minute.front().is_some_and(|&instant| instant <= now - MINUTE_MICROS) {
                counters.minute.pop_front();
            }
            if counters.minute.is_empty() {
                counters.minute = VecDeque::new();
            }
            true
        });
        self.sweep_at = (self.counters.len() * 2).max(MIN_SWEEP_KEYS);
        // The table's memory follows: a flood of keys once does not keep its size.
        self.counters.shrink_to(self.sweep_at);
    }
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
    accounts: Mutex<Accounts>,
    /// Requests counted since the limiter was created: a saver writes when it moved.
    counted: AtomicU64,
}

impl InProcessLimiter {
    pub fn new(clock: Arc<dyn Clock>) -> InProcessLimiter {
        InProcessLimiter { clock, accounts: Mutex::new(Accounts { counters: HashMap::new(), sweep_at: MIN_SWEEP_KEYS }), counted: AtomicU64::new(0) }
    }

    /// Each account's count in the period it last counted in.
    pub fn period_counts(&self) -> Vec<PeriodCount> {
        let accounts = self.accounts.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut counts: Vec<PeriodCount> = accounts
            .counters
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
            let counters = accounts.counters.entry(count.account_id).or_default();
            counters.period_start = count.period_start.micros();
            counters.period_end = i64::MAX;
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
            counters.period_end = usage.period.end.micros();
            counters.shared_headroom = headroom;
        });
    }

    /// Requests the shared limiter had left for the account, in both its minute and its
    /// period, at its last decision noted here (0 when none was, or after a refusal).
    pub fn shared_headroom(&self, account_id: &str) -> u64 {
        let accounts = self.accounts.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        accounts.counters.get(account_id).map_or(0, |counters| counters.shared_headroom)
    }

    fn with_counters(&self, account_id: &str, update: impl FnOnce(&mut AccountCounters)) {
        let now = self.clock.now().micros();
        let mut accounts = self.accounts.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        accounts.with(account_id, now, update);
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
        accounts.with(account_id, now.micros(), |counters| decide(counters, limits, period, now))
    }
}

/// A count the shared limiter reported: the local count goes on from the higher of the
/// two within one period, and from the reported one in a new period.
fn note_period_count(counters: &mut AccountCounters, period_start: Timestamp, used: u64) {
    if counters.period_start != period_start.micros() {
        counters.period_start = period_start.micros();
        counters.period_end = i64::MAX;
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
    counters.period_end = period.end.micros();
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

    fn keys_held(limiter: &InProcessLimiter) -> usize {
        limiter.accounts.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).counters.len()
    }

    #[tokio::test]
    async fn keys_whose_windows_have_passed_are_forgotten_so_a_flood_of_distinct_keys_stays_bounded() {
        // A year of 500 new keys a day (a client address each, as dynamic registration
        // counts them), each counted once: without forgetting, 182,500 keys. A key is
        // kept while its count of the current period matters, so at most a month's keys
        // (15,500) are in use, and the map holds at most twice what a sweep kept.
        let clock = ManualClock::at(at("2026-01-01T00:00:00Z"));
        let limiter = InProcessLimiter::new(Arc::new(clock.clone()));
        let steady_limits = limits(2, 3);
        let mut most_keys = 0;
        let mut steady_admitted_by_month = std::collections::BTreeMap::<u32, u32>::new();
        for day in 0..365 {
            for address in 0..500 {
                let decision = limiter.admit(&format!("mcp_register:{day}.{address}"), &limits(2, 3)).await.expect("the in-process limiter decides");
                assert_eq!(decision.verdict, Verdict::Admitted);
                most_keys = most_keys.max(keys_held(&limiter));
            }
            // One key asks every day: its quota (3 a month) holds through every sweep.
            let steady = limiter.admit("steady", &steady_limits).await.expect("the in-process limiter decides");
            if steady.verdict == Verdict::Admitted {
                *steady_admitted_by_month.entry(clock.now().to_datetime().month()).or_default() += 1;
            } else {
                assert_eq!(steady.verdict, Verdict::QuotaExhausted, "day {day}");
            }
            // And a burst in one minute meets the minute limit, sweeps or not.
            if day % 30 == 7 {
                let burst = burst(&limiter, &format!("burst{day}"), 3).await;
                assert_eq!(burst[..2], [Verdict::Admitted, Verdict::Admitted]);
                assert!(matches!(burst[2], Verdict::RateLimited { .. }), "{burst:?}");
            }
            clock.advance_micros(24 * 3600 * 1_000_000);
        }
        assert_eq!(steady_admitted_by_month.values().copied().collect::<Vec<u32>>(), vec![3; 12], "three a month, every month");
        assert!(most_keys <= 2 * 31 * 502, "at most twice a month's keys were held at once: {most_keys}");
        assert!(most_keys >= 31 * 500, "a month's keys are all held (their quota counts): {most_keys}");
        // Once every period has ended, the next sweep leaves only the keys that came
        // after it.
        clock.advance_micros(40 * 24 * 3600 * 1_000_000);
        let mut late = 0;
        loop {
            let before = keys_held(&limiter);
            late += 1;
            limiter.admit(&format!("late:{late}"), &limits(2, 3)).await.expect("the in-process limiter decides");
            if keys_held(&limiter) != before + 1 {
                break;
            }
            assert!(late <= 2 * 31 * 502, "no sweep ran");
        }
        assert_eq!(keys_held(&limiter), late, "only the keys counted in the current period are held");
    }

    async fn burst(limiter: &InProcessLimiter, key: &str, count: usize) -> Vec<Verdict> {
        let mut verdicts = Vec::with_capacity(count);
        for _ in 0..count {
            verdicts.push(limiter.admit(key, &limits(2, 100)).await.expect("the in-process limiter decides").verdict);
        }
        verdicts
    }

    #[tokio::test]
    async fn forgetting_keys_changes_no_decision() {
        // The same requests decided by the limiter (which sweeps) and by the counting
        // rules over a map that never forgets: every decision and usage is the same.
        // Each step adds throwaway keys, so sweeps run often among the keys compared.
        let clock = ManualClock::at(at("2026-03-30T23:50:00Z"));
        let limiter = InProcessLimiter::new(Arc::new(clock.clone()));
        let mut reference: HashMap<String, AccountCounters> = HashMap::new();
        let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = move |bound: u64| {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) % bound
        };
        let (mut forgotten, mut sweeps, mut throwaway) = (0, 0, 0u64);
        for step in 0..40_000 {
            // Some keys are hit often enough for their minute limit, most come back after
            // hours or days; quotas from none (every request refused) to thirty.
            let key = if next(2) == 0 { format!("k{}", next(5)) } else { format!("k{}", 5 + next(300)) };
            let limits = Limits { per_minute: 1 + next(4) as u32, period_quota: next(30), billing_cycle_anchor: at("2026-01-31T12:00:00Z") };
            let now = clock.now();
            let period = billing_period(limits.billing_cycle_anchor, now);
            if reference.contains_key(&key) && !limiter.accounts.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).counters.contains_key(&key) {
                forgotten += 1;
            }
            let expected = decide(reference.entry(key.clone()).or_default(), &limits, period, now);
            let decided = limiter.admit(&key, &limits).await.expect("the in-process limiter decides");
            assert_eq!(decided, expected, "step {step}, key {key}");
            for _ in 0..next(8) {
                throwaway += 1;
                let before = keys_held(&limiter);
                let refused = Limits { per_minute: 1, period_quota: 0, billing_cycle_anchor: Timestamp(0) };
                limiter.admit(&format!("t{throwaway}"), &refused).await.expect("the in-process limiter decides");
                sweeps += usize::from(keys_held(&limiter) <= before);
            }
            // Mostly seconds apart, sometimes past the minute, now and then days.
            let advance = match next(100) {
                0 => next(5 * 24 * 3600) * 1_000_000,
                1..=10 => next(120) * 1_000_000,
                _ => next(3_000_000),
            };
            clock.advance_micros(advance as i64);
        }
        assert!(forgotten >= 100, "compared keys were forgotten between their requests: {forgotten}");
        assert!(sweeps >= 10, "sweeps ran among the compared keys: {sweeps}");
    }
}
