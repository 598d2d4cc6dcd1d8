//! The SQL texts, with the table prefix filled in once when the store is built.
//!
//! Every store operation is exactly one of these statements, sent as a prepared statement
//! (`COM_STMT_EXECUTE`): one round trip each. The driver prepares each text once per pooled
//! connection, at its first use there, and keeps it (one more round trip then).

/// A conversation is live while it has no expiry or its expiry is still ahead (UTC).
macro_rules! live {
    ($alias:literal) => {
        concat!(
            "(",
            $alias,
            ".expires_at IS NULL OR ",
            $alias,
            ".expires_at > UTC_TIMESTAMP(6))"
        )
    };
}

/// The conversation row (kind 0) followed by its messages from `window_start` on (kind 1),
/// in one statement, so from one consistent read. No row at all: unknown or expired.
/// Columns: kind, version, window start, next seq (only in the conversation row), then seq,
/// tokens, counted_by, json of the system message or of the message, then the summary (only
/// in the conversation row).
///
/// `?` id, `?` the same id.
const LOAD: &str = concat!(
    "SELECT 0 AS kind, c.version, c.window_start, c.next_seq,
       c.system_seq AS seq, c.system_tokens AS tokens, c.system_json AS json,
       c.system_counted_by AS counted_by, c.summary
FROM {conv} AS c
WHERE c.id = ? AND ",
    live!("c"),
    "
UNION ALL
SELECT 1, NULL, NULL, NULL, m.seq, m.tokens, m.json, m.counted_by, NULL
FROM {conv} AS c JOIN {msgs} AS m ON m.conversation_id = c.id AND m.seq >= c.window_start
WHERE c.id = ? AND ",
    live!("c"),
    "
ORDER BY kind, seq"
);

/// The commit procedure (as `migrations/0003_recall.sql` created it): `?` id, expected
/// version, system seq, tokens, json, counted_by, window start, next seq, delete below, TTL in
/// µs, token, summary, the appended messages as one JSON array, their index entries as one
/// JSON array, how many entries and their total length.
const COMMIT: &str = "CALL {p}_commit_v3(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";

/// A batch too large for one parameter is staged first, on the connection that then calls
/// the commit: its temporary table made afresh (two statements, no multi-statement text)…
const STAGE_DROP: &str = "DROP TEMPORARY TABLE IF EXISTS `{p}_staged`";
const STAGE_CREATE: &str = "CREATE TEMPORARY TABLE `{p}_staged` (
    seq        BIGINT NOT NULL PRIMARY KEY,
    tokens     BIGINT NOT NULL,
    counted_by VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    json       LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL
) ENGINE = InnoDB";
/// …then filled one chunk (`?`, a JSON array as the commit procedure takes) per statement.
const STAGE_INSERT: &str = "INSERT INTO `{p}_staged` (seq, tokens, counted_by, json)
SELECT m.seq, m.tokens, m.counted_by, m.json
FROM JSON_TABLE(?, '$[*]' COLUMNS (
    seq BIGINT PATH '$[0]',
    tokens BIGINT PATH '$[1]',
    counted_by VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$[2]',
    json LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$[3]')) AS m";

/// Index entries too large for one parameter are staged the same way, in a table of their
/// own: made afresh, then filled one chunk (`?`, a JSON array as the procedure's index
/// parameter takes) per statement.
const STAGE_INDEX_DROP: &str = "DROP TEMPORARY TABLE IF EXISTS `{p}_staged_index`";
const STAGE_INDEX_CREATE: &str = "CREATE TEMPORARY TABLE `{p}_staged_index` (
    chunk LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL
) ENGINE = InnoDB";
const STAGE_INDEX_INSERT: &str = "INSERT INTO `{p}_staged_index` (chunk) VALUES (?)";

/// `?` id, `?` after, `?` limit.
const HISTORY: &str = concat!(
    "SELECT m.seq, m.tokens, m.json, m.counted_by
FROM {conv} AS c JOIN {msgs} AS m ON m.conversation_id = c.id
WHERE c.id = ? AND ",
    live!("c"),
    " AND m.seq > ?
ORDER BY m.seq
LIMIT ?"
);

/// `?` id: one row, whether a live conversation was deleted.
const CLEAR: &str = "CALL {p}_clear(?)";

/// No id is empty, so `''` stands for "from the start". `?` after, `?` limit (one more
/// than asked, to know whether more remain).
const LIST: &str = concat!(
    "SELECT c.id FROM {conv} AS c
WHERE c.id > ? AND ",
    live!("c"),
    "
ORDER BY c.id
LIMIT ?"
);

/// Live conversations newest first (then by id, descending). The `{p}_recent` index on
/// (updated_at, id, expires_at) gives that order and covers the live check and the prefix;
/// the prefix is a `LIKE` on the `VARBINARY` id (bytes, case counts) with its `%`, `_` and
/// `!` escaped by `!` (see [`like_prefix`]), so the optimizer may instead take the primary
/// key's range for a tenant with few conversations. Times are read as microseconds from the
/// epoch by calendar arithmetic on the UTC `DATETIME`s (no time zone applies); the epoch
/// itself, in rows older than `updated_at`, reads as 0.
///
/// `?` the prefix pattern; `?` a cursor flag (0: from the start), `?` its time in µs, the
/// same time again, `?` its id; `?` the limit (one more than asked).
const RECENT: &str = concat!(
    "SELECT c.id,
       TIMESTAMPDIFF(MICROSECOND, TIMESTAMP '1970-01-01 00:00:00', c.updated_at) AS updated,
       TIMESTAMPDIFF(MICROSECOND, TIMESTAMP '1970-01-01 00:00:00', c.expires_at) AS expires
FROM {conv} AS c
WHERE c.id LIKE ? ESCAPE '!' AND ",
    live!("c"),
    "
  AND (? = 0
       OR c.updated_at < TIMESTAMP '1970-01-01 00:00:00' + INTERVAL ? MICROSECOND
       OR (c.updated_at = TIMESTAMP '1970-01-01 00:00:00' + INTERVAL ? MICROSECOND AND c.id < ?))
ORDER BY c.updated_at DESC, c.id DESC
LIMIT ?"
);

/// The `LIKE` pattern of the ids starting with `prefix`: `%`, `_` and the escape `!` itself
/// matched as they are (`!` rather than `\`, which `NO_BACKSLASH_ESCAPES` would change).
pub(crate) fn like_prefix(prefix: &str) -> String {
    let mut pattern = String::with_capacity(prefix.len() + 1);
    for c in prefix.chars() {
        if matches!(c, '%' | '_' | '!') {
            pattern.push('!');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}

/// A vector search's candidates: the live conversation's indexed messages before `?` with a
/// vector of model `?` and `?` bytes, each with what a hit needs and the vector (column 5),
/// in no order: the caller ranks them by the core's rule, an exact scan (MariaDB 10 and
/// MySQL 8 have no vector type or distance function to do it in SQL).
///
/// `?` id, `?` before, `?` model, `?` the vector's length in bytes.
const VECTOR_SEARCH: &str = concat!(
    "SELECT m.seq, m.tokens, m.json, m.counted_by, i.at_micros, m.vector
FROM {conv} AS c
STRAIGHT_JOIN {msgs} AS m ON m.conversation_id = c.id
STRAIGHT_JOIN {docs} AS i ON i.ckey = c.index_key AND i.seq = m.seq
WHERE c.id = ? AND ",
    live!("c"),
    " AND m.seq < ? AND m.vector_model = ? AND LENGTH(m.vector) = ?"
);

/// The live conversation's indexed messages at the seqs given, to check before their vectors
/// are written, each with the SHA-256 of its JSON (hex, column 4), which [`VECTOR_PUT`]
/// checks again.
///
/// `?` the seqs as a JSON array (distinct), `?` id.
const VECTOR_TARGETS: &str = concat!(
    "SELECT m.seq, m.tokens, m.json, m.counted_by, SHA2(m.json, 256)
FROM {conv} AS c
STRAIGHT_JOIN JSON_TABLE(?, '$[*]' COLUMNS (seq BIGINT PATH '$')) AS s
STRAIGHT_JOIN {docs} AS i ON i.ckey = c.index_key AND i.seq = s.seq
STRAIGHT_JOIN {msgs} AS m ON m.conversation_id = c.id AND m.seq = s.seq
WHERE c.id = ? AND ",
    live!("c")
);

/// Writes the vectors of one JSON array of `[seq, hash, model, vector as hex]` (distinct
/// seqs) on the live conversation's indexed messages, each only if its row still holds the
/// JSON whose SHA-256 [`VECTOR_TARGETS`] read: a message cleared and written again in between
/// keeps no vector of the old one. The affected rows are the rows written (the pool's
/// connections report rows matched, `CLIENT_FOUND_ROWS`, so a vector written again counts).
///
/// `?` the vectors, `?` id.
const VECTOR_PUT: &str = concat!(
    "UPDATE {conv} AS c
STRAIGHT_JOIN JSON_TABLE(?, '$[*]' COLUMNS (
    seq BIGINT PATH '$[0]',
    hash VARCHAR(64) CHARACTER SET ascii PATH '$[1]',
    model VARCHAR(256) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$[2]',
    vector LONGTEXT CHARACTER SET ascii PATH '$[3]')) AS v
STRAIGHT_JOIN {docs} AS i ON i.ckey = c.index_key AND i.seq = v.seq
STRAIGHT_JOIN {msgs} AS m ON m.conversation_id = c.id AND m.seq = v.seq
SET m.vector_model = CAST(v.model AS BINARY), m.vector = UNHEX(v.vector)
WHERE c.id = ? AND ",
    live!("c"),
    " AND CAST(SHA2(m.json, 256) AS BINARY) = CAST(v.hash AS BINARY)"
);

/// Up to `?` indexed messages of the live conversation after `?` without a vector of model
/// `?` and `?` bytes, oldest first, each with its commit's time (column 4).
///
/// `?` id, `?` after, `?` model, `?` bytes, `?` limit.
const UNEMBEDDED: &str = concat!(
    "SELECT m.seq, m.tokens, m.json, m.counted_by, i.at_micros
FROM {conv} AS c
STRAIGHT_JOIN {docs} AS i ON i.ckey = c.index_key
STRAIGHT_JOIN {msgs} AS m ON m.conversation_id = c.id AND m.seq = i.seq
WHERE c.id = ? AND ",
    live!("c"),
    " AND i.seq > ?
  AND (m.vector_model IS NULL OR m.vector_model <> ? OR LENGTH(m.vector) <> ?)
ORDER BY i.seq
LIMIT ?"
);

/// A user's facts, from one consistent read (one statement): the user row (kind 0: `a` the
/// version, `b` the next id) and a row per current fact (kind 1: `a` its id, `json` the
/// fact), in id order. No row at all: an unknown or forgotten user.
///
/// `?` user id, `?` the same id.
const FACTS_LOAD: &str = "SELECT 0 AS kind, u.version AS a, u.next_id AS b, NULL AS json
FROM {fact_users} AS u WHERE u.user_id = ?
UNION ALL
SELECT 1, f.fact_id, NULL, f.json FROM {facts} AS f WHERE f.user_id = ?
ORDER BY kind, a";

/// The facts commit procedure (as `migrations/0005_facts.sql` created it): `?` user id,
/// expected version, next id, token, the set as one JSON array, the history entries as one
/// JSON array, the facts whose history goes as one JSON array. One row: (applied, version).
const FACTS_COMMIT: &str = "CALL {p}_commit_facts(?, ?, ?, ?, ?, ?, ?)";

/// One fact's history entries in the order committed. `?` user id, `?` fact id.
const FACT_HISTORY: &str = "SELECT h.json FROM {fact_history} AS h
WHERE h.user_id = ? AND h.fact_id = ?
ORDER BY h.version, h.ord";

/// Deletes the user row, and with it (ON DELETE CASCADE) the facts and their history; the
/// affected rows are the user rows (0 or 1). `?` user id.
const FACTS_FORGET: &str = "DELETE FROM {fact_users} WHERE user_id = ?";

/// Messages go with their rows (ON DELETE CASCADE); the affected rows are the conversations.
const PURGE: &str = "DELETE FROM {conv} WHERE expires_at <= UTC_TIMESTAMP(6)";

/// The statements for one table prefix.
#[derive(Debug, Clone)]
pub(crate) struct Statements {
    pub(crate) load: String,
    pub(crate) commit: String,
    pub(crate) stage_drop: String,
    pub(crate) stage_create: String,
    pub(crate) stage_insert: String,
    pub(crate) stage_index_drop: String,
    pub(crate) stage_index_create: String,
    pub(crate) stage_index_insert: String,
    pub(crate) history: String,
    pub(crate) clear: String,
    pub(crate) list: String,
    pub(crate) recent: String,
    pub(crate) purge: String,
    /// The slotted searches, for 1, 2, 4, … terms (see [`crate::search`]).
    pub(crate) search: Vec<String>,
    pub(crate) search_any: String,
    pub(crate) vector_search: String,
    pub(crate) vector_targets: String,
    pub(crate) vector_put: String,
    pub(crate) unembedded: String,
    pub(crate) facts_load: String,
    pub(crate) facts_commit: String,
    pub(crate) fact_history: String,
    pub(crate) facts_forget: String,
}

impl Statements {
    /// The statements for tables named `<prefix>_…` (a prefix already checked).
    pub(crate) fn new(prefix: &str) -> Self {
        let fill = |template: &str| fill(template, prefix);
        Self {
            load: fill(LOAD),
            commit: fill(COMMIT),
            stage_drop: fill(STAGE_DROP),
            stage_create: fill(STAGE_CREATE),
            stage_insert: fill(STAGE_INSERT),
            stage_index_drop: fill(STAGE_INDEX_DROP),
            stage_index_create: fill(STAGE_INDEX_CREATE),
            stage_index_insert: fill(STAGE_INDEX_INSERT),
            history: fill(HISTORY),
            clear: fill(CLEAR),
            list: fill(LIST),
            recent: fill(RECENT),
            purge: fill(PURGE),
            search: (0..crate::search::SLOTTED)
                .map(|i| fill(&crate::search::slotted(1 << i)))
                .collect(),
            search_any: fill(&crate::search::any()),
            vector_search: fill(VECTOR_SEARCH),
            vector_targets: fill(VECTOR_TARGETS),
            vector_put: fill(VECTOR_PUT),
            unembedded: fill(UNEMBEDDED),
            facts_load: fill(FACTS_LOAD),
            facts_commit: fill(FACTS_COMMIT),
            fact_history: fill(FACT_HISTORY),
            facts_forget: fill(FACTS_FORGET),
        }
    }
}

/// `template` with its table and procedure names for `prefix`.
pub(crate) fn fill(template: &str, prefix: &str) -> String {
    template
        .replace("{conv}", &format!("`{prefix}_conversations`"))
        .replace("{msgs}", &format!("`{prefix}_messages`"))
        .replace("{docs}", &format!("`{prefix}_index_docs`"))
        .replace("{terms}", &format!("`{prefix}_index_terms`"))
        .replace("{df}", &format!("`{prefix}_index_df`"))
        .replace("{fact_users}", &format!("`{prefix}_fact_users`"))
        .replace("{facts}", &format!("`{prefix}_facts`"))
        .replace("{fact_history}", &format!("`{prefix}_fact_history`"))
        .replace("{p}", prefix)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_match_their_pattern_characters_as_they_are() {
        assert_eq!(like_prefix(""), "%");
        assert_eq!(like_prefix("t/%_!x"), "t/!%!_!!x%");
        assert_eq!(like_prefix("租户/"), "租户/%");
    }

    #[test]
    fn statements_fill_every_placeholder() {
        let s = Statements::new("t1");
        for sql in [
            &s.load,
            &s.commit,
            &s.stage_drop,
            &s.stage_create,
            &s.stage_insert,
            &s.stage_index_drop,
            &s.stage_index_create,
            &s.stage_index_insert,
            &s.history,
            &s.clear,
            &s.list,
            &s.recent,
            &s.purge,
            &s.search_any,
            &s.vector_search,
            &s.vector_targets,
            &s.vector_put,
            &s.unembedded,
            &s.facts_load,
            &s.facts_commit,
            &s.fact_history,
            &s.facts_forget,
        ]
        .into_iter()
        .chain(&s.search)
        {
            assert!(!sql.contains('{'), "{sql}");
            assert!(sql.contains("t1_"), "{sql}");
        }
        // Facts are apart from every conversation.
        for sql in [&s.facts_load, &s.facts_commit, &s.fact_history, &s.facts_forget] {
            assert!(sql.contains("t1_fact") || sql.contains("t1_commit_facts"), "{sql}");
            assert!(!sql.contains("conversations"), "{sql}");
        }
    }
}
