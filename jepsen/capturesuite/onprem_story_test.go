package capturesuite

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture/provider/onprem/arpwatch"
	"github.com/ipfence/ipfence/verify/checker"
	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
)

// splitRecord is an observer's record of 10.0.2.100 that started 0.5 s
// before the history's clock: h1 answers, then nobody, then h1 and h2 at
// once (a partition's split brain), then h2 alone.
func splitRecord() *onpremRecord {
	h1, _ := net.ParseMAC("02:00:00:00:00:01")
	h2, _ := net.ParseMAC("02:00:00:00:00:02")
	s := time.Second
	return &onpremRecord{
		startMono: int64(100*s - s/2),
		hosts:     map[string]string{h1.String(): "h1", h2.String(): "h2"},
		report: arpwatch.Report{Addresses: []arpwatch.AddressReport{{
			Address: netip.MustParseAddr("10.0.2.100"), Rounds: 50, Observed: 5 * s, DualResponder: s / 2,
			Intervals: []arpwatch.Interval{
				{Start: 0, End: 2 * s, Responders: []net.HardwareAddr{h1}},
				{Start: 2 * s, End: 2*s + s/2, Responders: nil},
				{Start: 2*s + s/2, End: 3 * s, Responders: []net.HardwareAddr{h1, h2}},
				{Start: 3 * s, End: 5 * s, Responders: []net.HardwareAddr{h2}},
			},
		}}},
	}
}

// splitRun is the history beside splitRecord: a partition from 1.9 s to
// 2.9 s, client 0's read during the split brain, client 1's failed read
// while nobody answered, and client 0's read after.
func splitRun(t *testing.T, dir string) (*checker.Run, checker.Result) {
	t.Helper()
	ms := int64(time.Millisecond)
	events := []history.Event{
		{Process: history.Nemesis, Type: history.Invoke, F: "start-partition", Value: "h1|h2,h3", Time: 1900 * ms},
		{Process: history.Nemesis, Type: history.Info, F: "start-partition", Value: "cut h1 off", Time: 1901 * ms},
		{Process: 1, Type: history.Invoke, F: "read", Time: 1700 * ms},
		{Process: 1, Type: history.Fail, F: "read", Error: "connection refused", Time: 1720 * ms},
		{Process: 0, Type: history.Invoke, F: "read", Time: 2100 * ms},
		{Process: 0, Type: history.OK, F: "read", Value: map[string]history.Value{"holder": "h1"}, Time: 2150 * ms},
		{Process: history.Nemesis, Type: history.Invoke, F: "stop-partition", Time: 2900 * ms},
		{Process: history.Nemesis, Type: history.Info, F: "stop-partition", Time: 2901 * ms},
		{Process: 0, Type: history.Invoke, F: "read", Time: 3000 * ms},
		{Process: 0, Type: history.OK, F: "read", Value: map[string]history.Value{"holder": "h2"}, Time: 3050 * ms},
	}
	for i := range events {
		events[i].Index = int64(i)
	}
	r, err := checker.NewRun("capture", events, dir, int64(100*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	res := withOnPremStory(splitRecord(), 2, checker.Compose(map[string]checker.Checker{
		"single-holder": checker.Func(func(context.Context, *checker.Run) checker.Result {
			return checker.Result{Valid: linear.False, Fields: map[string]any{"dual_responder_ms": 500, "no_responder_ms": 500}}
		}),
		"stats": checker.Stats(),
		"perf":  checker.Perf(),
	})).Check(t.Context(), r)
	return r, res
}

func TestResponderLanes(t *testing.T) {
	rec := splitRecord()
	lanes, periods := responderLanes(rec.report, rec.hosts, -time.Second/2)
	if len(lanes) != 1 || lanes[0].Name != "ARP 10.0.2.100" {
		t.Fatalf("lanes = %+v", lanes)
	}
	var got []string
	for _, e := range lanes[0].Events {
		got = append(got, fmt.Sprintf("%v-%v %s %v", e.At, e.End, e.Text, e.Bad))
	}
	if g, w := strings.Join(got, "|"), "0s-1.5s h1 false|1.5s-2s no responder true|2s-2.5s h1+h2 true|2.5s-4.5s h2 false"; g != w {
		t.Errorf("responder lane = %s\nwant %s", g, w)
	}
	if len(periods) != 4 || periods[2].finding().Text != "10.0.2.100 answered by h1 and h2 from 2.000s to 2.500s (500ms)" {
		t.Errorf("periods = %+v", periods)
	}
}

func TestOnPremStory(t *testing.T) {
	r, res := splitRun(t, "")
	o := onpremStory(splitRecord(), r, res)
	var got []string
	for _, c := range o.Checkers {
		got = append(got, fmt.Sprintf("%s %s %d", c.Name, c.Verdict, len(c.Findings)))
	}
	if g, w := strings.Join(got, "|"), "single-holder false 1|stats true 0|perf true 0|no responder 1 periods 1|failed reads 1 1|nemesis 1 faults 1"; g != w {
		t.Errorf("header = %s\nwant %s", g, w)
	}
	if f := o.Checkers[0].Findings[0]; !f.Timed || f.At != 2*time.Second || f.End != 2500*time.Millisecond {
		t.Errorf("single-holder finding = %+v", f)
	}
	if f := o.Checkers[4].Findings[0]; f.Text != `fail read by client 1 at 1.700s: "connection refused"` {
		t.Errorf("failed read = %q", f.Text)
	}
	// Client 1's failed read at 1.7 s ran while nobody answered; client
	// 0's read at 2.1 s during the split brain.
	if len(o.Marks) != 2 || o.Marks[2] != "ran while nobody answered ARP for 10.0.2.100" || o.Marks[4] != "ran while h1 and h2 answered ARP for 10.0.2.100" {
		t.Errorf("marks = %v", o.Marks)
	}
	if o.Verdict != "invalid" || o.Title != "capture (on premises)" {
		t.Errorf("verdict %q, title %q", o.Verdict, o.Title)
	}
}

// TestOnPremStoryInBrowser loads the on-premises story timeline in
// chromium: the verdict and the two-responder period head it, its link
// leads to the red period of the ARP lane, and the clients are named.
func TestOnPremStoryInBrowser(t *testing.T) {
	dir := t.TempDir()
	splitRun(t, dir)
	got := browse(t, filepath.Join(dir, "timeline.html"), readStory)
	for k, w := range map[string]string{
		"head":   "INVALID|single-holder false · two responders 500 ms, none 500 ms|stats true",
		"links":  "4/4",
		"texts":  "single-holder10.0.2.100 answered by h1 and h2 from 2.000s to 2.500s (500ms)|no responder10.0.2.100 no responder from 1.500s to 2.000s (500ms)",
		"focus":  "2000000",
		"pinned": "ARP 10.0.2.100 · h1+h2",
		"lanes":  "nemesis|ARP 10.0.2.100|client 1|client 0",
	} {
		if !strings.HasPrefix(got[k], w) {
			t.Errorf("%s = %q, want it to begin %q", k, got[k], w)
		}
	}
}
