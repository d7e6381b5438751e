package ec2sim

import (
	"encoding/xml"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/ec2query"

	"github.com/ipfence/ipfence/internal/testonly/handclock"
)

// queryCorpus is a seed corpus for both fuzz tests: each action well
// formed, and the usual ways to get one wrong.
var queryCorpus = []string{
	"Action=AssignPrivateIpAddresses&Version=2016-11-15&NetworkInterfaceId=eni-a&PrivateIpAddress.1=10.0.0.7&PrivateIpAddress.2=10.0.0.8&AllowReassignment=true",
	"Action=AssignPrivateIpAddresses&Version=2016-11-15&NetworkInterfaceId=eni-b&PrivateIpAddress.1=10.0.0.7",
	"Action=AssignPrivateIpAddresses&Version=2016-11-15&NetworkInterfaceId=eni-b&PrivateIpAddress.1=10.0.0.4&DryRun=true",
	"Action=UnassignPrivateIpAddresses&Version=2016-11-15&NetworkInterfaceId=eni-a&PrivateIpAddress.1=10.0.0.7",
	"Action=DescribeNetworkInterfaces&Version=2016-11-15&NetworkInterfaceId.1=eni-a&NetworkInterfaceId.2=eni-c",
	"Action=DescribeNetworkInterfaces&Version=2016-11-15&Filter.1.Name=addresses.private-ip-address&Filter.1.Value.1=10.0.0.7&Filter.2.Name=network-interface-id&Filter.2.Value.1=eni-a&Filter.2.Value.2=eni-b",
	"Action=DescribeNetworkInterfaces&Version=2016-11-15&MaxResults=5&NextToken=1",
	"Action=ModifyNetworkInterfaceAttribute&Version=2016-11-15&NetworkInterfaceId=eni-c&SourceDestCheck.Value=false",
	"Action=DescribeNetworkInterfaceAttribute&Version=2016-11-15&NetworkInterfaceId=eni-c&Attribute=sourceDestCheck",
	"Action=AssignPrivateIpAddresses&Version=2016-11-15&NetworkInterfaceId=eni-a&PrivateIpAddress.1=10.0.0.7&PrivateIpAddress.1=10.0.0.8",
	"Action=AssignPrivateIpAddresses&Version=2016-11-15&NetworkInterfaceId=eni-a&PrivateIpAddress.1=10.0.0.7&PrivateIpAddress.2=nope",
	"Action=AssignPrivateIpAddresses&Version=2016-11-15&NetworkInterfaceId=eni-a&PrivateIpAddress.1048577=10.0.0.7",
	"Action=DescribeNetworkInterfaces&Version=2016-11-15&Filter.1.Value.1=x&Filter.x.Name=y",
	"Action=Nope&Version=2016-11-15",
	"Version=2016-11-15",
	"Action=DescribeNetworkInterfaces",
	"Action=DescribeNetworkInterfaces&Version=1",
	"%zz",
	"",
}

// FuzzDecodeQuery feeds arbitrary forms to the Query decoder: it never
// panics, refuses with a 400 and a known code, and what it accepts is a
// well-formed call of a served action.
func FuzzDecodeQuery(f *testing.F) {
	for _, s := range queryCorpus {
		f.Add(s)
	}
	codes := []string{"MissingParameter", "InvalidParameterValue", "InvalidAction", "UnknownParameter"}
	f.Fuzz(func(t *testing.T, raw string) {
		// A form that does not parse whole still yields the pairs that
		// did, which is what a lenient client could send.
		form, _ := url.ParseQuery(raw)
		q, err := decodeQuery(form)
		again, err2 := decodeQuery(form)
		if !reflect.DeepEqual(q, again) || !reflect.DeepEqual(err, err2) {
			t.Fatalf("decodeQuery is not deterministic: %+v %v then %+v %v", q, err, again, err2)
		}
		if err != nil {
			if err.status != http.StatusBadRequest || !slices.Contains(codes, err.code) || err.message == "" || len(err.message) > 512 {
				t.Fatalf("refusal %+v: want 400 with a known code and a short message", err)
			}
			return
		}
		if !knownAction(q.action) || form.Get("Version") != APIVersion {
			t.Fatalf("accepted action %q version %q", q.action, form.Get("Version"))
		}
		switch q.action {
		case actAssign, actUnassign:
			if q.nic == "" || len(q.addrs) == 0 {
				t.Fatalf("accepted %s without a NIC or an address: %+v", q.action, q)
			}
			seen := map[netip.Addr]bool{}
			for _, a := range q.addrs {
				if !a.Is4() || seen[a] {
					t.Fatalf("accepted %s with address %v: %+v", q.action, a, q)
				}
				seen[a] = true
			}
		case actDescribe:
			for _, fl := range q.filters {
				if _, ok := filterValues[fl.name]; !ok || len(fl.values) == 0 {
					t.Fatalf("accepted filter %+v", fl)
				}
			}
			if q.maxResults != 0 && (q.maxResults < minMaxResults || q.maxResults > maxMaxResults) || q.offset < 0 {
				t.Fatalf("accepted MaxResults %d NextToken %d", q.maxResults, q.offset)
			}
		case actModify:
			if q.nic == "" {
				t.Fatalf("accepted %s without a NIC", q.action)
			}
		case actDescribeAttr:
			if q.nic == "" || q.attribute != "sourceDestCheck" {
				t.Fatalf("accepted %s of %q on %q", q.action, q.attribute, q.nic)
			}
		}
	})
}

// FuzzHandler sends arbitrary forms and headers to the whole simulator,
// which keeps its state from one input to the next: it never panics, every
// error it answers is one the SDK can read, every success is XML, and an
// error never changes anything.
func FuzzHandler(f *testing.F) {
	for i, s := range queryCorpus {
		f.Add(s, i%2 == 0, true, "7", "key", "")
	}
	f.Add(queryCorpus[7], false, true, "3", "k", "10.0.0.7")
	f.Add(queryCorpus[7], false, true, "3", "k", "10.0.0")
	f.Add(queryCorpus[0], false, true, "x", "", "")
	f.Add(queryCorpus[0], false, false, "", "", "")
	s, err := New(Config{NICs: nicIDs, Clock: handclock.New(t0).Now})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, form string, get, auth bool, epoch, key, addr string) {
		var r *http.Request
		if get {
			r = httptest.NewRequest(http.MethodGet, "/", nil)
			r.URL.RawQuery = form
		} else {
			r = httptest.NewRequest(http.MethodPost, "/", strings.NewReader(form))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		if auth {
			r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Signature=0")
		}
		if epoch != "" {
			r.Header[HeaderEpoch] = []string{epoch}
		}
		if key != "" {
			r.Header[HeaderIdempotencyKey] = []string{key}
		}
		if addr != "" {
			r.Header[HeaderAddress] = []string{addr}
		}
		before := fingerprint(t, s)
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		body := w.Body.String()
		if w.Code == http.StatusOK {
			var doc struct{ XMLName xml.Name }
			if err := xml.Unmarshal([]byte(body), &doc); err != nil || !strings.HasSuffix(doc.XMLName.Local, "Response") {
				t.Fatalf("200 answer is not an EC2 document (%v): %s", err, body)
			}
			return
		}
		ec, err := ec2query.GetErrorResponseComponents(strings.NewReader(body))
		if err != nil || ec.Code == "" || ec.RequestID == "" {
			t.Fatalf("%d answer the SDK cannot read (%v, %+v): %s", w.Code, err, ec, body)
		}
		if after := fingerprint(t, s); after != before {
			t.Fatalf("%d %s changed the simulator:\n%s\n%s", w.Code, ec.Code, before, after)
		}
	})
}

// FuzzDecodeState feeds arbitrary bytes to the state file's reader: it
// never panics, and a model it accepts keeps the simulator's rules.
func FuzzDecodeState(f *testing.F) {
	dir := f.TempDir()
	s, err := New(Config{NICs: nicIDs, StateDir: dir, Clock: handclock.New(t0).Now})
	if err != nil {
		f.Fatal(err)
	}
	st := stamp{epoch: 3, key: "k"}
	_ = s.mutate(func(m *model) error { return m.assign("eni-a", []netip.Addr{ip7, ip8}, false, st) })
	_ = s.mutate(func(m *model) error { return m.setSourceDestCheck("eni-b", false, st) })
	_ = s.SetFaults(Faults{RemapDelay: Duration(1e9), Errors: map[string][]ErrorRate{AnyAction: {{Code: CodeInternal, Rate: 0.1}}}})
	_ = s.mutate(func(m *model) error { return m.assign("eni-c", []netip.Addr{ip7}, true, st) })
	data, err := os.ReadFile(filepath.Join(dir, StateFile))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte(`{"version":1,"subnet":"10.0.0.0/28","nics":[{"id":"a","mac":"m","primaryIp":"10.0.0.4","instanceId":"i"}],"provider":{"nics":[{"name":"a","addresses":["10.0.0.4"]}]}}`))
	f.Add([]byte(`{"version":1,"subnet":"10.0.0.0/24","nics":[],"provider":{}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := decodeState(data)
		if err != nil {
			return
		}
		m, err := st.restore(handclock.New(t0).Now)
		if err != nil {
			return
		}
		where := map[netip.Addr]string{}
		for _, n := range m.nics {
			where[n.PrimaryIP] = n.ID
		}
		for _, n := range m.states() {
			for _, a := range n.SecondaryIPs {
				if h, ok := where[a]; ok || !m.subnet.Contains(a) {
					t.Fatalf("accepted %s on %s: also on %q, or outside %s", a, n.ID, h, m.subnet)
				}
				where[a] = n.ID
			}
		}
	})
}
