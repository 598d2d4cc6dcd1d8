-- chatmem-mysql schema version 1: conversations, their append-only message log, and the
-- stored procedures that commit to and clear a conversation in one call each.
-- `{p}` is the store's table prefix. MySQL runs DDL outside transactions, so every step is
-- idempotent and the statements are sent one by one, split at the marker lines.
--
-- Ids are VARBINARY: they compare and sort byte for byte (utf8mb4_bin pads trailing
-- spaces, so 'a' and 'a ' would be one key). Text is utf8mb4 with a binary collation: a
-- message is stored byte for byte as serde_json wrote it, 4-byte characters included.
CREATE TABLE IF NOT EXISTS {p}_conversations (
    id                VARBINARY(256) NOT NULL PRIMARY KEY,
    version           BIGINT NOT NULL,
    -- The system message as serde_json wrote it (NULL: none), the sequence at which it was
    -- set, its token count and the counter that made it.
    system_json       LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    system_seq        BIGINT NULL,
    system_tokens     BIGINT NULL,
    system_counted_by VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    window_start      BIGINT NOT NULL,
    next_seq          BIGINT NOT NULL,
    -- UTC; NULL: never expires.
    expires_at        DATETIME(6) NULL,
    -- The last commit's token, so that a resent commit is recognised as applied.
    commit_token      BIGINT UNSIGNED NULL,
    -- chatmem::Summary::to_json; NULL: no summary.
    summary           LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    KEY {p}_expires_at (expires_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
-- next statement
CREATE TABLE IF NOT EXISTS {p}_messages (
    conversation_id VARBINARY(256) NOT NULL,
    seq             BIGINT NOT NULL,
    tokens          BIGINT NOT NULL,
    counted_by      VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    json            LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    PRIMARY KEY (conversation_id, seq),
    CONSTRAINT {p}_messages_conversation FOREIGN KEY (conversation_id)
        REFERENCES {p}_conversations (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
-- next statement
DROP PROCEDURE IF EXISTS {p}_commit
-- next statement
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
                 window_start, next_seq, expires_at, commit_token, summary)
            VALUES (p_id, 1, p_system_json, p_system_seq, p_system_tokens, p_system_counted_by,
                    p_window_start, p_next_seq, new_expiry, p_token, p_summary);
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
            commit_token = p_token, summary = p_summary
        WHERE id = p_id;
    ELSEIF cur_live AND cur_version = p_expected THEN
        UPDATE {p}_conversations SET
            version = version + 1,
            system_seq = IF(p_system_json IS NULL, system_seq, p_system_seq),
            system_tokens = IF(p_system_json IS NULL, system_tokens, p_system_tokens),
            system_counted_by = IF(p_system_json IS NULL, system_counted_by, p_system_counted_by),
            system_json = COALESCE(p_system_json, system_json),
            window_start = p_window_start, next_seq = p_next_seq, expires_at = new_expiry,
            commit_token = p_token, summary = COALESCE(p_summary, summary)
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
-- next statement
DROP PROCEDURE IF EXISTS {p}_clear
-- next statement
-- Deletes a conversation (its messages by the foreign key's cascade) and says whether it
-- existed: an expired one is deleted too but did not exist.
CREATE PROCEDURE {p}_clear(IN p_id VARBINARY(256))
BEGIN
    DECLARE live BOOLEAN DEFAULT FALSE;
    DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
    START TRANSACTION;
    SELECT (expires_at IS NULL OR expires_at > UTC_TIMESTAMP(6)) INTO live
        FROM {p}_conversations WHERE id = p_id FOR UPDATE;
    DELETE FROM {p}_conversations WHERE id = p_id;
    COMMIT;
    SELECT live AS existed;
END
