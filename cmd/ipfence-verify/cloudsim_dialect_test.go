package main

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/oracle/oci-go-sdk/v65/common"

	"github.com/ipfence/ipfence/capture/provider"
	"github.com/ipfence/ipfence/capture/provider/azure/armsim"
	"github.com/ipfence/ipfence/capture/provider/oci"
	"github.com/ipfence/ipfence/capture/provider/oci/ocisim"
	"github.com/ipfence/ipfence/internal/cli"
)

func TestCloudsimDialectBadFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown dialect", []string{"--dialect", "gcp", "--nics", "a"}, `ipfence-verify cloudsim: --dialect: "gcp" is not ec2, arm or oci`},
		{"arm with state", []string{"--dialect", "arm", "--nics", "a", "--state", t.TempDir()}, "--state: the arm dialect keeps its model in memory only"},
		{"cert with ec2", []string{"--nics", "eni-a", "--cert", "x.pem"}, "--cert: only for --dialect arm or oci"},
		{"oci with state", []string{"--dialect", "oci", "--nics", "a", "--state", t.TempDir()}, "--state: the oci dialect keeps its model in memory only"},
		{"oci without VNICs", []string{"--dialect", "oci"}, "--nics: the oci dialect needs the VNIC OCIDs"},
		{"oci bad VNIC", []string{"--dialect", "oci", "--nics", "ocid1.vnic.oc1.iad.a,ocid1.vnic.oc1.iad.a"}, `ocisim: VNIC id "ocid1.vnic.oc1.iad.a" appears twice`},
		{"oci bad subnet", []string{"--dialect", "oci", "--nics", "a", "--subnet", "10.0.0.0/31"}, "ocisim: subnet 10.0.0.0/31: want an IPv4 network address from /16 to /30"},
		{"oci subnet not a prefix", []string{"--dialect", "oci", "--nics", "a", "--subnet", "ten"}, `--subnet: "ten" is not a prefix`},
		{"public key with arm", []string{"--dialect", "arm", "--nics", "a", "--public-key", "k=f"}, "--public-key: only for --dialect oci"},
		{"public key without id", []string{"--dialect", "oci", "--nics", "a", "--public-key", "key.pem"}, "--public-key key.pem: want KEYID=FILE"},
		{"public key id with space", []string{"--dialect", "oci", "--nics", "a", "--public-key", "t/u /f=key.pem"}, `key id "t/u /f" holds spaces`},
		{"public key missing", []string{"--dialect", "oci", "--nics", "a", "--public-key", "t/u/f=" + filepath.Join(t.TempDir(), "none.pem")}, "none.pem: no such file"},
		{"public key not PEM", []string{"--dialect", "oci", "--nics", "a", "--public-key", "t/u/f=" + writeFile(t, "x.pem", "not pem")}, "holds no PEM block"},
		{"private key given", []string{"--dialect", "oci", "--nics", "a", "--public-key", "t/u/f=" + writeFile(t, "k.pem", string(privatePEM(t)))}, `holds a "RSA PRIVATE KEY" block, not a public key`},
		{"public key twice", []string{"--dialect", "oci", "--nics", "a", "--public-key", "t/u/f=" + writeFile(t, "p.pem", string(publicPEM(t, &testKey().PublicKey))), "--public-key", "t/u/f=" + writeFile(t, "p.pem", string(publicPEM(t, &testKey().PublicKey)))}, `--public-key: key id "t/u/f" appears twice`},
		{"EC public key", []string{"--dialect", "oci", "--nics", "a", "--public-key", "t/u/f=" + writeFile(t, "ec.pem", string(ecPublicPEM(t)))}, "not an RSA key"},
		{"arm unknown latency", []string{"--dialect", "arm", "--nics", "a", "--latency", "slow"}, `ipfence-verify cloudsim: --latency: "slow" is not none or realistic`},
		{"oci unknown latency", []string{"--dialect", "oci", "--nics", "a", "--latency", "Realistic"}, `ipfence-verify cloudsim: --latency: "Realistic" is not none or realistic`},
		{"arm without NICs", []string{"--dialect", "arm"}, "--nics: the arm dialect needs the NIC names"},
		{"arm bad NIC", []string{"--dialect", "arm", "--nics", "a b"}, `armsim: NIC name "a b": slashes, spaces`},
		{"arm bad subnet", []string{"--dialect", "arm", "--nics", "a", "--subnet", "10.0.0.9/24"}, "armsim: subnet 10.0.0.9/24: want an IPv4 network address"},
		{"arm cert not writable", []string{"--dialect", "arm", "--nics", "a", "--cert", filepath.Join(t.TempDir(), "no", "such", "dir.pem")}, "--cert: open "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(append([]string{"cloudsim"}, tc.args...)...)
			if code != cli.ExitError || !strings.Contains(stderr, tc.want) || stdout != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 3 and %q", code, stdout, stderr, tc.want)
			}
		})
	}
}

// armProcess starts `cloudsim --dialect arm`; see tlsProcess.
func armProcess(t *testing.T, args ...string) (string, string, func() int) {
	t.Helper()
	return tlsProcess(t, "arm", args...)
}

// tlsProcess starts `cloudsim --dialect D` of a dialect served over TLS
// and returns its URL, the certificate path it printed, and a stop that
// SIGTERMs it and returns its exit code.
func tlsProcess(t *testing.T, dialect string, args ...string) (string, string, func() int) {
	t.Helper()
	// At once, as startSim's: these tests check the API, not its pace.
	cmd := exec.Command(binary(t), append([]string{"cloudsim", "--dialect", dialect, "--listen", "127.0.0.1:0", "--latency", "none"}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	rd := bufio.NewReader(out)
	lines := make(chan [2]string, 1)
	go func() {
		a, _ := rd.ReadString('\n')
		b, _ := rd.ReadString('\n')
		lines <- [2]string{a, b}
	}()
	var l [2]string
	select {
	case l = <-lines:
	case <-time.After(30 * time.Second):
		t.Fatalf("no ready lines after 30s; stderr:\n%s", stderr.String())
	}
	u, ok := strings.CutPrefix(strings.TrimSpace(l[0]), "listening on ")
	if !ok || !strings.HasPrefix(u, "https://127.0.0.1:") {
		t.Fatalf("first line %q, want listening on https://127.0.0.1:PORT", l[0])
	}
	cert, ok := strings.CutPrefix(strings.TrimSpace(l[1]), "certificate ")
	if !ok || !filepath.IsAbs(cert) {
		t.Fatalf("second line %q, want certificate /ABSOLUTE/PATH", l[1])
	}
	stop := func() int {
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, rd)
		err := cmd.Wait()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode()
	}
	return u, cert, stop
}

// The arm dialect serves ARM and the token endpoint over TLS with the
// certificate it wrote: a client trusting that file gets a token and reads
// a NIC with it (the simulator counts the call as carrying its token); a
// client without it is refused by TLS; SIGTERM ends it with 0.
func TestCloudsimDialectARM(t *testing.T) {
	want := filepath.Join(t.TempDir(), "sim.pem")
	base, cert, stop := armProcess(t, "--nics", "nic-a,nic-b", "--cert", want)
	if cert != want {
		t.Fatalf("certificate %s, want %s", cert, want)
	}
	pem, err := os.ReadFile(cert)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("%s holds no certificate", cert)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}

	if _, err := (&http.Client{Timeout: 10 * time.Second}).Get(base + "/admin/state"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a client without the certificate: %v, want a TLS verification error", err)
	}
	resp, err := client.PostForm(base+"/tenant-1"+armsim.TokenPath, url.Values{
		"grant_type": {"client_credentials"}, "client_id": {"app"}, "client_secret": {"s"}, "scope": {"https://management.core.windows.net//.default"}})
	if err != nil {
		t.Fatal(err)
	}
	var tok struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
		ExpiresIn   int    `json:"expires_in"`
	}
	err = json.NewDecoder(resp.Body).Decode(&tok)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || tok.AccessToken == "" || tok.TokenType != "Bearer" || tok.ExpiresIn != 3599 {
		t.Fatalf("token: %d %+v %v", resp.StatusCode, tok, err)
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/subscriptions/"+armsim.DefaultSubscription+"/resourceGroups/"+armsim.DefaultResourceGroup+
		"/providers/Microsoft.Network/networkInterfaces/nic-b?api-version="+armsim.APIVersion, nil)
	req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var nic struct {
		Name string `json:"name"`
	}
	err = json.NewDecoder(resp.Body).Decode(&nic)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || nic.Name != "nic-b" {
		t.Fatalf("GET nic-b: %d %+v %v", resp.StatusCode, nic, err)
	}
	resp, err = client.Get(base + "/admin/identity")
	if err != nil {
		t.Fatal(err)
	}
	var id armsim.IdentityLog
	err = json.NewDecoder(resp.Body).Decode(&id)
	resp.Body.Close()
	if err != nil || id.Issued != 1 || id.ARMWithIssued != 1 || id.ARMWithOther != 0 || len(id.Requests) != 1 || id.Requests[0].ClientID != "app" {
		t.Fatalf("identity record %+v %v", id, err)
	}
	if code := stop(); code != cli.ExitValid {
		t.Fatalf("exit %d after SIGTERM", code)
	}
}

// Without --cert the certificate goes to a temporary file that is removed
// when the simulator exits.
func TestCloudsimDialectARMTemporaryCert(t *testing.T) {
	_, cert, stop := armProcess(t, "--nics", "nic-a")
	if _, err := os.Stat(cert); err != nil {
		t.Fatalf("the certificate while running: %v", err)
	}
	if code := stop(); code != cli.ExitValid {
		t.Fatalf("exit %d after SIGTERM", code)
	}
	if _, err := os.Stat(filepath.Dir(cert)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the certificate's directory after exit: %v, want it removed", err)
	}
}

// writeFile writes a file in a temporary folder and returns its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// testKey is an RSA key for the OCI dialect's tests, made once: 1024 bits
// is enough for a test and quicker under -race than OCI's 2048.
var testKey = sync.OnceValue(func() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		panic(err)
	}
	return k
})

func privatePEM(t *testing.T) []byte {
	t.Helper()
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(testKey())})
}

func publicPEM(t *testing.T, k *rsa.PublicKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

func ecPublicPEM(t *testing.T) []byte {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// The oci dialect serves ocisim over TLS with the certificate it wrote and
// verifies signatures with the --public-key it was given: the unmodified
// SDK (through the OCI driver) signing with that key moves an address
// between two VNICs, and the record, read over the same TLS, shows both
// assigns with their epochs and monotonic times; the same SDK signing with
// another key is refused (401 NotAuthenticated), an unsigned request too,
// and a client that does not trust the certificate fails TLS.
func TestCloudsimDialectOCI(t *testing.T) {
	const (
		tenancy = "ocid1.tenancy.oc1..cli"
		user    = "ocid1.user.oc1..cli"
		fp      = "aa:bb:cc"
		a, b    = "ocid1.vnic.oc1.iad.a", "ocid1.vnic.oc1.iad.b"
	)
	keyID := tenancy + "/" + user + "/" + fp
	pub := writeFile(t, "key.pub.pem", string(publicPEM(t, &testKey().PublicKey)))
	base, cert, stop := tlsProcess(t, "oci", "--nics", a+","+b, "--subnet", "10.0.0.0/24", "--public-key", keyID+"="+pub)
	pemCert, err := os.ReadFile(cert)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemCert) {
		t.Fatalf("%s holds no certificate", cert)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	if _, err := (&http.Client{Timeout: 10 * time.Second}).Get(base + "/admin/state"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a client without the certificate: %v, want a TLS verification error", err)
	}
	var state ocisim.State
	getJSON(t, client, base+"/admin/state", &state)
	if len(state.VNICs) != 2 || !strings.HasPrefix(state.SubnetID, "ocid1.subnet.") {
		t.Fatalf("state %+v", state)
	}

	driver := func(key *rsa.PrivateKey) *oci.Driver {
		k := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
		d, err := oci.New(oci.Options{
			SubnetID: state.SubnetID, Host: base, HTTPClient: client, ReadAttempts: 1,
			ConfigurationProvider: common.NewRawConfigurationProvider(tenancy, user, "us-ashburn-1", fp, k, nil),
		})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	ctx := t.Context()
	addr := netip.MustParseAddr("10.0.0.10")
	d := driver(testKey())
	if err := d.Assign(ctx, provider.Request{NIC: a, Address: addr, Epoch: 1, IdempotencyKey: "k1"}, false); err != nil {
		t.Fatal(err)
	}
	if err := d.Assign(ctx, provider.Request{NIC: b, Address: addr, Epoch: 2, IdempotencyKey: "k2"}, true); err != nil {
		t.Fatal(err)
	}
	if obs, err := d.Describe(ctx, addr); err != nil || obs.NIC != b {
		t.Fatalf("describe: %+v %v, want it on %s", obs, err, b)
	}

	other, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := driver(other).Describe(ctx, addr); err == nil || !strings.Contains(err.Error(), "NotAuthenticated") {
		t.Fatalf("a request signed with another key: %v, want 401 NotAuthenticated", err)
	}
	resp, err := client.Get(base + ocisim.BasePath + "/privateIps?subnetId=" + url.QueryEscape(state.SubnetID))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("an unsigned request: %d, want 401", resp.StatusCode)
	}

	var ms []struct {
		Mono    int64  `json:"mono"`
		Call    string `json:"call"`
		NIC     string `json:"nic"`
		Address string `json:"address"`
		Epoch   uint64 `json:"epoch"`
		From    string `json:"from"`
	}
	getJSON(t, client, base+"/admin/mutations", &ms)
	var assigns []string
	for _, m := range ms {
		if m.Call == "assign-secondary-ip" {
			if m.Mono <= 0 || m.Address != addr.String() {
				t.Fatalf("mutation %+v: want a monotonic time and the address", m)
			}
			assigns = append(assigns, fmt.Sprintf("%s@%d from %q", m.NIC, m.Epoch, m.From))
		}
	}
	if want := []string{a + `@1 from ""`, b + "@2 from \"" + a + `"`}; !slices.Equal(assigns, want) {
		t.Fatalf("assigns in the record %q, want %q", assigns, want)
	}
	if code := stop(); code != cli.ExitValid {
		t.Fatalf("exit %d after SIGTERM", code)
	}
}

func getJSON(t *testing.T, client *http.Client, u string, out any) {
	t.Helper()
	resp, err := client.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", u, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
}
