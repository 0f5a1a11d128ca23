-- Creates a run with its first entries, or names the run its idempotency key already
-- names. Outcomes: new, existing, unknown (the superseded run), conflict (it is not
-- parked), stale (the superseded run's row is not the one its new checksum was computed
-- from: read it again).
CREATE OR REPLACE FUNCTION workflow_create(
    p_workflow text, p_fingerprint text, p_key text, p_events text[], p_parent bigint,
    p_owner text, p_lease_ms bigint, p_supersedes bigint, p_note text, p_at bigint,
    p_nonce text, p_channel text, p_run_crc bigint, p_run_bits bigint[],
    p_event_crcs bigint[], p_event_bits bigint[], p_old_seen bigint, p_old_crc bigint,
    OUT o_outcome text, OUT o_run bigint, OUT o_token bigint, OUT o_len bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_status text;
    v_crc bigint;
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
        SELECT r.status, r.journal_len, r.crc INTO v_status, o_len, v_crc FROM runs r
        WHERE r.id = p_supersedes FOR NO KEY UPDATE;
        IF NOT FOUND THEN
            o_outcome := 'unknown';
            o_run := p_supersedes;
            RETURN;
        ELSIF v_status <> 'parked' THEN
            o_outcome := 'conflict';
            o_run := p_supersedes;
            RETURN;
        ELSIF v_crc IS DISTINCT FROM p_old_seen THEN
            o_outcome := 'stale';
            o_run := p_supersedes;
            RETURN;
        END IF;
    END IF;
    o_run := workflow_next_id('runs');
    INSERT INTO runs (id, workflow, fingerprint, status, idempotency_key, parent, owner,
                      lease_token, lease_until, create_nonce, journal_len, created_at,
                      updated_at, crc)
    OVERRIDING SYSTEM VALUE
    VALUES (o_run, p_workflow, p_fingerprint, 'running', p_key, p_parent, p_owner,
            CASE WHEN p_owner IS NULL THEN 0 ELSE workflow_next_token(0) END,
            CASE WHEN p_owner IS NULL THEN NULL
                 ELSE now() + p_lease_ms * interval '1 millisecond' END,
            p_nonce, coalesce(cardinality(p_events), 0), p_at, p_at,
            workflow_keyed_crc(p_run_crc, p_run_bits, o_run))
    ON CONFLICT (workflow, idempotency_key) DO NOTHING
    RETURNING runs.lease_token INTO o_token;
    IF NOT FOUND THEN
        -- A concurrent start with the same key committed first.
        SELECT r.id INTO o_run FROM runs r
        WHERE r.workflow = p_workflow AND r.idempotency_key = p_key;
        o_outcome := 'existing';
        o_token := 0;
        RETURN;
    END IF;
    INSERT INTO journal (run_id, seq, event, crc)
    SELECT o_run, t.ord - 1, t.event,
           workflow_keyed_crc(p_event_crcs[t.ord],
                              p_event_bits[(t.ord - 1) * 64 + 1 : t.ord * 64], o_run)
    FROM unnest(p_events) WITH ORDINALITY AS t(event, ord);
    IF p_supersedes IS NOT NULL THEN
        UPDATE runs SET status = 'cancelled', note = p_note, owner = NULL,
                        updated_at = p_at, crc = p_old_crc
        WHERE id = p_supersedes;
    END IF;
    IF p_owner IS NULL THEN
        PERFORM pg_notify(p_channel, 'run');
    END IF;
    o_outcome := 'new';
    o_len := coalesce(cardinality(p_events), 0);
END
$$;
