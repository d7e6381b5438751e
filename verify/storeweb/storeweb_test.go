package storeweb

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/internal/testonly/testenv"
)

const (
	badRun  = "20261201T100000.000Z"
	openRun = "20261201T110000.000Z"
	etcdRun = "20261202T000000.000Z"
)

const cycle = `digraph "G2-item" {
  label="G2-item";
  node [shape=box, fontname="monospace"];
  T3 [label="T3 (process 1, ok)\n[[\"append\" 1 2]]"];
  T5 [label="T5 (process 2, ok)\n[[\"append\" 2 1]]"];
  T3 -> T5 [label="rw: T3 read key 2 before T5 appended 1", color="red", fontcolor="red"];
  T5 -> T3 [label="rw: T5 read key 1 before T3 appended 2", color="red", fontcolor="red"];
}
`

// makeStore writes a store as the harness does: an invalid capture run
// with every file a run page shows, a capture run still going (no
// results), a valid etcd run, the latest links, a secret, a hidden file
// and a link that leads out of the store.
func makeStore(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "outside.txt")
	write := func(rel, content string) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bad := "capture/" + badRun + "/"
	write(bad+"results.json", `{"checkers": {"fence": {"valid": false, "stale_actions_executed": 8},
		"single-holder": {"valid": true, "dual_holder_ms": 0}, "linear": {"valid": "unknown", "error": "timed out"}},
		"valid": false, "ops": 1403, "duration_s": 30.01, "seed": 11}`)
	write(bad+"seed", "11\n")
	write(bad+"command", "ipfence test capture --unsafe-disable-fence --seed 11 --store '<b>x</b>'\n")
	write(bad+"timeline.html", "<!doctype html><title>t</title><p>the timeline")
	write(bad+"latency.png", "\x89PNG\r\n\x1a\n")
	write(bad+"history.jsonl", `{"index":0,"type":"invoke","process":0,"f":"read"}`+"\n")
	write(bad+"logs/n1.log", "<script>alert(1)</script> n1 started\n")
	write(bad+"secret", "hunter2")
	write(bad+".hidden", "no")
	write(bad+"cycles/G2-item-0.dot", cycle)
	write(bad+"cycles/broken.dot", "digraph {\n a -> \n}")
	write("capture/"+openRun+"/seed", "12\n")
	write("etcd/"+etcdRun+"/results.json", `{"valid": true, "checkers": {"linear": {"valid": true}}, "ops": 50, "duration_s": 10, "seed": 3}`)
	if err := os.WriteFile(outside, []byte("outside the store"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, l := range [][2]string{
		{openRun, "capture/latest"}, {"capture/" + openRun, "latest"}, {etcdRun, "etcd/latest"},
		{outside, bad + "escape.txt"}, {"../../../" + filepath.Base(filepath.Dir(outside)), bad + "up"},
	} {
		if err := os.Symlink(l[0], filepath.Join(dir, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func get(t *testing.T, h http.Handler, path string) (int, http.Header, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	return rec.Code, rec.Header(), rec.Body.String()
}

func server(t *testing.T) *Server {
	t.Helper()
	s, err := New(makeStore(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestRuns(t *testing.T) {
	s := server(t)
	runs, more, err := s.Runs()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range runs {
		var cs []string
		for _, c := range r.Checkers {
			cs = append(cs, c.Name+"="+c.Verdict)
		}
		got = append(got, fmt.Sprintf("%s/%s %s seed=%s %s ops=%d [%s]", r.Test, r.ID, r.Start.Format(time.RFC3339), r.Seed, r.Verdict, r.Ops, strings.Join(cs, " ")))
	}
	want := []string{
		"etcd/" + etcdRun + " 2026-12-02T00:00:00Z seed=3 valid ops=50 [linear=true]",
		"capture/" + openRun + " 2026-12-01T11:00:00Z seed=12 incomplete ops=0 []",
		"capture/" + badRun + " 2026-12-01T10:00:00Z seed=11 invalid ops=1403 [fence=false linear=unknown single-holder=true]",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") || more != 0 {
		t.Errorf("runs (%d more):\n%s\nwant\n%s", more, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestRunsCache(t *testing.T) {
	dir := makeStore(t)
	s, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if r := s.load("etcd", etcdRun); r.Verdict != "valid" {
		t.Fatalf("etcd run: %s", r.Verdict)
	}
	// A results.json that changes (size and time) is read again.
	p := filepath.Join(dir, "etcd", etcdRun, "results.json")
	if err := os.WriteFile(p, []byte(`{"valid": false, "checkers": {}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(p, later, later); err != nil {
		t.Fatal(err)
	}
	if r := s.load("etcd", etcdRun); r.Verdict != "invalid" {
		t.Errorf("after results.json changed: %s, want invalid", r.Verdict)
	}
}

func TestListPage(t *testing.T) {
	code, h, body := get(t, server(t), "/")
	if code != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/html") {
		t.Fatalf("GET / = %d %s", code, h.Get("Content-Type"))
	}
	for _, want := range []string{
		`<span class="v invalid">invalid</span>`, `<span class="ck false">fence false</span>`,
		`<span class="v incomplete">incomplete</span>`, `<td>11</td>`, `2026-12-01 10:00:00 UTC`,
		`href="/run/capture/` + badRun + `/"`, `1403 in 30.0 s`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("run list lacks %s", want)
		}
	}
	if i, j := strings.Index(body, etcdRun), strings.Index(body, badRun); i < 0 || j < i {
		t.Error("runs are not listed newest first")
	}
}

func TestRunPage(t *testing.T) {
	s := server(t)
	code, _, body := get(t, s, "/run/capture/"+badRun+"/")
	if code != 200 {
		t.Fatalf("run page: %d %s", code, body)
	}
	base := "/file/capture/" + badRun + "/"
	for _, want := range []string{
		`<span class="v invalid" id="verdict">invalid</span>`, `<td id="seed">11</td>`,
		// The command is text, escaped.
		`--store &#39;&lt;b&gt;x&lt;/b&gt;&#39;`,
		`href="` + base + `timeline.html">timeline.html</a>`, `<img class="plot" src="` + base + `latency.png"`,
		`href="` + base + `logs/n1.log">logs/n1.log</a>`, `href="` + base + `history.jsonl"`,
		`src="/svg/capture/` + badRun + `/cycles/G2-item-0.dot"`, `&#34;stale_actions_executed&#34;:8`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("run page lacks %s", want)
		}
	}
	for _, not := range []string{"secret", ".hidden", "hunter2"} {
		if strings.Contains(body, not) {
			t.Errorf("run page shows %q", not)
		}
	}
	// latest is the run it links to.
	if code, _, body := get(t, s, "/run/capture/latest/"); code != 200 || !strings.Contains(body, `<td id="seed">12</td>`) ||
		!strings.Contains(body, "incomplete") || !strings.Contains(body, "2026-12-01 11:00:00 UTC") {
		t.Errorf("latest: %d", code)
	}
	if code, h, _ := get(t, s, "/run/capture/"+badRun); code != http.StatusMovedPermanently || h.Get("Location") != "/run/capture/"+badRun+"/" {
		t.Errorf("run without its slash: %d → %s", code, h.Get("Location"))
	}
}

func TestFiles(t *testing.T) {
	s := server(t)
	base := "/file/capture/" + badRun + "/"
	for _, c := range []struct {
		path        string
		code        int
		ctype, body string
	}{
		{base + "timeline.html", 200, "text/html; charset=utf-8", "the timeline"},
		{base + "logs/n1.log", 200, "text/plain; charset=utf-8", "<script>alert(1)</script> n1 started"},
		{base + "latency.png", 200, "image/png", "\x89PNG"},
		{base + "logs", 200, "text/html; charset=utf-8", `href="/file/capture/` + badRun + `/logs/n1.log"`},
		{base + "secret", 403, "", "secret: not served"},
		{base + ".hidden", 400, "", "plain name"},
		{base + "%2e%2e/" + openRun + "/seed", 400, "", "plain name"},
		{base + "..%2f..%2fetc/passwd", 400, "", "plain name"},
		{base + "escape.txt", 403, "", "outside the store"},
		{base + "up/outside.txt", 403, "", "outside the store"},
		{base + "nothing.txt", 404, "", "not in the store"},
		{"/file/.git/" + badRun + "/x", 400, "", "cannot be empty, begin with a dot"},
		{"/run/capture/nothing/", 404, "", "not in the store"},
		{"/svg/capture/" + badRun + "/cycles/G2-item-0.dot", 200, "image/svg+xml", "rw: T3 read key 2 before T5 appended 1"},
		{"/svg/capture/" + badRun + "/cycles/broken.dot", 422, "", "cycles/broken.dot: dot: line 3: want a node after ->"},
		{"/svg/capture/" + badRun + "/seed", 400, "", "only .dot files"},
		{"/svg/capture/" + badRun + "/missing.dot", 404, "", "not in the store"},
	} {
		code, h, body := get(t, s, c.path)
		if code != c.code || (c.ctype != "" && h.Get("Content-Type") != c.ctype) || !strings.Contains(body, c.body) {
			t.Errorf("GET %s = %d %q %.120q; want %d %q containing %q", c.path, code, h.Get("Content-Type"), body, c.code, c.ctype, c.body)
		}
		if h.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no nosniff", c.path)
		}
	}
	// Pages of the store run sandboxed, never as this server's origin.
	if _, h, _ := get(t, s, base+"timeline.html"); h.Get("Content-Security-Policy") != "sandbox allow-scripts" {
		t.Errorf("timeline.html CSP = %q", h.Get("Content-Security-Policy"))
	}
	// The mux cleans a plain ".." away with a redirect inside the server.
	code, h, _ := get(t, s, base+"../../../etc/passwd")
	if code/100 != 3 || h.Get("Location") != "/etc/passwd" {
		t.Errorf("GET with ..: %d → %s", code, h.Get("Location"))
	} else if code, _, _ := get(t, s, h.Get("Location")); code != 404 {
		t.Errorf("GET /etc/passwd = %d, want 404", code)
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("POST", "/", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST / = %d", rec.Code)
	}
}

func TestNewMissingStore(t *testing.T) {
	_, err := New(filepath.Join(t.TempDir(), "none"))
	if err == nil || !strings.Contains(err.Error(), "none") {
		t.Errorf("New on a missing store: %v", err)
	}
}

func TestBounds(t *testing.T) {
	dir := makeStore(t)
	big := filepath.Join(dir, "capture", badRun, "results.json")
	if err := os.WriteFile(big, bytes.Repeat([]byte(" "), maxResults+1), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := s.load("capture", badRun)
	if r.Verdict != "unknown" || !strings.Contains(r.Problem, "larger than 16777216 bytes") {
		t.Errorf("an oversized results.json: %+v", r)
	}
}

var (
	bodyTag = regexp.MustCompile(`<body\b[^>]*>`)
	dataRe  = regexp.MustCompile(`\bdata-([a-z]+)="([^"]*)"`)
)

// browse loads url in headless chromium and returns the DOM and the data
// attributes its scripts set on <body>.
func browse(t *testing.T, url string) (string, map[string]string) {
	t.Helper()
	chromium := testenv.Program(t, "chromium", "chromium-browser")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute) // a hang guard, not a speed
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+t.TempDir(), "--virtual-time-budget=5000", "--window-size=1400,900",
		"--enable-logging=stderr", "--v=0", "--dump-dom", url)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium on %s: %v\n%s", url, err, stderr.Bytes())
	}
	if strings.Contains(stderr.String(), "Uncaught") {
		t.Errorf("JavaScript error on %s:\n%s", url, stderr.String())
	}
	body := bodyTag.Find(out)
	if body == nil {
		// An SVG document has none.
		return string(out), nil
	}
	attrs := map[string]string{}
	for _, m := range dataRe.FindAllSubmatch(body, -1) {
		attrs[string(m[1])] = html.UnescapeString(string(m[2]))
	}
	if attrs["errors"] != "" {
		t.Errorf("script errors on %s: %s", url, attrs["errors"])
	}
	return string(out), attrs
}

func TestInBrowser(t *testing.T) {
	hs := httptest.NewServer(server(t))
	defer hs.Close()
	dom, attrs := browse(t, hs.URL+"/")
	if attrs["ready"] != "3" {
		t.Errorf("run list: ready = %q, want 3 runs", attrs["ready"])
	}
	for _, want := range []string{`<span class="ck false">fence false</span>`, `<span class="v valid">valid</span>`, ">" + badRun + "</a>"} {
		if !strings.Contains(dom, want) {
			t.Errorf("run list DOM lacks %s", want)
		}
	}
	dom, attrs = browse(t, hs.URL+"/run/capture/"+badRun+"/")
	if attrs["ready"] != "invalid" {
		t.Errorf("run page: ready = %q, want invalid", attrs["ready"])
	}
	for _, want := range []string{`<td id="seed">11</td>`, "logs/n1.log</a>", "timeline.html</a>", "cycles/G2-item-0.dot · <a"} {
		if !strings.Contains(dom, want) {
			t.Errorf("run page DOM lacks %s", want)
		}
	}
	// The cycle's SVG, loaded as a page: its texts are in the DOM.
	dom, _ = browse(t, hs.URL+"/svg/capture/"+badRun+"/cycles/G2-item-0.dot")
	if !strings.Contains(dom, "T5 (process 2, ok)") || !strings.Contains(dom, "<svg") {
		t.Errorf("SVG DOM:\n%.1000s", dom)
	}
}

func ExampleNew() {
	dir, _ := os.MkdirTemp("", "store")
	defer os.RemoveAll(dir)
	run := filepath.Join(dir, "capture", "20261201T100000.000Z")
	os.MkdirAll(run, 0o755)
	os.WriteFile(filepath.Join(run, "results.json"), []byte(`{"valid": false, "checkers": {"fence": {"valid": false}}}`), 0o644)

	s, err := New(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	body, _ := io.ReadAll(rec.Body)
	fmt.Println(rec.Code, strings.Contains(string(body), "fence false"))
	// Output: 200 true
}
