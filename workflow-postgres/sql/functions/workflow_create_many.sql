-- Creates several runs in order, each as workflow_create does (a key used before, or by an
-- earlier run of the call, names that run), with their search values, all in the calling
-- statement's transaction: one row per run, in order. The runs' parts come as arrays:
-- per run its workflow, fingerprint, key, parent, owner, lease, time, nonce, checksum and
-- how many events and search values it has; the events (with their checksums, 64 bits
-- each) and the search values of every run one after the other. None supersedes a run.
CREATE OR REPLACE FUNCTION workflow_create_many(
    p_workflows text[], p_fingerprints text[], p_keys text[], p_parents bigint[],
    p_owners text[], p_lease_ms bigint[], p_ats bigint[], p_nonces text[], p_channel text,
    p_run_crcs bigint[], p_run_bits bigint[], p_counts integer[], p_events text[],
    p_event_crcs bigint[], p_event_bits bigint[], p_search_counts integer[],
    p_search_names text[], p_search_values text[])
RETURNS TABLE (o_outcome text, o_run bigint, o_token bigint, o_len bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_event integer := 0;
    v_search integer := 0;
    v_next integer;
    v_created record;
BEGIN
    FOR i IN 1 .. coalesce(cardinality(p_workflows), 0) LOOP
        v_next := v_event + p_counts[i];
        SELECT * INTO v_created FROM workflow_create(
            p_workflows[i], p_fingerprints[i], p_keys[i], p_events[v_event + 1 : v_next],
            p_parents[i], p_owners[i], p_lease_ms[i], NULL, NULL, p_ats[i], p_nonces[i],
            p_channel, p_run_crcs[i], p_run_bits[(i - 1) * 64 + 1 : i * 64],
            p_event_crcs[v_event + 1 : v_next], p_event_bits[v_event * 64 + 1 : v_next * 64],
            NULL, NULL);
        IF v_created.o_outcome = 'new' THEN
            INSERT INTO run_search (run_id, name, value)
            SELECT v_created.o_run, t.name, t.value
            FROM unnest(p_search_names[v_search + 1 : v_search + p_search_counts[i]],
                        p_search_values[v_search + 1 : v_search + p_search_counts[i]])
                 AS t(name, value);
        END IF;
        v_event := v_next;
        v_search := v_search + p_search_counts[i];
        o_outcome := v_created.o_outcome;
        o_run := v_created.o_run;
        o_token := v_created.o_token;
        o_len := v_created.o_len;
        RETURN NEXT;
    END LOOP;
END
$$;
