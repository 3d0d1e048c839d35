package dialect

import (
	"bytes"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"text/template"
)

// SQLFiles is one set of SQL files — a dialect's statements, its move
// statements or its migrations — parsed as text/template files with one
// vocabulary for every dialect:
//
//	{{table "jobs"}}   the quoted, schema-qualified name of table prefix+"jobs"
//	{{ident "jobs_x"}} the quoted name prefix+"jobs_x" (an index, a constraint)
//	{{schema}}         the quoted schema, or "" when none is configured
//	{{prefix}}         the table-name prefix, unquoted
//	{{rows n}}         0 … n-1, to range over for a group per row:
//	                   {{range $i := rows .N}}{{if $i}}, {{end}}(?, ?){{end}}
//	{{params n}}       n "?" placeholders joined by ", ", for an IN list
//
// Names come from validated [Names] and are quoted by the dialect; every
// value travels as a bind parameter. A file's data (the argument of
// [SQLFiles.Render]) is the dialect's own: a row count, the filters of a
// variant. Full-line "--" comments and blank lines are dropped unless
// [SQLOptions.KeepComments] is set, as migrations need for goose's
// annotations.
type SQLFiles struct {
	files map[string]*template.Template
}

// SQLOptions adjusts [LoadSQL].
type SQLOptions struct {
	// Funcs adds a dialect's own template functions (e.g. tidb).
	Funcs template.FuncMap
	// KeepComments keeps comment lines and blank lines as written.
	KeepComments bool
}

// LoadSQL parses the files of fsys matching pattern for dialect d and
// names n. A file is known by its path without ".sql", relative to the
// directory part of pattern: "sql/move/*.sql" yields "export", "insert"….
func LoadSQL(fsys fs.FS, pattern string, d Name, n Names, opts SQLOptions) (*SQLFiles, error) {
	if err := n.Validate(); err != nil {
		return nil, err
	}
	n = n.WithDefaults()
	funcs := template.FuncMap{
		"table": func(s string) string { return n.Qualified(d, n.Prefix+s) },
		"ident": func(s string) string { return Quote(d, n.Prefix+s) },
		// sequence names a sequence as SQL Server's NEXT VALUE FOR takes
		// it: as table does, but bare when there is no schema. Babelfish
		// for PostgreSQL looks NEXT VALUE FOR [name] up with the brackets
		// in the name ("relation "[name]" does not exist"); a validated
		// prefix and a plain suffix make a regular identifier.
		"sequence": func(s string) string {
			if n.Schema == "" && d == MSSQL {
				return n.Prefix + s
			}
			return n.Qualified(d, n.Prefix+s)
		},
		"schema": func() string {
			if n.Schema == "" || d == SQLite {
				return ""
			}
			return Quote(d, n.Schema)
		},
		"prefix": func() string { return n.Prefix },
		"rows":   rowNumbers,
		"params": params,
	}
	for k, f := range opts.Funcs {
		funcs[k] = f
	}
	matches, err := fs.Glob(fsys, pattern)
	if err != nil {
		return nil, err
	}
	if len(matches) == 0 {
		return nil, fmt.Errorf("dbq: %s: no SQL files match %s", d, pattern)
	}
	dir := path.Dir(pattern)
	s := &SQLFiles{files: make(map[string]*template.Template, len(matches))}
	for _, p := range matches {
		src, err := fs.ReadFile(fsys, p)
		if err != nil {
			return nil, err
		}
		text := string(src)
		if !opts.KeepComments {
			text = stripComments(text)
		}
		name := strings.TrimSuffix(strings.TrimPrefix(p, dir+"/"), ".sql")
		if dir == "." {
			name = strings.TrimSuffix(p, ".sql")
		}
		t, err := template.New(name).Funcs(funcs).Option("missingkey=error").Parse(text)
		if err != nil {
			return nil, fmt.Errorf("dbq: %s: %s: %w", d, p, err)
		}
		s.files[name] = t
	}
	return s, nil
}

// Names returns the names of the files, sorted.
func (s *SQLFiles) Names() []string {
	out := make([]string, 0, len(s.files))
	for k := range s.files {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Render executes file name with data.
func (s *SQLFiles) Render(name string, data any) (string, error) {
	t, ok := s.files[name]
	if !ok {
		return "", fmt.Errorf("dbq: no SQL file %q", name)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return "", fmt.Errorf("dbq: SQL file %s: %w", name, err)
	}
	return b.String(), nil
}

// Text renders every file that needs no data into dst, by name: the
// statement table of a dialect's sql.go. A name missing from the files is
// an error, so a renamed file cannot leave a statement empty.
func (s *SQLFiles) Text(dst map[string]*string) error {
	for name, p := range dst {
		text, err := s.Render(name, nil)
		if err != nil {
			return err
		}
		*p = text
	}
	return nil
}

func rowNumbers(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func params(n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Repeat("?, ", n-1) + "?"
}

// stripComments drops full-line "--" comments and blank lines, and
// trailing blanks, so a comment never holds a stray placeholder.
func stripComments(s string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "--") {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(strings.TrimRight(line, " \t\r\n"))
	}
	return b.String()
}
