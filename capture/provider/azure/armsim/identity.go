package armsim

import (
	"fmt"
	"maps"
	"net/http"
	"strings"
)

// The simulator is also the Microsoft Entra ID authority of its callers,
// so that the unmodified azidentity chain (an EnvironmentCredential with
// AZURE_TENANT_ID, AZURE_CLIENT_ID and AZURE_CLIENT_SECRET, its authority
// host the simulator's URL and instance discovery off) gets its bearer
// token without contacting Microsoft. MSAL asks an authority with
// instance discovery off for exactly two things, under the tenant:
//
//	GET  /{tenant}/v2.0/.well-known/openid-configuration
//	POST /{tenant}/oauth2/v2.0/token   (grant_type=client_credentials)
//
// The token endpoint accepts any client id with a secret or assertion
// and a scope ending in /.default, and issues an opaque token. Every such
// request is recorded (IdentityLog), with how many ARM calls carried a
// token the simulator issued, so a test proves where its caller's token
// came from. With instance discovery on and a host Microsoft does not know,
// MSAL would first ask login.microsoftonline.com; the simulator never sees
// that request, which is why a caller must turn discovery off.

// OpenIDPath and TokenPath are the identity paths under /{tenant}.
const (
	OpenIDPath = "/v2.0/.well-known/openid-configuration"
	TokenPath  = "/oauth2/v2.0/token"
)

// tokenLifetime is the expires_in of an issued token, Entra ID's usual.
const tokenLifetime = 3599

// maxIdentityLog bounds the identity record; a caller refreshing its
// token hourly never comes near it.
const maxIdentityLog = 1000

// IdentityRequest is one request the identity endpoint answered.
type IdentityRequest struct {
	Method string `json:"method"`
	Path   string `json:"path"`
	Tenant string `json:"tenant"`
	// ClientID, GrantType and Scope are the token request's form.
	ClientID  string `json:"clientId,omitempty"`
	GrantType string `json:"grantType,omitempty"`
	Scope     string `json:"scope,omitempty"`
	// Status is the answer's HTTP status.
	Status int `json:"status"`
}

// IdentityLog is what the admin API's GET /admin/identity shows.
type IdentityLog struct {
	// Requests are the identity requests, oldest first (the first
	// maxIdentityLog).
	Requests []IdentityRequest `json:"requests"`
	// Issued counts the tokens issued.
	Issued int `json:"issued"`
	// ARMWithIssued and ARMWithOther count the ARM calls whose bearer
	// token the simulator issued, and the ones with any other token.
	ARMWithIssued uint64 `json:"armWithIssued"`
	ARMWithOther  uint64 `json:"armWithOther"`
}

// Identity returns the identity record.
func (s *Server) Identity() IdentityLog {
	s.mu.Lock()
	defer s.mu.Unlock()
	return IdentityLog{
		Requests: append([]IdentityRequest{}, s.idLog...), Issued: len(s.tokens),
		ARMWithIssued: s.armIssued.Load(), ARMWithOther: s.armOther.Load(),
	}
}

// OtherCaller is the caller Calls names for ARM calls whose bearer token
// the simulator did not issue.
const OtherCaller = "(other)"

// countCall notes whether an ARM call's bearer token is one the simulator
// issued and, when op is not empty, counts the call for the client the
// token was issued to (OtherCaller for any other token).
func (s *Server) countCall(token, op string) {
	s.mu.Lock()
	client, ok := s.tokens[token]
	if !ok {
		client = OtherCaller
	}
	if op != "" {
		if s.calls == nil {
			s.calls = map[string]map[string]uint64{}
		}
		byOp := s.calls[client]
		if byOp == nil {
			byOp = map[string]uint64{}
			s.calls[client] = byOp
		}
		byOp[op]++
	}
	s.mu.Unlock()
	if ok {
		s.armIssued.Add(1)
	} else {
		s.armOther.Add(1)
	}
}

// Calls counts the ARM calls that carried a bearer token, by the client
// id the token was issued to (OtherCaller for tokens the simulator did
// not issue) and by operation (OpGet, OpPut, OpList, OpStatus), answered
// or refused (throttled, injected errors, 412) alike: what a client's
// work cost in calls, which the record of mutations does not show. The
// clients are bounded by the tokens remembered as issued.
func (s *Server) Calls() map[string]map[string]uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]map[string]uint64, len(s.calls))
	for c, byOp := range s.calls {
		out[c] = maps.Clone(byOp)
	}
	return out
}

// identityRoute splits /{tenant}{OpenIDPath} or /{tenant}{TokenPath};
// ok is false for any other path.
func identityRoute(path string) (tenant, rest string, ok bool) {
	t, rest, found := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	if !found || t == "" || strings.EqualFold(t, "subscriptions") {
		return "", "", false
	}
	rest = "/" + rest
	if rest != OpenIDPath && rest != TokenPath {
		return "", "", false
	}
	return t, rest, true
}

// oauthError is an OAuth 2.0 error answer, which MSAL reports with its
// code and description.
func oauthError(w http.ResponseWriter, status int, code, desc string) {
	writeJSON(w, status, map[string]string{"error": code, "error_description": "ipfence armsim: " + desc})
}

// defaultScope reports whether a space-separated scope names a
// resource's /.default, as a client-credentials grant must (MSAL adds
// openid, profile and offline_access beside it).
func defaultScope(scope string) bool {
	for _, sc := range strings.Fields(scope) {
		if strings.HasSuffix(sc, "/.default") && len(sc) > len("/.default") {
			return true
		}
	}
	return false
}

// serveIdentity answers an identity request; tenant and rest come from
// identityRoute.
func (s *Server) serveIdentity(w http.ResponseWriter, r *http.Request, tenant, rest string) {
	rec := IdentityRequest{Method: r.Method, Path: clip(r.URL.Path), Tenant: clip(tenant)}
	status := http.StatusOK
	defer func() {
		rec.Status = status
		s.mu.Lock()
		if len(s.idLog) < maxIdentityLog {
			s.idLog = append(s.idLog, rec)
		}
		s.mu.Unlock()
	}()
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	base := fmt.Sprintf("%s://%s/%s", scheme, r.Host, tenant)
	switch {
	case rest == OpenIDPath && r.Method == http.MethodGet:
		// MSAL requires the three endpoints and checks that the issuer
		// is on the authority's host.
		writeJSON(w, status, map[string]any{
			"issuer":                                base + "/v2.0",
			"authorization_endpoint":                base + "/oauth2/v2.0/authorize",
			"token_endpoint":                        base + TokenPath,
			"token_endpoint_auth_methods_supported": []string{"client_secret_post", "private_key_jwt"},
			"response_types_supported":              []string{"code", "id_token", "token"},
			"tenant_region_scope":                   "NA",
		})
	case rest == TokenPath && r.Method == http.MethodPost:
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		if err := r.ParseForm(); err != nil {
			status = http.StatusBadRequest
			oauthError(w, status, "invalid_request", "the form could not be read: "+clip(err.Error()))
			return
		}
		rec.ClientID, rec.GrantType, rec.Scope = clip(r.PostForm.Get("client_id")), clip(r.PostForm.Get("grant_type")), clip(r.PostForm.Get("scope"))
		switch {
		case r.PostForm.Get("grant_type") != "client_credentials":
			status = http.StatusBadRequest
			oauthError(w, status, "unsupported_grant_type", "only client_credentials is served")
		case r.PostForm.Get("client_id") == "" || r.PostForm.Get("client_secret") == "" && r.PostForm.Get("client_assertion") == "":
			status = http.StatusUnauthorized
			oauthError(w, status, "invalid_client", "a client_id with a client_secret or client_assertion is required")
		case !defaultScope(r.PostForm.Get("scope")):
			status = http.StatusBadRequest
			oauthError(w, status, "invalid_scope", "the scope must be a resource's /.default")
		default:
			s.mu.Lock()
			if s.tokens == nil {
				s.tokens = map[string]string{}
			}
			token := fmt.Sprintf("armsim.%016x.%d", hash64(tenant+"\x00"+r.PostForm.Get("client_id")), len(s.tokens)+1)
			// Bounded as the log is: past the bound the oldest tokens
			// stay valid and no new ones are remembered as issued.
			if len(s.tokens) < maxIdentityLog {
				s.tokens[token] = r.PostForm.Get("client_id")
			}
			s.mu.Unlock()
			writeJSON(w, status, map[string]any{
				"token_type": "Bearer", "expires_in": tokenLifetime, "ext_expires_in": tokenLifetime, "access_token": token,
			})
		}
	default:
		status = http.StatusMethodNotAllowed
		oauthError(w, status, "invalid_request", r.Method+" is not served on "+rest)
	}
}
