-- chatmem schema version 5: when each conversation's last commit landed, by the server's
-- clock (the commit statement sets it to now(), the same instant its expiry counts from),
-- for listing conversations by recency (`Store::recent`). TIMESTAMPTZ like `expires_at`:
-- the same 8 bytes and microseconds as a bigint would be, and readable in psql.
-- Conversations last written before this version read the Unix epoch (listed as 0) until
-- their next commit. A constant default only changes the catalog: no table rewrite.
-- Runs with search_path set to the store's schema, inside the migration transaction.
ALTER TABLE chatmem_conversations
    ADD COLUMN IF NOT EXISTS updated_at TIMESTAMPTZ NOT NULL DEFAULT '1970-01-01 00:00:00+00';

-- The listing walks this index newest first from its cursor and stops after a page; id
-- breaks ties in the listing's order. Built inside the migration transaction, so writes to
-- the table wait while it is built (one pass over the conversations, not the messages).
CREATE INDEX IF NOT EXISTS chatmem_conversations_updated_at
    ON chatmem_conversations (updated_at DESC, id DESC);
