package postgres

import (
	"strings"
	"unicode/utf8"

	"github.com/dbqueue/dbq/queue"
)

// errorText makes s storable as last_error: valid UTF-8 without NUL bytes
// (a PostgreSQL text value can hold neither), at most queue.MaxErrorBytes
// bytes, cut on a character boundary.
func errorText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	if len(s) <= queue.MaxErrorBytes {
		return s
	}
	cut := queue.MaxErrorBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
