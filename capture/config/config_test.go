package config

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/policy"
)

// testSecret is testdata/secret with its newline trimmed.
const testSecret = "test-only-secret-for-capture-config-tests-4f1c9a2e"

func abs(t testing.TB, path string) string {
	t.Helper()
	a, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

// same fails the test with both values, field by field, when got differs
// from want.
func same(t *testing.T, got, want *Node) {
	t.Helper()
	if reflect.DeepEqual(got, want) {
		return
	}
	g, w := reflect.ValueOf(*got), reflect.ValueOf(*want)
	for i := range g.NumField() {
		if !reflect.DeepEqual(g.Field(i).Interface(), w.Field(i).Interface()) {
			t.Errorf("%s:\n got %+v\nwant %+v", g.Type().Field(i).Name, g.Field(i).Interface(), w.Field(i).Interface())
		}
	}
}

func TestLoadFull(t *testing.T) {
	got, err := Load("testdata/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := &Node{
		Name:      "n1",
		Listen:    "127.0.0.1:7001",
		Advertise: "http://n1.example:7001",
		DataDir:   abs(t, "testdata/state/n1"),
		StatePath: abs(t, "testdata/state/n1/state.db"),
		Peers: []Peer{
			{Name: "n2", URL: "http://127.0.0.1:7002"},
			{Name: "n3", URL: "https://n3.example:7003"},
		},
		Federation: Federation{Secret: []byte(testSecret), MaxBody: 512 << 10, ReplayWindow: 10 * time.Second},
		Providers: map[string]Provider{
			"sim": {Name: "sim", Type: TypeCloudsim, Endpoint: "http://127.0.0.1:9000", Region: "us-east-1"},
			"ec2": {Name: "ec2", Type: TypeAWS, Region: "eu-west-1"},
			"mem": {Name: "mem", Type: TypeMemory},
		},
		Pools: []capture.Pool{
			{
				Name: "web", Provider: "sim", Group: "g1",
				Addresses: addrs("10.0.0.10", "10.0.0.11", "10.0.0.20", "10.0.0.21", "10.0.0.22", "10.0.0.23"),
				Members: []capture.Member{
					{Node: "n1", Priority: 1, Target: "eni-n1"},
					{Node: "n2", Priority: 2, Target: "eni-n2"},
					{Node: "n3", Priority: 0, Target: "eni-n3"},
				},
			},
			{
				Name: "db", Provider: "ec2",
				Addresses: addrs("2001:db8::fe", "2001:db8::ff", "2001:db8::100", "2001:db8::101"),
				Members:   []capture.Member{{Node: "n2", Priority: 5, Target: "eni-0abc"}},
			},
			{
				Name: "lan", Provider: "mem", L2Domain: "dc1-vlan100",
				Addresses: addrs("192.168.1.50"),
				Members:   []capture.Member{{Node: "n1", Priority: 0, Target: "eth0"}},
			},
		},
		Approval: policy.Policy{
			Auto:      true,
			Providers: []string{"sim", "ec2"},
			Kinds:     []capture.Kind{capture.Assign, capture.EnableForwarding},
			CIDRs:     []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24"), netip.MustParsePrefix("2001:db8::/64")},
			MaxPerRun: 7,
		},
		Timing: Timing{
			ReconcileInterval: 2 * time.Second,
			HeartbeatInterval: 200 * time.Millisecond,
			HeartbeatTTL:      700 * time.Millisecond,
			PromotionHold:     100 * time.Millisecond,
			DeprovisionHold:   3 * time.Second,
			RunningTimeout:    90 * time.Second,
		},
		Path: abs(t, "testdata/full.yaml"),
	}
	same(t, got, want)
}

func TestLoadDefaults(t *testing.T) {
	got, err := Load("testdata/minimal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	same(t, got, &Node{
		Name:       "n1",
		Listen:     "127.0.0.1:7001",
		Advertise:  "http://127.0.0.1:7001",
		DataDir:    "/var/lib/ipfence/n1",
		StatePath:  "/var/lib/ipfence/n1/state.db",
		Federation: Federation{Secret: []byte(testSecret), MaxBody: 1 << 20, ReplayWindow: 30 * time.Second},
		// Without an approval section nothing is approved automatically.
		Approval: policy.Policy{},
		Timing: Timing{
			ReconcileInterval: time.Second,
			HeartbeatInterval: 500 * time.Millisecond,
			HeartbeatTTL:      1500 * time.Millisecond,
			RunningTimeout:    time.Minute,
		},
		Path: abs(t, "testdata/minimal.yaml"),
	})
}

func TestLoadTLS(t *testing.T) {
	got, err := Load("testdata/tls.yaml")
	if err != nil {
		t.Fatal(err)
	}
	same(t, got, &Node{
		Name:      "n1",
		Listen:    "[::1]:7001",
		Advertise: "https://[::1]:7001",
		DataDir:   abs(t, "testdata/state"),
		StatePath: abs(t, "testdata/state/state.db"),
		Federation: Federation{
			TLS: &TLS{
				CertFile: abs(t, "testdata/tls/node.crt"),
				KeyFile:  abs(t, "testdata/tls/node.key"),
				CAFile:   abs(t, "testdata/tls/ca.crt"),
			},
			MaxBody: 1 << 20, ReplayWindow: 30 * time.Second,
		},
		Timing: Timing{
			ReconcileInterval: time.Second,
			HeartbeatInterval: 500 * time.Millisecond,
			HeartbeatTTL:      1500 * time.Millisecond,
			RunningTimeout:    time.Minute,
		},
		Path: abs(t, "testdata/tls.yaml"),
	})
}

// An on-premises node: the onprem provider's settings and the VRRP
// authority, with the pool's capture domain on-premises.
func TestLoadOnPrem(t *testing.T) {
	got, err := Load("testdata/onprem.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := Provider{Name: "lan", Type: TypeOnPrem, OnPrem: OnPrem{
		WorkloadDevice: "wl0", WorkloadNextHop: netip.MustParseAddr("192.168.1.2"), GARPCount: 3, GARPRepeatAfter: 2 * time.Second}}
	if got.Providers["lan"] != want {
		t.Errorf("provider %+v, want %+v", got.Providers["lan"], want)
	}
	if got.Authority.VRRP == nil || *got.Authority.VRRP != (VRRP{NotifyFIFO: "/run/keepalived/ipfence.fifo", Instance: "VI_1"}) {
		t.Errorf("authority %+v", got.Authority.VRRP)
	}
	if len(got.Pools) != 1 || !got.Pools[0].OnPrem() || got.Pools[0].Domain("h1") != "onprem:rack1" {
		t.Errorf("pools %+v", got.Pools)
	}
	// Defaults: keepalived's 5 and 5 s.
	n, err := Parse("x.yaml", []byte(`node: h1
listen: 127.0.0.1:7000
data_dir: /tmp/x
federation: {secret_file: testdata/secret}
providers: {lan: {type: onprem, workload_device: wl0}}
authority: {vrrp: {notify_fifo: /run/k.fifo, instance: VI_1}}
`))
	if err != nil {
		t.Fatal(err)
	}
	if o := n.Providers["lan"].OnPrem; o.GARPCount != 5 || o.GARPRepeatAfter != 5*time.Second || o.WorkloadNextHop.IsValid() {
		t.Errorf("defaults %+v", o)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load("testdata/no-such.yaml")
	if !errors.Is(err, os.ErrNotExist) || err.Error() != "config: open testdata/no-such.yaml: no such file or directory" {
		t.Fatalf("got %v", err)
	}
}

// configErrors flattens err into its *Error values, failing the test on
// anything else.
func configErrors(t testing.TB, err error) []*Error {
	t.Helper()
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []*Error
		for _, e := range j.Unwrap() {
			out = append(out, configErrors(t, e)...)
		}
		return out
	}
	e, ok := err.(*Error)
	if !ok {
		t.Fatalf("%T is not a *config.Error: %v", err, err)
	}
	return []*Error{e}
}

// TestLoadBad loads every file in testdata/bad and compares the error with
// the file's "# want:" lines, one per problem.
func TestLoadBad(t *testing.T) {
	files, err := filepath.Glob("testdata/bad/*.yaml")
	if err != nil || len(files) < 50 {
		t.Fatalf("found %d bad files (%v)", len(files), err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".yaml"), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for line := range strings.Lines(string(data)) {
				if w, ok := strings.CutPrefix(line, "# want: "); ok {
					want = append(want, strings.TrimSuffix(w, "\n"))
				}
			}
			if len(want) == 0 {
				t.Fatal("no # want: line")
			}
			n, err := Load(file)
			if err == nil {
				t.Fatalf("no error; parsed %+v", n)
			}
			if n != nil {
				t.Errorf("a node as well as an error: %+v", n)
			}
			if got := err.Error(); got != strings.Join(want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", got, strings.Join(want, "\n"))
			}
			errs := configErrors(t, err)
			for i, e := range errs {
				if e.File != file {
					t.Errorf("error %d names file %q, want %q", i, e.File, file)
				}
				if i > 0 && e.Line < errs[i-1].Line {
					t.Errorf("error %d at line %d comes after one at line %d", i, e.Line, errs[i-1].Line)
				}
			}
		})
	}
}

// TestSeveralProblems checks that problems found in dependency order come
// out sorted by line, each with its own line and field.
func TestSeveralProblems(t *testing.T) {
	_, err := Load("testdata/bad/several.yaml")
	var got []string
	for _, e := range configErrors(t, err) {
		got = append(got, fmt.Sprintf("%d %s", e.Line, e.Field))
	}
	want := []string{"1 listen", "2 timing.heartbeat_interval", "3 node", "17 pools[0].members[1].priority"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestErrorFormat(t *testing.T) {
	for _, tc := range []struct {
		err  Error
		want string
	}{
		{Error{File: "n1.yaml", Line: 14, Field: "pools[0].members[1].priority", Msg: "must be >= 0, found -1"}, "n1.yaml:14: pools[0].members[1].priority: must be >= 0, found -1"},
		{Error{File: "n1.yaml", Line: 3, Msg: "YAML: did not find expected key"}, "n1.yaml:3: YAML: did not find expected key"},
		{Error{File: "n1.yaml", Msg: "the file is empty"}, "n1.yaml: the file is empty"},
		{Error{Line: 2, Field: "node", Msg: "required"}, "config:2: node: required"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}

func TestParseAddrs(t *testing.T) {
	for _, tc := range []struct {
		in    string
		first string
		n     int
		err   string
	}{
		{in: "10.0.0.1", first: "10.0.0.1", n: 1},
		{in: "10.0.0.1-10.0.0.1", first: "10.0.0.1", n: 1},
		{in: " 10.0.0.254 - 10.0.1.1 ", first: "10.0.0.254", n: 4},
		{in: "10.0.0.0-10.0.255.255", first: "10.0.0.0", n: 65536},
		// Across the boundary between the two 64-bit halves.
		{in: "2001:db8::ffff:ffff:ffff:ffff-2001:db8:0:1::1", first: "2001:db8::ffff:ffff:ffff:ffff", n: 3},
		{in: "10.0.0.0-10.1.0.0", err: `range "10.0.0.0-10.1.0.0" holds more than 65536 addresses`},
		{in: "2001:db8::1-2001:db9::", err: `range "2001:db8::1-2001:db9::" holds more than 65536 addresses`},
		{in: "10.0.0.2-10.0.0.1", err: `range "10.0.0.2-10.0.0.1" runs backwards: 10.0.0.2 is after 10.0.0.1`},
		{in: "10.0.0.1-", err: `range "10.0.0.1-": "" is not an IPv4 or IPv6 address`},
		{in: "10.0.0.1-10.0.0.2-10.0.0.3", err: `range "10.0.0.1-10.0.0.2-10.0.0.3": "10.0.0.2-10.0.0.3" is not an IPv4 or IPv6 address`},
		{in: "fe80::1%eth0", err: `"fe80::1%eth0" carries a zone; a mobile address has none`},
		{in: "0.0.0.0", err: `0.0.0.0 is not a unicast address`},
		{in: "224.0.0.1", err: `224.0.0.1 is not a unicast address`},
		{in: "10.0.0.0/24", err: `"10.0.0.0/24" is not an IPv4 or IPv6 address`},
	} {
		first, n, err := parseAddrs(tc.in)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%q: got error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || first != netip.MustParseAddr(tc.first) || n != tc.n {
			t.Errorf("%q: got %v, %d, %v; want %s, %d", tc.in, first, n, err, tc.first, tc.n)
		}
	}
}

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"1048576", 1 << 20}, {"1MiB", 1 << 20}, {"512KiB", 512 << 10}, {"2 GiB", 2 << 30},
		{"1MB", 1e6}, {"3KB", 3000}, {"1GB", 1e9}, {"100B", 100},
	} {
		if got, err := parseSize(tc.in); err != nil || got != tc.want {
			t.Errorf("%q: got %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "0", "-1MiB", "1.5MiB", "MiB", "1TiB", "9223372036854775807KiB"} {
		if got, err := parseSize(in); err == nil {
			t.Errorf("%q: got %d, want an error", in, got)
		}
	}
}
