package suite

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/verify/checker"
	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
)

// plantedRecord is a record like the planted bug's: 10.0.1.10 moves to n2
// at epoch 4, then n2's stale unassign at epoch 3 takes it off, and nobody
// holds it until n1 takes it at epoch 5.
func plantedRecord() []mutationRecord {
	const s = int64(time.Second)
	return []mutationRecord{
		{Mono: 100*s - s/2, Call: "assign-secondary-ip", NIC: "eni-n1", Address: "10.0.1.10", Epoch: 1},
		{Mono: 102 * s, Call: "assign-secondary-ip", NIC: "eni-n2", Address: "10.0.1.10", Epoch: 4, From: "eni-n1"},
		{Mono: 103 * s, Call: "ensure-forwarding-enabled", NIC: "eni-n2", Address: "10.0.1.10", Epoch: 4, Enabled: true},
		{Mono: 104 * s, Call: "unassign-secondary-ip", NIC: "eni-n2", Address: "10.0.1.10", Epoch: 3},
		{Mono: 106 * s, Call: "assign-secondary-ip", NIC: "eni-n1", Address: "10.0.1.10", Epoch: 5},
	}
}

func TestProviderLanes(t *testing.T) {
	start := int64(100 * time.Second)
	lanes, gaps := providerLanes(plantedRecord(), start, int64(8*time.Second))
	if len(lanes) != 2 || lanes[0].Name != "provider" || lanes[1].Name != "holder 10.0.1.10" {
		t.Fatalf("lanes = %+v", lanes)
	}
	var got []string
	for _, e := range lanes[0].Events {
		got = append(got, fmt.Sprintf("%v %s %v", e.At, e.Text, e.Bad))
	}
	want := "0s assign 10.0.1.10 eni-n1 e1 false|2s assign 10.0.1.10 eni-n2 e4 false|3s forward on 10.0.1.10 eni-n2 e4 false|" +
		"4s STALE unassign 10.0.1.10 epoch 3 after 4 true|6s assign 10.0.1.10 eni-n1 e5 false"
	if g := strings.Join(got, "|"); g != want {
		t.Errorf("provider lane = %s\nwant %s", g, want)
	}
	if d := lanes[0].Events[0].Detail; !strings.Contains(d, "0.500s before the test started") {
		t.Errorf("first mutation's detail = %q", d)
	}
	got = nil
	for _, e := range lanes[1].Events {
		got = append(got, fmt.Sprintf("%v-%v %s %v", e.At, e.End, e.Text, e.Bad))
	}
	if g, w := strings.Join(got, "|"), "0s-2s eni-n1 false|2s-4s eni-n2 false|4s-6s no holder true|6s-8s eni-n1 false"; g != w {
		t.Errorf("holder lane = %s\nwant %s", g, w)
	}
	if len(gaps) != 1 || gaps[0].holders != 0 || gaps[0].start != int64(4*time.Second) || gaps[0].end != int64(6*time.Second) {
		t.Errorf("gaps = %+v", gaps)
	}
	f := staleFindings(plantedRecord(), start)
	if len(f) != 1 || f[0].Text != "mutation 3 at 4.000s: unassign-secondary-ip 10.0.1.10 on eni-n2 at epoch 3, after epoch 4" || f[0].At != 4*time.Second {
		t.Errorf("stale findings = %+v", f)
	}
}

func TestReadMarks(t *testing.T) {
	read := func(p history.Process, at, end int64, holder history.Value) []history.Event {
		return []history.Event{
			{Process: p, Type: history.Invoke, F: "read", Value: map[string]history.Value{"address": "10.0.1.10"}, Time: at},
			{Process: p, Type: history.OK, F: "read", Value: map[string]history.Value{"address": "10.0.1.10", "holder": holder}, Time: end},
		}
	}
	var events []history.Event
	events = append(events, read(0, 1e9, 1.1e9, "eni-n1")...)
	events = append(events, read(1, 5e9, 5.1e9, nil)...)
	events = append(events, read(2, 7e9, 7.1e9, "eni-n2")...)
	r, err := checker.NewRun("t", events, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	dual := []gap{{address: "10.0.1.10", holders: 2, nics: []string{"eni-n1", "eni-n2"}, start: 7.05e9, end: 8e9}}
	got := readMarks(r, dual)
	if len(got) != 2 || got[2] != "found no holder for 10.0.1.10" || got[4] != "ran while 10.0.1.10 was on eni-n1 and eni-n2" {
		t.Errorf("marks = %v", got)
	}
}

func TestProcessName(t *testing.T) {
	for p, want := range map[history.Process]string{history.Nemesis: "nemesis", mutationProcess: "provider", 3: "client 3", 9: "client 3 (p9)"} {
		if got := processName(p, 6); got != want {
			t.Errorf("processName(%d) = %q, want %q", p, got, want)
		}
	}
}

func TestStory(t *testing.T) {
	start := int64(100 * time.Second)
	col := &collected{mutations: plantedRecord()}
	events := []history.Event{
		{Process: 0, Type: history.Invoke, F: "read", Value: map[string]history.Value{"address": "10.0.1.10"}, Time: 4.5e9},
		{Process: 0, Type: history.OK, F: "read", Value: map[string]history.Value{"address": "10.0.1.10", "holder": nil}, Time: 4.6e9},
	}
	r, err := checker.NewRun("capture", events, "", start)
	if err != nil {
		t.Fatal(err)
	}
	res := checker.Result{Valid: linear.False, Fields: map[string]any{"checkers": map[string]checker.Result{
		"stats": {Valid: linear.True},
		"convergence": {Valid: linear.False, Fields: map[string]any{"heal_s": 6.5,
			"desired": map[string]string{"10.0.1.10": "n1", "10.0.1.11": "n2"}, "actual": map[string]string{"10.0.1.10": "n1"}}},
		"fence": {Valid: linear.False, Fields: map[string]any{"stale_actions_executed": 1}},
		"availability": {Valid: linear.False, Fields: map[string]any{"no_holder_ms": 2000.0, "outside_faults_ms": 2000.0, "periods": []outage{
			{Address: "10.0.1.10", Start: 4e9, End: 6e9, Outside: 2 * time.Second},
		}}},
	}}}
	o := story(col, 6, r, res)
	if o.Verdict != "invalid" || o.Names(history.Nemesis) != "nemesis" || o.Names(7) != "client 1 (p7)" {
		t.Errorf("verdict %q, names %q %q", o.Verdict, o.Names(history.Nemesis), o.Names(7))
	}
	var got []string
	for _, c := range o.Checkers {
		got = append(got, fmt.Sprintf("%s %s %q %d", c.Name, c.Verdict, c.Summary, len(c.Findings)))
	}
	want := `fence false "1 stale actions executed" 1|availability false "no holder 2000 ms, 2000 ms outside faults" 1|` +
		`convergence false "" 1|stats true "" 0`
	if g := strings.Join(got, "|"); g != want {
		t.Errorf("checkers = %s\nwant %s", g, want)
	}
	if f := o.Checkers[1].Findings[0]; !f.Timed || f.At != 4*time.Second || f.End != 6*time.Second || !strings.HasPrefix(f.Text, "10.0.1.10 had no holder from 4.000s to 6.000s") {
		t.Errorf("availability finding = %+v", f)
	}
	if f := o.Checkers[2].Findings[0]; !f.Timed || f.At != 6500*time.Millisecond || f.End != 6*time.Second+500*time.Millisecond ||
		f.Text != "10.0.1.11 did not settle after the heal at 6.500s: the nodes want it on n2, the provider shows it on no NIC" {
		t.Errorf("convergence finding = %+v", f)
	}
	if len(o.Marks) != 1 || o.Marks[0] != "found no holder for 10.0.1.10" {
		t.Errorf("marks = %v", o.Marks)
	}
	if len(o.Lanes) != 2 || len(o.Lanes[0].Events) != 5 {
		t.Errorf("lanes = %+v", o.Lanes)
	}
}
