package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipfence/ipfence/internal/cli"
)

func TestWebRefuses(t *testing.T) {
	var out, errb bytes.Buffer
	missing := filepath.Join(t.TempDir(), "none")
	if code := run([]string{"web", "--store", missing}, &out, &errb); code != cli.ExitError ||
		!strings.Contains(errb.String(), "ipfence-verify web: store "+missing) || !strings.Contains(errb.String(), "ipfence-verify test capture") {
		t.Errorf("missing store: exit %d, %q", code, errb.String())
	}
	errb.Reset()
	if code := run([]string{"web", "--store", t.TempDir(), "--listen", "127.0.0.1:notaport"}, &out, &errb); code != cli.ExitError ||
		!strings.Contains(errb.String(), "--listen 127.0.0.1:notaport") {
		t.Errorf("bad --listen: exit %d, %q", code, errb.String())
	}
	errb.Reset()
	if code := run([]string{"web", "extra"}, &out, &errb); code != cli.ExitError || !strings.Contains(errb.String(), `unexpected argument "extra"`) {
		t.Errorf("extra argument: exit %d, %q", code, errb.String())
	}
}
