package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestUIRefusesNonLoopbackWithoutAllowRemote(t *testing.T) {
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "none.db") // never opened: the refusal comes first
	for _, listen := range []string{"0.0.0.0:8080", ":8080", "[::]:8080", "192.0.2.1:8080", "example.com:80"} {
		out, err := dbqCmd(context.Background(), "", "--dsn", dsn, "ui", "--listen", listen)
		if err == nil || !strings.Contains(err.Error(), "--allow-remote") {
			t.Errorf("ui --listen %s: %v %s, want a refusal naming --allow-remote", listen, err, out)
		}
	}
	for _, listen := range []string{"127.0.0.1:8080", "[::1]:8080", "localhost:8080", "0.0.0.0:8080"} {
		remote := strings.HasPrefix(listen, "0.0.0.0")
		if err := checkListen(listen, remote); err != nil {
			t.Errorf("checkListen(%s, %v): %v", listen, remote, err)
		}
	}
}

func TestUIServesTheDashboard(t *testing.T) {
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "ui.db")
	mustRun(t, "", "--dsn", dsn, "migrate", "up")
	mustRun(t, "", "--dsn", dsn, "enqueue", "--queue", "mail", `{"to":"a"}`)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := dbqCmd(ctx, "", "--dsn", dsn, "ui", "--listen", addr)
		done <- err
	}()
	var body string
	for deadline := time.Now().Add(30 * time.Second); ; {
		resp, err := http.Get("http://" + addr + "/")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
			break
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("dbq ui never answered on %s: %v (exit: %v)", addr, err, <-done)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(body, `<tr data-queue="mail">`) {
		t.Errorf("Queues page lacks queue mail:\n%s", body)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("dbq ui after cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("dbq ui did not stop when its context ended")
	}
}
