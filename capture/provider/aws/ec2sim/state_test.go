package ec2sim

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/ipfence/ipfence/internal/testonly/handclock"
)

func TestStatePersistsAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	clock := handclock.New(t0)
	first := newEnv(t, Config{NICs: nicIDs, StateDir: dir, Clock: clock.Now, Seed: 5})
	first.mustAssign("eni-a", false, ip7)
	if _, err := first.ec2.ModifyNetworkInterfaceAttribute(t.Context(), &ec2.ModifyNetworkInterfaceAttributeInput{
		NetworkInterfaceId: aws.String("eni-b"), SourceDestCheck: &types.AttributeBooleanValue{Value: aws.Bool(false)},
	}, headers("9", "fwd-b")); err != nil {
		t.Fatal(err)
	}
	faults := Faults{
		ActionLatency: map[string]Duration{actDescribe: Duration(time.Millisecond)},
		Errors:        map[string][]ErrorRate{actUnassign: {{Code: CodeThrottled, Rate: 0.5}}},
		RemapDelay:    Duration(10 * time.Second),
	}
	adminDo(t, first.srv.URL, http.MethodPut, "/admin/faults", faults, nil)
	clock.Advance(time.Second)
	// A move acknowledged but not visible when the simulator stops.
	if _, err := first.ec2.AssignPrivateIpAddresses(t.Context(), &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String("eni-c"), PrivateIpAddresses: []string{"10.0.0.7"}, AllowReassignment: aws.Bool(true),
	}, headers("10", "move")); err != nil {
		t.Fatal(err)
	}
	adminDo(t, first.srv.URL, http.MethodPost, "/admin/pause", nil, nil)
	before := fingerprint(t, first.s)
	first.srv.Close()

	// Nothing but the state file is left in the directory: each save
	// replaced it whole.
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != StateFile {
		t.Fatalf("state directory holds %v, want only %s", entries, StateFile)
	}

	// A restart with no NICs on the command line takes the saved ones.
	second := newEnv(t, Config{StateDir: dir, Clock: clock.Now, Seed: 5})
	if after := fingerprint(t, second.s); after != before {
		t.Fatalf("state after restart:\n%s\nwant\n%s", after, before)
	}
	if !slices.Equal(second.s.NICs(), first.s.NICs()) {
		t.Fatalf("NICs after restart = %+v, want %+v", second.s.NICs(), first.s.NICs())
	}
	// The pause survived, the remap delay too: resume, and the queued
	// move applies at its own time.
	adminDo(t, second.srv.URL, http.MethodPost, "/admin/resume", nil, nil)
	clock.Advance(9999 * time.Millisecond)
	if got := placement(second.s); got[0] != "eni-a:10.0.0.7 check=true" {
		t.Fatalf("before the move's apply time: %q", got)
	}
	clock.Advance(time.Millisecond)
	want := []string{"eni-a: check=true", "eni-b: check=false", "eni-c:10.0.0.7 check=true"}
	if got := placement(second.s); !slices.Equal(got, want) {
		t.Fatalf("at the move's apply time: %q, want %q", got, want)
	}
	ms := second.s.Mutations()
	if len(ms) != 3 || ms[2].From != "eni-a" || ms[2].Epoch != 10 || ms[2].IdempotencyKey != "move" || !ms[2].Time.Equal(t0.Add(11*time.Second)) {
		t.Fatalf("mutations = %+v, want the move from eni-a at epoch 10 at +11s last", ms)
	}
	// The saved file says so too, once the next change saves it.
	second.mustAssign("eni-a", false, ip8)
	var st stateFile
	data, err := os.ReadFile(filepath.Join(dir, StateFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	if st.Version != 1 || len(st.Provider.Mutations) != 3 || len(st.Provider.Queue) != 1 || st.Paused {
		t.Fatalf("state file: version %d, %d mutations, %d queued, paused %t; want 1, 3, 1 (the new assign, behind the remap delay), false",
			st.Version, len(st.Provider.Mutations), len(st.Provider.Queue), st.Paused)
	}
}

func TestStateRefused(t *testing.T) {
	saved := func(t *testing.T) string {
		t.Helper()
		dir := t.TempDir()
		e := newEnv(t, Config{NICs: nicIDs, StateDir: dir})
		e.mustAssign("eni-a", false, ip7)
		return dir
	}
	edit := func(t *testing.T, dir string, f func(string) string) {
		t.Helper()
		path := filepath.Join(dir, StateFile)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(f(string(data))), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name string
		cfg  Config
		edit func(string) string
		want string
	}{
		{"other NICs", Config{NICs: []string{"eni-a", "eni-b"}}, nil, "it holds NICs [eni-a eni-b eni-c], not [eni-a eni-b]"},
		{"other subnet", Config{Subnet: netip.MustParsePrefix("10.1.0.0/24")}, nil, "it holds subnet 10.0.0.0/24, not 10.1.0.0/24"},
		{"not JSON", Config{}, func(string) string { return "{\"version\": 1, " }, "not a cloudsim state file: unexpected EOF"},
		{"unknown field", Config{}, func(s string) string { return strings.Replace(s, `"version"`, `"versio"`, 1) }, `unknown field "versio"`},
		{"other version", Config{}, func(s string) string { return strings.Replace(s, `"version": 1`, `"version": 2`, 1) }, "version 2, want 1"},
		{"secondary on a primary", Config{}, func(s string) string { return strings.Replace(s, `"10.0.0.7"`, `"10.0.0.5"`, 1) }, "NIC eni-a: 10.0.0.5 is the primary IP of eni-b"},
		{"secondary outside", Config{}, func(s string) string { return strings.Replace(s, `"10.0.0.7"`, `"10.9.0.7"`, 1) }, "NIC eni-a: 10.9.0.7 is outside the subnet"},
		{"trailing data", Config{}, func(s string) string { return s + "{}" }, "trailing data"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := saved(t)
			if tc.edit != nil {
				edit(t, dir, tc.edit)
			}
			tc.cfg.StateDir = dir
			_, err := New(tc.cfg)
			path := filepath.Join(dir, StateFile)
			if err == nil || !strings.Contains(err.Error(), "state file "+path) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, want an error naming %s with %q", err, path, tc.want)
			}
		})
	}
}

func TestNewRefusesConfig(t *testing.T) {
	cases := []struct {
		cfg   Config
		field string
		want  string
	}{
		{Config{}, "NICs", "cloudsim: no NICs"},
		{Config{NICs: []string{"eni-a", "eni-a"}}, "NICs", `NIC id "eni-a" appears twice`},
		{Config{NICs: []string{"eni a"}}, "NICs", `NIC id "eni a": spaces, commas and control characters are not allowed`},
		{Config{NICs: []string{""}}, "NICs", "empty NIC id"},
		{Config{NICs: nicIDs, Subnet: netip.MustParsePrefix("10.0.0.1/24")}, "Subnet", "subnet 10.0.0.1/24 is not a network address (did you mean 10.0.0.0/24?)"},
		{Config{NICs: nicIDs, Subnet: netip.MustParsePrefix("10.0.0.0/8")}, "Subnet", "the prefix length must be /16 to /28"},
		{Config{NICs: nicIDs, Subnet: netip.MustParsePrefix("fd00::/64")}, "Subnet", "subnet fd00::/64 is not an IPv4 prefix"},
		{Config{NICs: []string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12"}, Subnet: netip.MustParsePrefix("10.0.0.0/28")}, "NICs", "12 NICs do not fit in subnet 10.0.0.0/28, which has room for 11"},
		{Config{NICs: nicIDs, StateDir: "/dev/null/x"}, "StateDir", "cloudsim: state directory: mkdir /dev/null"},
	}
	for _, tc := range cases {
		_, err := New(tc.cfg)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want a ConfigError about %s with %q", tc.cfg, err, tc.field, tc.want)
		}
	}
}

// TestSaveFailureIsInternalError: a change the simulator made but could not
// save is answered with InternalError, whose outcome the caller must treat
// as unknown.
func TestSaveFailureIsInternalError(t *testing.T) {
	// Root writes into read-only directories, so the state file is
	// replaced with a non-empty directory, which no one can rename over.
	dir := t.TempDir()
	e := newEnv(t, Config{NICs: nicIDs, StateDir: dir})
	path := filepath.Join(dir, StateFile)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(path, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	expectAPIError(t, e.assign("eni-a", false, ip7), 500, "InternalError", "An internal error has occurred")
	status, body := adminRaw(t, e.srv.URL, http.MethodPost, "/admin/pause", nil)
	if status != http.StatusInternalServerError || !strings.Contains(body, "cloudsim: saving the state") {
		t.Fatalf("POST /admin/pause with an unwritable state = %d %s, want 500 naming the save", status, body)
	}
}
