-- The stored functions as version 1 of the schema defined them: the oldest schema the
-- tests know (`testing::Schema::create_at_version(1)`), so they migrate from it as a
-- database written then would. Never applied by the store.

-- Creates a run with its first entries, or names the run its idempotency key already
-- names. Outcomes: new, existing, unknown (the superseded run), conflict (it is not
-- parked).
CREATE FUNCTION workflow_create(
    p_workflow text, p_fingerprint text, p_key text, p_events text[], p_parent bigint,
    p_owner text, p_lease_ms bigint, p_supersedes bigint, p_note text, p_at bigint,
    p_nonce text, p_channel text,
    OUT o_outcome text, OUT o_run bigint, OUT o_token bigint, OUT o_len bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_status text;
BEGIN
    o_len := 0;
    o_token := 0;
    IF p_key IS NOT NULL THEN
        SELECT r.id INTO o_run FROM runs r
        WHERE r.workflow = p_workflow AND r.idempotency_key = p_key;
        IF FOUND THEN
            o_outcome := 'existing';
            RETURN;
        END IF;
    END IF;
    IF p_supersedes IS NOT NULL THEN
        SELECT r.status, r.journal_len INTO v_status, o_len FROM runs r
        WHERE r.id = p_supersedes FOR NO KEY UPDATE;
        IF NOT FOUND THEN
            o_outcome := 'unknown';
            o_run := p_supersedes;
            RETURN;
        ELSIF v_status <> 'parked' THEN
            o_outcome := 'conflict';
            o_run := p_supersedes;
            RETURN;
        END IF;
    END IF;
    INSERT INTO runs (workflow, fingerprint, status, idempotency_key, parent, owner,
                      lease_token, lease_until, create_nonce, journal_len, created_at,
                      updated_at)
    VALUES (p_workflow, p_fingerprint, 'running', p_key, p_parent, p_owner,
            CASE WHEN p_owner IS NULL THEN 0 ELSE 1 END,
            CASE WHEN p_owner IS NULL THEN NULL
                 ELSE now() + p_lease_ms * interval '1 millisecond' END,
            p_nonce, coalesce(cardinality(p_events), 0), p_at, p_at)
    ON CONFLICT (workflow, idempotency_key) DO NOTHING
    RETURNING runs.id, runs.lease_token INTO o_run, o_token;
    IF o_run IS NULL THEN
        -- A concurrent start with the same key committed first.
        SELECT r.id INTO o_run FROM runs r
        WHERE r.workflow = p_workflow AND r.idempotency_key = p_key;
        o_outcome := 'existing';
        o_token := 0;
        RETURN;
    END IF;
    INSERT INTO journal (run_id, seq, event)
    SELECT o_run, t.ord - 1, t.event FROM unnest(p_events) WITH ORDINALITY AS t(event, ord);
    IF p_supersedes IS NOT NULL THEN
        UPDATE runs SET status = 'cancelled', note = p_note, owner = NULL, updated_at = p_at
        WHERE id = p_supersedes;
    END IF;
    IF p_owner IS NULL THEN
        PERFORM pg_notify(p_channel, 'run');
    END IF;
    o_outcome := 'new';
    o_len := coalesce(cardinality(p_events), 0);
END
$$;

-- Appends entries and applies a run's changes, all or nothing. Outcomes: ok, unknown,
-- fenced (the owner or token is not the fence's), conflict (the journal is not p_seq
-- long).
CREATE FUNCTION workflow_commit(
    p_run bigint, p_seq bigint, p_events text[], p_inboxes bigint[], p_fence_owner text,
    p_fence_token bigint, p_status text, p_note text, p_letter smallint,
    p_letter_workflow text, p_letter_step text, p_letter_attempts bigint,
    p_letter_kind text, p_letter_message text, p_letter_trace text, p_letter_at bigint,
    p_cursor bigint, p_at bigint, p_channel text)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    v_owner text;
    v_token bigint;
    v_len bigint;
    v_count bigint := coalesce(cardinality(p_events), 0);
BEGIN
    SELECT r.owner, r.lease_token, r.journal_len INTO v_owner, v_token, v_len
    FROM runs r WHERE r.id = p_run FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN 'unknown';
    END IF;
    IF p_fence_owner IS NOT NULL
       AND (v_owner IS DISTINCT FROM p_fence_owner OR v_token <> p_fence_token) THEN
        RETURN 'fenced';
    END IF;
    IF v_len <> p_seq THEN
        RETURN 'conflict';
    END IF;
    IF v_count > 0 THEN
        INSERT INTO journal (run_id, seq, event, inbox)
        SELECT p_run, p_seq + t.ord - 1, t.event, t.inbox
        FROM unnest(p_events, p_inboxes) WITH ORDINALITY AS t(event, inbox, ord);
    END IF;
    UPDATE runs SET
        journal_len = v_len + v_count,
        status = coalesce(p_status, status),
        note = CASE WHEN p_status IS NULL THEN note ELSE p_note END,
        updated_at = CASE WHEN p_status IS NULL THEN updated_at ELSE p_at END,
        owner = CASE WHEN p_status IS NULL OR p_status = 'running' THEN owner ELSE NULL END,
        inbox_cursor = greatest(inbox_cursor, coalesce(p_cursor, 0))
    WHERE id = p_run;
    IF p_status = 'running' AND v_owner IS NULL THEN
        -- An operator put the run back to work: any worker may claim it.
        PERFORM pg_notify(p_channel, 'run');
    END IF;
    IF p_letter = 1 THEN
        INSERT INTO dead_letters (run_id, workflow, step, attempts, kind, message,
                                  trace_id, at)
        VALUES (p_run, p_letter_workflow, p_letter_step, p_letter_attempts, p_letter_kind,
                p_letter_message, p_letter_trace, p_letter_at)
        ON CONFLICT (run_id) DO UPDATE SET
            workflow = excluded.workflow, step = excluded.step,
            attempts = excluded.attempts, kind = excluded.kind,
            message = excluded.message, trace_id = excluded.trace_id, at = excluded.at;
    ELSIF p_letter = 2 THEN
        DELETE FROM dead_letters WHERE run_id = p_run;
    END IF;
    RETURN 'ok';
END
$$;

-- Puts a message in a run's inbox under the run's row lock, so one run's message ids
-- grow in the order their transactions commit. Outcomes: new, duplicate, unknown,
-- finished.
CREATE FUNCTION workflow_submit(
    p_run bigint, p_message text, p_key text, p_at bigint, p_channel text,
    OUT o_outcome text, OUT o_id bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_status text;
BEGIN
    SELECT r.status INTO v_status FROM runs r WHERE r.id = p_run FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        o_outcome := 'unknown';
        RETURN;
    END IF;
    IF p_key IS NOT NULL THEN
        SELECT i.id INTO o_id FROM inbox i WHERE i.run_id = p_run AND i.key = p_key;
        IF FOUND THEN
            o_outcome := 'duplicate';
            RETURN;
        END IF;
    END IF;
    IF v_status IN ('completed', 'failed', 'cancelled') THEN
        o_outcome := 'finished';
        RETURN;
    END IF;
    INSERT INTO inbox (run_id, key, message, at) VALUES (p_run, p_key, p_message, p_at)
    RETURNING inbox.id INTO o_id;
    UPDATE runs SET inbox_last = o_id WHERE runs.id = p_run;
    PERFORM pg_notify(p_channel, 'inbox');
    o_outcome := 'new';
END
$$;
