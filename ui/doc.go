// Package ui is dbq's web dashboard: an http.Handler over any dbq Queue,
// whatever its database, that shows each queue's counts, lists and finds
// jobs, shows one job in full, lists the recurring schedules, and retries
// dead jobs, cancels jobs and pauses or resumes queues and schedules.
//
// Mount it in your own mux, behind your own authentication:
//
//	h, err := ui.NewHandler(q, ui.Options{Prefix: "/admin/dbq", AllowedHosts: []string{"admin.example.com"}})
//	if err != nil { ... }
//	mux.Handle("/admin/dbq/", requireOperator(h))
//
// The handler has no authentication of its own: whoever reaches it can
// cancel jobs. It answers only requests whose Host header is "localhost",
// a loopback address or one of Options.AllowedHosts (421 otherwise), so
// that a page of another site, its name pointed at 127.0.0.1 (DNS
// rebinding), cannot read or drive a dashboard on its visitor's machine. Every page is rendered on the server from html/template
// (all output escaped) with embedded CSS, under a strict
// Content-Security-Policy that allows no inline code. The one script,
// embedded like the CSS, is the Live switch: while it is on, a page
// fetches itself every Options.Refresh and swaps in its main content,
// keeping the URL (filters, page) and the scroll position; every page
// works without it. Every POST needs a CSRF token bound to a
// SameSite=Strict cookie and passes net/http's CrossOriginProtection.
//
// The Queues page counts with Queue.CountQueues, not Stats: each count of
// a queue and state stops at Options.CountLimit (1000) and then reads
// "1000+". Stats reads every stored job, which on a million takes about a
// second, on every refresh of the page; a capped count reads at most about
// the limit's worth of index entries per queue and state (the queues
// themselves, and each queue's priorities, are found by skipping through
// an index, one descent each; ready and scheduled jobs are counted in each
// priority's due or future range, see docs/dashboard.md), and an operator
// still tells 3 from 900 from "a lot". Planner
// estimates of the table's size were the alternative: cheaper still, but
// per table rather than per queue and state, stale until the next ANALYZE,
// and absent from SQL Server's and SQLite's reach without extra rights or
// statistics; exact small counts matter more on this page than a rough
// large one. The oldest ready wait stays exact (the first run_at of each
// priority, one index descent each).
//
// Job lists page by id (JobFilter.AfterID), an index range however many
// jobs the table holds; a job is found by id the same way, or by queue and
// dedupe key (JobFilter.DedupeKey, a probe of the unique index on the
// two). The links carry the cursors of the pages before (up to 20) for
// Previous page.
//
// The Schedules page lists the queue's stored schedules (see package
// schedule) with each one's next tick computed from its spec; a driver
// without a schedule store ([queue.ScheduleStore]) gets a page that says
// so.
package ui
