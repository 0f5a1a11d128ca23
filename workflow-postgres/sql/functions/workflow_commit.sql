-- Appends entries and applies a run's changes, all or nothing. Outcomes: ok, unknown,
-- fenced (the owner or token is not the fence's), conflict (the journal is not p_seq
-- long), stale (the run's row is not the one p_run_crc was computed from: read it
-- again), corrupt (the journal is shorter than the run's row says: entries were lost
-- from its end). p_run_crc is the row's new checksum, given when the status or the inbox
-- cursor changes. It keeps the open-task index itself when a commit only closes tasks
-- (the steps of p_close, when the run was running; all of the run's, when it ends).
--
-- The journal's length is the journal's: one past its last entry (the primary key
-- refuses a second entry at a position, and a commit appends only right after the last
-- one). The row's journal_len is written by the commits that write the row anyway (a
-- status, an inbox cursor or a dead letter) and by lease renewals: a lower bound of the
-- length, checked against the journal whenever it is written, and exact while nobody
-- owns the run (claims tell begun runs from queued ones by it). A step's commit by the
-- run's owner (entries only) leaves the row alone: it takes the row's share lock, which
-- a claim's update waits for, checks the owner and token under it, and inserts its
-- entries. Commits without a fence (an operator's) write the row's length.
--
-- A commit to a run a console watches (watched_until still ahead) notifies p_channel
-- with `commit <id>`; the mark is read with the row, so other commits pay nothing for it.
CREATE OR REPLACE FUNCTION workflow_commit(
    p_run bigint, p_seq bigint, p_events text[], p_inboxes bigint[], p_crcs bigint[],
    p_fence_owner text, p_fence_token bigint, p_status text, p_note text,
    p_run_seen bigint, p_run_crc bigint, p_letter smallint, p_letter_workflow text,
    p_letter_step text, p_letter_attempts bigint, p_letter_kind text,
    p_letter_message text, p_letter_trace text, p_letter_at bigint, p_letter_crc bigint,
    p_cursor bigint, p_at bigint, p_channel text, p_close bigint[])
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    v_owner text;
    v_token bigint;
    v_len bigint;
    v_journal bigint;
    v_crc bigint;
    v_status text;
    v_watched timestamptz;
    v_count bigint := coalesce(cardinality(p_events), 0);
BEGIN
    IF p_fence_owner IS NOT NULL AND p_status IS NULL AND p_run_crc IS NULL
       AND p_cursor IS NULL AND p_letter = 0 THEN
        -- A step's commit by the run's owner: the share lock holds a claim off until the
        -- entries are in.
        SELECT r.owner, r.lease_token, r.status, r.watched_until
        INTO v_owner, v_token, v_status, v_watched
        FROM runs r WHERE r.id = p_run FOR SHARE;
        IF NOT FOUND THEN
            RETURN 'unknown';
        END IF;
        IF v_owner IS DISTINCT FROM p_fence_owner OR v_token <> p_fence_token THEN
            RETURN 'fenced';
        END IF;
        SELECT coalesce(max(j.seq) + 1, 0) INTO v_len FROM journal j WHERE j.run_id = p_run;
        IF v_len <> p_seq THEN
            RETURN 'conflict';
        END IF;
        IF v_count > 0 THEN
            INSERT INTO journal (run_id, seq, event, inbox, crc)
            SELECT p_run, p_seq + t.ord - 1, t.event, t.inbox, t.crc
            FROM unnest(p_events, p_inboxes, p_crcs) WITH ORDINALITY AS t(event, inbox, crc, ord);
        END IF;
        IF v_status = 'running' AND cardinality(p_close) > 0 THEN
            DELETE FROM open_tasks WHERE run_id = p_run AND step = ANY(p_close);
        END IF;
        IF v_watched > now() THEN
            PERFORM pg_notify(p_channel, 'commit ' || p_run);
        END IF;
        RETURN 'ok';
    END IF;
    SELECT r.owner, r.lease_token, r.journal_len, r.crc, r.status, r.watched_until
    INTO v_owner, v_token, v_len, v_crc, v_status, v_watched
    FROM runs r WHERE r.id = p_run FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN 'unknown';
    END IF;
    IF p_fence_owner IS NOT NULL
       AND (v_owner IS DISTINCT FROM p_fence_owner OR v_token <> p_fence_token) THEN
        RETURN 'fenced';
    END IF;
    -- Read after the row's lock is held: every commit before this one is in the journal.
    SELECT coalesce(max(j.seq) + 1, 0) INTO v_journal FROM journal j WHERE j.run_id = p_run;
    IF v_journal <> p_seq THEN
        RETURN 'conflict';
    END IF;
    IF v_journal < v_len THEN
        RETURN 'corrupt';
    END IF;
    IF p_run_crc IS NOT NULL AND v_crc IS DISTINCT FROM p_run_seen THEN
        RETURN 'stale';
    END IF;
    IF v_count > 0 THEN
        INSERT INTO journal (run_id, seq, event, inbox, crc)
        SELECT p_run, p_seq + t.ord - 1, t.event, t.inbox, t.crc
        FROM unnest(p_events, p_inboxes, p_crcs) WITH ORDINALITY AS t(event, inbox, crc, ord);
    END IF;
    UPDATE runs SET
        journal_len = p_seq + v_count,
        status = coalesce(p_status, status),
        note = CASE WHEN p_status IS NULL THEN note ELSE p_note END,
        updated_at = CASE WHEN p_status IS NULL THEN updated_at ELSE p_at END,
        owner = CASE WHEN p_status IS NULL OR p_status = 'running' THEN owner ELSE NULL END,
        inbox_cursor = greatest(inbox_cursor, coalesce(p_cursor, 0)),
        crc = coalesce(p_run_crc, crc)
    WHERE id = p_run;
    IF p_status IS NOT NULL AND p_status <> 'running' THEN
        DELETE FROM open_tasks WHERE run_id = p_run;
    ELSIF v_status = 'running' AND cardinality(p_close) > 0 THEN
        DELETE FROM open_tasks WHERE run_id = p_run AND step = ANY(p_close);
    END IF;
    IF p_status = 'running' AND v_owner IS NULL THEN
        -- An operator put the run back to work: any worker may claim it.
        PERFORM pg_notify(p_channel, 'run');
    END IF;
    IF v_watched > now() THEN
        PERFORM pg_notify(p_channel, 'commit ' || p_run);
    END IF;
    IF p_letter = 1 THEN
        INSERT INTO dead_letters (run_id, workflow, step, attempts, kind, message,
                                  trace_id, at, crc)
        VALUES (p_run, p_letter_workflow, p_letter_step, p_letter_attempts, p_letter_kind,
                p_letter_message, p_letter_trace, p_letter_at, p_letter_crc)
        ON CONFLICT (run_id) DO UPDATE SET
            workflow = excluded.workflow, step = excluded.step,
            attempts = excluded.attempts, kind = excluded.kind,
            message = excluded.message, trace_id = excluded.trace_id, at = excluded.at,
            crc = excluded.crc;
    ELSIF p_letter = 2 THEN
        DELETE FROM dead_letters WHERE run_id = p_run;
    END IF;
    RETURN 'ok';
END
$$;
