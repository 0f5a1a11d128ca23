-- The epoch of fencing tokens: the server's current timeline id, shifted above the 32 bits
-- of a run's own claim counter. A promoted standby starts a new timeline, higher than every
-- timeline before it, so a token handed out after a failover is higher than any handed out
-- before it, even by claims the failover lost (asynchronous replication). Only callable on
-- the writable server (the WAL position of a standby is not its own).
CREATE OR REPLACE FUNCTION workflow_epoch()
RETURNS bigint
LANGUAGE sql VOLATILE AS $$
    SELECT ((('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint)
            << 32)
$$;
