package aws

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// closingBody stands for the SDK's request body at the moment that
// matters: it hands out its bytes, and by the time net/http makes its last
// check for more, the SDK has closed it (the response headers arrived), so
// its WriteTo answers io.EOF as the SDK's wrapper does once closed.
type closingBody struct {
	r      *strings.Reader
	closed bool
}

func (b *closingBody) Read(p []byte) (int, error) {
	if b.closed {
		return 0, io.EOF
	}
	n, err := b.r.Read(p)
	if b.r.Len() == 0 {
		b.closed = true
	}
	return n, err
}

func (b *closingBody) WriteTo(w io.Writer) (int64, error) {
	if b.closed {
		return 0, io.EOF
	}
	return b.r.WriteTo(w)
}

func (b *closingBody) Close() error { b.closed = true; return nil }

// TestPlainBodiesSendCleanly: with the SDK's body as it is, net/http's
// write of a request fails on its last check and the client sees an error
// (the connection is torn down); through plainBodies the same body makes
// ten clean requests.
func TestPlainBodiesSendCleanly(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_, _ = w.Write(b)
	}))
	defer srv.Close()
	send := func(c interface {
		Do(*http.Request) (*http.Response, error)
	}) error {
		req, err := http.NewRequest(http.MethodPost, srv.URL, &closingBody{r: strings.NewReader("Action=DescribeNetworkInterfaces")})
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = int64(len("Action=DescribeNetworkInterfaces"))
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err == nil && string(b) != "Action=DescribeNetworkInterfaces" {
			t.Fatalf("echo %q", b)
		}
		return err
	}

	// Without the wrapper the write usually fails (net/http sometimes
	// rescues it by a retry of its own); ten tries without one failure
	// would mean the hazard is gone or the test no longer shows it.
	bare := &http.Client{Transport: &http.Transport{}}
	failed := 0
	for range 10 {
		if send(bare) != nil {
			failed++
		}
	}
	if failed == 0 {
		t.Fatal("10 of 10 requests with the closing body succeeded without plainBodies; the failure it guards against is gone or this test no longer shows it")
	}

	wrapped := plainBodies{&http.Client{Transport: &http.Transport{}}}
	for i := range 10 {
		if err := send(wrapped); err != nil {
			t.Fatalf("request %d through plainBodies: %v", i, err)
		}
	}
}
