package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/queue"
)

// BenchmarkClaimComplete drains a backlog of ready jobs (DBQ_BENCH_JOBS,
// default 100,000; 64-byte payloads) with independent claimers — each its
// own Queue and pool, as separate processes would be — that claim batches
// of DBQ_BENCH_BATCH (default 100) and complete them at once. Every
// iteration refills the backlog (untimed) and drains it (timed).
//
// Variants: "spread" is the dialect as shipped (Config.MaxSpread 32);
// "seed" is MaxSpread 1, every claimer reading the same first n candidates
// as the original loop (see docs/mysql.md) does literally (but in READ COMMITTED). Run with
//
//	go test ./mysql -run '^$' -bench ClaimComplete -benchtime 1x -timeout 30m
//
// Reported: jobs/s end to end, the empty-claim ratio (claim attempts that
// found candidates but locked none ÷ attempts that found candidates),
// duplicates (must be 0), retried deadlocks and lock timeouts, the
// server's Innodb_deadlocks delta, and CPU seconds of this process and of
// mariadbd/mysqld per 1,000 jobs, and the machine's other CPU use (other
// processes skew the figures; rerun when it is above a few percent).
// DBQ_BENCH_CLAIMERS (default 1,4,16), DBQ_BENCH_VARIANTS (spread,seed),
// DBQ_BENCH_SPREADS (extra MaxSpread values) and DBQ_BENCH_STATUS=1 (log
// server status counters per job) vary the run.
func BenchmarkClaimComplete(b *testing.B) {
	jobs := envInt("DBQ_BENCH_JOBS", 100000)
	batch := envInt("DBQ_BENCH_BATCH", 100)
	variants := []struct {
		name string
		cfg  Config
	}{
		{"spread", Config{}},
		{"seed", Config{MaxSpread: 1}},
	}
	claimers := []int{1, 4, 16}
	if s := os.Getenv("DBQ_BENCH_CLAIMERS"); s != "" {
		claimers = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				b.Fatalf("DBQ_BENCH_CLAIMERS: %v", err)
			}
			claimers = append(claimers, n)
		}
	}
	if s := os.Getenv("DBQ_BENCH_VARIANTS"); s != "" {
		var keep []struct {
			name string
			cfg  Config
		}
		for _, v := range variants {
			if strings.Contains(","+s+",", ","+v.name+",") {
				keep = append(keep, v)
			}
		}
		variants = keep
	}
	if s := os.Getenv("DBQ_BENCH_SPREADS"); s != "" {
		for _, f := range strings.Split(s, ",") {
			n, _ := strconv.Atoi(f)
			variants = append(variants, struct {
				name string
				cfg  Config
			}{"spread" + f, Config{MaxSpread: n}})
		}
	}
	tmpl := benchTemplate(b, jobs)
	for _, v := range variants {
		for _, n := range claimers {
			b.Run(fmt.Sprintf("%s/claimers=%d", v.name, n), func(b *testing.B) {
				benchDrain(b, tmpl, jobs, batch, n, v.cfg)
			})
		}
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// benchTemplate fills a table of n jobs once; each run copies it.
func benchTemplate(b *testing.B, n int) string {
	b.Helper()
	name, dsn := newDatabase(b)
	q, _ := openQueueOn(b, dsn, Config{}, true)
	payload := []byte(strings.Repeat("x", 64))
	ctx := context.Background()
	for start := 0; start < n; start += 1000 {
		js := make([]queue.NewJob, 0, 1000)
		for i := start; i < min(n, start+1000); i++ {
			js = append(js, queue.NewJob{Queue: "q", Payload: payload})
		}
		if _, err := q.Enqueue(ctx, js...); err != nil {
			b.Fatal(err)
		}
	}
	return dialect.Quote(dialect.MySQL, name) + ".dbq_jobs"
}

func benchDrain(b *testing.B, tmpl string, total, batch, claimers int, cfg Config) {
	_, dsn := newDatabase(b)
	q0, d0 := openQueueOn(b, dsn, cfg, true)
	_ = q0
	qs := make([]*queue.Queue, claimers)
	cs := make([]*Claimer, claimers)
	for i := range claimers {
		var d *Driver
		qs[i], d = openQueueOn(b, dsn, cfg, false)
		d.db.SetMaxOpenConns(4)
		cs[i] = newClaimer(b, qs[i])
	}
	ctx := context.Background()
	var totalJobs, totalEmpty, totalAttempts, totalDups, totalRetried, totalDeadlocks int64
	var elapsed, clientCPU, serverCPU, otherCPU time.Duration
	for range b.N {
		b.StopTimer()
		fill(b, d0.DB(), tmpl)
		var minID int64
		if err := d0.DB().QueryRow("SELECT MIN(id) FROM dbq_jobs").Scan(&minID); err != nil {
			b.Fatal(err)
		}
		seen := make([]atomic.Uint32, total)
		var (
			done, dups        atomic.Int64
			empty0, attempts0 int64
			retried0          int64
			wg                sync.WaitGroup
			errOnce           sync.Once
			firstErr          error
		)
		for i, c := range cs {
			e, a := c.EmptyLocks()
			empty0 += e
			attempts0 += a
			retried0 += qs[i].Driver().(*Driver).retried.Load()
		}
		deadlocks0 := innodbDeadlocks(b)
		st0 := globalStatus(b)
		cpu0, srv0, busy0 := processCPU(), serverProcCPU(), machineBusy()
		b.StartTimer()
		start := time.Now()
		for _, c := range cs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				idle := time.Millisecond
				for done.Load() < int64(total) {
					jobs, err := c.Claim(ctx, "q", batch)
					if err != nil {
						errOnce.Do(func() { firstErr = err })
						return
					}
					if len(jobs) == 0 {
						// Idle: back off instead of spinning.
						time.Sleep(idle)
						idle = min(2*idle, 50*time.Millisecond)
						continue
					}
					idle = time.Millisecond
					for _, j := range jobs {
						if seen[j.ID-minID].Add(1) > 1 {
							dups.Add(1)
						}
					}
					if err := c.Complete(ctx, leases(jobs)); err != nil {
						errOnce.Do(func() { firstErr = err })
						return
					}
					done.Add(int64(len(jobs)))
				}
			}()
		}
		wg.Wait()
		elapsed += time.Since(start)
		b.StopTimer()
		clientCPU += processCPU() - cpu0
		serverCPU += serverProcCPU() - srv0
		otherCPU += machineBusy() - busy0
		if firstErr != nil {
			b.Fatal(firstErr)
		}
		totalJobs += done.Load()
		totalDups += dups.Load()
		for i, c := range cs {
			e, a := c.EmptyLocks()
			totalEmpty += e
			totalAttempts += a
			totalRetried += qs[i].Driver().(*Driver).retried.Load()
		}
		totalEmpty -= empty0
		totalAttempts -= attempts0
		totalRetried -= retried0
		totalDeadlocks += innodbDeadlocks(b) - deadlocks0
		if os.Getenv("DBQ_BENCH_STATUS") != "" {
			st1 := globalStatus(b)
			for _, k := range []string{
				"Handler_read_next", "Handler_read_key", "Handler_update", "Handler_delete",
				"Handler_commit", "Com_select", "Com_commit", "Com_set_option", "Questions",
				"Innodb_row_lock_waits", "Innodb_deadlocks", "Innodb_history_list_length",
				"Innodb_buffer_pool_read_requests", "Innodb_os_log_fsyncs",
			} {
				b.Logf("%s: %.2f per job (end %d)", k, float64(st1[k]-st0[k])/float64(done.Load()), st1[k])
			}
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(totalJobs)/elapsed.Seconds(), "jobs/s")
	b.ReportMetric(float64(totalEmpty)/float64(max(totalAttempts, 1)), "empty-ratio")
	b.ReportMetric(float64(totalAttempts)/float64(b.N), "claims/op")
	b.ReportMetric(float64(totalDups), "dups")
	b.ReportMetric(float64(totalRetried), "retried")
	b.ReportMetric(float64(totalDeadlocks), "server-deadlocks")
	b.ReportMetric(clientCPU.Seconds()*1000/float64(max(totalJobs, 1)), "client-cpu-s/kjob")
	otherCPU -= clientCPU + serverCPU
	b.ReportMetric(100*otherCPU.Seconds()/(elapsed.Seconds()*float64(runtime.NumCPU())), "other-cpu-%")
	if serverCPU > 0 {
		b.ReportMetric(serverCPU.Seconds()*1000/float64(max(totalJobs, 1)), "server-cpu-s/kjob")
	}
}

// fill empties the table and copies the template into it, then lets purge
// settle so every run starts alike.
func fill(b *testing.B, db *sql.DB, tmpl string) {
	b.Helper()
	if _, err := db.Exec("DELETE FROM dbq_jobs"); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec("INSERT INTO dbq_jobs SELECT * FROM " + tmpl); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec("ANALYZE TABLE dbq_jobs"); err != nil {
		b.Fatal(err)
	}
	time.Sleep(time.Second)
}

func innodbDeadlocks(b *testing.B) int64 {
	var name string
	var n int64
	if err := admin(b).QueryRow("SHOW GLOBAL STATUS LIKE 'Innodb_deadlocks'").Scan(&name, &n); err != nil {
		return 0 // MySQL 8 has no such status variable
	}
	return n
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// serverProcCPU reads the CPU time of a local mariadbd or mysqld from
// /proc, or 0 when there is none to see.
func serverProcCPU() time.Duration {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := string(b)
		if !strings.Contains(s, "(mariadbd)") && !strings.Contains(s, "(mysqld)") {
			continue
		}
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if len(f) < 13 {
			return 0
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		return time.Duration(ut+st) * 10 * time.Millisecond // USER_HZ 100
	}
	return 0
}

func globalStatus(b *testing.B) map[string]int64 {
	rows, err := admin(b).Query("SHOW GLOBAL STATUS")
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			b.Fatal(err)
		}
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			out[k] = n
		}
	}
	return out
}

// machineBusy reads the machine's busy CPU time (all but idle and iowait)
// from /proc/stat.
func machineBusy() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	f := strings.Fields(strings.SplitN(string(b), "\n", 2)[0])
	var busy int64
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		if i != 3 && i != 4 && i < 8 { // idle, iowait; guest time is in user already
			busy += n
		}
	}
	return time.Duration(busy) * 10 * time.Millisecond
}
