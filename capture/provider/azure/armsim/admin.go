package armsim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/internal/monotime"
)

// bgctx is the context of the model's calls on the memory provider: once
// a PUT's checks passed, a caller that goes away must not cut it short.
var bgctx = context.Background()

// mutationJSON is a record entry as GET /admin/mutations shows it, in the
// EC2 and OCI dialects' shape, so that one reader (the capture test's
// checkers) serves all three: lower-case names, the time in RFC 3339 with
// nanoseconds, and Mono, the same moment on the machine's monotonic clock,
// which places the record among a harness's own readings in another
// process. A provider.Mutation decodes from it too (encoding/json matches
// names without regard to case and ignores mono).
//
// AcceptedMono is ARM's own addition: the moment on the same clock that
// ARM accepted the PUT making the change, from which GETs showed it;
// Mono, the moment it became visible, is Faults.Delay later. A checker of
// what clients read through ARM places the change at AcceptedMono; one of
// the data plane (who held the address) at Mono.
type mutationJSON struct {
	Time           string        `json:"time"`
	Mono           int64         `json:"mono"`
	AcceptedMono   int64         `json:"acceptedMono,omitempty"`
	Call           capture.Kind  `json:"call"`
	NIC            string        `json:"nic"`
	Address        string        `json:"address"`
	Epoch          capture.Epoch `json:"epoch"`
	IdempotencyKey string        `json:"idempotencyKey"`
	LineRevision   int64         `json:"lineRevision,omitempty"`
	From           string        `json:"from"`
	Enabled        bool          `json:"enabled"`
}

func (s *Server) mutationsJSON() []mutationJSON {
	ms := s.Mutations()
	accepted := s.AcceptedTimes(ms)
	// One pairing of both clocks, and every time converted by its
	// distance from it (exact between times that carry a monotonic
	// reading): converting each alone pairs the clocks again each time,
	// and two moments that were one (the changes of one PUT) could come
	// out some microseconds apart, in either order.
	mono := monotime.Pair().Of
	out := make([]mutationJSON, len(ms))
	for i, m := range ms {
		out[i] = mutationJSON{
			Time: m.Time.UTC().Format(time.RFC3339Nano), Mono: mono(m.Time), Call: m.Call, NIC: m.NIC,
			Epoch: m.Epoch, IdempotencyKey: m.IdempotencyKey, LineRevision: m.LineRevision, From: m.From, Enabled: m.Enabled,
		}
		if !accepted[i].IsZero() {
			out[i].AcceptedMono = mono(accepted[i])
		}
		if m.Address.IsValid() {
			out[i].Address = m.Address.String()
		}
	}
	return out
}

type adminError struct {
	Error string `json:"error"`
}

func (s *Server) serveAdmin(w http.ResponseWriter, r *http.Request) {
	switch r.Method + " " + r.URL.Path {
	case "GET /admin/state":
		writeJSON(w, http.StatusOK, s.State())
	case "GET /admin/mutations":
		writeJSON(w, http.StatusOK, s.mutationsJSON())
	case "GET /admin/stale":
		writeJSON(w, http.StatusOK, map[string]uint64{"refused": s.StaleRefused()})
	case "GET /admin/calls":
		writeJSON(w, http.StatusOK, s.Calls())
	case "GET /admin/identity":
		writeJSON(w, http.StatusOK, s.Identity())
	case "GET /admin/latency":
		writeJSON(w, http.StatusOK, s.Latency())
	case "GET /admin/faults":
		writeJSON(w, http.StatusOK, s.Faults())
	case "PUT /admin/faults":
		var f Faults
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
		dec.DisallowUnknownFields()
		err := dec.Decode(&f)
		if err == nil && dec.More() {
			err = errors.New("trailing data after the JSON object")
		}
		if err == nil {
			err = s.SetFaults(f)
		}
		if err != nil {
			writeJSON(w, http.StatusBadRequest, adminError{fmt.Sprintf("faults: %v", err)})
			return
		}
		writeJSON(w, http.StatusOK, s.Faults())
	case "POST /admin/flush":
		s.Flush()
		writeJSON(w, http.StatusOK, s.State())
	case "POST /admin/pause":
		s.Pause()
		writeJSON(w, http.StatusOK, s.State())
	case "POST /admin/resume":
		s.Resume()
		writeJSON(w, http.StatusOK, s.State())
	case "POST /admin/reset":
		s.Reset()
		writeJSON(w, http.StatusOK, s.State())
	default:
		writeJSON(w, http.StatusNotFound, adminError{"no such admin call: " + clip(r.Method+" "+r.URL.Path)})
	}
}
