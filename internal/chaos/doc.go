// Package chaos is dbq's fault harness: it proves, against a real
// database, that a queue drained by real `dbq work` processes loses no job
// while the world breaks around them.
//
// [Run] migrates a fresh table prefix, enqueues Jobs jobs with unique
// payloads and starts Workers `dbq work --ledger` processes, whose handler
// records every run of every job in a ledger table of the same database:
// a row when the run starts (job, payload, worker pid, attempt, time) and
// its finishing time when it ends. While the workers drain the queue, the
// harness
//   - kills workers with SIGKILL at random moments and starts replacements;
//   - cuts a worker's connections from the server side (PostgreSQL
//     pg_terminate_backend on the backends of the worker's
//     application_name; MySQL/MariaDB KILL CONNECTION on the threads whose
//     client port is one of the worker's sockets);
//   - freezes a worker with SIGSTOP for longer than its lease, then
//     resumes it with SIGCONT;
//   - restarts the database server (PostgreSQL with pg_ctlcluster, MariaDB
//     by SIGTERM to mariadbd and start-stop-daemon), when asked to: this
//     disturbs everyone else using that server.
//
// Before each fault the harness stops the workers it will hit (SIGSTOP)
// and reads from the ledger and the jobs table which jobs they hold: jobs
// they have run that are not completed yet. That snapshot, the runs still
// unfinished when the fault struck and the runs that started up to
// [Slack] after it (claimed before it, started after) are the runs the
// fault explains. At the end, once the queue is empty, the harness checks
// that every job finished at least once with its payload intact, that
// every job run more than once has at most one run the faults do not
// explain, that nothing is left in the jobs table, that no worker exited
// by itself and that every worker a fault hit ran jobs again after it
// (reconnected on its own). [Report] holds the figures and the problems.
//
// SQLite has no server: only kills and freezes apply.
//
// The harness needs Linux (SIGSTOP, /proc for a worker's sockets) and, for
// restarts, a server on the same machine that it may restart as root.
package chaos
