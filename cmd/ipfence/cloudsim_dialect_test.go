package main

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture/provider/azure/armsim"
	"github.com/ipfence/ipfence/internal/testenv"
)

func TestCloudsimDialectBadFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown dialect", []string{"--dialect", "gcp", "--nics", "a"}, `ipfence cloudsim: --dialect: "gcp" is neither ec2 nor arm`},
		{"arm with state", []string{"--dialect", "arm", "--nics", "a", "--state", t.TempDir()}, "--state: the arm dialect keeps its model in memory only"},
		{"cert with ec2", []string{"--nics", "eni-a", "--cert", "x.pem"}, "--cert: only for --dialect arm"},
		{"arm without NICs", []string{"--dialect", "arm"}, "--nics: the arm dialect needs the NIC names"},
		{"arm bad NIC", []string{"--dialect", "arm", "--nics", "a b"}, `armsim: NIC name "a b": slashes, spaces`},
		{"arm bad subnet", []string{"--dialect", "arm", "--nics", "a", "--subnet", "10.0.0.9/24"}, "armsim: subnet 10.0.0.9/24: want an IPv4 network address"},
		{"arm cert not writable", []string{"--dialect", "arm", "--nics", "a", "--cert", filepath.Join(t.TempDir(), "no", "such", "dir.pem")}, "--cert: open "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(append([]string{"cloudsim"}, tc.args...)...)
			if code != exitError || !strings.Contains(stderr, tc.want) || stdout != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 3 and %q", code, stdout, stderr, tc.want)
			}
		})
	}
}

// armProcess starts `cloudsim --dialect arm` and returns its URL, the
// certificate path it printed, and a stop that SIGTERMs it and returns
// its exit code.
func armProcess(t *testing.T, args ...string) (string, string, func() int) {
	t.Helper()
	cmd := exec.Command(testenv.Binary(t), append([]string{"cloudsim", "--dialect", "arm", "--listen", "127.0.0.1:0"}, args...)...)
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
	if code := stop(); code != exitValid {
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
	if code := stop(); code != exitValid {
		t.Fatalf("exit %d after SIGTERM", code)
	}
	if _, err := os.Stat(filepath.Dir(cert)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the certificate's directory after exit: %v, want it removed", err)
	}
}
