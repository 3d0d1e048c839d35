package soak

import (
	"bytes"
	"encoding/json"
	"flag"
	"strings"
	"testing"
	"time"
)

func TestShortModeShortensOnlyUnsetDurations(t *testing.T) {
	t.Parallel()
	var c Config
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	c.Flags(fs)
	if err := fs.Parse([]string{"--dsn", "postgres://x/y", "--short", "--hold", "45s", "--scenarios", "horizon, burst"}); err != nil {
		t.Fatal(err)
	}
	c = c.Defaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Steady != time.Minute || c.HoldAt != 15*time.Second || c.Hold != 45*time.Second || c.Rate != 3000 {
		t.Errorf("short defaults: %+v", c)
	}
	if got := planOf(c, Horizon); got.length != 75*time.Second || got.holdTo != time.Minute {
		t.Errorf("horizon plan %+v, want 75s long, held 15s..60s", got)
	}
	if len(c.Scenarios) != 2 || c.Scenarios[1] != Burst {
		t.Errorf("scenarios %q", c.Scenarios)
	}
	c.Scenarios = []string{"hold"}
	if err := c.Validate(); err == nil {
		t.Error("unknown scenario: no error")
	}
}

func TestRowsRoundTripAndPrint(t *testing.T) {
	t.Parallel()
	r := Row{Impl: "dbq", Claimer: "advisory", Settings: "1 Worker", Scenario: Horizon, T: 10, Holding: true,
		Offered: 3000, Drained: 2500, Backlog: 5000, DeadTup: 1234, TableBytes: 3 << 20, XminAge: 77}
	lat := make([]time.Duration, 100)
	for i := range lat {
		lat[i] = time.Duration(100-i) * time.Millisecond
	}
	r.setClaims(lat)
	if r.Claims != 100 || r.ClaimP50ms != 50 || r.ClaimP99ms != 99 {
		t.Errorf("claims %d p50 %v p99 %v", r.Claims, r.ClaimP50ms, r.ClaimP99ms)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	if err := enc.Encode(r); err != nil {
		t.Fatal(err)
	}
	if err := enc.Encode(Row{Impl: "river", Scenario: Burst}); err != nil {
		t.Fatal(err)
	}
	back, err := ReadJSON(&buf)
	if err != nil || len(back) != 2 || back[0] != r {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	var out strings.Builder
	if err := WriteTable(&out, back); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"dbq advisory: 1 Worker", "held", "1234", "3.0", "50.00"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in\n%s", want, out.String())
		}
	}
}
