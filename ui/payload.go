package ui

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"unicode/utf8"
)

// maxHexBytes bounds the payload bytes the Job page dumps as hex: a 1 MiB
// binary payload would be a 4.5 MB page.
const maxHexBytes = 64 << 10

// payloadView is a payload as the Job page shows it.
type payloadView struct {
	Kind string // "json", "text", "hex" or "empty"
	Text string // to show in a <pre>, escaped by the template
	Size int
	Cut  bool // Text shows only the first maxHexBytes bytes
}

// viewPayload shows p as indented JSON when it is JSON, as itself when it
// is UTF-8 text, and as a hex dump otherwise.
func viewPayload(p []byte) payloadView {
	v := payloadView{Size: len(p)}
	switch {
	case len(p) == 0:
		v.Kind = "empty"
	case json.Valid(p):
		var buf bytes.Buffer
		// SetEscapeHTML is not needed: the template escapes, and the
		// JSON is shown as the producer wrote it, not as \u003c.
		if err := json.Indent(&buf, p, "", "  "); err == nil {
			v.Kind, v.Text = "json", buf.String()
		} else {
			v.Kind, v.Text = "text", string(p)
		}
	case utf8.Valid(p):
		v.Kind, v.Text = "text", string(p)
	default:
		if len(p) > maxHexBytes {
			p, v.Cut = p[:maxHexBytes], true
		}
		v.Kind, v.Text = "hex", hex.Dump(p)
	}
	return v
}
