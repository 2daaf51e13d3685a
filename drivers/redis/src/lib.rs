//! The limiter of the distributed edition: one Lua script per counted request does the
//! sliding minute window (a sorted set of request instants) and the billing-period
//! counter together, atomically, so every query-api and mcp process shares exact limits. It is
//! sent as EVALSHA: one script call per counted request, in one round trip.
//!
//! Calls are written in batches: one task owns the connection, and before each write
//! it lets every request that is ready to run add its call, so requests that arrive
//! together share one write and one reply read (a pipeline of EVALSHAs; each is still
//! its own atomic script call) and one timer. Sent one by one, each call cost the
//! query-api a write and Redis a wake-up of its own. One batch is in flight at a time;
//! the calls that arrive meanwhile make the next one.
//!
//! Policy when Redis is down or slow (every batch is bounded by `timeout`, so a call
//! waits at most twice that: the batch in flight, then its own): requests are
//! still served — the limiter fails open to a per-process [`InProcessLimiter`] (so one
//! process alone still enforces the limits locally), counts `fail_open_total`, warns at
//! most once every 10 seconds, and skips Redis for one second before trying it again, so
//! a hung Redis costs at most one timeout per second rather than one per request.
//! The local limiter goes on from each account's period count as Redis last reported
//! it to this process, so an account that used up its quota stays refused (402) during
//! an outage; its minute window starts empty. Counting in Redis resumes by itself once
//! it answers; requests decided locally are not sent to Redis afterwards (calls already
//! written to a Redis that stalled run when it resumes, and so count there too). Never a
//! 5xx: callers put no time bound of their own on [`Limiter::admit`].

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use recap_schemas::Timestamp;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::sync::{mpsc, oneshot};
use tracing::Instrument;

use recap_access::limits::{billing_period, Clock, Decision, InProcessLimiter, Limiter, LimiterError, Limits, Usage, Verdict, MINUTE_MICROS};

/// Checks the window and the quota, counts the request only when both admit it.
/// KEYS: the account's minute set, the account's period counter.
/// ARGV: window (µs), per-minute limit, period quota, period counter TTL (s), member.
/// Returns {verdict (0 admitted, 1 rate limited, 2 quota exhausted), requests in the
/// window, requests of the period, instant (µs) the blocking request leaves the window,
/// instant (µs) of the oldest request in the window, now (µs)}.
///
/// The common path, an admitted request, is seven commands: the period counter is
/// incremented first and decremented again in the rare case it went past the quota,
/// rather than read and then incremented, and its TTL is set once, when it is created.
const SCRIPT: &str = r#"
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local window = tonumber(ARGV[1])
local per_minute = tonumber(ARGV[2])
local quota = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local count = redis.call('ZCARD', KEYS[1])
local function oldest()
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  if first[2] then return tonumber(first[2]) end
  return 0
end
if count >= per_minute then
  local blocking = 0
  if per_minute > 0 then
    local entry = redis.call('ZRANGE', KEYS[1], count - per_minute, count - per_minute, 'WITHSCORES')
    if entry[2] then blocking = tonumber(entry[2]) end
  end
  return {1, count, tonumber(redis.call('GET', KEYS[2]) or '0'), blocking, oldest(), now}
end
local used = redis.call('INCR', KEYS[2])
if used == 1 then
  redis.call('EXPIRE', KEYS[2], tonumber(ARGV[4]))
end
if used > quota then
  redis.call('DECR', KEYS[2])
  return {2, count, used - 1, 0, oldest(), now}
end
redis.call('ZADD', KEYS[1], now, ARGV[5])
redis.call('PEXPIRE', KEYS[1], math.floor(window / 1000) + 1000)
if count == 0 then
  return {0, 1, used, 0, now, now}
end
return {0, count + 1, used, 0, oldest(), now}
"#;

pub struct RedisLimiter {
    /// Where calls wait for the next batch; the batching task starts on first use (and
    /// again should it have stopped, as when the runtime it ran on has shut down).
    calls: std::sync::Mutex<Option<mpsc::UnboundedSender<Call>>>,
    batcher: Batcher,
    key_prefix: String,
    clock: Arc<dyn Clock>,
    local: InProcessLimiter,
    /// Until when (µs) Redis is skipped after a failure.
    skip_until: AtomicI64,
    last_warning: AtomicI64,
    /// Requests decided locally because Redis did not answer.
    pub fail_open_total: AtomicU64,
    sequence: AtomicU64,
    /// Names this limiter in the members it adds to the minute window: random, as
    /// process ids repeat across containers (each replica is often PID 1), and two
    /// replicas writing the same member would count one request where there were two.
    instance: String,
}

fn seconds_until(instant: i64, now: i64) -> u64 {
    ((instant + MINUTE_MICROS - now).max(1) as u64).div_ceil(1_000_000)
}

impl RedisLimiter {
    /// A limiter over the Redis at `url`, connecting on first use, so a process starts
    /// and serves (failing open) while Redis is away; only a malformed URL is an error.
    /// Keys are `<key_prefix>limit:{<account>}:...`, so deployments (or test runs) can
    /// share one Redis.
    pub fn new(url: &str, key_prefix: &str, timeout: Duration, clock: Arc<dyn Clock>) -> Result<RedisLimiter, LimiterError> {
        let client = redis::Client::open(url).map_err(|error| LimiterError::Unavailable(error.to_string()))?;
        // The batch's own timeout bounds every call; the connection's response timeout
        // is left unset, as it would add a second timer per batch.
        let connection_config =
            ConnectionManagerConfig::new().set_connection_timeout(Some(timeout)).set_number_of_retries(1).set_max_delay(Duration::from_millis(500));
        Ok(RedisLimiter {
            calls: std::sync::Mutex::new(None),
            batcher: Batcher { client, connection_config, script: redis::Script::new(SCRIPT), timeout },
            key_prefix: key_prefix.to_string(),
            local: InProcessLimiter::new(clock.clone()),
            clock,
            skip_until: AtomicI64::new(0),
            last_warning: AtomicI64::new(0),
            fail_open_total: AtomicU64::new(0),
            sequence: AtomicU64::new(0),
            instance: uuid::Uuid::new_v4().simple().to_string(),
        })
    }

    /// The queue of the batching task, started if it is not running.
    fn queue(&self) -> mpsc::UnboundedSender<Call> {
        let mut calls = self.calls.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match calls.as_ref() {
            Some(queue) if !queue.is_closed() => queue.clone(),
            _ => {
                let (queue, receiver) = mpsc::unbounded_channel();
                tokio::spawn(self.batcher.clone().run(receiver));
                calls.insert(queue).clone()
            }
        }
    }

    async fn admit_in_redis(&self, account_id: &str, limits: &Limits, now: Timestamp) -> Result<Decision, String> {
        let period = billing_period(limits.billing_cycle_anchor, now);
        // One hash tag per account keeps both keys in one slot of a Redis cluster.
        let prefix = &self.key_prefix;
        let minute_key = format!("{prefix}limit:{{{account_id}}}:minute");
        let period_key = format!("{prefix}limit:{{{account_id}}}:period:{}", period.start.micros());
        let ttl_seconds = ((period.end.micros() - now.micros()) / 1_000_000).max(1) + 86_400;
        let member = format!("{}-{}-{}", now.micros(), self.instance, self.sequence.fetch_add(1, Ordering::Relaxed));
        let (reply, answer) = oneshot::channel();
        let call = Call {
            keys: [minute_key, period_key],
            // A quota past i64 (no quota at all: `u64::MAX`) is as good as i64::MAX, never
            // the negative number a cast would make of it.
            args: [MINUTE_MICROS, i64::from(limits.per_minute), i64::try_from(limits.period_quota).unwrap_or(i64::MAX), ttl_seconds],
            member,
            reply,
        };
        self.queue().send(call).map_err(|_| "the redis batching task has stopped".to_string())?;
        let reply = answer.await.map_err(|_| "the redis batching task has stopped".to_string())??;
        let [verdict, count, used, blocking, oldest, redis_now] = reply[..] else {
            return Err(format!("unexpected script reply {reply:?}"));
        };
        let usage = Usage {
            period,
            quota_limit: limits.period_quota,
            quota_used: used.max(0) as u64,
            minute_limit: limits.per_minute,
            minute_remaining: (limits.per_minute as i64 - count).max(0) as u32,
            minute_reset_seconds: if oldest > 0 { seconds_until(oldest, redis_now) } else { 0 },
        };
        let verdict = match verdict {
            0 => Verdict::Admitted,
            1 => Verdict::RateLimited { retry_after_seconds: if blocking > 0 { seconds_until(blocking, redis_now) } else { 60 } },
            _ => Verdict::QuotaExhausted,
        };
        Ok(Decision { verdict, usage })
    }
}

/// Most calls one write carries.
const MAX_BATCH: usize = 512;

/// One script call waiting for its batch.
struct Call {
    keys: [String; 2],
    args: [i64; 4],
    member: String,
    reply: oneshot::Sender<Result<Vec<i64>, String>>,
}

/// The task that owns the connection and writes the calls in batches.
#[derive(Clone)]
struct Batcher {
    client: redis::Client,
    connection_config: ConnectionManagerConfig,
    script: redis::Script,
    timeout: Duration,
}

impl Batcher {
    async fn run(self, mut queue: mpsc::UnboundedReceiver<Call>) {
        // Made on first use and kept (it reconnects by itself); until Redis has answered
        // once, each batch tries within `timeout`.
        let mut connection: Option<ConnectionManager> = None;
        while let Some(first) = queue.recv().await {
            // The requests that are ready to run go first and add their calls.
            tokio::task::yield_now().await;
            let mut batch = vec![first];
            while batch.len() < MAX_BATCH {
                match queue.try_recv() {
                    Ok(call) => batch.push(call),
                    Err(_) => break,
                }
            }
            let outcome = match tokio::time::timeout(self.timeout, self.send(&mut connection, &batch)).await {
                Ok(outcome) => outcome,
                Err(_) => Err(format!("no answer within {} ms", self.timeout.as_millis())),
            };
            // A caller that has gone (its request was dropped) needs no answer.
            match outcome {
                Ok(replies) => {
                    for (call, reply) in batch.into_iter().zip(replies) {
                        let _ = call.reply.send(reply);
                    }
                }
                Err(reason) => {
                    // The calls queued behind the batch fail with it: their requests
                    // fail open now rather than each waiting for Redis in turn.
                    for call in batch.into_iter().chain(std::iter::from_fn(|| queue.try_recv().ok())) {
                        let _ = call.reply.send(Err(reason.clone()));
                    }
                }
            }
        }
    }

    /// Writes the batch as one pipeline of EVALSHAs and reads its replies; loads the
    /// script first when Redis does not have it (a restart empties its script cache).
    async fn send(&self, connection: &mut Option<ConnectionManager>, batch: &[Call]) -> Result<Vec<Result<Vec<i64>, String>>, String> {
        let connection = match connection {
            Some(connection) => connection,
            None => connection
                .insert(ConnectionManager::new_with_config(self.client.clone(), self.connection_config.clone()).await.map_err(|error| error.to_string())?),
        };
        let mut replies: Vec<Option<Result<Vec<i64>, String>>> = (0..batch.len()).map(|_| None).collect();
        for attempt in 0..2 {
            let pending: Vec<usize> = (0..batch.len()).filter(|&index| replies[index].is_none()).collect();
            let mut pipeline = redis::pipe();
            pipeline.ignore_errors();
            for &index in &pending {
                let call = &batch[index];
                pipeline.cmd("EVALSHA").arg(self.script.get_hash()).arg(2).arg(&call.keys[..]).arg(&call.args[..]).arg(&call.member);
            }
            let results: Vec<redis::RedisResult<Vec<i64>>> = pipeline.query_async(connection).await.map_err(|error| error.to_string())?;
            let mut missing_script = false;
            for (index, result) in pending.into_iter().zip(results) {
                match result {
                    Err(error) if attempt == 0 && error.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => missing_script = true,
                    result => replies[index] = Some(result.map_err(|error| error.to_string())),
                }
            }
            if !missing_script {
                break;
            }
            self.script.prepare_invoke().load_async(connection).await.map_err(|error| error.to_string())?;
        }
        Ok(replies.into_iter().map(|reply| reply.unwrap_or_else(|| Err("redis did not run the script".to_string()))).collect())
    }
}

/// Room an account's last decision must have left for its next request's reads to
/// start during the round trip. When an account nears its limit with this many of its
/// requests in flight in one process, at most those read once for nothing; past the
/// limit (a refusal leaves no room) its requests wait for the decision before reading.
pub const SPECULATION_MARGIN: u64 = 16;

#[async_trait]
impl Limiter for RedisLimiter {
    /// Yes while this process's last decision from Redis for the account left more than
    /// [`SPECULATION_MARGIN`] requests in both its minute and its period (and Redis is
    /// not being skipped after a failure): the round trip then overlaps the reads.
    fn admits_likely(&self, account_id: &str) -> bool {
        self.clock.now().micros() >= self.skip_until.load(Ordering::Relaxed) && self.local.shared_headroom(account_id) > SPECULATION_MARGIN
    }

    async fn admit(&self, account_id: &str, limits: &Limits) -> Result<Decision, LimiterError> {
        let now = self.clock.now();
        if now.micros() >= self.skip_until.load(Ordering::Relaxed) {
            // The client span of the one round trip a counted request costs.
            let span = tracing::info_span!(
                "EVALSHA",
                otel.kind = "client",
                db.system.name = "redis",
                db.operation.name = "EVALSHA",
                error.type = tracing::field::Empty,
            );
            match self.admit_in_redis(account_id, limits, now).instrument(span.clone()).await {
                Ok(decision) => {
                    recap_access::telemetry::record_decision(&decision.verdict);
                    self.local.note_shared_decision(account_id, &decision);
                    return Ok(decision);
                }
                Err(reason) => {
                    span.record("error.type", "unavailable");
                    self.skip_until.store(now.micros() + 1_000_000, Ordering::Relaxed);
                    let last = self.last_warning.load(Ordering::Relaxed);
                    if now.micros() - last >= 10_000_000 && self.last_warning.compare_exchange(last, now.micros(), Ordering::Relaxed, Ordering::Relaxed).is_ok()
                    {
                        tracing::warn!(%reason, "redis limiter unavailable: failing open to the local limiter");
                    }
                }
            }
        }
        self.fail_open_total.fetch_add(1, Ordering::Relaxed);
        self.local.admit(account_id, limits).await
    }
}
