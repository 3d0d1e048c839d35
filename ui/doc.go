// Package ui is dbq's web dashboard: an http.Handler over any dbq Queue,
// whatever its database, that shows each queue's counts, lists and finds
// jobs, shows one job in full, and retries dead jobs, cancels jobs and
// pauses or resumes queues.
//
// Mount it in your own mux, behind your own authentication:
//
//	h, err := ui.NewHandler(q, ui.Options{Prefix: "/admin/dbq"})
//	if err != nil { ... }
//	mux.Handle("/admin/dbq/", requireOperator(h))
//
// The handler has no authentication of its own: whoever reaches it can
// cancel jobs. Every page is rendered on the server from html/template
// (all output escaped) with embedded CSS and no JavaScript, under a strict
// Content-Security-Policy. Every POST needs a CSRF token bound to a
// SameSite=Strict cookie and passes net/http's CrossOriginProtection.
//
// Job lists page by id (JobFilter.AfterID), an index range however many
// jobs the table holds; a job is found by id the same way.
package ui
