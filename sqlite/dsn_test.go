package sqlite

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/dbqueue/dbq/queue"
)

// Every DSN form dbq documents for SQLite reaches the driver as the same
// file with the same query parameters.
func TestParseDSNForms(t *testing.T) {
	t.Parallel()
	const defaults = "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate"
	for _, tc := range []struct{ in, file, driver string }{
		{"jobs.db", "jobs.db", "jobs.db?" + defaults},
		{"dir/jobs.db", "dir/jobs.db", "dir/jobs.db?" + defaults},
		{"/abs/jobs.db", "/abs/jobs.db", "/abs/jobs.db?" + defaults},
		{"sqlite:jobs.db", "jobs.db", "jobs.db?" + defaults},
		{"sqlite://jobs.db", "jobs.db", "jobs.db?" + defaults},
		{"sqlite:///abs/jobs.db", "/abs/jobs.db", "/abs/jobs.db?" + defaults},
		{"SQLite:jobs.db", "jobs.db", "jobs.db?" + defaults},
		{"sqlite3:jobs.db", "jobs.db", "jobs.db?" + defaults},
		{"sqlite3:///abs/jobs.db", "/abs/jobs.db", "/abs/jobs.db?" + defaults},
		{"file:jobs.db", "jobs.db", "jobs.db?" + defaults},
		{"file:///abs/jobs.db", "/abs/jobs.db", "/abs/jobs.db?" + defaults},
		{"sqlite:jobs.db?_pragma=foreign_keys(1)", "jobs.db", "jobs.db?_pragma=foreign_keys(1)&" + defaults},
		{"sqlite:///abs/j.db?_txlock=deferred&_sync=FULL", "/abs/j.db",
			"/abs/j.db?_txlock=deferred&_sync=FULL&_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)"},
		{`C:\data\jobs.db`, `C:\data\jobs.db`, `C:\data\jobs.db?` + defaults},
	} {
		got, err := parseDSN(tc.in)
		if err != nil || got.file != tc.file || got.driver != tc.driver {
			t.Errorf("parseDSN(%q) = %q, %q, %v\nwant %q, %q", tc.in, got.file, got.driver, err, tc.file, tc.driver)
		}
		if d, err := DSN(tc.in); err != nil || d != tc.driver {
			t.Errorf("DSN(%q) = %q, %v; want %q", tc.in, d, err, tc.driver)
		}
	}
}

func TestParseDSNRejects(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{
		"", "sqlite:", "sqlite://", "sqlite3:", "file:", "file://", "sqlite:?a=b",
		":memory:", "sqlite::memory:", "file::memory:", "file::memory:?cache=shared",
		"file:file::memory:", "sqlite:x.db?mode=memory", "sqlite:x.db?%zz",
	} {
		if _, err := parseDSN(bad); !errors.Is(err, queue.ErrInvalidConfig) {
			t.Errorf("parseDSN(%q): %v, want ErrInvalidConfig", bad, err)
		}
		if _, err := OpenDB(bad); !errors.Is(err, queue.ErrInvalidConfig) {
			t.Errorf("OpenDB(%q): %v, want ErrInvalidConfig", bad, err)
		}
	}
}

func FuzzParseDSN(f *testing.F) {
	for _, s := range []string{"jobs.db", "sqlite:///a/b.db?_txlock=deferred", "file::memory:", "sqlite:", "x?%zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := parseDSN(s)
		if err != nil {
			if !errors.Is(err, queue.ErrInvalidConfig) {
				t.Fatalf("parseDSN(%q): %v does not wrap ErrInvalidConfig", s, err)
			}
			return
		}
		if p.file == "" || len(p.driver) <= len(p.file) || p.driver[:len(p.file)+1] != p.file+"?" {
			t.Fatalf("parseDSN(%q) = %q, %q", s, p.file, p.driver)
		}
	})
}

// Open reads the DSN forms itself: sqlite:///abs/path opens the file at
// /abs/path, not one named after the DSN.
func TestOpenTakesURLForm(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "url.db")
	q, err := Open(ctxT(t), "sqlite://"+path+"?_pragma=foreign_keys(1)", Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("Open did not create %s: %v", path, err)
	}
}

func TestFile(t *testing.T) {
	for in, want := range map[string]string{
		"sqlite:app.db?_pragma=foreign_keys(1)": "app.db",
		"sqlite:///abs/x.db":                    "/abs/x.db",
		"rel/y.db":                              "rel/y.db",
	} {
		if got, err := File(in); err != nil || got != want {
			t.Errorf("File(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := File("sqlite:"); err == nil {
		t.Error("File(sqlite:) accepted a DSN naming no file")
	}
}
