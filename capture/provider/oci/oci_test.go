package oci_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oracle/oci-go-sdk/v65/common"

	"github.com/ipfence/ipfence/capture/provider"
	"github.com/ipfence/ipfence/capture/provider/oci"
	"github.com/ipfence/ipfence/capture/provider/oci/ocisim"
	"github.com/ipfence/ipfence/capture/provider/providertest"
)

// The test's API key: made once per test binary, never written anywhere.
// 1024 bits (OCI asks 2048 of real keys): signing every call of the
// contract suite's concurrent movers with 2048-bit keys costs seconds of
// CPU on a loaded 2-core machine, and the simulator checks and verifies a
// signature the same way whatever its size.
var (
	keyOnce sync.Once
	key     *rsa.PrivateKey
	keyPEM  string
)

const (
	tenancy     = "ocid1.tenancy.oc1..ipfencetest"
	user        = "ocid1.user.oc1..ipfencetest"
	fingerprint = "00:11:22:33:44:55:66:77:88:99:aa:bb:cc:dd:ee:ff"
	keyID       = tenancy + "/" + user + "/" + fingerprint
)

func testKey(t testing.TB) (*rsa.PrivateKey, string) {
	t.Helper()
	keyOnce.Do(func() {
		k, err := rsa.GenerateKey(rand.Reader, 1024)
		if err != nil {
			panic(err)
		}
		key = k
		keyPEM = string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}))
	})
	return key, keyPEM
}

// counting sits in front of the simulator and counts calls by method and
// path shape, so tests can say how many of each the driver sent.
type counting struct {
	next  http.Handler
	mu    sync.Mutex
	calls map[string]int
}

func opOf(r *http.Request) string {
	p := strings.TrimPrefix(r.URL.Path, ocisim.BasePath)
	switch {
	case r.Method == http.MethodGet && p == "/privateIps":
		return ocisim.OpListPrivateIps
	case r.Method == http.MethodGet && strings.HasPrefix(p, "/privateIps/"):
		return ocisim.OpGetPrivateIp
	case r.Method == http.MethodPut && strings.HasPrefix(p, "/privateIps/"):
		return ocisim.OpUpdatePrivateIp
	case r.Method == http.MethodPost && p == "/privateIps":
		return ocisim.OpCreatePrivateIp
	case r.Method == http.MethodDelete:
		return ocisim.OpDeletePrivateIp
	case r.Method == http.MethodGet && strings.HasPrefix(p, "/vnics/"):
		return ocisim.OpGetVnic
	case r.Method == http.MethodPut && strings.HasPrefix(p, "/vnics/"):
		return ocisim.OpUpdateVnic
	}
	return r.Method + " " + p
}

func (c *counting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	c.calls[opOf(r)]++
	c.mu.Unlock()
	c.next.ServeHTTP(w, r)
}

func (c *counting) count(op string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[op]
}

// env is a simulator over TLS on loopback, the counter in front of it, and
// a driver on it, signing with the test's key, which the simulator
// verifies.
type env struct {
	sim *ocisim.Server
	cnt *counting
	srv *httptest.Server
	drv *oci.Driver
}

func newEnv(t *testing.T, vnics []string) *env {
	t.Helper()
	k, pemKey := testKey(t)
	sim, err := ocisim.New(ocisim.Config{VNICs: vnics, Keys: map[string]*rsa.PublicKey{keyID: &k.PublicKey}})
	if err != nil {
		t.Fatal(err)
	}
	cnt := &counting{next: sim, calls: map[string]int{}}
	srv := httptest.NewTLSServer(cnt)
	t.Cleanup(srv.Close)
	e := &env{sim: sim, cnt: cnt, srv: srv}
	e.drv = e.driver(t, pemKey)
	return e
}

// driver is another driver on the same simulator: another node.
func (e *env) driver(t *testing.T, pemKey string) *oci.Driver {
	t.Helper()
	drv, err := oci.New(oci.Options{
		SubnetID: e.sim.SubnetID(), Host: e.srv.URL, HTTPClient: e.srv.Client(),
		ConfigurationProvider: common.NewRawConfigurationProvider(tenancy, user, "us-ashburn-1", fingerprint, pemKey, nil),
		PollInterval:          10 * time.Millisecond, ReadAttempts: 3, MaxBackoff: 20 * time.Millisecond,
		VisibleTimeout: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	return drv
}

// recorded makes the driver a provider.Recorder through the simulator's
// authoritative history, so the suite checks that the fencing token
// travels in the headers.
type recorded struct {
	*oci.Driver
	sim *ocisim.Server
}

func (r recorded) Mutations() []provider.Mutation { return r.sim.Mutations() }

func TestContract(t *testing.T) {
	providertest.Run(t, func(t *testing.T, nics []string) provider.Provider {
		e := newEnv(t, nics)
		return recorded{e.drv, e.sim}
	})
}

// simFaults breaks the simulator through its fault settings.
type simFaults struct {
	t   *testing.T
	sim *ocisim.Server
}

func (f simFaults) FailMutations(err error) {
	code := ocisim.CodeTooManyRequests
	if errors.Is(err, provider.ErrUnavailable) {
		code = ocisim.CodeInternalServerError
	}
	rates := []ocisim.ErrorRate{{Code: code, Rate: 1}}
	fs := f.sim.Faults()
	fs.Errors = map[string][]ocisim.ErrorRate{
		ocisim.OpCreatePrivateIp: rates, ocisim.OpUpdatePrivateIp: rates, ocisim.OpDeletePrivateIp: rates, ocisim.OpUpdateVnic: rates,
	}
	if err := f.sim.SetFaults(fs); err != nil {
		f.t.Fatal(err)
	}
}

func (f simFaults) SetDelay(d time.Duration) {
	fs := f.sim.Faults()
	fs.RemapDelay = ocisim.Duration(d)
	if err := f.sim.SetFaults(fs); err != nil {
		f.t.Fatal(err)
	}
}

func (f simFaults) Heal() {
	if err := f.sim.SetFaults(ocisim.Faults{}); err != nil {
		f.t.Fatal(err)
	}
	f.sim.Flush()
}

func TestContractFaults(t *testing.T) {
	providertest.RunFaults(t, func(t *testing.T, nics []string) (provider.Provider, providertest.Faults) {
		e := newEnv(t, nics)
		return recorded{e.drv, e.sim}, simFaults{t, e.sim}
	})
}
