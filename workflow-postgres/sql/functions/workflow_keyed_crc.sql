-- The checksum of a row under the id `p_key` the server just assigned: `p_base` is the
-- checksum computed with the id 0, `p_bits[i]` what bit i - 1 of the id changes (see
-- `Keyed` in the library's checksum module).
CREATE OR REPLACE FUNCTION workflow_keyed_crc(p_base bigint, p_bits bigint[], p_key bigint)
RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$
    SELECT p_base # coalesce(bit_xor(b.bit), 0)
    FROM unnest(p_bits) WITH ORDINALITY AS b(bit, i)
    WHERE p_key & (1::bigint << (b.i::int - 1)) <> 0
$$;
