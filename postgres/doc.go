// Package postgres is the PostgreSQL dialect of dbq, on pgx/v5.
//
//	pool, _ := pgxpool.New(ctx, "postgres://app@db/app")
//	_ = postgres.Migrate(ctx, pool, postgres.Config{}) // or `dbq migrate up`
//	q, _ := postgres.New(pool, postgres.Config{})      // or postgres.Open(ctx, dsn, cfg)
//	ids, _ := q.Enqueue(ctx, queue.NewJob{Queue: "email", Payload: body})
//
// # Two claim strategies
//
// Advisory (the default) claims a job by taking a session
// advisory lock on it, pg_try_advisory_lock(table oid, id folded to int4):
// nothing is written to claim a job, claimers never wait on each other, and
// when a claimer dies its connection closes and PostgreSQL drops its locks,
// so its jobs are claimable again at once, with no lease to run out. The
// price is a connection per claimer, held for the claimer's life (size the
// pool for it), and session state: advisory locks do not survive PgBouncer
// in transaction mode (que-rb/que#110).
//
// # A lost lock connection
//
// An advisory claim lives in its connection's session. When that session
// ends while jobs run — an idle timeout (idle_session_timeout, a proxy's
// or firewall's), pg_terminate_backend, a failover, a network cut — the
// server drops its locks and any claimer may take those jobs at once,
// while their handlers still run. No lock that lives in a connection can
// close that window; dbq keeps it short and bounded. While a Worker holds
// jobs of an advisory claimer it pings the claimer's connection every
// third of Config.LockCheck (default 3s), so idle timeouts never see it
// idle. A ping that fails, or goes unanswered for a third of LockCheck
// (a silent network cut), closes the connection, so the locks are surely
// gone, and every handler holding a job of it is cancelled with a cause
// matching queue.ErrLeaseLost; its run ends as queue.OutcomeLeaseLost and
// changes nothing, and the next claim takes a new connection. From the
// loss to the cancel takes at most two thirds of LockCheck (measured over
// 20 terminated backends with the default: 255 ms median, 725 ms at
// most): only in that window can a job run twice at once, and only when
// its lock connection was lost. A connection found gone by a claim while
// it held nothing is replaced without a word.
//
// The claim reads the claim index in order, trying the lock on each row
// as it goes (the walk Que does, as one lazy index scan per priority), and
// stops as soon as it has locked n rows, so it never holds a lock on a row
// it did not return. It reads rows from its statement's
// snapshot, so it can lock a job another claimer completed after that
// snapshot was taken; the post-check, a second statement on the same
// connection that keeps only the locked jobs still ready, lets those go.
// It is mandatory: without it such jobs run twice. Ids 2^32 apart share a
// lock key; that only makes a job look busy, and the post-check keeps it
// from ever being handed out twice. The walk and the post-check go in one
// round trip and one transaction: under READ COMMITTED each statement
// takes a snapshot of its own, so the post-check's follows the walk's
// locks, and the walk hands it the ids it locked in a setting local to
// that transaction (dbq.walked). A session whose transactions default to
// REPEATABLE READ or SERIALIZABLE would read both from one snapshot, and
// jobs would run twice (TestPostCheckRace shows it): there the claimer,
// which reads the level when it connects, runs the post-check in a
// transaction of its own, a round trip later.
//
// # Plans
//
// The claims, the post-check, and the statements that complete, retry,
// release or extend a list of jobs run right after plan.sql, in the same
// implicit transaction and the same round trip: enable_seqscan,
// enable_sort, hash and merge joins and JIT off and plan_cache_mode
// force_generic_plan, each set with set_config(…, true), so the settings
// end with that transaction and no session keeps them. Left to its own
// rules, PostgreSQL chose plans that read the whole table on every call,
// and kept them until the next analyze:
//   - the advisory walk, on a backlog spread over a bloated table (what a
//     long transaction holding the MVCC horizon leaves behind) or after an
//     autoanalyze: a sequential scan and a sort of the whole backlog (551 ms
//     for 32 of 300,000 jobs, against under 1 ms on the index), since the
//     locking LATERAL join keeps the LIMIT from the branches below it;
//   - the SKIP LOCKED claim's generic plan: a hash join over a sequential
//     scan for the UPDATE (415 ms for 32 jobs there);
//   - the post-check and the completion on a new table: pgx prepares each
//     statement once per connection, PostgreSQL keeps a generic plan after
//     five runs, and one made while the table held a few rows scans it, so
//     a fresh table drained 76-676 jobs/s for its first 40 s at 15,000/s
//     offered, until its first autoanalyze.
//
// With the settings, the only cheap plans are the index scans, whatever
// the statistics say, and one generic plan per connection replaces a plan
// per claim (a custom plan knows the LIMIT and always looked cheaper):
// 0.35-0.4 ms less server CPU per advisory walk (pgbench -M prepared).
// SkipLocked does this only in pgx's default exec mode, where statements
// are prepared; in any other it sends each statement alone, planned by the
// server's own rules, which plans every run afresh.
//
// The rule that makes the post-check work: a claimer unlocks a job only
// after the statement that completed, retried or made it dead has
// committed. Unlocking first (or in the same transaction, such as one
// pgx.Batch) would let another claimer lock the job and pass its
// post-check before the change is visible. A completion sends its unlock
// in the delete's round trip all the same, pipelined in a transaction of
// its own after the delete's (unlock_completed.sql): it unlocks only the
// jobs no longer ready, so a delete that failed leaves its jobs locked,
// as if it had not been sent.
//
// An advisory claim is thus one round trip, and so is a completion: two
// per batch, where the walk, the post-check, the delete and the unlock
// took one each. `dbq bench --sections drain --strategies advisory`,
// 100,000 jobs, PostgreSQL 15 with its defaults on 2 cores, alternating
// with the code before, jobs/s: 1 Worker 24,340-30,410 -> 32,865-43,691;
// 2 Workers 35,545-45,614 -> 39,656-52,191. From 4 Workers up, where the
// server fills both cores, no difference beyond the noise (8 Workers
// 39,618-48,206 -> 38,109-49,496).
//
// SkipLocked is a queue.CompleteClaimer: a Worker sends the completions
// waiting when it claims with the claim, pipelined on one connection with
// a Sync after each statement, so each commits on its own and a failed
// claim leaves the completions done: one round trip per batch instead of
// two. Pipelining needs pgx's default exec mode (cache_statement); in any
// other the claimer completes and claims in separate calls. Advisory is
// not: sending the delete, the gated unlock, the walk and the post-check
// in one round trip made 1 Worker faster still (47,654 / 38,810 jobs/s in
// the runs above) but 4 to 8 Workers slower (43,933 / 36,625 at 8) - the
// Worker then completes only when it claims, where separate calls let its
// result writer complete while the claim loop claims - so it completes
// and claims in separate calls.
//
// SkipLocked claims with one statement, WITH c AS MATERIALIZED (SELECT …
// FOR UPDATE SKIP LOCKED) UPDATE … FROM c, that marks the rows claimed
// with a lease and a random token, as River and Oban do; the candidates
// are read once, so no join order can lock more than the LIMIT. It keeps no session state, so it works behind
// PgBouncer in transaction mode and needs no connection of its own between
// calls. A dead claimer's jobs come back when their lease (Config.Lease)
// expires: claimers run a bounded rescue at most every quarter lease, and
// the Worker extends the leases of running jobs. The run that lost its
// lease counts as a failed attempt; under Advisory a dead claimer spends
// none, since taking the lock wrote nothing.
//
// Until vacuum, the claim index keeps an entry for every job claimed
// since, and a scan from the head reads past them all (and, for Advisory,
// past the jobs other claimers hold). So after a claim that filled its
// batch, both claimers start the next claim of that queue where it began,
// and every 16th claim of the queue at the head, where jobs given back
// behind that point return; lower priority numbers are always read from
// their start. Each claimer keeps this per queue, so a job released
// behind a claimer's start waits at most 16 of that queue's claims however
// many queues the claimer works. Advisory claimers of one Queue share two
// things per queue: a walk starts at the last row any of them locked when
// that is further on than its own start, and the walk from the head is
// every 16th of all their claims. A claimer's own start falls behind the
// jobs the others took since its last claim, and with many claimers each
// walk read past them all (`dbq bench --sections drain`, 100,000 jobs:
// 22,000 jobs/s at 64 Workers and 30,000 at 8 before, 33,000-36,000 and
// 38,000-42,000 after).
//
// Larger batches drain faster: fewer round trips and statements per job.
// `dbq bench --sections drain --strategies advisory --batch 1000` (Workers
// of Concurrency 1,000), 100,000 jobs, PostgreSQL 15 with its defaults on
// 2 cores: 70,900-79,100 jobs/s at 2 and 4 Workers, where batches of 100
// drained 31,000-45,000. A walk passes the jobs its session holds first,
// and looks them up in a hash built once per walk (claim_advisory.sql);
// comparing each row with every held id, as it did before, cost most at
// the largest batches: 53,000-74,500 jobs/s at 1,000 in the same
// alternating runs.
//
// # Behind a transaction pooler
//
// PgBouncer in transaction mode (and any pooler like it) hands each
// transaction of a client connection to whichever server connection is
// free, so a session is no client's own: advisory locks taken through it
// stay in a server connection other clients then use, and since they are
// re-entrant, two claimers there both take the same job (measured before
// this check: 1,243 of 3,000 jobs run twice by three workers). The
// advisory claimer therefore proves its session is its own. When the
// first claimer of a Driver starts, a second connection of the pool must
// reach another server process; each claimer marks its session
// (session.sql), refusing one that holds another claimer's locks or mark;
// and every statement it runs checks the mark before it takes, checks or
// releases a lock. Any of these failing is queue.ErrUnsupportedServer, with
// the setup to use instead, and a Worker stops on it rather than retry.
// That setup: Strategy SkipLocked, default_query_exec_mode=exec in the DSN
// (pgx's statement cache prepares statements the pooler sends to other
// server connections: SQLSTATE 42P05 or 26000, reported as the same error
// with this advice; PgBouncer 1.21+ with max_prepared_statements also
// works), and Config.NoNotify (LISTEN needs a session of its own). Every
// statement here works in pgx's exec and simple-protocol modes. `make
// test-pgbouncer` runs the SKIP LOCKED suite through PgBouncer in
// transaction mode, and the refusal.
//
// # Wake-ups
//
// The Driver is a queue.Waker: every enqueue sends pg_notify on the jobs
// table's channel, once per queue of the batch, delivered when its
// transaction commits (never for a rollback). The first Subscribe opens one
// LISTEN connection per Driver, outside the pool; it reconnects with
// backoff and jitter, and wakes every subscriber after a reconnect, since
// notifications may have been missed. Workers still poll; a wake-up only
// cuts the wait short, so an idle queue's pickup latency is a round trip
// or two instead of the poll interval.
//
// Pick Advisory when workers connect to PostgreSQL directly (or through a
// session-mode pooler): it writes less and gives a dead worker's jobs back
// at once. Pick SkipLocked behind a transaction-mode pooler, or when
// connections are too scarce to give one to every claimer.
//
// Every worker on one table must use the same strategy. An advisory claimer
// takes jobs whose rows say ready, and a SKIP LOCKED claim takes rows no
// transaction is locking; neither sees the other's claims.
//
// # Errors and cancellation
//
// A missing table or schema is queue.ErrNotMigrated, a dedupe collision
// queue.ErrDuplicate, and serialization failures, deadlocks and lock
// timeouts (40001, 40P01, 55P03) a *dialect.RetryableError; each wraps the
// *pgconn.PgError. A dedupe key PostgreSQL text cannot hold (a NUL byte,
// invalid UTF-8) is refused as queue.ErrInvalidJob before anything is sent;
// the server's own 22021 and 22P05 map to the same error.
//
// # Moving jobs
//
// The Driver is a queue.Mover (package move): an export batch takes its
// rows with FOR UPDATE SKIP LOCKED and their advisory keys with
// pg_try_advisory_xact_lock, so neither kind of claimer takes them while
// they move, and jobs either kind holds are passed over. A context that ends during a claim stops the statement
// with a cancel request rather than by closing the connection (pgx's
// default), so an advisory claimer keeps the locks of the jobs it is
// running, and a claim either took effect and returns its jobs or left
// nothing behind: no lock, no claimed row.
//
// # Health
//
// The Driver is a queue.HealthReporter and a queue.Checker: Health tells
// what holds the MVCC horizon back (sessions of pg_stat_activity,
// replication slots, prepared transactions) and the jobs table's dead and
// live rows (pg_stat_user_tables), and Check adds the "horizon" probe
// (failing past Config.HorizonWarn, default 5m) and the "dead rows" probe
// to queue.Check. A role without pg_read_all_stats (pg_monitor) sees other
// roles' sessions without their start, so not their age. See
// docs/postgres-health.md.
//
// # Files
//
// Each step has the file of the same name in every dialect's folder:
// postgres.go (Config, New, Open, OpenDB, Migrate, the Driver), dsn.go
// (reading a DSN), enqueue.go, claim.go (what both claimers share) with
// claim_advisory.go and claim_skiplocked.go, rescue.go, admin.go,
// schedule.go, move.go, errors.go, and sql.go, the table of statements:
// one file each in sql/, and sql/move/ for package move, rendered by
// dialect.LoadSQL. waker.go (LISTEN/NOTIFY) and health.go are this
// dialect's own.
package postgres
