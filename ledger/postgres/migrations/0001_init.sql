-- 0001: the ledger's records, the per-session arrival counters, and the
-- change notification. Runs inside one transaction with search_path set to
-- the store's schema. Times are Unix milliseconds (the ledger's clock);
-- ids sort bytewise (COLLATE "C"), as Go compares strings.

CREATE TABLE idem_records (
    tenant          text COLLATE "C" NOT NULL,
    key             text COLLATE "C" NOT NULL,
    session         text COLLATE "C" NOT NULL,
    workflow        text COLLATE "C" NOT NULL,
    step            text NOT NULL,
    tool            text NOT NULL,
    canonical       bytea,
    hash            bigint NOT NULL,          -- uint64 bits
    identity        bigint NOT NULL,          -- uint64 bits
    embedding       bytea,                    -- little-endian float32s
    embedding_model text NOT NULL,
    status          smallint NOT NULL CHECK (status BETWEEN 1 AND 3),
    result          bytea,                    -- JSON, verbatim
    error           bytea,                    -- JSON, verbatim
    class           smallint NOT NULL CHECK (class BETWEEN 0 AND 2),
    attempt         bigint NOT NULL,
    token           text NOT NULL,
    lease_until     bigint NOT NULL,
    created_at      bigint NOT NULL,
    updated_at      bigint NOT NULL,
    retain_until    bigint NOT NULL,
    seq             bigint NOT NULL,          -- arrival number in (tenant, session); 0 without a session
    version         bigint NOT NULL,          -- bumped by every write: the compare-and-swap guard
    PRIMARY KEY (tenant, key)
);

-- ListSession: the rows of a session after a Seq, in Seq order.
CREATE UNIQUE INDEX idem_records_session ON idem_records (tenant, session, seq) WHERE session <> '';
-- ListWorkflow: the rows of a workflow in arrival order.
CREATE INDEX idem_records_workflow ON idem_records (tenant, workflow, created_at, key) WHERE workflow <> '';
-- The sweeper: the rows past retention, oldest first.
CREATE INDEX idem_records_expiry ON idem_records (retain_until);

-- One counter per (tenant, session). Taking a number locks the row until
-- the taking statement commits, so Seq order is commit order.
CREATE TABLE idem_sessions (
    tenant       text COLLATE "C" NOT NULL,
    session      text COLLATE "C" NOT NULL,
    last         bigint NOT NULL,
    retain_until bigint NOT NULL,             -- the latest RetainUntil of a row that took a number
    PRIMARY KEY (tenant, session)
);
CREATE INDEX idem_sessions_expiry ON idem_sessions (retain_until);

-- A change that can end a wait notifies channel 'idem:<schema>' with the
-- hex SHA-256 of "<byte length of tenant>:<tenant><key>"; waiters on any
-- replica listen there. Waiters only ever wait on a PENDING record, so
-- only a change of a PENDING row (complete, fail, takeover) and a delete
-- notify: claims do not. That matters: PostgreSQL serializes the commits
-- of notifying transactions (one lock across the cluster, held through
-- the WAL flush), so a notifying claim path would cap claims per second
-- at one per fsync. The sweeper sets idem.quiet: nobody waits on a record
-- past its retention.
CREATE FUNCTION idem_notify() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    IF current_setting('idem.quiet', true) = 'on' THEN
        RETURN NULL;
    END IF;
    r := OLD; -- tenant and key never change
    PERFORM pg_notify('idem:' || TG_TABLE_SCHEMA,
        encode(sha256(convert_to(octet_length(r.tenant)::text || ':' || r.tenant || r.key, 'UTF8')), 'hex'));
    RETURN NULL;
END
$$;

CREATE TRIGGER idem_records_notify_update AFTER UPDATE ON idem_records
    FOR EACH ROW WHEN (OLD.status = 1) EXECUTE FUNCTION idem_notify();
CREATE TRIGGER idem_records_notify_delete AFTER DELETE ON idem_records
    FOR EACH ROW EXECUTE FUNCTION idem_notify();
