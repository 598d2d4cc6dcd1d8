//! The Lua scripts. Each runs atomically on the server, so a load or a commit is one
//! round trip (`EVALSHA`; `redis::Script` falls back to `SCRIPT LOAD` after a server restart).
//!
//! Conversation keys (`KEYS[1]` meta, `KEYS[2]` msgs) share one hash tag. On a single
//! Redis the commit and clear scripts also update the id index, passed as `KEYS[3]`; on
//! Redis Cluster it lives in another slot (a `CROSSSLOT` error inside a script), so the
//! store leaves `KEYS[3]` out and updates the index with separate commands (see the crate
//! docs).

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
/// `KEYS`: meta, msgs, and the index (single Redis only; without it the index is not
/// touched). `ARGV`: 1 expected version, 2 raw id, 3 window start after the commit,
/// 4 delete messages with a seq below this (empty or `0` = delete nothing; may be below the
/// window start while evicted messages wait for a summary), 5 TTL in ms (empty = no
/// expiry), 6 system message (`0` none, `1` one without a counter name, `2` one counted by
/// `ARGV[12]`), 7 system seq, 8 system tokens, 9 system record JSON, 10 next_seq after the
/// commit, 11 a random commit token, 12 the system message's counter name (empty unless 6
/// is `2`), 13 the new summary's JSON (empty = keep the stored one; a summary's JSON is
/// never empty), then `seq, member` pairs from 14 on.
///
/// Returns `{1, new_version}` (also when this very commit, recognised by its token, was
/// already applied: a resend after a lost connection), `{0, current_version}` on a lost
/// version check, or `{2, 0}` when the stored version is unreadable.
pub(crate) const COMMIT: &str = r#"
local meta, msgs, index = KEYS[1], KEYS[2], KEYS[3]
local cur = redis.call('HMGET', meta, 'version', 'commit_token')
local version = 0
if cur[1] then
  version = tonumber(cur[1])
  if not version then
    return {2, 0}
  end
end
if version ~= tonumber(ARGV[1]) then
  if version == tonumber(ARGV[1]) + 1 and cur[2] == ARGV[11] then
    return {1, version}
  end
  return {0, version}
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
return {1, new_version}
"#;

/// Deletes a conversation. `KEYS`: meta, msgs, and the index (single Redis only);
/// `ARGV[1]`: raw id. Returns 1 when the conversation existed, that is when its meta hash
/// did; messages left behind without it are deleted all the same.
pub(crate) const CLEAR: &str = r#"
local existed = redis.call('EXISTS', KEYS[1])
redis.call('DEL', KEYS[1], KEYS[2])
if KEYS[3] then
  redis.call('ZREM', KEYS[3], ARGV[1])
end
return existed
"#;

/// Keeps the index honest on a single Redis (on Cluster the meta keys live in other
/// slots than the index; see `RedisStore::prune_cluster`): `KEYS[1]` index,
/// `KEYS[i + 1]` the meta key of `ARGV[i]`.
/// Returns one flag per id (1 live, 0 expired) and removes the expired ids from the
/// index. Atomic, so a conversation recreated concurrently is never dropped.
pub(crate) const PRUNE: &str = r#"
local out = {}
for i = 1, #ARGV do
  if redis.call('EXISTS', KEYS[i + 1]) == 1 then
    out[i] = 1
  else
    redis.call('ZREM', KEYS[1], ARGV[i])
    out[i] = 0
  end
end
return out
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
