package memory

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/provider"
)

// Error codes on the wire.
const (
	codeAssignedElsewhere = "assigned-elsewhere"
	codeUnknownNIC        = "unknown-nic"
	codeThrottled         = "throttled"
	codeUnavailable       = "unavailable"
	codeBadRequest        = "bad-request"
	codeNoRecord          = "no-record"
	codeInternal          = "internal"
)

// sentinels maps the codes that stand for a provider error to it.
var sentinels = map[string]error{
	codeAssignedElsewhere: provider.ErrAssignedElsewhere,
	codeUnknownNIC:        provider.ErrUnknownNIC,
	codeThrottled:         provider.ErrThrottled,
	codeUnavailable:       provider.ErrUnavailable,
}

// maxBody bounds a request body; a mutation is a few hundred bytes.
const maxBody = 1 << 20

// requestBody is the body of every mutation; reassign belongs to /assign
// only and enabled to /forwarding only. The flags are pointers so that a
// missing field can be told from false.
type requestBody struct {
	NIC            string `json:"nic"`
	Address        string `json:"address,omitempty"`
	Epoch          uint64 `json:"epoch,omitempty"`
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
	Reassign       *bool  `json:"reassign,omitempty"`
	Enabled        *bool  `json:"enabled,omitempty"`
}

type observationBody struct {
	Address    string `json:"address"`
	NIC        string `json:"nic"`
	Forwarding bool   `json:"forwarding"`
}

type mutationBody struct {
	Time           time.Time     `json:"time"`
	Call           capture.Kind  `json:"call"`
	NIC            string        `json:"nic"`
	Address        string        `json:"address"`
	Epoch          capture.Epoch `json:"epoch"`
	IdempotencyKey string        `json:"idempotencyKey"`
	From           string        `json:"from"`
	Enabled        bool          `json:"enabled"`
}

type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

// Handler serves p over HTTP, for Client. The wire format is JSON; a
// mutation's fields are the provider.Request's:
//
//	POST /assign      {"nic":"eni-a","address":"10.0.0.1","epoch":3,"idempotencyKey":"k","reassign":true}
//	POST /unassign    {"nic":"eni-a","address":"10.0.0.1","epoch":3,"idempotencyKey":"k"}
//	POST /forwarding  {"nic":"eni-a","address":"10.0.0.1","epoch":3,"idempotencyKey":"k","enabled":true}
//	    → 204 No Content
//	GET  /describe?address=10.0.0.1
//	    → 200 {"address":"10.0.0.1","nic":"eni-a","forwarding":true}
//	GET  /mutations
//	    → 200 [{"time":"2026-01-02T15:04:05.000000006Z","call":"assign-secondary-ip",
//	            "nic":"eni-b","address":"10.0.0.1","epoch":3,"idempotencyKey":"k",
//	            "from":"eni-a","enabled":false}]
//
// nic is required; address is required except for /forwarding, where it is
// informational; epoch and idempotencyKey may be omitted (zero); reassign
// defaults to false, the safe side; enabled is required, so that a client
// that forgets it cannot turn forwarding off by accident. Unknown fields,
// and reassign or enabled sent to the other endpoints, are rejected; so is
// a wrong method (405).
//
// A failure is a status and {"error":code,"message":text}, where code names
// the provider error: "assigned-elsewhere" (409), "unknown-nic" (404),
// "throttled" (429), "unavailable" (503), "bad-request" (400, the message
// naming the field), "no-record" (404, the provider keeps no mutations),
// "internal" (500). Client maps the code back to the sentinel error, and
// any other 5xx, or no answer at all, to provider.ErrUnavailable.
//
// Handler passes each request's context to p. /mutations needs p to be a
// provider.Recorder.
func Handler(p provider.Provider) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /assign", func(w http.ResponseWriter, r *http.Request) {
		if req, b, ok := decodeRequest(w, r, "reassign"); ok {
			writeResult(w, p.Assign(r.Context(), req, b.Reassign != nil && *b.Reassign))
		}
	})
	mux.HandleFunc("POST /unassign", func(w http.ResponseWriter, r *http.Request) {
		if req, _, ok := decodeRequest(w, r, ""); ok {
			writeResult(w, p.Unassign(r.Context(), req))
		}
	})
	mux.HandleFunc("POST /forwarding", func(w http.ResponseWriter, r *http.Request) {
		if req, b, ok := decodeRequest(w, r, "enabled"); ok {
			writeResult(w, p.SetForwarding(r.Context(), req, *b.Enabled))
		}
	})
	mux.HandleFunc("GET /describe", func(w http.ResponseWriter, r *http.Request) {
		s := r.URL.Query().Get("address")
		if s == "" {
			writeError(w, http.StatusBadRequest, codeBadRequest, `query parameter "address": required`)
			return
		}
		addr, err := netip.ParseAddr(s)
		if err != nil {
			writeError(w, http.StatusBadRequest, codeBadRequest, fmt.Sprintf(`query parameter "address": %v`, err))
			return
		}
		obs, err := p.Describe(r.Context(), addr)
		if err != nil {
			writeResult(w, err)
			return
		}
		writeJSON(w, http.StatusOK, observationBody{Address: obs.Address.String(), NIC: obs.NIC, Forwarding: obs.Forwarding})
	})
	mux.HandleFunc("GET /mutations", func(w http.ResponseWriter, r *http.Request) {
		rec, ok := p.(provider.Recorder)
		if !ok {
			writeError(w, http.StatusNotFound, codeNoRecord, fmt.Sprintf("provider %T keeps no record of mutations", p))
			return
		}
		ms := rec.Mutations()
		out := make([]mutationBody, len(ms))
		for i, m := range ms {
			out[i] = mutationBody{
				Time: m.Time, Call: m.Call, NIC: m.NIC, Address: addrString(m.Address),
				Epoch: m.Epoch, IdempotencyKey: m.IdempotencyKey, From: m.From, Enabled: m.Enabled,
			}
		}
		writeJSON(w, http.StatusOK, out)
	})
	return mux
}

// decodeRequest reads a mutation body whose only flag may be flag ("" for
// none), and answers 400 naming the offending field when it is malformed.
// The address is required unless the flag is "enabled": forwarding is set
// on a NIC, and its request's address is informational. "enabled" is
// required where it is allowed.
func decodeRequest(w http.ResponseWriter, r *http.Request, flag string) (provider.Request, requestBody, bool) {
	var b requestBody
	bad := func(msg string) (provider.Request, requestBody, bool) {
		writeError(w, http.StatusBadRequest, codeBadRequest, msg)
		return provider.Request{}, b, false
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	err := dec.Decode(&b)
	if err == nil && dec.More() {
		err = errors.New("body: trailing data after the JSON object")
	}
	switch {
	case err != nil:
		return bad(decodeMessage(err))
	case b.Reassign != nil && flag != "reassign":
		return bad(`field "reassign": unknown here`)
	case b.Enabled != nil && flag != "enabled":
		return bad(`field "enabled": unknown here`)
	case b.Enabled == nil && flag == "enabled":
		return bad(`field "enabled": required`)
	case b.NIC == "":
		return bad(`field "nic": required`)
	case b.Address == "" && flag != "enabled":
		return bad(`field "address": required`)
	}
	req := provider.Request{NIC: b.NIC, Epoch: capture.Epoch(b.Epoch), IdempotencyKey: b.IdempotencyKey}
	if b.Address != "" {
		if req.Address, err = netip.ParseAddr(b.Address); err != nil {
			return bad(fmt.Sprintf(`field "address": %v`, err))
		}
	}
	return req, b, true
}

// decodeMessage names the field a JSON decoding error is about, when the
// decoder says.
func decodeMessage(err error) string {
	var typ *json.UnmarshalTypeError
	var syn *json.SyntaxError
	var big *http.MaxBytesError
	switch {
	case errors.As(err, &typ) && typ.Field != "":
		return fmt.Sprintf("field %q: got JSON %s, want %s", typ.Field, typ.Value, typ.Type)
	case errors.As(err, &syn):
		return fmt.Sprintf("body: invalid JSON at offset %d: %v", syn.Offset, err)
	case errors.As(err, &big):
		return fmt.Sprintf("body: larger than %d bytes", big.Limit)
	case errors.Is(err, io.EOF):
		return "body: empty, want a JSON object"
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		// The decoder has no typed error for this one; its text is
		// `json: unknown field "x"`.
		return "field " + strings.TrimPrefix(err.Error(), "json: unknown field ") + ": unknown"
	}
	return "body: " + err.Error()
}

// writeResult answers a provider call: 204 on success, else the error.
func writeResult(w http.ResponseWriter, err error) {
	if err == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	switch {
	case errors.Is(err, provider.ErrAssignedElsewhere):
		writeError(w, http.StatusConflict, codeAssignedElsewhere, err.Error())
	case errors.Is(err, provider.ErrUnknownNIC):
		writeError(w, http.StatusNotFound, codeUnknownNIC, err.Error())
	case errors.Is(err, provider.ErrThrottled):
		writeError(w, http.StatusTooManyRequests, codeThrottled, err.Error())
	case errors.Is(err, provider.ErrUnavailable), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		writeError(w, http.StatusServiceUnavailable, codeUnavailable, err.Error())
	default:
		writeError(w, http.StatusInternalServerError, codeInternal, err.Error())
	}
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, errorBody{Error: code, Message: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// The status is out; a failed write means the client has gone, and
	// there is no one left to tell.
	_ = json.NewEncoder(w).Encode(v)
}

func addrString(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}

// Client is a provider.Provider that calls a Handler. It never retries:
// an acquire that failed in an unknown way must be planned afresh, not
// resent by a layer below the gate.
type Client struct {
	// BaseURL is where the Handler is served, such as
	// "http://127.0.0.1:8080"; a path prefix is kept.
	BaseURL string
	// HTTP makes the calls; nil means http.DefaultClient.
	HTTP *http.Client
}

// Assign implements provider.Provider.
func (c *Client) Assign(ctx context.Context, req provider.Request, reassign bool) error {
	b := wireRequest(req)
	b.Reassign = &reassign
	return c.mutate(ctx, "/assign", b)
}

// Unassign implements provider.Provider.
func (c *Client) Unassign(ctx context.Context, req provider.Request) error {
	return c.mutate(ctx, "/unassign", wireRequest(req))
}

// SetForwarding implements provider.Provider.
func (c *Client) SetForwarding(ctx context.Context, req provider.Request, enabled bool) error {
	b := wireRequest(req)
	b.Enabled = &enabled
	return c.mutate(ctx, "/forwarding", b)
}

// Describe implements provider.Provider.
func (c *Client) Describe(ctx context.Context, addr netip.Addr) (provider.Observation, error) {
	var b observationBody
	if err := c.get(ctx, "/describe?address="+url.QueryEscape(addrString(addr)), &b); err != nil {
		return provider.Observation{}, err
	}
	obs := provider.Observation{NIC: b.NIC, Forwarding: b.Forwarding}
	var err error
	if obs.Address, err = netip.ParseAddr(b.Address); err != nil {
		return provider.Observation{}, fmt.Errorf("memory client: describe %s: %w: bad address in answer: %w", addr, provider.ErrUnavailable, err)
	}
	return obs, nil
}

// Mutations fetches the provider's record of mutations, in apply order.
func (c *Client) Mutations(ctx context.Context) ([]provider.Mutation, error) {
	var bs []mutationBody
	if err := c.get(ctx, "/mutations", &bs); err != nil {
		return nil, err
	}
	ms := make([]provider.Mutation, len(bs))
	for i, b := range bs {
		ms[i] = provider.Mutation{
			Time: b.Time, Call: b.Call, NIC: b.NIC,
			Epoch: b.Epoch, IdempotencyKey: b.IdempotencyKey, From: b.From, Enabled: b.Enabled,
		}
		if b.Address != "" {
			a, err := netip.ParseAddr(b.Address)
			if err != nil {
				return nil, fmt.Errorf("memory client: mutations: entry %d: %w", i, err)
			}
			ms[i].Address = a
		}
	}
	return ms, nil
}

func wireRequest(req provider.Request) requestBody {
	return requestBody{NIC: req.NIC, Address: addrString(req.Address), Epoch: uint64(req.Epoch), IdempotencyKey: req.IdempotencyKey}
}

func (c *Client) mutate(ctx context.Context, path string, body any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("memory client: POST %s: %w", path, err)
	}
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, c.BaseURL+path, bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("memory client: POST %s: %w", path, err)
	}
	r.Header.Set("Content-Type", "application/json")
	return c.do(r, nil)
}

func (c *Client) get(ctx context.Context, path string, out any) error {
	r, err := http.NewRequestWithContext(ctx, http.MethodGet, c.BaseURL+path, nil)
	if err != nil {
		return fmt.Errorf("memory client: GET %s: %w", path, err)
	}
	return c.do(r, out)
}

// do sends r and decodes a 2xx answer into out (when not nil), or maps a
// failure to an error that errors.Is matches against the provider's.
func (c *Client) do(r *http.Request, out any) error {
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	what := r.Method + " " + r.URL.Path
	resp, err := hc.Do(r)
	if err != nil {
		// The request may have reached the provider before the
		// connection failed: exactly what ErrUnavailable means.
		return fmt.Errorf("memory client: %s: %w: %w", what, provider.ErrUnavailable, err)
	}
	defer func() {
		// Drain so that the connection can be reused.
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}()
	if resp.StatusCode/100 == 2 {
		if out == nil {
			return nil
		}
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return fmt.Errorf("memory client: %s: %w: bad answer: %w", what, provider.ErrUnavailable, err)
		}
		return nil
	}
	var eb errorBody
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if json.Unmarshal(raw, &eb) != nil || eb.Message == "" {
		eb = errorBody{Message: strings.TrimSpace(string(raw))}
	}
	re := &remoteError{msg: fmt.Sprintf("memory client: %s: %s: %s", what, resp.Status, eb.Message)}
	switch s, ok := sentinels[eb.Error]; {
	case ok:
		re.sentinel = s
	case resp.StatusCode >= 500:
		re.sentinel = provider.ErrUnavailable
	}
	return re
}

// remoteError is a failure the handler reported, carrying the server's
// message verbatim (it already names the address and NICs) and unwrapping
// to the provider error it stands for, if any.
type remoteError struct {
	msg      string
	sentinel error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.sentinel }

var _ provider.Provider = (*Client)(nil)
