-- chatmem schema version 8: users' facts (`Store::load_facts`, `commit_facts`), apart from
-- every conversation: clearing or expiring a conversation leaves its user's facts.
-- Runs with search_path set to the store's schema, inside the migration transaction.
-- Only new tables: nothing existing is touched.

-- One row per user with facts, from their first facts commit until they are forgotten:
-- the version every facts commit bumps (the version check is an UPDATE of this row), the
-- id the next new fact gets, and the token of the last facts commit (its u64 bits), so that
-- a commit sent again after its reply was lost is answered, not applied twice. User ids
-- compare byte-wise (COLLATE "C"), as exact strings.
CREATE TABLE IF NOT EXISTS chatmem_fact_users (
    user_id      TEXT COLLATE "C" PRIMARY KEY,
    version      BIGINT NOT NULL,
    next_id      BIGINT NOT NULL,
    commit_token BIGINT NOT NULL
);

-- The user's current facts, one row each: the fact as serde_json wrote it (`Fact`, its id
-- included, which matches `fact_id`). A commit rewrites only the rows that changed.
CREATE TABLE IF NOT EXISTS chatmem_facts (
    user_id TEXT COLLATE "C" NOT NULL
        REFERENCES chatmem_fact_users (user_id) ON DELETE CASCADE,
    fact_id BIGINT NOT NULL,
    json    TEXT NOT NULL,
    PRIMARY KEY (user_id, fact_id)
);

-- Each fact's history, kept after the fact left the set (superseded or evicted) and
-- deleted with it when it is deleted by hand: one row per entry (`FactChange` as serde_json
-- wrote it), in the order committed, which is (`version`: the commit that wrote it, `ord`:
-- its place in that commit). The primary key is the index a fact's history is read by.
CREATE TABLE IF NOT EXISTS chatmem_fact_history (
    user_id TEXT COLLATE "C" NOT NULL
        REFERENCES chatmem_fact_users (user_id) ON DELETE CASCADE,
    fact_id BIGINT NOT NULL,
    version BIGINT NOT NULL,
    ord     BIGINT NOT NULL,
    json    TEXT NOT NULL,
    PRIMARY KEY (user_id, fact_id, version, ord)
);
