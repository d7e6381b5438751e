// Package storeweb serves a test store for people: a list of the runs
// (test, start time, seed, verdict, each checker's verdict), a page per
// run (its results, command, plots, pages, logs and cycle drawings), the
// run's files, and the checkers' Graphviz cycles drawn as SVG.
//
// The store is what verify/harness writes: store/<test>/<run>/ with
// results.json, seed, command, history.jsonl, timeline.html, … and
// "latest" links. The server reads it through an os.Root, so no path —
// "..", an absolute path or a symbolic link out of the store — reaches
// outside it; names beginning with a dot and secrets (a file named secret,
// *.key, *.pem) are never served; and every file it parses is bounded
// (results.json, seed, command, .dot files).
package storeweb

import (
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ipfence/ipfence/verify/dot"
)

// Bounds on what the server reads and lists.
const (
	// MaxRuns is the most runs the list shows, the newest.
	MaxRuns = 1000
	// maxResults bounds a results.json the server parses.
	maxResults = 16 << 20
	// maxSmall bounds seed and command files.
	maxSmall = 64 << 10
	// maxEntries bounds the files a run page lists per folder.
	maxEntries = 500
	// maxDots bounds the cycle drawings a run page shows.
	maxDots = 100
)

// timestampLayout is how verify/harness names a run's folder.
const timestampLayout = "20060102T150405.000Z"

// Server serves one store. It is an http.Handler; Close releases the
// store's folder.
type Server struct {
	root *os.Root
	fsys fs.FS
	dir  string
	mux  *http.ServeMux

	// cache keeps each run's reading while its results.json keeps its
	// size and time: the list reads every run's results on every load,
	// and a finished run's never change.
	mu    sync.Mutex
	cache map[string]cachedRun
}

type cachedRun struct {
	size int64
	mod  time.Time
	run  Run
}

// New serves the store at dir, which must exist.
func New(dir string) (*Server, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", dir, err)
	}
	s := &Server{root: root, fsys: root.FS(), dir: dir, mux: http.NewServeMux(), cache: map[string]cachedRun{}}
	s.mux.HandleFunc("GET /{$}", s.list)
	s.mux.HandleFunc("GET /run/{test}/{run}/{$}", s.run)
	s.mux.HandleFunc("GET /run/{test}/{run}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Path+"/", http.StatusMovedPermanently)
	})
	s.mux.HandleFunc("GET /file/{test}/{run}/{path...}", s.file)
	s.mux.HandleFunc("GET /svg/{test}/{run}/{path...}", s.svg)
	return s, nil
}

// Close releases the store's folder.
func (s *Server) Close() error { return s.root.Close() }

// ServeHTTP serves the store.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "no-referrer")
	s.mux.ServeHTTP(w, r)
}

// validName says whether one path segment may name something in the store:
// not empty, no separator, no leading dot (which rules out "." and "..",
// and hidden files).
func validName(n string) bool {
	return n != "" && len(n) <= 255 && !strings.HasPrefix(n, ".") && !strings.ContainsAny(n, `/\`+"\x00")
}

// secret says whether a file must not be served: the nodes' shared secret
// and key material that test PKIs leave in a run's folder.
func secret(name string) bool {
	ext := path.Ext(name)
	return name == "secret" || ext == ".key" || ext == ".pem"
}

// runPath checks a request's test and run names and returns the run's
// folder within the store, or writes the error.
func runPath(w http.ResponseWriter, r *http.Request) (string, bool) {
	test, run := r.PathValue("test"), r.PathValue("run")
	if !validName(test) || !validName(run) {
		http.Error(w, fmt.Sprintf("no run %q of test %q: names cannot be empty, begin with a dot or hold a slash", run, test), http.StatusBadRequest)
		return "", false
	}
	return test + "/" + run, true
}

// filePath checks a request's path within a run and returns it within
// the store, or writes the error.
func filePath(w http.ResponseWriter, r *http.Request) (string, bool) {
	base, ok := runPath(w, r)
	if !ok {
		return "", false
	}
	p := r.PathValue("path")
	segs := strings.Split(p, "/")
	for _, seg := range segs {
		if !validName(seg) {
			http.Error(w, fmt.Sprintf("path %q: every part must be a plain name (not empty, no leading dot)", p), http.StatusBadRequest)
			return "", false
		}
	}
	if secret(segs[len(segs)-1]) {
		http.Error(w, fmt.Sprintf("%s is a secret: not served", p), http.StatusForbidden)
		return "", false
	}
	return base + "/" + p, true
}

// notFound writes a 404 for a store error, and a 500 for anything else.
func notFound(w http.ResponseWriter, what string, err error) {
	if errors.Is(err, fs.ErrNotExist) {
		http.Error(w, what+": not in the store", http.StatusNotFound)
		return
	}
	// os.Root's refusal of a path that leaves the store is no error of
	// the server's.
	if strings.Contains(err.Error(), "escapes") {
		http.Error(w, what+": outside the store", http.StatusForbidden)
		return
	}
	http.Error(w, fmt.Sprintf("%s: %v", what, err), http.StatusInternalServerError)
}

// readBounded reads a file of the store of at most limit bytes.
func (s *Server) readBounded(name string, limit int64) ([]byte, error) {
	f, err := s.root.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes: not read", name, limit)
	}
	return b, nil
}

// Run is one run as the list shows it.
type Run struct {
	Test, ID string
	// Start is parsed from the folder's name; zero when it is not a
	// harness timestamp.
	Start time.Time
	Seed  string
	// Verdict is "valid", "invalid", "unknown", or "incomplete" when the
	// run wrote no results (it is running, or died).
	Verdict  string
	Checkers []CheckerVerdict
	Ops      int64
	Duration float64
	// Problem says why the results could not be read.
	Problem string
	// Results are the decoded results.json, for the run page.
	Results map[string]any `json:"-"`
}

// CheckerVerdict is one checker's verdict in a run.
type CheckerVerdict struct {
	Name, Verdict string
	Fields        map[string]any `json:"-"`
}

// verdict reads a results.json "valid" field.
func verdict(v any) string {
	switch v {
	case true:
		return "valid"
	case false:
		return "invalid"
	}
	return "unknown"
}

func checkerVerdict(v any) string {
	switch v {
	case true:
		return "true"
	case false:
		return "false"
	}
	return "unknown"
}

// Runs lists the store's runs, newest first, at most MaxRuns, and how many
// more there were.
func (s *Server) Runs() ([]Run, int, error) {
	tests, err := fs.ReadDir(s.fsys, ".")
	if err != nil {
		return nil, 0, err
	}
	type ref struct{ test, id string }
	var refs []ref
	for _, t := range tests {
		if !t.IsDir() || !validName(t.Name()) || t.Name() == "latest" {
			continue
		}
		runs, err := fs.ReadDir(s.fsys, t.Name())
		if err != nil {
			continue
		}
		for _, r := range runs {
			// "latest" is a symbolic link to a run listed anyway.
			if r.IsDir() && validName(r.Name()) {
				refs = append(refs, ref{t.Name(), r.Name()})
			}
		}
	}
	sort.SliceStable(refs, func(i, j int) bool {
		if refs[i].id != refs[j].id {
			return refs[i].id > refs[j].id
		}
		return refs[i].test < refs[j].test
	})
	more := 0
	if len(refs) > MaxRuns {
		more = len(refs) - MaxRuns
		refs = refs[:MaxRuns]
	}
	out := make([]Run, len(refs))
	for i, r := range refs {
		out[i] = s.load(r.test, r.id)
	}
	return out, more, nil
}

// load reads what the list shows of one run, from the cache when its
// results.json has not changed.
func (s *Server) load(test, id string) Run {
	key := test + "/" + id
	fi, err := fs.Stat(s.fsys, key+"/results.json")
	if err == nil {
		s.mu.Lock()
		c, ok := s.cache[key]
		s.mu.Unlock()
		if ok && c.size == fi.Size() && c.mod.Equal(fi.ModTime()) {
			return c.run
		}
	}
	run := s.read(test, id)
	if err == nil {
		s.mu.Lock()
		if len(s.cache) >= 2*MaxRuns {
			clear(s.cache)
		}
		s.cache[key] = cachedRun{size: fi.Size(), mod: fi.ModTime(), run: run}
		s.mu.Unlock()
	}
	return run
}

// read reads what the list shows of one run.
func (s *Server) read(test, id string) Run {
	run := Run{Test: test, ID: id, Verdict: "incomplete"}
	stamp := id
	// A "latest" link names the run it points at.
	if target, err := s.root.Readlink(test + "/" + id); err == nil {
		stamp = path.Base(target)
	}
	if len(stamp) >= len(timestampLayout) {
		if t, err := time.Parse(timestampLayout, stamp[:len(timestampLayout)]); err == nil {
			run.Start = t
		}
	}
	dir := test + "/" + id + "/"
	if b, err := s.readBounded(dir+"seed", maxSmall); err == nil {
		run.Seed = strings.TrimSpace(string(b))
	}
	b, err := s.readBounded(dir+"results.json", maxResults)
	if errors.Is(err, fs.ErrNotExist) {
		return run
	}
	if err == nil {
		err = json.Unmarshal(b, &run.Results)
	}
	if err != nil {
		run.Verdict, run.Problem = "unknown", "results.json: "+err.Error()
		return run
	}
	run.Verdict = verdict(run.Results["valid"])
	if n, ok := run.Results["ops"].(float64); ok {
		run.Ops = int64(n)
	}
	run.Duration, _ = run.Results["duration_s"].(float64)
	if run.Seed == "" {
		if n, ok := run.Results["seed"].(float64); ok {
			run.Seed = fmt.Sprint(uint64(n))
		}
	}
	cs, _ := run.Results["checkers"].(map[string]any)
	for _, name := range slices.Sorted(maps.Keys(cs)) {
		f, _ := cs[name].(map[string]any)
		run.Checkers = append(run.Checkers, CheckerVerdict{Name: name, Verdict: checkerVerdict(f["valid"]), Fields: f})
	}
	return run
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	runs, more, err := s.Runs()
	if err != nil {
		notFound(w, "the store", err)
		return
	}
	page(w, listPage, map[string]any{"Store": s.dir, "Runs": runs, "More": more})
}

// entry is a file of a run as its page lists it.
type entry struct {
	Path string
	Size int64
	Dir  bool
}

func (s *Server) run(w http.ResponseWriter, r *http.Request) {
	base, ok := runPath(w, r)
	if !ok {
		return
	}
	fi, err := fs.Stat(s.fsys, base)
	if err != nil {
		notFound(w, "run "+base, err)
		return
	}
	if !fi.IsDir() {
		http.Error(w, "run "+base+": not a folder", http.StatusNotFound)
		return
	}
	run := s.load(r.PathValue("test"), r.PathValue("run"))
	command := ""
	if b, err := s.readBounded(base+"/command", maxSmall); err == nil {
		command = strings.TrimSpace(string(b))
	}
	files := s.entries(base, "")
	logs := s.entries(base, "logs")
	var pages, plots, others []entry
	for _, e := range files {
		switch {
		case e.Dir:
			others = append(others, e)
		case strings.HasSuffix(e.Path, ".html"):
			pages = append(pages, e)
		case strings.HasSuffix(e.Path, ".png"), strings.HasSuffix(e.Path, ".svg"):
			plots = append(plots, e)
		default:
			others = append(others, e)
		}
	}
	type check struct {
		CheckerVerdict
		Figures string
	}
	var checks []check
	for _, c := range run.Checkers {
		checks = append(checks, check{c, figures(c.Fields)})
	}
	page(w, runPage, map[string]any{
		"Run": run, "Base": base, "Command": command, "Checks": checks,
		"Pages": pages, "Plots": plots, "Others": others, "Logs": logs, "Dots": s.dots(base),
	})
}

// entries lists a folder of a run, without hidden files and secrets.
func (s *Server) entries(base, sub string) []entry {
	dir := base
	if sub != "" {
		dir += "/" + sub
	}
	des, err := fs.ReadDir(s.fsys, dir)
	if err != nil {
		return nil
	}
	var out []entry
	for _, de := range des {
		if len(out) == maxEntries {
			break
		}
		n := de.Name()
		if !validName(n) || secret(n) {
			continue
		}
		e := entry{Path: path.Join(sub, n), Dir: de.IsDir()}
		if fi, err := de.Info(); err == nil {
			e.Size = fi.Size()
		}
		out = append(out, e)
	}
	return out
}

// dots finds a run's cycle drawings: .dot files in the run's folder and
// the folders under it, a few levels down, skipping the nodes' data and
// logs.
func (s *Server) dots(base string) []string {
	var out []string
	var walk func(rel string, depth int)
	walk = func(rel string, depth int) {
		dir := base
		if rel != "" {
			dir += "/" + rel
		}
		des, err := fs.ReadDir(s.fsys, dir)
		if err != nil {
			return
		}
		for _, de := range des {
			n := de.Name()
			if len(out) == maxDots || !validName(n) {
				continue
			}
			p := path.Join(rel, n)
			switch {
			case de.IsDir() && depth < 3 && n != "data" && n != "logs":
				walk(p, depth+1)
			case de.Type().IsRegular() && strings.HasSuffix(n, ".dot"):
				out = append(out, p)
			}
		}
	}
	walk("", 0)
	return out
}

// figures renders a checker's fields but its verdict, compactly: the
// first few hundred characters of its JSON.
func figures(f map[string]any) string {
	m := make(map[string]any, len(f))
	for k, v := range f {
		if k != "valid" {
			m[k] = v
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return ""
	}
	s := string(b)
	if len(s) > 400 {
		s = strings.ToValidUTF8(s[:400], "") + "…"
	}
	return s
}

func (s *Server) file(w http.ResponseWriter, r *http.Request) {
	name, ok := filePath(w, r)
	if !ok {
		return
	}
	f, err := s.root.Open(name)
	if err != nil {
		notFound(w, name, err)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		notFound(w, name, err)
		return
	}
	if fi.IsDir() {
		base, _ := runPath(w, r)
		page(w, dirPage, map[string]any{"Base": base, "Dir": r.PathValue("path"), "Entries": s.entries(base, r.PathValue("path"))})
		return
	}
	if !fi.Mode().IsRegular() {
		http.Error(w, name+": not a regular file", http.StatusForbidden)
		return
	}
	h := w.Header()
	switch path.Ext(name) {
	case ".html":
		h.Set("Content-Type", "text/html; charset=utf-8")
		// The store's pages are self-contained; sandboxed, a page that is
		// not ours cannot act as this server's origin.
		h.Set("Content-Security-Policy", "sandbox allow-scripts")
	case ".png":
		h.Set("Content-Type", "image/png")
	case ".svg":
		h.Set("Content-Type", "image/svg+xml")
		h.Set("Content-Security-Policy", "sandbox")
	case ".json":
		h.Set("Content-Type", "application/json")
	default:
		// Histories, logs, configuration, the command: text, never run.
		h.Set("Content-Type", "text/plain; charset=utf-8")
	}
	http.ServeContent(w, r, "", fi.ModTime(), f)
}

func (s *Server) svg(w http.ResponseWriter, r *http.Request) {
	name, ok := filePath(w, r)
	if !ok {
		return
	}
	if !strings.HasSuffix(name, ".dot") {
		http.Error(w, name+": only .dot files are drawn", http.StatusBadRequest)
		return
	}
	b, err := s.readBounded(name, dot.MaxBytes)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || strings.Contains(err.Error(), "escapes") {
			notFound(w, name, err)
			return
		}
		http.Error(w, err.Error(), http.StatusUnprocessableEntity)
		return
	}
	g, err := dot.Parse(b)
	if err != nil {
		http.Error(w, fmt.Sprintf("%s: %v", name, err), http.StatusUnprocessableEntity)
		return
	}
	w.Header().Set("Content-Type", "image/svg+xml")
	w.Header().Set("Content-Security-Policy", "sandbox")
	io.WriteString(w, g.SVG())
}

// page writes one of the server's own pages.
func page(w http.ResponseWriter, t *template.Template, data any) {
	var b strings.Builder
	if err := t.Execute(&b, data); err != nil {
		http.Error(w, "rendering the page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; img-src 'self'; style-src 'unsafe-inline'; script-src 'unsafe-inline'")
	io.WriteString(w, b.String())
}
