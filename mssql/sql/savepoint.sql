-- savepoint: Enqueue into the caller's transaction starts here, so a failed
-- enqueue can be undone without ending the caller's transaction.
SAVE TRANSACTION dbq_enqueue;
