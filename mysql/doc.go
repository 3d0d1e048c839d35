// Package mysql is the dbq dialect for MySQL 8.0.13+ and MariaDB 10.6+, on
// github.com/go-sql-driver/mysql: the candidate-select, SKIP LOCKED, UPDATE
// claim of Köhntopp's "MySQL: a job queue in Python" (the loop this
// documentation calls the original), made to scale with the number of
// claimers.
//
//	q, err := mysql.Open(ctx, "mysql://dbq:secret@db:3306/app", mysql.Config{})
//	// or, on a *sql.DB of your own:
//	q, err := mysql.New(db, mysql.Config{Replica: replicaDB})
//
// The Driver implements queue.Admin as well (unique enqueue, listing,
// cancel, reviving dead jobs, pause), and its claimers snooze.
//
// # The claim
//
// A claim of up to n jobs from queue q runs four steps on the claimer's
// own connection:
//
//  1. Candidates, outside any transaction (autocommit, so no read view
//     outlives the statement — the original's "COMMIT on an empty candidate
//     set" holds by construction; optionally on Config.Replica): the ids
//     of the first W ready jobs of q in (priority, run_at, id) order, a
//     covering range scan of the claim index (queue, state, priority,
//     run_at, id) that stops at LIMIT W. A paused queue has none (see
//     Pause), so its claim opens no transaction.
//  2. In a READ COMMITTED transaction, a sample of k of those ids is locked
//     by primary key: SELECT … WHERE id IN (…) AND queue = q AND state =
//     'ready' AND run_at <= UTC_TIMESTAMP(6) FOR UPDATE SKIP LOCKED. Rows
//     another transaction holds are skipped, not waited on; rows that are
//     no longer ready (stale candidates) fail the WHERE and their lock is
//     dropped at once. The statement reads the whole rows and the new
//     lease's end on the database clock (MySQL has no UPDATE …
//     RETURNING). It checks the pause again, on the primary.
//  3. UPDATE … SET state = 'claimed', claim_token, claimed_until WHERE id
//     IN (the locked ids) AND state = 'ready' AND run_at <= now, by
//     primary key.
//  4. Only when the UPDATE changed fewer rows than step 2 locked, or on
//     TiDB: read back the rows it changed, by primary key and the new
//     token. COMMIT. The transaction is committed even when it locked
//     nothing.
//
// Trust the claim, not the path (issue #23): step 3 changes only rows
// still ready and due, and the claim returns only rows step 3 changed —
// all it locked when it changed as many rows as it locked (the count is of
// distinct ids, so that is every one of them), otherwise those step 4
// reads back — so nothing rests on step 2's locks. On MySQL and MariaDB
// the locks hold, step 3 changes every row step 2 locked, and step 4 never
// runs: the guard costs no round trip. On a server that accepts SKIP
// LOCKED but locks nothing (TiDB), two claimers lock the same rows, the
// second one's UPDATE waits for the first (an UPDATE does lock) and then
// finds them claimed, and changes and returns none of them; step 4 always
// runs there, since a row's columns may have changed after step 2 read
// them. The rescue's UPDATE likewise changes only rows still held and
// expired and counts what it changed, and an export's DELETE only jobs no
// one holds. Tests stand in for such a server with a driver wrapper that
// strips the locking clause.
//
// Complete, Retry, Release and Extend run one statement per batch, by
// primary key and matching state = 'claimed' and each lease's token, in a
// READ COMMITTED transaction on the pool. When it changed one row per
// lease, it commits; otherwise it is rolled back and a second transaction
// locks the rows by primary key, reads their tokens and applies the
// statement to the leases still held — the others are lost leases,
// reported in a *queue.LeaseLostError and left alone. Every UPDATE and
// DELETE the dialect runs names its rows by primary key: one that finds
// them through a secondary index takes next-key locks in index order,
// against inserts and claims going the other way, which is where Solid
// Queue's MySQL deadlocks came from.
//
// # Completing with the next claim
//
// The Claimer is a queue.CompleteClaimer: a Worker hands the completions
// waiting when it claims to the claim, and CompleteClaim runs their DELETE
// (complete.sql, Complete's statement) as the first statement of the
// claim's READ COMMITTED transaction on the claimer's session, before the
// locking select; it commits with the claim. A Worker's batch then costs
// seven statements — the candidate select, SET TRANSACTION, START
// TRANSACTION, the DELETE, the locking select, the UPDATE, COMMIT; one
// round trip each with interpolateParams — and one commit, where a Claim
// (six) and a Complete on the pool (SET TRANSACTION, START, DELETE,
// COMMIT) cost ten and two commits. The floor (bench/floor.go, the plainest
// SQL doing the work) costs four and one: START, a locking select, a
// DELETE, COMMIT. The DELETE goes first so that while it waits on a row
// lock (the holder's own heartbeat extending a completed job, briefly) the
// transaction holds none of the claim's rows.
//
// The completion takes effect only with that COMMIT, yet it must end
// committed whatever becomes of the claim. So whenever the transaction
// carrying it does not commit — the claim part failed (deadlock, lock wait
// timeout, a lost session, a cancelled ctx), found no candidates, or was
// not tried (a bad argument, a closed claimer) — CompleteClaim writes the
// completion alone with Complete before it claims on or returns. A DELETE
// that matched fewer rows than the batch has distinct leases (some lease
// is not this holder's) rolls the transaction back; Complete then tells
// the lost leases from the held ones and the claim is tried again at once.
// Each part's outcome is what Complete and Claim report, lost leases
// included; a COMMIT whose outcome is unknown (the session died during
// it) is followed by Complete alone, which then reports the leases lost
// if the first had committed, as a retried Complete would. A batch of
// more than 5,000 leases is completed alone, then claimed.
//
// Measured on the development machine (2 cores shared with other work,
// load average 3-8, MariaDB 10.11; `dbq bench --sections drain --n 50000
// --workers 1,2,4,8,16`, six runs before and eight with it, medians of
// dbq's share of the floor in the same run; single runs of one build
// varied by up to a factor of three): 1 Worker, the floor's best count
// (about 35,000 jobs/s), 33% before and 42% with CompleteClaim (12,800 and
// 14,800 jobs/s); 2 Workers 44% and 49%; 4, 43% and 60%; 8, 68% and 90%;
// 16, 219% and 221% (the floor's transactions collapse under SKIP LOCKED
// contention, the spread claim does not). The server's counters over a
// 1-Worker drain of 50,000 jobs, less the floor's share: about 0.25
// statements and 0.052 commits per job before, 0.12 and 0.018 with
// CompleteClaim (a claim averages about 57 jobs there: the Worker claims
// as soon as a handler slot is free, not when 100 are). One
// claimer completing and claiming batches of 100 in turn (bench/,
// BenchmarkCompleteClaim) takes 5.7-6.1 ms a batch, against 3.8-4.4 ms
// for a Claim and 2.0 ms for a Complete; 2,363 allocations against 2,029
// and 374. Timed statement by statement (one instrumented run, 5.6 ms a
// batch), the claim's UPDATE to claimed takes about 2.0 ms,
// the DELETE 1.3, the locking select 0.9, COMMIT 0.6, the candidate select
// 0.6, SET TRANSACTION and START 0.2. The UPDATE is the floor's missing
// step (it deletes ready rows, with no lease to take), which is why one
// Worker stays under half the floor. Starting the claim transaction at the
// session's own level (READ UNCOMMITTED, whose locking is READ
// COMMITTED's) would save the SET TRANSACTION round trip; measured
// (BenchmarkCompleteClaim, three runs against three, and two drains) it
// made no difference beyond the noise, so the transaction keeps its
// explicit READ COMMITTED.
//
// # Why it scales: spreading the claimers
//
// Taken literally (W = n, every claimer reads the same first n
// candidates), the original collapses as claimers are added: they all lock the
// same rows, one wins, the others come back empty and start over. Measured
// here (the original loop in REPEATABLE READ, 200,000 jobs): 15,200 jobs/s
// with one consumer, 6,400 with 4, 1,000 with 16, 200 with 50, 73-97% of
// claims empty. Three things fix it. With them, on the same machine and
// server (2 cores, MariaDB 10.11, 200,000 jobs, batches of 100,
// BenchmarkClaimComplete): 22,200 jobs/s with 1 claimer, 29,600 with 4,
// 20,000 with 16, 10,100 with 50, 0-4.5% of claims empty, no duplicates;
// the literal loop (MaxSpread 1) in the same harness: 23,700, 20,300,
// 5,600 and 1,400, 33-88% empty.
//
// Spread. Each Claimer keeps a spread s, 1 ≤ s ≤ Config.MaxSpread: its
// window is W = n·s and it locks k = n of them (k = m/s of a smaller
// backlog of m, so a short queue is shared out too). It starts at s = 1 —
// one claimer gets exact claim order — doubles s whenever others took more
// than a quarter of its sample, and lets it decay by 10% after a claim
// that lost nothing. Concurrent claimers thus lock different rows of a
// window that grows with their number. The price is order: under
// contention a claim takes jobs from the first n·s, not the first n
// ("roughly in order", as the claim contract says); a claim's jobs come
// back sorted.
//
// Runs. The k rows are four runs of consecutive candidates in run slots
// of the window picked at random, not k scattered rows: consecutive
// candidates share claim-index and primary-key pages, so a claim touches a
// few pages, claimers contend on fewer page latches and take fewer lock
// structs, and a collision costs part of a batch, not all of it.
//
// Dirty candidates. The candidate select runs in READ UNCOMMITTED (the
// level of the claimer's own session, which is never pooled again; every
// transaction sets READ COMMITTED explicitly). It takes no locks and decides nothing — step 2 re-checks
// every row under its lock on the primary — but a row another claimer is
// claiming drops out of the window the moment that claimer's UPDATE runs
// (InnoDB skips the delete-marked claim-index entry) instead of at its
// COMMIT, and reading a hot index page costs no undo lookups, where a
// consistent read must visit the clustered record of every entry on a page
// changed since its read view. A lagging Replica gives staler candidates;
// they are skipped in step 2 and only cost some empty locks.
//
// # Why READ COMMITTED, and why lock by primary key only
//
// Under REPEATABLE READ (InnoDB's default) a locking read keeps next-key
// locks on every index record it walks, and a claim over a churned index
// walks many: delete-marked entries of rows claimed or completed but not
// yet purged. Measured here with MariaDB 10.11 and a 200,000-job backlog,
// a direct SELECT … LIMIT 100 FOR UPDATE SKIP LOCKED under REPEATABLE READ
// locked up to 32,950 rows per claim, returned ERROR 1206 (lock table
// full) at 16 consumers and aborted the server at 50. READ COMMITTED takes
// no gap locks and drops the lock of each row that fails the WHERE, and
// locking by primary key means a claim never touches a row outside its
// sample: a claim holds exactly the row locks of the jobs it returns
// (tested with INNODB_TRX and the server's lock list).
//
// # Empty locks
//
// A claim attempt whose candidates were all taken by others locked
// nothing: an empty lock. Claim then looks again at once with a wider
// spread, at most twice, before reporting an empty queue. [Claimer.EmptyLocks]
// and [Driver.EmptyLocks] count them against all claim attempts that found
// candidates; a high ratio means more claimers than the queue keeps busy.
// A claim of an idle queue is one index probe and no transaction; the
// Worker's PollInterval is the back-off between such claims.
//
// # Leases, expiry and rescue
//
// A claim is a lease of Config.Lease (default 5 minutes) with a random
// 63-bit token. A claimer that dies — process killed, connection cut —
// leaves its rows claimed until the lease ends; then a rescue gives them
// back as a failed run (attempt+1, last_error says so, dead when out of
// attempts, as River and Oban do), by the same steps: candidates among the
// queue's jobs in flight through the claim index (queue, 'claimed'), then
// lock by primary key with SKIP LOCKED and UPDATE the rows still held and
// expired. There is no index on
// claimed_until: every claim and completion would move an entry at its
// hot right edge for a rescue that runs a few times a lease, and measured
// that cost 8-15% of the server's CPU per job. Claim runs one bounded
// rescue pass (Config.RescueBatch rows) of its queue at most every Lease/4
// per Queue; [Driver.Rescue] does all queues to completion. A holder whose
// lease expired but was not yet rescued may still end or extend it.
//
// One session at a time rescues a table, whatever the number of processes:
// a rescue first takes the table's user lock, GET_LOCK(name, 0), on the
// session it runs on (the claimer's own connection for Claim's pass, a
// connection taken from the pool for Rescue), and RELEASE_LOCK on the same
// session afterwards. The name is "dbq_rescue:" and the database and table
// names, or a SHA-256 digest of them when that would pass GET_LOCK's 64
// characters; user locks are server-wide, so it names the database too.
// The timeout is 0: when another session holds the lock, Claim skips its
// pass (the holder is doing the work) and Rescue returns [ErrRescueBusy]
// having changed nothing. A rescuer that dies loses the lock with its
// session; a session whose RELEASE_LOCK fails is closed rather than
// pooled, so no lock outlives its pass. On a server that refuses user locks
// (Galera, error 1235) rescues run without it, as they safely can: the
// lock saves repeated work, while SKIP LOCKED on the rows is what keeps
// two rescues from giving back the same lease twice.
//
// # Enqueue and ids
//
// Each batch of up to 1000 jobs is one multi-row INSERT, a "simple insert"
// in InnoDB's terms (row count known up front, no explicit ids, no ON
// DUPLICATE KEY UPDATE); several batches run in one transaction, and a
// dedupe-key collision (error 1062) fails the whole call with
// queue.ErrDuplicate. The ids come from LAST_INSERT_ID(), the first id of
// the statement, by the rule New picks from @@innodb_autoinc_lock_mode and
// logs. In modes 0 and 1 (MariaDB's default) the manual promises one
// statement's values are consecutive, so the ids are LAST_INSERT_ID() +
// i·@@auto_increment_increment, in VALUES order. In mode 2 (MySQL 8's
// default, "interleaved") it promises only that they increase, so the rows
// carry a random per-batch marker in claim_token (meaningless on a ready
// row, overwritten by its first claim) and a primary-key range scan from
// LAST_INSERT_ID() reads their ids back in order. A test checks every
// returned id against its row under concurrent producers, both ways.
//
// # Unique enqueue
//
// EnqueueUnique is one INSERT … ON DUPLICATE KEY UPDATE whose update
// branch changes no column and only sets LAST_INSERT_ID(-id): the
// statement's insert id is then the new job's id (positive) or the
// existing job's negated, which tells the two apart whatever the DSN's
// clientFoundRows makes of the affected-row count. A collision raises no
// error, so the caller's *sql.Tx goes on, and the existing job's id comes
// from the row the statement found, with no second look-up for the job to
// vanish before. ON DUPLICATE KEY UPDATE rather than INSERT IGNORE, which
// would also turn data errors (a value too long, a bad date) into
// warnings. Like any insert that meets a unique key, it locks the existing
// job's row until its transaction ends, and it leaves the session's
// LAST_INSERT_ID() meaningless.
//
// # Pause, snooze and admin
//
// A paused queue has a row in the queues table (migration 00002) with
// paused true; SetPaused upserts it. Claim probes that row by primary key
// in its candidate select (on the claimer's session or the replica) and
// again in its locking select (on the primary, inside the claim's READ
// COMMITTED transaction). Both probes are subqueries of the claim's own
// statements, so a pause costs no round trip, and the second is a plain
// consistent read of a nested subquery: it locks nothing, so claimers of
// a queue never contend on its row. Stats reports the flag per queue;
// enqueue, complete, retry and release go on while a queue is paused.
//
// A snooze (Retry with RetryParams.Snooze, what queue.Snooze makes a
// Worker do) is a row of the retry statement with its own mode: ready
// again at now + Delay on the database clock, attempt and last_error
// unchanged, Error and Dead ignored, matched on the lease's token like
// every other Retry.
//
// Jobs pages in id order through the primary key, or for one queue's dead
// jobs through the claim index; each filter is fixed text with its value
// as a bind parameter. Cancel and RetryDead lock their rows by primary key
// in a READ COMMITTED transaction (waiting, within the lock wait timeout,
// for a claim looking at them, then re-reading them) and delete or update
// them by primary key; Cancel leaves claimed jobs to their holders, and
// RetryDead of a whole queue works in batches of 1000.
//
// # Errors
//
// 1146 (no such table), 1176 (no such index) and 1049 (no such database)
// are queue.ErrNotMigrated, naming `dbq migrate up`. 1213 (deadlock), 1205
// (lock wait timeout; also MariaDB's NOWAIT), 3572 (MySQL's NOWAIT), 3058
// (MySQL's user-lock deadlock), 1020 (MariaDB's
// innodb_snapshot_isolation), and TiDB's 9007 (write conflict) and 1105
// when it says "pessimistic lock retry limit reached" (claimers racing for
// the same rows, cheap to retry) are a *dialect.RetryableError; Claim, the
// lease operations and the driver's own statements retry them up to five
// times with jittered backoff before returning one (EnqueueUnique in a
// caller's transaction does not: a deadlock rolled the transaction back). (MariaDB implements SKIP LOCKED as a lock wait
// that times out at once, and runs deadlock detection on it first: two
// claims that each hold rows the other is skipping over can still get
// 1213. Seen a few times per 100,000 jobs at most; the retry absorbs it.)
// A cancelled context never leaves a claim half
// done: once begun, a claim's statements run to the end (none of them
// waits on a row lock but a carried completion's DELETE, which the lock
// wait timeout bounds), the context is checked between them, and a
// cancelled claim is rolled back before Claim returns.
//
// # MySQL and MariaDB
//
// The SQL is the subset both accept: no RETURNING, no FOR SHARE or NOWAIT,
// no WITH … UPDATE, no expression defaults, isolation set with SET
// TRANSACTION rather than a variable. New reads SELECT VERSION(), refuses
// servers without SKIP LOCKED (ErrUnsupportedServer) and logs what it runs
// on ([Driver.Server]). Where the two differ the dialect asks the server:
// Open sets the session isolation in the DSN through tx_isolation on
// MariaDB before 11.1 and transaction_isolation elsewhere, and the error
// numbers of both are classified. With binary logging on, binlog_format
// must be ROW or MIXED (both servers' defaults): InnoDB refuses writes in
// READ COMMITTED under STATEMENT (error 1665). Times are DATETIME(6)
// holding UTC, written with UTC_TIMESTAMP(6) and read as UTC wall clock
// whatever the DSN's parseTime and loc, so New accepts any DSN of the
// user's. Times are computed as DATE_ADD(…, INTERVAL … MICROSECOND),
// never "+ INTERVAL (…)", which TiDB reads as the INTERVAL() function.
//
// # Galera
//
// A server with @@wsrep_on (MariaDB Galera Cluster, Percona XtraDB
// Cluster) is a Galera node: [Server].Galera. Row locks are the node's own,
// so claims on two nodes can lock the same rows; certification at COMMIT
// lets the first commit win and fails the other with 1213 (or a message
// "WSREP detected deadlock/conflict"), and nothing is held twice. In a
// claim that is an expected, cheap retry: Claim claims again at once after
// under a millisecond of jitter, its spread doubled, at most 10 times per
// call (then like any retryable error, with backoff), logging at Debug and
// counting [Claimer.Conflicts] and [Driver.Conflicts]. 1047 (a node out of
// the primary component) is retryable with backoff. Galera certifies a
// write on every unique key of its row whose parts are not all NULL. The
// dedupe index is UNIQUE (dedupe_key, dedupe_queue), dedupe_queue being a
// virtual column that is the queue of a job with a dedupe key and NULL
// otherwise (schema version 00007): a job without a dedupe key has no
// certification key but its primary key, so claims and completions on
// different nodes conflict only when they touch the same jobs. Before
// 00007 the index was (queue, dedupe_key), whose (queue, NULL) was one key
// for all of a queue's jobs without a dedupe key, and any two claims or
// completions of one queue on different nodes conflicted
// (docs/scale-out.md has the figures). Tested on a 3-node MariaDB 10.11
// cluster by make test-galera, with nodes killed and cut off.
//
// TiDB (a VERSION() containing "TiDB") is recognised as [TiDB]; tested on
// TiDB 8.5.3 by make test-tidb (the whole package) and make test-tidb-short
// (the conformance suite and tidb_test.go). Its SKIP LOCKED locks nothing,
// which the claim does not depend on (see "Trust the claim, not the
// path"); it refuses READ UNCOMMITTED (error 8048), so there the claimer's
// session reads its candidates in READ COMMITTED; an optimistic
// transaction's write conflict (9007) is retried.
//
// # Connections
//
// Each Claimer holds one connection of the pool for its claims and rescue
// passes (READ UNCOMMITTED, on TiDB READ COMMITTED, for its plain reads,
// innodb_lock_wait_timeout = Config.LockWaitTimeout, both set on that
// session alone), and replaces it
// if the server ends it. That connection never goes back to the pool: the
// claimer closes it when it is done with it (Close, a broken session, a
// failed setup), so no session of the pool — the user's, with New, or
// Open's own — ever carries a setting of the claimer's. Every other
// statement runs on a connection taken from the pool for the call and
// changes nothing on its session: each transaction sets READ COMMITTED for
// itself with SET TRANSACTION (which applies to that transaction only)
// rather than trust the session's level, plain reads are single
// autocommit statements, and Rescue's user lock is released before its
// connection is returned (or the connection is closed). Enqueue, Stats,
// Rescue, the admin methods and the move import hold one connection at a
// time, and only for the call; Complete, Retry, Release and Extend too.
// (Completions that CompleteClaim carries run on the claimer's own
// session, in its claim transaction.)
//
// The pool must hold each Claimer's connection and one more for Complete,
// Retry, Release and Extend, or the first completion would wait for ever
// for a connection that its own Worker holds: when the pool's
// SetMaxOpenConns (db.Stats().MaxOpenConnections) is below the Driver's
// live Claimers plus one, NewClaimer — and so Worker.Run — fails at once
// with ErrPoolTooSmall (a queue.ErrInvalidConfig) naming the setting.
// Claimers of other Drivers on the same pool, and the application's own
// use of it, are not counted: every call that waits for a pool connection
// follows its ctx, so give Complete and its siblings a ctx with a
// deadline. New's own first query is bounded to 30 s.
//
// Open sets parseTime, loc=UTC, interpolateParams (one round trip per
// statement instead of prepare-execute-close), rejectReadOnly, READ
// COMMITTED and the lock wait timeout in the DSN, so the driver applies
// them to every session of its pool as it opens; with New, pass
// interpolateParams=true in your DSN for the same round trips. With New
// the pool's sessions keep their own lock wait timeout, which then bounds
// the lock waits of Complete, Retry, Release, Extend and the admin
// methods.
//
// # Producers in other languages
//
// A producer may insert with plain SQL, naming only queue and payload:
// run_at and created_at default to UTC_TIMESTAMP(6) (schema version 00003),
// and every time column holds UTC wall-clock time, whatever the session
// time zone. Those are expression defaults, which need MySQL 8.0.13+ or
// MariaDB 10.2+; dbq's floor (MySQL 8.0.13, MariaDB 10.6) has them. The
// README's "Producers in other languages" lists the columns. kind
// (schema version 00005) defaults to the empty string: a job with no kind.
// dedupe_queue (schema version 00007) is computed by the server from queue
// and dedupe_key: an INSERT leaves it out (naming it is an error).
//
// # Kinds
//
// A job's kind is a VARBINARY(100) column: bytes, stored as given and
// compared byte for byte, so Jobs' kind filter and StatsByKind's groups
// are Go's string equality and order. It travels as one more column of the
// statements that already carry a job (the claim's locking select and its
// read-back, Jobs, move's export, stored and insert); no index has it, so
// a kind filter is a condition on the rows Jobs walks, and StatsByKind
// (stats_by_kind.sql) is one pass over the table.
package mysql
