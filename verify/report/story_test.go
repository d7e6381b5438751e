package report

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/verify/history"
)

// storyOptions tell small()'s story: names for the nemesis and p1, a
// provider lane with a stale mutation, p1's read marked, and an invalid
// verdict with a timed finding and an untimed one.
func storyOptions() TimelineOptions {
	return TimelineOptions{
		Title: "story",
		Names: func(p history.Process) string {
			switch p {
			case history.Nemesis:
				return "chaos"
			case 1:
				return "client 1"
			}
			return ""
		},
		Lanes: []Lane{{Name: "provider", Events: []LaneEvent{
			{At: 5 * time.Millisecond, Text: "STALE unassign epoch 3 after 4", Detail: "mutation 17", Bad: true},
			{At: 2 * time.Millisecond, End: 3 * time.Millisecond, Text: "assign e4", Detail: "mutation 16"},
		}}},
		Marks:   map[int]string{1: "found no holder", 0: "", 99: "no such op"},
		Verdict: "invalid",
		Checkers: []CheckerSummary{
			{Name: "fence", Verdict: "false", Summary: "1 stale action", Findings: []Finding{
				{Text: "mutation 17 at 0.005s", Timed: true, At: 5 * time.Millisecond},
				{Text: "an untimed finding"},
			}},
			{Name: "stats", Verdict: "true"},
		},
	}
}

func storyPage(t *testing.T) (string, decoded) {
	t.Helper()
	events, faults := small()
	o := storyOptions()
	o.Faults = faults
	var buf bytes.Buffer
	if err := TimelineWith(&buf, events, o); err != nil {
		t.Fatal(err)
	}
	return buf.String(), decodePage(t, buf.String())
}

func TestTimelineStory(t *testing.T) {
	_, d := storyPage(t)
	if got, want := strings.Join(d.Lanes, "|"), "chaos|provider|p0|client 1|p4|p2"; got != want {
		t.Errorf("lanes = %s, want %s", got, want)
	}
	if !slices.Equal(d.Group, []int{-1, -2, 0, 1, 1, 2}) {
		t.Errorf("groups = %v, want [-1 -2 0 1 1 2]", d.Group)
	}
	var lane []row
	for _, r := range rows(d) {
		if r.lane == "provider" {
			lane = append(lane, r)
		}
	}
	want := []row{
		{"provider", 2000, 1000, "event", "assign e4", "mutation 16", ""},
		{"provider", 5000, 0, "bad event", "STALE unassign epoch 3 after 4", "mutation 17", ""},
	}
	if !slices.Equal(lane, want) {
		t.Errorf("provider lane = %+v\nwant %+v", lane, want)
	}
	// Op 1 in start order is p1's read (invoke position 1); position 0's
	// empty note still marks p0's write.
	marks := map[string]string{}
	for i, v := range d.Mark {
		r := rows(d)[i]
		marks[r.lane+" "+r.f] = d.Vals[v]
	}
	if len(marks) != 2 || marks["client 1 read"] != "found no holder" || marks["p0 write"] != "" {
		t.Errorf("marks = %v, want client 1's read found no holder and p0's write with an empty note", marks)
	}
	if d.Verdict != "invalid" || len(d.Checkers) != 2 {
		t.Fatalf("verdict %q, %d checkers", d.Verdict, len(d.Checkers))
	}
	wantF := []pageFinding{{"mutation 17 at 0.005s", 5000, 5000, ""}, {"an untimed finding", -1, -1, ""}}
	if c := d.Checkers[0]; c.Name != "fence" || c.Verdict != "false" || c.Summary != "1 stale action" || !slices.Equal(c.Findings, wantF) {
		t.Errorf("fence on the page = %+v", c)
	}
}

func TestTimelineStoryBounds(t *testing.T) {
	var many []Finding
	for i := range maxFindings + 7 {
		many = append(many, Finding{Text: fmt.Sprint(i)})
	}
	var buf bytes.Buffer
	err := TimelineWith(&buf, nil, TimelineOptions{Checkers: []CheckerSummary{{Name: "x", Verdict: "false", Findings: many}}})
	if err != nil {
		t.Fatal(err)
	}
	d := decodePage(t, buf.String())
	if c := d.Checkers[0]; len(c.Findings) != maxFindings || c.More != 7 {
		t.Errorf("%d findings and %d more on the page, want %d and 7", len(c.Findings), c.More, maxFindings)
	}
	err = TimelineWith(&buf, nil, TimelineOptions{Title: "t", Lanes: []Lane{{Name: "l", Events: []LaneEvent{{At: -time.Second, Text: "early"}}}}})
	if err == nil || !strings.Contains(err.Error(), `lane "l": event "early" at -1s`) {
		t.Errorf("an event before the start: %v", err)
	}
}

// clickFinding clicks the fence's timed finding and records the moment the
// page focused on, the pinned tooltip, the header's verdict, and the
// tooltip of the marked read.
const clickFinding = `<script>
(function () {
  var b = document.body, tip = document.getElementById("tip"), view = document.getElementById("view");
  b.dataset.head = document.querySelector(".verdict").textContent + "|" +
    [].map.call(document.querySelectorAll(".ck"), function (x) { return x.textContent; }).join("|");
  var go = document.querySelectorAll(".finds li.go");
  b.dataset.links = String(go.length) + "/" + document.querySelectorAll(".finds li").length;
  go[0].click();
  b.dataset.pinned = tip.style.display + " " + tip.textContent;
  b.dataset.on = go[0].className;
  document.dispatchEvent(new KeyboardEvent("keydown", { key: "Escape" }));
  var D = JSON.parse(document.getElementById("data").textContent), O = timeline.ops, read = -1;
  for (var i = 0; i < O.l.length; i++) if (D.lanes[O.l[i]] === "client 1" && D.fs[O.f[i]] === "read") read = i;
  var r = timeline.box(read);
  view.dispatchEvent(new MouseEvent("mousemove", { bubbles: true, clientX: r.x + Math.min(r.w / 2, 20), clientY: r.y + r.h / 2 }));
  b.dataset.marked = tip.textContent;
})();
</script>
`

func TestTimelineStoryInBrowser(t *testing.T) {
	events, faults := small()
	o := storyOptions()
	o.Faults = faults
	var buf bytes.Buffer
	if err := TimelineWith(&buf, events, o); err != nil {
		t.Fatal(err)
	}
	path := writePage(t, t.TempDir(), strings.Replace(buf.String(), "</body>", clickFinding+"</body>", 1))
	got, _ := browse(t, path, 60*time.Second)
	want := map[string]string{
		"verdict":  "invalid",
		"findings": "2",
		"head":     "INVALID|fence false · 1 stale action|stats true",
		"links":    "1/2",
		"focus":    "5000",
		"pinned":   "block provider · STALE unassign epoch 3 after 4bad eventmutation 17at 0.005000 s",
		"on":       "go on",
		"marked":   "client 1 · readokvalue → 1marked: found no holderinvoked at 0.001000 s",
		"drawn":    "11",
	}
	for k, w := range want {
		if !strings.HasPrefix(got[k], w) {
			t.Errorf("%s = %q, want it to begin %q", k, got[k], w)
		}
	}
}

func ExampleTimelineWith() {
	events := []history.Event{
		{Process: 0, Type: history.Invoke, F: "read", Value: map[string]history.Value{"address": "10.0.1.10"}, Time: 1e6},
		{Process: 0, Type: history.OK, F: "read", Value: map[string]history.Value{"address": "10.0.1.10", "holder": nil}, Time: 2e6},
	}
	var page bytes.Buffer
	err := TimelineWith(&page, events, TimelineOptions{
		Title: "capture",
		Names: func(p history.Process) string { return fmt.Sprintf("client %d", p) },
		Lanes: []Lane{{Name: "provider", Events: []LaneEvent{
			{At: 500 * time.Microsecond, Text: "unassign 10.0.1.10 epoch 3 after 4", Bad: true},
		}}},
		Marks:   map[int]string{0: "found no holder"},
		Verdict: "invalid",
		Checkers: []CheckerSummary{{Name: "fence", Verdict: "false", Findings: []Finding{
			{Text: "stale unassign at 0.0005s", Timed: true, At: 500 * time.Microsecond},
		}}},
	})
	fmt.Println(err, strings.Contains(page.String(), `"lanes":["provider","client 0"]`))
	// Output: <nil> true
}

// largeStory is a story for the synthetic 100,000-operation history: a
// lane of 2,000 events (every tenth bad), a mark on every 30th operation,
// and a checker with more findings than the header lists.
func largeStory(events []history.Event, faults []Fault) TimelineOptions {
	var end int64
	for _, e := range events {
		end = max(end, e.Time)
	}
	lane := Lane{Name: "provider"}
	var finds []Finding
	for i := range 2000 {
		at := time.Duration(end / 2000 * int64(i))
		lane.Events = append(lane.Events, LaneEvent{At: at, Text: fmt.Sprintf("mutation %d", i), Bad: i%10 == 0})
		if i%10 == 0 {
			finds = append(finds, Finding{Text: fmt.Sprintf("mutation %d is stale", i), Timed: true, At: at})
		}
	}
	marks := map[int]string{}
	for i, e := range events {
		if e.Type == history.Invoke && e.Process >= 0 && i%30 == 0 {
			marks[i] = "marked"
		}
	}
	return TimelineOptions{Title: "large", Faults: faults, Lanes: []Lane{lane}, Marks: marks, Verdict: "invalid",
		Names:    func(p history.Process) string { return fmt.Sprintf("client %d", p) },
		Checkers: []CheckerSummary{{Name: "fence", Verdict: "false", Findings: finds}}}
}

func BenchmarkTimelineStory100k(b *testing.B) {
	events, faults := synthetic(1, 100_000, 10)
	o := largeStory(events, faults)
	b.ResetTimer()
	for b.Loop() {
		if err := TimelineWith(io.Discard, events, o); err != nil {
			b.Fatal(err)
		}
	}
}

// TestTimelineStoryLarge loads the 100,000-operation page with a story in
// chromium and clicks a finding: every op and lane event drawn, no script
// error, the finding's moment in view.
func TestTimelineStoryLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("chromium on 100,000 operations takes seconds")
	}
	events, faults := synthetic(1, 100_000, 10)
	o := largeStory(events, faults)
	var buf bytes.Buffer
	if err := TimelineWith(&buf, events, o); err != nil {
		t.Fatal(err)
	}
	click := `<script>document.querySelectorAll(".finds li.go")[3].click();</script>`
	path := writePage(t, t.TempDir(), strings.Replace(buf.String(), "</body>", click+"</body>", 1))
	got, took := browse(t, path, 90*time.Second)
	t.Logf("page %.2f MB, chromium %v", float64(buf.Len())/1e6, took.Round(time.Millisecond))
	d := decodePage(t, buf.String())
	var at int64
	for _, f := range d.Checkers[0].Findings[3:4] {
		at = f.At
	}
	if got["focus"] != fmt.Sprint(at) || got["findings"] != "50" || got["verdict"] != "invalid" {
		t.Errorf("focus %q (want %d), findings %q (want 50), verdict %q", got["focus"], at, got["findings"], got["verdict"])
	}
	if got["drawn"] == "" || got["drawn"] == "0" {
		t.Errorf("drawn = %q after the focus", got["drawn"])
	}
}

func TestProcessNames(t *testing.T) {
	names := ProcessNames(6, map[history.Process]string{1 << 40: "provider"})
	for p, want := range map[history.Process]string{
		history.Nemesis: "nemesis", 1 << 40: "provider", 0: "client 0", 5: "client 5", 11: "client 5 (p11)", -7: "",
	} {
		if got := names(p); got != want {
			t.Errorf("name of %d = %q, want %q", p, got, want)
		}
	}
}

// TestFindingPinsItsEvent: two lane events start in the same microsecond;
// the finding that names the second by its Pin pins it, in chromium.
func TestFindingPinsItsEvent(t *testing.T) {
	events, _ := small()
	o := TimelineOptions{Title: "pin", Verdict: "invalid",
		Lanes: []Lane{{Name: "provider", Events: []LaneEvent{
			{At: 5 * time.Millisecond, Text: "STALE unassign a", Bad: true},
			{At: 5 * time.Millisecond, Text: "STALE unassign b", Bad: true},
		}}},
		Checkers: []CheckerSummary{{Name: "fence", Verdict: "false", Findings: []Finding{
			{Text: "b is stale", Timed: true, At: 5 * time.Millisecond, Pin: "STALE unassign b"},
		}}},
	}
	var buf bytes.Buffer
	if err := TimelineWith(&buf, events, o); err != nil {
		t.Fatal(err)
	}
	d := decodePage(t, buf.String())
	if f := d.Checkers[0].Findings[0]; f.Pin != "STALE unassign b" || f.At != 5000 {
		t.Fatalf("finding on the page = %+v", f)
	}
	click := `<script>
document.querySelectorAll(".finds li.go")[0].click();
document.body.dataset.pinned = document.getElementById("tip").textContent;
</script>`
	path := writePage(t, t.TempDir(), strings.Replace(buf.String(), "</body>", click+"</body>", 1))
	got, _ := browse(t, path, 60*time.Second)
	if !strings.HasPrefix(got["pinned"], "provider · STALE unassign b") || got["focus"] != "5000" {
		t.Errorf("pinned %q, focus %q", got["pinned"], got["focus"])
	}
}
