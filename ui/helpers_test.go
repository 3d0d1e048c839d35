package ui_test

import (
	"context"
	"database/sql"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq"
	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/internal/dbtest"
	"github.com/dbqueue/dbq/queue"
	"github.com/dbqueue/dbq/ui"
)

// testDB is one database the handler tests run on.
type testDB struct {
	d   dialect.Name
	dsn string // empty: SQLite in a file of the test's own
}

var testDBs = []testDB{
	{dialect.SQLite, ""},
	{dialect.Postgres, dbtest.DSN(dialect.Postgres)},
	{dialect.MySQL, dbtest.DSN(dialect.MySQL)},
}

// eachDB runs f as a parallel subtest per database.
func eachDB(t *testing.T, f func(t *testing.T, e *env)) {
	for _, db := range testDBs {
		t.Run(string(db.d), func(t *testing.T) {
			t.Parallel()
			f(t, newEnv(t, db))
		})
	}
}

// env is a migrated job table of a test's own.
type env struct {
	d     dialect.Name
	q     *queue.Queue
	db    *sql.DB // the migration's connection, open until the test ends
	names dialect.Names
}

// newEnv migrates tables of t's own (a unique prefix) in db and opens a
// Queue on them; all is dropped when t ends. A server that does not answer
// skips t, unless DBQ_REQUIRE names it.
func newEnv(t testing.TB, tdb testDB) *env {
	t.Helper()
	dsn := tdb.dsn
	if tdb.d == dialect.SQLite {
		dsn = "sqlite:" + filepath.Join(t.TempDir(), "ui.db")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := queue.Config{Prefix: dbtest.UniqueName("ui") + "_"}
	p, db, err := dbq.Migrator(ctx, dsn, cfg)
	if err != nil {
		dbtest.Unreachable(t, tdb.d, err)
	}
	dbtest.MigrateUp(t, tdb.d, p, db, cfg.Names())
	q, err := dbq.Open(ctx, dsn, dbq.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return &env{d: tdb.d, q: q, db: db, names: cfg.Names()}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// enqueue stores jobs and returns their ids.
func (e *env) enqueue(t testing.TB, jobs ...queue.NewJob) []int64 {
	t.Helper()
	ids, err := e.q.Enqueue(ctxT(t), jobs...)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// kill makes job id of queue name dead with last_error msg; other jobs of
// the queue it claims on the way are released.
func (e *env) kill(t testing.TB, name string, id int64, msg string) {
	t.Helper()
	ctx := ctxT(t)
	c, err := e.q.NewClaimer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	jobs, err := c.Claim(ctx, name, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var others []queue.Lease
	found := false
	for _, j := range jobs {
		if j.ID != id {
			others = append(others, j.Lease())
			continue
		}
		found = true
		if err := c.Retry(ctx, []queue.RetryParams{{Lease: j.Lease(), Error: msg, Dead: true}}); err != nil {
			t.Fatal(err)
		}
	}
	if len(others) > 0 {
		if err := c.Release(ctx, others); err != nil {
			t.Fatal(err)
		}
	}
	if !found {
		t.Fatalf("job %d of %s was not claimed", id, name)
	}
}

// job returns the stored job id, or nil.
func (e *env) job(t *testing.T, id int64) *queue.Job {
	t.Helper()
	jobs, err := e.q.Jobs(ctxT(t), queue.JobFilter{AfterID: id - 1, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) == 0 || jobs[0].ID != id {
		return nil
	}
	return jobs[0]
}

// insertRaw stores a job as a producer in another language may: a plain
// INSERT, with no check of the queue name. (SQLite and MySQL tables have no
// default for run_at and created_at, so those are given there.)
func (e *env) insertRaw(t *testing.T, queueName string, payload []byte) {
	t.Helper()
	table := e.names.Qualified(e.d, e.names.Jobs())
	var err error
	switch e.d {
	case dialect.Postgres:
		_, err = e.db.ExecContext(ctxT(t), "INSERT INTO "+table+" (queue, payload) VALUES ($1, $2)", queueName, payload)
	case dialect.SQLite:
		now := time.Now().UnixMicro()
		_, err = e.db.ExecContext(ctxT(t), "INSERT INTO "+table+" (queue, payload, run_at, created_at) VALUES (?, ?, ?, ?)",
			queueName, payload, now, now)
	default:
		now := time.Now().UTC()
		_, err = e.db.ExecContext(ctxT(t), "INSERT INTO "+table+" (queue, payload, run_at, created_at) VALUES (?, ?, ?, ?)",
			queueName, payload, now, now)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// browser is an HTTP client with cookies, on a test server.
type browser struct {
	t   *testing.T
	srv *httptest.Server
	c   *http.Client
}

// serve starts the dashboard of e (at prefix, with opts) in a test server.
func (e *env) serve(t *testing.T, opts ui.Options) *browser {
	t.Helper()
	h, err := ui.NewHandler(e.q, opts)
	if err != nil {
		t.Fatal(err)
	}
	root := http.Handler(h)
	if opts.Prefix != "" {
		mux := http.NewServeMux()
		mux.Handle(opts.Prefix+"/", h)
		mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "app", http.StatusTeapot) })
		root = mux
	}
	srv := httptest.NewServer(root)
	t.Cleanup(srv.Close)
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, srv: srv, c: &http.Client{Jar: jar, Timeout: time.Minute,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// get returns the status and body of path.
func (b *browser) get(path string) (int, string) {
	b.t.Helper()
	resp, err := b.c.Get(b.srv.URL + path)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// get2 returns the status and the redirect target of path.
func (b *browser) get2(path string) (int, string) {
	b.t.Helper()
	resp, err := b.c.Get(b.srv.URL + path)
	if err != nil {
		b.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Location")
}

// page returns the body of path, failing t unless it is a 200.
func (b *browser) page(path string) string {
	b.t.Helper()
	code, body := b.get(path)
	if code != http.StatusOK {
		b.t.Fatalf("GET %s: %d %s", path, code, body)
	}
	return body
}

var csrfRe = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// token returns the CSRF token of the page at path.
func (b *browser) token(path string) string {
	b.t.Helper()
	m := csrfRe.FindStringSubmatch(b.page(path))
	if m == nil {
		b.t.Fatalf("no CSRF token on %s", path)
	}
	return m[1]
}

// post posts form to path with header hdr and returns the status and the
// redirect target.
func (b *browser) post(path string, form url.Values, hdr ...string) (int, string) {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.srv.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("Location")
}

var rowIDRe = regexp.MustCompile(`<tr data-id="(\d+)">`)

// rowIDs returns the job ids a Jobs page lists, in order.
func rowIDs(t *testing.T, body string) []int64 {
	t.Helper()
	var ids []int64
	for _, m := range rowIDRe.FindAllStringSubmatch(body, -1) {
		id, _ := strconv.ParseInt(m[1], 10, 64)
		ids = append(ids, id)
	}
	return ids
}

var (
	tagRe   = regexp.MustCompile(`<[^>]*>`)
	spaceRe = regexp.MustCompile(`\s+`)
)

// queueRow returns the text of the Queues page's row of queue name, cells
// separated by single spaces, or "" when there is none.
func queueRow(body, name string) string {
	i := strings.Index(body, `<tr data-queue="`+name+`">`)
	if i < 0 {
		return ""
	}
	row, _, _ := strings.Cut(body[i:], "</tr>")
	return strings.TrimSpace(spaceRe.ReplaceAllString(tagRe.ReplaceAllString(row, " "), " "))
}

var linkRe = regexp.MustCompile(`<a rel="(\w+)" href="([^"]+)">`)

// link returns the Jobs page's link of rel (first, prev, next), unescaped,
// or "".
func link(body, rel string) string {
	for _, m := range linkRe.FindAllStringSubmatch(body, -1) {
		if m[1] == rel {
			return strings.ReplaceAll(m[2], "&amp;", "&")
		}
	}
	return ""
}

// nextLink returns the Jobs page's next-page link, unescaped, or "".
func nextLink(body string) string { return link(body, "next") }

func equalIDs(t *testing.T, what string, got, want []int64) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s: ids %v, want %v", what, got, want)
	}
}

// ownScript is the one script tag of a page, served at the root.
const ownScript = `<script src="/static/live.js"></script>`

// withoutOwnScript returns body without the dashboard's own script tag, so
// that any "<script" left came from the data.
func withoutOwnScript(body string) string { return strings.Replace(body, ownScript, "", 1) }
