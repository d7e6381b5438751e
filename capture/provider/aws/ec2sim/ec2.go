package ec2sim

import (
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/provider"
)

// APIVersion is the EC2 API version the simulator speaks; a request must
// name it in its Version parameter.
const APIVersion = "2016-11-15"

// xmlNamespace is the namespace of every successful EC2 response.
const xmlNamespace = "http://ec2.amazonaws.com/doc/" + APIVersion + "/"

// Headers a caller may send with a mutation; the simulator records their
// values with every mutation the call applies. They are ipfence's, not
// EC2's: a real cloud ignores them, and the AWS driver sends them so that
// the record can tell a stale action from a current one.
const (
	// HeaderEpoch carries the action's captureEpoch in decimal. A call
	// carrying several addresses, one action each, may give a
	// comma-separated list instead, one epoch per PrivateIpAddress.N in
	// index order; each address's mutation is then recorded with its own.
	HeaderEpoch = "X-Ipfence-Epoch"
	// HeaderIdempotencyKey carries the action's idempotency key, or a
	// comma-separated list of them as HeaderEpoch does.
	HeaderIdempotencyKey = "X-Ipfence-Idempotency-Key"
	// HeaderAddress carries the address a ModifyNetworkInterfaceAttribute
	// call is made for, which EC2's parameters do not name: it is
	// recorded as the forwarding mutation's (informational) address, as
	// provider.Request.Address is. Other actions ignore it.
	HeaderAddress = "X-Ipfence-Address"
	// HeaderLineRevision carries the etcd revision of the epoch record
	// the node confirmed before the call (its fencing token on the etcd
	// epoch line), positive and in decimal, or a comma-separated list of
	// them as HeaderEpoch does. Absent off the etcd line.
	HeaderLineRevision = "X-Ipfence-Line-Revision"
)

// maxIdempotencyKey bounds the header's length: the state file and the
// record keep every key.
const maxIdempotencyKey = 1024

// The actions the simulator serves.
const (
	actAssign       = "AssignPrivateIpAddresses"
	actUnassign     = "UnassignPrivateIpAddresses"
	actDescribe     = "DescribeNetworkInterfaces"
	actModify       = "ModifyNetworkInterfaceAttribute"
	actDescribeAttr = "DescribeNetworkInterfaceAttribute"
)

// actions lists the served actions in name order, for messages.
var actions = []string{actAssign, actDescribeAttr, actDescribe, actModify, actUnassign}

func knownAction(a string) bool { return slices.Contains(actions, a) }

func actionNames() []string { return slices.Clone(actions) }

// Bounds of DescribeNetworkInterfaces' MaxResults, as EC2's.
const (
	minMaxResults = 5
	maxMaxResults = 1000
)

// maxListIndex bounds the N of a list parameter such as PrivateIpAddress.N,
// so that a number is never mistaken for a count to allocate.
const maxListIndex = 1 << 20

// query is a decoded Query API call. Only the fields of its action are set.
type query struct {
	action string
	dryRun bool
	// nic is NetworkInterfaceId: the NIC acted on or read.
	nic string
	// addrs are PrivateIpAddress.N in order of N.
	addrs    []netip.Addr
	reassign bool
	// nicIDs are DescribeNetworkInterfaces' NetworkInterfaceId.N.
	nicIDs     []string
	filters    []filter
	maxResults int
	offset     int // NextToken
	// sourceDestCheck is ModifyNetworkInterfaceAttribute's
	// SourceDestCheck.Value.
	sourceDestCheck bool
	// attribute is DescribeNetworkInterfaceAttribute's Attribute.
	attribute string
}

// filter is one Filter.N: a NIC matches when one of its values for name is
// among values.
type filter struct {
	name   string
	values []string
}

// filterValues gives, for each filter name the simulator supports, a NIC's
// values for it.
var filterValues = map[string]func(s *Server, n NICState) []string{
	"network-interface-id":   func(_ *Server, n NICState) []string { return []string{n.ID} },
	"private-ip-address":     func(_ *Server, n NICState) []string { return []string{n.PrimaryIP.String()} },
	"attachment.instance-id": func(_ *Server, n NICState) []string { return []string{n.InstanceID} },
	"mac-address":            func(_ *Server, n NICState) []string { return []string{n.MAC} },
	"subnet-id":              func(s *Server, _ NICState) []string { return []string{s.subnetID} },
	"addresses.private-ip-address": func(_ *Server, n NICState) []string {
		vs := []string{n.PrimaryIP.String()}
		for _, a := range n.SecondaryIPs {
			vs = append(vs, a.String())
		}
		return vs
	},
}

// apiError is an EC2 error response.
type apiError struct {
	status  int
	code    string
	message string
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.status, e.code, e.message) }

// clip shortens a value echoed in a message: a caller's garbage must not
// make the answer large.
func clip(v string) string {
	const max = 64
	if len(v) <= max {
		return v
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	return v[:cut] + "…"
}

func errMissing(param string) *apiError {
	return &apiError{http.StatusBadRequest, "MissingParameter", "The request must contain the parameter " + param}
}

func errInvalid(param, value, why string) *apiError {
	return &apiError{http.StatusBadRequest, "InvalidParameterValue",
		fmt.Sprintf("Value (%s) for parameter %s is invalid. %s", clip(value), clip(param), why)}
}

func errNICNotFound(ids ...string) *apiError {
	if len(ids) == 1 {
		return &apiError{http.StatusBadRequest, "InvalidNetworkInterfaceID.NotFound",
			fmt.Sprintf("The networkInterface ID '%s' does not exist", clip(ids[0]))}
	}
	for i := range ids {
		ids[i] = clip(ids[i])
	}
	return &apiError{http.StatusBadRequest, "InvalidNetworkInterfaceID.NotFound",
		fmt.Sprintf("The networkInterface IDs '%s' do not exist", strings.Join(ids, ", "))}
}

var (
	errAuth = &apiError{http.StatusUnauthorized, "MissingAuthenticationToken", "Request is missing Authentication Token"}
	// errDryRun is EC2's answer to a call with DryRun=true that would
	// have been allowed.
	errDryRun = &apiError{http.StatusPreconditionFailed, "DryRunOperation", "Request would have succeeded, but DryRun flag is set."}
	// errGone answers a call whose context ended before it changed
	// anything: the caller gave up (and reads nothing), or the server is
	// shutting down, and then the caller must learn that the call failed
	// rather than read an empty success.
	errGone = &apiError{http.StatusServiceUnavailable, CodeUnavailable, "The service is unavailable. Please try again shortly."}
	// errInternal answers a call whose outcome the simulator cannot
	// vouch for: a bug, or a change it applied but could not save.
	errInternal = &apiError{http.StatusInternalServerError, "InternalError", "An internal error has occurred"}
)

// injectedError is the answer to a call an injected fault fails.
func injectedError(code string) *apiError {
	msg := map[string]string{
		CodeThrottled:   "Request limit exceeded.",
		CodeInternal:    "An internal error has occurred",
		CodeUnavailable: "The service is unavailable. Please try again shortly.",
	}[code]
	return &apiError{injectedStatus[code], code, msg}
}

// decodeQuery turns a Query API form into a call, or into the error EC2
// would answer. It reads nothing but the form, so that it can be fuzzed on
// its own. Every parameter must appear once; parameters whose names start
// with X-Amz- (a presigned URL's) are ignored; any other parameter the
// action does not take is refused with UnknownParameter.
func decodeQuery(form url.Values) (query, *apiError) {
	var q query
	keys := sortedKeys(form)
	for _, k := range keys {
		if n := len(form[k]); n != 1 {
			return q, errInvalid(k, strings.Join(form[k], ","), fmt.Sprintf("The parameter is given %d times; give it once.", n))
		}
	}
	q.action = form.Get("Action")
	switch v := form.Get("Version"); {
	case q.action == "":
		return q, errMissing("Action")
	case v == "":
		return q, errMissing("Version")
	case v != APIVersion:
		return q, errInvalid("Version", v, "ipfence-verify cloudsim speaks "+APIVersion+".")
	case !knownAction(q.action):
		return q, &apiError{http.StatusBadRequest, "InvalidAction",
			fmt.Sprintf("The action %s is not valid for this web service.", clip(q.action))}
	}
	d := decoder{q: &q, addrs: map[int]string{}, ids: map[int]string{}, filters: map[int]*filterParts{}}
	for _, k := range keys {
		if k == "Action" || k == "Version" || strings.HasPrefix(k, "X-Amz-") {
			continue
		}
		if err := d.param(k, form.Get(k)); err != nil {
			return q, err
		}
	}
	if err := d.finish(); err != nil {
		return q, err
	}
	return q, nil
}

// decoder collects an action's parameters; lists arrive in key order
// (PrivateIpAddress.10 before PrivateIpAddress.2) and are put in index order
// by finish.
type decoder struct {
	q       *query
	addrs   map[int]string
	ids     map[int]string
	filters map[int]*filterParts
	// seen names the single-valued parameters given.
	seen []string
}

type filterParts struct {
	name    string
	hasName bool
	values  map[int]string
}

func (d *decoder) param(k, v string) *apiError {
	q := d.q
	if k == "DryRun" {
		return parseBool(k, v, &q.dryRun)
	}
	switch q.action {
	case actAssign, actUnassign:
		switch {
		case k == "NetworkInterfaceId":
			q.nic = v
			return nil
		case k == "AllowReassignment" && q.action == actAssign:
			return parseBool(k, v, &q.reassign)
		}
		if i, ok := listIndex(k, "PrivateIpAddress."); ok {
			d.addrs[i] = v
			return nil
		}
	case actDescribe:
		switch k {
		case "MaxResults":
			n, err := strconv.Atoi(v)
			if err != nil || n < minMaxResults || n > maxMaxResults {
				return errInvalid(k, v, fmt.Sprintf("It must be an integer from %d to %d.", minMaxResults, maxMaxResults))
			}
			q.maxResults = n
			return nil
		case "NextToken":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || strconv.Itoa(n) != v {
				return errInvalid(k, v, "It is not a token this service gave.")
			}
			q.offset = n
			return nil
		}
		if i, ok := listIndex(k, "NetworkInterfaceId."); ok {
			d.ids[i] = v
			return nil
		}
		if rest, ok := strings.CutPrefix(k, "Filter."); ok {
			if n, field, ok := strings.Cut(rest, "."); ok {
				if i, ok := listIndex(n, ""); ok {
					if field == "Name" {
						d.filter(i).name, d.filter(i).hasName = v, true
						return nil
					}
					if j, ok := listIndex(field, "Value."); ok {
						d.filter(i).values[j] = v
						return nil
					}
				}
			}
		}
	case actModify:
		switch k {
		case "NetworkInterfaceId":
			q.nic = v
			return nil
		case "SourceDestCheck.Value":
			d.seen = append(d.seen, k)
			return parseBool(k, v, &q.sourceDestCheck)
		}
	case actDescribeAttr:
		switch k {
		case "NetworkInterfaceId":
			q.nic = v
			return nil
		case "Attribute":
			if v != "sourceDestCheck" {
				return errInvalid(k, v, "ipfence-verify cloudsim reads the attribute sourceDestCheck only.")
			}
			q.attribute = v
			return nil
		}
	}
	return &apiError{http.StatusBadRequest, "UnknownParameter", fmt.Sprintf("The parameter %s is not recognized", clip(k))}
}

func (d *decoder) filter(i int) *filterParts {
	f := d.filters[i]
	if f == nil {
		f = &filterParts{values: map[int]string{}}
		d.filters[i] = f
	}
	return f
}

// finish checks the required parameters and puts the lists in order.
func (d *decoder) finish() *apiError {
	q := d.q
	switch q.action {
	case actAssign, actUnassign:
		if q.nic == "" {
			return errMissing("NetworkInterfaceId")
		}
		if len(d.addrs) == 0 {
			return errMissing("PrivateIpAddress.1")
		}
		first := make(map[netip.Addr]int, len(d.addrs))
		for _, i := range sortedKeys(d.addrs) {
			param := fmt.Sprintf("PrivateIpAddress.%d", i)
			a, err := netip.ParseAddr(d.addrs[i])
			if err != nil || !a.Is4() {
				return errInvalid(param, d.addrs[i], "It is not an IPv4 address.")
			}
			if j, dup := first[a]; dup {
				return errInvalid(param, d.addrs[i], fmt.Sprintf("It repeats PrivateIpAddress.%d.", j))
			}
			first[a] = i
			q.addrs = append(q.addrs, a)
		}
	case actDescribe:
		for _, i := range sortedKeys(d.ids) {
			if d.ids[i] == "" {
				return errInvalid(fmt.Sprintf("NetworkInterfaceId.%d", i), "", "It is empty.")
			}
			q.nicIDs = append(q.nicIDs, d.ids[i])
		}
		for _, i := range sortedKeys(d.filters) {
			f := d.filters[i]
			if !f.hasName {
				return errMissing(fmt.Sprintf("Filter.%d.Name", i))
			}
			if _, ok := filterValues[f.name]; !ok {
				return errInvalid(fmt.Sprintf("Filter.%d.Name", i), f.name, fmt.Sprintf("The filter '%s' is invalid.", clip(f.name)))
			}
			if len(f.values) == 0 {
				return errMissing(fmt.Sprintf("Filter.%d.Value.1", i))
			}
			fl := filter{name: f.name}
			for _, j := range sortedKeys(f.values) {
				fl.values = append(fl.values, f.values[j])
			}
			q.filters = append(q.filters, fl)
		}
	case actModify:
		if q.nic == "" {
			return errMissing("NetworkInterfaceId")
		}
		if len(d.seen) == 0 {
			return errMissing("SourceDestCheck.Value")
		}
	case actDescribeAttr:
		if q.nic == "" {
			return errMissing("NetworkInterfaceId")
		}
		if q.attribute == "" {
			return errMissing("Attribute")
		}
	}
	return nil
}

// listIndex reads the N of a list parameter prefix+N: a positive decimal
// without leading zeros, so that each member has one spelling.
func listIndex(k, prefix string) (int, bool) {
	s, ok := strings.CutPrefix(k, prefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > maxListIndex || strconv.Itoa(n) != s {
		return 0, false
	}
	return n, true
}

// parseBool reads true or false in any case, as EC2 does.
func parseBool(param, v string, out *bool) *apiError {
	switch {
	case strings.EqualFold(v, "true"):
		*out = true
	case strings.EqualFold(v, "false"):
		*out = false
	default:
		return errInvalid(param, v, "It must be true or false.")
	}
	return nil
}

// decodeStamp reads the fencing token headers and the informational
// address. A missing header is zero; a malformed one is refused, so that a
// caller's bug does not record a mutation under epoch 0.
func decodeStamp(h http.Header) (stamp, *apiError) {
	var st stamp
	if vs, ok := h[HeaderEpoch]; ok {
		if len(vs) != 1 {
			return st, errInvalid(HeaderEpoch, strings.Join(vs, ","), "Send the header once.")
		}
		for i, v := range strings.Split(vs[0], ",") {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return st, errInvalid(HeaderEpoch, vs[0], "It must be a decimal epoch, or a comma-separated list of them.")
			}
			if i == 0 {
				st.epoch = capture.Epoch(n)
			}
			st.epochs = append(st.epochs, capture.Epoch(n))
		}
	}
	if vs, ok := h[HeaderIdempotencyKey]; ok {
		if len(vs) != 1 {
			return st, errInvalid(HeaderIdempotencyKey, strings.Join(vs, ","), "Send the header once.")
		}
		for i, v := range strings.Split(vs[0], ",") {
			if len(v) > maxIdempotencyKey {
				return st, errInvalid(HeaderIdempotencyKey, v, fmt.Sprintf("It is longer than %d bytes.", maxIdempotencyKey))
			}
			if i == 0 {
				st.key = v
			}
			st.keys = append(st.keys, v)
		}
	}
	if vs, ok := h[HeaderLineRevision]; ok {
		if len(vs) != 1 {
			return st, errInvalid(HeaderLineRevision, strings.Join(vs, ","), "Send the header once.")
		}
		revs, err := provider.ParseLineRevisions(vs[0])
		if err != nil {
			return st, errInvalid(HeaderLineRevision, vs[0], "It must be a positive decimal etcd revision, or a comma-separated list of them.")
		}
		st.rev, st.revs = revs[0], revs
	}
	if vs, ok := h[HeaderAddress]; ok {
		if len(vs) != 1 {
			return st, errInvalid(HeaderAddress, strings.Join(vs, ","), "Send the header once.")
		}
		a, err := netip.ParseAddr(vs[0])
		if err != nil {
			return st, errInvalid(HeaderAddress, vs[0], "It must be an IP address.")
		}
		st.addr = a
	}
	return st, nil
}

// refusalError turns the model's refusal into EC2's error.
func refusalError(err error) *apiError {
	var r *refusal
	if !errors.As(err, &r) {
		return nil
	}
	bad := func(msg string) *apiError { return &apiError{http.StatusBadRequest, "InvalidParameterValue", msg} }
	switch r.reason {
	case reasonUnknownNIC:
		return errNICNotFound(r.nic)
	case reasonInUse:
		return &apiError{http.StatusBadRequest, "InvalidIPAddress.InUse", fmt.Sprintf("Address %s is in use by %s", r.addr, r.other)}
	case reasonNotAssigned:
		return bad("Some of the specified addresses are not assigned to interface " + r.nic)
	case reasonOutsideSubnet:
		return bad(fmt.Sprintf("Address %s does not fall within the subnet's address range", r.addr))
	case reasonReserved:
		return bad(fmt.Sprintf("Address %s is the network or broadcast address of the subnet", r.addr))
	case reasonPrimaryUnassign:
		return bad(fmt.Sprintf("Address %s is the primary private IP address of %s and cannot be unassigned", r.addr, r.nic))
	}
	return nil
}

// XML documents. Element names are EC2's, as the SDK's deserializers read
// them (case-insensitively, ignoring the namespace and unknown elements).

type xmlAssignResponse struct {
	XMLName            xml.Name      `xml:"http://ec2.amazonaws.com/doc/2016-11-15/ AssignPrivateIpAddressesResponse"`
	RequestID          string        `xml:"requestId"`
	NetworkInterfaceID string        `xml:"networkInterfaceId"`
	Assigned           xmlAssignedIP `xml:"assignedPrivateIpAddressesSet"`
	Prefixes           struct{}      `xml:"assignedIpv4PrefixSet"`
}

type xmlAssignedIP struct {
	Items []struct {
		PrivateIPAddress string `xml:"privateIpAddress"`
	} `xml:"item"`
}

// xmlReturnResponse answers the actions whose output is only a flag.
type xmlReturnResponse struct {
	XMLName   xml.Name
	RequestID string `xml:"requestId"`
	Return    bool   `xml:"return"`
}

type xmlDescribeResponse struct {
	XMLName   xml.Name `xml:"http://ec2.amazonaws.com/doc/2016-11-15/ DescribeNetworkInterfacesResponse"`
	RequestID string   `xml:"requestId"`
	NICs      struct {
		Items []xmlNIC `xml:"item"`
	} `xml:"networkInterfaceSet"`
	NextToken string `xml:"nextToken,omitempty"`
}

type xmlNIC struct {
	NetworkInterfaceID string        `xml:"networkInterfaceId"`
	SubnetID           string        `xml:"subnetId"`
	VpcID              string        `xml:"vpcId"`
	Description        string        `xml:"description"`
	RequesterManaged   bool          `xml:"requesterManaged"`
	Status             string        `xml:"status"`
	MacAddress         string        `xml:"macAddress"`
	PrivateIPAddress   string        `xml:"privateIpAddress"`
	PrivateDNSName     string        `xml:"privateDnsName"`
	SourceDestCheck    bool          `xml:"sourceDestCheck"`
	InterfaceType      string        `xml:"interfaceType"`
	GroupSet           struct{}      `xml:"groupSet"`
	Attachment         xmlAttachment `xml:"attachment"`
	PrivateIPs         struct {
		Items []xmlPrivateIP `xml:"item"`
	} `xml:"privateIpAddressesSet"`
	IPv6Addresses struct{} `xml:"ipv6AddressesSet"`
	TagSet        struct{} `xml:"tagSet"`
}

type xmlAttachment struct {
	AttachmentID        string `xml:"attachmentId"`
	InstanceID          string `xml:"instanceId"`
	DeviceIndex         int    `xml:"deviceIndex"`
	NetworkCardIndex    int    `xml:"networkCardIndex"`
	Status              string `xml:"status"`
	DeleteOnTermination bool   `xml:"deleteOnTermination"`
}

type xmlPrivateIP struct {
	PrivateIPAddress string `xml:"privateIpAddress"`
	PrivateDNSName   string `xml:"privateDnsName"`
	Primary          bool   `xml:"primary"`
}

type xmlDescribeAttrResponse struct {
	XMLName            xml.Name `xml:"http://ec2.amazonaws.com/doc/2016-11-15/ DescribeNetworkInterfaceAttributeResponse"`
	RequestID          string   `xml:"requestId"`
	NetworkInterfaceID string   `xml:"networkInterfaceId"`
	SourceDestCheck    struct {
		Value bool `xml:"value"`
	} `xml:"sourceDestCheck"`
}

// xmlErrorResponse is EC2's error document; it has no namespace, and its
// request id element is spelled RequestID, unlike a success's requestId.
type xmlErrorResponse struct {
	XMLName xml.Name `xml:"Response"`
	Errors  []struct {
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	} `xml:"Errors>Error"`
	RequestID string `xml:"RequestID"`
}

func returnResponse(action, id string) xmlReturnResponse {
	return xmlReturnResponse{XMLName: xml.Name{Space: xmlNamespace, Local: action + "Response"}, RequestID: id, Return: true}
}

// dnsName is the private DNS name EC2 gives an address in us-east-1.
func dnsName(a netip.Addr) string {
	return "ip-" + strings.ReplaceAll(a.String(), ".", "-") + ".ec2.internal"
}

func (s *Server) xmlNIC(n NICState) xmlNIC {
	x := xmlNIC{
		NetworkInterfaceID: n.ID, SubnetID: s.subnetID, VpcID: s.vpcID,
		Status: "in-use", MacAddress: n.MAC, InterfaceType: "interface",
		PrivateIPAddress: n.PrimaryIP.String(), PrivateDNSName: dnsName(n.PrimaryIP),
		SourceDestCheck: n.SourceDestCheck,
		Attachment: xmlAttachment{
			AttachmentID: fmt.Sprintf("eni-attach-0%016x", hash64("attachment:"+n.ID)),
			InstanceID:   n.InstanceID, Status: "attached", DeleteOnTermination: true,
		},
	}
	x.PrivateIPs.Items = append(x.PrivateIPs.Items, xmlPrivateIP{PrivateIPAddress: n.PrimaryIP.String(), PrivateDNSName: dnsName(n.PrimaryIP), Primary: true})
	for _, a := range n.SecondaryIPs {
		x.PrivateIPs.Items = append(x.PrivateIPs.Items, xmlPrivateIP{PrivateIPAddress: a.String(), PrivateDNSName: dnsName(a)})
	}
	return x
}

// writeXML sends a 200 answer.
func writeXML(w http.ResponseWriter, id string, v any) {
	b, err := xml.Marshal(v)
	if err != nil {
		// Every document is built from fixed types and valid strings;
		// reaching this is a bug, and the caller learns the call's
		// outcome is unknown.
		writeAPIError(w, id, errInternal)
		return
	}
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.Header().Set("X-Amzn-Requestid", id)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(xml.Header))
	_, _ = w.Write(b)
}

// writeAPIError sends an EC2 error document.
func writeAPIError(w http.ResponseWriter, id string, e *apiError) {
	doc := xmlErrorResponse{RequestID: id}
	doc.Errors = append(doc.Errors, struct {
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	}{e.code, e.message})
	b, _ := xml.Marshal(doc)
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.Header().Set("X-Amzn-Requestid", id)
	w.WriteHeader(e.status)
	_, _ = w.Write([]byte(xml.Header))
	_, _ = w.Write(b)
}

// serveQuery serves one EC2 Query API call: it reads the form, waits while
// the API is paused, checks that the request is signed (any signature will
// do), decodes it, draws the injected faults, waits the injected latency,
// and only then asks the model. Every refusal before the model's changes
// nothing.
func (s *Server) serveQuery(w http.ResponseWriter, r *http.Request) {
	id := s.requestID()
	// The body is read before any wait: only then does the HTTP server
	// notice a caller that hangs up, and end the request's context, so
	// that a call abandoned while paused or delayed is never applied.
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	formErr := r.ParseForm()
	if !s.waitResumed(r.Context()) {
		writeAPIError(w, id, errGone)
		return
	}
	if r.Header.Get("Authorization") == "" && !r.URL.Query().Has("X-Amz-Signature") {
		writeAPIError(w, id, errAuth)
		return
	}
	if formErr != nil {
		writeAPIError(w, id, &apiError{http.StatusBadRequest, "InvalidParameterValue", "The request is not a readable form: " + clip(formErr.Error())})
		return
	}
	q, aerr := decodeQuery(r.Form)
	if aerr == nil {
		var st stamp
		if st, aerr = decodeStamp(r.Header); aerr == nil {
			aerr = s.call(w, r, id, q, st)
		}
	}
	if aerr != nil {
		s.log.Debug("query refused", "request", id, "action", clip(q.action), "status", aerr.status, "code", aerr.code, "message", aerr.message)
		writeAPIError(w, id, aerr)
	}
}

// call carries out a decoded call and writes its answer, or returns the
// error to answer instead.
func (s *Server) call(w http.ResponseWriter, r *http.Request, id string, q query, st stamp) *apiError {
	code, delay, timer := s.injected(q.action)
	if delay > 0 {
		fired, stop := timer(delay)
		select {
		case <-fired:
		case <-r.Context().Done():
			stop()
			return errGone
		}
	}
	if code != "" {
		return injectedError(code)
	}
	if q.dryRun {
		return errDryRun
	}
	if n := len(q.addrs); (q.action == actAssign || q.action == actUnassign) && len(st.revs) > 1 && len(st.revs) != n {
		return errInvalid(HeaderLineRevision, fmt.Sprintf("%d revisions", len(st.revs)), fmt.Sprintf("Give one revision, or one per address (%d).", n))
	}
	if q.action != actAssign && q.action != actUnassign && len(st.revs) > 1 {
		return errInvalid(HeaderLineRevision, "a list", "Only calls naming several addresses take lists.")
	}
	if n := len(q.addrs); (q.action == actAssign || q.action == actUnassign) && ((len(st.epochs) > 1 && len(st.epochs) != n) || (len(st.keys) > 1 && len(st.keys) != n)) {
		return errInvalid(HeaderEpoch, fmt.Sprintf("%d epochs, %d keys", len(st.epochs), len(st.keys)), fmt.Sprintf("Give one epoch and one key, or one of each per address (%d).", n))
	}
	if q.action != actAssign && q.action != actUnassign && (len(st.epochs) > 1 || len(st.keys) > 1) {
		return errInvalid(HeaderEpoch, "a list", "Only calls naming several addresses take lists.")
	}
	switch q.action {
	case actAssign:
		if err := s.mutate(func(m *model) error { return m.assign(q.nic, q.addrs, q.reassign, st) }); err != nil {
			return s.mutationError(err)
		}
		s.logMutation(id, q, st)
		resp := xmlAssignResponse{RequestID: id, NetworkInterfaceID: q.nic}
		for _, a := range q.addrs {
			resp.Assigned.Items = append(resp.Assigned.Items, struct {
				PrivateIPAddress string `xml:"privateIpAddress"`
			}{a.String()})
		}
		writeXML(w, id, resp)
	case actUnassign:
		if err := s.mutate(func(m *model) error { return m.unassign(q.nic, q.addrs, st) }); err != nil {
			return s.mutationError(err)
		}
		s.logMutation(id, q, st)
		writeXML(w, id, returnResponse(q.action, id))
	case actModify:
		if err := s.mutate(func(m *model) error { return m.setSourceDestCheck(q.nic, q.sourceDestCheck, st) }); err != nil {
			return s.mutationError(err)
		}
		s.logMutation(id, q, st)
		writeXML(w, id, returnResponse(q.action, id))
	case actDescribe:
		nics, err := s.describe(q)
		if err != nil {
			return err
		}
		resp := xmlDescribeResponse{RequestID: id}
		if q.maxResults > 0 {
			end := min(q.offset+q.maxResults, len(nics))
			if end < len(nics) {
				resp.NextToken = strconv.Itoa(end)
			}
			nics = nics[min(q.offset, end):end]
		}
		for _, n := range nics {
			resp.NICs.Items = append(resp.NICs.Items, s.xmlNIC(n))
		}
		writeXML(w, id, resp)
	case actDescribeAttr:
		all := s.states()
		i := slices.IndexFunc(all, func(n NICState) bool { return n.ID == q.nic })
		if i < 0 {
			return errNICNotFound(q.nic)
		}
		resp := xmlDescribeAttrResponse{RequestID: id, NetworkInterfaceID: q.nic}
		resp.SourceDestCheck.Value = all[i].SourceDestCheck
		writeXML(w, id, resp)
	}
	return nil
}

// describe selects the NICs a DescribeNetworkInterfaces call asks for, in
// id order: those named (all of which must exist) that match every filter.
func (s *Server) describe(q query) ([]NICState, *apiError) {
	all := s.states()
	if len(q.nicIDs) > 0 {
		var missing []string
		for _, id := range q.nicIDs {
			if !slices.ContainsFunc(all, func(n NICState) bool { return n.ID == id }) && !slices.Contains(missing, id) {
				missing = append(missing, id)
			}
		}
		if len(missing) > 0 {
			return nil, errNICNotFound(missing...)
		}
	}
	out := all[:0]
	for _, n := range all {
		if len(q.nicIDs) > 0 && !slices.Contains(q.nicIDs, n.ID) {
			continue
		}
		if !slices.ContainsFunc(q.filters, func(f filter) bool { return !s.matches(n, f) }) {
			out = append(out, n)
		}
	}
	return out, nil
}

func (s *Server) matches(n NICState, f filter) bool {
	for _, v := range filterValues[f.name](s, n) {
		if slices.Contains(f.values, v) {
			return true
		}
	}
	return false
}

// mutationError answers a mutation the model refused or the simulator
// could not persist.
func (s *Server) mutationError(err error) *apiError {
	if e := refusalError(err); e != nil {
		return e
	}
	s.log.Error("mutation failed", "error", err)
	return errInternal
}

// logMutation logs a mutation the simulator accepted; with a remap delay
// it becomes visible later, and the record stamps it then.
func (s *Server) logMutation(id string, q query, st stamp) {
	attrs := []any{"request", id, "action", q.action, "nic", q.nic}
	if q.action == actModify {
		attrs = append(attrs, "sourceDestCheck", q.sourceDestCheck)
	} else {
		attrs = append(attrs, "addresses", q.addrs)
	}
	s.log.Info("mutation accepted", append(attrs, "epoch", st.epoch, "idempotencyKey", st.key)...)
}
