-- Renews the leases an owner holds (those of the current epoch) and brings each run's
-- journal_len up to its journal's length, checked: a journal shorter than its row says
-- lost entries from its end, and that run's lease is not renewed (its owner stops
-- driving it; the next load reports the damage). The rows are locked first, in run
-- order as groups of commits lock them, so that a commit holding a row's share lock is
-- in the journal before the lengths are read. Returns the runs renewed.
CREATE OR REPLACE FUNCTION workflow_renew(p_owner text, p_lease_ms bigint)
RETURNS bigint[]
LANGUAGE plpgsql AS $$
DECLARE
    v_runs bigint[];
    v_renewed bigint[];
BEGIN
    SELECT coalesce(array_agg(l.id ORDER BY l.id), '{}') INTO v_runs FROM (
        SELECT r.id FROM runs r
        WHERE r.owner = p_owner AND r.lease_token >= (SELECT workflow_epoch())
        ORDER BY r.id
        FOR NO KEY UPDATE) l;
    WITH lengths AS (
        SELECT u.id, (SELECT coalesce(max(j.seq) + 1, 0) FROM journal j
                      WHERE j.run_id = u.id) AS len
        FROM unnest(v_runs) AS u(id)),
    renewed AS (
        UPDATE runs r SET lease_until = now() + p_lease_ms * interval '1 millisecond',
                          journal_len = l.len
        FROM lengths l
        WHERE r.id = l.id AND r.owner = p_owner AND l.len >= r.journal_len
        RETURNING r.id)
    SELECT coalesce(array_agg(id ORDER BY id), '{}') INTO v_renewed FROM renewed;
    RETURN v_renewed;
END
$$;
