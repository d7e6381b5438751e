// Package pageload measures how long a self-contained HTML report takes to
// open in headless Chromium: the time from navigation start to the end of
// the page's first draw, as the page's own clock (performance.now) reads
// it. The reports draw synchronously while the document loads, so a probe
// script placed after theirs runs once the first draw is done.
package pageload

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/ipfence/ipfence/internal/testonly/testenv"
)

// probe records, after the page's scripts, the ms since navigation start
// and how long the browser took to read the document (responseEnd: the
// file read and the HTML parser's share up to there).
const probe = `<script>
document.body.dataset.loadms = String(Math.round(performance.now()));
(function () {
  var n = performance.getEntriesByType("navigation")[0];
  if (n) document.body.dataset.responsems = String(Math.round(n.responseEnd));
})();
</script>
`

var (
	bodyTag = regexp.MustCompile(`<body\b[^>]*>`)
	dataRe  = regexp.MustCompile(`\bdata-([a-z]+)="([^"]*)"`)
)

// Load is one load of a page.
type Load struct {
	// Ms is the page's clock at the end of its first draw: ms from
	// navigation start.
	Ms float64
	// Wall is how long the chromium process ran, start-up and exit
	// included.
	Wall time.Duration
	// Attrs are the data attributes on <body> after the load.
	Attrs map[string]string
}

// Measure loads the page at path in headless Chromium with the probe
// appended before </body> (skipped without chromium, failed in CI) and
// returns what it measured. Virtual time is left off: it would stop the
// page's clock.
func Measure(tb testing.TB, path string) Load {
	tb.Helper()
	chromium := testenv.Program(tb, "chromium", "chromium-browser")
	page, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	at := bytes.LastIndex(page, []byte("</body>"))
	if at < 0 {
		tb.Fatalf("%s has no </body>", path)
	}
	probed := filepath.Join(tb.TempDir(), filepath.Base(path))
	withProbe := append(append(append([]byte{}, page[:at]...), probe...), page[at:]...)
	if err := os.WriteFile(probed, withProbe, 0o644); err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium,
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+tb.TempDir(), "--window-size=1400,900",
		"--dump-dom", "file://"+probed)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	began := time.Now()
	out, err := cmd.Output()
	wall := time.Since(began)
	if err != nil {
		tb.Fatalf("chromium on %s: %v\n%s", path, err, stderr.Bytes())
	}
	attrs, err := bodyAttrs(out)
	if err != nil {
		tb.Fatalf("chromium on %s: %v", path, err)
	}
	if attrs["errors"] != "" {
		tb.Fatalf("script errors in %s: %s", path, attrs["errors"])
	}
	ms, err := strconv.ParseFloat(attrs["loadms"], 64)
	if err != nil {
		tb.Fatalf("chromium on %s: the probe did not run (data-loadms %q); the page's script stopped before it?", path, attrs["loadms"])
	}
	return Load{Ms: ms, Wall: wall, Attrs: attrs}
}

// bodyAttrs returns the data attributes of the <body> in a dumped DOM.
func bodyAttrs(dom []byte) (map[string]string, error) {
	body := bodyTag.Find(dom)
	if body == nil {
		return nil, fmt.Errorf("the DOM has no <body>: %.500s", dom)
	}
	attrs := map[string]string{}
	for _, m := range dataRe.FindAllSubmatch(body, -1) {
		attrs[string(m[1])] = html.UnescapeString(string(m[2]))
	}
	return attrs, nil
}

// Bench writes a page named name with write (into a temporary folder, or
// $IPFENCE_REPORT_OUT/1m when set, where it stays), then loads it once
// per iteration, checks each load with check, and reports the mean
// load-ms and the page's page-bytes: the body the report benchmarks
// share.
func Bench(b *testing.B, name string, write func(io.Writer) error, check func(Load) error) {
	dir := b.TempDir()
	if out := os.Getenv("IPFENCE_REPORT_OUT"); out != "" {
		dir = filepath.Join(out, "1m")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	path := filepath.Join(dir, name)
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := write(f); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	var ms float64
	b.ResetTimer()
	for b.Loop() {
		l := Measure(b, path)
		if err := check(l); err != nil {
			b.Fatal(err)
		}
		ms += l.Ms
	}
	b.ReportMetric(ms/float64(b.N), "load-ms")
	b.ReportMetric(float64(st.Size()), "page-bytes")
}
