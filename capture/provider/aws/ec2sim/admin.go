package ec2sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/internal/monotime"
)

// mutationJSON is a record entry as GET /admin/mutations shows it: the
// time in RFC 3339 with nanoseconds, and lower-case names like the rest of
// the admin API. Mono is the same moment on the machine's monotonic clock
// (CLOCK_MONOTONIC nanoseconds), which a harness in another process on the
// same machine can compare with its own readings.
type mutationJSON struct {
	Time           string        `json:"time"`
	Mono           int64         `json:"mono"`
	Call           capture.Kind  `json:"call"`
	NIC            string        `json:"nic"`
	Address        string        `json:"address"`
	Epoch          capture.Epoch `json:"epoch"`
	IdempotencyKey string        `json:"idempotencyKey"`
	LineRevision   int64         `json:"lineRevision,omitempty"`
	From           string        `json:"from"`
	Enabled        bool          `json:"enabled"`
}

type adminError struct {
	Error string `json:"error"`
}

// adminRoutes adds the admin API; ServeHTTP documents it.
func (s *Server) adminRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /admin/state", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.State())
	})
	mux.HandleFunc("GET /admin/mutations", func(w http.ResponseWriter, _ *http.Request) {
		ms := s.Mutations()
		// One pairing of the clocks for the whole record, so that the
		// mutations keep their exact distances and order.
		clk := monotime.Pair()
		out := make([]mutationJSON, len(ms))
		for i, m := range ms {
			out[i] = mutationJSON{
				Time: m.Time.UTC().Format(time.RFC3339Nano), Mono: clk.Of(m.Time), Call: m.Call, NIC: m.NIC,
				Epoch: m.Epoch, IdempotencyKey: m.IdempotencyKey, LineRevision: m.LineRevision, From: m.From, Enabled: m.Enabled,
			}
			if m.Address.IsValid() {
				out[i].Address = m.Address.String()
			}
		}
		writeJSON(w, http.StatusOK, out)
	})
	mux.HandleFunc("GET /admin/latency", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.Latency())
	})
	mux.HandleFunc("GET /admin/faults", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.Faults())
	})
	mux.HandleFunc("PUT /admin/faults", func(w http.ResponseWriter, r *http.Request) {
		var f Faults
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
		dec.DisallowUnknownFields()
		err := dec.Decode(&f)
		if err == nil && dec.More() {
			err = errors.New("trailing data after the JSON object")
		}
		if err != nil {
			writeJSON(w, http.StatusBadRequest, adminError{fmt.Sprintf("faults: %v", err)})
			return
		}
		if err := f.validate(); err != nil {
			writeJSON(w, http.StatusBadRequest, adminError{fmt.Sprintf("faults: %v", err)})
			return
		}
		if err := s.SetFaults(f); err != nil {
			writeJSON(w, http.StatusInternalServerError, adminError{err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, s.Faults())
	})
	for path, change := range map[string]func() error{
		"POST /admin/pause":  s.Pause,
		"POST /admin/resume": s.Resume,
		"POST /admin/reset":  s.Reset,
		"POST /admin/flush":  s.Flush,
	} {
		mux.HandleFunc(path, func(w http.ResponseWriter, _ *http.Request) {
			if err := change(); err != nil {
				writeJSON(w, http.StatusInternalServerError, adminError{err.Error()})
				return
			}
			writeJSON(w, http.StatusOK, s.State())
		})
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// The status is out; a failed write means the client has gone.
	_ = json.NewEncoder(w).Encode(v)
}
