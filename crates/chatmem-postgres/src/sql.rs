//! The SQL texts, with the schema's tables filled in once when the store is built.
//!
//! Every store operation is exactly one of these statements: one round trip each. Each is
//! prepared once per pooled connection (a turn's statements when the connection opens,
//! the others at their first use) and then sent as Bind/Execute/Sync, so the server does not
//! parse and plan it again on every call. Only a commit that got no answer is sent again, on a
//! connection of its own, with `query_typed` (see `PostgresStore::commit`).

use deadpool_postgres::tokio_postgres::types::Type;

/// A conversation is live while it has no expiry or its expiry is still ahead.
macro_rules! live {
    ($alias:literal) => {
        concat!("(", $alias, ".expires_at IS NULL OR ", $alias, ".expires_at > now())")
    };
}

/// The `ins` part of both commit statements: the appended messages (`$10`, `$11`, `$12`,
/// `$15`) inserted only if `applied` returned a row, leaving out those below the delete
/// bound `$8` (the statement's DELETE cannot see rows it inserts). One text, so the two
/// commits cannot store messages differently.
macro_rules! insert_appended {
    () => {
        "ins AS (
    INSERT INTO {msgs} (conversation_id, seq, tokens, json, counted_by)
    SELECT $1, m.seq, m.tokens, m.json, m.counted_by
    FROM applied,
         unnest($10::bigint[], $11::bigint[], $12::text[], $15::text[]) AS m(seq, tokens, json, counted_by)
    WHERE $8 IS NULL OR m.seq >= $8"
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

/// Commit to an existing live conversation.
///
/// The version check is the only check: a `Commit` cannot be built invalid, so the window
/// start and next sequence are stored as given. The UPDATE matches only while
/// `version = $2`; under READ COMMITTED a concurrent commit that got there first makes it
/// re-check the new row version and match nothing. The INSERT and DELETE read from its
/// RETURNING, so they do nothing unless it matched (all parts of a statement share one
/// snapshot, so they could not see its effect otherwise). Appended messages already below
/// the delete bound are not inserted: the DELETE cannot see rows inserted by the same
/// statement.
///
/// `updated_at` is the statement's `now()`, the instant the expiry counts from too (the
/// transaction's start, which for this single statement is when it began: a later commit to
/// the same conversation loaded after this one finished, so its time is later).
///
/// `$1` id, `$2` expected version, `$3..$5` system seq/tokens/json (json NULL: keep),
/// `$6` window start, `$7` next seq, `$8` delete messages below this seq
/// ([`Commit::delete_below`](chatmem::store::Commit::delete_below); NULL: delete nothing), `$9`
/// TTL in µs (NULL: no expiry), `$10..$12` seqs, tokens, JSON texts of the appended
/// messages, `$13` the commit's token (its u64 bits as a bigint), `$14` the system
/// message's counter name, `$15` the appended messages' counter names (NULL elements: not
/// recorded), `$16` the summary's JSON (NULL: keep the stored one).
const COMMIT_UPDATE: &str = concat!(
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
    insert_appended!(),
    "
),
del AS (
    DELETE FROM {msgs} AS m USING applied
    WHERE $8 IS NOT NULL AND m.conversation_id = $1 AND m.seq < $8
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
/// old summary goes too: it takes the commit's, or none.
///
/// Parameters as [`COMMIT_UPDATE`].
const COMMIT_CREATE: &str = concat!(
    "WITH applied AS (
    INSERT INTO {conv} AS c
        (id, version, system_seq, system_tokens, system_json, window_start, next_seq, expires_at, commit_token,
         system_counted_by, summary, updated_at)
    SELECT $1, 1, $3, $4, $5, $6, $7, now() + $9 * INTERVAL '1 microsecond', $13, $14, $16, now()
    WHERE $2 = 0
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
        updated_at = EXCLUDED.updated_at
    WHERE c.expires_at IS NOT NULL AND c.expires_at <= now()
    RETURNING c.version
),
stale AS (
    DELETE FROM {msgs} AS m USING applied
    WHERE m.conversation_id = $1
      AND NOT (m.seq = ANY($10::bigint[]) AND ($8 IS NULL OR m.seq >= $8))
),
",
    insert_appended!(),
    "
    ON CONFLICT (conversation_id, seq) DO UPDATE SET
        tokens = EXCLUDED.tokens, json = EXCLUDED.json, counted_by = EXCLUDED.counted_by
)",
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

/// Messages go with the row (ON DELETE CASCADE). An expired row is deleted too but does
/// not count as existing. `$1` id.
const CLEAR: &str = concat!(
    "WITH d AS (DELETE FROM {conv} AS c WHERE c.id = $1 RETURNING ",
    live!("c"),
    " AS live)
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

const PURGE: &str = "WITH d AS (DELETE FROM {conv} WHERE expires_at <= now() RETURNING 1)
SELECT count(*) FROM d";

/// The parameter types of `commit_create` and `commit_update`, `$1` … `$16` as
/// `PostgresStore::commit` binds them.
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
];

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
    pub(crate) commit_update: Statement,
    pub(crate) commit_create: Statement,
    pub(crate) history: Statement,
    pub(crate) clear: Statement,
    pub(crate) list: Statement,
    pub(crate) recent: Statement,
    pub(crate) purge: Statement,
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
            client.prepare_typed_cached(&self.commit_update.text, self.commit_update.types),
            client.prepare_typed_cached(&self.history.text, self.history.types),
            client.prepare_typed_cached(&self.clear.text, self.clear.types),
            client.prepare_typed_cached(&self.list.text, self.list.types),
            client.prepare_typed_cached(&self.recent.text, self.recent.types),
            client.prepare_typed_cached(&self.purge.text, self.purge.types),
        );
    }

    /// The statements for the schema named by the already quoted identifier `schema`.
    pub(crate) fn new(schema: &str) -> Self {
        let conv = format!("{schema}.chatmem_conversations");
        let msgs = format!("{schema}.chatmem_messages");
        let fill = |template: &str, types| Statement {
            text: template
                .replace("{result}", COMMIT_RESULT)
                .replace("{conv}", &conv)
                .replace("{msgs}", &msgs),
            types,
        };
        Self {
            load: fill(LOAD, &[Type::TEXT]),
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
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_fill_every_placeholder() {
        let s = Statements::new("\"s\"");
        for sql in [
            &s.load,
            &s.commit_update,
            &s.commit_create,
            &s.history,
            &s.clear,
            &s.list,
            &s.recent,
            &s.purge,
        ]
        .map(|s| &s.text)
        {
            assert!(!sql.contains('{'), "{sql}");
            assert!(sql.contains("\"s\".chatmem_conversations"), "{sql}");
        }
    }
}
