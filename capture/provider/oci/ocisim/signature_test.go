package ocisim

import (
	"strings"
	"testing"
)

func TestParseSignature(t *testing.T) {
	s, err := parseSignature(`Signature headers="date (request-target) host",keyId="t/u/f",algorithm="rsa-sha256",signature="AAAA",version="1"`)
	if err != nil {
		t.Fatal(err)
	}
	if s.keyID != "t/u/f" || s.algorithm != "rsa-sha256" || strings.Join(s.headers, " ") != "date (request-target) host" || len(s.sig) != 3 {
		t.Fatalf("parsed %+v", s)
	}
	for h, want := range map[string]string{
		`Signature version="1",version="1",keyId="t/u/f",algorithm="rsa-sha256",headers="date",signature="AAAA"`: "twice",
		`Signature version="1",keyId="t/u/f",algorithm="rsa-sha256",headers="date",signature="AAAA`:              "closing quote",
		`Signature version=1,keyId="t/u/f"`:                                                             "not quoted",
		`Signature version="1",keyId="t/u/f",algorithm="rsa-sha256",signature="AAAA"`:                   "no headers",
		`Signature version="1",keyId="ST$token",algorithm="rsa-sha256",headers="date",signature="AAAA"`: "",
	} {
		_, err := parseSignature(h)
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("parseSignature(%q) = %v, want %q", h, err, want)
		}
	}
}

// FuzzParseSignature: any header is parsed or refused, never a panic, and
// what is accepted has every field.
func FuzzParseSignature(f *testing.F) {
	f.Add(`Signature version="1",keyId="t/u/f",algorithm="rsa-sha256",headers="date (request-target) host",signature="AAAA"`)
	f.Add(`Signature version="1",keyId="ST$x",algorithm="rsa-sha256",headers="",signature=""`)
	f.Add(`Signature ="",=`)
	f.Fuzz(func(t *testing.T, h string) {
		s, err := parseSignature(h)
		if err != nil {
			return
		}
		if s.keyID == "" || s.algorithm != "rsa-sha256" || len(s.headers) == 0 || len(s.sig) == 0 {
			t.Fatalf("accepted %q as %+v", h, s)
		}
	})
}
