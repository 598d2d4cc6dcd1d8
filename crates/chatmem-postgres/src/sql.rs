//! The SQL texts, with the schema's tables filled in once when the store is built.
//!
//! Every store operation is exactly one of these statements: one round trip each. Each is
//! prepared once per pooled connection (a turn's statements and the facts statements when
//! the connection opens, the others at their first use) and then sent as Bind/Execute/Sync, so the server does not
//! parse and plan it again on every call. Only a commit that got no answer is sent again, on a
//! connection of its own, with `query_typed` (see `PostgresStore::commit`).

use deadpool_postgres::tokio_postgres::types::Type;

/// A conversation is live while it has no expiry or its expiry is still ahead.
macro_rules! live {
    ($alias:literal) => {
        concat!("(", $alias, ".expires_at IS NULL OR ", $alias, ".expires_at > now())")
    };
}

/// The parts of a statement that delete the index of the conversations the CTE `d` deleted
/// (its column `index_key`): their postings and removal counts, found by their keys (one index scan
/// each, whatever the planner guesses of `d`).
macro_rules! drop_index {
    () => {
        "dp AS (
    DELETE FROM {postings} AS p WHERE p.index_key = ANY (ARRAY(SELECT index_key FROM d))
),
dr AS (
    DELETE FROM {removed} AS r WHERE r.index_key = ANY (ARRAY(SELECT index_key FROM d))
)"
    };
}

/// What a term adds to a message's BM25 score, in float8 and in the order of operations of
/// `chatmem::recall::bm25`, so that both compute the very same double: `idf · tf · (k1 + 1) /
/// (tf + k1 · (1 − b + b · len / avg))`, `avg` the column `c.avg`.
macro_rules! weight {
    ($idf:literal, $tf:literal, $len:literal) => {
        concat!(
            "(",
            $idf,
            " * ",
            $tf,
            "::float8 * (1.2::float8 + 1.0::float8) / (",
            $tf,
            "::float8 + 1.2::float8 * ((1.0::float8 - 0.5::float8) + 0.5::float8 * ",
            $len,
            "::float8 / c.avg)))"
        )
    };
}

/// A non-negative float8 rounded to 6 decimals as `chatmem::recall::rounded` rounds it:
/// `(x · 10⁶).round() / 10⁶`, half away from zero (`round(float8)` would round half to even).
macro_rules! round6 {
    ($x:literal) => {
        concat!(
            "((trunc(",
            $x,
            " * 1000000.0::float8) + CASE WHEN ",
            $x,
            " * 1000000.0::float8 - trunc(",
            $x,
            " * 1000000.0::float8) >= 0.5::float8 THEN 1.0::float8 ELSE 0.0::float8 END) / 1000000.0::float8)"
        )
    };
}

/// The `ins` part of the plain commit statement: the appended messages (`$10`, `$11`,
/// `$12`, `$15`) inserted only if `applied` returned a row, leaving out those below the
/// delete bound `$8` (the statement's DELETE cannot see rows it inserts).
macro_rules! insert_appended_plain {
    () => {
        "ins AS (
    INSERT INTO {msgs} (conversation_id, seq, tokens, json, counted_by)
    SELECT $1, m.seq, m.tokens, m.json, m.counted_by
    FROM applied,
         unnest($10::bigint[], $11::bigint[], $12::text[], $15::text[]) AS m(seq, tokens, json, counted_by)
    WHERE $8 IS NULL OR m.seq >= $8"
    };
}

/// The first part of both indexing commit statements: their parameters as one row `k`, read
/// by the rest of the statement. Behind a materialized CTE the planner cannot see their
/// values, so a plan made for some values costs what the generic plan costs and PostgreSQL
/// settles on the generic plan instead of planning the long statement at every commit.
///
/// `$1` id, `$2` expected version, `$3..$5` system seq/tokens/json (json NULL: keep),
/// `$6` window start, `$7` next seq, `$8` delete messages below this seq
/// ([`Commit::delete_below`](chatmem::store::Commit::delete_below); NULL: delete nothing), `$9`
/// TTL in µs (NULL: no expiry), `$10..$12` seqs, tokens, JSON texts of the appended
/// messages, `$13` the commit's token (its u64 bits as a bigint), `$14` the system
/// message's counter name, `$15` the appended messages' counter names (NULL elements: not
/// recorded), `$16` the summary's JSON (NULL: keep the stored one), `$17` the appended
/// messages' index lengths (NULL elements, or none at all: not indexed), `$18..$21` the
/// postings: term, seq, count, message length.
macro_rules! commit_params {
    () => {
        "k AS MATERIALIZED (
    SELECT $1::text AS id, $2::bigint AS expected, $3::bigint AS system_seq, $4::bigint AS system_tokens,
           $5::text AS system_json, $6::bigint AS window_start, $7::bigint AS next_seq, $8::bigint AS below,
           $9::bigint AS ttl, $10::bigint[] AS seqs, $11::bigint[] AS tokens, $12::text[] AS jsons,
           $13::bigint AS token, $14::text AS system_counted_by, $15::text[] AS counted_by, $16::text AS summary,
           $17::bigint[] AS lens, $18::text[] AS terms, $19::bigint[] AS term_seqs, $20::bigint[] AS tfs,
           $21::bigint[] AS term_lens
),
added AS MATERIALIZED (
    SELECT count(*) AS docs, COALESCE(sum(d.len), 0) AS len
    FROM k CROSS JOIN LATERAL unnest(k.seqs, k.lens) AS d(seq, len)
    WHERE d.len IS NOT NULL AND (k.below IS NULL OR d.seq >= k.below)
),
np AS MATERIALIZED (
    SELECT p.term, p.seq, p.tf, p.len
    FROM k CROSS JOIN LATERAL unnest(k.terms, k.term_seqs, k.tfs, k.term_lens) AS p(term, seq, tf, len)
    WHERE k.below IS NULL OR p.seq >= k.below
)"
    };
}

/// The `ins` part of both indexing commit statements: the appended messages inserted only if
/// `applied` returned a row, leaving out those below the delete bound (the statement's
/// DELETE cannot see rows it inserts). An indexed message is stamped with the statement's
/// `now()`, the conversation's `updated_at`.
macro_rules! insert_appended {
    () => {
        "ins AS (
    INSERT INTO {msgs} (conversation_id, seq, tokens, json, counted_by, index_len, indexed_at)
    SELECT k.id, m.seq, m.tokens, m.json, m.counted_by, m.len, CASE WHEN m.len IS NULL THEN NULL ELSE now() END
    FROM applied CROSS JOIN k
    CROSS JOIN LATERAL unnest(k.seqs, k.tokens, k.jsons, k.counted_by, k.lens) AS m(seq, tokens, json, counted_by, len)
    WHERE k.below IS NULL OR m.seq >= k.below"
    };
}

/// The `pins` part of both indexing commit statements: the commit's postings (`np`) under the
/// index key `applied` returned (none unless it returned a row), each term's ranks counted on
/// from its rank so far (`prev`).
macro_rules! insert_postings {
    () => {
        "pins AS (
    INSERT INTO {postings} (index_key, term, seq, tf, len, rank)
    SELECT a.index_key, p.term, p.seq, p.tf, p.len,
           v.rank + row_number() OVER (PARTITION BY p.term ORDER BY p.seq)
    FROM applied AS a CROSS JOIN np AS p JOIN prev AS v ON v.term = p.term
)"
    };
}

/// The conversation row (kind 0) followed by its messages from `window_start` on (kind 1),
/// read from one snapshot. No row at all: unknown or expired. Columns: kind, version,
/// window start, next seq (those three only in the conversation row), then seq, tokens,
/// json, counted_by of the system message or of the message, then the summary's JSON (only
/// in the conversation row; NULL there: no summary).
///
/// `$1` id.
const LOAD: &str = concat!(
    "WITH c AS (
    SELECT version, window_start, next_seq, system_seq, system_tokens, system_json, system_counted_by, summary
    FROM {conv} AS c
    WHERE c.id = $1 AND ",
    live!("c"),
    "
)
SELECT 0 AS kind, c.version, c.window_start, c.next_seq,
       c.system_seq AS seq, c.system_tokens AS tokens, c.system_json AS json,
       c.system_counted_by AS counted_by, c.summary
FROM c
UNION ALL
SELECT 1, NULL, NULL, NULL, m.seq, m.tokens, m.json, m.counted_by, NULL
FROM c JOIN {msgs} AS m ON m.conversation_id = $1 AND m.seq >= c.window_start
ORDER BY kind, seq"
);

/// The last SELECT of both commit statements, always one row: the new version, or NULL
/// when the version check failed (nothing was written); in that case only, also the live
/// conversation's current version and commit token (both NULL without a live row), so that
/// the caller can tell a resent commit that already applied (version one past the expected
/// one, its own token) from a conflict without asking again.
///
/// They are read from the statement's snapshot, which a commit that landed while this
/// statement waited for the row is not in: then the version read is still the expected one
/// (or no row, for a create). The caller knows that case and, when it resends a commit,
/// asks once more with a new statement.
///
/// The NOT EXISTS filter inside the subquery becomes a one-time filter: a commit that
/// applied never reads the row again.
const COMMIT_RESULT: &str = concat!(
    "
SELECT (SELECT version FROM applied) AS new_version,
       cur.version AS current_version, cur.commit_token AS current_token
FROM (SELECT 1) AS one
LEFT JOIN (
    SELECT c.version, c.commit_token
    FROM {conv} AS c
    WHERE NOT EXISTS (SELECT 1 FROM applied) AND c.id = $1 AND ",
    live!("c"),
    "
) AS cur ON true"
);

/// Commit to an existing live conversation, when the commit leaves the index as it is (no
/// index entries, nothing deleted): the statement as it was before the index.
///
/// The version check is the only check: a `Commit` cannot be built invalid, so the window
/// start and next sequence are stored as given. The UPDATE matches only while
/// `version = $2`; under READ COMMITTED a concurrent commit that got there first makes it
/// re-check the new row version and match nothing. The INSERT and DELETE read from its
/// RETURNING, so they do nothing unless it matched (all parts of a statement share one
/// snapshot, so they could not see its effect otherwise).
///
/// `updated_at` is the statement's `now()`, the instant the expiry counts from too (the
/// transaction's start, which for this single statement is when it began: a later commit to
/// the same conversation loaded after this one finished, so its time is later).
///
/// Parameters `$1..$16` as in `commit_params!`.
const COMMIT_UPDATE_PLAIN: &str = concat!(
    "WITH applied AS (
    UPDATE {conv} AS c SET
        version = c.version + 1,
        system_seq = CASE WHEN $5::text IS NULL THEN c.system_seq ELSE $3 END,
        system_tokens = CASE WHEN $5::text IS NULL THEN c.system_tokens ELSE $4 END,
        system_json = COALESCE($5, c.system_json),
        system_counted_by = CASE WHEN $5::text IS NULL THEN c.system_counted_by ELSE $14 END,
        window_start = $6,
        next_seq = $7,
        expires_at = now() + $9 * INTERVAL '1 microsecond',
        commit_token = $13,
        summary = COALESCE($16, c.summary),
        updated_at = now()
    WHERE c.id = $1 AND c.version = $2 AND ",
    live!("c"),
    "
    RETURNING c.version
),
",
    insert_appended_plain!(),
    "
),
del AS (
    DELETE FROM {msgs} AS m USING applied
    WHERE $8 IS NOT NULL AND m.conversation_id = $1 AND m.seq < $8
)",
    "{result}"
);

/// Commit to an existing live conversation, indexing its messages or deleting some: as
/// [`COMMIT_UPDATE_PLAIN`], and the index kept with the messages.
///
/// When the version check passes, the snapshot holds the conversation as it is (every
/// writer of its rows changes its row, and a write after the snapshot fails the check), so
/// what the statement reads of the index is current: the indexed messages it deletes
/// (`gone`), and each new term's rank so far (`prev`: its newest posting's, or, when it has
/// none left, how many were removed; one index entry read per term, nothing written but the
/// postings). The conversation row's totals (`indexed_docs`, `indexed_len`) move by what the
/// commit adds and deletes. Postings below the delete bound are looked for only when an
/// indexed message goes (a memory that recalls keeps its history; only a writer that drops
/// evicted messages from an indexed conversation pays that scan of the conversation's
/// postings), and counted as removed per term.
///
/// Parameters as in `commit_params!`.
const COMMIT_UPDATE: &str = concat!(
    "WITH ",
    commit_params!(),
    ",
gone AS MATERIALIZED (
    SELECT count(m.index_len) AS docs, COALESCE(sum(m.index_len), 0) AS len
    FROM k JOIN {msgs} AS m ON m.conversation_id = k.id AND m.seq < k.below
),
applied AS (
    UPDATE {conv} AS c SET
        version = c.version + 1,
        system_seq = CASE WHEN k.system_json IS NULL THEN c.system_seq ELSE k.system_seq END,
        system_tokens = CASE WHEN k.system_json IS NULL THEN c.system_tokens ELSE k.system_tokens END,
        system_json = COALESCE(k.system_json, c.system_json),
        system_counted_by = CASE WHEN k.system_json IS NULL THEN c.system_counted_by ELSE k.system_counted_by END,
        window_start = k.window_start,
        next_seq = k.next_seq,
        expires_at = now() + k.ttl * INTERVAL '1 microsecond',
        commit_token = k.token,
        summary = COALESCE(k.summary, c.summary),
        updated_at = now(),
        index_key = COALESCE(c.index_key, nextval({keys})),
        indexed_docs = c.indexed_docs + added.docs - gone.docs,
        indexed_len = c.indexed_len + added.len - gone.len
    FROM k, added, gone
    WHERE c.id = k.id AND c.version = k.expected AND ",
    live!("c"),
    "
    RETURNING c.version, c.index_key
),
",
    insert_appended!(),
    "
),
del AS (
    DELETE FROM {msgs} AS m USING applied, k
    WHERE m.conversation_id = k.id AND m.seq < k.below
),
prev AS MATERIALIZED (
    SELECT d.term, COALESCE(
        (SELECT p.rank FROM {postings} AS p
         WHERE p.index_key = a.index_key AND p.term = d.term ORDER BY p.seq DESC LIMIT 1),
        (SELECT r.removed FROM {removed} AS r WHERE r.index_key = a.index_key AND r.term = d.term),
        0) AS rank
    FROM applied AS a CROSS JOIN (SELECT DISTINCT np.term FROM np) AS d
),
",
    insert_postings!(),
    ",
pdel AS (
    DELETE FROM {postings} AS p USING applied AS a, k, gone
    WHERE gone.docs > 0 AND p.index_key = a.index_key AND p.seq < k.below
    RETURNING p.term
),
rem AS (
    INSERT INTO {removed} AS r (index_key, term, removed)
    SELECT a.index_key, g.term, count(*) FROM applied AS a CROSS JOIN pdel AS g GROUP BY a.index_key, g.term
    ON CONFLICT (index_key, term) DO UPDATE SET removed = r.removed + EXCLUDED.removed
)",
    "{result}"
);

/// Commit with expected version 0: create the conversation, or start an expired one
/// afresh. Of concurrent creators only one INSERT wins; the others' ON CONFLICT finds a
/// live row (the WHERE is re-checked on the newest row version) and returns nothing.
///
/// An expired row is reused in place, so its old messages go in the same statement: those
/// with sequences this commit writes are overwritten (ON CONFLICT DO UPDATE), the rest
/// deleted; the two sets are disjoint, so neither part depends on the other's order. Its
/// old summary goes too: it takes the commit's, or none. It takes a new index key, so its
/// old index (under the key `old` read from the snapshot) is deleted apart from the new one,
/// which starts from nothing (every term's rank from 0).
///
/// Parameters as in `commit_params!`.
const COMMIT_CREATE: &str = concat!(
    "WITH ",
    commit_params!(),
    ",
old AS MATERIALIZED (
    SELECT c.index_key FROM k JOIN {conv} AS c ON c.id = k.id
),
applied AS (
    INSERT INTO {conv} AS c
        (id, version, system_seq, system_tokens, system_json, window_start, next_seq, expires_at, commit_token,
         system_counted_by, summary, updated_at, index_key, indexed_docs, indexed_len)
    SELECT k.id, 1, k.system_seq, k.system_tokens, k.system_json, k.window_start, k.next_seq,
           now() + k.ttl * INTERVAL '1 microsecond', k.token, k.system_counted_by, k.summary, now(),
           nextval({keys}), added.docs, added.len
    FROM k, added
    WHERE k.expected = 0
    ON CONFLICT (id) DO UPDATE SET
        version = 1,
        system_seq = EXCLUDED.system_seq,
        system_tokens = EXCLUDED.system_tokens,
        system_json = EXCLUDED.system_json,
        window_start = EXCLUDED.window_start,
        next_seq = EXCLUDED.next_seq,
        expires_at = EXCLUDED.expires_at,
        commit_token = EXCLUDED.commit_token,
        system_counted_by = EXCLUDED.system_counted_by,
        summary = EXCLUDED.summary,
        updated_at = EXCLUDED.updated_at,
        index_key = EXCLUDED.index_key,
        indexed_docs = EXCLUDED.indexed_docs,
        indexed_len = EXCLUDED.indexed_len
    WHERE c.expires_at IS NOT NULL AND c.expires_at <= now()
    RETURNING c.version, c.index_key
),
stale AS (
    DELETE FROM {msgs} AS m USING applied, k
    WHERE m.conversation_id = k.id
      AND NOT (m.seq = ANY(k.seqs) AND (k.below IS NULL OR m.seq >= k.below))
),
",
    insert_appended!(),
    "
    ON CONFLICT (conversation_id, seq) DO UPDATE SET
        tokens = EXCLUDED.tokens, json = EXCLUDED.json, counted_by = EXCLUDED.counted_by,
        index_len = EXCLUDED.index_len, indexed_at = EXCLUDED.indexed_at
),
stale_postings AS (
    DELETE FROM {postings} AS p USING applied, old WHERE p.index_key = old.index_key
),
stale_removed AS (
    DELETE FROM {removed} AS r USING applied, old WHERE r.index_key = old.index_key
),
prev AS (
    SELECT DISTINCT np.term, 0::bigint AS rank FROM np
),
",
    insert_postings!(),
    "{result}"
);

/// `$1` id, `$2` after, `$3` limit.
const HISTORY: &str = concat!(
    "SELECT m.seq, m.tokens, m.json, m.counted_by
FROM {conv} AS c JOIN {msgs} AS m ON m.conversation_id = c.id
WHERE c.id = $1 AND ",
    live!("c"),
    " AND m.seq > $2
ORDER BY m.seq
LIMIT $3"
);

/// Messages go with the row (ON DELETE CASCADE), its index by its key. An expired row is
/// deleted too but does not count as existing. `$1` id.
const CLEAR: &str = concat!(
    "WITH d AS (DELETE FROM {conv} AS c WHERE c.id = $1 RETURNING ",
    live!("c"),
    " AS live, c.index_key),
",
    drop_index!(),
    "
SELECT COALESCE(bool_or(live), false) FROM d"
);

/// No id is empty, so `''` stands for "from the start". `$1` after (NULL: start), `$2`
/// limit (one more than asked, to know whether more remain).
const LIST: &str = concat!(
    "SELECT c.id FROM {conv} AS c
WHERE c.id > COALESCE($1, '') AND ",
    live!("c"),
    "
ORDER BY c.id
LIMIT $2"
);

/// Live conversations with an id from `$1` (the prefix) up to `$2` (exclusive; NULL: no
/// upper bound), after the cursor `($3, $4)` in the order newest first (NULL: from the
/// start), at most `$5`. Ids compare byte-wise (`COLLATE "C"`), so the range is exactly the
/// ids starting with the prefix, `%` and `_` included as themselves. The cursor is one row
/// comparison, which the index `(updated_at DESC, id DESC)` starts its walk from; the range
/// on `id` lets the planner choose the primary key instead for a small tenant.
const RECENT: &str = concat!(
    "SELECT c.id, c.updated_at, c.expires_at FROM {conv} AS c
WHERE c.id >= $1 AND ($2::text IS NULL OR c.id < $2)
  AND (c.updated_at, c.id) < (COALESCE($3, 'infinity'::timestamptz), COALESCE($4, ''))
  AND ",
    live!("c"),
    "
ORDER BY c.updated_at DESC, c.id DESC
LIMIT $5"
);

/// Expired conversations, their messages (ON DELETE CASCADE) and their index.
const PURGE: &str = concat!(
    "WITH d AS (DELETE FROM {conv} WHERE expires_at <= now() RETURNING index_key),
",
    drop_index!(),
    "
SELECT count(*) FROM d"
);

/// A lexical search of one live conversation (`Store::search`), answered as
/// `chatmem::recall::MemoryIndex::search` answers it.
///
/// `c` is the conversation row (none: unknown or expired, and the statement returns no row
/// at all) with its totals, `q` the query terms in their order (`i` from 1) with their
/// document frequencies (the newest posting's rank less the term's removed postings) and
/// their idf. Each term's newest `$5` postings below `$3` are read by a backward walk of the
/// primary key that the LIMIT stops (`MAX_POSTINGS_PER_TERM` of them: a common word costs the
/// same at any history length), sorted by message and term so that each message's score is
/// summed in the query's order, as `bm25` sums it, and the best `$4` kept. The parameters
/// come through the one-row CTE `k`, as in the indexing commits: the planner never sees a
/// value, so the first plans of a connection cost no more to make than the generic one it
/// keeps.
///
/// Rows: kind 0 (`a` docs, `b` total length), kind 1 per term (`a` its position, `b` its df),
/// kind 2 per hit (`a` seq, `b` length, the message's tokens, json, counted_by and index
/// time, the positions and counts of the query terms it holds, its rounded score).
///
/// `$1` id, `$2` terms (NULL elements match nothing), `$3` before, `$4` limit, `$5` how many
/// of a term's postings are read.
const SEARCH: &str = concat!(
    "WITH k AS MATERIALIZED (
    SELECT $1::text AS id, $2::text[] AS terms, $3::bigint AS before, $4::bigint AS lim, $5::bigint AS per_term
),
c AS MATERIALIZED (
    SELECT c.index_key AS k, c.indexed_docs AS docs, c.indexed_len AS total_len,
           c.indexed_docs::float8 AS n,
           GREATEST(c.indexed_len::float8 / GREATEST(c.indexed_docs, 1)::float8, 1.0::float8) AS avg,
           k.before, k.lim, k.per_term
    FROM k JOIN {conv} AS c ON c.id = k.id
    WHERE ",
    live!("c"),
    "
),
q AS MATERIALIZED (
    SELECT t.i, t.term, t.df,
           ln(1.0::float8 + (c.n - t.df::float8 + 0.5::float8) / (t.df::float8 + 0.5::float8)) AS idf
    FROM c
    CROSS JOIN LATERAL (
        SELECT t.i, t.term, COALESCE(
            (SELECT p.rank FROM {postings} AS p
             WHERE p.index_key = c.k AND p.term = t.term ORDER BY p.seq DESC LIMIT 1)
            - COALESCE((SELECT r.removed FROM {removed} AS r WHERE r.index_key = c.k AND r.term = t.term), 0),
            0) AS df
        FROM k CROSS JOIN LATERAL unnest(k.terms) WITH ORDINALITY AS t(term, i)
    ) AS t
),
hits AS (
    SELECT s.seq, s.at, s.tf, ",
    round6!("s.score"),
    " AS rounded
    FROM (
        SELECT x.seq, sum(x.w) AS score, array_agg(x.i) AS at, array_agg(x.tf) AS tf
        FROM (
            SELECT q.i, p.seq, p.tf, ",
    weight!("q.idf", "p.tf", "p.len"),
    " AS w
            FROM c CROSS JOIN q CROSS JOIN LATERAL (
                SELECT p.seq, p.tf, p.len FROM {postings} AS p
                WHERE p.index_key = c.k AND p.term = q.term AND p.seq < c.before
                ORDER BY p.seq DESC
                LIMIT c.per_term
            ) AS p
            WHERE q.df > 0 AND c.lim > 0
            ORDER BY p.seq, q.i
        ) AS x
        GROUP BY x.seq
    ) AS s
    ORDER BY rounded DESC, s.seq DESC
    LIMIT (SELECT c.lim FROM c)
)
SELECT 0 AS kind, c.docs AS a, c.total_len AS b, NULL::bigint AS tokens, NULL::text AS json,
       NULL::text AS counted_by, NULL::timestamptz AS at, NULL::bigint[] AS term_at,
       NULL::bigint[] AS tf, NULL::float8 AS score
FROM c
UNION ALL
SELECT 1, q.i, q.df, NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM q
UNION ALL
SELECT 2, h.seq, m.index_len, m.tokens, m.json, m.counted_by, m.indexed_at, h.at, h.tf, h.rounded
FROM hits AS h CROSS JOIN k JOIN {msgs} AS m ON m.conversation_id = k.id AND m.seq = h.seq"
);

/// The parameter types of `commit_create` and `commit_update`, `$1` … `$21` as
/// `PostgresStore::commit` binds them; `commit_update_plain` takes the first 16.
const COMMIT_TYPES: &[Type] = &[
    Type::TEXT,
    Type::INT8,
    Type::INT8,
    Type::INT8,
    Type::TEXT,
    Type::INT8,
    Type::INT8,
    Type::INT8,
    Type::INT8,
    Type::INT8_ARRAY,
    Type::INT8_ARRAY,
    Type::TEXT_ARRAY,
    Type::INT8,
    Type::TEXT,
    Type::TEXT_ARRAY,
    Type::TEXT,
    Type::INT8_ARRAY,
    Type::TEXT_ARRAY,
    Type::INT8_ARRAY,
    Type::INT8_ARRAY,
    Type::INT8_ARRAY,
];

/// A vector search's candidates: the live conversation `$1`'s messages before `$2` with a
/// vector of model `$3` and `$4` bytes, with the vector and what a hit needs; ranked by the
/// caller, by the core's rule (an exact scan).
const VECTOR_SEARCH: &str = concat!(
    "SELECT m.seq, m.tokens, m.json, m.counted_by, m.indexed_at, m.vector
FROM {conv} AS c JOIN {msgs} AS m ON m.conversation_id = c.id
WHERE c.id = $1 AND ",
    live!("c"),
    " AND m.seq < $2 AND m.vector_model = $3 AND octet_length(m.vector) = $4"
);

/// The indexed messages of conversation `$1` at the seqs `$2`, to check before their vectors
/// are written.
const VECTOR_TARGETS: &str = concat!(
    "SELECT m.seq, m.tokens, m.json, m.counted_by
FROM {conv} AS c JOIN {msgs} AS m ON m.conversation_id = c.id
WHERE c.id = $1 AND ",
    live!("c"),
    " AND m.seq = ANY($2) AND m.indexed_at IS NOT NULL"
);

/// Writes vectors `$5` of model `$4` on conversation `$1`'s messages at seqs `$2`, each only
/// if its row still holds the JSON `$3` that was checked: a message cleared and written again
/// in between keeps no vector of the old one.
const VECTOR_PUT: &str = "UPDATE {msgs} AS m SET vector_model = $4, vector = v.vector
FROM unnest($2::BIGINT[], $3::TEXT[], $5::BYTEA[]) AS v(seq, json, vector)
WHERE m.conversation_id = $1 AND m.seq = v.seq AND m.json = v.json AND m.indexed_at IS NOT NULL
RETURNING m.seq";

/// Up to `$5` indexed messages of the live conversation `$1` after `$2` without a vector of
/// model `$3` and `$4` bytes, oldest first.
const UNEMBEDDED: &str = concat!(
    "SELECT m.seq, m.tokens, m.json, m.counted_by, m.indexed_at
FROM {conv} AS c JOIN {msgs} AS m ON m.conversation_id = c.id
WHERE c.id = $1 AND ",
    live!("c"),
    " AND m.seq > $2 AND m.indexed_at IS NOT NULL
  AND (m.vector_model IS DISTINCT FROM $3 OR octet_length(m.vector) <> $4)
ORDER BY m.seq LIMIT $5"
);

/// A user's facts, read from one snapshot: the user row (kind 0: `a` the version, `b` the
/// next id) and a row per current fact (kind 1: `a` its id, `json` the fact). No row at all:
/// an unknown or forgotten user.
///
/// `$1` user id.
const FACTS_LOAD: &str = "SELECT 0 AS kind, u.version AS a, u.next_id AS b, NULL::text AS json
FROM {fact_users} AS u WHERE u.user_id = $1
UNION ALL
SELECT 1, f.fact_id, NULL, f.json FROM {facts} AS f WHERE f.user_id = $1";

/// Applies a facts commit if the user is still at the expected version, in one statement:
/// the user row's version check, the set replaced, the dropped facts' history deleted, the
/// new entries appended, the version bumped and the token kept.
///
/// The version check is on the user row, which every facts commit changes (and
/// `FACTS_FORGET` deletes): expecting 0, the INSERT creates it, and of concurrent creators
/// only one wins (the others' ON CONFLICT waits for it and does nothing); expecting more,
/// the UPDATE matches only while `version = expected`, and under READ COMMITTED a commit
/// that got there first makes it re-check the new row version and match nothing. Every other
/// part joins `applied`, so it writes nothing unless the check passed, and then what it reads
/// of the facts is current (a change since the snapshot would have changed the user row).
///
/// The set is replaced by deleting the facts not in it and upserting the others, a row
/// written only when its JSON changed. The history DELETE cannot see the rows the INSERT
/// adds (one snapshot), so the dropped facts' history goes before the new entries land, each
/// placed by the new version and its place in the commit (from 1).
///
/// The last SELECT is as `COMMIT_RESULT`'s: the new version, or NULL when the check failed
/// and then the user's current version and token (NULL: no user row), read from the
/// statement's snapshot.
///
/// `$1` user id, `$2` expected version, `$3` next id, `$4` token (its u64 bits), `$5`/`$6`
/// the set's fact ids and JSON, `$7`/`$8` the history entries' fact ids and JSON in order,
/// `$9` the facts whose history goes.
const FACTS_COMMIT: &str = "WITH k AS MATERIALIZED (
    SELECT $1::text AS user_id, $2::bigint AS expected, $3::bigint AS next_id, $4::bigint AS token,
           $5::bigint[] AS ids, $6::text[] AS facts, $7::bigint[] AS entry_facts, $8::text[] AS entries,
           $9::bigint[] AS dropped
),
created AS (
    INSERT INTO {fact_users} AS u (user_id, version, next_id, commit_token)
    SELECT k.user_id, 1, k.next_id, k.token FROM k WHERE k.expected = 0
    ON CONFLICT (user_id) DO NOTHING
    RETURNING u.version
),
updated AS (
    UPDATE {fact_users} AS u SET version = u.version + 1, next_id = k.next_id, commit_token = k.token
    FROM k
    WHERE u.user_id = k.user_id AND u.version = k.expected AND k.expected > 0
    RETURNING u.version
),
applied AS MATERIALIZED (
    SELECT version FROM created UNION ALL SELECT version FROM updated
),
gone AS (
    DELETE FROM {facts} AS f USING applied, k
    WHERE f.user_id = k.user_id AND f.fact_id <> ALL (k.ids)
),
put AS (
    INSERT INTO {facts} AS f (user_id, fact_id, json)
    SELECT k.user_id, s.id, s.json
    FROM applied CROSS JOIN k CROSS JOIN LATERAL unnest(k.ids, k.facts) AS s(id, json)
    ON CONFLICT (user_id, fact_id) DO UPDATE SET json = EXCLUDED.json
    WHERE f.json IS DISTINCT FROM EXCLUDED.json
),
forgot AS (
    DELETE FROM {fact_history} AS h USING applied, k
    WHERE h.user_id = k.user_id AND h.fact_id = ANY (k.dropped)
),
logged AS (
    INSERT INTO {fact_history} (user_id, fact_id, version, ord, json)
    SELECT k.user_id, e.fact_id, a.version, e.ord, e.json
    FROM applied AS a CROSS JOIN k
    CROSS JOIN LATERAL unnest(k.entry_facts, k.entries) WITH ORDINALITY AS e(fact_id, json, ord)
)
SELECT (SELECT version FROM applied) AS new_version,
       cur.version AS current_version, cur.commit_token AS current_token
FROM (SELECT 1) AS one
LEFT JOIN (
    SELECT u.version, u.commit_token
    FROM {fact_users} AS u
    WHERE NOT EXISTS (SELECT 1 FROM applied) AND u.user_id = $1
) AS cur ON true";

/// The parameter types of `facts_commit`, `$1` … `$9`.
const FACTS_COMMIT_TYPES: &[Type] = &[
    Type::TEXT,
    Type::INT8,
    Type::INT8,
    Type::INT8,
    Type::INT8_ARRAY,
    Type::TEXT_ARRAY,
    Type::INT8_ARRAY,
    Type::TEXT_ARRAY,
    Type::INT8_ARRAY,
];

/// One fact's history entries in the order committed. `$1` user id, `$2` fact id.
const FACT_HISTORY: &str = "SELECT h.json FROM {fact_history} AS h
WHERE h.user_id = $1 AND h.fact_id = $2
ORDER BY h.version, h.ord";

/// Deletes the user row, the facts and their history with it (ON DELETE CASCADE); whether
/// there was one. `$1` user id.
const FACTS_FORGET: &str = "WITH d AS (DELETE FROM {fact_users} AS u WHERE u.user_id = $1 RETURNING 1)
SELECT EXISTS (SELECT 1 FROM d)";

/// The parameter types of `search`, `$1` … `$5`.
const SEARCH_TYPES: &[Type] = &[Type::TEXT, Type::TEXT_ARRAY, Type::INT8, Type::INT8, Type::INT8];

/// One statement: its text for the schema and the types of its parameters, which it is
/// prepared and sent with (one place, so a call cannot bind other types than were prepared).
#[derive(Debug, Clone)]
pub(crate) struct Statement {
    pub(crate) text: String,
    pub(crate) types: &'static [Type],
}

/// The statements for one schema.
#[derive(Debug, Clone)]
pub(crate) struct Statements {
    pub(crate) load: Statement,
    pub(crate) commit_update_plain: Statement,
    pub(crate) commit_update: Statement,
    pub(crate) commit_create: Statement,
    pub(crate) history: Statement,
    pub(crate) clear: Statement,
    pub(crate) list: Statement,
    pub(crate) recent: Statement,
    pub(crate) purge: Statement,
    pub(crate) search: Statement,
    pub(crate) vector_search: Statement,
    pub(crate) vector_targets: Statement,
    pub(crate) vector_put: Statement,
    pub(crate) unembedded: Statement,
    pub(crate) facts_load: Statement,
    pub(crate) facts_commit: Statement,
    pub(crate) fact_history: Statement,
    pub(crate) facts_forget: Statement,
}

impl Statements {
    /// Prepares every statement on a new connection, all at once (pipelined), so that each
    /// is parsed and planned once per connection rather than on every call, and every
    /// operation stays one round trip. Failures are left for the first use to report (before the schema exists, on the
    /// connection that creates it, nothing can be prepared).
    pub(crate) async fn prepare_all(&self, client: &deadpool_postgres::ClientWrapper) {
        let _ = tokio::join!(
            client.prepare_typed_cached(&self.load.text, self.load.types),
            client.prepare_typed_cached(&self.commit_create.text, self.commit_create.types),
            client.prepare_typed_cached(&self.commit_update_plain.text, self.commit_update_plain.types),
            client.prepare_typed_cached(&self.commit_update.text, self.commit_update.types),
            client.prepare_typed_cached(&self.history.text, self.history.types),
            client.prepare_typed_cached(&self.clear.text, self.clear.types),
            client.prepare_typed_cached(&self.list.text, self.list.types),
            client.prepare_typed_cached(&self.recent.text, self.recent.types),
            client.prepare_typed_cached(&self.purge.text, self.purge.types),
            client.prepare_typed_cached(&self.search.text, self.search.types),
            client.prepare_typed_cached(&self.vector_search.text, self.vector_search.types),
            client.prepare_typed_cached(&self.facts_load.text, self.facts_load.types),
            client.prepare_typed_cached(&self.facts_commit.text, self.facts_commit.types),
            client.prepare_typed_cached(&self.fact_history.text, self.fact_history.types),
            client.prepare_typed_cached(&self.facts_forget.text, self.facts_forget.types),
        );
    }

    /// The statements for the schema named by the already quoted identifier `schema`.
    pub(crate) fn new(schema: &str) -> Self {
        let conv = format!("{schema}.chatmem_conversations");
        let msgs = format!("{schema}.chatmem_messages");
        let postings = format!("{schema}.chatmem_postings");
        let removed = format!("{schema}.chatmem_removed_postings");
        let fact_users = format!("{schema}.chatmem_fact_users");
        let facts = format!("{schema}.chatmem_facts");
        let fact_history = format!("{schema}.chatmem_fact_history");
        // The schema is quoted and holds no `'` (the builder checks), so it fits in a literal.
        let keys = format!("'{schema}.chatmem_index_keys'::regclass");
        let fill = |template: &str, types| Statement {
            text: template
                .replace("{result}", COMMIT_RESULT)
                .replace("{conv}", &conv)
                .replace("{msgs}", &msgs)
                .replace("{postings}", &postings)
                .replace("{removed}", &removed)
                .replace("{fact_users}", &fact_users)
                .replace("{facts}", &facts)
                .replace("{fact_history}", &fact_history)
                .replace("{keys}", &keys),
            types,
        };
        Self {
            load: fill(LOAD, &[Type::TEXT]),
            commit_update_plain: fill(COMMIT_UPDATE_PLAIN, &COMMIT_TYPES[..16]),
            commit_update: fill(COMMIT_UPDATE, COMMIT_TYPES),
            commit_create: fill(COMMIT_CREATE, COMMIT_TYPES),
            history: fill(HISTORY, &[Type::TEXT, Type::INT8, Type::INT8]),
            clear: fill(CLEAR, &[Type::TEXT]),
            list: fill(LIST, &[Type::TEXT, Type::INT8]),
            recent: fill(
                RECENT,
                &[Type::TEXT, Type::TEXT, Type::TIMESTAMPTZ, Type::TEXT, Type::INT8],
            ),
            purge: fill(PURGE, &[]),
            search: fill(SEARCH, SEARCH_TYPES),
            vector_search: fill(VECTOR_SEARCH, &[Type::TEXT, Type::INT8, Type::TEXT, Type::INT4]),
            vector_targets: fill(VECTOR_TARGETS, &[Type::TEXT, Type::INT8_ARRAY]),
            vector_put: fill(
                VECTOR_PUT,
                &[
                    Type::TEXT,
                    Type::INT8_ARRAY,
                    Type::TEXT_ARRAY,
                    Type::TEXT,
                    Type::BYTEA_ARRAY,
                ],
            ),
            unembedded: fill(
                UNEMBEDDED,
                &[Type::TEXT, Type::INT8, Type::TEXT, Type::INT4, Type::INT8],
            ),
            facts_load: fill(FACTS_LOAD, &[Type::TEXT]),
            facts_commit: fill(FACTS_COMMIT, FACTS_COMMIT_TYPES),
            fact_history: fill(FACT_HISTORY, &[Type::TEXT, Type::INT8]),
            facts_forget: fill(FACTS_FORGET, &[Type::TEXT]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_score_is_written_with_the_core_constants() {
        use chatmem::recall::{BM25_B, BM25_K1};
        // SQL literals cannot name a Rust constant: this holds them to it.
        let (k1, b) = (BM25_K1, BM25_B);
        let weight = format!(
            "p.tf::float8 * ({k1:?}::float8 + 1.0::float8) / (p.tf::float8 + {k1:?}::float8 * \
             ((1.0::float8 - {b:?}::float8) + {b:?}::float8 * p.len::float8 / c.avg)))"
        );
        assert!(SEARCH.contains(&weight), "{weight}\n{SEARCH}");
    }

    #[test]
    fn statements_fill_every_placeholder() {
        let s = Statements::new("\"s\"");
        for sql in [
            &s.load,
            &s.commit_update_plain,
            &s.commit_update,
            &s.commit_create,
            &s.history,
            &s.clear,
            &s.list,
            &s.recent,
            &s.purge,
            &s.search,
            &s.vector_search,
            &s.vector_targets,
            &s.unembedded,
        ]
        .map(|s| &s.text)
        {
            assert!(!sql.contains('{'), "{sql}");
            assert!(sql.contains("\"s\".chatmem_conversations"), "{sql}");
        }
        // Vectors are written on the rows `vector_targets` found live.
        assert!(!s.vector_put.text.contains('{') && s.vector_put.text.contains("\"s\".chatmem_messages"));
        // Facts are apart from every conversation.
        for sql in [&s.facts_load, &s.facts_commit, &s.fact_history, &s.facts_forget].map(|s| &s.text) {
            assert!(!sql.contains('{'), "{sql}");
            assert!(sql.contains("\"s\".chatmem_fact"), "{sql}");
            assert!(!sql.contains("chatmem_conversations"), "{sql}");
        }
    }
}
