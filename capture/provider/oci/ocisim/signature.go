package ocisim

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// maxClockSkew is how far a request's Date may be from the simulator's
// clock, as OCI refuses requests dated more than five minutes off.
const maxClockSkew = 5 * time.Minute

// signature is a parsed Authorization header of OCI's request signing
// (the draft-cavage HTTP signatures scheme, version 1).
type signature struct {
	keyID     string
	algorithm string
	headers   []string
	sig       []byte
}

// parseSignature reads `Signature version="1",keyId="…",algorithm="rsa-sha256",
// headers="…",signature="…"`. Every field must appear once; the order is
// free.
func parseSignature(h string) (signature, error) {
	var s signature
	rest, ok := strings.CutPrefix(h, "Signature ")
	if !ok {
		return s, errors.New(`the Authorization header is not "Signature …"`)
	}
	seen := map[string]string{}
	for rest != "" {
		name, after, ok := strings.Cut(rest, "=")
		if !ok {
			return s, fmt.Errorf("the Authorization header has a field without a value: %.40q", rest)
		}
		name = strings.TrimSpace(name)
		if !strings.HasPrefix(after, `"`) {
			return s, fmt.Errorf("field %s of the Authorization header is not quoted", clip(name))
		}
		end := strings.IndexByte(after[1:], '"')
		if end < 0 {
			return s, fmt.Errorf("field %s of the Authorization header has no closing quote", clip(name))
		}
		if _, dup := seen[name]; dup {
			return s, fmt.Errorf("field %s appears twice in the Authorization header", clip(name))
		}
		seen[name] = after[1 : 1+end]
		rest = strings.TrimPrefix(strings.TrimSpace(after[2+end:]), ",")
		rest = strings.TrimSpace(rest)
	}
	for _, f := range []string{"version", "keyId", "algorithm", "headers", "signature"} {
		if seen[f] == "" {
			return s, fmt.Errorf("the Authorization header has no %s", f)
		}
	}
	if v := seen["version"]; v != "1" {
		return s, fmt.Errorf("signature version %q, want \"1\"", clip(v))
	}
	s.keyID, s.algorithm = seen["keyId"], seen["algorithm"]
	if s.algorithm != "rsa-sha256" {
		return s, fmt.Errorf("signature algorithm %q, want rsa-sha256", clip(s.algorithm))
	}
	// An API key's id is tenancy/user/fingerprint; a security token's
	// (instance principals) is ST$<token>.
	if parts := strings.Split(s.keyID, "/"); !strings.HasPrefix(s.keyID, "ST$") && (len(parts) != 3 || slices.Contains(parts, "")) {
		return s, fmt.Errorf("keyId %q is neither tenancy/user/fingerprint nor ST$<token>", clip(s.keyID))
	}
	s.headers = strings.Fields(seen["headers"])
	var err error
	if s.sig, err = base64.StdEncoding.DecodeString(seen["signature"]); err != nil || len(s.sig) == 0 {
		return s, errors.New("the signature is not base64")
	}
	return s, nil
}

// checkSignature checks a request's signature: its shape, that it covers
// the headers OCI requires (date, (request-target), host, and for a body
// content-length, content-type and x-content-sha256), that the date is
// near now and the body hash is the body's, and, when keys holds the
// signer's public key, the RSA signature itself.
func checkSignature(r *http.Request, body []byte, now time.Time, keys map[string]*rsa.PublicKey) error {
	h := r.Header.Get("Authorization")
	if h == "" {
		return errors.New("the request is not signed: no Authorization header")
	}
	s, err := parseSignature(h)
	if err != nil {
		return err
	}
	need := []string{"date", "(request-target)", "host"}
	if r.Method == http.MethodPost || r.Method == http.MethodPut || r.Method == http.MethodPatch {
		need = append(need, "content-length", "content-type", "x-content-sha256")
	}
	for _, n := range need {
		if !slices.Contains(s.headers, n) {
			return fmt.Errorf("the signature does not cover %s", n)
		}
	}
	date := r.Header.Get("Date")
	if date == "" {
		date = r.Header.Get("X-Date")
	}
	t, err := http.ParseTime(date)
	if err != nil {
		return fmt.Errorf("the Date header %q is not an HTTP date", clip(date))
	}
	if d := now.Sub(t); d > maxClockSkew || d < -maxClockSkew {
		return fmt.Errorf("the Date header %s is more than %s from the server's clock %s", t.UTC().Format(time.RFC3339), maxClockSkew, now.UTC().Format(time.RFC3339))
	}
	if slices.Contains(s.headers, "x-content-sha256") {
		sum := sha256.Sum256(body)
		if got, want := r.Header.Get("X-Content-Sha256"), base64.StdEncoding.EncodeToString(sum[:]); got != want {
			return fmt.Errorf("x-content-sha256 %q is not the body's hash", clip(got))
		}
	}
	key := keys[s.keyID]
	if key == nil {
		if len(keys) > 0 {
			return fmt.Errorf("keyId %q is not a key the server knows", clip(s.keyID))
		}
		return nil
	}
	lines := make([]string, len(s.headers))
	for i, name := range s.headers {
		var v string
		switch name {
		case "(request-target)":
			v = strings.ToLower(r.Method) + " " + r.URL.RequestURI()
		case "host":
			v = r.Host
		default:
			if len(r.Header.Values(name)) == 0 {
				return fmt.Errorf("the signature covers %s, which the request does not carry", clip(name))
			}
			v = r.Header.Get(name)
		}
		lines[i] = name + ": " + v
	}
	digest := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	if rsa.VerifyPKCS1v15(key, crypto.SHA256, digest[:], s.sig) != nil &&
		rsa.VerifyPSS(key, crypto.SHA256, digest[:], s.sig, nil) != nil {
		return errors.New("the signature does not verify with the key of its keyId")
	}
	return nil
}
