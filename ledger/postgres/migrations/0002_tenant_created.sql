-- A tenant's records by creation time: the listing a tenant-wide index
-- (a policy's scope: tenant) is rebuilt and caught up from.
CREATE INDEX idem_records_tenant_created ON idem_records (tenant, created_at, key);
