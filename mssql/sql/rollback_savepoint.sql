-- rollback_savepoint: undo a failed Enqueue in the caller's transaction.
-- When the error has doomed the transaction (XACT_STATE() = -1) only a full
-- rollback is possible; that is the caller's, and their commit will fail.
IF XACT_STATE() = 1 ROLLBACK TRANSACTION dbq_enqueue;
