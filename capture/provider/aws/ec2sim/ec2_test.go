package ec2sim

import (
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/provider"
)

func TestNewNICsAreDeterministic(t *testing.T) {
	got := newNICs([]string{"eni-a", "eni-b"}, DefaultSubnet)
	want := []NIC{
		{ID: "eni-a", MAC: got[0].MAC, PrimaryIP: primaryA, InstanceID: got[0].InstanceID},
		{ID: "eni-b", MAC: got[1].MAC, PrimaryIP: primaryB, InstanceID: got[1].InstanceID},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("newNICs = %+v, want primaries %s and %s", got, primaryA, primaryB)
	}
	// The same id gets the same MAC and instance wherever it is listed.
	again := newNICs([]string{"eni-z", "eni-a"}, netip.MustParsePrefix("192.168.8.0/28"))
	if again[1].MAC != got[0].MAC || again[1].InstanceID != got[0].InstanceID || again[1].PrimaryIP != netip.MustParseAddr("192.168.8.5") {
		t.Fatalf("eni-a listed second in 192.168.8.0/28 = %+v, want MAC %s, instance %s, primary 192.168.8.5", again[1], got[0].MAC, got[0].InstanceID)
	}
	for _, n := range got {
		if len(n.MAC) != 17 || !strings.HasPrefix(n.MAC, "02:") || len(n.InstanceID) != 19 || !strings.HasPrefix(n.InstanceID, "i-0") {
			t.Fatalf("NIC %s: MAC %q, instance %q: want 02:xx:xx:xx:xx:xx and i- with 17 hex digits", n.ID, n.MAC, n.InstanceID)
		}
	}
	if got[0].MAC == got[1].MAC || got[0].InstanceID == got[1].InstanceID {
		t.Fatalf("two NICs share a MAC or an instance: %+v", got)
	}
}

func TestDescribeNetworkInterfaces(t *testing.T) {
	e := newEnv(t, Config{})
	e.mustAssign("eni-a", false, ip8, ip7)
	out, err := e.ec2.DescribeNetworkInterfaces(t.Context(), &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{"eni-a"}})
	if err != nil {
		t.Fatalf("DescribeNetworkInterfaces = %v", err)
	}
	if len(out.NetworkInterfaces) != 1 {
		t.Fatalf("got %d NICs, want 1", len(out.NetworkInterfaces))
	}
	n := out.NetworkInterfaces[0]
	id := e.s.NICs()[0]
	if aws.ToString(n.NetworkInterfaceId) != "eni-a" || aws.ToString(n.MacAddress) != id.MAC ||
		aws.ToString(n.PrivateIpAddress) != "10.0.0.4" || !aws.ToBool(n.SourceDestCheck) ||
		n.Status != types.NetworkInterfaceStatusInUse || n.Attachment == nil ||
		aws.ToString(n.Attachment.InstanceId) != id.InstanceID || n.Attachment.Status != types.AttachmentStatusAttached ||
		aws.ToString(n.PrivateDnsName) != "ip-10-0-0-4.ec2.internal" || !strings.HasPrefix(aws.ToString(n.SubnetId), "subnet-0") {
		t.Fatalf("NIC = %+v (attachment %+v), want eni-a with MAC %s, primary 10.0.0.4, source/dest check on, in use, attached to %s",
			n, n.Attachment, id.MAC, id.InstanceID)
	}
	var ips []string
	for _, p := range n.PrivateIpAddresses {
		ips = append(ips, aws.ToString(p.PrivateIpAddress)+map[bool]string{true: " primary", false: ""}[aws.ToBool(p.Primary)])
	}
	if want := []string{"10.0.0.4 primary", "10.0.0.7", "10.0.0.8"}; !slices.Equal(ips, want) {
		t.Fatalf("private IPs = %q, want %q", ips, want)
	}

	// No ids and no filters: every NIC, in id order.
	all, err := e.ec2.DescribeNetworkInterfaces(t.Context(), &ec2.DescribeNetworkInterfacesInput{})
	if err != nil {
		t.Fatal(err)
	}
	if got := nicIDsOf(all.NetworkInterfaces); !slices.Equal(got, nicIDs) {
		t.Fatalf("all NICs = %v, want %v", got, nicIDs)
	}
}

func nicIDsOf(ns []types.NetworkInterface) []string {
	out := []string{}
	for _, n := range ns {
		out = append(out, aws.ToString(n.NetworkInterfaceId))
	}
	return out
}

func TestDescribeFilters(t *testing.T) {
	e := newEnv(t, Config{})
	e.mustAssign("eni-a", false, ip7)
	e.mustAssign("eni-b", false, ip8)
	f := func(name string, values ...string) types.Filter {
		return types.Filter{Name: aws.String(name), Values: values}
	}
	cases := []struct {
		name    string
		in      ec2.DescribeNetworkInterfacesInput
		want    []string
		wantTok string
	}{
		{"secondary address", ec2.DescribeNetworkInterfacesInput{Filters: []types.Filter{f("addresses.private-ip-address", "10.0.0.8")}}, []string{"eni-b"}, ""},
		{"primary address under addresses", ec2.DescribeNetworkInterfacesInput{Filters: []types.Filter{f("addresses.private-ip-address", "10.0.0.6")}}, []string{"eni-c"}, ""},
		{"values are alternatives", ec2.DescribeNetworkInterfacesInput{Filters: []types.Filter{f("addresses.private-ip-address", "10.0.0.7", "10.0.0.8")}}, []string{"eni-a", "eni-b"}, ""},
		{"free address", ec2.DescribeNetworkInterfacesInput{Filters: []types.Filter{f("addresses.private-ip-address", "10.0.0.9")}}, []string{}, ""},
		{"network-interface-id", ec2.DescribeNetworkInterfacesInput{Filters: []types.Filter{f("network-interface-id", "eni-c", "eni-x")}}, []string{"eni-c"}, ""},
		{"filters all hold", ec2.DescribeNetworkInterfacesInput{Filters: []types.Filter{
			f("network-interface-id", "eni-a", "eni-b"), f("addresses.private-ip-address", "10.0.0.7"),
		}}, []string{"eni-a"}, ""},
		{"private-ip-address is the primary only", ec2.DescribeNetworkInterfacesInput{Filters: []types.Filter{f("private-ip-address", "10.0.0.7", "10.0.0.5")}}, []string{"eni-b"}, ""},
		{"ids and a filter", ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{"eni-b", "eni-c"}, Filters: []types.Filter{f("addresses.private-ip-address", "10.0.0.7", "10.0.0.8")}}, []string{"eni-b"}, ""},
		{"first page", ec2.DescribeNetworkInterfacesInput{MaxResults: aws.Int32(5)}, []string{"eni-a", "eni-b", "eni-c"}, ""},
		{"a page past the end", ec2.DescribeNetworkInterfacesInput{MaxResults: aws.Int32(5), NextToken: aws.String("3")}, []string{}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := e.ec2.DescribeNetworkInterfaces(t.Context(), &tc.in)
			if err != nil {
				t.Fatalf("DescribeNetworkInterfaces = %v", err)
			}
			if got := nicIDsOf(out.NetworkInterfaces); !slices.Equal(got, tc.want) || aws.ToString(out.NextToken) != tc.wantTok {
				t.Fatalf("got %v (next %q), want %v (next %q)", got, aws.ToString(out.NextToken), tc.want, tc.wantTok)
			}
		})
	}

	_, err := e.ec2.DescribeNetworkInterfaces(t.Context(), &ec2.DescribeNetworkInterfacesInput{Filters: []types.Filter{f("tag:Name", "x")}})
	expectAPIError(t, err, 400, "InvalidParameterValue", "Value (tag:Name) for parameter Filter.1.Name is invalid. The filter 'tag:Name' is invalid.")
	_, err = e.ec2.DescribeNetworkInterfaces(t.Context(), &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{"eni-a", "eni-x"}})
	expectAPIError(t, err, 400, "InvalidNetworkInterfaceID.NotFound", "The networkInterface ID 'eni-x' does not exist")
	_, err = e.ec2.DescribeNetworkInterfaces(t.Context(), &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{"eni-y", "eni-a", "eni-x"}})
	expectAPIError(t, err, 400, "InvalidNetworkInterfaceID.NotFound", "The networkInterface IDs 'eni-y, eni-x' do not exist")
}

// TestDescribePaginator pages through the NICs with the SDK's own
// paginator, which sends NextToken back as it got it.
func TestDescribePaginator(t *testing.T) {
	ids := []string{"eni-1", "eni-2", "eni-3", "eni-4", "eni-5", "eni-6", "eni-7"}
	e := newEnv(t, Config{NICs: ids})
	pages := ec2.NewDescribeNetworkInterfacesPaginator(e.ec2, &ec2.DescribeNetworkInterfacesInput{MaxResults: aws.Int32(5)})
	var got []string
	var sizes []int
	for pages.HasMorePages() {
		out, err := pages.NextPage(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, nicIDsOf(out.NetworkInterfaces)...)
		sizes = append(sizes, len(out.NetworkInterfaces))
	}
	if !slices.Equal(got, ids) || !slices.Equal(sizes, []int{5, 2}) {
		t.Fatalf("pages of %v = %v, want %v in pages of [5 2]", sizes, got, ids)
	}
}

func TestAssignElsewhere(t *testing.T) {
	e := newEnv(t, Config{})
	e.mustAssign("eni-a", false, ip7)
	before := fingerprint(t, e.s)

	// Without reassignment: refused whole, even for the free address
	// listed before the taken one.
	err := e.assign("eni-b", false, ip9, ip7)
	expectAPIError(t, err, 400, "InvalidIPAddress.InUse", "Address 10.0.0.7 is in use by eni-a")
	if after := fingerprint(t, e.s); after != before {
		t.Fatalf("a refused assign changed the simulator:\n%s\n%s", before, after)
	}
	// AllowReassignment=false is what the SDK sends; leaving it out is
	// the same.
	_, err = e.ec2.AssignPrivateIpAddresses(t.Context(), &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String("eni-b"), PrivateIpAddresses: []string{"10.0.0.7"},
	})
	expectAPIError(t, err, 400, "InvalidIPAddress.InUse", "Address 10.0.0.7 is in use by eni-a")

	// With reassignment: the address moves atomically.
	e.mustAssign("eni-b", true, ip7, ip9)
	if got, want := placement(e.s), []string{"eni-a: check=true", "eni-b:10.0.0.7,10.0.0.9 check=true", "eni-c: check=true"}; !slices.Equal(got, want) {
		t.Fatalf("placement = %q, want %q", got, want)
	}
	ms := e.s.Mutations()
	want := []provider.Mutation{
		{Time: t0, Call: capture.Assign, NIC: "eni-a", Address: ip7},
		{Time: t0, Call: capture.Assign, NIC: "eni-b", Address: ip7, From: "eni-a"},
		{Time: t0, Call: capture.Assign, NIC: "eni-b", Address: ip9},
	}
	if !slices.Equal(ms, want) {
		t.Fatalf("mutations = %+v, want %+v", ms, want)
	}
	// Assigning again what the NIC holds succeeds and records nothing.
	e.mustAssign("eni-b", false, ip7)
	if n := len(e.s.Mutations()); n != 3 {
		t.Fatalf("a repeated assign recorded a mutation: %d, want 3", n)
	}
}

func TestAssignPrimaryAndSubnet(t *testing.T) {
	e := newEnv(t, Config{})
	before := fingerprint(t, e.s)
	// The NIC's own primary: accepted, nothing changes.
	e.mustAssign("eni-a", false, primaryA)
	if after := fingerprint(t, e.s); after != before {
		t.Fatalf("assigning the NIC's own primary changed the simulator:\n%s\n%s", before, after)
	}
	// Another NIC's primary never moves, reassignment or not.
	expectAPIError(t, e.assign("eni-a", true, primaryB), 400, "InvalidIPAddress.InUse", "Address 10.0.0.5 is in use by eni-b")
	expectAPIError(t, e.assign("eni-a", false, netip.MustParseAddr("10.0.1.5")), 400, "InvalidParameterValue",
		"Address 10.0.1.5 does not fall within the subnet's address range")
	expectAPIError(t, e.assign("eni-a", false, netip.MustParseAddr("10.0.0.255")), 400, "InvalidParameterValue",
		"Address 10.0.0.255 is the network or broadcast address of the subnet")
	expectAPIError(t, e.assign("eni-a", false, netip.MustParseAddr("10.0.0.0")), 400, "InvalidParameterValue",
		"Address 10.0.0.0 is the network or broadcast address of the subnet")
	expectAPIError(t, e.unassign("eni-a", primaryA), 400, "InvalidParameterValue",
		"Address 10.0.0.4 is the primary private IP address of eni-a and cannot be unassigned")
	if after := fingerprint(t, e.s); after != before {
		t.Fatalf("refused calls changed the simulator:\n%s\n%s", before, after)
	}
}

func TestUnassignIsNICScoped(t *testing.T) {
	e := newEnv(t, Config{})
	e.mustAssign("eni-a", false, ip7, ip8)
	before := fingerprint(t, e.s)
	// eni-b does not hold 10.0.0.7: refused, eni-a keeps it.
	expectAPIError(t, e.unassign("eni-b", ip7), 400, "InvalidParameterValue", "Some of the specified addresses are not assigned to interface eni-b")
	// One address of two not on the NIC: refused whole.
	expectAPIError(t, e.unassign("eni-a", ip8, ip9), 400, "InvalidParameterValue", "Some of the specified addresses are not assigned to interface eni-a")
	if after := fingerprint(t, e.s); after != before {
		t.Fatalf("a refused unassign changed the simulator:\n%s\n%s", before, after)
	}
	if err := e.unassign("eni-a", ip8); err != nil {
		t.Fatalf("unassign = %v", err)
	}
	if got, want := placement(e.s)[0], "eni-a:10.0.0.7 check=true"; got != want {
		t.Fatalf("eni-a = %q, want %q", got, want)
	}
	if ms := e.s.Mutations(); len(ms) != 3 || ms[2].Call != capture.Unassign || ms[2].NIC != "eni-a" || ms[2].Address != ip8 {
		t.Fatalf("mutations = %+v, want the unassign of 10.0.0.8 from eni-a last", ms)
	}
}

func TestUnknownNIC(t *testing.T) {
	e := newEnv(t, Config{})
	before := fingerprint(t, e.s)
	const msg = "The networkInterface ID 'eni-x' does not exist"
	expectAPIError(t, e.assign("eni-x", true, ip7), 400, "InvalidNetworkInterfaceID.NotFound", msg)
	expectAPIError(t, e.unassign("eni-x", ip7), 400, "InvalidNetworkInterfaceID.NotFound", msg)
	_, err := e.ec2.ModifyNetworkInterfaceAttribute(t.Context(), &ec2.ModifyNetworkInterfaceAttributeInput{
		NetworkInterfaceId: aws.String("eni-x"), SourceDestCheck: &types.AttributeBooleanValue{Value: aws.Bool(false)},
	})
	expectAPIError(t, err, 400, "InvalidNetworkInterfaceID.NotFound", msg)
	_, err = e.ec2.DescribeNetworkInterfaceAttribute(t.Context(), &ec2.DescribeNetworkInterfaceAttributeInput{
		NetworkInterfaceId: aws.String("eni-x"), Attribute: types.NetworkInterfaceAttributeSourceDestCheck,
	})
	expectAPIError(t, err, 400, "InvalidNetworkInterfaceID.NotFound", msg)
	if after := fingerprint(t, e.s); after != before {
		t.Fatalf("calls on an unknown NIC changed the simulator:\n%s\n%s", before, after)
	}
}

func TestSourceDestCheck(t *testing.T) {
	e := newEnv(t, Config{})
	read := func(nic string) bool {
		t.Helper()
		out, err := e.ec2.DescribeNetworkInterfaceAttribute(t.Context(), &ec2.DescribeNetworkInterfaceAttributeInput{
			NetworkInterfaceId: aws.String(nic), Attribute: types.NetworkInterfaceAttributeSourceDestCheck,
		})
		if err != nil {
			t.Fatalf("DescribeNetworkInterfaceAttribute(%s) = %v", nic, err)
		}
		if aws.ToString(out.NetworkInterfaceId) != nic || out.SourceDestCheck == nil || out.SourceDestCheck.Value == nil {
			t.Fatalf("DescribeNetworkInterfaceAttribute(%s) = %+v, want the NIC's sourceDestCheck", nic, out)
		}
		return *out.SourceDestCheck.Value
	}
	set := func(nic string, check bool) {
		t.Helper()
		_, err := e.ec2.ModifyNetworkInterfaceAttribute(t.Context(), &ec2.ModifyNetworkInterfaceAttributeInput{
			NetworkInterfaceId: aws.String(nic), SourceDestCheck: &types.AttributeBooleanValue{Value: aws.Bool(check)},
		}, headers("4", "fwd"), func(o *ec2.Options) {
			o.APIOptions = append(o.APIOptions, smithyhttp.AddHeaderValue(HeaderAddress, "10.0.0.7"))
		})
		if err != nil {
			t.Fatalf("ModifyNetworkInterfaceAttribute(%s, %t) = %v", nic, check, err)
		}
	}
	if !read("eni-b") {
		t.Fatal("a new NIC's source/dest check is off, want on")
	}
	set("eni-b", false)
	set("eni-b", false) // no change, no record
	if read("eni-b") || !read("eni-a") {
		t.Fatal("after turning eni-b's check off: want eni-b off, eni-a on")
	}
	out, _ := e.ec2.DescribeNetworkInterfaces(t.Context(), &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{"eni-b"}})
	if aws.ToBool(out.NetworkInterfaces[0].SourceDestCheck) {
		t.Fatal("DescribeNetworkInterfaces shows eni-b's check on, want off")
	}
	set("eni-b", true)
	want := []provider.Mutation{
		{Time: t0, Call: capture.EnableForwarding, NIC: "eni-b", Address: ip7, Epoch: 4, IdempotencyKey: "fwd", Enabled: true},
		{Time: t0, Call: capture.DisableForwarding, NIC: "eni-b", Address: ip7, Epoch: 4, IdempotencyKey: "fwd"},
	}
	if got := e.s.Mutations(); !slices.Equal(got, want) {
		t.Fatalf("mutations = %+v, want %+v", got, want)
	}
	// Without the address header the record has no address; a malformed
	// one is refused.
	if _, err := e.ec2.ModifyNetworkInterfaceAttribute(t.Context(), &ec2.ModifyNetworkInterfaceAttributeInput{
		NetworkInterfaceId: aws.String("eni-c"), SourceDestCheck: &types.AttributeBooleanValue{Value: aws.Bool(false)},
	}); err != nil {
		t.Fatal(err)
	}
	if ms := e.s.Mutations(); len(ms) != 3 || ms[2].Address.IsValid() || ms[2].NIC != "eni-c" {
		t.Fatalf("mutations = %+v, want eni-c's forwarding without an address last", ms)
	}
	_, err := e.ec2.ModifyNetworkInterfaceAttribute(t.Context(), &ec2.ModifyNetworkInterfaceAttributeInput{
		NetworkInterfaceId: aws.String("eni-c"), SourceDestCheck: &types.AttributeBooleanValue{Value: aws.Bool(true)},
	}, func(o *ec2.Options) {
		o.APIOptions = append(o.APIOptions, smithyhttp.AddHeaderValue(HeaderAddress, "10.0.0"))
	})
	expectAPIError(t, err, 400, "InvalidParameterValue", "Value (10.0.0) for parameter X-Ipfence-Address is invalid. It must be an IP address.")
	if read("eni-c") {
		t.Fatal("a refused modify turned eni-c's check back on")
	}
	_, err = e.ec2.DescribeNetworkInterfaceAttribute(t.Context(), &ec2.DescribeNetworkInterfaceAttributeInput{
		NetworkInterfaceId: aws.String("eni-a"), Attribute: types.NetworkInterfaceAttributeDescription,
	})
	expectAPIError(t, err, 400, "InvalidParameterValue", "Value (description) for parameter Attribute is invalid.")
}

func TestHeadersRecorded(t *testing.T) {
	e := newEnv(t, Config{})
	_, err := e.ec2.AssignPrivateIpAddresses(t.Context(), &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String("eni-a"), PrivateIpAddresses: []string{"10.0.0.7"},
	}, headers("7", "pool:aws:eni-a:assign-secondary-ip:10.0.0.7:epoch:7"))
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(1500 * time.Microsecond)
	_, err = e.ec2.AssignPrivateIpAddresses(t.Context(), &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String("eni-b"), PrivateIpAddresses: []string{"10.0.0.7"}, AllowReassignment: aws.Bool(true),
	}, headers("8", "k8"))
	if err != nil {
		t.Fatal(err)
	}
	var got []mutationJSON
	adminDo(t, e.srv.URL, http.MethodGet, "/admin/mutations", nil, &got)
	// The monotonic stamps are as far apart as the times.
	if len(got) == 2 {
		if d := time.Duration(got[1].Mono - got[0].Mono); d < 500*time.Microsecond || d > 2500*time.Microsecond {
			t.Errorf("mono stamps %d and %d are %v apart, want about 1.5ms", got[0].Mono, got[1].Mono, d)
		}
		got[0].Mono, got[1].Mono = 0, 0
	}
	want := []mutationJSON{
		{Time: "2026-01-02T03:04:05Z", Call: capture.Assign, NIC: "eni-a", Address: "10.0.0.7", Epoch: 7, IdempotencyKey: "pool:aws:eni-a:assign-secondary-ip:10.0.0.7:epoch:7"},
		{Time: "2026-01-02T03:04:05.0015Z", Call: capture.Assign, NIC: "eni-b", Address: "10.0.0.7", Epoch: 8, IdempotencyKey: "k8", From: "eni-a"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("GET /admin/mutations = %+v, want %+v", got, want)
	}

	before := fingerprint(t, e.s)
	for _, bad := range []string{"abc", "-1", "18446744073709551616", ""} {
		_, err = e.ec2.AssignPrivateIpAddresses(t.Context(), &ec2.AssignPrivateIpAddressesInput{
			NetworkInterfaceId: aws.String("eni-c"), PrivateIpAddresses: []string{"10.0.0.7"}, AllowReassignment: aws.Bool(true),
		}, headers(bad, "k"))
		expectAPIError(t, err, 400, "InvalidParameterValue", "Value ("+bad+") for parameter X-Ipfence-Epoch is invalid.")
		if after := fingerprint(t, e.s); after != before {
			t.Fatalf("a malformed epoch %q changed the simulator", bad)
		}
	}
}

func TestMissingAuthorization(t *testing.T) {
	e := newEnv(t, Config{})
	before := fingerprint(t, e.s)
	resp, err := http.Post(e.srv.URL+"/", "application/x-www-form-urlencoded",
		strings.NewReader("Action=AssignPrivateIpAddresses&Version=2016-11-15&NetworkInterfaceId=eni-a&PrivateIpAddress.1=10.0.0.7"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "<Code>MissingAuthenticationToken</Code>") {
		t.Fatalf("unsigned call = %d %s, want 401 MissingAuthenticationToken", resp.StatusCode, body)
	}
	if after := fingerprint(t, e.s); after != before {
		t.Fatal("an unsigned call changed the simulator")
	}
}

func TestRawQueryAPI(t *testing.T) {
	e := newEnv(t, Config{})
	const assign = "Action=AssignPrivateIpAddresses&Version=2016-11-15&NetworkInterfaceId=eni-a&PrivateIpAddress.1=10.0.0.7"
	cases := []struct {
		name, method, form string
		status             int
		body               string
	}{
		{"missing Action", "POST", "Version=2016-11-15", 400, "<Code>MissingParameter</Code><Message>The request must contain the parameter Action</Message>"},
		{"missing Version", "POST", "Action=DescribeNetworkInterfaces", 400, "<Code>MissingParameter</Code><Message>The request must contain the parameter Version</Message>"},
		{"wrong Version", "POST", "Action=DescribeNetworkInterfaces&Version=2014-01-01", 400, "<Code>InvalidParameterValue</Code><Message>Value (2014-01-01) for parameter Version is invalid."},
		{"unknown Action", "POST", "Action=RunInstances&Version=2016-11-15", 400, "<Code>InvalidAction</Code><Message>The action RunInstances is not valid for this web service.</Message>"},
		{"missing NetworkInterfaceId", "POST", "Action=AssignPrivateIpAddresses&Version=2016-11-15&PrivateIpAddress.1=10.0.0.7", 400, "<Code>MissingParameter</Code><Message>The request must contain the parameter NetworkInterfaceId</Message>"},
		{"no address", "POST", "Action=UnassignPrivateIpAddresses&Version=2016-11-15&NetworkInterfaceId=eni-a", 400, "<Code>MissingParameter</Code><Message>The request must contain the parameter PrivateIpAddress.1</Message>"},
		{"bad address", "POST", assign + "&PrivateIpAddress.2=10.0.0.300", 400, "<Code>InvalidParameterValue</Code><Message>Value (10.0.0.300) for parameter PrivateIpAddress.2 is invalid. It is not an IPv4 address.</Message>"},
		{"IPv6 address", "POST", assign + "&PrivateIpAddress.2=fd00::1", 400, "Value (fd00::1) for parameter PrivateIpAddress.2 is invalid."},
		{"repeated address", "POST", assign + "&PrivateIpAddress.3=10.0.0.7", 400, "Value (10.0.0.7) for parameter PrivateIpAddress.3 is invalid. It repeats PrivateIpAddress.1."},
		{"bad boolean", "POST", assign + "&AllowReassignment=yes", 400, "Value (yes) for parameter AllowReassignment is invalid. It must be true or false."},
		{"unknown parameter", "POST", assign + "&SecondaryPrivateIpAddressCount=2", 400, "<Code>UnknownParameter</Code><Message>The parameter SecondaryPrivateIpAddressCount is not recognized</Message>"},
		{"reassignment on unassign", "POST", "Action=UnassignPrivateIpAddresses&Version=2016-11-15&NetworkInterfaceId=eni-a&PrivateIpAddress.1=10.0.0.7&AllowReassignment=true", 400, "<Code>UnknownParameter</Code>"},
		{"leading zero index", "POST", assign + "&PrivateIpAddress.02=10.0.0.8", 400, "The parameter PrivateIpAddress.02 is not recognized"},
		{"parameter twice", "POST", assign + "&NetworkInterfaceId=eni-b", 400, "Value (eni-a,eni-b) for parameter NetworkInterfaceId is invalid. The parameter is given 2 times; give it once."},
		{"filter without name", "POST", "Action=DescribeNetworkInterfaces&Version=2016-11-15&Filter.1.Value.1=x", 400, "The request must contain the parameter Filter.1.Name"},
		{"filter without value", "POST", "Action=DescribeNetworkInterfaces&Version=2016-11-15&Filter.1.Name=network-interface-id", 400, "The request must contain the parameter Filter.1.Value.1"},
		{"MaxResults too small", "POST", "Action=DescribeNetworkInterfaces&Version=2016-11-15&MaxResults=4", 400, "Value (4) for parameter MaxResults is invalid."},
		{"bad NextToken", "POST", "Action=DescribeNetworkInterfaces&Version=2016-11-15&NextToken=abc", 400, "Value (abc) for parameter NextToken is invalid."},
		{"modify without attribute", "POST", "Action=ModifyNetworkInterfaceAttribute&Version=2016-11-15&NetworkInterfaceId=eni-a", 400, "The request must contain the parameter SourceDestCheck.Value"},
		{"modify another attribute", "POST", "Action=ModifyNetworkInterfaceAttribute&Version=2016-11-15&NetworkInterfaceId=eni-a&Description.Value=x", 400, "The parameter Description.Value is not recognized"},
		{"attribute missing", "POST", "Action=DescribeNetworkInterfaceAttribute&Version=2016-11-15&NetworkInterfaceId=eni-a", 400, "The request must contain the parameter Attribute"},
		{"dry run", "POST", assign + "&DryRun=true", 412, "<Code>DryRunOperation</Code><Message>Request would have succeeded, but DryRun flag is set.</Message>"},
		{"bad percent-encoding", "POST", assign + "&x=%zz", 400, "<Code>InvalidParameterValue</Code><Message>The request is not a readable form"},
		{"describe over GET", "GET", "Action=DescribeNetworkInterfaces&Version=2016-11-15&Filter.1.Name=network-interface-id&Filter.1.Value.1=eni-c",
			200, "<networkInterfaceSet><item><networkInterfaceId>eni-c</networkInterfaceId>"},
	}
	before := fingerprint(t, e.s)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := rawCall(t, e.srv.URL, tc.method, tc.form, nil)
			if status != tc.status || !strings.Contains(body, tc.body) {
				t.Fatalf("status %d, body %s\nwant %d with %s", status, body, tc.status, tc.body)
			}
			if status != 200 && !strings.Contains(body, "<RequestID>00000000-0000-4000-8000-") {
				t.Fatalf("error without a RequestID: %s", body)
			}
		})
	}
	if after := fingerprint(t, e.s); after != before {
		t.Fatalf("refused calls changed the simulator:\n%s\n%s", before, after)
	}

	// The same assign over GET takes effect, and its answer is EC2's
	// document in EC2's namespace.
	status, body := rawCall(t, e.srv.URL, "GET", assign, map[string]string{HeaderEpoch: "3"})
	want := `<AssignPrivateIpAddressesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>`
	if status != 200 || !strings.Contains(body, want) ||
		!strings.Contains(body, "<networkInterfaceId>eni-a</networkInterfaceId><assignedPrivateIpAddressesSet><item><privateIpAddress>10.0.0.7</privateIpAddress></item></assignedPrivateIpAddressesSet>") {
		t.Fatalf("assign over GET = %d %s", status, body)
	}
	if ms := e.s.Mutations(); len(ms) != 1 || ms[0].Epoch != 3 || ms[0].NIC != "eni-a" {
		t.Fatalf("mutations = %+v, want the assign at epoch 3", ms)
	}
	// Methods other than GET and POST, and other paths, are not the API.
	if status, _ := rawCall(t, e.srv.URL, "PUT", assign, nil); status != http.StatusMethodNotAllowed {
		t.Fatalf("PUT / = %d, want 405", status)
	}
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	var b strings.Builder
	if _, err := io.Copy(&b, resp.Body); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestConcurrentReassign: callers racing to seize the same addresses, with
// readers watching, never see an address on two NICs, and the record is a
// chain of moves in which each one leaves the NIC the previous one reached.
func TestConcurrentReassign(t *testing.T) {
	e := newEnv(t, Config{Clock: time.Now})
	addrs := []netip.Addr{ip7, ip8}
	stop := make(chan struct{})
	watched := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				watched <- nil
				return
			default:
			}
			seen := map[netip.Addr]string{}
			for _, n := range e.s.State().NICs {
				for _, a := range n.SecondaryIPs {
					if h, ok := seen[a]; ok {
						watched <- fmt.Errorf("%s on %s and %s", a, h, n.ID)
						return
					}
					seen[a] = n.ID
				}
			}
		}
	}()
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			for i := range 40 {
				nic := nicIDs[(g+i)%len(nicIDs)]
				if err := e.assign(nic, true, addrs[i%2]); err != nil {
					t.Errorf("assign to %s: %v", nic, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	if err := <-watched; err != nil {
		t.Fatal(err)
	}
	holder := map[netip.Addr]string{}
	for i, m := range e.s.Mutations() {
		if m.Call != capture.Assign || m.From != holder[m.Address] || m.NIC == m.From {
			t.Fatalf("mutation %d = %+v: want an assign from %q", i, m, holder[m.Address])
		}
		holder[m.Address] = m.NIC
	}
	for _, a := range addrs {
		out, err := e.ec2.DescribeNetworkInterfaces(t.Context(), &ec2.DescribeNetworkInterfacesInput{
			Filters: []types.Filter{{Name: aws.String("addresses.private-ip-address"), Values: []string{a.String()}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := nicIDsOf(out.NetworkInterfaces); !slices.Equal(got, []string{holder[a]}) {
			t.Fatalf("%s is on %v, the record says %s", a, got, holder[a])
		}
	}
}

// TestBatchStampsPerAddress: one AssignPrivateIpAddresses or
// UnassignPrivateIpAddresses call carrying several actions records each
// address's mutation with its own epoch and idempotency key, from the
// comma-separated headers; lists that do not match the addresses are
// refused and change nothing.
func TestBatchStampsPerAddress(t *testing.T) {
	e := newEnv(t, Config{})
	a, b, c := netip.MustParseAddr("10.0.0.7"), netip.MustParseAddr("10.0.0.8"), netip.MustParseAddr("10.0.0.9")
	_, err := e.ec2.AssignPrivateIpAddresses(e.t.Context(), &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String("eni-a"), PrivateIpAddresses: strs([]netip.Addr{a, b, c}),
	}, headers("4,5,6", "ka,kb,kc"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.ec2.UnassignPrivateIpAddresses(e.t.Context(), &ec2.UnassignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String("eni-a"), PrivateIpAddresses: strs([]netip.Addr{c, a}),
	}, headers("7,8", "uc,ua"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range e.s.Mutations() {
		got = append(got, fmt.Sprintf("%s %s %d %s", m.Call, m.Address, m.Epoch, m.IdempotencyKey))
	}
	want := []string{
		"assign-secondary-ip 10.0.0.7 4 ka", "assign-secondary-ip 10.0.0.8 5 kb", "assign-secondary-ip 10.0.0.9 6 kc",
		"unassign-secondary-ip 10.0.0.9 7 uc", "unassign-secondary-ip 10.0.0.7 8 ua",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("mutations:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	before := fingerprint(t, e.s)
	_, err = e.ec2.AssignPrivateIpAddresses(e.t.Context(), &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String("eni-b"), PrivateIpAddresses: strs([]netip.Addr{a, c}), AllowReassignment: aws.Bool(true),
	}, headers("9,10,11", "x,y,z"))
	expectAPIError(t, err, http.StatusBadRequest, "InvalidParameterValue", "")
	_, err = e.ec2.ModifyNetworkInterfaceAttribute(e.t.Context(), &ec2.ModifyNetworkInterfaceAttributeInput{
		NetworkInterfaceId: aws.String("eni-a"), SourceDestCheck: &types.AttributeBooleanValue{Value: aws.Bool(false)},
	}, headers("9,10", "x,y"))
	expectAPIError(t, err, http.StatusBadRequest, "InvalidParameterValue", "")
	if after := fingerprint(t, e.s); after != before {
		t.Fatalf("refused calls changed the simulator:\n%s\n%s", before, after)
	}
}
