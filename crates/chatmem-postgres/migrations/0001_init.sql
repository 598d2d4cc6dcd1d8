-- chatmem schema version 1: conversations and their append-only message log.
-- Runs with search_path set to the store's schema, inside the migration transaction.

-- One row per conversation. `id` sorts byte-wise (COLLATE "C") so that listing pages in
-- the same order as Rust strings, whatever the database's collation.
CREATE TABLE IF NOT EXISTS chatmem_conversations (
    id            TEXT COLLATE "C" PRIMARY KEY,
    version       BIGINT NOT NULL,
    -- The system message as serde_json wrote it (NULL: none), the sequence at which it was
    -- set and its token count.
    system_json   TEXT,
    system_seq    BIGINT,
    system_tokens BIGINT,
    window_start  BIGINT NOT NULL,
    next_seq      BIGINT NOT NULL,
    -- NULL: never expires.
    expires_at    TIMESTAMPTZ
);

-- Lets purge_expired find expired conversations without scanning every row.
CREATE INDEX IF NOT EXISTS chatmem_conversations_expires_at
    ON chatmem_conversations (expires_at) WHERE expires_at IS NOT NULL;

-- The message log. JSON is TEXT, byte for byte what serde_json wrote (JSONB would reorder
-- keys and reject \u0000). The primary key is the (conversation, seq) index that loads use.
-- tokens is BIGINT because counts are u32.
CREATE TABLE IF NOT EXISTS chatmem_messages (
    conversation_id TEXT COLLATE "C" NOT NULL
        REFERENCES chatmem_conversations (id) ON DELETE CASCADE,
    seq             BIGINT NOT NULL,
    tokens          BIGINT NOT NULL,
    json            TEXT NOT NULL,
    PRIMARY KEY (conversation_id, seq)
);
