package ocisim

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/internal/monotime"
)

// mutationJSON is a record entry as GET /admin/mutations shows it, in the
// EC2 dialect's shape, so that one reader serves both.
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

// State is what GET /admin/state shows.
type State struct {
	SubnetID   string      `json:"subnetId"`
	VNICs      []VNIC      `json:"vnics"`
	PrivateIPs []PrivateIP `json:"privateIps"`
	Faults     Faults      `json:"faults"`
	Paused     bool        `json:"paused"`
	Waiting    int         `json:"waiting"`
}

// State returns the control plane now, with the faults.
func (s *Server) State() State {
	st := State{SubnetID: s.subnetID, VNICs: s.VNICs(), PrivateIPs: s.PrivateIPs(), Faults: s.Faults(), Waiting: s.Waiting()}
	s.mu.Lock()
	st.Paused = s.resume != nil
	s.mu.Unlock()
	return st
}

// adminRoutes adds the admin API, JSON in and out, without
// authentication, in the EC2 dialect's shape:
//
//	GET  /admin/state      State
//	GET  /admin/mutations  the record, every applied mutation in order
//	GET  /admin/calls      the API calls by signer and operation (CallsBy)
//	GET  /admin/latency    the latency profile (Config.Latency), durations as strings
//	GET  /admin/faults     the faults
//	PUT  /admin/faults     replace the faults (unknown fields are refused with 400)
//	GET  /admin/stale      {"refused": N}: stale writes refused (StaleRefused)
//	POST /admin/pause      make API calls wait until resumed
//	POST /admin/resume     let them go on
//	POST /admin/reset      clear every fault and resume
//	POST /admin/flush      make every pending change visible now
func (s *Server) adminRoutes() {
	s.mux.HandleFunc("GET /admin/state", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.State())
	})
	s.mux.HandleFunc("GET /admin/mutations", func(w http.ResponseWriter, _ *http.Request) {
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
	s.mux.HandleFunc("GET /admin/stale", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]uint64{"refused": s.StaleRefused()})
	})
	s.mux.HandleFunc("GET /admin/calls", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.CallsBy())
	})
	s.mux.HandleFunc("GET /admin/latency", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.Latency())
	})
	s.mux.HandleFunc("GET /admin/faults", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.Faults())
	})
	s.mux.HandleFunc("PUT /admin/faults", func(w http.ResponseWriter, r *http.Request) {
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
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("faults: %v", err)})
			return
		}
		writeJSON(w, http.StatusOK, s.Faults())
	})
	for path, change := range map[string]func(){
		"POST /admin/pause": s.Pause, "POST /admin/resume": s.Resume, "POST /admin/reset": s.Reset, "POST /admin/flush": s.Flush,
	} {
		s.mux.HandleFunc(path, func(w http.ResponseWriter, _ *http.Request) {
			change()
			writeJSON(w, http.StatusOK, s.State())
		})
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
