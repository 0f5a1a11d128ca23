-- Commits of several runs, each checked and applied by workflow_commit (without dead
-- letters) in the order given: the outcome of each, in that order. Entry i appends
-- p_counts[i] events, the next ones of p_events, p_inboxes and p_crcs, and closes
-- p_close_counts[i] tasks, the next steps of p_closes.
CREATE OR REPLACE FUNCTION workflow_commit_group(
    p_runs bigint[], p_seqs bigint[], p_counts bigint[], p_events text[],
    p_inboxes bigint[], p_crcs bigint[], p_owners text[], p_tokens bigint[],
    p_statuses text[], p_notes text[], p_seen bigint[], p_new bigint[],
    p_cursors bigint[], p_ats bigint[], p_channel text, p_close_counts bigint[],
    p_closes bigint[])
RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE
    v_out text[] := '{}';
    v_from bigint := 1;
    v_to bigint;
    v_close_from bigint := 1;
    v_close_to bigint;
BEGIN
    FOR i IN 1 .. coalesce(cardinality(p_runs), 0) LOOP
        v_to := v_from + p_counts[i] - 1;
        v_close_to := v_close_from + p_close_counts[i] - 1;
        v_out := v_out || workflow_commit(
            p_runs[i], p_seqs[i], p_events[v_from : v_to], p_inboxes[v_from : v_to],
            p_crcs[v_from : v_to], p_owners[i], p_tokens[i], p_statuses[i], p_notes[i],
            p_seen[i], p_new[i], 0::smallint, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
            NULL, p_cursors[i], p_ats[i], p_channel,
            coalesce(p_closes[v_close_from : v_close_to], '{}'));
        v_from := v_to + 1;
        v_close_from := v_close_to + 1;
    END LOOP;
    RETURN v_out;
END
$$;
