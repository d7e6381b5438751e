package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/verify/history"
)

func TestQuantiles(t *testing.T) {
	var b builder
	// 100 ok reads taking 1..100 ms, in shuffled order.
	for i := range 100 {
		lat := float64((i*37)%100 + 1)
		b.invoke(0, "read", nil, float64(i)*1000)
		b.done(0, history.OK, "read", int64(i), float64(i)*1000+lat)
	}
	b.invoke(1, "write", int64(1), 0)
	b.done(1, history.OK, "write", int64(1), 7)
	// Neither a failed, an indeterminate nor a pending op has a latency
	// worth counting.
	b.invoke(1, "write", int64(2), 10)
	b.done(1, history.Fail, "write", int64(2), 5000)
	b.invoke(1, "cas", nil, 6000)
	b.done(1, history.Info, "cas", nil, 9000)
	b.invoke(2, "write", int64(3), 10)
	got, err := Quantiles(b.events)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Latency{
		"read":  {Count: 100, P50: 50 * time.Millisecond, P95: 95 * time.Millisecond, P99: 99 * time.Millisecond, Max: 100 * time.Millisecond},
		"write": {Count: 1, P50: 7 * time.Millisecond, P95: 7 * time.Millisecond, P99: 7 * time.Millisecond, Max: 7 * time.Millisecond},
	}
	if len(got) != len(want) {
		t.Errorf("quantiles for %d fs, want %d: %+v", len(got), len(want), got)
	}
	for f, w := range want {
		if got[f] != w {
			t.Errorf("%s: %+v, want %+v", f, got[f], w)
		}
	}
	if _, err := Quantiles([]history.Event{{Process: history.NoProcess, Type: history.Invoke}}); err == nil {
		t.Error("Quantiles of an unpairable history succeeded")
	}
	if q, err := Quantiles(nil); err != nil || len(q) != 0 {
		t.Errorf("Quantiles(nil) = %v, %v; want empty", q, err)
	}
}

func TestDescribe(t *testing.T) {
	long := strings.Repeat("x", 300)
	for _, c := range []struct {
		in, out history.Value
		ok      bool
		want    string
	}{
		{nil, int64(3), true, "→ 3"},
		{int64(3), int64(3), true, "3"},
		{[]history.Value{int64(1), int64(2)}, true, true, "[1,2] → true"},
		{map[string]history.Value{"address": "10.0.1.10", "holder": nil}, nil, true, `{"address":"10.0.1.10","holder":null}`},
		{int64(3), int64(4), false, "3"},
		{nil, nil, true, "null"},
		{long, nil, true, `"` + strings.Repeat("x", maxValue-1) + "…"},
	} {
		if got := describe(c.in, c.out, c.ok); got != c.want {
			t.Errorf("describe(%v, %v, %v) = %q, want %q", c.in, c.out, c.ok, got, c.want)
		}
	}
}

// TestSample renders every report of a realistic run, into
// $IPFENCE_REPORT_OUT when set (to look at them), else into a temporary
// folder.
func TestSample(t *testing.T) {
	dir := os.Getenv("IPFENCE_REPORT_OUT")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	events, faults := synthetic(2, 20_000, 10)
	f, err := os.Create(filepath.Join(dir, "timeline.html"))
	if err != nil {
		t.Fatal(err)
	}
	if err := Timeline(f, "synthetic register, 20000 ops, 10 workers", events, faults); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := LatencyPNG(filepath.Join(dir, "latency.png"), events, faults); err != nil {
		t.Fatal(err)
	}
	if err := RatePNG(filepath.Join(dir, "rate.png"), events, faults); err != nil {
		t.Fatal(err)
	}
	readPNG(t, filepath.Join(dir, "latency.png"))
	readPNG(t, filepath.Join(dir, "rate.png"))
	t.Logf("reports in %s", dir)
}
