-- chatmem-mysql schema version 2: when each conversation was last committed, for
-- Store::recent (a listing newest first). `{p}` is the table prefix; statements are split at
-- the marker lines and each is idempotent (see 0001_init.sql).
--
-- updated_at is a DATETIME(6) in UTC like expires_at, from the same UTC_TIMESTAMP(6) reading,
-- and read back as microseconds by TIMESTAMPDIFF from the epoch: plain calendar arithmetic,
-- untouched by the session's time zone (UNIX_TIMESTAMP would apply it). Rows written before
-- this version hold the epoch, read as 0 ("not recorded"): NOT NULL keeps the listing's
-- order and cursor free of NULL cases, and sorts those rows last.
--
-- MySQL has no ADD COLUMN IF NOT EXISTS (only MariaDB does), so each change is prepared
-- only when the catalog says it is missing: a migration interrupted half-way runs again.
SET @chatmem_ddl = IF(
    (SELECT COUNT(*) FROM information_schema.columns
     WHERE table_schema = DATABASE() AND table_name = '{p}_conversations'
       AND column_name = 'updated_at') = 0,
    'ALTER TABLE `{p}_conversations`
         ADD COLUMN updated_at DATETIME(6) NOT NULL DEFAULT ''1970-01-01 00:00:00.000000''',
    'DO 0')
-- next statement
PREPARE chatmem_ddl FROM @chatmem_ddl
-- next statement
EXECUTE chatmem_ddl
-- next statement
DEALLOCATE PREPARE chatmem_ddl
-- next statement
-- The listing's order, newest first. With expires_at it covers the listing (the id is in
-- every InnoDB index): the live check and the id prefix are read from the index too.
SET @chatmem_ddl = IF(
    (SELECT COUNT(*) FROM information_schema.statistics
     WHERE table_schema = DATABASE() AND table_name = '{p}_conversations'
       AND index_name = '{p}_recent') = 0,
    'CREATE INDEX `{p}_recent`
         ON `{p}_conversations` (updated_at DESC, id DESC, expires_at)',
    'DO 0')
-- next statement
PREPARE chatmem_ddl FROM @chatmem_ddl
-- next statement
EXECUTE chatmem_ddl
-- next statement
DEALLOCATE PREPARE chatmem_ddl
-- next statement
DROP PROCEDURE IF EXISTS {p}_commit
-- next statement
-- As in 0001_init.sql, and it records the commit's time in updated_at: the same clock reading
-- (now_ts) as the expiry, so expires_at - updated_at is the TTL exactly. The parameters are
-- unchanged, so processes of the previous version that are still running keep calling it.
-- One commit, atomic and version-checked: the conversation row is locked (FOR UPDATE, which
-- reads the newest committed row), then the commit applies only if the live version is the
-- expected one. A commit that finds the version one past the expected one with its own token
-- was already applied by an earlier send: it answers with that version and writes nothing.
-- Returns one row: (applied 1/0, the new version or the current one).
-- p_messages is a JSON array of [seq, tokens, counted_by, json text] for the appended
-- messages; JSON_TABLE turns it into rows, so a batch is one parameter and one call. NULL:
-- the batch was staged in this connection's temporary table {p}_staged (a batch too large
-- for one parameter).
CREATE PROCEDURE {p}_commit(
    IN p_id VARBINARY(256),
    IN p_expected BIGINT,
    IN p_system_seq BIGINT,
    IN p_system_tokens BIGINT,
    IN p_system_json LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_system_counted_by VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_window_start BIGINT,
    IN p_next_seq BIGINT,
    IN p_delete_below BIGINT,
    IN p_ttl_micros BIGINT,
    IN p_token BIGINT UNSIGNED,
    IN p_summary LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_messages LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)
BEGIN
    DECLARE cur_version BIGINT DEFAULT NULL;
    DECLARE cur_token BIGINT UNSIGNED DEFAULT NULL;
    DECLARE cur_live BOOLEAN DEFAULT FALSE;
    DECLARE duplicate BOOLEAN DEFAULT FALSE;
    DECLARE now_ts DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
    DECLARE new_expiry DATETIME(6) DEFAULT NULL;
    DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
    IF p_ttl_micros IS NOT NULL THEN
        SET new_expiry = now_ts + INTERVAL p_ttl_micros MICROSECOND;
    END IF;
    -- No gap locks: concurrent creators meet on the primary key instead of deadlocking.
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    SELECT version, commit_token, (expires_at IS NULL OR expires_at > now_ts)
        INTO cur_version, cur_token, cur_live
        FROM {p}_conversations WHERE id = p_id FOR UPDATE;
    IF p_expected = 0 AND cur_version IS NULL THEN
        BEGIN
            DECLARE EXIT HANDLER FOR 1062 SET duplicate = TRUE;
            INSERT INTO {p}_conversations
                (id, version, system_json, system_seq, system_tokens, system_counted_by,
                 window_start, next_seq, expires_at, updated_at, commit_token, summary)
            VALUES (p_id, 1, p_system_json, p_system_seq, p_system_tokens, p_system_counted_by,
                    p_window_start, p_next_seq, new_expiry, now_ts, p_token, p_summary);
        END;
        IF duplicate THEN
            -- Another creator won while this one waited for the key: read what it wrote.
            SELECT version, commit_token, (expires_at IS NULL OR expires_at > now_ts)
                INTO cur_version, cur_token, cur_live
                FROM {p}_conversations WHERE id = p_id FOR UPDATE;
        END IF;
    ELSEIF p_expected = 0 AND NOT cur_live THEN
        -- An expired conversation starts afresh in place.
        DELETE FROM {p}_messages WHERE conversation_id = p_id;
        UPDATE {p}_conversations SET
            version = 1, system_json = p_system_json, system_seq = p_system_seq,
            system_tokens = p_system_tokens, system_counted_by = p_system_counted_by,
            window_start = p_window_start, next_seq = p_next_seq, expires_at = new_expiry,
            updated_at = now_ts, commit_token = p_token, summary = p_summary
        WHERE id = p_id;
    ELSEIF cur_live AND cur_version = p_expected THEN
        UPDATE {p}_conversations SET
            version = version + 1,
            system_seq = IF(p_system_json IS NULL, system_seq, p_system_seq),
            system_tokens = IF(p_system_json IS NULL, system_tokens, p_system_tokens),
            system_counted_by = IF(p_system_json IS NULL, system_counted_by, p_system_counted_by),
            system_json = COALESCE(p_system_json, system_json),
            window_start = p_window_start, next_seq = p_next_seq, expires_at = new_expiry,
            updated_at = now_ts, commit_token = p_token, summary = COALESCE(p_summary, summary)
        WHERE id = p_id;
        IF p_delete_below IS NOT NULL THEN
            DELETE FROM {p}_messages WHERE conversation_id = p_id AND seq < p_delete_below;
        END IF;
    ELSE
        SET duplicate = TRUE;
    END IF;
    IF duplicate THEN
        ROLLBACK;
        IF cur_live AND cur_version = p_expected + 1 AND cur_token = p_token THEN
            SELECT 1 AS applied, cur_version AS version;
        ELSE
            SELECT 0 AS applied, IF(cur_live, cur_version, 0) AS version;
        END IF;
    ELSEIF p_messages IS NULL THEN
        -- A batch larger than one parameter may be (max_allowed_packet) was staged by this
        -- connection in its temporary table first.
        INSERT INTO {p}_messages (conversation_id, seq, tokens, counted_by, json)
        SELECT p_id, m.seq, m.tokens, m.counted_by, m.json FROM {p}_staged AS m
        WHERE p_delete_below IS NULL OR m.seq >= p_delete_below;
        COMMIT;
        SELECT 1 AS applied, IF(p_expected = 0, 1, p_expected + 1) AS version;
    ELSE
        INSERT INTO {p}_messages (conversation_id, seq, tokens, counted_by, json)
        SELECT p_id, m.seq, m.tokens, m.counted_by, m.json
        FROM JSON_TABLE(p_messages, '$[*]' COLUMNS (
            seq BIGINT PATH '$[0]',
            tokens BIGINT PATH '$[1]',
            counted_by VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$[2]',
            json LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$[3]')) AS m
        WHERE p_delete_below IS NULL OR m.seq >= p_delete_below;
        COMMIT;
        SELECT 1 AS applied, IF(p_expected = 0, 1, p_expected + 1) AS version;
    END IF;
END
