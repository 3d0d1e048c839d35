package ui

import (
	"bytes"
	"context"
	"crypto/rand"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/queue"
)

//go:embed templates/*.html static/*
var assets embed.FS

// Default and largest Options.PageSize.
const (
	DefaultPageSize = 50
	MaxPageSize     = 1000
)

// Options configures NewHandler. The zero value serves at the root, with
// actions, 50 jobs a page and a random CSRF secret.
type Options struct {
	// Prefix is the path the handler is mounted under, such as
	// "/admin/dbq": the handler serves Prefix+"/" and below, and builds
	// every link from it. Default "" (the root).
	Prefix string
	// ReadOnly hides the actions and refuses every POST with 403.
	ReadOnly bool
	// PageSize is the jobs a list page shows. Default 50, at most 1000.
	PageSize int
	// CSRFSecret signs the CSRF tokens and flash messages. Default: 32
	// random bytes per handler. Give every process the same secret when
	// several serve the dashboard behind one address.
	CSRFSecret []byte
	// Logger receives errors the pages could not show. Default: the
	// Queue's logger.
	Logger *slog.Logger
	// CountLimit is where the Queues page stops counting a queue's jobs
	// of one state: it shows "1000+" rather than read a million index
	// entries to print 1000000 (see Queue.CountQueues). Default 1000.
	CountLimit int64
	// AllowedHosts are the host names and addresses (no port), beyond
	// "localhost" and loopback addresses, that a request may name in its
	// Host header; any other is refused with 421 Misdirected Request
	// before anything else is read. By default only loopback names pass,
	// so that a page of another site whose name its owner points at
	// 127.0.0.1 (DNS rebinding) cannot read or drive a dashboard served on
	// this machine. Name the hosts your users type when you mount the
	// handler elsewhere, such as []string{"admin.example.com"}; "*"
	// accepts every Host, which is safe only behind authentication that a
	// page of another origin cannot pass. Names compare case-insensitively,
	// without a trailing dot.
	AllowedHosts []string
	// Refresh is how often a page fetches itself again while the user has
	// switched Live on (a switch each browser remembers; off at first), in
	// whole seconds, at least one. Default 5s; negative hides the switch
	// and serves no script.
	Refresh time.Duration
}

// DefaultRefresh is Options.Refresh's default.
const DefaultRefresh = 5 * time.Second

// DefaultCountLimit is Options.CountLimit's default.
const DefaultCountLimit = 1000

// handler serves the dashboard of one Queue.
type handler struct {
	q      *queue.Queue
	opts   Options
	tmpl   map[string]*template.Template
	mux    *http.ServeMux
	log    *slog.Logger
	secret []byte
	// crossOrigin refuses requests a browser marks as cross-site, even
	// with a valid token.
	crossOrigin *http.CrossOriginProtection
	// hosts are Options.AllowedHosts, normalized; anyHost when "*" is
	// among them.
	hosts   map[string]bool
	anyHost bool
}

// NewHandler returns the dashboard of q. See the package doc for mounting
// it and for what it does and does not protect.
func NewHandler(q *queue.Queue, opts Options) (http.Handler, error) {
	if q == nil {
		return nil, errors.New("dbq: ui: nil queue")
	}
	opts.Prefix = strings.TrimRight(opts.Prefix, "/")
	if opts.Prefix != "" && (!strings.HasPrefix(opts.Prefix, "/") || strings.ContainsAny(opts.Prefix, "?#\"'<> ")) {
		return nil, fmt.Errorf("dbq: ui: Prefix %q: want a path such as /admin/dbq", opts.Prefix)
	}
	switch {
	case opts.PageSize == 0:
		opts.PageSize = DefaultPageSize
	case opts.PageSize < 0 || opts.PageSize > MaxPageSize:
		return nil, fmt.Errorf("dbq: ui: PageSize %d out of range 1..%d", opts.PageSize, MaxPageSize)
	}
	if opts.Refresh == 0 {
		opts.Refresh = DefaultRefresh
	}
	switch {
	case opts.CountLimit == 0:
		opts.CountLimit = DefaultCountLimit
	case opts.CountLimit < 0:
		return nil, fmt.Errorf("dbq: ui: CountLimit %d, want at least 1", opts.CountLimit)
	}
	h := &handler{q: q, opts: opts, log: opts.Logger, secret: opts.CSRFSecret,
		crossOrigin: http.NewCrossOriginProtection(), hosts: map[string]bool{}}
	for _, host := range opts.AllowedHosts {
		switch n := normalHost(host); {
		case host == "*":
			h.anyHost = true
		case n == "" || strings.ContainsAny(n, "/:@ ") && net.ParseIP(n) == nil:
			return nil, fmt.Errorf("dbq: ui: AllowedHosts entry %q: want a host name or address without port, or *", host)
		default:
			h.hosts[n] = true
		}
	}
	if h.log == nil {
		h.log = q.Config().Logger
	}
	if len(h.secret) == 0 {
		h.secret = make([]byte, 32)
		rand.Read(h.secret)
	}
	if err := h.parse(); err != nil {
		return nil, err
	}
	static, _ := fs.Sub(assets, "static")
	m := http.NewServeMux()
	m.HandleFunc("GET /{$}", h.queues)
	m.HandleFunc("GET /jobs", h.jobs)
	m.HandleFunc("GET /jobs/{id}", h.job)
	m.HandleFunc("POST /retry", h.retry)
	m.HandleFunc("POST /cancel", h.cancel)
	m.HandleFunc("POST /pause", h.pause(true))
	m.HandleFunc("POST /resume", h.pause(false))
	m.HandleFunc("GET /schedules", h.schedules)
	m.HandleFunc("GET /workers", h.workers)
	m.HandleFunc("POST /schedules/pause", h.pauseSchedule(true))
	m.HandleFunc("POST /schedules/resume", h.pauseSchedule(false))
	m.HandleFunc("POST /schedules/delete", h.deleteSchedule)
	m.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	h.mux = m
	return h, nil
}

// csp allows nothing but the embedded stylesheet and script (no inline
// code of any kind), the script's fetches of these pages, and forms posted
// back here.
const csp = "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; img-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.allowedHost(r.Host) {
		http.Error(w, "dbq: this dashboard does not answer to the host this request names (see ui.Options.AllowedHosts, dbq ui --allowed-hosts)",
			http.StatusMisdirectedRequest)
		return
	}
	hd := w.Header()
	hd.Set("Content-Security-Policy", csp)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "same-origin")
	hd.Set("Cache-Control", "no-store")
	path, ok := strings.CutPrefix(r.URL.Path, h.opts.Prefix)
	if !ok || !strings.HasPrefix(path, "/") {
		if ok && path == "" && r.Method == http.MethodGet {
			http.Redirect(w, r, h.opts.Prefix+"/", http.StatusFound)
			return
		}
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if h.opts.ReadOnly {
			http.Error(w, "dbq: the dashboard is read-only", http.StatusForbidden)
			return
		}
		if err := h.crossOrigin.Check(r); err != nil {
			http.Error(w, "dbq: cross-origin request refused", http.StatusForbidden)
			return
		}
		if !h.validToken(r) {
			http.Error(w, "dbq: missing or invalid CSRF token; reload the page and try again", http.StatusForbidden)
			return
		}
	}
	r2 := r.Clone(r.Context())
	r2.URL.Path = path
	r2.URL.RawPath = ""
	h.mux.ServeHTTP(w, r2)
}

// page is what every template gets.
type page struct {
	Title    string
	Prefix   string
	Dialect  string
	CSRF     string
	ReadOnly bool
	Flash    string
	Nav      string
	// Refresh is the seconds between live refreshes; 0 hides the switch.
	Refresh int
	Data    any
}

// render answers r with the page name (200, or status when given).
func (h *handler) render(w http.ResponseWriter, r *http.Request, name, title string, data any, status ...int) {
	p := page{Title: title, Prefix: h.opts.Prefix, Dialect: h.q.Dialect(), ReadOnly: h.opts.ReadOnly,
		Nav: name, Data: data, Refresh: int(max(h.opts.Refresh, 0).Round(time.Second) / time.Second)}
	if h.opts.Refresh > 0 && p.Refresh == 0 {
		p.Refresh = 1
	}
	if !h.opts.ReadOnly {
		p.CSRF = h.csrfToken(w, r)
	}
	p.Flash = h.takeFlash(w, r)
	var buf bytes.Buffer
	if err := h.tmpl[name].ExecuteTemplate(&buf, "layout", p); err != nil {
		h.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if len(status) > 0 {
		w.WriteHeader(status[0])
	}
	_, _ = buf.WriteTo(w) // a client gone mid-page is no error of ours
}

// fail answers r with err's text, escaped, and logs it.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, queue.ErrInvalidJob), errors.Is(err, queue.ErrInvalidLimit),
		errors.Is(err, dialect.ErrInvalidQueue), errors.Is(err, errBadRequest):
		status = http.StatusBadRequest
	case errors.Is(err, queue.ErrScheduleNotFound):
		status = http.StatusNotFound
	case errors.Is(err, queue.ErrUnsupported):
		status = http.StatusNotImplemented
	case errors.Is(err, context.Canceled):
		return
	default:
		h.log.Error("dbq ui", "path", r.URL.Path, "err", err)
	}
	http.Error(w, err.Error(), status)
}

var errBadRequest = errors.New("dbq: ui: bad request")

// queuesPage is the data of the Queues page.
type queuesPage struct {
	Queues []queueRow
	// Limit is where each count stopped: a count of Limit reads "Limit+".
	Limit int64
	// NoCharts says why there are no throughput charts; "" when there
	// are.
	NoCharts string
}

// queueRow is a queue's counts and its last hour's chart (nil: no job
// ended there in the hour).
type queueRow struct {
	queue.QueueStats
	Chart *chart
}

func (h *handler) queues(w http.ResponseWriter, r *http.Request) {
	// Counts that stop at the limit: a pass over every stored job
	// (Stats) takes a second on a million.
	st, err := h.q.CountQueues(r.Context(), h.opts.CountLimit)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	// CountQueues counts jobs, so a paused queue with none is missing from it;
	// show it, or it could never be resumed from here.
	paused, err := h.q.Paused(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	for _, name := range paused {
		if !slices.ContainsFunc(st, func(s queue.QueueStats) bool { return s.Queue == name }) {
			st = append(st, queue.QueueStats{Queue: name, Paused: true})
		}
	}
	// Completed jobs are deleted: a busy queue that is empty now shows
	// in its chart alone.
	now := time.Now()
	counts, err := h.q.Activity(r.Context(), now.Add(-(chartMinutes-1)*time.Minute))
	p := queuesPage{Limit: h.opts.CountLimit}
	if p.NoCharts, err = h.activityNote(err); err != nil {
		h.fail(w, r, err)
		return
	}
	byQueue := charts(counts, now)
	for name := range byQueue {
		if !slices.ContainsFunc(st, func(s queue.QueueStats) bool { return s.Queue == name }) {
			st = append(st, queue.QueueStats{Queue: name})
		}
	}
	slices.SortFunc(st, func(a, b queue.QueueStats) int { return strings.Compare(a.Queue, b.Queue) })
	for _, s := range st {
		p.Queues = append(p.Queues, queueRow{QueueStats: s, Chart: byQueue[s.Queue]})
	}
	h.render(w, r, "queues", "Queues", p)
}

// jobsPage is the data of the Jobs page.
type jobsPage struct {
	Queue, State, Kind, Key string
	States                  []string
	Jobs                    []*queue.Job
	After                   int64
	// First, Prev and Next link to the first, previous and next pages;
	// "" when there is none (or, for Prev, when its cursor was dropped).
	First, Prev, Next string
	Now               time.Time
}

// listStates are the states the Jobs page filters on; "claimed" is
// "held" on the pages.
var listStates = []string{"ready", "claimed", "dead"}

// maxBack is how many earlier pages' cursors a Jobs page link carries (in
// its back parameter) for Previous links; a reader paging deeper loses the
// oldest ones and gets First page there instead.
const maxBack = 20

func (h *handler) jobs(w http.ResponseWriter, r *http.Request) {
	qv := r.URL.Query()
	if s := strings.TrimSpace(qv.Get("id")); s != "" {
		id, err := strconv.ParseInt(strings.TrimPrefix(s, "#"), 10, 64)
		if err != nil || id < 1 {
			h.fail(w, r, fmt.Errorf("%w: job id %q is not a positive number", errBadRequest, s))
			return
		}
		http.Redirect(w, r, h.opts.Prefix+"/jobs/"+strconv.FormatInt(id, 10), http.StatusSeeOther)
		return
	}
	// No Stats here (for a list of queue names): counting is a scan, and
	// this page must stay an index range on a table of millions.
	f := queue.JobFilter{Queue: strings.TrimSpace(qv.Get("queue")), State: queue.State(qv.Get("state")),
		Kind: strings.TrimSpace(qv.Get("kind")), DedupeKey: qv.Get("key"), Limit: h.opts.PageSize + 1}
	if f.DedupeKey != "" && f.Queue == "" {
		h.fail(w, r, fmt.Errorf("%w: a dedupe key is unique within its queue: give the queue too", errBadRequest))
		return
	}
	var err error
	if f.AfterID, err = cursor("after", qv.Get("after")); err != nil {
		h.fail(w, r, err)
		return
	}
	// JobFilter pages forwards only, so the way back is the cursors of the
	// pages before this one, carried in the links: back=0,51,102.
	var back []int64
	if s := qv.Get("back"); s != "" {
		for c := range strings.SplitSeq(s, ",") {
			id, err := cursor("back", c)
			if err == nil && c == "" {
				err = fmt.Errorf("%w: back=%q is not a list of job ids", errBadRequest, s)
			}
			if err != nil {
				h.fail(w, r, err)
				return
			}
			back = append(back, id)
		}
	}
	jobs, err := h.q.Jobs(r.Context(), f)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	p := jobsPage{Queue: f.Queue, State: string(f.State), Kind: f.Kind, Key: f.DedupeKey, States: listStates, After: f.AfterID, Now: time.Now()}
	if f.AfterID > 0 {
		p.First = h.pageURL(f, 0, nil)
	}
	if n := len(back); n > 0 {
		p.Prev = h.pageURL(f, back[n-1], back[:n-1])
	}
	if len(jobs) > h.opts.PageSize {
		jobs = jobs[:h.opts.PageSize]
		p.Next = h.pageURL(f, jobs[len(jobs)-1].ID, append(back, f.AfterID))
	}
	p.Jobs = jobs
	h.render(w, r, "jobs", "Jobs", p)
}

// cursor parses the job id cursor of parameter name.
func cursor(name, s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id < 0 {
		return 0, fmt.Errorf("%w: %s=%q is not a job id", errBadRequest, name, s)
	}
	return id, nil
}

// jobPage is the data of the Job page.
type jobPage struct {
	Job     *queue.Job
	Payload payloadView
	Now     time.Time
}

// find returns the stored job id, or nil when there is none: completed
// and cancelled jobs are deleted.
func (h *handler) find(ctx context.Context, id int64) (*queue.Job, error) {
	jobs, err := h.q.Jobs(ctx, queue.JobFilter{AfterID: id - 1, Limit: 1})
	if err != nil || len(jobs) == 0 || jobs[0].ID != id {
		return nil, err
	}
	return jobs[0], nil
}

func (h *handler) job(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		http.NotFound(w, r)
		return
	}
	j, err := h.find(r.Context(), id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if j == nil {
		h.render(w, r, "missing", "Job not found", id, http.StatusNotFound)
		return
	}
	h.render(w, r, "job", fmt.Sprintf("Job %d", id), jobPage{Job: j, Payload: viewPayload(j.Payload), Now: time.Now()})
}
