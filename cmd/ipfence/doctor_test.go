//go:build linux

package main

import (
	"encoding/json"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/ipfence/ipfence/capture/provider"
	"github.com/ipfence/ipfence/capture/provider/onprem"
	"github.com/ipfence/ipfence/internal/cli"
	"github.com/ipfence/ipfence/internal/testonly/l2labtest"
	"github.com/ipfence/ipfence/internal/testonly/testenv"
	"github.com/ipfence/ipfence/jepsen/l2lab"
)

// TestDoctorUsage checks the refusals that need neither root nor a LAN.
func TestDoctorUsage(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no flags", nil, "--address is required"},
		{"no interface", []string{"--address", "10.0.0.1"}, "--interface is required"},
		{"not an address", []string{"--address", "nope", "--interface", "lo"}, `--address: "nope" is not an IPv4 address`},
		{"IPv6", []string{"--address", "fd00::1", "--interface", "lo"}, `--address: "fd00::1" is not an IPv4 address`},
		{"missing interface", []string{"--address", "10.0.0.1", "--interface", "ipfence-none0"}, `--interface: no interface "ipfence-none0"`},
		{"count", []string{"--address", "10.0.0.1", "--interface", "lo", "--count", "0"}, "--count: 0"},
		{"timeout", []string{"--address", "10.0.0.1", "--interface", "lo", "--timeout", "-1s"}, "--timeout: -1s"},
		{"argument", []string{"--address", "10.0.0.1", "--interface", "lo", "extra"}, `unexpected argument "extra"`},
		{"unknown flag", []string{"--adress", "10.0.0.1"}, "ipfence doctor: --adress: no such flag; did you mean --address?"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(append([]string{"doctor"}, tc.args...)...)
			if code != cli.ExitError || stdout != "" || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d and %q", code, stdout, stderr, cli.ExitError, tc.want)
			}
		})
	}
	if code, stdout, stderr := runCLI("doctor", "--help"); code != cli.ExitValid || stderr != "" || !strings.Contains(stdout, "Usage: ipfence doctor") {
		t.Fatalf("--help: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// TestDoctorLAN runs the real binary in the observer of a two-host lab
// against no, one and two hosts answering for the address.
func TestDoctorLAN(t *testing.T) {
	l := l2labtest.New(t, l2lab.Options{Hosts: 2})
	bin := testenv.Operator(t)
	drivers := map[string]*onprem.Driver{}
	for _, h := range l.Hosts() {
		err := l.Do(h, func() error {
			d, err := onprem.New(onprem.Options{LAN: l.LANDevice(), WorkloadDevice: l.WorkloadDevice(h), GARPRepeatAfter: -1})
			drivers[h] = d
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { drivers[h].Close() })
	}
	hold := func(hosts ...string) {
		t.Helper()
		r := provider.Request{NIC: l.LANDevice(), Address: l.Address()}
		for _, h := range l.Hosts() {
			var err error
			if slices.Contains(hosts, h) {
				err = drivers[h].Assign(t.Context(), r, false)
			} else {
				err = drivers[h].Unassign(t.Context(), r)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	doctor := func(args ...string) (int, string, string) {
		t.Helper()
		args = append([]string{"doctor", "--timeout", "300ms"}, args...)
		cmd := l.Command(l.Observer(), bin, args...)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("running %v: %v", cmd.Args, err)
		}
		return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
	}
	a := l.Address().String()
	h1, h2 := l.MAC("h1").String(), l.MAC("h2").String()
	pair := []string{h1, h2}
	slices.Sort(pair)

	code, out, errOut := doctor("--address", a, "--interface", "eth0")
	if code != cli.ExitUnknown || out != "no responder for "+a+" on eth0\n" {
		t.Fatalf("nobody holds: exit %d, %q, %q", code, out, errOut)
	}

	hold("h1")
	code, out, errOut = doctor("--address", a, "--interface", "eth0")
	if code != cli.ExitValid || out != "1 responder: "+h1+"\n" {
		t.Fatalf("h1 holds: exit %d, %q, %q", code, out, errOut)
	}

	hold("h1", "h2")
	code, out, errOut = doctor("--address", a, "--interface", "eth0", "--count", "2")
	if want := "SPLIT BRAIN: 2 responders for " + a + " on eth0: " + pair[0] + ", " + pair[1] + "\n"; code != cli.ExitInvalid || out != want {
		t.Fatalf("both hold: exit %d, %q, %q; want %q", code, out, errOut, want)
	}
	code, out, errOut = doctor("--address", a, "--interface", "eth0", "--json")
	var res doctorResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != cli.ExitInvalid {
		t.Fatalf("--json, both hold: exit %d, %q (%v), %q", code, out, err, errOut)
	}
	if want := (doctorResult{Address: a, Interface: "eth0", Responders: pair, SplitBrain: true}); res.Address != want.Address ||
		res.Interface != want.Interface || !slices.Equal(res.Responders, want.Responders) || !res.SplitBrain {
		t.Fatalf("--json, both hold: %+v, want %+v", res, want)
	}

	hold()
	code, out, _ = doctor("--address", a, "--interface", "eth0", "--json")
	if code != cli.ExitUnknown || strings.TrimSpace(out) != `{"address":"`+a+`","interface":"eth0","responders":[],"split_brain":false}` {
		t.Fatalf("--json, nobody holds: exit %d, %q", code, out)
	}

	// An interface that exists but cannot send ARP for lack of an IPv4
	// address: a system error that names it.
	if b, err := l.Command(l.Observer(), "ip", "link", "add", "bare0", "type", "veth", "peer", "name", "bare1").CombinedOutput(); err != nil {
		t.Fatalf("ip link add bare0: %v: %s", err, b)
	}
	code, out, errOut = doctor("--address", a, "--interface", "bare0")
	if code != cli.ExitError || out != "" || !strings.Contains(errOut, "bare0 has no IPv4 address") {
		t.Fatalf("bare interface: exit %d, %q, %q", code, out, errOut)
	}
}
