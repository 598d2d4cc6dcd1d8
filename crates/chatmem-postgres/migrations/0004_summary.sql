-- chatmem schema version 4: the conversation's summary of what left the window, as the JSON
-- text `chatmem::Summary::to_json` writes (one opaque value, read back with
-- `Summary::from_json`). NULL: no summary, as for every conversation written before this
-- version.
-- Runs with search_path set to the store's schema, inside the migration transaction.
-- Adding a nullable column without a default only changes the catalog: no table rewrite.

ALTER TABLE chatmem_conversations ADD COLUMN IF NOT EXISTS summary TEXT;
