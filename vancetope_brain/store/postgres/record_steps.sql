-- JournalStore.record_steps in one statement (journal.py): the process's lanes row locked
-- FOR UPDATE and its epoch checked under the lock, then the count and the upserts. In a
-- function each statement reads a snapshot taken when it starts, so the count, run after
-- the lock, sees every entry committed before it, as in a transaction of several statements.
-- p_keys and p_states are the entries in order, each key once (the caller keeps a key given
-- twice at its first place with its last state), p_docs their documents (a jsonb array: one
-- parameter, where a text[] of JSON would cost the client an escape per quote).
-- Returns 'missing' (no such lane), 'fenced' (another epoch), 'full' (the entries would pass
-- p_max: nothing written) or 'ok'.
CREATE OR REPLACE FUNCTION vt_record_steps(
    p_tenant text, p_process text, p_epoch bigint, p_keys text[], p_states text[],
    p_docs jsonb, p_max integer) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    v_epoch bigint;
    v_held bigint;
BEGIN
    SELECT epoch INTO v_epoch FROM lanes
     WHERE process_id = p_process AND tenant_id = p_tenant FOR UPDATE;
    IF NOT FOUND THEN
        RETURN 'missing';
    END IF;
    IF v_epoch <> p_epoch THEN
        RETURN 'fenced';
    END IF;
    IF cardinality(p_keys) = 0 THEN
        RETURN 'ok';
    END IF;
    SELECT COUNT(*) INTO v_held FROM journal
     WHERE tenant_id = p_tenant AND process_id = p_process AND key <> ALL(p_keys);
    IF v_held + cardinality(p_keys) > p_max THEN
        RETURN 'full';
    END IF;
    INSERT INTO journal (tenant_id, process_id, key, state, doc)
    SELECT p_tenant, p_process, e.k, e.s, p_docs -> (e.ord::integer - 1)
      FROM unnest(p_keys, p_states) WITH ORDINALITY AS e(k, s, ord) ORDER BY e.ord
        ON CONFLICT (tenant_id, process_id, key)
        DO UPDATE SET state = excluded.state, doc = excluded.doc;
    RETURN 'ok';
END
$$
