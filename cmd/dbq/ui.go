package main

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/dbqueue/dbq/ui"
	"github.com/spf13/cobra"
)

func uiCmd(g *globals) *cobra.Command {
	var (
		listen       string
		authFlag     string
		allowRemote  bool
		readOnly     bool
		allowedHosts []string
	)
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Serve the web dashboard: queues, jobs, schedules, retry, cancel, pause (loopback only unless --auth)",
		Long:  uiLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if allowRemote {
				return errors.New("--allow-remote is no more: give credentials with $DBQ_UI_AUTH=user:password (or --auth) to listen beyond loopback")
			}
			raw, fromFlag := os.Getenv(authEnv), cmd.Flags().Changed("auth")
			if fromFlag {
				raw = authFlag
			}
			auth, err := parseAuth(raw)
			if err != nil {
				return err
			}
			if err := checkListen(listen, auth != nil); err != nil {
				return err
			}
			hosts, err := uiHosts(listen, auth != nil, allowedHosts)
			if err != nil {
				return err
			}
			if fromFlag {
				fmt.Fprintf(cmd.ErrOrStderr(), "dbq ui: warning: --auth shows the password in the process list; set $%s instead\n", authEnv)
			}
			ctx := cmd.Context()
			q, err := g.open(ctx, g.config())
			if err != nil {
				return err
			}
			defer q.Close()
			h, err := ui.NewHandler(q, ui.Options{ReadOnly: readOnly, Logger: g.logger(), AllowedHosts: hosts})
			if err != nil {
				return err
			}
			how := "no authentication"
			if auth != nil {
				h, how = auth.wrap(h), fmt.Sprintf("basic auth as %q", auth.user)
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return err
			}
			srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
			fmt.Fprintf(cmd.OutOrStdout(), "dbq ui: serving %s on http://%s/, %s, answering to %s (Ctrl-C stops)\n",
				q.Dialect(), servedAddr(listen, ln.Addr()), how, hostsText(hosts))
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
	f.StringVar(&listen, "listen", "127.0.0.1:8080", "address to serve on (beyond loopback only with credentials)")
	f.StringVar(&authFlag, "auth", "", "user:password every request must give (HTTP basic auth); prefer $"+authEnv+", which ps does not show")
	f.BoolVar(&allowRemote, "allow-remote", false, "gone: use --auth")
	_ = f.MarkHidden("allow-remote")
	f.BoolVar(&readOnly, "read-only", false, "show no actions and refuse every change")
	f.StringSliceVar(&allowedHosts, "allowed-hosts", nil, "with --auth: more host names requests may name in Host (comma-separated; * for any)")
	return cmd
}

// authEnv names the environment variable that holds --auth's value.
const authEnv = "DBQ_UI_AUTH"

// basicAuth asks every request for one user name and password. It keeps
// their SHA-256 sums, so the comparison takes the same time whatever the
// lengths and wherever a guess differs.
type basicAuth struct {
	user      string
	userSum   [sha256.Size]byte
	passwdSum [sha256.Size]byte
}

// parseAuth reads "user:password"; "" means no authentication. Its errors
// never quote s, which holds the password.
func parseAuth(s string) (*basicAuth, error) {
	if s == "" {
		return nil, nil
	}
	user, pass, ok := strings.Cut(s, ":")
	if !ok || user == "" || pass == "" {
		return nil, fmt.Errorf("--auth (or $%s): want user:password, both non-empty", authEnv)
	}
	return &basicAuth{user: user, userSum: sha256.Sum256([]byte(user)), passwdSum: sha256.Sum256([]byte(pass))}, nil
}

func (a *basicAuth) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, _ := r.BasicAuth()
		u, p := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(pass))
		if subtle.ConstantTimeCompare(u[:], a.userSum[:])&subtle.ConstantTimeCompare(p[:], a.passwdSum[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="dbq", charset="UTF-8"`)
			http.Error(w, "dbq: this dashboard needs a user name and password", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// checkListen refuses an address that is not on the loopback interface
// (an empty host listens on every interface) unless the dashboard asks
// for credentials.
func checkListen(listen string, withAuth bool) error {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", listen, err)
	}
	if withAuth || host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("--listen %s is not a loopback address and the dashboard has no credentials: "+
		"use 127.0.0.1, or set $%s=user:password (or --auth) to ask every request for them", listen, authEnv)
}

// uiHosts returns ui.Options.AllowedHosts for a dashboard on listen: none
// beyond loopback without credentials (more would reopen DNS rebinding);
// with them, the --listen host (this machine's addresses when it is every
// interface) and extra.
func uiHosts(listen string, withAuth bool, extra []string) ([]string, error) {
	if !withAuth {
		if len(extra) > 0 {
			return nil, fmt.Errorf("--allowed-hosts needs credentials ($%s or --auth): without them the dashboard answers "+
				"to loopback names only, so that no other site's page can reach it through its browser", authEnv)
		}
		return nil, nil
	}
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, fmt.Errorf("--listen %q: %w", listen, err)
	}
	hosts := append([]string(nil), extra...)
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		return append(hosts, host), nil
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("listing this machine's addresses for the Host check: %w (name them with --allowed-hosts)", err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() {
			hosts = append(hosts, n.IP.String())
		}
	}
	return hosts, nil
}

// hostsText describes the Host names a dashboard answers to.
func hostsText(hosts []string) string {
	if slices.Contains(hosts, "*") {
		return "any Host"
	}
	return strings.Join(append([]string{"localhost", "loopback addresses"}, hosts...), ", ")
}

// servedAddr is where a dashboard listening on listen (bound to addr)
// can be reached: listen's host with addr's port, so that "0.0.0.0:0"
// reads 0.0.0.0:41234 and not Go's "[::]:41234".
func servedAddr(listen string, addr net.Addr) string {
	host, _, err := net.SplitHostPort(listen)
	_, port, err2 := net.SplitHostPort(addr.String())
	if err != nil || err2 != nil {
		return addr.String()
	}
	if host == "" {
		host = "0.0.0.0"
	}
	return net.JoinHostPort(host, port)
}

const uiLong = `Serve the web dashboard of the queue in --dsn: each queue's counts, the jobs
by queue and state, one job in full (payload, attempts, last error), the
recurring schedules, and actions: retry dead jobs, cancel a job, pause and
resume a queue or a schedule.

Without credentials the dashboard has no authentication, so it listens on
the loopback interface only. --auth user:password (better: $DBQ_UI_AUTH,
which the process list does not show) asks every request for those
credentials (HTTP basic auth) and lets --listen name any address. Basic
auth sends the password with every request: beyond this machine, serve it
behind a TLS proxy. To use your own authentication, embed the handler
(package github.com/dbqueue/dbq/ui) behind your middleware instead.
--read-only hides the actions.

The dashboard answers only requests whose Host header names it: without
credentials, "localhost" and loopback addresses alone, so that a web page
whose name its owner points at 127.0.0.1 (DNS rebinding) can neither read
the dashboard nor drive it from the browser of someone who visits it; any
other Host gets 421. With --auth it also answers to the --listen host, or,
listening on every interface, to this machine's addresses; --allowed-hosts
names more (the names users type, behind a proxy the name it forwards),
and "*" lifts the check.`
