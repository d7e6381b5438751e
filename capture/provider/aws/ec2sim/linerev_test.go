package ec2sim

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// The etcd line's token: X-Ipfence-Line-Revision is recorded with each
// mutation, one per address when it is a list; absent means none; a
// value that is not a positive decimal (or one per address), or the
// header sent twice, is refused naming the header, changing nothing.
func TestLineRevisionHeader(t *testing.T) {
	e := newEnv(t, Config{})
	const (
		one  = "Action=AssignPrivateIpAddresses&Version=2016-11-15&NetworkInterfaceId=eni-a&PrivateIpAddress.1=10.0.0.7"
		two  = "Action=AssignPrivateIpAddresses&Version=2016-11-15&NetworkInterfaceId=eni-b&PrivateIpAddress.1=10.0.0.8&PrivateIpAddress.2=10.0.0.9"
		none = "Action=AssignPrivateIpAddresses&Version=2016-11-15&NetworkInterfaceId=eni-b&PrivateIpAddress.1=10.0.0.10"
		fwd  = "Action=ModifyNetworkInterfaceAttribute&Version=2016-11-15&NetworkInterfaceId=eni-a&SourceDestCheck.Value=false"
	)
	before := fingerprint(t, e.s)
	for _, bad := range []struct{ form, rev, why string }{
		{one, "0", "It must be a positive decimal etcd revision"},
		{one, "-2", "It must be a positive decimal etcd revision"},
		{one, "+2", "It must be a positive decimal etcd revision"},
		{one, "x", "It must be a positive decimal etcd revision"},
		{one, "3,", "It must be a positive decimal etcd revision"},
		{two, "3,4,5", "Give one revision, or one per address (2)."},
		{fwd, "3,4", "Only calls naming several addresses take lists."},
	} {
		status, body := rawCall(t, e.srv.URL, "POST", bad.form, map[string]string{HeaderEpoch: "3", HeaderLineRevision: bad.rev})
		if status != 400 || !strings.Contains(body, "for parameter "+HeaderLineRevision+" is invalid. "+bad.why) {
			t.Errorf("%s with %q: %d %s", bad.form, bad.rev, status, body)
		}
	}
	// Twice.
	req, err := http.NewRequest("POST", e.srv.URL+"/", strings.NewReader(one))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKID/20260102/us-east-1/ec2/aws4_request, SignedHeaders=host, Signature=0")
	req.Header.Add(HeaderLineRevision, "3")
	req.Header.Add(HeaderLineRevision, "4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(body), "Value (3,4) for parameter "+HeaderLineRevision+" is invalid. Send the header once.") {
		t.Errorf("the header twice: %d %s", resp.StatusCode, body)
	}
	if after := fingerprint(t, e.s); after != before {
		t.Fatalf("refused calls changed the simulator:\n%s\n%s", before, after)
	}
	for _, c := range []struct{ form, epoch, rev string }{{one, "3", "41"}, {two, "5,4", "45,44"}, {none, "6", ""}, {fwd, "3", "41"}} {
		h := map[string]string{HeaderEpoch: c.epoch}
		if c.rev != "" {
			h[HeaderLineRevision] = c.rev
		}
		if status, body := rawCall(t, e.srv.URL, "POST", c.form, h); status != 200 {
			t.Fatalf("%s: %d %s", c.form, status, body)
		}
	}
	got := map[string]int64{}
	for _, m := range e.s.Mutations() {
		got[string(m.Call)+" "+m.Address.String()] = m.LineRevision
	}
	want := map[string]int64{
		"assign-secondary-ip 10.0.0.7": 41, "assign-secondary-ip 10.0.0.8": 45, "assign-secondary-ip 10.0.0.9": 44,
		"assign-secondary-ip 10.0.0.10": 0, "ensure-forwarding-enabled invalid IP": 41,
	}
	if len(got) != len(want) {
		t.Fatalf("mutations %v, want %v", got, want)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: line revision %d, want %d (all: %v)", k, got[k], w, got)
		}
	}
}
