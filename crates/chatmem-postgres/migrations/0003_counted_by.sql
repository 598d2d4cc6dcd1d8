-- chatmem schema version 3: which token counter made each count (`TokenCounter::name`), so
-- that a memory using another counter recounts instead of trusting a count in the wrong
-- units. NULL for rows written before this version: read back as "not recorded" and taken
-- as they are.
-- Runs with search_path set to the store's schema, inside the migration transaction.
-- Adding a nullable column without a default only changes the catalog: no table rewrite.

ALTER TABLE chatmem_conversations ADD COLUMN IF NOT EXISTS system_counted_by TEXT;
ALTER TABLE chatmem_messages ADD COLUMN IF NOT EXISTS counted_by TEXT;
