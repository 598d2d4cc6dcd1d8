-- chatmem-mysql schema version 3: the lexical index recall searches, written by the commit in
-- the same transaction as the messages it indexes. `{p}` is the table prefix; statements are
-- split at the marker lines and each is idempotent (see 0001_init.sql and 0002_updated_at.sql).
--
-- The commit keeps what BM25 needs counted, so a search never counts over the conversation:
-- on the conversation row its indexed messages and their total length in terms, and per term
-- how many indexed messages hold it ({p}_index_df). Per indexed message a row of
-- {p}_index_docs (its length, the commit's time, its terms); per distinct term of it a
-- posting in {p}_index_terms, keyed (conversation, term, seq): a search reads a term's most
-- recent postings as one backward range of that key.
--
-- The index tables name a conversation by a number of its own (index_key on the conversation
-- row, drawn from {p}_index_keys at its first indexed commit) rather than by its id: a
-- posting is then some 30 bytes instead of up to 300, and a conversation started afresh after
-- expiry gets a new number, so nothing of the old index can be seen. The postings have no
-- second index: a delete below a sequence finds them through the terms each message row keeps.
-- The index goes wherever its messages go: the commit deletes it below the delete bound (and
-- takes it off the counts) and on a restart after expiry, the clear by its primary keys, and a
-- purge (or any delete of the conversation row) through the foreign keys' cascade from
-- {p}_index_keys. Messages written before this version are simply not indexed.
--
-- Terms are VARBINARY: compared byte for byte. utf8mb4_bin pads trailing spaces and the
-- default collations ignore case and accents, which would make 'Order', 'order' and 'order '
-- one term. InnoDB FULLTEXT is not used: its tokenizer, stopwords, minimum token size and
-- query syntax are not chatmem's analysis.
SET @chatmem_ddl = IF(
    (SELECT COUNT(*) FROM information_schema.columns
     WHERE table_schema = DATABASE() AND table_name = '{p}_conversations'
       AND column_name = 'index_key') = 0,
    'ALTER TABLE `{p}_conversations`
         ADD COLUMN indexed_docs BIGINT NOT NULL DEFAULT 0,
         ADD COLUMN indexed_len BIGINT NOT NULL DEFAULT 0,
         ADD COLUMN index_key BIGINT UNSIGNED NULL',
    'DO 0')
-- next statement
PREPARE chatmem_ddl FROM @chatmem_ddl
-- next statement
EXECUTE chatmem_ddl
-- next statement
DEALLOCATE PREPARE chatmem_ddl
-- next statement
-- Where the conversations' index numbers come from; a row lives as long as its conversation
-- (or until a restart after expiry replaces it), and the index rows hang off it.
CREATE TABLE IF NOT EXISTS {p}_index_keys (
    ckey            BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
    conversation_id VARBINARY(256) NOT NULL,
    UNIQUE KEY {p}_index_keys_id (conversation_id),
    CONSTRAINT {p}_index_keys_conversation FOREIGN KEY (conversation_id)
        REFERENCES {p}_conversations (id) ON DELETE CASCADE
) ENGINE = InnoDB
-- next statement
-- One row per indexed message: its length in terms, when the commit that wrote it landed in
-- Unix microseconds (the clock reading the conversation's updated_at got), and its terms as
-- the commit sent them ([[term, tf], ...]), for deleting its postings.
CREATE TABLE IF NOT EXISTS {p}_index_docs (
    ckey      BIGINT UNSIGNED NOT NULL,
    seq       BIGINT NOT NULL,
    len       INT UNSIGNED NOT NULL,
    at_micros BIGINT NOT NULL,
    terms     LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    PRIMARY KEY (ckey, seq),
    CONSTRAINT {p}_index_docs_key FOREIGN KEY (ckey)
        REFERENCES {p}_index_keys (ckey) ON DELETE CASCADE
) ENGINE = InnoDB
-- next statement
-- The postings. The message's length rides along, so scoring reads no other row.
CREATE TABLE IF NOT EXISTS {p}_index_terms (
    ckey BIGINT UNSIGNED NOT NULL,
    term VARBINARY(64) NOT NULL,
    seq  BIGINT NOT NULL,
    tf   INT UNSIGNED NOT NULL,
    len  INT UNSIGNED NOT NULL,
    PRIMARY KEY (ckey, term, seq),
    CONSTRAINT {p}_index_terms_key FOREIGN KEY (ckey)
        REFERENCES {p}_index_keys (ckey) ON DELETE CASCADE
) ENGINE = InnoDB
-- next statement
-- Per term, how many indexed messages hold it (a row that falls to 0 is deleted).
CREATE TABLE IF NOT EXISTS {p}_index_df (
    ckey BIGINT UNSIGNED NOT NULL,
    term VARBINARY(64) NOT NULL,
    df   BIGINT NOT NULL,
    PRIMARY KEY (ckey, term),
    CONSTRAINT {p}_index_df_key FOREIGN KEY (ckey)
        REFERENCES {p}_index_keys (ckey) ON DELETE CASCADE
) ENGINE = InnoDB
-- next statement
DROP PROCEDURE IF EXISTS {p}_commit_v3
-- next statement
-- The commit of 0002_updated_at.sql, and the index: p_index is a JSON array of
-- [seq, len, [[term, tf], ...]] for the appended messages the commit keeps (those at or past
-- p_delete_below), p_index_docs and p_index_len their count and total length; '[]', 0, 0:
-- nothing to index. NULL: the entries were staged, as chunks of the same JSON, in this
-- connection's temporary table {p}_staged_index (an index too large for one parameter).
-- A commit that is not applied writes nothing. Returns one row: (applied 1/0, the new version
-- or the current one).
CREATE PROCEDURE {p}_commit_v3(
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
    IN p_messages LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_index LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_index_docs BIGINT,
    IN p_index_len BIGINT)
BEGIN
    DECLARE cur_version BIGINT DEFAULT NULL;
    DECLARE cur_token BIGINT UNSIGNED DEFAULT NULL;
    DECLARE cur_live BOOLEAN DEFAULT FALSE;
    DECLARE cur_key BIGINT UNSIGNED DEFAULT NULL;
    DECLARE duplicate BOOLEAN DEFAULT FALSE;
    DECLARE now_ts DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
    DECLARE now_micros BIGINT DEFAULT 0;
    DECLARE new_expiry DATETIME(6) DEFAULT NULL;
    DECLARE gone_docs BIGINT DEFAULT 0;
    DECLARE gone_len BIGINT DEFAULT 0;
    DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
    SET now_micros = TIMESTAMPDIFF(MICROSECOND, TIMESTAMP '1970-01-01 00:00:00', now_ts);
    IF p_ttl_micros IS NOT NULL THEN
        SET new_expiry = now_ts + INTERVAL p_ttl_micros MICROSECOND;
    END IF;
    -- No gap locks: concurrent creators meet on the primary key instead of deadlocking.
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    SELECT version, commit_token, (expires_at IS NULL OR expires_at > now_ts), index_key
        INTO cur_version, cur_token, cur_live, cur_key
        FROM {p}_conversations WHERE id = p_id FOR UPDATE;
    IF p_expected = 0 AND cur_version IS NULL THEN
        BEGIN
            DECLARE EXIT HANDLER FOR 1062 SET duplicate = TRUE;
            INSERT INTO {p}_conversations
                (id, version, system_json, system_seq, system_tokens, system_counted_by,
                 window_start, next_seq, expires_at, updated_at, commit_token, summary,
                 indexed_docs, indexed_len)
            VALUES (p_id, 1, p_system_json, p_system_seq, p_system_tokens, p_system_counted_by,
                    p_window_start, p_next_seq, new_expiry, now_ts, p_token, p_summary,
                    p_index_docs, p_index_len);
        END;
        IF duplicate THEN
            -- Another creator won while this one waited for the key: read what it wrote.
            SELECT version, commit_token, (expires_at IS NULL OR expires_at > now_ts)
                INTO cur_version, cur_token, cur_live
                FROM {p}_conversations WHERE id = p_id FOR UPDATE;
        END IF;
    ELSEIF p_expected = 0 AND NOT cur_live THEN
        -- An expired conversation starts afresh in place: its index goes (each table by its
        -- primary key's range, then the number, which the next indexed commit draws anew).
        IF cur_key IS NOT NULL THEN
            DELETE FROM {p}_index_terms WHERE ckey = cur_key;
            DELETE FROM {p}_index_docs WHERE ckey = cur_key;
            DELETE FROM {p}_index_df WHERE ckey = cur_key;
            DELETE FROM {p}_index_keys WHERE ckey = cur_key;
            SET cur_key = NULL;
        END IF;
        DELETE FROM {p}_messages WHERE conversation_id = p_id;
        UPDATE {p}_conversations SET
            version = 1, system_json = p_system_json, system_seq = p_system_seq,
            system_tokens = p_system_tokens, system_counted_by = p_system_counted_by,
            window_start = p_window_start, next_seq = p_next_seq, expires_at = new_expiry,
            updated_at = now_ts, commit_token = p_token, summary = p_summary,
            indexed_docs = p_index_docs, indexed_len = p_index_len, index_key = NULL
        WHERE id = p_id;
    ELSEIF cur_live AND cur_version = p_expected THEN
        IF p_delete_below IS NOT NULL AND cur_key IS NOT NULL THEN
            -- Only what is about to go: the messages' index rows below the bound, their
            -- postings found through the terms each keeps.
            SELECT COUNT(*), COALESCE(SUM(len), 0) INTO gone_docs, gone_len
                FROM {p}_index_docs WHERE ckey = cur_key AND seq < p_delete_below;
            IF gone_docs > 0 THEN
                UPDATE {p}_index_df AS f
                JOIN (SELECT g.term, COUNT(*) AS n
                      FROM (SELECT d.seq, CAST(t.term AS BINARY) AS term
                      FROM {p}_index_docs AS d, JSON_TABLE(d.terms, '$[*]' COLUMNS (
                          term VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$[0]')) AS t
                      WHERE d.ckey = cur_key AND d.seq < p_delete_below) AS g
                      GROUP BY g.term) AS g
                    ON f.ckey = cur_key AND f.term = g.term
                SET f.df = f.df - g.n;
                DELETE FROM {p}_index_df WHERE ckey = cur_key AND df <= 0
                    AND term IN (SELECT g.term FROM (SELECT d.seq, CAST(t.term AS BINARY) AS term
                      FROM {p}_index_docs AS d, JSON_TABLE(d.terms, '$[*]' COLUMNS (
                          term VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$[0]')) AS t
                      WHERE d.ckey = cur_key AND d.seq < p_delete_below) AS g);
                DELETE x FROM {p}_index_terms AS x
                JOIN (SELECT d.seq, CAST(t.term AS BINARY) AS term
                      FROM {p}_index_docs AS d, JSON_TABLE(d.terms, '$[*]' COLUMNS (
                          term VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$[0]')) AS t
                      WHERE d.ckey = cur_key AND d.seq < p_delete_below) AS g
                    ON x.ckey = cur_key AND x.term = g.term AND x.seq = g.seq;
                DELETE FROM {p}_index_docs WHERE ckey = cur_key AND seq < p_delete_below;
            END IF;
        END IF;
        UPDATE {p}_conversations SET
            version = version + 1,
            system_seq = IF(p_system_json IS NULL, system_seq, p_system_seq),
            system_tokens = IF(p_system_json IS NULL, system_tokens, p_system_tokens),
            system_counted_by = IF(p_system_json IS NULL, system_counted_by, p_system_counted_by),
            system_json = COALESCE(p_system_json, system_json),
            window_start = p_window_start, next_seq = p_next_seq, expires_at = new_expiry,
            updated_at = now_ts, commit_token = p_token, summary = COALESCE(p_summary, summary),
            indexed_docs = indexed_docs - gone_docs + p_index_docs,
            indexed_len = indexed_len - gone_len + p_index_len
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
    ELSE
        IF p_messages IS NULL THEN
            -- A batch larger than one parameter may be (max_allowed_packet) was staged by
            -- this connection in its temporary table first.
            INSERT INTO {p}_messages (conversation_id, seq, tokens, counted_by, json)
            SELECT p_id, m.seq, m.tokens, m.counted_by, m.json FROM {p}_staged AS m
            WHERE p_delete_below IS NULL OR m.seq >= p_delete_below;
        ELSE
            INSERT INTO {p}_messages (conversation_id, seq, tokens, counted_by, json)
            SELECT p_id, m.seq, m.tokens, m.counted_by, m.json
            FROM JSON_TABLE(p_messages, '$[*]' COLUMNS (
                seq BIGINT PATH '$[0]',
                tokens BIGINT PATH '$[1]',
                counted_by VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$[2]',
                json LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$[3]')) AS m
            WHERE p_delete_below IS NULL OR m.seq >= p_delete_below;
        END IF;
        IF p_index_docs > 0 AND cur_key IS NULL THEN
            -- The conversation's first indexed commit draws its number.
            INSERT INTO {p}_index_keys (conversation_id) VALUES (p_id);
            SET cur_key = LAST_INSERT_ID();
            UPDATE {p}_conversations SET index_key = cur_key WHERE id = p_id;
        END IF;
        IF p_index_docs > 0 AND p_index IS NULL THEN
            INSERT INTO {p}_index_docs (ckey, seq, len, at_micros, terms)
            SELECT cur_key, e.seq, e.len, now_micros, e.terms
            FROM {p}_staged_index AS s, JSON_TABLE(s.chunk, '$[*]' COLUMNS (
                seq BIGINT PATH '$[0]',
                len INT UNSIGNED PATH '$[1]',
                terms JSON PATH '$[2]')) AS e;
            INSERT INTO {p}_index_terms (ckey, term, seq, tf, len)
            SELECT cur_key, CAST(e.term AS BINARY), e.seq, e.tf, e.len
            FROM {p}_staged_index AS s, JSON_TABLE(s.chunk, '$[*]' COLUMNS (
                seq BIGINT PATH '$[0]',
                len INT UNSIGNED PATH '$[1]',
                NESTED PATH '$[2][*]' COLUMNS (
                    term VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$[0]',
                    tf INT UNSIGNED PATH '$[1]'))) AS e
            WHERE e.term IS NOT NULL;
            -- One row a posting, counted as it meets the term's row (a GROUP BY first would
            -- cost a temporary table and a sort, more than the upserts it saves).
            INSERT INTO {p}_index_df (ckey, term, df)
            SELECT cur_key, CAST(e.term AS BINARY), 1
            FROM {p}_staged_index AS s, JSON_TABLE(s.chunk, '$[*]' COLUMNS (
                seq BIGINT PATH '$[0]',
                len INT UNSIGNED PATH '$[1]',
                NESTED PATH '$[2][*]' COLUMNS (
                    term VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$[0]',
                    tf INT UNSIGNED PATH '$[1]'))) AS e
            WHERE e.term IS NOT NULL
            ON DUPLICATE KEY UPDATE df = df + 1;
        ELSEIF p_index_docs > 0 THEN
            INSERT INTO {p}_index_docs (ckey, seq, len, at_micros, terms)
            SELECT cur_key, e.seq, e.len, now_micros, e.terms
            FROM JSON_TABLE(p_index, '$[*]' COLUMNS (
                seq BIGINT PATH '$[0]',
                len INT UNSIGNED PATH '$[1]',
                terms JSON PATH '$[2]')) AS e;
            INSERT INTO {p}_index_terms (ckey, term, seq, tf, len)
            SELECT cur_key, CAST(e.term AS BINARY), e.seq, e.tf, e.len
            FROM JSON_TABLE(p_index, '$[*]' COLUMNS (
                seq BIGINT PATH '$[0]',
                len INT UNSIGNED PATH '$[1]',
                NESTED PATH '$[2][*]' COLUMNS (
                    term VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$[0]',
                    tf INT UNSIGNED PATH '$[1]'))) AS e
            WHERE e.term IS NOT NULL;
            -- One row a posting, counted as it meets the term's row (a GROUP BY first would
            -- cost a temporary table and a sort, more than the upserts it saves).
            INSERT INTO {p}_index_df (ckey, term, df)
            SELECT cur_key, CAST(e.term AS BINARY), 1
            FROM JSON_TABLE(p_index, '$[*]' COLUMNS (
                seq BIGINT PATH '$[0]',
                len INT UNSIGNED PATH '$[1]',
                NESTED PATH '$[2][*]' COLUMNS (
                    term VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$[0]',
                    tf INT UNSIGNED PATH '$[1]'))) AS e
            WHERE e.term IS NOT NULL
            ON DUPLICATE KEY UPDATE df = df + 1;
        END IF;
        COMMIT;
        SELECT 1 AS applied, IF(p_expected = 0, 1, p_expected + 1) AS version;
    END IF;
END
-- next statement
DROP PROCEDURE IF EXISTS {p}_commit
-- next statement
-- The commit as versions 1 and 2 call it (same parameters), for processes of version 2 still
-- running: their commits index nothing, but through {p}_commit_v3 their deletes keep the
-- index in step with the messages.
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
    CALL {p}_commit_v3(p_id, p_expected, p_system_seq, p_system_tokens, p_system_json,
        p_system_counted_by, p_window_start, p_next_seq, p_delete_below, p_ttl_micros,
        p_token, p_summary, p_messages, '[]', 0, 0);
END
-- next statement
DROP PROCEDURE IF EXISTS {p}_clear
-- next statement
-- As in 0001_init.sql, and the index goes first, each table by its primary key's range (the
-- cascade from {p}_index_keys would take it too, one row at a time).
CREATE PROCEDURE {p}_clear(IN p_id VARBINARY(256))
BEGIN
    DECLARE live BOOLEAN DEFAULT FALSE;
    DECLARE cur_key BIGINT UNSIGNED DEFAULT NULL;
    DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
    START TRANSACTION;
    SELECT (expires_at IS NULL OR expires_at > UTC_TIMESTAMP(6)), index_key INTO live, cur_key
        FROM {p}_conversations WHERE id = p_id FOR UPDATE;
    IF cur_key IS NOT NULL THEN
        DELETE FROM {p}_index_terms WHERE ckey = cur_key;
        DELETE FROM {p}_index_docs WHERE ckey = cur_key;
        DELETE FROM {p}_index_df WHERE ckey = cur_key;
    END IF;
    DELETE FROM {p}_conversations WHERE id = p_id;
    COMMIT;
    SELECT live AS existed;
END
