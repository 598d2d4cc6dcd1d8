-- chatmem-mysql schema version 5: users' facts (`Store::load_facts`, `commit_facts`), apart
-- from every conversation: clearing, expiring or purging a conversation leaves its user's
-- facts. `{p}` is the table prefix; statements are split at the marker lines and each is
-- idempotent (see 0001_init.sql). Only new tables and a new procedure: nothing a version 4
-- process uses changes, so those still running keep committing.
--
-- User ids are VARBINARY, as conversation ids are: compared byte for byte ('a', 'a ' and 'A'
-- are three users; utf8mb4_bin pads trailing spaces). A fact and a history entry are kept as
-- the JSON serde_json writes of chatmem's `Fact` and `FactChange`, utf8mb4 with the binary
-- collation, beside the ids they are selected by.

-- One row per user with facts, from their first facts commit until they are forgotten: the
-- version every facts commit bumps (the version check locks this row), the id the next new
-- fact gets, and the token of the last facts commit, so that a commit sent again after its
-- reply was lost is answered, not applied twice.
CREATE TABLE IF NOT EXISTS {p}_fact_users (
    user_id      VARBINARY(256) NOT NULL PRIMARY KEY,
    version      BIGINT NOT NULL,
    next_id      BIGINT NOT NULL,
    commit_token BIGINT UNSIGNED NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
-- next statement
-- The user's current facts, one row each (`json` holds the fact, its id included, which
-- matches `fact_id`). A commit rewrites only the rows that changed.
CREATE TABLE IF NOT EXISTS {p}_facts (
    user_id VARBINARY(256) NOT NULL,
    fact_id BIGINT NOT NULL,
    json    LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    PRIMARY KEY (user_id, fact_id),
    CONSTRAINT {p}_facts_user FOREIGN KEY (user_id)
        REFERENCES {p}_fact_users (user_id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
-- next statement
-- Each fact's history, kept after the fact left the set (superseded or evicted) and deleted
-- with it when it is deleted by hand: one row per entry, in the order committed, which is
-- (`version`: the commit that wrote it, `ord`: its place in that commit, from 1). The primary
-- key is the index a fact's history is read by.
CREATE TABLE IF NOT EXISTS {p}_fact_history (
    user_id VARBINARY(256) NOT NULL,
    fact_id BIGINT NOT NULL,
    version BIGINT NOT NULL,
    ord     BIGINT NOT NULL,
    json    LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    PRIMARY KEY (user_id, fact_id, version, ord),
    CONSTRAINT {p}_fact_history_user FOREIGN KEY (user_id)
        REFERENCES {p}_fact_users (user_id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
-- next statement
DROP PROCEDURE IF EXISTS {p}_commit_facts
-- next statement
-- One facts commit, atomic and version-checked, as {p}_commit_v3 is for a conversation: the
-- user row is locked (FOR UPDATE, which reads the newest committed row), then the commit
-- applies only if the user is at the expected version (0: no row, which the INSERT makes; of
-- creators at once one wins, the others wait for its key and find it taken). A commit that
-- finds the version one past the expected one with its own token was already applied by an
-- earlier send: it answers with that version and writes nothing. Only then, in the same
-- transaction: the facts not in the new set deleted, the others upserted (InnoDB writes no
-- row whose value is the same), the dropped facts' history deleted, the new entries appended
-- at the new version. Returns one row: (applied 1/0, the new version or the current one, 0
-- for no user row).
--
-- p_facts is a JSON array of [fact id, fact JSON text] for the whole new set; p_entries of
-- [fact id, entry JSON text] in the order they happened; p_dropped of the fact ids whose
-- history goes. JSON_TABLE turns each into rows, so a commit is one call.
CREATE PROCEDURE {p}_commit_facts(
    IN p_user VARBINARY(256),
    IN p_expected BIGINT,
    IN p_next_id BIGINT,
    IN p_token BIGINT UNSIGNED,
    IN p_facts LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_entries LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_dropped LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)
BEGIN
    DECLARE cur_version BIGINT DEFAULT NULL;
    DECLARE cur_token BIGINT UNSIGNED DEFAULT NULL;
    DECLARE refused BOOLEAN DEFAULT FALSE;
    DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
    -- No gap locks: concurrent creators meet on the primary key instead of deadlocking.
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    SELECT version, commit_token INTO cur_version, cur_token
        FROM {p}_fact_users WHERE user_id = p_user FOR UPDATE;
    IF p_expected = 0 AND cur_version IS NULL THEN
        BEGIN
            DECLARE EXIT HANDLER FOR 1062 SET refused = TRUE;
            INSERT INTO {p}_fact_users (user_id, version, next_id, commit_token)
            VALUES (p_user, 1, p_next_id, p_token);
        END;
        IF refused THEN
            -- Another creator won while this one waited for the key: read what it wrote.
            SELECT version, commit_token INTO cur_version, cur_token
                FROM {p}_fact_users WHERE user_id = p_user FOR UPDATE;
        END IF;
    ELSEIF p_expected > 0 AND cur_version = p_expected THEN
        UPDATE {p}_fact_users SET version = version + 1, next_id = p_next_id, commit_token = p_token
            WHERE user_id = p_user;
    ELSE
        SET refused = TRUE;
    END IF;
    IF refused THEN
        ROLLBACK;
        IF cur_version = p_expected + 1 AND cur_token = p_token THEN
            SELECT 1 AS applied, cur_version AS version;
        ELSE
            SELECT 0 AS applied, COALESCE(cur_version, 0) AS version;
        END IF;
    ELSE
        DELETE FROM {p}_facts WHERE user_id = p_user AND fact_id NOT IN (
            SELECT s.id FROM JSON_TABLE(p_facts, '$[*]' COLUMNS (id BIGINT PATH '$[0]')) AS s);
        INSERT INTO {p}_facts (user_id, fact_id, json)
        SELECT p_user, s.id, s.json
        FROM JSON_TABLE(p_facts, '$[*]' COLUMNS (
            id BIGINT PATH '$[0]',
            json LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$[1]')) AS s
        ON DUPLICATE KEY UPDATE json = VALUES(json);
        DELETE FROM {p}_fact_history WHERE user_id = p_user AND fact_id IN (
            SELECT d.id FROM JSON_TABLE(p_dropped, '$[*]' COLUMNS (id BIGINT PATH '$')) AS d);
        INSERT INTO {p}_fact_history (user_id, fact_id, version, ord, json)
        SELECT p_user, e.fact_id, p_expected + 1, e.ord, e.json
        FROM JSON_TABLE(p_entries, '$[*]' COLUMNS (
            ord FOR ORDINALITY,
            fact_id BIGINT PATH '$[0]',
            json LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$[1]')) AS e;
        COMMIT;
        SELECT 1 AS applied, p_expected + 1 AS version;
    END IF;
END
