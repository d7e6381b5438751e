package daemon

import (
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ipfence/ipfence/capture/auth"
)

// Who may call what. The API has two audiences:
//
//   - peers: the federation endpoints (events, records) and the on-premises
//     announcement. The caller must authenticate as a peer of this node:
//     its certificate's name under mutual TLS, its signed node name under
//     HMAC; the federation handler then also insists that a batch is
//     "from" that name.
//   - operators (ipfence ctl, the harness): everything else. With
//     federation.operator_secret_file set, operator requests must be
//     signed with that secret (under mutual TLS too, on top of the
//     certificate), and the federation's secret opens nothing but the
//     peer endpoints, so an operator's credential cannot forge node
//     events. Without it, the federation's credential serves both, as it
//     always did, and the node says so at start.
//
// Accepted signatures are persisted (replay*.db in the data folder) before
// the request is served, so a request captured before a restart is refused
// after it; a node whose replay log is new refuses requests signed before
// it started.

// peerPath reports whether path is served to peers only.
func peerPath(path string) bool {
	return strings.HasPrefix(path, "/v1/federation/") || path == "/v1/onprem/announce"
}

// openAccess builds the verifiers and opens their replay logs. Called by
// New before routes.
func (d *Daemon) openAccess() error {
	f := d.cfg.Federation
	if f.TLS == nil {
		v, err := d.verifierFor(f.Secret, filepath.Join(d.cfg.DataDir, "replay.db"))
		if err != nil {
			return err
		}
		d.verifier = v
	}
	if f.OperatorSecret != nil {
		v, err := d.verifierFor(f.OperatorSecret, filepath.Join(d.cfg.DataDir, "replay-operator.db"))
		if err != nil {
			return err
		}
		d.opVerifier = v
	} else {
		d.log.Warn("no federation.operator_secret_file: operators use the federation's credential, so whoever can call the operator API can also sign node events")
	}
	return nil
}

// verifierFor is a verifier of secret whose accepted signatures go to the
// replay log at path.
func (d *Daemon) verifierFor(secret []byte, path string) (*auth.Verifier, error) {
	log, live, fresh, err := auth.OpenReplayLog(path, d.now())
	if err != nil {
		return nil, err
	}
	d.replayLogs = append(d.replayLogs, log)
	v := &auth.Verifier{
		Secret: secret, Window: d.cfg.Federation.ReplayWindow, MaxBody: d.cfg.Federation.MaxBody,
		Now: d.now, OnReject: d.onReject, Log: log,
	}
	if fresh {
		// What this node accepted before, if anything, is unknown.
		v.NotBefore = d.now()
	}
	v.Preload(live)
	return v, nil
}

func (d *Daemon) onReject(reason string, r *http.Request) {
	d.mets.rejected.WithLabelValues(reason).Inc()
	d.log.Warn("request rejected", "reason", reason, "path", r.URL.Path, "remote", r.RemoteAddr)
}

// access authenticates every request to api by its audience (see above).
func (d *Daemon) access(api http.Handler) http.Handler {
	f := d.cfg.Federation
	peers := make([]string, len(d.cfg.Peers))
	for i, p := range d.cfg.Peers {
		peers[i] = p.Name
	}
	requirePeer := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if who := auth.Node(r.Context()); !slices.Contains(peers, who) {
				d.onReject("not-a-peer", r)
				writeError(w, http.StatusForbidden, "%q is not a peer of %s: %s is for peers only", who, d.cfg.Name, r.URL.Path)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	var peer, op http.Handler
	if f.TLS != nil {
		cc := &auth.ClientCerts{MaxBody: f.MaxBody, OnReject: d.onReject}
		peer = cc.Middleware(requirePeer(api))
		op = cc.Middleware(api)
		if d.opVerifier != nil {
			op = cc.Middleware(d.opVerifier.Middleware(api))
		}
	} else {
		peer = d.verifier.Middleware(requirePeer(api))
		op = d.verifier.Middleware(api)
		if d.opVerifier != nil {
			op = d.opVerifier.Middleware(api)
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if peerPath(r.URL.Path) {
			peer.ServeHTTP(w, r)
			return
		}
		op.ServeHTTP(w, r)
	})
}

// closeAccess closes the replay logs.
func (d *Daemon) closeAccess() {
	for _, l := range d.replayLogs {
		if err := l.Close(); err != nil {
			d.log.Error("closing a replay log", "err", fmt.Sprint(err))
		}
	}
	d.replayLogs = nil
}
