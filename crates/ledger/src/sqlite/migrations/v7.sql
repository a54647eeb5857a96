-- Schema version 7 of the SQLite ledger: tx_history without AUTOINCREMENT and without the
-- index on `at`. The table is rebuilt before this script (sqlite/history_table.rs), which drops
-- its indexes and triggers with it: this script and version 6's, run again after it, re-create
-- them.
-- Frozen as it was: the step from version 6 (sqlite/migrations.rs). The current schema is
-- schema.sql, which a file gets after its steps.
-- The one index a query needs: a GUID's history in order (inspect, and the insert trigger's
-- replaced-row probe, which without it would scan the whole history for every claim).
-- purge --history-days takes old rows in id order (ids grow with time), a scan of the table
-- that never used the index on `at` versions 2 to 6 kept on every row: version 7 drops it.
-- Measured in docs/performance.md.
CREATE INDEX IF NOT EXISTS tx_history_guid ON tx_history (guid, id);
DROP INDEX IF EXISTS tx_history_at;

CREATE TRIGGER IF NOT EXISTS tx_history_is_never_updated BEFORE UPDATE ON tx_history BEGIN
    SELECT RAISE(ABORT, 'tx_history rows are never updated');
END;
