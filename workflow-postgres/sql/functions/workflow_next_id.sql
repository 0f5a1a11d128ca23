-- A new id from the sequence of `p_table`'s `id` column, never one handed out before a
-- failover. Asynchronous replication can lose the last rows a primary created, and with
-- them the sequence's advance: the promoted server would hand their ids out again, and an
-- idempotency key made of a run's id (`workflow/run/step`) would name another run's effect
-- to the services that saw the lost run. So on timeline t the ids are above (t - 1) << 32
-- (timeline 1, a server never failed over: no change): the first id taken on a new
-- timeline moves the sequence there, under a lock, so two takers never move it back.
CREATE OR REPLACE FUNCTION workflow_next_id(p_table text)
RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_seq text := pg_get_serial_sequence(p_table, 'id');
    v_floor bigint := workflow_epoch() - (1::bigint << 32);
    v_id bigint;
    v_last bigint;
BEGIN
    LOOP
        v_id := nextval(v_seq);
        IF v_id > v_floor THEN
            RETURN v_id;
        END IF;
        PERFORM pg_advisory_xact_lock(hashtext(v_seq));
        EXECUTE format('SELECT last_value FROM %s', v_seq) INTO v_last;
        IF v_last <= v_floor THEN
            PERFORM setval(v_seq, v_floor);
        END IF;
    END LOOP;
END $$;
