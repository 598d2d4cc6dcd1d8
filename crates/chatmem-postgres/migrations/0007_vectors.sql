-- chatmem schema version 7: recall's vectors, one per indexed message, in the message's row
-- (the embedding model's name and its values as little-endian float4s), so they go wherever
-- their message goes. NULL: not embedded (yet).
-- Runs with search_path set to the store's schema, inside the migration transaction.
-- Only nullable columns: a catalog change, no rewrite.
ALTER TABLE chatmem_messages
    ADD COLUMN IF NOT EXISTS vector_model TEXT,
    ADD COLUMN IF NOT EXISTS vector BYTEA;
