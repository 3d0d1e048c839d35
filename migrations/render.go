package migrations

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dbqueue/dbq/dialect"
)

// Migration is one migration of the job schema rendered for a set of names:
// the goose file as a tool reads it, and its two directions as plain SQL.
type Migration struct {
	// Version is the number the file name starts with.
	Version int64
	// File is the file's name, e.g. "00001_jobs.sql".
	File string
	// Source is the goose file: both directions with goose's annotations,
	// which the goose CLI applies as it is.
	Source []byte
	// Up and Down are the statements of each direction without goose's
	// annotations, comments kept. Either may hold no statement (a version
	// with nothing to change on this dialect).
	Up, Down string
}

// Render returns every migration of dialect d rendered for names n, in
// version order, for teams that apply migrations with their own tool
// (goose, golang-migrate, Flyway, Atlas, Rails). It needs no database.
//
// With a schema configured (PostgreSQL, SQL Server) or a database (MySQL),
// the first migration's Up begins by creating it when it does not exist,
// as NewProvider does before it migrates; no Down drops it, since it may
// hold more than dbq's tables.
//
// A database migrated this way and one migrated by dbq (Up, NewProvider,
// `dbq migrate up`) hold the same tables; only the version table differs
// (the tool's own, e.g. goose_db_version, instead of prefix+"schema_version").
// Keep to one of the two for a given set of tables.
func Render(d dialect.Name, n dialect.Names) ([]Migration, error) {
	n = n.WithDefaults()
	tidb := d == TiDB
	if tidb {
		d = dialect.MySQL
	}
	fsys, err := render(d, n, tidb)
	if err != nil {
		return nil, err
	}
	versions, err := Versions(d)
	if err != nil {
		return nil, err
	}
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return nil, err
	}
	slices.Sort(names) // zero-padded versions sort as numbers
	if len(names) != len(versions) {
		return nil, fmt.Errorf("dbq: migrations %s: %d files for %d versions", d, len(names), len(versions))
	}
	out := make([]Migration, 0, len(names))
	for i, name := range names {
		src, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			if stmt := SchemaStatement(d, n); stmt != "" {
				// One statement for goose's parser, whatever it holds.
				block := "-- The schema the tables live in, unless it exists.\n" +
					"-- +goose StatementBegin\n" + stmt + ";\n-- +goose StatementEnd\n\n"
				src = bytes.Replace(src, []byte(annotUp+"\n"), []byte(annotUp+"\n"+block), 1)
			}
		}
		up, down, err := split(src)
		if err != nil {
			return nil, fmt.Errorf("dbq: migration %s/%s: %w", d, name, err)
		}
		out = append(out, Migration{Version: versions[i], File: name, Source: src, Up: up, Down: down})
	}
	return out, nil
}

// SQL returns the plain SQL of dialect d's migrations for names n: of
// version alone, or of all of them when version is 0; the Up direction in
// ascending version order, or with down the Down direction in descending
// order (what rolls the schema back). Each migration is headed by a
// comment naming it. A version d has not is an error.
func SQL(d dialect.Name, n dialect.Names, version int64, down bool) (string, error) {
	ms, err := Render(d, n)
	if err != nil {
		return "", err
	}
	if version != 0 {
		i := slices.IndexFunc(ms, func(m Migration) bool { return m.Version == version })
		if i < 0 {
			var have []string
			for _, m := range ms {
				have = append(have, fmt.Sprint(m.Version))
			}
			return "", fmt.Errorf("dbq: %s has no migration version %d (it has %s)", d, version, strings.Join(have, ", "))
		}
		ms = ms[i : i+1]
	}
	direction := "up"
	if down {
		direction = "down"
		slices.Reverse(ms)
	}
	n = n.WithDefaults()
	var b strings.Builder
	for i, m := range ms {
		if i > 0 {
			b.WriteString("\n")
		}
		body := m.Up
		if down {
			body = m.Down
		}
		fmt.Fprintf(&b, "-- dbq migration %s, %s (%s, schema %q, prefix %q)\n", m.File, direction, d, n.Schema, n.Prefix)
		b.WriteString(body)
		if body != "" && !strings.HasSuffix(body, "\n") {
			b.WriteString("\n")
		}
	}
	return b.String(), nil
}

// WriteDir writes the goose files of dialect d's migrations for names n
// into dir (created when missing), overwriting files of the same names,
// and returns their paths. `goose -dir DIR <driver> <dsn> up` applies them
// unchanged.
func WriteDir(dir string, d dialect.Name, n dialect.Names) ([]string, error) {
	ms, err := Render(d, n)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("dbq: %w", err)
	}
	var paths []string
	for _, m := range ms {
		p := filepath.Join(dir, m.File)
		if err := os.WriteFile(p, m.Source, 0o644); err != nil {
			return paths, fmt.Errorf("dbq: %w", err)
		}
		paths = append(paths, p)
	}
	return paths, nil
}

const (
	annotUp   = "-- +goose Up"
	annotDown = "-- +goose Down"
)

// split returns the two directions of a goose file without its
// annotations (every line starting "-- +goose").
func split(src []byte) (up, down string, err error) {
	var cur *strings.Builder
	var ub, db strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch t := strings.TrimSpace(line); {
		case t == annotUp:
			cur = &ub
			continue
		case t == annotDown:
			cur = &db
			continue
		case strings.HasPrefix(t, "-- +goose"):
			continue
		}
		if cur == nil {
			if strings.TrimSpace(line) != "" && !strings.HasPrefix(strings.TrimSpace(line), "--") {
				return "", "", fmt.Errorf("statement before %q", annotUp)
			}
			continue
		}
		cur.WriteString(line)
		cur.WriteString("\n")
	}
	if err := sc.Err(); err != nil {
		return "", "", err
	}
	return strings.TrimSpace(ub.String()) + "\n", strings.TrimSpace(db.String()) + "\n", nil
}

// SchemaStatement is the statement that creates n's schema (database, on
// MySQL) when it is missing, or "" when there is none to create. On
// PostgreSQL and SQL Server it looks before it creates, so the schema's
// owner runs it without CREATE on the database.
func SchemaStatement(d dialect.Name, n dialect.Names) string {
	if n.Schema == "" {
		return ""
	}
	q := dialect.Quote(d, n.Schema)
	switch d {
	case dialect.Postgres:
		// Not CREATE SCHEMA IF NOT EXISTS: PostgreSQL checks CREATE on the
		// database before it looks, which the schema's owner may lack. The
		// name is a validated identifier, so it is a safe literal.
		return "DO $$ BEGIN\n" +
			"    IF NOT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = '" + n.Schema + "') THEN\n" +
			"        CREATE SCHEMA " + q + ";\n" +
			"    END IF;\n" +
			"END $$"
	case dialect.MySQL:
		return "CREATE DATABASE IF NOT EXISTS " + q
	case dialect.MSSQL:
		// The name is a validated identifier; CREATE SCHEMA must be alone in
		// its batch, hence EXEC.
		return "IF SCHEMA_ID('" + n.Schema + "') IS NULL EXEC('CREATE SCHEMA " + q + "')"
	}
	return ""
}
