package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq/queue"
)

// TestTailKeepsItsCap writes 10 MiB to a tail in every way io.Copy may
// (one Write of it all, a 32 KiB buffer, small odd writes) and checks it
// holds exactly the last 4 KiB in no more than 4 KiB of memory.
func TestTailKeepsItsCap(t *testing.T) {
	data := make([]byte, 10<<20)
	for i := range data {
		data[i] = byte(i*7 + i/4096)
	}
	want := data[len(data)-stderrTail:]
	sources := map[string]func() io.Reader{
		"bytes.Reader (WriteTo, one Write)": func() io.Reader { return bytes.NewReader(data) },
		"bytes.Buffer (WriteTo)":            func() io.Reader { return bytes.NewBuffer(append([]byte(nil), data...)) },
		"plain reader (32 KiB Writes)":      func() io.Reader { return struct{ io.Reader }{bytes.NewReader(data)} },
		"odd reads":                         func() io.Reader { return &oddReader{data: data} },
	}
	for name, src := range sources {
		tl := &tail{max: stderrTail}
		if _, err := io.Copy(tl, src()); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(tl.Bytes(), want) {
			t.Errorf("%s: tail holds %d bytes, not the last %d written", name, len(tl.Bytes()), stderrTail)
		}
		if c := cap(tl.buf); c > stderrTail {
			t.Errorf("%s: tail holds %d bytes of memory, want at most %d", name, c, stderrTail)
		}
	}
	short := &tail{max: stderrTail}
	_, _ = short.Write([]byte("a")) // a tail never fails a write
	_, _ = short.Write([]byte("bc"))
	if got := string(short.Bytes()); got != "abc" {
		t.Errorf("under the cap: %q, want abc", got)
	}
}

// oddReader hands out data 1 to 4,999 bytes at a time.
type oddReader struct {
	data []byte
	n    int
}

func (r *oddReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	r.n = (r.n*31 + 17) % 4999
	k := min(len(p), len(r.data), 1+r.n)
	copy(p, r.data[:k])
	r.data = r.data[k:]
	return k, nil
}

// TestCommandHandlerStderr runs a job command that writes 8 MiB to stderr
// and fails: all of it passes through, and the job's error holds the end
// of it, cut to what last_error keeps.
func TestCommandHandlerStderr(t *testing.T) {
	h := commandHandler([]string{"sh", "-c", `head -c 8388608 /dev/zero >&2; echo the end >&2; exit 3`}, jobEnv(), nil)
	stderr := captureStderr(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := h(ctx, &queue.Job{ID: 1, Queue: "q"})
	if err == nil || !strings.HasSuffix(err.Error(), "the end") || len(err.Error()) > queue.MaxErrorBytes {
		t.Errorf("error: %d bytes ending %q, want the tail of stderr", len(err.Error()), err.Error()[max(0, len(err.Error())-20):])
	}
	if n := len(stderr()); n != 8<<20+len("the end\n") {
		t.Errorf("%d bytes passed through to stderr, want all %d", n, 8<<20+len("the end\n"))
	}
}
