package daemon

import (
	"io"
	"net/http"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture/federation"
)

// fastTiming ticks often, with a TTL long enough that a loaded machine
// (-race, other jobs) does not make members flap.
const fastTiming = "timing: {reconcile_interval: 100ms, heartbeat_interval: 50ms, heartbeat_ttl: 1s}\n"

// settled waits until every node sees every member live and n1 as the
// desired holder of every address.
func settled(t *testing.T, nodes []*testNode) {
	t.Helper()
	eventually(t, 60*time.Second, "the cluster settled on n1", func() bool {
		for _, n := range nodes {
			st, err := n.d.status(t.Context())
			if err != nil {
				return false
			}
			for _, m := range st.Members {
				if m.Stale || !m.Heard {
					return false
				}
			}
			for _, a := range st.Addresses {
				if a.DesiredHolder != "n1" || a.Holder != "n1" {
					return false
				}
			}
		}
		return true
	})
}

// since is the logs of n from byte mark on, as a logBuffer.
func since(n *testNode, mark int) *logBuffer {
	b := &logBuffer{}
	b.Write([]byte(n.logs.String()[mark:]))
	return b
}

// scrape returns the node's /metrics page.
func scrape(t *testing.T, n *testNode) string {
	t.Helper()
	resp, err := http.Get(n.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// infoLines are the log lines at info or above after the first skip bytes.
func infoLines(logs string) []string {
	var out []string
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "level=INFO") || strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
			out = append(out, l)
		}
	}
	return out
}

// TestLogsTellTheStory: a cluster that settled logs nothing at info over
// ten reconcile periods; a drain of the holder then logs, on the holder,
// for each address the desired-holder change with reason=drain, the epoch
// bump, and the release planned, approved and executed, and on the next
// member its acquire; the metrics count the moves by reason, name each
// address's holder, and carry the build.
func TestLogsTellTheStory(t *testing.T) {
	nodes := startNodes(t, 3, nodeSpec{addresses: 2, extra: fastTiming})
	n, n2 := nodes[0], nodes[1]
	eventually(t, 20*time.Second, "both captures executed", func() bool {
		return len(n.logs.lines(`msg="action executed"`, "kind=assign-secondary-ip")) == 2
	})
	m := scrape(t, n)
	for _, a := range []string{"10.1.0.1", "10.1.0.2"} {
		want := `ipfence_address_holder{address="` + a + `",holder="n1",pool="web"} 1`
		if !strings.Contains(m, want) {
			t.Fatalf("metrics lack %s:\n%s", want, grep(m, "ipfence_address_holder"))
		}
	}
	if want := `go_version="` + runtime.Version() + `"`; !strings.Contains(grep(m, "ipfence_build_info"), want) {
		t.Fatalf("build info lacks %s: %s", want, grep(m, "ipfence_build_info"))
	}

	// Steady state: nothing at info, on any node.
	settled(t, nodes)
	time.Sleep(300 * time.Millisecond)
	marks := make([]int, len(nodes))
	for i, x := range nodes {
		marks[i] = len(x.logs.String())
	}
	time.Sleep(time.Second)
	for i, x := range nodes {
		if noise := infoLines(x.logs.String()[marks[i]:]); len(noise) > 0 {
			t.Fatalf("settled, n%d logged %d lines at info in ten reconcile periods:\n%s", i+1, len(noise), strings.Join(noise, "\n"))
		}
	}
	before := marks[0]
	after1, after2 := marks[0], marks[1]

	if _, err := n.d.fed.Emit(federation.Drain, "n1", nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "both releases executed", func() bool {
		return len(since(n, after1).lines(`msg="action executed"`, "kind=unassign-secondary-ip")) == 2
	})
	for _, a := range []string{"10.1.0.1", "10.1.0.2"} {
		for _, want := range [][]string{
			{`msg="desired holder"`, "address=" + a + " ", "from=n1", "to=n2", "reason=drain"},
			{"msg=epoch", "address=" + a + " ", "epoch=2", "holder=n2", "previous=1", "previous_holder=n1"},
			{`msg="action planned"`, "kind=unassign-secondary-ip", "address=" + a + " ", "epoch=2"},
			{`msg="action approved"`, "kind=unassign-secondary-ip", "address=" + a + " ", "by=policy"},
			{`msg="action executed"`, "kind=unassign-secondary-ip", "address=" + a + " ", "target=eni-n1", "epoch=2"},
		} {
			if got := since(n, after1).lines(want...); len(got) != 1 {
				t.Errorf("want one line with %q, found %d; info lines:\n%s", want, len(got), strings.Join(infoLines(n.logs.String()[before:]), "\n"))
			}
		}
	}
	eventually(t, 20*time.Second, "n2's acquires executed", func() bool {
		return len(since(n2, after2).lines(`msg="action executed"`, "kind=assign-secondary-ip", "target=eni-n2", "epoch=2")) == 2
	})
	for _, a := range []string{"10.1.0.1", "10.1.0.2"} {
		if got := since(n2, after2).lines(`msg="desired holder"`, "address="+a+" ", "from=n1", "to=n2", "reason=drain"); len(got) != 1 {
			t.Errorf("n2 logged %d holder changes of %s with reason=drain:\n%s", len(got), a, strings.Join(infoLines(n2.logs.String()), "\n"))
		}
	}
	m = scrape(t, n)
	if !regexp.MustCompile(`(?m)^ipfence_moves_total\{reason="drain"\} 2$`).MatchString(m) {
		t.Errorf("moves by reason:\n%s", grep(m, "ipfence_moves_total"))
	}
	if !regexp.MustCompile(`(?m)^ipfence_failovers_total\{reason="liveness"\} 0$`).MatchString(m) {
		t.Errorf("a drain counted as a failover:\n%s", grep(m, "ipfence_failovers_total"))
	}
	for _, a := range []string{"10.1.0.1", "10.1.0.2"} {
		if want := `ipfence_address_holder{address="` + a + `",holder="n2",pool="web"} 1`; !strings.Contains(m, want) {
			t.Errorf("metrics lack %s:\n%s", want, grep(m, "ipfence_address_holder"))
		}
	}
}

// grep returns the lines of s containing word.
func grep(s, word string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, word) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestLogsMemberStaleAndBack: a member that stops is logged stale once,
// with its heartbeat age, by the others, and back once when it returns.
func TestLogsMemberStaleAndBack(t *testing.T) {
	nodes := startNodes(t, 3, nodeSpec{addresses: 1, extra: fastTiming})
	n1, n3 := nodes[0], nodes[2]
	settled(t, nodes)
	mark := len(n1.logs.String())
	n3.stop()
	eventually(t, 20*time.Second, "n3 logged stale", func() bool { return len(since(n1, mark).lines(`msg="member stale"`, "member=n3")) > 0 })
	line := since(n1, mark).lines(`msg="member stale"`, "member=n3")[0]
	age := regexp.MustCompile(`heartbeat_age=(\S+)`).FindStringSubmatch(line)
	if age == nil {
		t.Fatalf("no heartbeat age: %s", line)
	}
	// Stale means silent for longer than the TTL (1s).
	if d, err := time.ParseDuration(age[1]); err != nil || d < time.Second {
		t.Fatalf("stale at heartbeat age %s (%v), TTL 1s: %s", age[1], err, line)
	}
	n3.restart(t)
	eventually(t, 20*time.Second, "n3 logged back", func() bool { return len(since(n1, mark).lines(`msg="member back"`, "member=n3")) > 0 })
	time.Sleep(500 * time.Millisecond)
	if got := len(since(n1, mark).lines(`msg="member stale"`, "member=n3")); got != 1 {
		t.Errorf("n3 logged stale %d times", got)
	}
	if got := len(since(n1, mark).lines(`msg="member back"`, "member=n3")); got != 1 {
		t.Errorf("n3 logged back %d times", got)
	}
	if got := since(n1, mark).lines(`msg="member stale"`, "member=n2"); len(got) != 0 {
		t.Errorf("n2, never stopped, logged stale: %v", got)
	}
}
