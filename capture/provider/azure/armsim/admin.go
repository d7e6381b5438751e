package armsim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// bgctx is the context of the model's calls on the memory provider: once
// a PUT's checks passed, a caller that goes away must not cut it short.
var bgctx = context.Background()

type adminError struct {
	Error string `json:"error"`
}

func (s *Server) serveAdmin(w http.ResponseWriter, r *http.Request) {
	switch r.Method + " " + r.URL.Path {
	case "GET /admin/state":
		writeJSON(w, http.StatusOK, s.State())
	case "GET /admin/mutations":
		writeJSON(w, http.StatusOK, s.Mutations())
	case "GET /admin/identity":
		writeJSON(w, http.StatusOK, s.Identity())
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
