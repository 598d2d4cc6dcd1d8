//! The Lua scripts. Each runs atomically on the server, so a load or a commit is one
//! round trip (`EVALSHA`; `redis::Script` falls back to `SCRIPT LOAD` after a server restart).
//!
//! Conversation keys (`KEYS[1]` meta, `KEYS[2]` msgs, `KEYS[3]` its lexical index where a
//! script takes it) share one hash tag. On a single Redis the commit and clear scripts also
//! update the id index and the recency index, passed as `KEYS[4]` and `KEYS[5]`; on Redis Cluster those live in another slot (a
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
/// `KEYS`: meta, msgs, the lexical index (see [`crate::recall`]), and the id index and the
/// recency index (single Redis only; without them neither is touched). `ARGV`: 1 expected
/// version, 2 raw id, 3 window start after the commit, 4 delete messages with a seq below
/// this (empty or `0` = delete nothing; may be below the window start while evicted
/// messages wait for a summary), 5 TTL in ms (empty = no expiry), 6 system message (`0`
/// none, `1` one without a counter name, `2` one counted by `ARGV[12]`), 7 system seq, 8
/// system tokens, 9 system record JSON, 10 next_seq after the commit, 11 a random commit
/// token, 12 the system message's counter name (empty unless 6 is `2`), 13 the new
/// summary's JSON (empty = keep the stored one; a summary's JSON is never empty), 14 how
/// many messages are appended, then their `seq, member` pairs from 15 on, then the index
/// entries as [`push_index`](crate::recall::push_index) lays them out.
///
/// Returns `{1, new_version, now}` (also when this very commit, recognised by its token,
/// was already applied: a resend after a lost connection), `{0, current_version, now}` on
/// a lost version check, or `{2, 0, now}` when the stored version is unreadable; `now` is
/// the server's `TIME` in microseconds (a string): the commit's time in the recency index
/// and in the index entries, which on Cluster the store records with it after the script.
///
/// `TIME` before writes needs scripts replicated by their effects: the only mode since
/// Redis 7, the default since Redis 5.
pub(crate) const COMMIT: &str = r#"
local meta, msgs, idx, index, recent = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
-- Postings per full chunk, bytes per posting and per list header, bytes per pending
-- entry, and how many pending entries are merged into the lists (see crate::recall).
local B, W, H, P, T = 64, 15, 12, 11, 32
local t = redis.call('TIME')
-- Built as text: exact, where Lua's number formatting might not be.
local now = t[1] .. string.format('%06d', tonumber(t[2]))
local cur = redis.call('HMGET', meta, 'version', 'commit_token', 'indexed')
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
  -- A conversation that does not exist has no messages and no index, whatever was left
  -- behind (a meta hash without a version is none).
  redis.call('DEL', msgs, meta, idx)
  cur = {}
  -- Listed when created; an existing one is listed already (whoever unlists an id checks
  -- that its meta hash is gone, in the same script), so steady-state commits skip it.
  if index then
    redis.call('ZADD', index, 0, ARGV[2])
  end
end
-- HMGET and HSET of many fields of `key`, a thousand at a time: unpack() of a huge table
-- overflows Lua's C stack.
local function hmget(key, names)
  local out = {}
  for i = 1, #names, 1000 do
    local part = redis.call('HMGET', key, unpack(names, i, math.min(i + 999, #names)))
    for j = 1, #part do
      out[i + j - 1] = part[j]
    end
  end
  return out
end
local function hcall(cmd, key, args, step)
  for i = 1, #args, step do
    redis.call(cmd, key, unpack(args, i, math.min(i + step - 1, #args)))
  end
end
local appended = tonumber(ARGV[14])
local i = 15
local stop = 15 + 2 * appended
while i < stop do
  local args = {}
  local j = i
  while j < stop and j < i + 1000 do
    args[#args + 1] = ARGV[j]
    args[#args + 1] = ARGV[j + 1]
    j = j + 2
  end
  redis.call('ZADD', msgs, 'NX', unpack(args))
  i = j
end
local below = 0
if ARGV[4] ~= '' and ARGV[4] ~= '0' then
  redis.call('ZREMRANGEBYSCORE', msgs, '-inf', '(' .. ARGV[4])
  below = tonumber(ARGV[4])
end
-- The index (see crate::recall), in its own key, which the meta hash's `indexed` marks as
-- this conversation's (a key left behind by another is dropped before the first entry).
local entries = tonumber(ARGV[stop])
local indexed = cur[3] and true or false
local first_index = entries > 0 and not indexed
-- Read and written only when the commit adds entries or deletes some.
local touch = entries > 0 or (indexed and below > 0)
local docs, total, floor, pend = 0, 0, 0, ''
if indexed and touch then
  local head = redis.call('HGET', idx, 'i')
  if head then
    docs, total, floor = struct.unpack('>I7I7I7', head)
    pend = string.sub(head, 22)
  end
elseif first_index then
  redis.call('DEL', idx)
end
local formats = {}
local function postings_format(n)
  local f = formats[n]
  if not f then
    f = '>' .. string.rep('I7I4I4', n)
    formats[n] = f
  end
  return f
end
if indexed and docs > 0 and floor < below then
  local gone = {}
  -- Pending entries below go with their messages: their postings are in no list yet.
  local count = #pend / P
  local first_pending = below
  local cut = 0
  for k = 1, count do
    local seq, len = struct.unpack('>I7I4', pend, (k - 1) * P + 1)
    if k == 1 then
      first_pending = math.min(seq, below)
    end
    if seq >= below then
      break
    end
    cut = k
    gone[#gone + 1] = 'd:' .. string.format('%d', seq)
    docs = docs - 1
    total = total - len
  end
  pend = string.sub(pend, cut * P + 1)
  -- The merged entries below go too: each entry names its terms, and a term's postings
  -- below are the first ones of its list (seqs only grow), so each list loses as many
  -- from its front as the deleted entries that hold its term.
  local drop, order = {}, {}
  local s = floor
  while s < first_pending do
    local last = math.min(first_pending - 1, s + 999)
    local names = {}
    for q = s, last do
      names[#names + 1] = 'd:' .. string.format('%d', q)
    end
    local recs = redis.call('HMGET', idx, unpack(names))
    for r = 1, #recs do
      local rec = recs[r]
      if rec then
        gone[#gone + 1] = names[r]
        docs = docs - 1
        total = total - tonumber(string.match(rec, '^%d+'))
        for term in string.gmatch(rec, ';(%x*):') do
          if drop[term] then
            drop[term] = drop[term] + 1
          else
            drop[term] = 1
            order[#order + 1] = term
          end
        end
      end
    end
    s = last + 1
  end
  floor = below
  local names = {}
  for k, term in ipairs(order) do
    names[k] = 't:' .. term
  end
  local states = hmget(idx, names)
  local set = {}
  for k, term in ipairs(order) do
    local state = states[k]
    if state then
      local n, d = struct.unpack('>I6I6', state)
      local d2 = d + drop[term]
      local chunks = math.floor(n / B)
      local dead = math.min(math.floor(d2 / B), chunks)
      if d2 >= n then
        dead = chunks
        gone[#gone + 1] = names[k]
      else
        set[#set + 1] = names[k]
        set[#set + 1] = struct.pack('>I6I6', n, d2) .. string.sub(state, H + 1)
      end
      for c = math.floor(d / B), dead - 1 do
        gone[#gone + 1] = 'c:' .. term .. ':' .. string.format('%d', c)
      end
    end
  end
  hcall('HDEL', idx, gone, 1000)
  hcall('HSET', idx, set, 2000)
end
-- Appends postings to their terms' lists: `groups[term]` = {nums = {seq, tf, len, ...} in
-- seq order, packed = postings already packed (after nums)}.
local function append_postings(groups, order)
  local names = {}
  for k, term in ipairs(order) do
    names[k] = 't:' .. term
  end
  local states = hmget(idx, names)
  local set = {}
  for k, term in ipairs(order) do
    local g = groups[term]
    local parts = {}
    local nums = g.nums
    for from = 1, #nums, 600 do
      local to = math.min(from + 599, #nums)
      parts[#parts + 1] = struct.pack(postings_format((to - from + 1) / 3), unpack(nums, from, to))
    end
    parts[#parts + 1] = g.packed
    local add = table.concat(parts)
    local state = states[k]
    local n, d, tail = 0, 0, ''
    if state then
      n, d = struct.unpack('>I6I6', state)
      tail = string.sub(state, H + 1)
    end
    local buf = tail .. add
    local count = #add / W
    -- The tail holds n % B postings; whole chunks of B move out of it.
    local full = math.floor(((n % B) + count) / B)
    local first = math.floor(n / B)
    for c = 0, full - 1 do
      set[#set + 1] = 'c:' .. term .. ':' .. string.format('%d', first + c)
      set[#set + 1] = string.sub(buf, c * B * W + 1, (c + 1) * B * W)
    end
    set[#set + 1] = names[k]
    set[#set + 1] = struct.pack('>I6I6', n + count, d) .. string.sub(buf, full * B * W + 1)
  end
  hcall('HSET', idx, set, 2000)
end
-- Reads one entry's counts (`;<hex>:<tf>...`) into `groups`.
local function take(groups, order, entry, seq, len)
  for term, tf in string.gmatch(entry, ';(%x*):(%d+)') do
    local g = groups[term]
    if not g then
      g = {nums = {}, packed = ''}
      groups[term] = g
      order[#order + 1] = term
    end
    local nums = g.nums
    nums[#nums + 1] = seq
    nums[#nums + 1] = tonumber(tf)
    nums[#nums + 1] = len
  end
end
-- The index's fields this commit sets (one HSET at the end).
local extra = {}
-- Entries below the deletion bound are not sent: they would go at once.
local p = stop + 1
if entries > 0 then
  indexed = true
  if docs == 0 then
    -- Nothing indexed: no entry lies below the first new one.
    floor = tonumber(ARGV[p])
  end
  local first_entry = p
  for _ = 1, entries do
    extra[#extra + 1] = 'd:' .. ARGV[p]
    extra[#extra + 1] = ARGV[p + 1] .. ':' .. now .. ARGV[p + 2]
    docs = docs + 1
    total = total + tonumber(ARGV[p + 1])
    p = p + 3
  end
  local old = pend
  pend = pend .. ARGV[p]
  local grouped = ARGV[p + 1] == '1'
  p = p + 2
  if grouped or #pend / P >= T then
    -- The pending entries move into the lists, oldest first, then this commit's: read
    -- from their entries, or (a large commit) as the store grouped them by term.
    local groups, order = {}, {}
    local count = #old / P
    if count > 0 then
      local names, seqs, lens = {}, {}, {}
      for k = 1, count do
        seqs[k], lens[k] = struct.unpack('>I7I4', old, (k - 1) * P + 1)
        names[k] = 'd:' .. string.format('%d', seqs[k])
      end
      local recs = hmget(idx, names)
      for k = 1, count do
        if recs[k] then
          take(groups, order, recs[k], seqs[k], lens[k])
        end
      end
    end
    if grouped then
      local terms = tonumber(ARGV[p])
      for k = 0, terms - 1 do
        local term = ARGV[p + 1 + 2 * k]
        local g = groups[term]
        if not g then
          g = {nums = {}, packed = ''}
          groups[term] = g
          order[#order + 1] = term
        end
        g.packed = ARGV[p + 2 + 2 * k]
      end
    else
      for e = 0, entries - 1 do
        local at = first_entry + 3 * e
        take(groups, order, ARGV[at + 2], tonumber(ARGV[at]), tonumber(ARGV[at + 1]))
      end
    end
    append_postings(groups, order)
    pend = ''
  end
end
if indexed and touch then
  extra[#extra + 1] = 'i'
  extra[#extra + 1] = struct.pack('>I7I7I7', docs, total, floor) .. pend
  hcall('HSET', idx, extra, 2000)
end
-- One HSET for every field of the meta hash the commit sets.
local new_version = version + 1
local fields = {'id', ARGV[2], 'version', new_version, 'next_seq', ARGV[10], 'window_start', ARGV[3],
  'commit_token', ARGV[11]}
if version == 0 then
  -- The creation marker: tells this conversation from one created again under its id.
  fields[#fields + 1] = 'created'
  fields[#fields + 1] = ARGV[11]
end
if first_index then
  fields[#fields + 1] = 'indexed'
  fields[#fields + 1] = '1'
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
-- The conversation's keys always carry the same deadline: the index's too, once it has one.
if ARGV[5] ~= '' then
  redis.call('PEXPIRE', meta, ARGV[5])
  redis.call('PEXPIRE', msgs, ARGV[5])
  if indexed then
    redis.call('PEXPIRE', idx, ARGV[5])
  end
elseif redis.call('PTTL', meta) ~= -1 then
  -- An earlier commit set a TTL: this one has none.
  redis.call('PERSIST', meta)
  redis.call('PERSIST', msgs)
  if indexed then
    redis.call('PERSIST', idx)
  end
end
if recent then
  redis.call('ZADD', recent, now, ARGV[2])
end
return {1, new_version, now}
"#;

/// A lexical search of one conversation (see [`crate::recall`] for the index it reads).
/// `KEYS`: meta, msgs, index. `ARGV`: 1 only seqs below this, 2 at most this many hits, 3 how
/// many of the best candidates to answer in all (hits with their messages first, then the
/// rest as statistics only, for the store to check the order with chatmem's own BM25), 4
/// how many of each term's most recent postings below `ARGV[1]` count
/// ([`MAX_POSTINGS_PER_TERM`](chatmem::recall::MAX_POSTINGS_PER_TERM)), then the query's
/// terms, encoded.
///
/// BM25 is computed as [`chatmem::recall::bm25`] computes it, operation for operation in
/// the same order (Lua's numbers are the same doubles), and rounded as
/// [`chatmem::recall::rounded`] rounds.
///
/// The pending entries (the newest messages, in no list yet) are read whole: each is
/// scored, and counts in its terms' windows (`ARGV[4]` postings each), which the lists
/// fill after them. Each list's window is found from the end of the list (the postings at
/// or past `ARGV[1]` are its last ones): galloping back, then bisecting, a chunk read per
/// step. The windows are then read in query order, each posting adding its term's score
/// to its message's sum as it is met: the order in which `bm25` sums them, with no table
/// made per message (which, measured, costs Lua more than reading windows that bounds
/// might have let it skip). The best are kept in a heap, and their counts read back from
/// their entries.
///
/// Returns `{docs, total_len, {df...}, hits, rest}`: `hits` are `{seq, len, at, member,
/// tf...}` best first (a candidate whose message is gone is left out), `rest` the next
/// candidates as `{seq, len, tf...}`. `{0, 0, {0...}, {}, {}}` when the conversation does
/// not exist or was never indexed.
pub(crate) const SEARCH: &str = r#"
local meta, msgs, idx = KEYS[1], KEYS[2], KEYS[3]
local B, W, H, P = 64, 15, 12, 11
local POSTING = '>I7I4I4'
local before, limit, keep, cap = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local m = #ARGV - 4
local function term(i)
  return ARGV[i + 4]
end
local function hmget(names)
  local out = {}
  for i = 1, #names, 1000 do
    local part = redis.call('HMGET', idx, unpack(names, i, math.min(i + 999, #names)))
    for j = 1, #part do
      out[i + j - 1] = part[j]
    end
  end
  return out
end
local df = {}
for i = 1, m do
  df[i] = 0
end
-- No conversation, or one never indexed: nothing indexed.
local conversation = redis.call('HMGET', meta, 'version', 'indexed')
if not conversation[1] or not conversation[2] then
  return {0, 0, df, {}, {}}
end
local names = {'i'}
for i = 1, m do
  names[i + 1] = 't:' .. term(i)
end
local got = hmget(names)
local docs, total, pend = 0, 0, ''
if got[1] then
  docs, total = struct.unpack('>I7I7', got[1])
  pend = string.sub(got[1], 22)
end
local lists = {}
for i = 1, m do
  local state = got[i + 1]
  if state then
    local n, d = struct.unpack('>I6I6', state)
    df[i] = n - d
    if n > d then
      lists[i] = {n = n, d = d, tail = string.sub(state, H + 1), chunks = {}}
    end
  end
end
-- A term's count in an entry (`;<hex>:<tf>` in `<len>:<at>;...`), its digits read as bytes.
local needles = {}
for i = 1, m do
  needles[i] = ';' .. term(i) .. ':'
end
local function count_in(entry, i)
  local _, e = string.find(entry, needles[i], 1, true)
  if not e then
    return 0
  end
  local n, at = 0, e + 1
  while true do
    local c = string.byte(entry, at)
    if not c or c < 48 or c > 57 then
      return n
    end
    n, at = n * 10 + (c - 48), at + 1
  end
end
-- Each term's counts in `entry`, by query position: for a long query, the entry's terms
-- are looked up among the query's rather than each query term in the entry.
local places
if m > 8 then
  places = {}
  for i = 1, m do
    local at = places[term(i)]
    if not at then
      at = {}
      places[term(i)] = at
    end
    at[#at + 1] = i
  end
end
local function counts_in(entry)
  local row = {}
  for i = 1, m do
    row[i] = 0
  end
  if not entry then
    return row
  end
  if places then
    for hex, tf in string.gmatch(entry, ';(%x*):(%d+)') do
      for _, i in ipairs(places[hex] or {}) do
        row[i] = tonumber(tf)
      end
    end
  else
    for i = 1, m do
      row[i] = count_in(entry, i)
    end
  end
  return row
end
-- The pending entries (the newest, in no list yet): each one's counts, read from its entry.
local pcount = #pend / P
local pseqs, plens, precs, ptfs = {}, {}, {}, {}
if pcount > 0 then
  local wanted = {}
  for k = 1, pcount do
    pseqs[k], plens[k] = struct.unpack('>I7I4', pend, (k - 1) * P + 1)
    wanted[k] = 'd:' .. string.format('%d', pseqs[k])
  end
  precs = hmget(wanted)
  for k = 1, pcount do
    local row = counts_in(precs[k])
    for i = 1, m do
      if row[i] > 0 then
        df[i] = df[i] + 1
      end
    end
    ptfs[k] = row
  end
end
if limit == 0 or docs == 0 or before <= 1 then
  return {docs, total, df, {}, {}}
end
-- chatmem::recall::bm25 and rounded, in their order of operations.
local k1, b = 1.2, 0.5
local avg = math.max(total / docs, 1.0)
local idf = {}
for i = 1, m do
  idf[i] = math.log(1.0 + ((docs - df[i]) + 0.5) / (df[i] + 0.5))
end
local function term_score(i, tf, len)
  return ((idf[i] * tf) * (k1 + 1.0)) / (tf + k1 * ((1.0 - b) + (b * len) / avg))
end
local function rounded(s)
  local x = s * 1000000.0
  local r = math.floor(x)
  if x - r >= 0.5 then
    r = r + 1
  end
  return r / 1000000.0
end
-- The best `keep` so far: a heap by (score, seq) whose first is the worst of them, in
-- arrays (score, seq, and `len` or {len, tfs, entry}); `ws`, `wq` that worst one's score
-- and seq once there are `keep`.
local hs, hq, hx, hn = {}, {}, {}, 0
local ws, wq
-- Adds a candidate that beats the worst kept (any while fewer than `keep` are).
local function push(s, q, x)
  local j
  if hn < keep then
    hn = hn + 1
    j = hn
    while j > 1 do
      local up = (j - j % 2) / 2
      local us, uq = hs[up], hq[up]
      if us < s or (us == s and uq < q) then
        break
      end
      hs[j], hq[j], hx[j] = us, uq, hx[up]
      j = up
    end
  else
    j = 1
    while true do
      local c = 2 * j
      if c > hn then
        break
      end
      if c < hn and (hs[c + 1] < hs[c] or (hs[c + 1] == hs[c] and hq[c + 1] < hq[c])) then
        c = c + 1
      end
      if hs[c] < s or (hs[c] == s and hq[c] < q) then
        hs[j], hq[j], hx[j] = hs[c], hq[c], hx[c]
        j = c
      else
        break
      end
    end
  end
  hs[j], hq[j], hx[j] = s, q, x
  if hn >= keep then
    ws, wq = hs[1], hq[1]
  end
end
-- The pending entries below `before` are the newest postings there of every term they
-- hold: each counts as long as its term's window (`cap` postings) is not full.
local used = {}
for i = 1, m do
  used[i] = 0
end
for k = pcount, 1, -1 do
  local seq = pseqs[k]
  if seq < before then
    local row, tfs, s, any = ptfs[k], {}, 0, false
    for i = 1, m do
      tfs[i] = 0
      if row[i] > 0 and used[i] < cap then
        used[i] = used[i] + 1
        tfs[i] = row[i]
        s = s + term_score(i, row[i], plens[k])
        any = true
      end
    end
    s = rounded(s)
    if any and (not ws or s > ws or (s == ws and seq > wq)) then
      push(s, seq, {plens[k], tfs, precs[k]})
    end
  end
end
-- A list's chunks (its tail as the last), each read once and kept as read: postings are
-- read where they lie (no table is made of them).
local function chunk_name(i, c)
  return 'c:' .. term(i) .. ':' .. string.format('%d', c)
end
local function chunk(i, c)
  local l = lists[i]
  local s = l.chunks[c]
  if not s then
    if c == math.floor(l.n / B) then
      s = l.tail
    else
      s = redis.call('HGET', idx, chunk_name(i, c)) or ''
    end
    l.chunks[c] = s
  end
  return s
end
-- Reads chunks `from` to `to` of list `i` that are not read yet, in one HMGET.
local function prefetch(i, from, to)
  local l = lists[i]
  local wanted, at = {}, {}
  for c = from, math.min(to, math.floor(l.n / B) - 1) do
    if not l.chunks[c] then
      wanted[#wanted + 1] = chunk_name(i, c)
      at[#at + 1] = c
    end
  end
  if #wanted > 0 then
    local part = hmget(wanted)
    for j, c in ipairs(at) do
      l.chunks[c] = part[j] or ''
    end
  end
end
local function seq_at(i, o)
  local c = math.floor(o / B)
  return (struct.unpack('>I7', chunk(i, c), (o - c * B) * W + 1))
end
-- Each list's window: its postings `lo` to `hi - 1`, the last below `before` that the
-- pending entries leave room for; `first` the seq of its first.
for i = 1, m do
  local l = lists[i]
  if l then
    local lo, hi, gap = l.d, l.n, 1
    while lo < hi do
      local o = math.max(lo, hi - gap)
      if seq_at(i, o) < before then
        lo = o + 1
        break
      end
      hi = o
      gap = gap * 2
    end
    while lo < hi do
      local mid = math.floor((lo + hi) / 2)
      if seq_at(i, mid) < before then
        lo = mid + 1
      else
        hi = mid
      end
    end
    l.hi = lo
    l.lo = math.max(l.d, lo - (cap - used[i]))
    if l.lo >= l.hi then
      lists[i] = nil
    else
      l.first = seq_at(i, l.lo)
    end
  end
end
-- The windows, in query order: each posting adds its term's score to its message's sum
-- (bm25's order of addition: only the terms a message holds, in query order).
local sums, lens = {}, {}
local read, floor = struct.unpack, math.floor
for i = 1, m do
  local l = lists[i]
  if l then
    local first, last = floor(l.lo / B), floor((l.hi - 1) / B)
    prefetch(i, first, last)
    local w = idf[i]
    for c = first, last do
      local s = chunk(i, c)
      local o1 = math.max(l.lo, c * B)
      local pos = (o1 - c * B) * W + 1
      for _ = o1, math.min(l.hi, (c + 1) * B) - 1 do
        local seq, tf, len = read(POSTING, s, pos)
        pos = pos + W
        sums[seq] = (sums[seq] or 0) + ((w * tf) * (k1 + 1.0)) / (tf + k1 * ((1.0 - b) + (b * len) / avg))
        lens[seq] = len
      end
    end
  end
end
for seq, s in pairs(sums) do
  -- Clearly below the worst kept, rounded or not: skipped before rounding.
  if not ws or s >= ws - 0.000001 then
    local x = s * 1000000.0
    local r = floor(x)
    if x - r >= 0.5 then
      r = r + 1
    end
    s = r / 1000000.0
    if not ws or s > ws or (s == ws and seq > wq) then
      push(s, seq, lens[seq])
    end
  end
end
-- The best, {score, seq, len, tfs, entry}; the counts of those not pending (which have
-- theirs) read from their entries: a term counts where the message lies in its window.
local top, wanted, which = {}, {}, {}
for k = 1, hn do
  local x = hx[k]
  if type(x) == 'table' then
    top[k] = {hs[k], hq[k], x[1], x[2], x[3]}
  else
    top[k] = {hs[k], hq[k], x}
    wanted[#wanted + 1] = 'd:' .. string.format('%d', hq[k])
    which[#which + 1] = top[k]
  end
end
local entries = hmget(wanted)
for k, c in ipairs(which) do
  local row = counts_in(entries[k])
  for i = 1, m do
    local l = lists[i]
    if not l or c[2] < l.first then
      row[i] = 0
    end
  end
  c[4], c[5] = row, entries[k]
end
table.sort(top, function(x, y)
  return x[1] > y[1] or (x[1] == y[1] and x[2] > y[2])
end)
local function row(head, tfs)
  for q = 1, m do
    head[#head + 1] = tfs[q]
  end
  return head
end
local hits, rest = {}, {}
for k = 1, hn do
  local c = top[k]
  if #hits < limit then
    local key = string.format('%d', c[2])
    local member = redis.call('ZRANGEBYSCORE', msgs, key, key, 'LIMIT', 0, 1)[1]
    if member then
      -- Its time: its entry's, between the first `:` and the first `;`.
      local at = c[5] and string.match(c[5], '^%d+:(%d+)') or ''
      hits[#hits + 1] = row({c[2], c[3], at, member}, c[4])
    end
  else
    rest[#rest + 1] = row({c[2], c[3]}, c[4])
  end
end
return {docs, total, df, hits, rest}
"#;

/// The messages and index times of the seqs in `ARGV`, for a search whose order the store
/// corrected (see [`SEARCH`]). `KEYS`: meta, msgs, index. Returns `{member, at}` per seq (`false`
/// for a message or entry that is gone), or `{}` when the conversation does not exist.
pub(crate) const FETCH: &str = r#"
local meta, msgs, idx = KEYS[1], KEYS[2], KEYS[3]
if redis.call('EXISTS', meta) == 0 then
  return {}
end
local out = {}
for i = 1, #ARGV do
  local member = redis.call('ZRANGEBYSCORE', msgs, ARGV[i], ARGV[i], 'LIMIT', 0, 1)[1] or false
  local entry = redis.call('HGET', idx, 'd:' .. ARGV[i])
  out[i] = {member, entry and string.match(entry, '^%d+:(%d+)') or false}
end
return out
"#;

/// Deletes a conversation. `KEYS`: meta, msgs, its lexical index, and the id index and the
/// recency index (single Redis only); `ARGV[1]`: raw id. Returns 1 when the conversation
/// existed, that is when its meta hash did; messages and index left behind without it are
/// deleted all the same.
pub(crate) const CLEAR: &str = r#"
local existed = redis.call('EXISTS', KEYS[1])
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
if KEYS[4] then
  redis.call('ZREM', KEYS[4], ARGV[1])
  redis.call('ZREM', KEYS[5], ARGV[1])
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

/// The version-checked commit of a user's facts (see [`crate::facts`]). The version check
/// is its only check: a `FactsCommit` cannot be built invalid, so what it carries is stored
/// as it is.
///
/// `KEYS`: the user's header hash, current facts hash and history hash (one hash tag).
/// `ARGV`: 1 the expected version, 2 the version this commit makes (both decimal, compared
/// as text: no number passes through Lua), 3 the commit's token, 4 the next fact id, 5 the
/// raw user id, then the new set's fact ids (a count, then the ids: stored facts not among
/// them leave), the facts to write (a count, then `id, json` pairs: those the commit made or
/// changed), the facts whose history goes (a count, then the ids), and the history to append
/// (a count, then `fact, lines` pairs: each fact's new entries, one JSON a line).
///
/// Returns `{1, version}` when applied (also when this very commit, recognised by its token,
/// already was: a resend after a lost reply), `{0, version}` on a lost version check, `{2,
/// version}` when the stored version is not a number; `version` as stored, as text.
pub(crate) const FACTS_COMMIT: &str = r#"
local user, facts, history = KEYS[1], KEYS[2], KEYS[3]
local cur = redis.call('HMGET', user, 'version', 'token')
local version = cur[1] or '0'
if not string.match(version, '^%d+$') then
  return {2, version}
end
if version ~= ARGV[1] then
  if version == ARGV[2] and cur[2] == ARGV[3] then
    return {1, version}
  end
  return {0, version}
end
-- HDEL and HSET of many fields, a thousand at a time: unpack() of a huge table overflows
-- Lua's C stack.
local function hcall(cmd, key, args, step)
  for i = 1, #args, step do
    redis.call(cmd, key, unpack(args, i, math.min(i + step - 1, #args)))
  end
end
-- ARGV[p] is a count; the `width * count` arguments after it, as a table.
local p = 6
local function take(width)
  local n = tonumber(ARGV[p]) * width
  local out = {}
  for i = 1, n do
    out[i] = ARGV[p + i]
  end
  p = p + n + 1
  return out
end
local ids, written, dropped, appended = take(1), take(2), take(1), take(2)
if not cur[1] then
  -- An unknown user has no facts and no history, whatever was left behind (a header hash
  -- without a version is none).
  redis.call('DEL', user, facts, history)
else
  local keep = {}
  for _, id in ipairs(ids) do
    keep[id] = true
  end
  local gone = {}
  for _, id in ipairs(redis.call('HKEYS', facts)) do
    if not keep[id] then
      gone[#gone + 1] = id
    end
  end
  hcall('HDEL', facts, gone, 1000)
end
hcall('HSET', facts, written, 2000)
hcall('HDEL', history, dropped, 1000)
if #appended > 0 then
  local names = {}
  for i = 1, #appended, 2 do
    names[#names + 1] = appended[i]
  end
  local old = {}
  for i = 1, #names, 1000 do
    local part = redis.call('HMGET', history, unpack(names, i, math.min(i + 999, #names)))
    for j = 1, #part do
      old[i + j - 1] = part[j]
    end
  end
  local set = {}
  for k, name in ipairs(names) do
    set[#set + 1] = name
    set[#set + 1] = (old[k] or '') .. appended[2 * k]
  end
  hcall('HSET', history, set, 2000)
end
redis.call('HSET', user, 'id', ARGV[5], 'version', ARGV[2], 'next_id', ARGV[4], 'token', ARGV[3])
return {1, ARGV[2]}
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

#[cfg(test)]
mod constants {
    #[test]
    fn the_search_scores_with_the_core_constants() {
        use chatmem::recall::{BM25_B, BM25_K1};
        // Lua cannot name a Rust constant: this holds the script to it.
        assert!(super::SEARCH.contains(&format!("local k1, b = {BM25_K1:?}, {BM25_B:?}\n")));
    }
}
