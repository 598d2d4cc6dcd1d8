-- chatmem schema version 2: the token of the last commit, kept with the conversation so
-- that a commit resent after its reply was lost is recognised as already applied instead
-- of being stored twice (see `Store::commit`). A u64 stored as the i64 with the same bits;
-- NULL for conversations last written before this version (no commit matches it).
-- Runs with search_path set to the store's schema, inside the migration transaction.
-- Adding a nullable column without a default only changes the catalog: no table rewrite.

ALTER TABLE chatmem_conversations ADD COLUMN IF NOT EXISTS commit_token BIGINT;
