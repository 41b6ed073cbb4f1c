-- 0003: the key of the earlier call a record's execution was confirmed as
-- another action than (ledger.Record.Confirmed); '' when none. Rows
-- written before it read as ''.
ALTER TABLE idem_records ADD COLUMN confirmed text NOT NULL DEFAULT '';
