package azure_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture/provider/azure"
	"github.com/ipfence/ipfence/capture/provider/azure/armsim"
)

// loopbackOnly is the test's only way out: it passes requests to the
// simulator's host and refuses (and records) any other, so a request
// meant for Microsoft fails here instead of leaving the machine.
type loopbackOnly struct {
	host string
	next *http.Client
	mu   sync.Mutex
	away []string
}

func (l *loopbackOnly) Do(r *http.Request) (*http.Response, error) {
	if r.URL.Host != l.host {
		l.mu.Lock()
		l.away = append(l.away, r.Method+" "+r.URL.String())
		l.mu.Unlock()
		return nil, fmt.Errorf("test transport: %s is not the simulator", r.URL.Host)
	}
	return l.next.Do(r)
}

// envCredential sets the environment an EnvironmentCredential reads, with
// the default chain narrowed to it (AZURE_TOKEN_CREDENTIALS), so no
// managed-identity probe is ever made, and an AZURE_AUTHORITY_HOST that
// the driver's AuthorityHost must override.
func envCredential(t *testing.T) {
	t.Setenv("AZURE_TOKEN_CREDENTIALS", "EnvironmentCredential")
	t.Setenv("AZURE_TENANT_ID", "72f988bf-0000-4000-8000-00000000a001")
	t.Setenv("AZURE_CLIENT_ID", "node-app")
	t.Setenv("AZURE_CLIENT_SECRET", "s3cret")
	t.Setenv("AZURE_AUTHORITY_HOST", "https://login.invalid/")
	for _, k := range []string{"AZURE_CLIENT_CERTIFICATE_PATH", "AZURE_USERNAME", "AZURE_PASSWORD", "AZURE_REGIONAL_AUTHORITY_NAME"} {
		t.Setenv(k, "")
	}
}

// The default chain, unmodified, gets its token from the simulator's
// identity endpoint when AuthorityHost names it: the two requests MSAL
// makes (OpenID metadata, then the client-credentials grant) and nothing
// else, in particular no instance discovery at login.microsoftonline.com;
// every ARM call then carries the issued token.
func TestDefaultChainTokenFromSimulator(t *testing.T) {
	envCredential(t)
	sim, err := armsim.New(armsim.Config{NICs: []string{"nic-a"}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(sim)
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	tr := &loopbackOnly{host: u.Host, next: srv.Client()}
	drv, err := azure.New(azure.Options{SubscriptionID: sim.SubscriptionID(), ResourceGroup: sim.ResourceGroup(),
		AuthorityHost: srv.URL, Endpoint: srv.URL, Transport: tr, PollFrequency: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := drv.Assign(t.Context(), req("nic-a", 1), false); err != nil {
		t.Fatalf("Assign through the default chain: %v (requests away from the simulator: %v)", err, tr.away)
	}
	if len(tr.away) != 0 {
		t.Fatalf("requests away from the simulator: %v", tr.away)
	}
	id := sim.Identity()
	tenant := "72f988bf-0000-4000-8000-00000000a001"
	want := []armsim.IdentityRequest{
		{Method: "GET", Path: "/" + tenant + armsim.OpenIDPath, Tenant: tenant, Status: 200},
		{Method: "POST", Path: "/" + tenant + armsim.TokenPath, Tenant: tenant, ClientID: "node-app", GrantType: "client_credentials",
			Scope: "https://management.core.windows.net//.default openid offline_access profile", Status: 200},
	}
	if fmt.Sprint(id.Requests) != fmt.Sprint(want) {
		t.Fatalf("identity requests\n%+v\nwant\n%+v", id.Requests, want)
	}
	if id.Issued != 1 || id.ARMWithIssued < 2 || id.ARMWithOther != 0 {
		t.Fatalf("issued %d tokens; ARM calls with one %d, with another token %d", id.Issued, id.ARMWithIssued, id.ARMWithOther)
	}
	if ms := sim.Mutations(); len(ms) != 1 || ms[0].NIC != "nic-a" {
		t.Fatalf("record %+v", ms)
	}
}

// The token endpoint refuses what Entra ID would: another grant, a
// client without a secret, a scope that is not a resource's /.default.
func TestTokenEndpointRefusals(t *testing.T) {
	sim, err := armsim.New(armsim.Config{NICs: []string{"nic-a"}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(sim)
	defer srv.Close()
	for _, c := range []struct {
		form url.Values
		want int
	}{
		{url.Values{"grant_type": {"password"}, "client_id": {"a"}, "client_secret": {"b"}, "scope": {"x/.default"}}, http.StatusBadRequest},
		{url.Values{"grant_type": {"client_credentials"}, "client_id": {"a"}, "scope": {"x/.default"}}, http.StatusUnauthorized},
		{url.Values{"grant_type": {"client_credentials"}, "client_id": {"a"}, "client_secret": {"b"}, "scope": {"x"}}, http.StatusBadRequest},
		{url.Values{"grant_type": {"client_credentials"}, "client_id": {"a"}, "client_secret": {"b"}, "scope": {"x/.default"}}, http.StatusOK},
	} {
		resp, err := srv.Client().PostForm(srv.URL+"/t1"+armsim.TokenPath, c.form)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%v: %d, want %d", c.form, resp.StatusCode, c.want)
		}
	}
	if id := sim.Identity(); id.Issued != 1 || len(id.Requests) != 4 {
		t.Fatalf("identity record %+v", id)
	}
}
