-- The fencing token a new claim of a run gets: one more than its last, and at least the
-- first of the current epoch (`workflow_epoch`), so tokens never go back across a
-- failover. The low 32 bits count the run's claims within an epoch.
CREATE OR REPLACE FUNCTION workflow_next_token(p_token bigint)
RETURNS bigint
LANGUAGE sql VOLATILE AS $$
    SELECT greatest(p_token + 1, workflow_epoch() + 1)
$$;
