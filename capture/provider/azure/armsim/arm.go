package armsim

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/provider"
	"github.com/ipfence/ipfence/capture/provider/aws/ec2sim"
	"github.com/ipfence/ipfence/capture/provider/epochtag"
)

// Headers a caller may send with a PUT: the EC2 dialect's, recorded with
// every mutation the PUT makes.
const (
	HeaderEpoch          = ec2sim.HeaderEpoch
	HeaderIdempotencyKey = ec2sim.HeaderIdempotencyKey
	HeaderAddress        = ec2sim.HeaderAddress
	// HeaderAddresses lists the addresses of a PUT carrying several
	// actions; HeaderEpoch and HeaderIdempotencyKey then hold as many
	// comma-separated values, the i-th address's mutation recorded with
	// the i-th of each.
	HeaderAddresses = "X-Ipfence-Addresses"
	// HeaderLineRevision carries the etcd revision of the epoch record
	// the node confirmed before the PUT (its fencing token on the etcd
	// epoch line), positive and in decimal, or with HeaderAddresses one
	// per address; absent off the etcd line.
	HeaderLineRevision = ec2sim.HeaderLineRevision
)

// maxBody bounds a PUT's body; a NIC with a few hundred ipConfigurations
// is far below it.
const maxBody = 1 << 20

// maxKey bounds an idempotency key, which the record keeps.
const maxKey = 1024

// armError is an ARM error answer.
type armError struct {
	status  int
	code    string
	message string
	// retryAfter, when positive, is sent as Retry-After in seconds.
	retryAfter time.Duration
}

func (e *armError) Error() string { return fmt.Sprintf("%d %s: %s", e.status, e.code, e.message) }

func errNotFound(what string) *armError {
	return &armError{status: http.StatusNotFound, code: "ResourceNotFound", message: clip(what) + " was not found."}
}

func errBadRequest(code, msg string) *armError {
	return &armError{status: http.StatusBadRequest, code: code, message: msg}
}

// clip shortens a caller's value echoed in a message.
func clip(v string) string {
	const max = 100
	if len(v) <= max {
		return v
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	return v[:cut] + "…"
}

// route is a parsed ARM path.
type route struct {
	op        string
	nic       string // OpGet, OpPut
	operation string // OpStatus
}

// parsePath matches the four paths without regard to case, checking the
// subscription and resource group.
func (s *Server) parsePath(method, path string) (route, *armError) {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	eq := strings.EqualFold
	if len(segs) < 2 || !eq(segs[0], "subscriptions") {
		return route{}, errNotFound("The path " + path)
	}
	if !eq(segs[1], s.sub) {
		return route{}, &armError{status: http.StatusNotFound, code: "SubscriptionNotFound", message: fmt.Sprintf("The subscription '%s' could not be found.", clip(segs[1]))}
	}
	switch {
	case len(segs) == 8 && eq(segs[2], "providers") && eq(segs[3], "Microsoft.Network") && eq(segs[4], "locations") && eq(segs[6], "operations"):
		if method != http.MethodGet {
			return route{}, &armError{status: http.StatusMethodNotAllowed, code: "MethodNotAllowed", message: "Operations are read with GET."}
		}
		return route{op: OpStatus, operation: segs[7]}, nil
	case (len(segs) == 7 || len(segs) == 8) && eq(segs[2], "resourceGroups") && eq(segs[4], "providers") && eq(segs[5], "Microsoft.Network") && eq(segs[6], "networkInterfaces"):
		if !eq(segs[3], s.rg) {
			return route{}, &armError{status: http.StatusNotFound, code: "ResourceGroupNotFound", message: fmt.Sprintf("Resource group '%s' could not be found.", clip(segs[3]))}
		}
		if len(segs) == 7 {
			if method != http.MethodGet {
				return route{}, &armError{status: http.StatusMethodNotAllowed, code: "MethodNotAllowed", message: "The list of NICs is read with GET."}
			}
			return route{op: OpList}, nil
		}
		switch method {
		case http.MethodGet:
			return route{op: OpGet, nic: segs[7]}, nil
		case http.MethodPut:
			return route{op: OpPut, nic: segs[7]}, nil
		}
		return route{}, &armError{status: http.StatusMethodNotAllowed, code: "MethodNotAllowed", message: "ipfence armsim serves GET and PUT of a NIC; it never creates or deletes one."}
	}
	return route{}, errNotFound("The path " + path)
}

// serveARM serves one ARM call: path, api-version and token first, then
// the throttle, the injected latency and error, and only then the model.
// Every refusal before the model changes nothing.
func (s *Server) serveARM(w http.ResponseWriter, r *http.Request) {
	id := fmt.Sprintf("00000000-0000-4000-8000-%012x", s.requests.Add(1))
	w.Header().Set("x-ms-request-id", id)
	corr := r.Header.Get("x-ms-correlation-request-id")
	if corr == "" || len(corr) > 64 {
		corr = id
	}
	w.Header().Set("x-ms-correlation-request-id", corr)
	var body []byte
	if r.Method == http.MethodPut {
		var err error
		body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			writeError(w, errBadRequest("InvalidRequestFormat", "The request body could not be read: "+clip(err.Error())))
			return
		}
	}
	// The body is read before the wait: only then does the HTTP server
	// notice a caller that hangs up, so a call abandoned while paused is
	// never applied.
	if !s.waitResumed(r.Context().Done()) {
		writeError(w, &armError{status: http.StatusServiceUnavailable, code: CodeServiceUnavailable, message: "The caller went away while the simulator was paused."})
		return
	}
	rt, aerr := s.parsePath(r.Method, r.URL.Path)
	if aerr == nil {
		aerr = checkVersion(r)
	}
	principal, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if aerr == nil && (!ok || strings.TrimSpace(principal) == "") {
		aerr = &armError{status: http.StatusUnauthorized, code: "AuthenticationFailed", message: "Authentication failed. The 'Authorization' header is missing or is not a bearer token."}
	}
	if aerr == nil {
		s.countCall(principal, rt.op)
		aerr = s.throttle(w, principal, rt.op == OpPut)
	}
	if aerr == nil {
		aerr = s.inject(r, rt.op)
	}
	if aerr == nil {
		switch rt.op {
		case OpGet:
			aerr = s.serveGet(w, rt.nic)
		case OpList:
			aerr = s.serveList(w)
		case OpStatus:
			aerr = s.serveStatus(w, rt.operation)
		case OpPut:
			aerr = s.servePut(w, r, rt.nic, body)
		}
	}
	if aerr != nil {
		writeError(w, aerr)
	}
}

func checkVersion(r *http.Request) *armError {
	vs := r.URL.Query()["api-version"]
	switch {
	case len(vs) == 0:
		return errBadRequest("MissingApiVersionParameter", "The api-version query parameter (?api-version=) is required for all requests.")
	case len(vs) > 1 || vs[0] != APIVersion:
		return errBadRequest("InvalidApiVersionParameter", fmt.Sprintf("The api-version '%s' is invalid. ipfence armsim supports '%s'.", clip(strings.Join(vs, ",")), APIVersion))
	}
	return nil
}

// throttle takes a token from the principal's read or write bucket, and
// reports what remains in ARM's headers.
func (s *Server) throttle(w http.ResponseWriter, principal string, write bool) *armError {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.limits.Off {
		return nil
	}
	l := s.limits.withDefaults()
	key := s.sub + "\x00" + principal
	b := s.buckets[key]
	if b == nil {
		// The bucket map grows with the principals seen; bound it so a
		// caller minting tokens cannot grow it without end.
		if len(s.buckets) >= 10000 {
			clear(s.buckets)
		}
		b = &buckets{}
		s.buckets[key] = b
	}
	now := s.clock()
	bk, burst, rate, kind := &b.read, l.ReadBurst, l.ReadRate, "reads"
	if write {
		bk, burst, rate, kind = &b.write, l.WriteBurst, l.WriteRate, "writes"
	}
	ok, wait := bk.take(now, burst, rate)
	w.Header().Set("x-ms-ratelimit-remaining-subscription-"+kind, strconv.Itoa(bk.remaining()))
	if ok {
		return nil
	}
	return &armError{
		status: http.StatusTooManyRequests, code: "SubscriptionRequestsThrottled",
		message:    fmt.Sprintf("Number of %s requests for subscription '%s' and principal exceeded the limit of %d at %v a second. Please try again after %v.", strings.TrimSuffix(kind, "s"), s.sub, burst, rate, wait.Round(time.Millisecond)),
		retryAfter: wait,
	}
}

// inject waits the call's latency (the profile's, drawn, and the faults'
// on top; real time) and draws the injected error; a caller that hangs up meanwhile gets 503 and changes nothing.
func (s *Server) inject(r *http.Request, op string) *armError {
	s.mu.Lock()
	code, delay, timer := s.faults.draw(op, s.rng), s.pace.Wait(op, s.jitter)+s.faults.latency(op), s.timer
	s.mu.Unlock()
	if delay > 0 {
		fired, stop := timer(delay)
		select {
		case <-fired:
		case <-r.Context().Done():
			stop()
			return &armError{status: http.StatusServiceUnavailable, code: CodeServiceUnavailable, message: "The caller went away."}
		}
	}
	if code == "" {
		return nil
	}
	e := &armError{status: injectedStatus[code], code: code, message: "Injected by ipfence armsim."}
	if code == CodeTooManyRequests {
		e.retryAfter = time.Second
	}
	return e
}

// JSON documents, in ARM's shapes as armnetwork reads them.

type nicJSON struct {
	ID         string            `json:"id"`
	Name       string            `json:"name"`
	Type       string            `json:"type"`
	Location   string            `json:"location"`
	ETag       string            `json:"etag"`
	Tags       map[string]string `json:"tags,omitempty"`
	Properties nicProperties     `json:"properties"`
}

type nicProperties struct {
	ProvisioningState  string         `json:"provisioningState"`
	ResourceGUID       string         `json:"resourceGuid"`
	EnableIPForwarding bool           `json:"enableIPForwarding"`
	MacAddress         string         `json:"macAddress"`
	Primary            bool           `json:"primary"`
	NICType            string         `json:"nicType"`
	IPConfigurations   []ipConfigJSON `json:"ipConfigurations"`
}

type ipConfigJSON struct {
	ID         string             `json:"id"`
	Name       string             `json:"name"`
	Type       string             `json:"type"`
	ETag       string             `json:"etag"`
	Properties ipConfigProperties `json:"properties"`
}

type ipConfigProperties struct {
	ProvisioningState         string     `json:"provisioningState"`
	PrivateIPAddress          string     `json:"privateIPAddress"`
	PrivateIPAllocationMethod string     `json:"privateIPAllocationMethod"`
	PrivateIPAddressVersion   string     `json:"privateIPAddressVersion"`
	Primary                   bool       `json:"primary"`
	Subnet                    idRefJSON  `json:"subnet"`
	PublicIPAddress           *idRefJSON `json:"publicIPAddress,omitempty"`
}

type idRefJSON struct {
	ID string `json:"id"`
}

// nicJSON renders a NIC as ARM holds it; the caller holds s.mu.
func (s *Server) nicJSON(n *nic) nicJSON {
	state := "Succeeded"
	if n.busyUntil.After(s.now) {
		state = "Updating"
	}
	id := s.NICID(n.name)
	cfg := func(name string, a netip.Addr, primary bool) ipConfigJSON {
		alloc := "Static"
		if primary {
			alloc = "Dynamic"
		}
		return ipConfigJSON{
			ID: id + "/ipConfigurations/" + name, Name: name, Type: "Microsoft.Network/networkInterfaces/ipConfigurations", ETag: n.etag,
			Properties: ipConfigProperties{
				ProvisioningState: state, PrivateIPAddress: a.String(), PrivateIPAllocationMethod: alloc,
				PrivateIPAddressVersion: "IPv4", Primary: primary, Subnet: idRefJSON{s.subnetID},
			},
		}
	}
	out := nicJSON{
		ID: id, Name: n.name, Type: "Microsoft.Network/networkInterfaces", Location: s.location, ETag: n.etag, Tags: maps.Clone(n.tags),
		Properties: nicProperties{
			ProvisioningState: state, ResourceGUID: fmt.Sprintf("%08x-0000-4000-8000-%012x", uint32(hash64("guid:"+n.name)), hash64("nic:"+n.name)&0xffffffffffff),
			EnableIPForwarding: n.forwarding, MacAddress: n.mac, Primary: true, NICType: "Standard",
		},
	}
	out.Properties.IPConfigurations = append(out.Properties.IPConfigurations, cfg(primaryName, n.primary, true))
	for _, a := range n.sortedSecondary() {
		out.Properties.IPConfigurations = append(out.Properties.IPConfigurations, cfg(n.secondary[a], a, false))
	}
	return out
}

func (s *Server) serveGet(w http.ResponseWriter, name string) *armError {
	s.mu.Lock()
	s.now = s.clock()
	n := s.nics[name]
	if n == nil {
		s.mu.Unlock()
		return errNotFound(fmt.Sprintf("Resource 'Microsoft.Network/networkInterfaces/%s' under resource group '%s'", name, s.rg))
	}
	doc := s.nicJSON(n)
	s.mu.Unlock()
	w.Header().Set("ETag", doc.ETag)
	writeJSON(w, http.StatusOK, doc)
	return nil
}

func (s *Server) serveList(w http.ResponseWriter) *armError {
	s.mu.Lock()
	s.now = s.clock()
	var doc struct {
		Value []nicJSON `json:"value"`
	}
	doc.Value = []nicJSON{}
	for _, name := range s.names {
		doc.Value = append(doc.Value, s.nicJSON(s.nics[name]))
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, doc)
	return nil
}

func (s *Server) serveStatus(w http.ResponseWriter, id string) *armError {
	s.mu.Lock()
	s.now = s.clock()
	op := s.ops[id]
	if op == nil {
		s.mu.Unlock()
		return errNotFound("Operation " + id)
	}
	doc := map[string]string{"id": s.operationPath(id), "name": id, "status": "InProgress", "startTime": op.start.UTC().Format(time.RFC3339Nano)}
	if !op.doneAt.After(s.now) {
		doc["status"] = "Succeeded"
		doc["endTime"] = op.doneAt.UTC().Format(time.RFC3339Nano)
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, doc)
	return nil
}

func (s *Server) operationPath(id string) string {
	return fmt.Sprintf("/subscriptions/%s/providers/Microsoft.Network/locations/%s/operations/%s", s.sub, s.location, id)
}

// putBody is what the simulator reads of a PUT: the rest of the NIC (DNS
// settings, read-only fields sent back) is accepted and ignored. Tags
// replace the NIC's, as ARM's PUT does: a PUT without them clears them.
type putBody struct {
	Tags       map[string]string `json:"tags"`
	Properties *struct {
		EnableIPForwarding *bool `json:"enableIPForwarding"`
		IPConfigurations   []struct {
			Name       string `json:"name"`
			Properties *struct {
				PrivateIPAddress          string     `json:"privateIPAddress"`
				PrivateIPAllocationMethod string     `json:"privateIPAllocationMethod"`
				Primary                   *bool      `json:"primary"`
				Subnet                    *idRefJSON `json:"subnet"`
			} `json:"properties"`
		} `json:"ipConfigurations"`
	} `json:"properties"`
}

// wanted is a PUT's decoded goal.
type wanted struct {
	tags       map[string]string
	forwarding *bool
	// secondary maps each secondary address to its ipConfiguration name.
	secondary map[netip.Addr]string
}

// decodePut reads a PUT for n against the NIC's fixed primary; it reads
// nothing but its arguments and the subnet.
func (s *Server) decodePut(n *nic, body []byte) (wanted, *armError) {
	var b putBody
	if err := json.Unmarshal(body, &b); err != nil {
		return wanted{}, errBadRequest("InvalidRequestFormat", "Cannot parse the request: "+clip(err.Error()))
	}
	if b.Properties == nil {
		return wanted{}, errBadRequest("InvalidRequestFormat", "The NIC has no properties.")
	}
	if len(b.Tags) > maxTags {
		return wanted{}, errBadRequest("InvalidTagCount", fmt.Sprintf("A resource has at most %d tags; %d were given.", maxTags, len(b.Tags)))
	}
	for k, v := range b.Tags {
		if k == "" || len(k) > maxTagName || len(v) > maxTagValue {
			return wanted{}, errBadRequest("InvalidTagNameOrValue", fmt.Sprintf("The tag %q: a name of 1 to %d characters and a value of at most %d.", clip(k), maxTagName, maxTagValue))
		}
	}
	w := wanted{tags: b.Tags, forwarding: b.Properties.EnableIPForwarding, secondary: map[netip.Addr]string{}}
	cfgs := b.Properties.IPConfigurations
	if len(cfgs) == 0 {
		return wanted{}, errBadRequest("NicMustHaveIpConfiguration", fmt.Sprintf("Network interface %s must have at least one IP configuration.", n.name))
	}
	names := map[string]bool{}
	seen := map[netip.Addr]bool{}
	primaries := 0
	for i, c := range cfgs {
		where := fmt.Sprintf("properties.ipConfigurations[%d]", i)
		if c.Name == "" || len(c.Name) > 80 || strings.ContainsAny(c.Name, "/?#") {
			return wanted{}, errBadRequest("InvalidRequestFormat", where+".name: want 1 to 80 characters without / ? #.")
		}
		if names[strings.ToLower(c.Name)] {
			return wanted{}, errBadRequest("InvalidRequestFormat", fmt.Sprintf("%s.name: %q is the name of another IP configuration of the NIC.", where, clip(c.Name)))
		}
		names[strings.ToLower(c.Name)] = true
		if c.Properties == nil || c.Properties.PrivateIPAddress == "" {
			return wanted{}, errBadRequest("InvalidRequestFormat", where+": ipfence armsim needs a static privateIPAddress.")
		}
		a, err := netip.ParseAddr(c.Properties.PrivateIPAddress)
		if err != nil || !a.Is4() {
			return wanted{}, errBadRequest("InvalidRequestFormat", fmt.Sprintf("%s.properties.privateIPAddress: %q is not an IPv4 address.", where, clip(c.Properties.PrivateIPAddress)))
		}
		if seen[a] {
			return wanted{}, errBadRequest("InvalidRequestFormat", fmt.Sprintf("%s: %s is in another IP configuration of the NIC.", where, a))
		}
		seen[a] = true
		if sub := c.Properties.Subnet; sub != nil && sub.ID != "" && !strings.EqualFold(sub.ID, s.subnetID) {
			return wanted{}, errBadRequest("InvalidRequestFormat", fmt.Sprintf("%s: subnet %s is not the NIC's (%s).", where, clip(sub.ID), s.subnetID))
		}
		primary := (c.Properties.Primary != nil && *c.Properties.Primary) || len(cfgs) == 1
		if primary {
			primaries++
			if a != n.primary || !strings.EqualFold(c.Name, primaryName) {
				return wanted{}, errBadRequest("PrimaryIpConfigurationRequired", fmt.Sprintf("Network interface %s must keep its primary IP configuration %s with %s; %s with %s was given.", n.name, primaryName, n.primary, clip(c.Name), a))
			}
			continue
		}
		if a == n.primary {
			return wanted{}, errBadRequest("PrimaryIpConfigurationRequired", fmt.Sprintf("%s: %s is the primary address of %s and stays in %s.", where, a, n.name, primaryName))
		}
		if !s.subnet.Contains(a) || a == s.subnet.Addr() || a == broadcast(s.subnet) {
			return wanted{}, errBadRequest("PrivateIPAddressNotInSubnet", fmt.Sprintf("IP configuration %s: the private IP address %s is not in the usable range of subnet %s.", clip(c.Name), a, s.subnet))
		}
		w.secondary[a] = c.Name
	}
	if primaries != 1 {
		return wanted{}, errBadRequest("PrimaryIpConfigurationRequired", fmt.Sprintf("Network interface %s must have exactly one primary IP configuration (%s); %d were given.", n.name, primaryName, primaries))
	}
	return w, nil
}

func broadcast(p netip.Prefix) netip.Addr {
	b := p.Addr().As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v |= 1<<(32-p.Bits()) - 1
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// stamp is the fencing token of a PUT.
type stamp struct {
	epoch capture.Epoch
	key   string
	addr  netip.Addr
	// rev is the etcd line revision (HeaderLineRevision); zero when none
	// was sent.
	rev int64
	// each holds the tokens of a PUT with HeaderAddresses.
	each map[netip.Addr]stamp
}

// of is the stamp of a's mutation.
func (st stamp) of(a netip.Addr) stamp {
	if one, ok := st.each[a]; ok {
		return one
	}
	return st
}

func decodeStamp(h http.Header) (stamp, *armError) {
	var st stamp
	one := func(name string) (string, bool, *armError) {
		vs, ok := h[name]
		if !ok {
			return "", false, nil
		}
		if len(vs) != 1 {
			return "", false, errBadRequest("InvalidRequestFormat", name+": send the header once.")
		}
		return vs[0], true, nil
	}
	rev, ok, err := one(HeaderLineRevision)
	if err != nil {
		return st, err
	}
	var revs []int64
	if ok {
		var perr error
		if revs, perr = provider.ParseLineRevisions(rev); perr != nil {
			return st, errBadRequest("InvalidRequestFormat", fmt.Sprintf("%s: %q is not a positive decimal etcd revision, or a comma-separated list of them.", HeaderLineRevision, clip(rev)))
		}
	}
	if v, ok, err := one(HeaderAddresses); err != nil {
		return st, err
	} else if ok {
		return decodeStamps(h, v, revs)
	}
	if len(revs) > 1 {
		return st, errBadRequest("InvalidRequestFormat", fmt.Sprintf("%s: a list, and only a PUT with %s takes lists.", HeaderLineRevision, HeaderAddresses))
	}
	if len(revs) == 1 {
		st.rev = revs[0]
	}
	if v, ok, err := one(HeaderEpoch); err != nil {
		return st, err
	} else if ok {
		n, perr := strconv.ParseUint(v, 10, 64)
		if perr != nil {
			return st, errBadRequest("InvalidRequestFormat", fmt.Sprintf("%s: %q is not a decimal epoch.", HeaderEpoch, clip(v)))
		}
		st.epoch = capture.Epoch(n)
	}
	if v, ok, err := one(HeaderIdempotencyKey); err != nil {
		return st, err
	} else if ok {
		if len(v) > maxKey {
			return st, errBadRequest("InvalidRequestFormat", fmt.Sprintf("%s: longer than %d bytes.", HeaderIdempotencyKey, maxKey))
		}
		st.key = v
	}
	if v, ok, err := one(HeaderAddress); err != nil {
		return st, err
	} else if ok {
		a, perr := netip.ParseAddr(v)
		if perr != nil {
			return st, errBadRequest("InvalidRequestFormat", fmt.Sprintf("%s: %q is not an IP address.", HeaderAddress, clip(v)))
		}
		st.addr = a
	}
	return st, nil
}

// decodeStamps reads the lists of a PUT carrying several actions.
// revs are HeaderLineRevision's values: none, or one per address.
func decodeStamps(h http.Header, addrs string, revs []int64) (stamp, *armError) {
	bad := func(msg string) (stamp, *armError) { return stamp{}, errBadRequest("InvalidRequestFormat", msg) }
	as := strings.Split(addrs, ",")
	var epochs, keys []string
	if vs := h[HeaderEpoch]; len(vs) == 1 {
		epochs = strings.Split(vs[0], ",")
	}
	if vs := h[HeaderIdempotencyKey]; len(vs) == 1 {
		keys = strings.Split(vs[0], ",")
	}
	if len(epochs) != len(as) || len(keys) != len(as) {
		return bad(fmt.Sprintf("%s names %d addresses: send as many epochs in %s and keys in %s, once each.", HeaderAddresses, len(as), HeaderEpoch, HeaderIdempotencyKey))
	}
	if len(revs) > 0 && len(revs) != len(as) {
		return bad(fmt.Sprintf("%s names %d addresses: send as many revisions in %s, or none.", HeaderAddresses, len(as), HeaderLineRevision))
	}
	st := stamp{each: make(map[netip.Addr]stamp, len(as))}
	for i, v := range as {
		a, err := netip.ParseAddr(v)
		if err != nil {
			return bad(fmt.Sprintf("%s: %q is not an IP address.", HeaderAddresses, clip(v)))
		}
		if _, dup := st.each[a]; dup {
			return bad(fmt.Sprintf("%s: %s is named twice.", HeaderAddresses, a))
		}
		n, err := strconv.ParseUint(epochs[i], 10, 64)
		if err != nil {
			return bad(fmt.Sprintf("%s: %q is not a decimal epoch.", HeaderEpoch, clip(epochs[i])))
		}
		if len(keys[i]) > maxKey {
			return bad(fmt.Sprintf("%s: longer than %d bytes.", HeaderIdempotencyKey, maxKey))
		}
		st.each[a] = stamp{epoch: capture.Epoch(n), key: keys[i], addr: a}
		if len(revs) > 0 {
			one := st.each[a]
			one.rev = revs[i]
			st.each[a] = one
		}
	}
	return st, nil
}

// servePut applies a PUT at one instant: the etag condition, the checks of
// the whole goal, then the changes, or nothing.
func (s *Server) servePut(w http.ResponseWriter, r *http.Request, name string, body []byte) *armError {
	st, aerr := decodeStamp(r.Header)
	if aerr != nil {
		return aerr
	}
	s.mu.Lock()
	s.now = s.clock()
	n := s.nics[name]
	if n == nil {
		s.mu.Unlock()
		return errNotFound(fmt.Sprintf("Resource 'Microsoft.Network/networkInterfaces/%s' under resource group '%s' (ipfence armsim never creates NICs)", name, s.rg))
	}
	if m := r.Header.Get("If-Match"); m != "" && m != "*" && m != n.etag {
		s.countStale(n, st)
		e := &armError{status: http.StatusPreconditionFailed, code: "PreconditionFailed",
			message: fmt.Sprintf("The condition If-Match %s does not match the etag %s of network interface %s: it changed since it was read.", clip(m), n.etag, name)}
		s.mu.Unlock()
		return e
	}
	if r.Header.Get("If-None-Match") == "*" {
		s.mu.Unlock()
		return &armError{status: http.StatusPreconditionFailed, code: "PreconditionFailed", message: fmt.Sprintf("Network interface %s exists (If-None-Match: *).", name)}
	}
	want, aerr := s.decodePut(n, body)
	if aerr == nil {
		for _, a := range slices.SortedFunc(mapKeys(want.secondary), netip.Addr.Compare) {
			if o, ok := s.owner[a]; ok && o != name {
				cfg := primaryName
				if on := s.nics[o]; on.primary != a {
					cfg = on.secondary[a]
				}
				aerr = errBadRequest("PrivateIPAddressInUse", fmt.Sprintf("IP configuration %s/ipConfigurations/%s is using the private IP address %s which is already allocated to resource %s/ipConfigurations/%s.", s.NICID(name), clip(want.secondary[a]), a, s.NICID(o), cfg))
				break
			}
		}
	}
	if aerr != nil {
		s.mu.Unlock()
		return aerr
	}
	// The operation takes the profile's settling time, drawn, and the
	// faults' delay; the provider shows its changes as it succeeds.
	took := s.pace.SettleWait(s.jitter) + time.Duration(s.faults.Delay)
	s.p.SetDelay(took)
	changed := s.applyLocked(n, want, st)
	opID := fmt.Sprintf("%08x-0000-4000-8000-%012x", uint32(hash64("op:"+s.sub)), s.opSeq+1)
	s.opSeq++
	op := &operation{id: opID, start: s.now, doneAt: s.now}
	if changed {
		op.doneAt = s.now.Add(took)
		if op.doneAt.Before(s.lastDone) {
			op.doneAt = s.lastDone
		}
		s.lastDone, n.busyUntil = op.doneAt, op.doneAt
	}
	s.ops[opID] = op
	// Keep the operations of the last while; older ones are polled by
	// nobody.
	if len(s.ops) > 100000 {
		for id, o := range s.ops {
			if s.now.Sub(o.doneAt) > time.Hour {
				delete(s.ops, id)
			}
		}
	}
	doc := s.nicJSON(n)
	// The answer always shows the operation in progress, so that the
	// caller polls the status as it must on ARM.
	doc.Properties.ProvisioningState = "Updating"
	for i := range doc.Properties.IPConfigurations {
		doc.Properties.IPConfigurations[i].Properties.ProvisioningState = "Updating"
	}
	s.mu.Unlock()
	if changed {
		s.log.Info("put accepted", "nic", name, "etag", doc.ETag, "epoch", st.epoch, "idempotencyKey", st.key)
	}
	scheme := "https"
	if r.TLS == nil {
		scheme = "http"
	}
	w.Header().Set("Azure-AsyncOperation", fmt.Sprintf("%s://%s%s?api-version=%s", scheme, r.Host, s.operationPath(opID), APIVersion))
	w.Header().Set("ETag", doc.ETag)
	writeJSON(w, http.StatusOK, doc)
	return nil
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// applyLocked makes the goal n's, queueing the mutations in the memory
// provider: removals first, so that the provider never sees an address on
// two NICs. It reports whether anything changed; a PUT that changes
// nothing keeps the etag, so repeating one does not void others' reads.
func (s *Server) applyLocked(n *nic, want wanted, st stamp) bool {
	changed := false
	req := func(a netip.Addr) provider.Request {
		one := st.of(a)
		return provider.Request{NIC: n.name, Address: a, Epoch: one.epoch, IdempotencyKey: one.key, LineRevision: one.rev}
	}
	for _, a := range n.sortedSecondary() {
		if _, keep := want.secondary[a]; keep {
			continue
		}
		delete(n.secondary, a)
		delete(s.owner, a)
		if err := s.p.Unassign(bgctx, req(a)); err != nil {
			s.log.Error("memory unassign", "error", err)
		} else {
			s.accept(capture.Unassign, req(a))
		}
		changed = true
	}
	for _, a := range slices.SortedFunc(mapKeys(want.secondary), netip.Addr.Compare) {
		if old, ok := n.secondary[a]; ok {
			if old != want.secondary[a] {
				n.secondary[a] = want.secondary[a]
				changed = true
			}
			continue
		}
		n.secondary[a] = want.secondary[a]
		s.owner[a] = n.name
		// Reassignment in the memory provider only because the removal
		// from the old NIC may still be queued: ARM's own check above
		// made sure no other NIC keeps the address.
		if err := s.p.Assign(bgctx, req(a), true); err != nil {
			s.log.Error("memory assign", "error", err)
		} else {
			s.accept(capture.Assign, req(a))
		}
		changed = true
	}
	if !maps.Equal(n.tags, want.tags) && (len(n.tags) > 0 || len(want.tags) > 0) {
		n.tags = maps.Clone(want.tags)
		changed = true
	}
	if want.forwarding != nil && *want.forwarding != n.forwarding {
		n.forwarding = *want.forwarding
		fr := req(st.addr)
		if err := s.p.SetForwarding(bgctx, fr, n.forwarding); err != nil {
			s.log.Error("memory forwarding", "error", err)
		} else if n.forwarding {
			s.accept(capture.EnableForwarding, fr)
		} else {
			s.accept(capture.DisableForwarding, fr)
		}
		changed = true
	}
	if changed {
		n.etag = s.newETag()
	}
	return changed
}

// Azure's limits on a resource's tags.
const (
	maxTags     = 50
	maxTagName  = 512
	maxTagValue = 256
)

// countStale counts a PUT refused for its etag as a stale write refused
// when an epoch it carries is below the one the NIC's epoch record
// (capture/provider/epochtag, in its tags) holds for the address: the
// cloud refused an action older than one it had applied. A record it
// cannot read counts nothing.
func (s *Server) countStale(n *nic, st stamp) {
	rec, err := epochtag.Decode(n.tags)
	if err != nil {
		return
	}
	stale := rec.Stale(st.addr, st.epoch)
	for a, one := range st.each {
		stale = stale || rec.Stale(a, one.epoch)
	}
	if stale {
		s.staleRefused++
	}
}

// StaleRefused is how many PUTs the simulator refused with 412 whose epoch
// for an address was below the one the NIC's epoch record held: stale
// actions the cloud itself stopped.
func (s *Server) StaleRefused() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.staleRefused
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, &armError{status: 500, code: CodeInternal, message: "encoding the answer failed"})
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func writeError(w http.ResponseWriter, e *armError) {
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(e.retryAfter.Seconds()))))
	}
	w.Header().Set("x-ms-error-code", e.code)
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"code": e.code, "message": e.message}})
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(e.status)
	_, _ = w.Write(b)
}

// acceptedChange is a change an accepted PUT queued, with the moment of
// its acceptance.
type acceptedChange struct {
	key changeKey
	at  time.Time
}

// changeKey names a change as the record will show it.
type changeKey struct {
	call    capture.Kind
	nic     string
	addr    netip.Addr
	epoch   capture.Epoch
	idemKey string
}

// accept notes a change queued now; the caller holds mu.
func (s *Server) accept(call capture.Kind, r provider.Request) {
	s.accepted = append(s.accepted, acceptedChange{changeKey{call, r.NIC, r.Address, r.Epoch, r.IdempotencyKey}, s.now})
}

// AcceptedTimes returns, for each mutation of ms (a prefix of Mutations),
// when ARM accepted the PUT that made it: the first change accepted with
// the same call, NIC, address, epoch and key not yet matched to an
// earlier mutation (the zero time for none). Visibility is first in,
// first out, so the changes become mutations in the order they were
// accepted; matching by content rather than position keeps an accepted
// change that never became a mutation from shifting the rest.
func (s *Server) AcceptedTimes(ms []provider.Mutation) []time.Time {
	s.mu.Lock()
	queues := map[changeKey][]time.Time{}
	for _, c := range s.accepted {
		queues[c.key] = append(queues[c.key], c.at)
	}
	s.mu.Unlock()
	out := make([]time.Time, len(ms))
	for i, m := range ms {
		k := changeKey{m.Call, m.NIC, m.Address, m.Epoch, m.IdempotencyKey}
		if q := queues[k]; len(q) > 0 {
			out[i], queues[k] = q[0], q[1:]
		}
	}
	return out
}
