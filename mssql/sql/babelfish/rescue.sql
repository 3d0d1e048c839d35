-- rescue on Babelfish for PostgreSQL: what rescue.sql does, with the
-- expired leases output as they were into @moved and the jobs rows
-- computed from there: Babelfish 4.4 takes no CASE over deleted's columns
-- in OUTPUT ("missing FROM-clause entry for table deleted"). No table
-- hints (see babelfish/claim.sql).
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @granted INT = 0;
DECLARE @moved_n INT = 0;
DECLARE @moved TABLE (
    id           BIGINT         NOT NULL PRIMARY KEY,
    queue        VARCHAR(64)    COLLATE Latin1_General_BIN2 NOT NULL,
    kind         NVARCHAR(100)  COLLATE Latin1_General_100_BIN2 NOT NULL,
    payload      VARBINARY(MAX) NOT NULL,
    priority     SMALLINT       NOT NULL,
    attempt      INT            NOT NULL,
    max_attempts INT            NOT NULL,
    last_error   NVARCHAR(4000) NULL,
    dedupe_key   NVARCHAR(200)  COLLATE Latin1_General_100_BIN2 NULL,
    created_at   DATETIME2(6)   NOT NULL
);
IF EXISTS (SELECT 1 FROM {{table "jobs_inflight"}} WHERE claimed_until < SYSUTCDATETIME())
BEGIN
    BEGIN TRANSACTION;
    EXEC @granted = sys.sp_getapplock @Resource = @lock_resource, @LockMode = 'Exclusive',
         @LockOwner = 'Transaction', @LockTimeout = 0;
    IF @granted >= 0
    BEGIN
        DELETE TOP (@batch) FROM {{table "jobs_inflight"}}
        OUTPUT deleted.id, deleted.queue, deleted.kind, deleted.payload, deleted.priority,
               deleted.attempt, deleted.max_attempts, deleted.last_error, deleted.dedupe_key, deleted.created_at
          INTO @moved (id, queue, kind, payload, priority, attempt, max_attempts, last_error, dedupe_key, created_at)
        WHERE claimed_until < SYSUTCDATETIME();
        SET @moved_n = @@ROWCOUNT;
        INSERT INTO {{table "jobs"}} (id, queue, kind, payload, priority, run_at, attempt, max_attempts, state,
               last_error, dedupe_key, created_at)
        SELECT id, queue, kind, payload, priority, SYSUTCDATETIME(), attempt + 1, max_attempts,
               CASE WHEN attempt + 1 >= max_attempts THEN 'dead' ELSE 'ready' END,
               @error, dedupe_key, created_at
        FROM @moved;
    END;
    COMMIT TRANSACTION;
END;
SELECT @granted, @moved_n;
