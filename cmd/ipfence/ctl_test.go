package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/config"
	"github.com/ipfence/ipfence/capture/daemon"
	"github.com/ipfence/ipfence/internal/cli"
)

func TestCtlUsage(t *testing.T) {
	dir := t.TempDir()
	short := filepath.Join(dir, "short")
	os.WriteFile(short, []byte("too short"), 0o600)
	good := filepath.Join(dir, "good")
	os.WriteFile(good, []byte(strings.Repeat("s", 40)), 0o600)
	flags := []string{"ctl", "--endpoint", "http://127.0.0.1:1", "--token-file", good}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"ctl", "status"}, "ipfence ctl: --endpoint and --token-file are required (under mutual TLS, --cert, --key and --ca may stand in for --token-file)\nsee 'ipfence ctl --help'\n"},
		{[]string{"ctl", "--endpoint", "http://127.0.0.1:1", "--token-file", short, "status"}, "ipfence ctl: --token-file:"},
		{flags, "ipfence ctl: no command: want status, actions, approve ID, reject ID, drain NODE or undrain NODE\nsee 'ipfence ctl --help'\n"},
		{append(flags, "frob"), "ipfence ctl: unknown command \"frob\": want status, actions, approve, reject, drain or undrain\nsee 'ipfence ctl --help'\n"},
		{append(flags, "statsu"), "ipfence ctl: unknown command \"statsu\"; did you mean \"status\"?: want status, actions, approve, reject, drain or undrain\nsee 'ipfence ctl --help'\n"},
		{append(flags, "approve"), "ipfence ctl: approve takes one action: its id from 'ipfence ctl actions', or a unique prefix of its idempotency key\nsee 'ipfence ctl --help'\n"},
		{append(flags, "drain"), "ipfence ctl: drain takes one node name\nsee 'ipfence ctl --help'\n"},
		{append(flags, "status", "n1"), "ipfence ctl: status takes no argument, not \"n1\"\nsee 'ipfence ctl --help'\n"},
		{append(flags, "status"), "connection refused"},
	}
	for _, c := range cases {
		code, stdout, stderr := runCLI(c.args...)
		if code != cli.ExitError || stdout != "" || !strings.HasPrefix(stderr, c.want) && !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 3 and %q", c.args, code, stdout, stderr, c.want)
		}
	}
}

// ctlNode is a real cluster of two nodes, in this process, on loopback:
// two addresses on the memory provider, n1 preferred, and no approval
// policy, so that every action waits for an operator. ctl runs against n1.
func ctlNode(t *testing.T) (ctl func(args ...string) (int, string, string)) {
	t.Helper()
	dir := t.TempDir()
	var lns []net.Listener
	for range 2 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, l)
	}
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte(strings.Repeat("k", 40)), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var done []chan error
	t.Cleanup(func() {
		cancel()
		for _, ch := range done {
			<-ch
		}
	})
	names := []string{"n1", "n2"}
	for i, n := range names {
		yaml := fmt.Sprintf(`node: %s
listen: %s
data_dir: %s-data
peers:
  - {name: %s, url: "http://%s"}
federation: {secret_file: secret}
providers:
  mem: {type: memory}
pools:
  - name: web
    provider: mem
    addresses: [10.0.0.10, 10.0.0.11]
    members:
      - {node: n1, priority: 1, target: eni-n1}
      - {node: n2, priority: 2, target: eni-n2}
timing: {heartbeat_interval: 50ms, heartbeat_ttl: 200ms, reconcile_interval: 100ms}
`, n, lns[i].Addr(), n, names[1-i], lns[1-i].Addr())
		path := filepath.Join(dir, n+".yaml")
		if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		d, err := daemon.New(ctx, cfg, daemon.Options{Listener: lns[i], Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		ch := make(chan error, 1)
		go func() { ch <- d.Run(ctx) }()
		done = append(done, ch)
	}
	endpoint := "http://" + lns[0].Addr().String()
	return func(args ...string) (int, string, string) {
		return runCLI(append([]string{"ctl", "--endpoint", endpoint, "--token-file", secret}, args...)...)
	}
}

// waitRows polls ctl --json actions until want(rows) holds.
func waitRows(t *testing.T, ctl func(args ...string) (int, string, string), what string, want func([]capture.Row) bool) []capture.Row {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, stdout, stderr := ctl("--json", "actions")
		var rows []capture.Row
		if code == 0 && json.Unmarshal([]byte(stdout), &rows) == nil && want(rows) {
			return rows
		}
		if time.Now().After(deadline) {
			t.Fatalf("never %s: exit %d\n%s\n%s", what, code, summarize(stdout), stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// columns checks that a tabwriter table's rows line up under its header:
// each header word starts a column, and every row's cell starts where its
// header does. It returns the rows' cells.
func columns(t *testing.T, table string, header []string) [][]string {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(table, "\n"), "\n")
	if got := strings.Fields(lines[0]); strings.Join(got, " ") != strings.Join(header, " ") {
		t.Fatalf("header %q, want %q", lines[0], strings.Join(header, " "))
	}
	var starts []int
	for _, h := range header {
		starts = append(starts, strings.Index(lines[0], h))
	}
	var out [][]string
	for _, l := range lines[1:] {
		var cells []string
		for i, s := range starts {
			if s >= len(l) || s > 0 && l[s-1] != ' ' || l[s] == ' ' {
				t.Fatalf("row %q: column %s does not start at %d\n%s", l, header[i], s, table)
			}
			end := len(l)
			if i+1 < len(starts) {
				end = starts[i+1]
			}
			cells = append(cells, strings.TrimSpace(l[s:min(end, len(l))]))
		}
		out = append(out, cells)
	}
	return out
}

// TestCtlAgainstNode operates a real node with ctl: tables, approval and
// rejection by a short id or a key prefix, the errors of an ambiguous or
// unknown one, and drain's sentence.
func TestCtlAgainstNode(t *testing.T) {
	ctl := ctlNode(t)
	rows := waitRows(t, ctl, "two pending assigns", func(rows []capture.Row) bool {
		n := 0
		for _, r := range rows {
			if r.State == capture.Pending && r.Kind == "assign-secondary-ip" {
				n++
			}
		}
		return n == 2
	})
	byAddr := map[string]capture.Row{}
	for _, r := range rows {
		byAddr[string(r.Kind)+" "+r.Address.String()] = r
	}
	ten, eleven := byAddr["assign-secondary-ip 10.0.0.10"], byAddr["assign-secondary-ip 10.0.0.11"]
	fwd10, fwd11 := byAddr["ensure-forwarding-enabled 10.0.0.10"], byAddr["ensure-forwarding-enabled 10.0.0.11"]
	id10, id11 := shortID(ten.IdempotencyKey, 7), shortID(eleven.IdempotencyKey, 7)

	code, table, stderr := ctl("actions", "--state", "pending")
	if code != 0 || stderr != "" {
		t.Fatalf("actions: exit %d, %s", code, stderr)
	}
	cells := columns(t, table, []string{"ID", "SEQ", "STATE", "KIND", "POOL", "ADDRESS", "TARGET", "HOLDER", "EPOCH", "REASON"})
	want := map[string]bool{}
	for _, r := range []capture.Row{ten, eleven, fwd10, fwd11} {
		want[strings.Join([]string{shortID(r.IdempotencyKey, 7), fmt.Sprint(r.Seq), "pending", string(r.Kind), "web", r.Address.String(), "eni-n1", "n1", fmt.Sprint(r.Epoch), "-"}, "|")] = true
	}
	for _, c := range cells {
		if !want[strings.Join(c, "|")] {
			t.Errorf("unexpected row %q in\n%s", c, table)
		}
		delete(want, strings.Join(c, "|"))
	}
	if len(want) > 0 {
		t.Errorf("rows missing: %v\n%s", want, table)
	}

	// A key prefix both rows share is ambiguous: the error lists both.
	prefix := strings.TrimSuffix(ten.IdempotencyKey, "0:epoch:"+fmt.Sprint(ten.Epoch))
	code, stdout, stderr := ctl("approve", prefix)
	if code != cli.ExitError || stdout != "" ||
		!strings.HasPrefix(stderr, fmt.Sprintf("ipfence ctl: approve: %q is ambiguous: it matches 2 pending actions; give more of the id or the key:\n", prefix)) ||
		!regexp.MustCompile(`(?m)^  `+id10+` +pending +assign-secondary-ip +10\.0\.0\.10 +eni-n1 +epoch \d+ +`+regexp.QuoteMeta(ten.IdempotencyKey)+`$`).MatchString(stderr) ||
		!strings.Contains(stderr, "  "+id11+" ") {
		t.Errorf("ambiguous prefix: exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
	}
	code, _, stderr = ctl("approve", "zzzz")
	if code != cli.ExitError || !strings.HasPrefix(stderr, "ipfence ctl: approve: no action matches \"zzzz\"; the pending actions are:\n") ||
		!strings.Contains(stderr, id10) || !strings.Contains(stderr, id11) {
		t.Errorf("unknown id: exit %d, stderr:\n%s", code, stderr)
	}

	// Five hex digits of the id are enough.
	code, stdout, stderr = ctl("approve", id10[:5])
	if code != 0 || !regexp.MustCompile(`^approved `+id10+`: assign-secondary-ip 10\.0\.0\.10 on eni-n1 \(pool web, epoch \d+\); it is now (approved|running|succeeded)\n$`).MatchString(stdout) {
		t.Errorf("approve by id: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	// The capture needs its forwarding too: approved by its key's prefix.
	code, stdout, _ = ctl("approve", "web:mem:eni-n1:ensure-forwarding-enabled:10.0.0.10")
	if code != 0 || !strings.HasPrefix(stdout, "approved "+shortID(fwd10.IdempotencyKey, 7)+": ensure-forwarding-enabled 10.0.0.10 on eni-n1") {
		t.Errorf("approve by key prefix: exit %d, stdout %q", code, stdout)
	}
	waitRows(t, ctl, "the approved assign succeeding", func(rows []capture.Row) bool {
		for _, r := range rows {
			if r.IdempotencyKey == ten.IdempotencyKey {
				return r.State == capture.Succeeded
			}
		}
		return false
	})
	// Approving it again names its state instead.
	code, _, stderr = ctl("approve", id10)
	if code != cli.ExitError || !strings.HasPrefix(stderr, fmt.Sprintf("ipfence ctl: approve: %q matches no pending action, only these:\n  %s  succeeded", id10, id10)) {
		t.Errorf("approve twice: exit %d, stderr:\n%s", code, stderr)
	}
	// Now the shared prefix names one pending row: the other.
	code, stdout, _ = ctl("reject", prefix)
	if code != 0 || stdout != fmt.Sprintf("rejected %s: assign-secondary-ip 10.0.0.11 on eni-n1 (pool web, epoch %d); it is now skipped\n", id11, eleven.Epoch) {
		t.Errorf("reject by key prefix: exit %d, stdout %q", code, stdout)
	}

	// Status: the member's age is never negative, booleans read yes/no,
	// the address this node holds shows it at the provider.
	code, table, stderr = ctl("status")
	if code != 0 {
		t.Fatalf("status: exit %d %s", code, stderr)
	}
	parts := strings.SplitN(table, "\n\n", 3)
	if len(parts) != 3 || !regexp.MustCompile(`^node n1, last pass \S+ \(\S+ ago\)$`).MatchString(parts[0]) {
		t.Fatalf("status:\n%s", table)
	}
	members := columns(t, parts[1], []string{"MEMBER", "HEARD", "STALE", "DRAINED", "HEARTBEAT AGE"})
	if len(members) != 2 || strings.Join(members[0][:4], " ") != "n1 yes no no" || strings.Join(members[1][:4], " ") != "n2 yes no no" ||
		!regexp.MustCompile(`^\d+(\.\d+)?m?s$`).MatchString(members[0][4]) || !regexp.MustCompile(`^\d+(\.\d+)?m?s$`).MatchString(members[1][4]) {
		t.Errorf("members: %q\n%s", members, parts[1])
	}
	addrs := columns(t, parts[2], []string{"ADDRESS", "POOL", "DESIRED", "EPOCH", "HOLDER", "HELD HERE", "PROVIDER"})
	if len(addrs) != 2 || strings.Join(addrs[0], " ") != fmt.Sprintf("10.0.0.10 web n1 %d n1 yes n1", ten.Epoch) || addrs[1][0] != "10.0.0.11" || addrs[1][6] != "-" {
		t.Errorf("addresses: %q\n%s", addrs, parts[2])
	}

	code, stdout, _ = ctl("drain", "n1")
	if code != 0 || !regexp.MustCompile(`^drained n1: it gives up its addresses to the next members by priority, and takes none until 'ipfence ctl undrain n1' \(event \S+\)\n$`).MatchString(stdout) {
		t.Errorf("drain: exit %d, stdout %q", code, stdout)
	}
	code, stdout, _ = ctl("--json", "undrain", "n1")
	var res map[string]string
	if code != 0 || json.Unmarshal([]byte(stdout), &res) != nil || res["node"] != "n1" || res["intent"] != "undrain" || res["event"] == "" {
		t.Errorf("undrain --json: exit %d, stdout %q", code, stdout)
	}
	code, _, stderr = ctl("drain", "n9")
	if code != cli.ExitError || !strings.Contains(stderr, `no node "n9" in the cluster (nodes: n1, n2)`) {
		t.Errorf("drain n9: exit %d, stderr %q", code, stderr)
	}
}

// Heartbeat ages are never negative: a member whose newest heartbeat is
// ahead of the group's time shows 0s, in the table and in JSON.
func TestCtlAges(t *testing.T) {
	st := daemon.Status{Node: "n1", Members: []daemon.MemberStatus{
		{Node: "n1", Heard: true, AgeMilli: -120}, {Node: "n2", Heard: true, AgeMilli: 250.4},
		{Node: "n3", Heard: true, AgeMilli: 61234}, {Node: "n4"},
	}}
	clampAges(&st)
	if st.Members[0].AgeMilli != 0 || st.Members[1].AgeMilli != 250.4 {
		t.Errorf("clamped: %+v", st.Members)
	}
	var b strings.Builder
	printStatus(&b, st, time.Now())
	rows := columns(t, strings.SplitN(b.String(), "\n\n", 3)[1], []string{"MEMBER", "HEARD", "STALE", "DRAINED", "HEARTBEAT AGE"})
	var ages []string
	for _, r := range rows {
		ages = append(ages, r[4])
	}
	if strings.Join(ages, ",") != "0s,250ms,1m1.2s,never" {
		t.Errorf("ages %q\n%s", ages, b.String())
	}
}

// summarize shows ctl --json actions output as one line a row.
func summarize(js string) string {
	var rows []capture.Row
	if json.Unmarshal([]byte(js), &rows) != nil {
		return js
	}
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "%s %s %s\n", r.IdempotencyKey, r.State, r.Reason)
	}
	return b.String()
}
