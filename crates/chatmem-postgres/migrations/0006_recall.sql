-- chatmem schema version 6: the lexical index recall searches (`Store::search`), written by
-- the commit statement with the messages it indexes (`Commit::index`).
-- Runs with search_path set to the store's schema, inside the migration transaction.
-- Only new tables and nullable or constant-default columns: a catalog change, no rewrite.

-- Each generation of a conversation gets its own index key: a conversation started afresh
-- after it expired takes a new one, so its old index can never mix with the new one. NULL on
-- rows written before this version until their next commit.
CREATE SEQUENCE IF NOT EXISTS chatmem_index_keys AS BIGINT;

-- The statistics BM25 needs over the conversation's indexed messages, kept by every commit
-- so that a search never counts them.
ALTER TABLE chatmem_conversations
    ADD COLUMN IF NOT EXISTS index_key BIGINT,
    ADD COLUMN IF NOT EXISTS indexed_docs BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS indexed_len BIGINT NOT NULL DEFAULT 0;

-- A message's length in terms and when the commit that indexed it landed (the commit's
-- now(), as `updated_at`); both NULL: not indexed (every message written before this version).
ALTER TABLE chatmem_messages
    ADD COLUMN IF NOT EXISTS index_len BIGINT,
    ADD COLUMN IF NOT EXISTS indexed_at TIMESTAMPTZ;

-- One row per (indexed message, distinct term): the term's count in the message, the
-- message's length, and `rank`, how many postings the term had in the conversation once
-- this one was written (removed ones included). A search reads a term's newest postings by
-- a backward walk of the primary key and scores them from the index alone; the newest
-- posting's rank, less the term's removals, is its document frequency. Terms are compared
-- as exact byte strings.
CREATE TABLE IF NOT EXISTS chatmem_postings (
    index_key BIGINT NOT NULL,
    term      TEXT COLLATE "C" NOT NULL,
    seq       BIGINT NOT NULL,
    tf        BIGINT NOT NULL,
    len       BIGINT NOT NULL,
    rank      BIGINT NOT NULL,
    PRIMARY KEY (index_key, term, seq) INCLUDE (tf, len, rank)
);

-- How many of a term's postings were deleted with their messages (below a window start):
-- written only by a commit that deletes indexed messages, so usually empty.
CREATE TABLE IF NOT EXISTS chatmem_removed_postings (
    index_key BIGINT NOT NULL,
    term      TEXT COLLATE "C" NOT NULL,
    removed   BIGINT NOT NULL,
    PRIMARY KEY (index_key, term)
);
