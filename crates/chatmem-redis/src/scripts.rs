//! The Lua scripts. Each runs atomically on the server, so a load or a commit is one
//! round trip (`EVALSHA`; `redis::Script` falls back to `SCRIPT LOAD` after a server restart).
//!
//! Conversation keys (`KEYS[1]` meta, `KEYS[2]` msgs) share one hash tag. On a single
//! Redis the commit and clear scripts also update the id index and the recency index,
//! passed as `KEYS[3]` and `KEYS[4]`; on Redis Cluster those live in another slot (a
//! `CROSSSLOT` error inside a script), so the store leaves them out and updates them with
//! separate commands (see the crate docs). The two indexes share one slot, so scripts may
//! take both.

/// The meta hash fields a load reads, in the order [`parse_snapshot`](crate::reply::parse_snapshot)
/// takes them: given to the load script as its `ARGV`, and read by the pipelined load.
pub(crate) const LOAD_FIELDS: [&str; 9] = [
    "version",
    "window_start",
    "next_seq",
    "sys_seq",
    "sys_tokens",
    "sys_json",
    "sys_counted_by",
    "summary",
    "created",
];

/// Reads the meta hash fields named in `ARGV` ([`LOAD_FIELDS`]) and the messages with
/// `seq >= window_start`.
///
/// Returns `{}` when the conversation does not exist, else the fields' values (missing ones
/// as nil) followed by `{records...}`.
pub(crate) const LOAD: &str = r#"
local m = redis.call('HMGET', KEYS[1], unpack(ARGV))
if not m[1] then
  return {}
end
local ws = m[2]
if not ws or not tonumber(ws) then
  ws = '1'
end
m[#m + 1] = redis.call('ZRANGEBYSCORE', KEYS[2], ws, '+inf')
return m
"#;

/// Reads up to `ARGV[2]` messages with `seq > ARGV[1]` (no lower bound from the window:
/// history includes evicted messages kept under `KeepHistory`).
///
/// Returns `{}` when the meta hash is missing: a conversation is its meta hash, so messages
/// left behind without it (an evicted or hand-deleted meta key) are not history.
pub(crate) const HISTORY: &str = r#"
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {}
end
return redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. ARGV[1], '+inf', 'LIMIT', 0, ARGV[2])
"#;

/// The version-checked commit. The version check is its only check: a `Commit` cannot be
/// built invalid, so its sequences, window start and next seq are stored as they are.
///
/// `KEYS`: meta, msgs, and the index and the recency index (single Redis only; without
/// them neither is touched). `ARGV`: 1 expected version, 2 raw id, 3 window start after the commit,
/// 4 delete messages with a seq below this (empty or `0` = delete nothing; may be below the
/// window start while evicted messages wait for a summary), 5 TTL in ms (empty = no
/// expiry), 6 system message (`0` none, `1` one without a counter name, `2` one counted by
/// `ARGV[12]`), 7 system seq, 8 system tokens, 9 system record JSON, 10 next_seq after the
/// commit, 11 a random commit token, 12 the system message's counter name (empty unless 6
/// is `2`), 13 the new summary's JSON (empty = keep the stored one; a summary's JSON is
/// never empty), then `seq, member` pairs from 14 on.
///
/// Returns `{1, new_version, now}` (also when this very commit, recognised by its token,
/// was already applied: a resend after a lost connection), `{0, current_version, now}` on
/// a lost version check, or `{2, 0, now}` when the stored version is unreadable; `now` is
/// the server's `TIME` in microseconds (a string): the commit's time in the recency index,
/// which on Cluster the store records with it after the script.
///
/// `TIME` before writes needs scripts replicated by their effects: the only mode since
/// Redis 7, the default since Redis 5.
pub(crate) const COMMIT: &str = r#"
local meta, msgs, index, recent = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local t = redis.call('TIME')
-- Built as text: exact, where Lua's number formatting might not be.
local now = t[1] .. string.format('%06d', tonumber(t[2]))
local cur = redis.call('HMGET', meta, 'version', 'commit_token')
local version = 0
if cur[1] then
  version = tonumber(cur[1])
  if not version then
    return {2, 0, now}
  end
end
if version ~= tonumber(ARGV[1]) then
  if version == tonumber(ARGV[1]) + 1 and cur[2] == ARGV[11] then
    return {1, version, now}
  end
  return {0, version, now}
end
if version == 0 then
  -- A conversation that does not exist has no messages, whatever was left behind.
  redis.call('DEL', msgs)
  -- Listed when created; an existing one is listed already (whoever unlists an id checks
  -- that its meta hash is gone, in the same script), so steady-state commits skip it.
  if index then
    redis.call('ZADD', index, 0, ARGV[2])
  end
end
local n = #ARGV
-- ZADD in chunks: unpack() of a huge table overflows Lua's C stack.
local i = 14
while i < n do
  local args = {}
  local j = i
  while j < n and j < i + 1000 do
    args[#args + 1] = ARGV[j]
    args[#args + 1] = ARGV[j + 1]
    j = j + 2
  end
  redis.call('ZADD', msgs, 'NX', unpack(args))
  i = j
end
-- One HSET for every field the commit sets.
local new_version = version + 1
local fields = {'id', ARGV[2], 'version', new_version, 'next_seq', ARGV[10], 'window_start', ARGV[3],
  'commit_token', ARGV[11]}
if version == 0 then
  -- The creation marker: tells this conversation from one created again under its id.
  fields[#fields + 1] = 'created'
  fields[#fields + 1] = ARGV[11]
end
if ARGV[6] ~= '0' then
  for _, f in ipairs({'sys_seq', ARGV[7], 'sys_tokens', ARGV[8], 'sys_json', ARGV[9]}) do
    fields[#fields + 1] = f
  end
  if ARGV[6] == '2' then
    fields[#fields + 1] = 'sys_counted_by'
    fields[#fields + 1] = ARGV[12]
  else
    -- The replaced system message's counter does not name this one's.
    redis.call('HDEL', meta, 'sys_counted_by')
  end
end
if ARGV[13] ~= '' then
  fields[#fields + 1] = 'summary'
  fields[#fields + 1] = ARGV[13]
end
redis.call('HSET', meta, unpack(fields))
if ARGV[4] ~= '' and ARGV[4] ~= '0' then
  redis.call('ZREMRANGEBYSCORE', msgs, '-inf', '(' .. ARGV[4])
end
if ARGV[5] ~= '' then
  redis.call('PEXPIRE', meta, ARGV[5])
  redis.call('PEXPIRE', msgs, ARGV[5])
elseif redis.call('PTTL', meta) ~= -1 then
  -- An earlier commit set a TTL (both keys always carry the same one): this one has none.
  redis.call('PERSIST', meta)
  redis.call('PERSIST', msgs)
end
if recent then
  redis.call('ZADD', recent, now, ARGV[2])
end
return {1, new_version, now}
"#;

/// Deletes a conversation. `KEYS`: meta, msgs, and the index and the recency index
/// (single Redis only); `ARGV[1]`: raw id. Returns 1 when the conversation existed, that
/// is when its meta hash did; messages left behind without it are deleted all the same.
pub(crate) const CLEAR: &str = r#"
local existed = redis.call('EXISTS', KEYS[1])
redis.call('DEL', KEYS[1], KEYS[2])
if KEYS[3] then
  redis.call('ZREM', KEYS[3], ARGV[1])
  redis.call('ZREM', KEYS[4], ARGV[1])
end
return existed
"#;

/// Keeps the indexes honest on a single Redis (on Cluster the meta keys live in other
/// slots than the indexes; see `RedisStore::prune_cluster`): `KEYS[1]` index, `KEYS[2]`
/// recency index, `KEYS[i + 2]` the meta key of `ARGV[i]`.
/// Returns one flag per id (1 live, 0 expired) and removes the expired ids from both
/// indexes. Atomic, so a conversation recreated concurrently is never dropped.
pub(crate) const PRUNE: &str = r#"
local out = {}
for i = 1, #ARGV do
  if redis.call('EXISTS', KEYS[i + 2]) == 1 then
    out[i] = 1
  else
    redis.call('ZREM', KEYS[1], ARGV[i])
    redis.call('ZREM', KEYS[2], ARGV[i])
    out[i] = 0
  end
end
return out
"#;

/// Lists the recency index newest first from a cursor: one batch of
/// `RedisStore::recent`. `KEYS[1]` the recency index; on a single Redis also `KEYS[2]`
/// the id index, and then the script checks each listed conversation itself (`PTTL` of
/// its meta key, named from `ARGV[6]`, the store's key prefix: keys a script does not
/// declare, which only a single Redis allows) and drops the expired ones from both
/// indexes, as `PRUNE` does.
///
/// `ARGV`: 1 the id prefix, 2 and 3 the cursor's score and id (empty score: from the
/// newest), 4 how many matching ids to return at most, 5 how many entries to read at most.
///
/// Entries with equal scores are in reverse byte order of their ids, as `ZREVRANGE`
/// keeps them and as the listing wants; the cursor's place among them is found by binary
/// search on ranks, comparing bytes (Lua's `<` on strings follows the server's locale).
///
/// Returns `{now, done, last_score, last_id, ids, scores, pttls}`: the server's `TIME` in
/// microseconds, 1 when the index ended within this batch, the last entry read (where the
/// next batch goes on; empty when none was), and the matching entries (`pttls` only on a
/// single Redis, where `ids` are the live ones).
pub(crate) const RECENT: &str = r#"
local recent, index = KEYS[1], KEYS[2]
local prefix, want, cap = ARGV[1], tonumber(ARGV[4]), tonumber(ARGV[5])
local function less(a, b)
  local n = math.min(#a, #b)
  for i = 1, n do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      return x < y
    end
  end
  return #a < #b
end
local t = redis.call('TIME')
local now = t[1] .. string.format('%06d', tonumber(t[2]))
local pos = 0
if ARGV[2] ~= '' then
  local score, id = ARGV[2], ARGV[3]
  -- Ranks [lo, hi) hold the entries scored as the cursor, ids descending.
  local lo = redis.call('ZCOUNT', recent, '(' .. score, '+inf')
  local hi = lo + redis.call('ZCOUNT', recent, score, score)
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if less(redis.call('ZREVRANGE', recent, mid, mid)[1], id) then
      hi = mid
    else
      lo = mid + 1
    end
  end
  pos = lo
end
local batch = redis.call('ZREVRANGE', recent, pos, pos + cap - 1, 'WITHSCORES')
local ids, scores, pttls, stale = {}, {}, {}, {}
local last_score, last_id = '', ''
-- Ended when the range came up short; a batch cut at `want` sets it back to 0.
local done = (#batch < 2 * cap) and 1 or 0
for i = 1, #batch, 2 do
  if #ids >= want then
    done = 0
    break
  end
  local id = batch[i]
  last_id, last_score = id, batch[i + 1]
  if string.sub(id, 1, #prefix) == prefix then
    if index then
      local tag = string.gsub(id, '.', function(c) return string.format('%02x', string.byte(c)) end)
      local pttl = redis.call('PTTL', ARGV[6] .. ':{' .. tag .. '}:meta')
      if pttl == -2 then
        stale[#stale + 1] = id
      else
        ids[#ids + 1] = id
        scores[#scores + 1] = last_score
        pttls[#pttls + 1] = pttl
      end
    else
      ids[#ids + 1] = id
      scores[#scores + 1] = last_score
    end
  end
end
for _, id in ipairs(stale) do
  redis.call('ZREM', recent, id)
  redis.call('ZREM', index, id)
end
return {now, done, last_score, last_id, ids, scores, pttls}
"#;

/// The time and the TTL of one listed conversation on Cluster, from its own node:
/// `KEYS[1]` its meta key. Returns `{now, pttl}`: that node's `TIME` in microseconds (a
/// string) and the key's `PTTL` (-2 when it is gone, -1 without expiry).
pub(crate) const CHECK: &str = r#"
local t = redis.call('TIME')
return {t[1] .. string.format('%06d', tonumber(t[2])), redis.call('PTTL', KEYS[1])}
"#;

/// Lists in the recency index (`KEYS[2]`), with score 0, the ids of the id index
/// (`KEYS[1]`) missing from it: conversations last committed by a chatmem without the
/// recency index. A batch at a time: up to `ARGV[2]` ids after `ARGV[1]` (empty: from the
/// first, and then only when the id index holds more ids than the recency index: two
/// `ZCARD`s is all a connect usually costs). `NX` keeps recorded times.
///
/// Returns `{added, last}`: how many ids it added, and the id the next batch goes on
/// after (empty when the index ended).
pub(crate) const RECENT_BACKFILL: &str = r#"
local n = tonumber(ARGV[2])
if ARGV[1] == '' and redis.call('ZCARD', KEYS[1]) <= redis.call('ZCARD', KEYS[2]) then
  return {0, ''}
end
local min = '-'
if ARGV[1] ~= '' then
  min = '(' .. ARGV[1]
end
local ids = redis.call('ZRANGEBYLEX', KEYS[1], min, '+', 'LIMIT', 0, n)
if #ids == 0 then
  return {0, ''}
end
local args = {'NX'}
for _, id in ipairs(ids) do
  args[#args + 1] = 0
  args[#args + 1] = id
end
local added = redis.call('ZADD', KEYS[2], unpack(args))
if #ids < n then
  return {added, ''}
end
return {added, ids[#ids]}
"#;

/// Creates or upgrades the layout version key `KEYS[1]` to `ARGV[1]` (this code's
/// version). Layout 1 is upgraded in place: its data reads as is (see `crate::schema`).
/// Anything else is left alone for the caller to judge. Atomic, so a newer version written
/// concurrently is never overwritten.
///
/// Returns `{found, now}`: the value found (nil when the key was missing) and the value the
/// key holds afterwards.
pub(crate) const SCHEMA: &str = r#"
local found = redis.call('GET', KEYS[1])
if not found or tonumber(found) == 1 then
  redis.call('SET', KEYS[1], ARGV[1])
  return {found, ARGV[1]}
end
return {found, found}
"#;
