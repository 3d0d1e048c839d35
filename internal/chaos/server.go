//go:build linux

package chaos

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dbqueue/dbq/dialect"
)

// cutConnections ends w's connections from the server side and says how
// many it ended.
func (h *harness) cutConnections(ctx context.Context, w *worker) (int, error) {
	switch h.d {
	case dialect.Postgres:
		var n int
		err := h.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM (
			SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid()
		) t WHERE ok`, w.app).Scan(&n)
		return n, err
	case dialect.MySQL:
		var port int
		if err := h.db.QueryRowContext(ctx, "SELECT @@port").Scan(&port); err != nil {
			return 0, err
		}
		ports, err := socketPorts(w.pid, port)
		if err != nil {
			return 0, err
		}
		threads, err := h.mysqlThreads(ctx, ports)
		if err != nil {
			return 0, err
		}
		n := 0
		for _, id := range threads {
			// The thread may have ended meanwhile (1094, unknown thread).
			if _, err := h.db.ExecContext(ctx, "KILL CONNECTION "+strconv.FormatInt(id, 10)); err == nil {
				n++
			}
		}
		return n, nil
	}
	return 0, fmt.Errorf("no connections to cut on %s", h.d)
}

// mysqlThreads returns the server threads whose client port is in ports.
func (h *harness) mysqlThreads(ctx context.Context, ports map[int]bool) ([]int64, error) {
	rows, err := h.db.QueryContext(ctx, "SELECT ID, HOST FROM information_schema.PROCESSLIST")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		var host string
		if err := rows.Scan(&id, &host); err != nil {
			return nil, err
		}
		i := strings.LastIndexByte(host, ':')
		if i < 0 {
			continue
		}
		if p, err := strconv.Atoi(host[i+1:]); err == nil && ports[p] {
			ids = append(ids, id)
		}
	}
	return ids, rows.Err()
}

// socketPorts returns the local ports of process pid's TCP sockets
// connected to remote port remote, from /proc.
func socketPorts(pid, remote int) (map[int]bool, error) {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return nil, err
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(link, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
		}
	}
	ports := map[int]bool{}
	for _, table := range []string{"tcp", "tcp6"} {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for local, rem := range parseTCPTable(data, inodes) {
			if rem == remote {
				ports[local] = true
			}
		}
	}
	return ports, nil
}

// parseTCPTable reads a /proc/net/tcp table and returns, for each socket
// whose inode is in inodes, its local port mapped to its remote port.
func parseTCPTable(data []byte, inodes map[string]bool) map[int]int {
	out := map[int]int{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Scan() // header
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		if len(f) < 10 || !inodes[f[9]] {
			continue
		}
		local, ok1 := hexPort(f[1])
		rem, ok2 := hexPort(f[2])
		if ok1 && ok2 {
			out[local] = rem
		}
	}
	return out
}

// hexPort is the port of a /proc/net/tcp address, ADDR:PORT in hex.
func hexPort(addr string) (int, bool) {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return 0, false
	}
	p, err := strconv.ParseUint(addr[i+1:], 16, 16)
	return int(p), err == nil
}

// restartServer restarts the database server and returns once it answers.
func (h *harness) restartServer(ctx context.Context) error {
	switch h.d {
	case dialect.Postgres:
		return h.restartPostgres(ctx)
	case dialect.MySQL:
		return h.restartMariaDB(ctx)
	}
	return fmt.Errorf("no server to restart on %s", h.d)
}

// restartPostgres restarts the local cluster serving the database, found
// by its port and data directory in pg_lsclusters, with pg_ctlcluster.
func (h *harness) restartPostgres(ctx context.Context) error {
	var port, dataDir string
	if err := h.db.QueryRowContext(ctx, "SELECT current_setting('port'), current_setting('data_directory')").Scan(&port, &dataDir); err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, "pg_lsclusters", "-h").Output()
	if err != nil {
		return fmt.Errorf("pg_lsclusters (is the server local?): %w", err)
	}
	var version, cluster string
	for line := range strings.Lines(string(out)) {
		// Ver Cluster Port Status Owner Data-directory Log-file
		f := strings.Fields(line)
		if len(f) >= 6 && f[2] == port && filepath.Clean(f[5]) == filepath.Clean(dataDir) {
			version, cluster = f[0], f[1]
		}
	}
	if cluster == "" {
		return fmt.Errorf("no cluster in pg_lsclusters has port %s and data directory %s: is the server local?", port, dataDir)
	}
	// Not cut short by ctx: a restart killed halfway leaves the server down.
	cctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(cctx, "pg_ctlcluster", "--skip-systemctl-redirect", version, cluster, "restart").CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctlcluster %s %s restart: %w: %s", version, cluster, err, bytes.TrimSpace(out))
	}
	return h.awaitServer(ctx)
}

// restartMariaDB stops the local mariadbd serving the database with
// SIGTERM (a clean shutdown), found by its pid file, and starts it again
// with the same command line through start-stop-daemon.
func (h *harness) restartMariaDB(ctx context.Context) error {
	var pidFile string
	if err := h.db.QueryRowContext(ctx, "SELECT @@pid_file").Scan(&pidFile); err != nil {
		return err
	}
	raw, err := os.ReadFile(pidFile)
	if err != nil {
		return fmt.Errorf("read the server's pid file (is the server local?): %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return fmt.Errorf("pid file %s: %w", pidFile, err)
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return fmt.Errorf("server pid %d: %w", pid, err)
	}
	exe = strings.TrimSuffix(exe, " (deleted)")
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return err
	}
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")[1:]
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return fmt.Errorf("SIGTERM to mariadbd (pid %d): %w", pid, err)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) || !sleep(ctx, 50*time.Millisecond) {
			return fmt.Errorf("mariadbd (pid %d) did not stop within 3m of SIGTERM", pid)
		}
	}
	// The server is down, whatever happens to ctx now: start it with a
	// context of its own, so that a run cut short still brings it back.
	sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := append([]string{"--start", "--oknodo", "--background", "--pidfile", pidFile, "--exec", exe, "--"}, args...)
	if out, err := exec.CommandContext(sctx, "start-stop-daemon", start...).CombinedOutput(); err != nil {
		return fmt.Errorf("start-stop-daemon %s: %w: %s", strings.Join(start, " "), err, bytes.TrimSpace(out))
	}
	return h.awaitServer(ctx)
}

// awaitServer waits, bounded, until the server answers the harness again.
func (h *harness) awaitServer(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	var err error
	for {
		if _, err = h.db.ExecContext(ctx, "SELECT 1"); err == nil {
			return nil
		}
		if !sleep(ctx, 100*time.Millisecond) {
			return fmt.Errorf("the server did not answer within 3m of its restart: %w", err)
		}
	}
}
