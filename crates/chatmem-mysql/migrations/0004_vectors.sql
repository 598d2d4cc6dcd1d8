-- chatmem-mysql schema version 4: recall's vectors, one per indexed message, in the message's
-- row, so they go wherever their message goes (the commit's delete below a start, a restart
-- after expiry, the clear and a purge need nothing new). `{p}` is the table prefix; statements
-- are split at the marker lines and each is idempotent (see 0001_init.sql).
--
-- vector_model is the embedding model's name, VARBINARY so that it compares byte for byte
-- (utf8mb4_bin pads trailing spaces: 'e5' and 'e5 ' would be one model); vector its values as
-- little-endian 4-byte floats (at most 8,192 of them, 32 KiB: a MEDIUMBLOB, so nothing is ever
-- cut). NULL: not embedded (yet). Two nullable columns at the end of the table: an instant
-- ALTER on MariaDB 10.3 and MySQL 8.0.12 and later, no rewrite.
SET @chatmem_ddl = IF(
    (SELECT COUNT(*) FROM information_schema.columns
     WHERE table_schema = DATABASE() AND table_name = '{p}_messages'
       AND column_name = 'vector_model') = 0,
    'ALTER TABLE `{p}_messages`
         ADD COLUMN vector_model VARBINARY(256) NULL,
         ADD COLUMN vector MEDIUMBLOB NULL',
    'DO 0')
-- next statement
PREPARE chatmem_ddl FROM @chatmem_ddl
-- next statement
EXECUTE chatmem_ddl
-- next statement
DEALLOCATE PREPARE chatmem_ddl
