package auth_test

import (
	"crypto/x509"
	"errors"
	"strings"
	"testing"

	"github.com/ipfence/ipfence/capture/auth"
	"github.com/ipfence/ipfence/internal/testonly/testpki"
)

func eventKeys(t *testing.T, ca *testpki.CA, cn string) *auth.EventKeys {
	t.Helper()
	cert, key := ca.Issue(t, cn, x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth)
	k, err := auth.LoadEventKeys(cert, key, ca.CAFile())
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// An event signed by its origin checks wherever its certificate came with
// it; one that claims another origin, was altered, came under a
// certificate of another CA or with none does not.
func TestEventKeys(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, dir, "cluster")
	other := testpki.NewCA(t, dir, "other")
	n1, n2 := eventKeys(t, ca, "n1"), eventKeys(t, ca, "n2")
	if n1.Node() != "n1" || n1.KeyID() != auth.CertKeyID(n1.Cert()) || len(n1.KeyID()) != 32 {
		t.Fatalf("n1's keys: node %q, id %q", n1.Node(), n1.KeyID())
	}
	msg := []byte("drain n3")
	sig, err := n1.Sign(msg)
	if err != nil {
		t.Fatal(err)
	}
	// n2 has not learned n1's certificate yet.
	if err := n2.Verify("n1", n1.KeyID(), msg, sig); !errors.Is(err, auth.ErrEventSignature) || !strings.Contains(err.Error(), "did not come with it") {
		t.Fatalf("unknown key: %v", err)
	}
	if id, err := n2.Learn(n1.Cert()); err != nil || id != n1.KeyID() || !n2.Known(id) {
		t.Fatalf("learning n1's certificate: %q %v", id, err)
	}
	if err := n2.Verify("n1", n1.KeyID(), msg, sig); err != nil {
		t.Fatalf("n1's own signature: %v", err)
	}
	for _, c := range []struct {
		what        string
		origin, id  string
		msg, sig    []byte
		errContains string
	}{
		{"another origin", "n3", n1.KeyID(), msg, sig, `key ` + n1.KeyID() + ` is "n1"'s`},
		{"altered", "n1", n1.KeyID(), []byte("drain n2"), sig, "does not match"},
		{"unsigned", "n1", "", msg, nil, "not signed"},
		{"bit flipped", "n1", n1.KeyID(), msg, append(append([]byte{}, sig[:len(sig)-1]...), sig[len(sig)-1]^1), "does not match"},
	} {
		err := n2.Verify(c.origin, c.id, c.msg, c.sig)
		if !errors.Is(err, auth.ErrEventSignature) || !strings.Contains(err.Error(), c.errContains) {
			t.Errorf("%s: %v, want an error with %q", c.what, err, c.errContains)
		}
	}
	// A certificate of another CA, garbage, nothing, too much.
	stranger := eventKeys(t, other, "n1")
	for what, der := range map[string][]byte{"another CA": stranger.Cert(), "garbage": []byte("not DER"), "empty": nil, "huge": make([]byte, 1<<20)} {
		if _, err := n2.Learn(der); !errors.Is(err, auth.ErrEventSignature) {
			t.Errorf("learning %s: %v", what, err)
		}
	}
	// A certificate whose CommonName is no node name (the CA signs what
	// it is asked to).
	cert, key := ca.Issue(t, "not a node", x509.ExtKeyUsageClientAuth)
	if _, err := auth.LoadEventKeys(cert, key, ca.CAFile()); err == nil || !strings.Contains(err.Error(), "not a node name") {
		t.Fatalf("keys of a certificate naming no node: %v", err)
	}
	if _, err := auth.LoadEventKeys(ca.Path("missing.pem"), ca.Path("missing-key.pem"), ca.CAFile()); err == nil {
		t.Fatal("keys from missing files")
	}
}
