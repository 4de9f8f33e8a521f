-- LaneStore.commit_turn of an ordinary turn (no spawns, outbox messages, dead letters or
-- timers) in one statement (lanes.py): the same writes, in the same order of locks, as the
-- transaction of several statements that commits the other turns. Each statement of a
-- function reads a snapshot taken when it starts, so everything after the lock sees every
-- write committed before it, as in that transaction.
--
-- p_lines: the turn's chat lines as a jsonb array of their documents (seq 0), in order, one
-- per (source message, role); each is numbered from the lane's next_chat_seq, and one whose
-- (source message, role) is stored already is skipped and takes no number.
-- p_outcome: merged over the process's document (closeReason, lastError, engineFailures,
-- updatedAt and, if the turn set it, engineState).
-- p_event: an outbox event's document with everything the function fills in (id,
-- sessionId, index, type, data) at placeholder values; p_events: the turn's other events
-- as [{"type", "data"}]. A written line's event ('chat:' || its id, type p_chat_type, its
-- document as data) comes first, the others after, numbered in that order.
-- p_drained: the messages the turn drained, each once; fewer of them still undrained than
-- listed means another turn got there first: nothing is written.
-- p_usage: the turn's token usage rows as [{"t" tenant, "d" day, "s" session, "m" model,
-- "u" user, "p" project, "i" tokens in, "o" tokens out, "c" calls, "e" estimated calls}],
-- added to the totals of llm_usage (the statement of usage.py's _ADD, word for word).
--
-- Returns {"status": "missing" | "fenced"} having written nothing, or {"status": "ok",
-- "lines": [the written lines' documents, in seq order], "events": [the events' documents]}.
CREATE OR REPLACE FUNCTION vt_commit_turn(
    p_tenant text, p_process text, p_epoch bigint, p_lines jsonb, p_status text,
    p_control_handled text, p_outcome jsonb, p_uncounted text[], p_clear_journal boolean,
    p_in_doubt boolean, p_in_doubt_state text, p_turn_id text, p_turn_doc jsonb,
    p_event jsonb, p_events jsonb, p_chat_type text, p_created_ms bigint, p_now text,
    p_drained text[], p_usage jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_epoch bigint;
    v_chat_seq bigint;
    v_session text;
    v_drained integer;
    v_lines jsonb;
    v_last bigint;
    v_written integer;
    v_events jsonb := '[]'::jsonb;
BEGIN
    SELECT l.epoch, l.next_chat_seq, (SELECT p.session_id FROM processes p WHERE p.id = l.process_id)
      INTO v_epoch, v_chat_seq, v_session
      FROM lanes l WHERE l.process_id = p_process AND l.tenant_id = p_tenant FOR UPDATE;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('status', 'missing');
    END IF;
    IF v_epoch <> p_epoch THEN
        RETURN jsonb_build_object('status', 'fenced');
    END IF;
    -- The drain first: the block undoes it when another turn drained one of them.
    BEGIN
        UPDATE messages SET drained_at = p_now, drained_epoch = p_epoch
         WHERE id = ANY(p_drained) AND tenant_id = p_tenant AND target_process_id = p_process
           AND drained_at IS NULL;
        GET DIAGNOSTICS v_drained = ROW_COUNT;
        IF v_drained <> cardinality(p_drained) THEN
            RAISE EXCEPTION USING ERRCODE = 'VTFEN';
        END IF;
    EXCEPTION WHEN SQLSTATE 'VTFEN' THEN
        RETURN jsonb_build_object('status', 'fenced');
    END;
    WITH line AS (
        SELECT x.doc, x.ord FROM jsonb_array_elements(p_lines) WITH ORDINALITY AS x(doc, ord)),
    fresh AS (
        SELECT line.doc, line.ord, v_chat_seq + row_number() OVER (ORDER BY line.ord) AS seq
          FROM line
         WHERE line.doc->>'sourceMessageId' IS NULL OR NOT EXISTS (
               SELECT 1 FROM chat c WHERE c.tenant_id = p_tenant AND c.process_id = p_process
                  AND c.source_message_id = line.doc->>'sourceMessageId'
                  AND c.role = line.doc->>'role')),
    ins AS (
        INSERT INTO chat (id, tenant_id, process_id, seq, role, source_message_id, doc)
        SELECT f.doc->>'id', p_tenant, p_process, f.seq, f.doc->>'role',
               f.doc->>'sourceMessageId', f.doc || jsonb_build_object('seq', f.seq)
          FROM fresh f ORDER BY f.ord
            ON CONFLICT (tenant_id, process_id, source_message_id, role)
               WHERE source_message_id IS NOT NULL DO NOTHING
        RETURNING chat.seq, chat.doc)
    SELECT coalesce(jsonb_agg(ins.doc ORDER BY ins.seq), '[]'::jsonb), max(ins.seq)
      INTO v_lines, v_last FROM ins;
    -- Both CASEs read the row as it was before this UPDATE; a NULL p_control_handled
    -- matches nothing, so a pending call is then kept.
    UPDATE lanes SET status = p_status, next_chat_seq = coalesce(v_last, v_chat_seq),
           turn_attempts = 0,
           pending_control = CASE WHEN pending_control = p_control_handled THEN NULL
                                  ELSE pending_control END,
           control_requested_ms = CASE WHEN pending_control = p_control_handled THEN NULL
                                       ELSE control_requested_ms END
     WHERE process_id = p_process;
    UPDATE processes SET doc = doc || p_outcome WHERE id = p_process;
    IF cardinality(p_uncounted) > 0 THEN
        UPDATE messages SET attempts = attempts - 1
         WHERE id = ANY(p_uncounted) AND tenant_id = p_tenant AND target_process_id = p_process
           AND drained_at IS NULL AND attempts > 0;
    END IF;
    IF p_clear_journal THEN
        DELETE FROM journal WHERE tenant_id = p_tenant AND process_id = p_process
           AND (p_in_doubt OR state <> p_in_doubt_state);
    END IF;
    INSERT INTO turns (id, tenant_id, process_id, epoch, doc)
    VALUES (p_turn_id, p_tenant, p_process, p_epoch, p_turn_doc);
    IF jsonb_array_length(p_usage) > 0 THEN
        INSERT INTO llm_usage AS cur (tenant_id, day, session_id, model, user_id, project_id,
               tokens_in, tokens_out, calls, estimated_calls)
        SELECT t, d, s, m, u, p, i, o, c, e FROM jsonb_to_recordset(p_usage) AS x(t text,
               d text, s text, m text, u text, p text, i bigint, o bigint, c bigint, e bigint)
            ON CONFLICT (tenant_id, day, session_id, model, user_id, project_id) DO UPDATE SET
               tokens_in = cur.tokens_in + excluded.tokens_in,
               tokens_out = cur.tokens_out + excluded.tokens_out,
               calls = cur.calls + excluded.calls,
               estimated_calls = cur.estimated_calls + excluded.estimated_calls;
    END IF;
    v_written := jsonb_array_length(v_lines);
    IF v_written > 0 OR jsonb_array_length(p_events) > 0 THEN
        WITH ev AS (
            SELECT 'chat:' || (x.doc->>'id') AS id, x.ord - 1 AS idx, p_chat_type AS type,
                   x.doc AS data
              FROM jsonb_array_elements(v_lines) WITH ORDINALITY AS x(doc, ord)
            UNION ALL
            SELECT p_process || ':' || p_epoch || ':' || (v_written + y.ord - 1),
                   v_written + y.ord - 1, y.e->>'type', y.e->'data'
              FROM jsonb_array_elements(p_events) WITH ORDINALITY AS y(e, ord)),
        doc AS (
            SELECT ev.id, ev.idx, p_event || jsonb_build_object(
                       'id', ev.id, 'sessionId', v_session, 'index', ev.idx,
                       'type', ev.type, 'data', ev.data) AS doc
              FROM ev),
        ins AS (
            INSERT INTO event_outbox (id, tenant_id, process_id, epoch, idx, created_ms, doc)
            SELECT doc.id, p_tenant, p_process, p_epoch, doc.idx, p_created_ms, doc.doc
              FROM doc ON CONFLICT (id) DO NOTHING)
        SELECT jsonb_agg(doc.doc ORDER BY doc.idx) INTO v_events FROM doc;
    END IF;
    RETURN jsonb_build_object('status', 'ok', 'lines', v_lines, 'events', v_events);
END
$$
