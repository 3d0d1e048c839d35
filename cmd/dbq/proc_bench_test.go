//go:build unix

package main

import (
	"context"
	"os/exec"
	"syscall"
	"testing"

	"github.com/dbqueue/dbq/queue"
)

// BenchmarkJobCommand runs `true` as a job's command under its supervisor
// (as dbq work does; here the test binary is the supervisor) and, for
// the cost of the supervisor, as a plain child in a group of its own.
func BenchmarkJobCommand(b *testing.B) {
	b.Run("supervised", func(b *testing.B) {
		h := commandHandler([]string{"true"}, jobEnv(), nil)
		j := &queue.Job{ID: 1, Queue: "q"}
		for b.Loop() {
			if err := h(context.Background(), j); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("plain", func(b *testing.B) {
		for b.Loop() {
			c := exec.Command("true")
			c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := c.Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
