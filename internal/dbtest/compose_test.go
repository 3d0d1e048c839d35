package dbtest_test

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"

	"github.com/dbqueue/dbq/internal/dbtest"
)

// composeFile is the repository's docker-compose.yml, relative to this
// package's directory (where go test runs).
var composeFile = filepath.Join("..", "..", "docker-compose.yml")

// loadCompose loads a compose file the way Docker Compose does (schema
// validation, interpolation, normalisation), but without the caller's
// environment or a .env file, so the result does not depend on the machine.
func loadCompose(t *testing.T, path string) *types.Project {
	t.Helper()
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	opts, err := cli.NewProjectOptions([]string{abs},
		cli.WithWorkingDirectory(filepath.Dir(abs)),
		cli.WithEnv(nil),
	)
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("loading %s: %v", path, err)
	}
	return p
}

// dsnParts is what a compose service must agree with in a DSN.
type dsnParts struct {
	host, port     string
	user, password string
	hasPassword    bool
	database       string
}

func parseDSN(t *testing.T, dsn string) dsnParts {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("parsing default DSN: %v", err) // no DSN in the message: it may hold a password
	}
	pw, ok := u.User.Password()
	d := dsnParts{
		host:        u.Hostname(),
		port:        u.Port(),
		user:        u.User.Username(),
		password:    pw,
		hasPassword: ok,
		database:    strings.TrimPrefix(u.Path, "/"),
	}
	if d.database == "" { // sqlserver:// names the database in the query
		d.database = u.Query().Get("database")
	}
	if d.host == "" || d.port == "" || d.user == "" || d.database == "" {
		t.Fatalf("%s default DSN lacks host, port, user or database", u.Scheme)
	}
	return d
}

// A check returns what is wrong with one service against its DSN; empty
// means it agrees. Returning problems, rather than failing t, lets the
// mutation tests show that every check can fail.
type check func(p *types.Project, d dsnParts) []string

type problems []string

func (ps *problems) addf(format string, args ...any) { *ps = append(*ps, fmt.Sprintf(format, args...)) }

// service returns the named service, or a problem.
func service(p *types.Project, name string, ps *problems) (types.ServiceConfig, bool) {
	s, err := p.GetService(name)
	if err != nil {
		ps.addf("service %q: %v", name, err)
		return s, false
	}
	return s, true
}

// env returns the service's environment value and whether it is set.
func env(s types.ServiceConfig, key string) (string, bool) {
	v, ok := s.Environment[key]
	if !ok || v == nil {
		return "", false
	}
	return *v, true
}

// checkImage wants repo:tag where tag is want or a more specific
// version or variant of it (17 accepts 17, 17.2, 17-alpine).
func checkImage(s types.ServiceConfig, repo, want string, ps *problems) {
	r, tag, _ := strings.Cut(s.Image, ":")
	ok := r == repo && (tag == want || strings.HasPrefix(tag, want+".") || strings.HasPrefix(tag, want+"-"))
	if !ok {
		ps.addf("%s: image %q, want %s:%s", s.Name, s.Image, repo, want)
	}
}

// checkPort wants the DSN's port published to the server's container port,
// on an address the DSN's host reaches.
func checkPort(s types.ServiceConfig, target uint32, d dsnParts, ps *problems) {
	for _, pc := range s.Ports {
		if pc.Target != target || pc.Protocol != "tcp" {
			continue
		}
		if pc.Published != d.port {
			ps.addf("%s: container port %d published on host port %q, DSN uses %s", s.Name, target, pc.Published, d.port)
		}
		if ip := pc.HostIP; ip != "" && ip != "0.0.0.0" && ip != "::" && ip != d.host &&
			!(d.host == "localhost" && net.ParseIP(ip).IsLoopback()) {
			ps.addf("%s: port published on %s, DSN connects to %s", s.Name, ip, d.host)
		}
		return
	}
	ps.addf("%s: container port %d/tcp is not published", s.Name, target)
}

// checkHealth wants an enabled healthcheck whose command contains every
// word in want.
func checkHealth(s types.ServiceConfig, want []string, ps *problems) {
	hc := s.HealthCheck
	if hc == nil || hc.Disable || len(hc.Test) < 2 || (hc.Test[0] != "CMD" && hc.Test[0] != "CMD-SHELL") {
		ps.addf("%s: no enabled healthcheck", s.Name)
		return
	}
	words := hc.Test[1:]
	if hc.Test[0] == "CMD-SHELL" {
		words = strings.Fields(strings.Join(words, " "))
	}
	for _, w := range want {
		if !slices.Contains(words, w) {
			ps.addf("%s: healthcheck %q lacks %q", s.Name, hc.Test, w)
		}
	}
}

func checkPostgres(p *types.Project, d dsnParts) []string {
	var ps problems
	s, ok := service(p, "postgres", &ps)
	if !ok {
		return ps
	}
	checkImage(s, "postgres", "17", &ps)
	checkPort(s, 5432, d, &ps)
	checkHealth(s, []string{"pg_isready"}, &ps)

	// The image's defaults: user postgres, database named after the user.
	user, ok := env(s, "POSTGRES_USER")
	if !ok || user == "" {
		user = "postgres"
	}
	if user != d.user {
		ps.addf("postgres: superuser %q, DSN user %q", user, d.user)
	}
	db, ok := env(s, "POSTGRES_DB")
	if !ok || db == "" {
		db = user
	}
	if db != d.database {
		ps.addf("postgres: POSTGRES_DB creates %q, DSN database %q", db, d.database)
	}
	auth, _ := env(s, "POSTGRES_HOST_AUTH_METHOD")
	pw, _ := env(s, "POSTGRES_PASSWORD")
	switch {
	case !d.hasPassword && auth != "trust":
		ps.addf("postgres: DSN has no password but POSTGRES_HOST_AUTH_METHOD is %q, want trust", auth)
	case d.hasPassword && auth != "trust" && pw != d.password:
		ps.addf("postgres: POSTGRES_PASSWORD does not match the DSN's password")
	}
	return ps
}

func checkMySQL(p *types.Project, d dsnParts) []string {
	var ps problems
	s, ok := service(p, "mysql", &ps)
	if !ok {
		return ps
	}
	checkImage(s, "mysql", "8.4", &ps)
	checkPort(s, 3306, d, &ps)
	checkHealth(s, []string{"mysqladmin", "ping"}, &ps)

	if db, _ := env(s, "MYSQL_DATABASE"); db != d.database {
		ps.addf("mysql: MYSQL_DATABASE creates %q, DSN database %q", db, d.database)
	}
	if d.user == "root" {
		rootPW, _ := env(s, "MYSQL_ROOT_PASSWORD")
		allowEmpty, _ := env(s, "MYSQL_ALLOW_EMPTY_PASSWORD")
		switch {
		case d.password == "" && (rootPW != "" || allowEmpty == ""):
			ps.addf("mysql: DSN has no root password; want MYSQL_ALLOW_EMPTY_PASSWORD set and no MYSQL_ROOT_PASSWORD")
		case d.password != "" && rootPW != d.password:
			ps.addf("mysql: MYSQL_ROOT_PASSWORD does not match the DSN's password")
		}
		return ps
	}
	if u, _ := env(s, "MYSQL_USER"); u != d.user {
		ps.addf("mysql: MYSQL_USER %q, DSN user %q", u, d.user)
	}
	if pw, _ := env(s, "MYSQL_PASSWORD"); pw != d.password {
		ps.addf("mysql: MYSQL_PASSWORD does not match the DSN's password")
	}
	return ps
}

func checkMSSQL(p *types.Project, d dsnParts) []string {
	var ps problems
	s, ok := service(p, "mssql", &ps)
	if !ok {
		return ps
	}
	if want := "mcr.microsoft.com/mssql/server:2022-latest"; s.Image != want {
		ps.addf("mssql: image %q, want %s", s.Image, want)
	}
	checkPort(s, 1433, d, &ps)
	// mssql-tools18's sqlcmd refuses the self-signed certificate without -C.
	checkHealth(s, []string{"/opt/mssql-tools18/bin/sqlcmd", "-C"}, &ps)

	if v, _ := env(s, "ACCEPT_EULA"); v != "Y" {
		ps.addf("mssql: ACCEPT_EULA is %q, want Y", v)
	}
	if d.user != "sa" {
		ps.addf("mssql: DSN user %q, the compose file only sets up sa", d.user)
	}
	if pw, _ := env(s, "MSSQL_SA_PASSWORD"); pw == "" || pw != d.password {
		ps.addf("mssql: MSSQL_SA_PASSWORD does not match the DSN's password")
	}
	// The image creates no database of its own; only master is sure to exist.
	if d.database != "master" {
		ps.addf("mssql: DSN database %q is not created by the compose file, want master", d.database)
	}
	return ps
}

type composeCase struct {
	name  string
	dsn   string
	check check
}

var composeCases = []composeCase{
	{"Postgres", dbtest.DefaultPostgresDSN, checkPostgres},
	{"MySQL", dbtest.DefaultMySQLDSN, checkMySQL},
	{"MSSQL", dbtest.DefaultMSSQLDSN, checkMSSQL},
}

// TestComposeMatchesDefaultDSNs keeps docker-compose.yml and the suite's
// default DSNs in step: `docker compose up` must give servers the defaults
// reach. It loads the file with Docker Compose's own loader; no Docker runs.
func TestComposeMatchesDefaultDSNs(t *testing.T) {
	t.Parallel()
	p := loadCompose(t, composeFile)
	for _, c := range composeCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			for _, msg := range c.check(p, parseDSN(t, c.dsn)) {
				t.Error(msg)
			}
		})
	}
}

// TestComposeChecksCatchMismatches edits a copy of docker-compose.yml, or
// the DSN, in ways that break their agreement and wants each edit
// reported, so the checks above cannot pass vacuously.
func TestComposeChecksCatchMismatches(t *testing.T) {
	t.Parallel()
	orig, err := os.ReadFile(composeFile)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		old, new string
		service  int    // index into composeCases
		dsn      string // replaces the default DSN, if set
		want     string // in one of the reported problems
	}{
		{"WrongPostgresPort", `"127.0.0.1:5432:5432"`, `"127.0.0.1:5433:5432"`, 0, "", "host port"},
		{"WrongPostgresImage", "image: postgres:17", "image: postgres:16", 0, "", "image"},
		{"PostgresNeedsPassword", "POSTGRES_HOST_AUTH_METHOD: trust", "POSTGRES_PASSWORD: x", 0, "", "trust"},
		{"WrongPostgresDB", "POSTGRES_DB: test", "POSTGRES_DB: other", 0, "", "POSTGRES_DB"},
		{"PostgresWrongHostIP", `"127.0.0.1:5432:5432"`, `"127.0.0.2:5432:5432"`, 0, "", "published on 127.0.0.2"},
		{"WrongMySQLPort", `"127.0.0.1:3306:3306"`, `"127.0.0.1:3307:3306"`, 1, "", "host port"},
		{"MySQLRootPassword", `MYSQL_ALLOW_EMPTY_PASSWORD: "yes"`, "MYSQL_ROOT_PASSWORD: x", 1, "", "root password"},
		{"WrongMySQLDB", "MYSQL_DATABASE: test", "MYSQL_DATABASE: other", 1, "", "MYSQL_DATABASE"},
		{"WrongMySQLImage", "image: mysql:8.4", "image: mysql:8.0", 1, "", "image"},
		{"NoMySQLHealthcheck", `test: ["CMD", "mysqladmin"`, `disable: true` + "\n      x-test: [\"CMD\", \"mysqladmin\"", 1, "", "no enabled healthcheck"},
		{"WrongMSSQLPort", `"127.0.0.1:1433:1433"`, `"127.0.0.1:1434:1433"`, 2, "", "host port"},
		{"WrongMSSQLPassword", "MSSQL_SA_PASSWORD: Dbq-Passw0rd", "MSSQL_SA_PASSWORD: Other-Passw0rd", 2, "", "MSSQL_SA_PASSWORD"},
		{"NoMSSQLEula", `ACCEPT_EULA: "Y"`, `ACCEPT_EULA: "N"`, 2, "", "ACCEPT_EULA"},
		{"WrongMSSQLImage", "server:2022-latest", "server:2019-latest", 2, "", "image"},
		{"MSSQLHealthcheckWithoutC", "sqlcmd -C -S", "sqlcmd -S", 2, "", `"-C"`},
		{"OldSqlcmdPath", "/opt/mssql-tools18/bin/sqlcmd", "/opt/mssql-tools/bin/sqlcmd", 2, "", "mssql-tools18"},
		{"MSSQLPortUnpublished", `"127.0.0.1:1433:1433"`, `"127.0.0.1:1433:1434"`, 2, "", "not published"},
		{"NoPostgresService", "  postgres:\n", "  pg:\n", 0, "", `service "postgres"`},
		{"DSNPostgresUser", "", "", 0, "postgres://app@127.0.0.1:5432/test", "superuser"},
		{"DSNPostgresPassword", "POSTGRES_HOST_AUTH_METHOD: trust", "POSTGRES_PASSWORD: y", 0, "postgres://postgres:x@127.0.0.1:5432/test", "POSTGRES_PASSWORD"},
		{"DSNMySQLRootPassword", "", "", 1, "mysql://root:x@127.0.0.1:3306/test", "MYSQL_ROOT_PASSWORD"},
		{"DSNMySQLUser", "", "", 1, "mysql://app:x@127.0.0.1:3306/test", "MYSQL_USER"},
		{"DSNMSSQLDatabase", "", "", 2, "sqlserver://sa:Dbq-Passw0rd@127.0.0.1:1433?database=test", "want master"},
		{"DSNMSSQLUser", "", "", 2, "sqlserver://app:Dbq-Passw0rd@127.0.0.1:1433?database=master", "only sets up sa"},
		{"DSNHost", "", "", 2, "sqlserver://sa:Dbq-Passw0rd@127.0.0.2:1433?database=master", "DSN connects to 127.0.0.2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.old != "" && strings.Count(string(orig), tt.old) != 1 {
				t.Fatalf("docker-compose.yml has %q %d times, want once: update this test", tt.old, strings.Count(string(orig), tt.old))
			}
			path := filepath.Join(t.TempDir(), "docker-compose.yml")
			mutated := strings.Replace(string(orig), tt.old, tt.new, 1)
			if err := os.WriteFile(path, []byte(mutated), 0o644); err != nil {
				t.Fatal(err)
			}
			c := composeCases[tt.service]
			dsn := c.dsn
			if tt.dsn != "" {
				dsn = tt.dsn
			}
			got := c.check(loadCompose(t, path), parseDSN(t, dsn))
			if !slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, tt.want) }) {
				t.Errorf("problems %q, want one containing %q", got, tt.want)
			}
		})
	}
}
