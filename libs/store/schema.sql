CREATE TYPE public.inbox_disposition AS ENUM (
    'applied',
    'ignored',
    'refused'
);

CREATE FUNCTION public.ev_expect_case_state(held boolean, case_id uuid) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
BEGIN
  IF held IS NOT TRUE THEN
    RAISE EXCEPTION 'case % did not derive the expected state', case_id USING ERRCODE = 'EV001';
  END IF;
  RETURN true;
END
$$;

CREATE FUNCTION public.ledger_refuse_change() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
  RAISE EXCEPTION 'ledger is append-only: % refused', TG_OP
    USING ERRCODE = 'insufficient_privilege',
          HINT = 'append a new ledger record instead of changing or removing one';
END;
$$;

CREATE FUNCTION public.paper_document(p_paper_id uuid, p_revision integer) RETURNS bytea
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
  r record;
  m jsonb;
  n integer;
  found_n integer;
  missing integer;
  joined bytea := ''::bytea;
  tail bytea;
BEGIN
  SELECT pr.bytes, pr.layout, p.case_id INTO r
    FROM paper_revisions pr JOIN papers p ON p.id = pr.paper_id
   WHERE pr.paper_id = p_paper_id AND pr.revision = p_revision;
  IF NOT FOUND THEN RETURN NULL; END IF;
  IF r.layout IS NULL THEN RETURN r.bytes; END IF;
  IF r.layout = 'spans.v1' THEN RETURN spans_document(r.case_id, r.bytes); END IF;
  -- Bytes that are not a manifest any more (altered) are returned as they are: their hash
  -- cannot match, so the reader reports them corrupt rather than missing.
  BEGIN
    m := convert_from(r.bytes, 'UTF8')::jsonb;
    n := (m->>'count')::integer;
  EXCEPTION WHEN others THEN
    RETURN r.bytes;
  END;
  IF jsonb_typeof(m) <> 'object' OR n IS NULL OR n < 0 OR jsonb_typeof(m->'before') <> 'string' OR jsonb_typeof(m->'after') <> 'string' THEN
    RETURN r.bytes;
  END IF;
  IF m ? 'tail' THEN
    SELECT b.bytes INTO tail FROM history_blocks b WHERE b.case_id = r.case_id AND b.hash = m->>'tail';
    IF NOT FOUND THEN RETURN NULL; END IF;
  ELSE
    tail := convert_to(m->>'after', 'UTF8');
  END IF;
  IF n = 0 THEN
    RETURN convert_to(m->>'before', 'UTF8') || tail;
  END IF;
  WITH RECURSIVE chain(hash, prev, bytes, layout, pos) AS (
    SELECT b.hash, b.prev, b.bytes, b.layout, 1 FROM history_blocks b WHERE b.case_id = r.case_id AND b.hash = m->>'head'
    UNION ALL
    SELECT b.hash, b.prev, b.bytes, b.layout, c.pos + 1
      FROM chain c JOIN history_blocks b ON b.case_id = r.case_id AND b.hash = c.prev
     WHERE c.pos < n
  ),
  doc AS (
    SELECT chain.pos, CASE WHEN chain.layout IS NULL THEN chain.bytes ELSE spans_document(r.case_id, chain.bytes) END AS bytes FROM chain
  )
  SELECT count(*)::integer, (count(*) FILTER (WHERE doc.bytes IS NULL))::integer, string_agg(doc.bytes, '\x2c'::bytea ORDER BY doc.pos DESC)
    INTO found_n, missing, joined FROM doc;
  IF found_n <> n OR missing > 0 THEN RETURN NULL; END IF;
  RETURN convert_to(m->>'before', 'UTF8') || joined || tail;
END;
$$;

CREATE FUNCTION public.spans_document(p_case_id uuid, p_bytes bytea) RETURNS bytea
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
  m jsonb;
  wanted integer;
  found_n integer;
  joined bytea;
BEGIN
  BEGIN
    m := convert_from(p_bytes, 'UTF8')::jsonb;
  EXCEPTION WHEN others THEN
    RETURN p_bytes;
  END;
  IF jsonb_typeof(m) <> 'object' OR jsonb_typeof(m->'parts') <> 'array' THEN
    RETURN p_bytes;
  END IF;
  SELECT (count(*) FILTER (WHERE x.o % 2 = 0))::integer, count(b.hash)::integer,
         string_agg(CASE WHEN x.o % 2 = 1 THEN convert_to(x.p, 'UTF8') ELSE b.bytes END, ''::bytea ORDER BY x.o)
    INTO wanted, found_n, joined
    FROM jsonb_array_elements_text(m->'parts') WITH ORDINALITY AS x(p, o)
    LEFT JOIN history_blocks b ON x.o % 2 = 0 AND b.case_id = p_case_id AND b.hash = x.p AND b.layout IS NULL;
  IF found_n <> wanted THEN RETURN NULL; END IF;
  RETURN COALESCE(joined, ''::bytea);
END;
$$;

CREATE FUNCTION public.tasks_charge_minutes() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
  IF OLD.state = 'running' AND OLD.running_since IS NOT NULL THEN
    NEW.budget_used_minutes := OLD.budget_used_minutes + extract(epoch FROM now() - OLD.running_since) / 60;
  END IF;
  IF OLD.state = 'parked' AND OLD.parked_at IS NOT NULL THEN
    NEW.waiting_minutes := OLD.waiting_minutes + extract(epoch FROM now() - OLD.parked_at) / 60;
  END IF;
  NEW.running_since := CASE WHEN NEW.state = 'running' THEN now() ELSE NULL END;
  RETURN NEW;
END;
$$;

CREATE TABLE public.case_cap_holds (
    cap text NOT NULL,
    holder text NOT NULL,
    case_id uuid NOT NULL,
    target text DEFAULT ''::text NOT NULL,
    task_id uuid NOT NULL,
    fence_epoch bigint NOT NULL,
    acquired_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT case_cap_holds_cap_check CHECK ((cap = ANY (ARRAY['modelCalls'::text, 'estateSessions'::text]))),
    CONSTRAINT case_cap_holds_holder_check CHECK (((length(holder) >= 1) AND (length(holder) <= 300))),
    CONSTRAINT case_cap_holds_target_check CHECK ((length(target) <= 400))
);

CREATE TABLE public.case_external_calls (
    case_id uuid NOT NULL,
    task_id uuid NOT NULL,
    call_id text NOT NULL,
    at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT case_external_calls_call_id_check CHECK (((length(call_id) >= 1) AND (length(call_id) <= 200)))
);

CREATE TABLE public.case_inputs (
    input_key text NOT NULL,
    case_id uuid NOT NULL,
    origin_key text NOT NULL,
    source text NOT NULL,
    applied_as text NOT NULL,
    question_id uuid,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT case_inputs_applied_as_check CHECK ((applied_as = ANY (ARRAY['opened'::text, 'answered'::text, 'appended'::text, 'reopened'::text, 'closed'::text]))),
    CONSTRAINT case_inputs_check CHECK (((applied_as = 'answered'::text) = (question_id IS NOT NULL))),
    CONSTRAINT case_inputs_source_check CHECK ((source = ANY (ARRAY['mailbox'::text, 'webhook'::text, 'api'::text, 'schedule'::text])))
);

CREATE TABLE public.case_message_ids (
    message_id text NOT NULL,
    case_id uuid NOT NULL,
    direction text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT case_message_ids_direction_check CHECK ((direction = ANY (ARRAY['received'::text, 'sent'::text])))
);

CREATE TABLE public.case_sessions (
    case_id uuid NOT NULL,
    state text NOT NULL,
    controller text NOT NULL,
    since timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT case_sessions_controller_check CHECK (((length(controller) >= 1) AND (length(controller) <= 200))),
    CONSTRAINT case_sessions_state_check CHECK ((state = ANY (ARRAY['live'::text, 'stopped'::text, 'resumed'::text, 'deleted'::text])))
);

CREATE TABLE public.cases (
    id uuid NOT NULL,
    case_type text NOT NULL,
    state text DEFAULT 'opened'::text NOT NULL,
    origin_key text NOT NULL,
    customer text NOT NULL,
    title text DEFAULT ''::text NOT NULL,
    objective jsonb DEFAULT '{}'::jsonb NOT NULL,
    scope jsonb DEFAULT '{}'::jsonb NOT NULL,
    row_version bigint DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    stop_mode text,
    state_reason text,
    state_since timestamp with time zone DEFAULT now() NOT NULL,
    closed_at timestamp with time zone,
    closed_by text,
    CONSTRAINT cases_state_check CHECK ((state = ANY (ARRAY['opened'::text, 'running'::text, 'parked'::text, 'at_gate'::text, 'held'::text, 'resolved'::text, 'closed'::text, 'cancelled'::text]))),
    CONSTRAINT cases_stop_mode_check CHECK ((stop_mode = ANY (ARRAY['hard'::text, 'soft'::text])))
)
WITH (autovacuum_analyze_threshold='10000', autovacuum_vacuum_insert_threshold='10000', autovacuum_vacuum_threshold='10000');

CREATE TABLE public.consents (
    gate_id uuid NOT NULL,
    task_id uuid NOT NULL,
    call_id uuid NOT NULL,
    tool_name text NOT NULL,
    arguments jsonb NOT NULL,
    destination jsonb NOT NULL,
    rule text NOT NULL,
    consumed_at timestamp with time zone
);

CREATE TABLE public.cost_ledger (
    id uuid NOT NULL,
    case_id uuid NOT NULL,
    task_id uuid,
    call_id uuid,
    route text NOT NULL,
    model text NOT NULL,
    input_tokens integer,
    output_tokens integer,
    cost numeric,
    recorded_at timestamp with time zone DEFAULT now() NOT NULL
)
WITH (autovacuum_analyze_threshold='100000', autovacuum_vacuum_insert_threshold='100000');

CREATE TABLE public.customer_notifications (
    id uuid NOT NULL,
    case_id uuid NOT NULL,
    root_task_id uuid NOT NULL,
    channel text NOT NULL,
    message_id text NOT NULL,
    text text NOT NULL,
    delivered_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT customer_notifications_channel_check CHECK ((channel = ANY (ARRAY['mail'::text, 'webhook'::text, 'stored'::text])))
);

CREATE TABLE public.dead_letters (
    seq bigint NOT NULL,
    consumer text NOT NULL,
    message_id text,
    type text,
    reason text NOT NULL,
    detail text DEFAULT ''::text NOT NULL,
    payload_hash text,
    recorded_at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE SEQUENCE public.dead_letters_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.dead_letters_seq_seq OWNED BY public.dead_letters.seq;

CREATE TABLE public.decisions (
    id uuid NOT NULL,
    gate_id uuid NOT NULL,
    decision text NOT NULL,
    verdict text NOT NULL,
    principal text NOT NULL,
    role text NOT NULL,
    digest text NOT NULL,
    reason text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT decisions_verdict_check CHECK ((verdict = ANY (ARRAY['approve'::text, 'reject'::text])))
);

CREATE TABLE public.effect_dispatches (
    grant_id uuid NOT NULL,
    gate_id uuid NOT NULL,
    case_id uuid NOT NULL,
    task_id uuid NOT NULL,
    state text DEFAULT 'pending'::text NOT NULL,
    call_id uuid,
    attempt integer DEFAULT 0 NOT NULL,
    waiting_key text,
    claimed_by text,
    claimed_until timestamp with time zone,
    next_at timestamp with time zone DEFAULT now() NOT NULL,
    checks integer DEFAULT 0 NOT NULL,
    detail jsonb DEFAULT '{}'::jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    traceparent text,
    CONSTRAINT effect_dispatches_attempt_check CHECK ((attempt >= 0)),
    CONSTRAINT effect_dispatches_call_after_intent CHECK (((state <> ALL (ARRAY['executing'::text, 'reconciling'::text, 'settling'::text])) OR (call_id IS NOT NULL))),
    CONSTRAINT effect_dispatches_state_check CHECK ((state = ANY (ARRAY['pending'::text, 'coordination'::text, 'executing'::text, 'reconciling'::text, 'settling'::text, 'settled'::text, 'refused'::text]))),
    CONSTRAINT effect_dispatches_traceparent_w3c CHECK ((traceparent ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$'::text)),
    CONSTRAINT effect_dispatches_waiting_iff_coordination CHECK (((state = 'coordination'::text) = (waiting_key IS NOT NULL)))
);

CREATE TABLE public.effect_operator_outcomes (
    id uuid NOT NULL,
    call_id uuid NOT NULL,
    case_id uuid NOT NULL,
    attempt integer NOT NULL,
    outcome text NOT NULL,
    principal text NOT NULL,
    evidence text NOT NULL,
    proof_paper_id uuid,
    recorded_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT effect_operator_outcomes_attempt_check CHECK ((attempt >= 1)),
    CONSTRAINT effect_operator_outcomes_evidence_check CHECK (((length(evidence) >= 1) AND (length(evidence) <= 4000))),
    CONSTRAINT effect_operator_outcomes_outcome_check CHECK ((outcome = ANY (ARRAY['applied'::text, 'not_applied'::text, 'partly_applied'::text])))
);

CREATE TABLE public.fleet_stop_events (
    seq bigint NOT NULL,
    action text NOT NULL,
    kind text NOT NULL,
    reason text,
    actor text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT fleet_stop_events_action_check CHECK ((action = ANY (ARRAY['stop'::text, 'resume'::text]))),
    CONSTRAINT fleet_stop_events_kind_check CHECK ((kind = ANY (ARRAY['hard'::text, 'soft'::text])))
);

CREATE SEQUENCE public.fleet_stop_events_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.fleet_stop_events_seq_seq OWNED BY public.fleet_stop_events.seq;

CREATE TABLE public.fleet_stops (
    kind text NOT NULL,
    active boolean DEFAULT false NOT NULL,
    reason text,
    changed_by text,
    changed_at timestamp with time zone,
    CONSTRAINT fleet_stops_check CHECK (((NOT active) OR ((reason IS NOT NULL) AND (changed_by IS NOT NULL) AND (changed_at IS NOT NULL)))),
    CONSTRAINT fleet_stops_kind_check CHECK ((kind = ANY (ARRAY['hard'::text, 'soft'::text])))
);

CREATE TABLE public.gates (
    id uuid NOT NULL,
    case_id uuid NOT NULL,
    task_id uuid NOT NULL,
    packet_digest text NOT NULL,
    operation text NOT NULL,
    effect_class text NOT NULL,
    required_decisions jsonb DEFAULT '[]'::jsonb NOT NULL,
    state text DEFAULT 'open'::text NOT NULL,
    expires_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    decided_at timestamp with time zone,
    packet_paper_id uuid,
    packet_revision integer,
    mutation_key text,
    propose_call_id uuid,
    impact_keys jsonb DEFAULT '[]'::jsonb NOT NULL,
    summary text,
    reason text,
    kind text DEFAULT 'write'::text NOT NULL,
    deadline_at timestamp with time zone,
    escalated_at timestamp with time zone,
    escalations integer DEFAULT 0 NOT NULL,
    traceparent text,
    CONSTRAINT gates_escalations_check CHECK ((escalations >= 0)),
    CONSTRAINT gates_kind_check CHECK ((kind = ANY (ARRAY['write'::text, 'consent'::text]))),
    CONSTRAINT gates_open_has_packet CHECK (((state <> 'open'::text) OR (kind = 'consent'::text) OR ((packet_paper_id IS NOT NULL) AND (packet_revision IS NOT NULL)))),
    CONSTRAINT gates_state_check CHECK ((state = ANY (ARRAY['open'::text, 'approved'::text, 'rejected'::text, 'expired'::text, 'revoked'::text]))),
    CONSTRAINT gates_traceparent_w3c CHECK ((traceparent ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$'::text))
);

CREATE TABLE public.grants (
    id uuid NOT NULL,
    case_id uuid NOT NULL,
    gate_id uuid,
    packet_digest text NOT NULL,
    state text DEFAULT 'issued'::text NOT NULL,
    reserved_call_id uuid,
    issued_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    revoked_at timestamp with time zone,
    task_id uuid,
    consumed_at timestamp with time zone,
    revoke_reason text,
    CONSTRAINT grants_reserved_has_call CHECK (((state = ANY (ARRAY['reserved'::text, 'consumed'::text])) = (reserved_call_id IS NOT NULL))),
    CONSTRAINT grants_state_check CHECK ((state = ANY (ARRAY['issued'::text, 'reserved'::text, 'consumed'::text, 'expired'::text, 'revoked'::text])))
);

CREATE TABLE public.history_blocks (
    case_id uuid NOT NULL,
    hash text NOT NULL,
    prev text,
    size_bytes integer NOT NULL,
    bytes bytea NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    layout text,
    CONSTRAINT history_blocks_layout_check CHECK ((layout = 'spans.v1'::text))
)
WITH (autovacuum_analyze_threshold='100000', autovacuum_vacuum_insert_threshold='100000');

CREATE TABLE public.impact_claims (
    impact_key text NOT NULL,
    case_id uuid NOT NULL,
    task_id uuid NOT NULL,
    call_id uuid,
    claimed_at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE TABLE public.inbox_messages (
    consumer text NOT NULL,
    message_id uuid NOT NULL,
    payload_hash text NOT NULL,
    type text NOT NULL,
    disposition public.inbox_disposition NOT NULL,
    received_at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE TABLE public.ledger (
    case_id uuid NOT NULL,
    seq bigint NOT NULL,
    record_id uuid NOT NULL,
    kind text NOT NULL,
    body jsonb NOT NULL,
    prev_hash text NOT NULL,
    hash text NOT NULL,
    created_at timestamp with time zone NOT NULL,
    CONSTRAINT ledger_seq_check CHECK ((seq >= 1))
)
WITH (autovacuum_analyze_threshold='100000', autovacuum_vacuum_insert_threshold='100000');

CREATE TABLE public.ledger_heads (
    case_id uuid NOT NULL,
    seq bigint NOT NULL,
    hash text NOT NULL
)
WITH (autovacuum_analyze_threshold='10000', autovacuum_vacuum_insert_threshold='10000', autovacuum_vacuum_threshold='10000');

CREATE TABLE public.mailbox_cursors (
    mailbox_key text NOT NULL,
    uid_validity bigint NOT NULL,
    last_uid bigint NOT NULL,
    watermark text,
    rescan_since text,
    rescan_through bigint,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT mailbox_cursors_last_uid_check CHECK ((last_uid >= 0)),
    CONSTRAINT mailbox_cursors_rescan CHECK (((rescan_since IS NULL) OR (rescan_through IS NOT NULL))),
    CONSTRAINT mailbox_cursors_uid_validity_check CHECK ((uid_validity >= 0))
);

CREATE TABLE public.outbox_messages (
    seq bigint NOT NULL,
    message_id uuid NOT NULL,
    type text NOT NULL,
    routing_key text NOT NULL,
    case_id uuid,
    body bytea NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    claimed_by text,
    claimed_until timestamp with time zone,
    attempts integer DEFAULT 0 NOT NULL,
    published_at timestamp with time zone,
    traceparent text,
    CONSTRAINT outbox_messages_traceparent_w3c CHECK ((traceparent ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$'::text))
);

CREATE SEQUENCE public.outbox_messages_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.outbox_messages_seq_seq OWNED BY public.outbox_messages.seq;

CREATE TABLE public.paper_revisions (
    paper_id uuid NOT NULL,
    revision integer NOT NULL,
    schema_id text NOT NULL,
    content_hash text NOT NULL,
    size_bytes integer NOT NULL,
    bytes bytea NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    layout text,
    CONSTRAINT paper_revisions_layout_check CHECK ((layout = ANY (ARRAY['history-manifest.v1'::text, 'spans.v1'::text]))),
    CONSTRAINT paper_revisions_revision_check CHECK ((revision >= 1))
)
WITH (autovacuum_analyze_threshold='100000', autovacuum_vacuum_insert_threshold='100000');
ALTER TABLE ONLY public.paper_revisions ALTER COLUMN bytes SET COMPRESSION lz4;

CREATE TABLE public.papers (
    id uuid NOT NULL,
    case_id uuid NOT NULL,
    kind text NOT NULL,
    name text NOT NULL,
    head_revision integer DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL
)
WITH (autovacuum_analyze_threshold='100000', autovacuum_vacuum_insert_threshold='100000');

CREATE TABLE public.plan_confirmations (
    task_id uuid NOT NULL,
    revision integer NOT NULL,
    confirmed_by uuid NOT NULL,
    plan_hash text NOT NULL,
    message_id uuid,
    confirmed_at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE TABLE public.plan_revisions (
    task_id uuid NOT NULL,
    revision integer NOT NULL,
    expected_revision integer NOT NULL,
    plan_hash text NOT NULL,
    paper_id uuid,
    steps jsonb NOT NULL,
    submitted_by uuid,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    row_version bigint,
    CONSTRAINT plan_revisions_expected_revision_check CHECK ((expected_revision >= 0)),
    CONSTRAINT plan_revisions_in_order CHECK ((expected_revision = (revision - 1))),
    CONSTRAINT plan_revisions_revision_check CHECK ((revision >= 1))
);

CREATE TABLE public.plan_steps (
    task_id uuid NOT NULL,
    step_id text NOT NULL,
    revision integer NOT NULL,
    title text DEFAULT ''::text NOT NULL,
    depends_on jsonb DEFAULT '[]'::jsonb NOT NULL,
    status text DEFAULT 'pending'::text NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT plan_steps_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'active'::text, 'done'::text, 'waiting'::text, 'dropped'::text])))
);

CREATE TABLE public.questions (
    id uuid NOT NULL,
    case_id uuid NOT NULL,
    task_id uuid NOT NULL,
    gap text NOT NULL,
    checked jsonb DEFAULT '[]'::jsonb NOT NULL,
    depends_on jsonb DEFAULT '[]'::jsonb NOT NULL,
    alternatives jsonb DEFAULT '[]'::jsonb NOT NULL,
    decision_needed text NOT NULL,
    answer text,
    answered_by text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    answered_at timestamp with time zone,
    asked_by uuid,
    kind text DEFAULT 'agent'::text NOT NULL,
    deadline_at timestamp with time zone,
    escalated_at timestamp with time zone,
    escalations integer DEFAULT 0 NOT NULL,
    CONSTRAINT questions_escalations_check CHECK ((escalations >= 0)),
    CONSTRAINT questions_kind_check CHECK ((kind = ANY (ARRAY['agent'::text, 'versions'::text])))
);

CREATE TABLE public.route_health (
    route text NOT NULL,
    last_ok_at timestamp with time zone,
    last_failure_at timestamp with time zone
);

CREATE TABLE public.runtime_calls (
    id uuid NOT NULL,
    task_id uuid NOT NULL,
    turn integer NOT NULL,
    ordinal integer NOT NULL,
    kind text NOT NULL,
    tool_name text,
    status text NOT NULL,
    fence_epoch bigint NOT NULL,
    request_paper_id uuid,
    request_hash text,
    response_paper_id uuid,
    response_hash text,
    logical_key text,
    route text,
    versions jsonb DEFAULT '{}'::jsonb NOT NULL,
    outcome_class text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    completed_at timestamp with time zone,
    effect_attempt integer,
    CONSTRAINT runtime_calls_effect_attempt_check CHECK ((effect_attempt >= 1)),
    CONSTRAINT runtime_calls_kind_check CHECK ((kind = ANY (ARRAY['model'::text, 'read'::text, 'control'::text, 'effect'::text]))),
    CONSTRAINT runtime_calls_ordinal_check CHECK ((ordinal >= 0)),
    CONSTRAINT runtime_calls_status_check CHECK ((status = ANY (ARRAY['intent'::text, 'completed'::text, 'failed'::text, 'unknown'::text, 'refused'::text, 'shadowed'::text]))),
    CONSTRAINT runtime_calls_turn_check CHECK ((turn >= 0))
)
WITH (autovacuum_analyze_threshold='100000', autovacuum_vacuum_insert_threshold='100000', autovacuum_vacuum_threshold='100000');

CREATE TABLE public.schema_migrations (
    version integer NOT NULL,
    name text NOT NULL,
    checksum text NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE TABLE public.task_notes (
    seq bigint NOT NULL,
    task_id uuid NOT NULL,
    kind text NOT NULL,
    body jsonb NOT NULL,
    source_message_id uuid,
    consumed_turn integer,
    created_at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE SEQUENCE public.task_notes_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.task_notes_seq_seq OWNED BY public.task_notes.seq;

CREATE TABLE public.tasks (
    id uuid NOT NULL,
    case_id uuid NOT NULL,
    parent_id uuid,
    profile text NOT NULL,
    profile_version text DEFAULT '1'::text NOT NULL,
    objective jsonb DEFAULT '{}'::jsonb NOT NULL,
    state text DEFAULT 'open'::text NOT NULL,
    park_reason text,
    park_detail jsonb,
    parked_at timestamp with time zone,
    row_version bigint DEFAULT 0 NOT NULL,
    fence_epoch bigint DEFAULT 0 NOT NULL,
    lease_owner text,
    lease_until timestamp with time zone,
    budget_limit_minutes numeric,
    budget_used_minutes numeric DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    root_task_id uuid,
    depth integer DEFAULT 0 NOT NULL,
    ancestry uuid[] DEFAULT '{}'::uuid[] NOT NULL,
    spawn_call_id uuid,
    context jsonb,
    wake_at timestamp with time zone,
    cancel_requested text,
    running_since timestamp with time zone,
    waiting_minutes numeric DEFAULT 0 NOT NULL,
    CONSTRAINT tasks_cancel_requested_check CHECK ((cancel_requested = ANY (ARRAY['hard'::text, 'soft'::text]))),
    CONSTRAINT tasks_depth_check CHECK ((depth >= 0)),
    CONSTRAINT tasks_park_reason_check CHECK ((park_reason = ANY (ARRAY['question'::text, 'gate'::text, 'sub_case'::text, 'connector_down'::text, 'provider_down'::text, 'budget'::text, 'capability_gap'::text, 'children'::text, 'consent'::text, 'capacity'::text]))),
    CONSTRAINT tasks_park_reason_iff_parked CHECK (((state = 'parked'::text) = (park_reason IS NOT NULL))),
    CONSTRAINT tasks_state_check CHECK ((state = ANY (ARRAY['open'::text, 'running'::text, 'parked'::text, 'done'::text, 'failed'::text, 'cancelled'::text])))
)
WITH (autovacuum_analyze_threshold='10000', autovacuum_vacuum_insert_threshold='10000', autovacuum_vacuum_threshold='10000');

CREATE TABLE public.turn_checkpoints (
    task_id uuid NOT NULL,
    turn integer NOT NULL,
    state_paper_id uuid NOT NULL,
    state_hash text NOT NULL,
    context_hash text,
    fence_epoch bigint NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    versions jsonb DEFAULT '{}'::jsonb NOT NULL,
    CONSTRAINT turn_checkpoints_turn_check CHECK ((turn >= 0))
)
WITH (autovacuum_analyze_threshold='100000', autovacuum_vacuum_insert_threshold='100000');

CREATE TABLE public.version_decisions (
    task_id uuid NOT NULL,
    versions_hash text NOT NULL,
    decision text NOT NULL,
    decided_by text NOT NULL,
    changed jsonb DEFAULT '[]'::jsonb NOT NULL,
    decided_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT version_decisions_decision_check CHECK ((decision = ANY (ARRAY['continue'::text, 'park'::text])))
);

CREATE TABLE public.web_sessions (
    id_hash text NOT NULL,
    principal text NOT NULL,
    csrf_hash text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    revoked_at timestamp with time zone,
    CONSTRAINT web_sessions_check CHECK ((expires_at > created_at)),
    CONSTRAINT web_sessions_csrf_hash_check CHECK ((csrf_hash ~ '^sha256:[0-9a-f]{64}$'::text)),
    CONSTRAINT web_sessions_id_hash_check CHECK ((id_hash ~ '^sha256:[0-9a-f]{64}$'::text)),
    CONSTRAINT web_sessions_principal_check CHECK (((length(principal) >= 1) AND (length(principal) <= 200)))
);

ALTER TABLE ONLY public.dead_letters ALTER COLUMN seq SET DEFAULT nextval('public.dead_letters_seq_seq'::regclass);

ALTER TABLE ONLY public.fleet_stop_events ALTER COLUMN seq SET DEFAULT nextval('public.fleet_stop_events_seq_seq'::regclass);

ALTER TABLE ONLY public.outbox_messages ALTER COLUMN seq SET DEFAULT nextval('public.outbox_messages_seq_seq'::regclass);

ALTER TABLE ONLY public.task_notes ALTER COLUMN seq SET DEFAULT nextval('public.task_notes_seq_seq'::regclass);

ALTER TABLE ONLY public.case_cap_holds
    ADD CONSTRAINT case_cap_holds_pkey PRIMARY KEY (cap, holder);

ALTER TABLE ONLY public.case_inputs
    ADD CONSTRAINT case_inputs_pkey PRIMARY KEY (input_key);

ALTER TABLE ONLY public.case_message_ids
    ADD CONSTRAINT case_message_ids_pkey PRIMARY KEY (message_id);

ALTER TABLE ONLY public.case_sessions
    ADD CONSTRAINT case_sessions_pkey PRIMARY KEY (case_id);

ALTER TABLE ONLY public.cases
    ADD CONSTRAINT cases_origin_key_key UNIQUE (origin_key);

ALTER TABLE ONLY public.cases
    ADD CONSTRAINT cases_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.consents
    ADD CONSTRAINT consents_call_id_key UNIQUE (call_id);

ALTER TABLE ONLY public.consents
    ADD CONSTRAINT consents_pkey PRIMARY KEY (gate_id);

ALTER TABLE ONLY public.cost_ledger
    ADD CONSTRAINT cost_ledger_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.customer_notifications
    ADD CONSTRAINT customer_notifications_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.customer_notifications
    ADD CONSTRAINT customer_notifications_root_task_id_key UNIQUE (root_task_id);

ALTER TABLE ONLY public.dead_letters
    ADD CONSTRAINT dead_letters_pkey PRIMARY KEY (seq);

ALTER TABLE ONLY public.decisions
    ADD CONSTRAINT decisions_gate_id_decision_key UNIQUE (gate_id, decision);

ALTER TABLE ONLY public.decisions
    ADD CONSTRAINT decisions_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.effect_dispatches
    ADD CONSTRAINT effect_dispatches_pkey PRIMARY KEY (grant_id);

ALTER TABLE ONLY public.effect_operator_outcomes
    ADD CONSTRAINT effect_operator_outcomes_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.fleet_stop_events
    ADD CONSTRAINT fleet_stop_events_pkey PRIMARY KEY (seq);

ALTER TABLE ONLY public.fleet_stops
    ADD CONSTRAINT fleet_stops_pkey PRIMARY KEY (kind);

ALTER TABLE ONLY public.gates
    ADD CONSTRAINT gates_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.grants
    ADD CONSTRAINT grants_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.grants
    ADD CONSTRAINT grants_reserved_call_id_key UNIQUE (reserved_call_id);

ALTER TABLE public.history_blocks
    ADD CONSTRAINT history_blocks_hash_check CHECK (((octet_length(hash) = 71) AND starts_with(hash, 'sha256:'::text) AND (ltrim(substr(hash, 8), '0123456789abcdef'::text) = ''::text))) NOT VALID;

ALTER TABLE ONLY public.history_blocks
    ADD CONSTRAINT history_blocks_pkey PRIMARY KEY (case_id, hash);

ALTER TABLE public.history_blocks
    ADD CONSTRAINT history_blocks_prev_check CHECK (((octet_length(prev) = 71) AND starts_with(prev, 'sha256:'::text) AND (ltrim(substr(prev, 8), '0123456789abcdef'::text) = ''::text))) NOT VALID;

ALTER TABLE ONLY public.impact_claims
    ADD CONSTRAINT impact_claims_pkey PRIMARY KEY (impact_key);

ALTER TABLE ONLY public.inbox_messages
    ADD CONSTRAINT inbox_messages_pkey PRIMARY KEY (message_id, consumer);

ALTER TABLE ONLY public.ledger_heads
    ADD CONSTRAINT ledger_heads_pkey PRIMARY KEY (case_id);

ALTER TABLE ONLY public.ledger
    ADD CONSTRAINT ledger_pkey PRIMARY KEY (case_id, seq);

ALTER TABLE ONLY public.ledger
    ADD CONSTRAINT ledger_record_id_key UNIQUE (record_id);

ALTER TABLE ONLY public.mailbox_cursors
    ADD CONSTRAINT mailbox_cursors_pkey PRIMARY KEY (mailbox_key);

ALTER TABLE ONLY public.outbox_messages
    ADD CONSTRAINT outbox_messages_message_id_key UNIQUE (message_id);

ALTER TABLE ONLY public.outbox_messages
    ADD CONSTRAINT outbox_messages_pkey PRIMARY KEY (seq);

ALTER TABLE ONLY public.paper_revisions
    ADD CONSTRAINT paper_revisions_pkey PRIMARY KEY (paper_id, revision);

ALTER TABLE ONLY public.papers
    ADD CONSTRAINT papers_case_id_name_key UNIQUE (case_id, name);

ALTER TABLE ONLY public.papers
    ADD CONSTRAINT papers_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.plan_confirmations
    ADD CONSTRAINT plan_confirmations_pkey PRIMARY KEY (task_id, revision);

ALTER TABLE ONLY public.plan_revisions
    ADD CONSTRAINT plan_revisions_pkey PRIMARY KEY (task_id, revision);

ALTER TABLE ONLY public.plan_steps
    ADD CONSTRAINT plan_steps_pkey PRIMARY KEY (task_id, step_id);

ALTER TABLE ONLY public.questions
    ADD CONSTRAINT questions_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.route_health
    ADD CONSTRAINT route_health_pkey PRIMARY KEY (route);

ALTER TABLE ONLY public.runtime_calls
    ADD CONSTRAINT runtime_calls_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.runtime_calls
    ADD CONSTRAINT runtime_calls_task_id_turn_ordinal_key UNIQUE (task_id, turn, ordinal);

ALTER TABLE ONLY public.schema_migrations
    ADD CONSTRAINT schema_migrations_pkey PRIMARY KEY (version);

ALTER TABLE ONLY public.task_notes
    ADD CONSTRAINT task_notes_pkey PRIMARY KEY (seq);

ALTER TABLE ONLY public.task_notes
    ADD CONSTRAINT task_notes_task_id_source_message_id_key UNIQUE (task_id, source_message_id);

ALTER TABLE ONLY public.tasks
    ADD CONSTRAINT tasks_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.tasks
    ADD CONSTRAINT tasks_spawn_call_id_key UNIQUE (spawn_call_id);

ALTER TABLE ONLY public.turn_checkpoints
    ADD CONSTRAINT turn_checkpoints_pkey PRIMARY KEY (task_id, turn);

ALTER TABLE ONLY public.version_decisions
    ADD CONSTRAINT version_decisions_pkey PRIMARY KEY (task_id, versions_hash);

ALTER TABLE ONLY public.web_sessions
    ADD CONSTRAINT web_sessions_pkey PRIMARY KEY (id_hash);

CREATE INDEX case_cap_holds_count_idx ON public.case_cap_holds USING btree (case_id, cap, target);

CREATE INDEX case_external_calls_window_idx ON public.case_external_calls USING btree (case_id, at);

CREATE INDEX case_inputs_case_idx ON public.case_inputs USING btree (case_id, created_at);

CREATE INDEX case_message_ids_case_idx ON public.case_message_ids USING btree (case_id);

CREATE INDEX cases_customer_created_idx ON public.cases USING btree (customer, created_at DESC, id DESC);

CREATE INDEX cases_state_idx ON public.cases USING btree (state, created_at DESC);

CREATE UNIQUE INDEX cost_ledger_call_idx ON public.cost_ledger USING btree (call_id) WHERE (call_id IS NOT NULL);

CREATE INDEX cost_ledger_case_idx ON public.cost_ledger USING btree (case_id);

CREATE INDEX customer_notifications_case_idx ON public.customer_notifications USING btree (case_id, delivered_at);

CREATE INDEX effect_dispatches_call_idx ON public.effect_dispatches USING btree (call_id) WHERE (call_id IS NOT NULL);

CREATE INDEX effect_dispatches_due_idx ON public.effect_dispatches USING btree (next_at) WHERE (state = ANY (ARRAY['pending'::text, 'executing'::text, 'reconciling'::text, 'settling'::text]));

CREATE INDEX effect_dispatches_gate_idx ON public.effect_dispatches USING btree (gate_id);

CREATE INDEX effect_dispatches_waiting_idx ON public.effect_dispatches USING btree (waiting_key) WHERE (state = 'coordination'::text);

CREATE INDEX effect_operator_outcomes_call_idx ON public.effect_operator_outcomes USING btree (call_id, attempt);

CREATE INDEX gates_case_idx ON public.gates USING btree (case_id);

CREATE INDEX gates_deadline_idx ON public.gates USING btree (deadline_at) WHERE ((state = 'open'::text) AND (deadline_at IS NOT NULL));

CREATE INDEX gates_expiry_idx ON public.gates USING btree (expires_at) WHERE ((state = 'open'::text) AND (expires_at IS NOT NULL));

CREATE INDEX gates_open_idx ON public.gates USING btree (created_at) WHERE (state = 'open'::text);

CREATE INDEX grants_case_idx ON public.grants USING btree (case_id);

CREATE INDEX grants_expiry_idx ON public.grants USING btree (expires_at) WHERE (state = 'issued'::text);

CREATE UNIQUE INDEX grants_one_per_gate_idx ON public.grants USING btree (gate_id) WHERE (gate_id IS NOT NULL);

CREATE INDEX impact_claims_call_idx ON public.impact_claims USING btree (call_id);

CREATE INDEX ledger_effect_postcheck_idx ON public.ledger USING btree (case_id, seq) WHERE (kind = 'effect_postcheck'::text);

CREATE INDEX outbox_messages_created_brin ON public.outbox_messages USING brin (created_at);

CREATE INDEX outbox_unpublished_idx ON public.outbox_messages USING btree (seq) WHERE (published_at IS NULL);

CREATE INDEX questions_case_idx ON public.questions USING btree (case_id);

CREATE INDEX questions_deadline_idx ON public.questions USING btree (deadline_at) WHERE ((answer IS NULL) AND (deadline_at IS NOT NULL));

CREATE INDEX questions_open_idx ON public.questions USING btree (case_id) WHERE (answer IS NULL);

CREATE INDEX runtime_calls_effect_task_idx ON public.runtime_calls USING btree (task_id) WHERE (kind = 'effect'::text);

CREATE UNIQUE INDEX runtime_calls_logical_key_idx ON public.runtime_calls USING btree (logical_key) WHERE (logical_key IS NOT NULL);

CREATE INDEX runtime_calls_unknown_effects_idx ON public.runtime_calls USING btree (created_at) WHERE ((kind = 'effect'::text) AND (status = ANY (ARRAY['intent'::text, 'unknown'::text])));

CREATE INDEX task_notes_open_idx ON public.task_notes USING btree (task_id, seq) WHERE (consumed_turn IS NULL);

CREATE INDEX tasks_case_idx ON public.tasks USING btree (case_id);

CREATE INDEX tasks_lease_idx ON public.tasks USING btree (lease_until) WHERE (state = 'running'::text);

CREATE INDEX tasks_parent_idx ON public.tasks USING btree (parent_id) WHERE (parent_id IS NOT NULL);

CREATE INDEX tasks_wake_idx ON public.tasks USING btree (wake_at) WHERE ((state = 'parked'::text) AND (wake_at IS NOT NULL));

CREATE INDEX web_sessions_expiry_idx ON public.web_sessions USING btree (expires_at) WHERE (revoked_at IS NULL);

CREATE TRIGGER ledger_no_truncate BEFORE TRUNCATE ON public.ledger FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_refuse_change();

CREATE TRIGGER ledger_no_update_delete BEFORE DELETE OR UPDATE ON public.ledger FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_refuse_change();

CREATE TRIGGER tasks_charge_minutes BEFORE UPDATE OF state ON public.tasks FOR EACH ROW WHEN ((old.state IS DISTINCT FROM new.state)) EXECUTE FUNCTION public.tasks_charge_minutes();

ALTER TABLE ONLY public.case_external_calls
    ADD CONSTRAINT case_external_calls_case_id_fkey FOREIGN KEY (case_id) REFERENCES public.cases(id);

ALTER TABLE ONLY public.case_inputs
    ADD CONSTRAINT case_inputs_case_id_fkey FOREIGN KEY (case_id) REFERENCES public.cases(id);

ALTER TABLE ONLY public.case_inputs
    ADD CONSTRAINT case_inputs_question_id_fkey FOREIGN KEY (question_id) REFERENCES public.questions(id);

ALTER TABLE ONLY public.case_message_ids
    ADD CONSTRAINT case_message_ids_case_id_fkey FOREIGN KEY (case_id) REFERENCES public.cases(id);

ALTER TABLE ONLY public.case_sessions
    ADD CONSTRAINT case_sessions_case_id_fkey FOREIGN KEY (case_id) REFERENCES public.cases(id);

ALTER TABLE ONLY public.consents
    ADD CONSTRAINT consents_gate_id_fkey FOREIGN KEY (gate_id) REFERENCES public.gates(id);

ALTER TABLE ONLY public.consents
    ADD CONSTRAINT consents_task_id_fkey FOREIGN KEY (task_id) REFERENCES public.tasks(id);

ALTER TABLE ONLY public.customer_notifications
    ADD CONSTRAINT customer_notifications_case_id_fkey FOREIGN KEY (case_id) REFERENCES public.cases(id);

ALTER TABLE ONLY public.customer_notifications
    ADD CONSTRAINT customer_notifications_root_task_id_fkey FOREIGN KEY (root_task_id) REFERENCES public.tasks(id);

ALTER TABLE ONLY public.decisions
    ADD CONSTRAINT decisions_gate_id_fkey FOREIGN KEY (gate_id) REFERENCES public.gates(id);

ALTER TABLE ONLY public.effect_dispatches
    ADD CONSTRAINT effect_dispatches_call_id_fkey FOREIGN KEY (call_id) REFERENCES public.runtime_calls(id);

ALTER TABLE ONLY public.effect_dispatches
    ADD CONSTRAINT effect_dispatches_case_id_fkey FOREIGN KEY (case_id) REFERENCES public.cases(id);

ALTER TABLE ONLY public.effect_dispatches
    ADD CONSTRAINT effect_dispatches_gate_id_fkey FOREIGN KEY (gate_id) REFERENCES public.gates(id);

ALTER TABLE ONLY public.effect_dispatches
    ADD CONSTRAINT effect_dispatches_grant_id_fkey FOREIGN KEY (grant_id) REFERENCES public.grants(id);

ALTER TABLE ONLY public.effect_dispatches
    ADD CONSTRAINT effect_dispatches_task_id_fkey FOREIGN KEY (task_id) REFERENCES public.tasks(id);

ALTER TABLE ONLY public.effect_operator_outcomes
    ADD CONSTRAINT effect_operator_outcomes_call_id_fkey FOREIGN KEY (call_id) REFERENCES public.runtime_calls(id);

ALTER TABLE ONLY public.gates
    ADD CONSTRAINT gates_case_id_fkey FOREIGN KEY (case_id) REFERENCES public.cases(id);

ALTER TABLE ONLY public.gates
    ADD CONSTRAINT gates_packet_paper_id_fkey FOREIGN KEY (packet_paper_id) REFERENCES public.papers(id);

ALTER TABLE ONLY public.gates
    ADD CONSTRAINT gates_task_id_fkey FOREIGN KEY (task_id) REFERENCES public.tasks(id);

ALTER TABLE ONLY public.grants
    ADD CONSTRAINT grants_case_id_fkey FOREIGN KEY (case_id) REFERENCES public.cases(id);

ALTER TABLE ONLY public.grants
    ADD CONSTRAINT grants_gate_id_fkey FOREIGN KEY (gate_id) REFERENCES public.gates(id);

ALTER TABLE ONLY public.grants
    ADD CONSTRAINT grants_reserved_call_id_fkey FOREIGN KEY (reserved_call_id) REFERENCES public.runtime_calls(id);

ALTER TABLE ONLY public.grants
    ADD CONSTRAINT grants_task_id_fkey FOREIGN KEY (task_id) REFERENCES public.tasks(id);

ALTER TABLE ONLY public.impact_claims
    ADD CONSTRAINT impact_claims_case_id_fkey FOREIGN KEY (case_id) REFERENCES public.cases(id);

ALTER TABLE ONLY public.impact_claims
    ADD CONSTRAINT impact_claims_task_id_fkey FOREIGN KEY (task_id) REFERENCES public.tasks(id);

ALTER TABLE ONLY public.ledger_heads
    ADD CONSTRAINT ledger_heads_case_id_fkey FOREIGN KEY (case_id) REFERENCES public.cases(id);

ALTER TABLE ONLY public.plan_confirmations
    ADD CONSTRAINT plan_confirmations_confirmed_by_fkey FOREIGN KEY (confirmed_by) REFERENCES public.tasks(id);

ALTER TABLE ONLY public.plan_confirmations
    ADD CONSTRAINT plan_confirmations_task_id_revision_fkey FOREIGN KEY (task_id, revision) REFERENCES public.plan_revisions(task_id, revision);

ALTER TABLE ONLY public.plan_revisions
    ADD CONSTRAINT plan_revisions_paper_id_fkey FOREIGN KEY (paper_id) REFERENCES public.papers(id);

ALTER TABLE ONLY public.plan_revisions
    ADD CONSTRAINT plan_revisions_submitted_by_fkey FOREIGN KEY (submitted_by) REFERENCES public.tasks(id);

ALTER TABLE ONLY public.plan_revisions
    ADD CONSTRAINT plan_revisions_task_id_fkey FOREIGN KEY (task_id) REFERENCES public.tasks(id);

ALTER TABLE ONLY public.plan_steps
    ADD CONSTRAINT plan_steps_task_id_fkey FOREIGN KEY (task_id) REFERENCES public.tasks(id);

ALTER TABLE ONLY public.questions
    ADD CONSTRAINT questions_asked_by_fkey FOREIGN KEY (asked_by) REFERENCES public.tasks(id);

ALTER TABLE ONLY public.questions
    ADD CONSTRAINT questions_case_id_fkey FOREIGN KEY (case_id) REFERENCES public.cases(id);

ALTER TABLE ONLY public.questions
    ADD CONSTRAINT questions_task_id_fkey FOREIGN KEY (task_id) REFERENCES public.tasks(id);

ALTER TABLE ONLY public.task_notes
    ADD CONSTRAINT task_notes_task_id_fkey FOREIGN KEY (task_id) REFERENCES public.tasks(id);

ALTER TABLE ONLY public.tasks
    ADD CONSTRAINT tasks_case_id_fkey FOREIGN KEY (case_id) REFERENCES public.cases(id);

ALTER TABLE ONLY public.tasks
    ADD CONSTRAINT tasks_parent_id_fkey FOREIGN KEY (parent_id) REFERENCES public.tasks(id);

ALTER TABLE ONLY public.tasks
    ADD CONSTRAINT tasks_root_task_id_fkey FOREIGN KEY (root_task_id) REFERENCES public.tasks(id);

ALTER TABLE ONLY public.version_decisions
    ADD CONSTRAINT version_decisions_task_id_fkey FOREIGN KEY (task_id) REFERENCES public.tasks(id);
