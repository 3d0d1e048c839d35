package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/dbqueue/dbq/ui"
	"github.com/spf13/cobra"
)

func uiCmd(g *globals) *cobra.Command {
	var (
		listen      string
		allowRemote bool
		readOnly    bool
	)
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Serve the web dashboard: queues, jobs, retry, cancel, pause (no authentication: loopback only by default)",
		Long: `Serve the web dashboard of the queue in --dsn: each queue's counts, the jobs
by queue and state, one job in full (payload, attempts, last error), and
actions: retry dead jobs, cancel a job, pause and resume a queue.

The dashboard has NO authentication of its own: anyone who reaches it can
cancel jobs. It listens on the loopback interface only, unless
--allow-remote is given; put it behind a proxy that authenticates, or embed
the handler (package github.com/dbqueue/dbq/ui) behind your own auth
middleware instead. --read-only hides the actions.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkListen(listen, allowRemote); err != nil {
				return err
			}
			ctx := cmd.Context()
			q, err := g.open(ctx, g.config())
			if err != nil {
				return err
			}
			defer q.Close()
			h, err := ui.NewHandler(q, ui.Options{ReadOnly: readOnly, Logger: g.logger()})
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return err
			}
			srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
			fmt.Fprintf(cmd.OutOrStdout(), "dbq ui: serving %s on http://%s/ (Ctrl-C stops)\n", q.Dialect(), ln.Addr())
			done := make(chan error, 1)
			go func() { done <- srv.Serve(ln) }()
			select {
			case err := <-done:
				return err
			case <-ctx.Done():
			}
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := srv.Shutdown(sctx); err != nil {
				return err
			}
			if err := <-done; !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:8080", "address to serve on")
	f.BoolVar(&allowRemote, "allow-remote", false, "allow a --listen address other than loopback (the dashboard has no authentication)")
	f.BoolVar(&readOnly, "read-only", false, "show no actions and refuse every change")
	return cmd
}

// checkListen refuses an address that is not on the loopback interface
// (an empty host listens on every interface) unless allowRemote.
func checkListen(listen string, allowRemote bool) error {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", listen, err)
	}
	if allowRemote || host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("--listen %s is not a loopback address and the dashboard has no authentication: "+
		"use 127.0.0.1, or add --allow-remote behind a proxy that authenticates", listen)
}
