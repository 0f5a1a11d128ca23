-- Puts a message in a run's inbox under the run's row lock, so one run's message ids
-- grow in the order their transactions commit. Outcomes: new, duplicate, unknown,
-- finished.
CREATE OR REPLACE FUNCTION workflow_submit(
    p_run bigint, p_message text, p_key text, p_at bigint, p_channel text,
    p_crc bigint, p_bits bigint[],
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
    o_id := workflow_next_id('inbox');
    INSERT INTO inbox (id, run_id, key, message, at, crc) OVERRIDING SYSTEM VALUE
    VALUES (o_id, p_run, p_key, p_message, p_at, workflow_keyed_crc(p_crc, p_bits, o_id));
    UPDATE runs SET inbox_last = o_id WHERE runs.id = p_run;
    PERFORM pg_notify(p_channel, 'inbox');
    o_outcome := 'new';
END
$$;
