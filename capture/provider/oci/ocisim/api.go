package ocisim

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/provider"
	"github.com/ipfence/ipfence/capture/provider/epochtag"
)

// Identities the simulator reports for every object: one tenancy, one
// availability domain.
const (
	compartmentID      = "ocid1.compartment.oc1..ipfencesim"
	availabilityDomain = "Uocm:US-ASHBURN-AD-1"
)

// apiError is an OCI error answer.
type apiError struct {
	status int
	code   string
	msg    string
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.status, e.code, e.msg) }

func errInvalid(format string, args ...any) *apiError {
	return &apiError{http.StatusBadRequest, "InvalidParameter", fmt.Sprintf(format, args...)}
}

func errNotFound(format string, args ...any) *apiError {
	return &apiError{http.StatusNotFound, "NotAuthorizedOrNotFound", fmt.Sprintf(format, args...)}
}

var errGone = &apiError{http.StatusServiceUnavailable, CodeServiceUnavailable, "The service is unavailable; try again shortly."}

// clip shortens a value echoed in a message.
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

// call is one API call on its way through a handler.
type call struct {
	r    *http.Request
	body []byte
	st   stamp
}

// answer is a handler's successful reply.
type answer struct {
	status int
	body   any // nil for no body
	etag   string
	next   string // opc-next-page
}

type privateIPJSON struct {
	AvailabilityDomain string                    `json:"availabilityDomain"`
	CompartmentID      string                    `json:"compartmentId"`
	DefinedTags        map[string]map[string]any `json:"definedTags"`
	DisplayName        string                    `json:"displayName"`
	FreeformTags       map[string]string         `json:"freeformTags"`
	HostnameLabel      *string                   `json:"hostnameLabel,omitempty"`
	ID                 string                    `json:"id"`
	IPAddress          string                    `json:"ipAddress"`
	IsPrimary          bool                      `json:"isPrimary"`
	SubnetID           string                    `json:"subnetId"`
	TimeCreated        string                    `json:"timeCreated"`
	VnicID             string                    `json:"vnicId"`
	IPState            string                    `json:"ipState"`
	Lifetime           string                    `json:"lifetime"`
}

type vnicJSON struct {
	AvailabilityDomain  string                    `json:"availabilityDomain"`
	CompartmentID       string                    `json:"compartmentId"`
	DefinedTags         map[string]map[string]any `json:"definedTags"`
	DisplayName         string                    `json:"displayName"`
	FreeformTags        map[string]string         `json:"freeformTags"`
	ID                  string                    `json:"id"`
	IsPrimary           bool                      `json:"isPrimary"`
	LifecycleState      string                    `json:"lifecycleState"`
	MacAddress          string                    `json:"macAddress"`
	PrivateIP           string                    `json:"privateIp"`
	SkipSourceDestCheck bool                      `json:"skipSourceDestCheck"`
	SubnetID            string                    `json:"subnetId"`
	TimeCreated         string                    `json:"timeCreated"`
}

// Bodies of the writes. Fields the simulator does not model are refused
// when set, rather than silently ignored.
type createBody struct {
	VnicID        *string           `json:"vnicId"`
	IPAddress     *string           `json:"ipAddress"`
	DisplayName   *string           `json:"displayName"`
	HostnameLabel *string           `json:"hostnameLabel"`
	FreeformTags  map[string]string `json:"freeformTags"`
	DefinedTags   map[string]any    `json:"definedTags"`
	VlanID        *string           `json:"vlanId"`
	SubnetID      *string           `json:"subnetId"`
	Lifetime      string            `json:"lifetime"`
}

type updateBody struct {
	VnicID        *string           `json:"vnicId"`
	DisplayName   *string           `json:"displayName"`
	HostnameLabel *string           `json:"hostnameLabel"`
	FreeformTags  map[string]string `json:"freeformTags"`
	DefinedTags   map[string]any    `json:"definedTags"`
	Lifetime      string            `json:"lifetime"`
	RouteTableID  *string           `json:"routeTableId"`
}

type updateVnicBody struct {
	SkipSourceDestCheck *bool             `json:"skipSourceDestCheck"`
	DisplayName         *string           `json:"displayName"`
	FreeformTags        map[string]string `json:"freeformTags"`
	DefinedTags         map[string]any    `json:"definedTags"`
	HostnameLabel       *string           `json:"hostnameLabel"`
	NsgIDs              []string          `json:"nsgIds"`
	RouteTableID        *string           `json:"routeTableId"`
}

func sdkTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

func (s *Server) ipJSON(ip PrivateIP) privateIPJSON {
	out := privateIPJSON{
		AvailabilityDomain: availabilityDomain, CompartmentID: compartmentID,
		DefinedTags: map[string]map[string]any{}, DisplayName: ip.Display, FreeformTags: map[string]string{},
		ID: ip.ID, IPAddress: ip.Address.String(), IsPrimary: ip.Primary, SubnetID: s.subnetID,
		TimeCreated: sdkTime(ip.Created), VnicID: ip.VNIC, IPState: "ASSIGNED", Lifetime: "EPHEMERAL",
	}
	if ip.Hostname != "" {
		out.HostnameLabel = &ip.Hostname
	}
	for k, v := range ip.Freeform {
		out.FreeformTags[k] = v
	}
	return out
}

func (s *Server) vnicJSON(v *vnicState) vnicJSON {
	return vnicJSON{
		AvailabilityDomain: availabilityDomain, CompartmentID: compartmentID,
		DefinedTags: map[string]map[string]any{}, DisplayName: v.ID, FreeformTags: map[string]string{},
		ID: v.ID, IsPrimary: true, LifecycleState: "AVAILABLE", MacAddress: v.MAC, PrivateIP: v.PrimaryIP.String(),
		SkipSourceDestCheck: s.p.Forwarding(v.ID), SubnetID: s.subnetID, TimeCreated: sdkTime(v.created),
	}
}

func (s *Server) routes() {
	h := func(pattern, op string, f func(*call) (answer, *apiError)) {
		s.mux.HandleFunc(pattern, s.serve(op, f))
	}
	h("GET "+BasePath+"/privateIps/{id}", OpGetPrivateIp, s.getPrivateIP)
	h("GET "+BasePath+"/privateIps", OpListPrivateIps, s.listPrivateIPs)
	h("PUT "+BasePath+"/privateIps/{id}", OpUpdatePrivateIp, s.updatePrivateIP)
	h("POST "+BasePath+"/privateIps", OpCreatePrivateIp, s.createPrivateIP)
	h("DELETE "+BasePath+"/privateIps/{id}", OpDeletePrivateIp, s.deletePrivateIP)
	h("GET "+BasePath+"/vnics/{id}", OpGetVnic, s.getVnic)
	h("PUT "+BasePath+"/vnics/{id}", OpUpdateVnic, s.updateVnic)
	s.adminRoutes()
}

// ServeHTTP serves the OCI API under BasePath (see the package
// documentation) and the admin API under /admin (see adminRoutes).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// writes are the operations that change the placement.
var writes = map[string]bool{OpCreatePrivateIp: true, OpDeletePrivateIp: true, OpUpdatePrivateIp: true}

// serve wraps a handler with what every call goes through, in OCI's
// order: the body is read (bounded), the signature checked, the ipfence
// headers parsed, a pause waited out, the latency slept (the profile's,
// drawn, and the faults' on top), the
// token bucket and the injected errors drawn; then the handler runs under
// the lock with the clock frozen.
func (s *Server) serve(op string, f func(*call) (answer, *apiError)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.calls[op].Add(1)
		id := fmt.Sprintf("%032X", s.requests.Add(1))
		w.Header().Set("opc-request-id", id)
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			writeError(w, errInvalid("the request body could not be read: %v", err))
			return
		}
		if err := checkSignature(r, body, s.clock(), s.keys); err != nil {
			s.countCall(UnsignedCaller, op)
			writeError(w, &apiError{http.StatusUnauthorized, "NotAuthenticated", err.Error()})
			return
		}
		// checkSignature parsed it already; it cannot fail here.
		sig, _ := parseSignature(r.Header.Get("Authorization"))
		s.countCall(sig.keyID, op)
		st, aerr := parseStamp(r.Header)
		if aerr != nil {
			writeError(w, aerr)
			return
		}
		if !s.waitResumed(r.Context()) {
			writeError(w, errGone)
			return
		}
		s.mu.Lock()
		lat, timer := s.pace.Wait(op, s.jitter)+s.faults.latency(op), s.timer
		s.mu.Unlock()
		if lat > 0 {
			fired, stop := timer(lat)
			s.waiting.Add(1)
			select {
			case <-fired:
				s.waiting.Add(-1)
			case <-r.Context().Done():
				stop()
				s.waiting.Add(-1)
				writeError(w, errGone)
				return
			}
		}
		s.mu.Lock()
		s.now = s.clock()
		if !s.bucket.take(s.faults.Throttle, s.now) {
			s.mu.Unlock()
			w.Header().Set("Retry-After", "1")
			writeError(w, &apiError{http.StatusTooManyRequests, CodeTooManyRequests, "Too many requests for the tenancy"})
			return
		}
		if code := s.faults.draw(op, s.rng); code != "" {
			s.mu.Unlock()
			writeError(w, &apiError{injectedStatus[code], code, "injected by the simulator"})
			return
		}
		if writes[op] {
			// The change settles after the profile's settling time,
			// drawn, and the faults' remap delay.
			s.p.SetDelay(s.pace.SettleWait(s.jitter) + time.Duration(s.faults.RemapDelay))
		}
		ans, aerr := f(&call{r: r, body: body, st: st})
		s.mu.Unlock()
		if aerr != nil {
			writeError(w, aerr)
			return
		}
		if ans.etag != "" {
			w.Header().Set("etag", ans.etag)
		}
		if ans.next != "" {
			w.Header().Set("opc-next-page", ans.next)
		}
		if ans.body == nil {
			w.WriteHeader(ans.status)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(ans.status)
		_ = json.NewEncoder(w).Encode(ans.body)
	}
}

func writeError(w http.ResponseWriter, e *apiError) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.status)
	_ = json.NewEncoder(w).Encode(map[string]string{"code": e.code, "message": e.msg})
}

// parseStamp reads the ipfence headers; absent ones are zero.
func parseStamp(h http.Header) (stamp, *apiError) {
	var st stamp
	if v := h.Get(HeaderEpoch); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return st, errInvalid("header %s: %q is not a decimal epoch", HeaderEpoch, clip(v))
		}
		st.epoch = capture.Epoch(n)
	}
	st.key = h.Get(HeaderIdempotencyKey)
	if len(st.key) > maxIdempotencyKey {
		return st, errInvalid("header %s: longer than %d bytes", HeaderIdempotencyKey, maxIdempotencyKey)
	}
	if vs, ok := h[HeaderLineRevision]; ok {
		// Once, one positive revision: a repeated or malformed token is
		// the caller's bug, and recording the call under no token (or
		// under one of two) would hide it from the checker.
		if len(vs) != 1 {
			return st, errInvalid("header %s: send the header once", HeaderLineRevision)
		}
		revs, err := provider.ParseLineRevisions(vs[0])
		if err != nil || len(revs) != 1 {
			return st, errInvalid("header %s: %q is not a positive decimal etcd revision", HeaderLineRevision, clip(vs[0]))
		}
		st.rev = revs[0]
	}
	if v := h.Get(HeaderAddress); v != "" {
		a, err := netip.ParseAddr(v)
		if err != nil {
			return st, errInvalid("header %s: %q is not an IP address", HeaderAddress, clip(v))
		}
		st.addr = a
	}
	return st, nil
}

// decode reads a JSON body strictly: one object, no trailing data.
func decode(body []byte, v any) *apiError {
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		return errInvalid("the request body is not valid JSON for this operation: %v", err)
	}
	if dec.More() {
		return errInvalid("the request body has data after its JSON object")
	}
	return nil
}

// ifMatch refuses a write whose if-match names another ETag.
func ifMatch(c *call, current string) *apiError {
	v := c.r.Header.Get("If-Match")
	if v == "" || v == "*" || v == current {
		return nil
	}
	return &apiError{http.StatusPreconditionFailed, "NoEtagMatch", fmt.Sprintf("The if-match ETag %q does not match the resource's current ETag", clip(v))}
}

// countStale counts a refused write as a stale one when its epoch is
// below the one the private IP's epoch record (capture/provider/epochtag,
// in its freeform tags) holds: the cloud refused an action older than one
// it had applied. A record it cannot read counts nothing.
func (s *Server) countStale(c *call, ip *PrivateIP) {
	if rec, err := epochtag.Decode(ip.Freeform); err == nil && rec.Stale(ip.Address, c.st.epoch) {
		s.staleRefused++
	}
}

// visible is the private IP a read shows at a: a primary always; a
// secondary while the memory provider shows it on a VNIC, with that VNIC.
// The object is the control plane's, or the one a pending delete removed.
func (s *Server) visible(a netip.Addr) (PrivateIP, bool) {
	ip := s.ips[a]
	if ip != nil && ip.Primary {
		return *ip, true
	}
	h := s.p.Holder(a)
	if h == "" {
		return PrivateIP{}, false
	}
	if ip == nil {
		ip = s.gone(a)
	}
	if ip == nil {
		return PrivateIP{}, false
	}
	out := *ip
	out.VNIC = h
	return out, true
}

// gone finds the object a pending delete removed from the control plane.
func (s *Server) gone(a netip.Addr) *PrivateIP {
	var last *PrivateIP
	for _, ip := range s.byID {
		if ip.Address == a && s.ips[a] != ip && (last == nil || ip.Created.After(last.Created)) {
			last = ip
		}
	}
	return last
}

func (s *Server) getPrivateIP(c *call) (answer, *apiError) {
	id := c.r.PathValue("id")
	ip := s.byID[id]
	if ip == nil {
		return answer{}, errNotFound("PrivateIp %s not found", clip(id))
	}
	v, ok := s.visible(ip.Address)
	if !ok || v.ID != id {
		return answer{}, errNotFound("PrivateIp %s not found", clip(id))
	}
	return answer{status: http.StatusOK, body: s.ipJSON(v), etag: v.ETag}, nil
}

func (s *Server) listPrivateIPs(c *call) (answer, *apiError) {
	q := c.r.URL.Query()
	for k, vs := range q {
		if !slices.Contains([]string{"subnetId", "ipAddress", "vnicId", "limit", "page"}, k) {
			return answer{}, errInvalid("query parameter %s is not supported", clip(k))
		}
		if len(vs) != 1 {
			return answer{}, errInvalid("query parameter %s is given %d times", clip(k), len(vs))
		}
	}
	subnet, vnic, addr := q.Get("subnetId"), q.Get("vnicId"), q.Get("ipAddress")
	if subnet == "" && vnic == "" {
		return answer{}, &apiError{http.StatusBadRequest, "MissingParameter", "ListPrivateIps needs subnetId or vnicId"}
	}
	if addr != "" && subnet == "" {
		return answer{}, &apiError{http.StatusBadRequest, "MissingParameter", "ipAddress needs subnetId"}
	}
	if subnet != "" && subnet != s.subnetID {
		return answer{}, errNotFound("Subnet %s not found", clip(subnet))
	}
	if vnic != "" && s.vnics[vnic] == nil {
		return answer{}, errNotFound("Vnic %s not found", clip(vnic))
	}
	limit := defaultListLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxListLimit {
			return answer{}, errInvalid("limit %q: want 1 to %d", clip(v), maxListLimit)
		}
		limit = n
	}
	offset := 0
	if v := q.Get("page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return answer{}, errInvalid("page %q is not a page token this server gave", clip(v))
		}
		offset = n
	}
	var items []privateIPJSON
	if addr != "" {
		a, err := netip.ParseAddr(addr)
		if err != nil {
			return answer{}, errInvalid("ipAddress %q is not an IP address", clip(addr))
		}
		if v, ok := s.visible(a); ok && (vnic == "" || v.VNIC == vnic) {
			items = append(items, s.ipJSON(v))
		}
	} else {
		seen := map[netip.Addr]bool{}
		var addrs []netip.Addr
		for _, ip := range s.byID {
			if !seen[ip.Address] {
				seen[ip.Address] = true
				addrs = append(addrs, ip.Address)
			}
		}
		slices.SortFunc(addrs, netip.Addr.Compare)
		for _, a := range addrs {
			if v, ok := s.visible(a); ok && (vnic == "" || v.VNIC == vnic) {
				items = append(items, s.ipJSON(v))
			}
		}
	}
	ans := answer{status: http.StatusOK}
	if offset > len(items) {
		offset = len(items)
	}
	end := min(offset+limit, len(items))
	if end < len(items) {
		ans.next = strconv.Itoa(end)
	}
	page := items[offset:end]
	if page == nil {
		page = []privateIPJSON{}
	}
	ans.body = page
	return ans, nil
}

func (s *Server) usable(a netip.Addr) *apiError {
	if !a.Is4() || !s.subnet.Contains(a) {
		return errInvalid("%s is not in the subnet's CIDR %s", a, s.subnet)
	}
	if a == s.subnet.Addr() || a == broadcast(s.subnet) {
		return errInvalid("%s is the subnet's network or broadcast address", a)
	}
	return nil
}

// freeAddress is the lowest address of the subnet no private IP holds,
// for a create that names none.
func (s *Server) freeAddress() (netip.Addr, bool) {
	for a := s.subnet.Addr().Next().Next(); s.subnet.Contains(a) && a != broadcast(s.subnet); a = a.Next() {
		if s.ips[a] == nil {
			return a, true
		}
	}
	return netip.Addr{}, false
}

func (s *Server) createPrivateIP(c *call) (answer, *apiError) {
	token := c.r.Header.Get("Opc-Retry-Token")
	if len(token) > maxRetryToken {
		return answer{}, errInvalid("opc-retry-token is longer than %d characters", maxRetryToken)
	}
	sum := sha256.Sum256(c.body)
	digest := hex.EncodeToString(sum[:])
	if token != "" {
		s.expireTokens()
		if prev := s.tokens[token]; prev != nil {
			if prev.digest != digest {
				return answer{}, &apiError{http.StatusConflict, "Conflict", "The retry token was used before with a different request"}
			}
			return answer{status: prev.status, body: prev.body, etag: prev.etag}, nil
		}
	}
	var b createBody
	if err := decode(c.body, &b); err != nil {
		return answer{}, err
	}
	switch {
	case b.VlanID != nil:
		return answer{}, errInvalid("vlanId: VLANs are not simulated")
	case b.VnicID == nil || *b.VnicID == "":
		return answer{}, &apiError{http.StatusBadRequest, "MissingParameter", "vnicId is required"}
	case b.DisplayName != nil && len(*b.DisplayName) > maxDisplayName:
		return answer{}, errInvalid("displayName is longer than %d characters", maxDisplayName)
	}
	if b.SubnetID != nil && *b.SubnetID != s.subnetID {
		return answer{}, errInvalid("subnetId %s is not the VNIC's subnet", clip(*b.SubnetID))
	}
	vnic := s.vnics[*b.VnicID]
	if vnic == nil {
		return answer{}, errNotFound("Vnic %s not found", clip(*b.VnicID))
	}
	var a netip.Addr
	if b.IPAddress != nil {
		var err error
		if a, err = netip.ParseAddr(*b.IPAddress); err != nil {
			return answer{}, errInvalid("ipAddress %q is not an IP address", clip(*b.IPAddress))
		}
		if e := s.usable(a); e != nil {
			return answer{}, e
		}
		if held := s.ips[a]; held != nil {
			s.countStale(c, held)
			return answer{}, &apiError{http.StatusConflict, "Conflict", fmt.Sprintf("IP address %s is already in use by private IP %s on VNIC %s", a, held.ID, held.VNIC)}
		}
	} else {
		var ok bool
		if a, ok = s.freeAddress(); !ok {
			return answer{}, &apiError{http.StatusConflict, "Conflict", "The subnet has no free address"}
		}
	}
	ip := s.newIP(a, vnic.ID, false)
	if b.DisplayName != nil {
		ip.Display = *b.DisplayName
	}
	if b.HostnameLabel != nil {
		ip.Hostname = *b.HostnameLabel
	}
	if b.FreeformTags != nil {
		ip.Freeform = cloneTags(b.FreeformTags)
	}
	// The control plane judged the call; the memory provider places it
	// (after any remap delay), recording the fencing token.
	if err := s.p.Assign(context.Background(), request(vnic.ID, a, c.st), true); err != nil {
		return answer{}, &apiError{http.StatusInternalServerError, CodeInternalServerError, err.Error()}
	}
	ans := answer{status: http.StatusOK, body: s.ipJSON(*ip), etag: ip.ETag}
	if token != "" {
		s.tokens[token] = &retried{at: s.now, digest: digest, status: ans.status, body: ans.body, etag: ans.etag}
	}
	return ans, nil
}

// expireTokens forgets retry tokens older than their lifetime, and the
// oldest when there are too many.
func (s *Server) expireTokens() {
	for k, t := range s.tokens {
		if s.now.Sub(t.at) > retryTokenTTL {
			delete(s.tokens, k)
		}
	}
	for len(s.tokens) >= maxRetryTokens {
		var oldest string
		for k, t := range s.tokens {
			if oldest == "" || t.at.Before(s.tokens[oldest].at) {
				oldest = k
			}
		}
		delete(s.tokens, oldest)
	}
}

func (s *Server) updatePrivateIP(c *call) (answer, *apiError) {
	id := c.r.PathValue("id")
	ip := s.byID[id]
	if ip == nil || s.ips[ip.Address] != ip {
		return answer{}, errNotFound("PrivateIp %s not found", clip(id))
	}
	if e := ifMatch(c, ip.ETag); e != nil {
		s.countStale(c, ip)
		return answer{}, e
	}
	var b updateBody
	if err := decode(c.body, &b); err != nil {
		return answer{}, err
	}
	if b.DisplayName != nil && len(*b.DisplayName) > maxDisplayName {
		return answer{}, errInvalid("displayName is longer than %d characters", maxDisplayName)
	}
	if b.RouteTableID != nil {
		return answer{}, errInvalid("routeTableId: route tables are not simulated")
	}
	move := b.VnicID != nil && *b.VnicID != ip.VNIC
	if move {
		if ip.Primary {
			return answer{}, errInvalid("%s is the primary private IP of VNIC %s and cannot move", ip.Address, ip.VNIC)
		}
		if s.vnics[*b.VnicID] == nil {
			return answer{}, errNotFound("Vnic %s not found", clip(*b.VnicID))
		}
		if err := s.p.Assign(context.Background(), request(*b.VnicID, ip.Address, c.st), true); err != nil {
			return answer{}, &apiError{http.StatusInternalServerError, CodeInternalServerError, err.Error()}
		}
		ip.VNIC = *b.VnicID
	}
	if b.DisplayName != nil {
		ip.Display = *b.DisplayName
	}
	if b.HostnameLabel != nil {
		ip.Hostname = *b.HostnameLabel
	}
	if b.FreeformTags != nil {
		ip.Freeform = cloneTags(b.FreeformTags)
	}
	ip.bump()
	return answer{status: http.StatusOK, body: s.ipJSON(*ip), etag: ip.ETag}, nil
}

func (s *Server) deletePrivateIP(c *call) (answer, *apiError) {
	id := c.r.PathValue("id")
	ip := s.byID[id]
	if ip == nil || s.ips[ip.Address] != ip {
		return answer{}, errNotFound("PrivateIp %s not found", clip(id))
	}
	if e := ifMatch(c, ip.ETag); e != nil {
		s.countStale(c, ip)
		return answer{}, e
	}
	if ip.Primary {
		return answer{}, errInvalid("%s is the primary private IP of VNIC %s and cannot be deleted", ip.Address, ip.VNIC)
	}
	if err := s.p.Unassign(context.Background(), request(ip.VNIC, ip.Address, c.st)); err != nil {
		return answer{}, &apiError{http.StatusInternalServerError, CodeInternalServerError, err.Error()}
	}
	delete(s.ips, ip.Address)
	ip.bump()
	// The object stays findable by id while a pending delete still shows
	// it; forget the ones no read can show any more.
	for oid, o := range s.byID {
		if s.ips[o.Address] != o && s.p.Holder(o.Address) == "" {
			delete(s.byID, oid)
		}
	}
	return answer{status: http.StatusNoContent}, nil
}

func (s *Server) getVnic(c *call) (answer, *apiError) {
	id := c.r.PathValue("id")
	v := s.vnics[id]
	if v == nil {
		return answer{}, errNotFound("Vnic %s not found", clip(id))
	}
	return answer{status: http.StatusOK, body: s.vnicJSON(v), etag: v.etag()}, nil
}

func (s *Server) updateVnic(c *call) (answer, *apiError) {
	id := c.r.PathValue("id")
	v := s.vnics[id]
	if v == nil {
		return answer{}, errNotFound("Vnic %s not found", clip(id))
	}
	if e := ifMatch(c, v.etag()); e != nil {
		return answer{}, e
	}
	var b updateVnicBody
	if err := decode(c.body, &b); err != nil {
		return answer{}, err
	}
	if b.NsgIDs != nil || b.RouteTableID != nil {
		return answer{}, errInvalid("nsgIds and routeTableId are not simulated")
	}
	if b.SkipSourceDestCheck != nil {
		req := request(id, c.st.addr, c.st)
		if err := s.p.SetForwarding(context.Background(), req, *b.SkipSourceDestCheck); err != nil {
			return answer{}, &apiError{http.StatusInternalServerError, CodeInternalServerError, err.Error()}
		}
	}
	v.version++
	out := s.vnicJSON(v)
	if b.SkipSourceDestCheck != nil {
		// The answer shows the change made, visible or not yet.
		out.SkipSourceDestCheck = *b.SkipSourceDestCheck
	}
	return answer{status: http.StatusOK, body: out, etag: v.etag()}, nil
}
