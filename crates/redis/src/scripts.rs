//! The Lua scripts that count in Redis, each one atomic and one round trip (EVALSHA; the client
//! loads a script the server does not know yet). Every script reads the time from the server
//! (`TIME`), so instances whose clocks differ count the same, as the PostgreSQL counter does with
//! `now()`. Numbers go back to Redis through `string.format`, never `tostring` (which writes large
//! integral numbers as `1e+14`, which PEXPIRE refuses).

use redis::Script;

/// Takes one token from the bucket `KEYS[1]` (a hash: `tokens`, `at` in seconds) of burst
/// `ARGV[1]` refilled at `ARGV[2]` per second. A missing bucket is full. Returns
/// `{granted (1 or 0), tokens left after the take as a string}`: when not granted, the tokens
/// after the refill (< 1), from which the caller computes the wait. The bucket expires once it
/// would be full again (a missing bucket is a full one), so idle keys do not stay in memory; a
/// bucket that takes longer than about 300 years to refill never expires.
const TAKE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local burst = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local b = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(b[1])
local at = tonumber(b[2])
if tokens == nil or at == nil then
  tokens = burst
  at = now
end
tokens = math.min(burst, tokens + math.max(0, now - at) * rate)
local granted = 0
if tokens >= 1 then
  tokens = tokens - 1
  granted = 1
end
redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens),
  'at', string.format('%.6f', math.max(at, now)))
local full_in_ms = (burst - tokens) / rate * 1000 + 1000
if full_in_ms < 1e13 then
  redis.call('PEXPIRE', KEYS[1], string.format('%d', math.ceil(full_in_ms)))
else
  redis.call('PERSIST', KEYS[1])
end
return {granted, string.format('%.17g', tokens)}
";

/// Leases one of at most `ARGV[1]` slots of the sorted set `KEYS[1]` (member: a lease id, score:
/// when its lease ends, in ms of the server's clock) for the lease id `ARGV[2]` and `ARGV[3]` ms.
/// A lease that has ended frees its slot (it is removed first). Returns 1 when leased, 0 when
/// every slot is held. The set expires with its newest lease, so a key nobody holds leaves.
const ACQUIRE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', now))
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], string.format('%d', now + tonumber(ARGV[3])), ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return 1
end
return 0
";

/// Renews leases for `ARGV[1]` ms: `KEYS[i]` holds the lease id `ARGV[i + 1]`. Only a lease that
/// has not ended is renewed (an ended one may already be another caller's slot). Returns how
/// many were renewed.
const RENEW: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[1])
local renewed = 0
for i, key in ipairs(KEYS) do
  local ends = redis.call('ZSCORE', key, ARGV[i + 1])
  if ends and tonumber(ends) > now then
    redis.call('ZADD', key, 'XX', string.format('%d', now + lease), ARGV[i + 1])
    redis.call('PEXPIRE', key, ARGV[1])
    renewed = renewed + 1
  end
end
return renewed
";

/// The three scripts, hashed once.
pub(crate) struct Scripts {
    pub(crate) take: Script,
    pub(crate) acquire: Script,
    pub(crate) renew: Script,
}

impl Scripts {
    pub(crate) fn new() -> Self {
        Self {
            take: Script::new(TAKE),
            acquire: Script::new(ACQUIRE),
            renew: Script::new(RENEW),
        }
    }
}
