package storeweb

import (
	"fmt"
	"html/template"
	"net/url"
	"strings"
	"time"
)

// The server's pages: html/template escapes every value from the store.
// Each page records script errors on <body data-errors> (before anything
// else runs) and sets data-ready when its script has run, for tests and
// for anyone debugging a page.

var funcs = template.FuncMap{
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05 UTC")
	},
	"size": func(n int64) string {
		switch {
		case n >= 1<<20:
			return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
		case n >= 1<<10:
			return fmt.Sprintf("%.1f kB", float64(n)/(1<<10))
		}
		return fmt.Sprintf("%d B", n)
	},
	"secs": func(s float64) string { return fmt.Sprintf("%.1f s", s) },
	// esc escapes each part of a store path for a URL.
	"esc": func(p string) string {
		parts := strings.Split(p, "/")
		for i, s := range parts {
			parts[i] = url.PathEscape(s)
		}
		return strings.Join(parts, "/")
	},
}

const head = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<script>
window.onerror = function (msg, src, line, col) {
  var b = document.body || document.documentElement, prev = b.dataset.errors;
  b.dataset.errors = (prev ? prev + "\n" : "") + msg + " (" + line + ":" + col + ")";
};
</script>
<style>
:root { font: 14px/1.4 system-ui, sans-serif; color: #1d232b; }
body { margin: 0 auto; padding: 12px 20px 40px; max-width: 1400px; }
h1 { font-size: 19px; margin: 6px 0 10px; }
h2 { font-size: 15px; margin: 22px 0 6px; }
a { color: #1a56db; }
table { border-collapse: collapse; }
th, td { text-align: left; padding: 3px 10px 3px 0; vertical-align: top; border-bottom: 1px solid #e4e8ee; }
th { font-weight: 600; color: #4a5563; }
.v { display: inline-block; padding: 0 7px; border-radius: 3px; font-weight: 700; color: #fff; background: #6b7280; }
.v.valid, .v.true { background: #2f7d3b; }
.v.invalid, .v.false { background: #c8102e; }
.v.incomplete { background: #a3a3a3; }
.ck { display: inline-block; margin: 0 4px 2px 0; padding: 0 5px; border: 1px solid #cfd6df; border-radius: 3px; font-size: 12px; }
.ck.false { border-color: #c8102e; color: #a00d25; font-weight: 600; }
.ck.unknown { border-color: #b7791f; color: #8a5a12; }
.ck.true { color: #2f7d3b; }
.hint { color: #5b6675; }
pre { background: #f3f5f8; padding: 8px; overflow-x: auto; white-space: pre-wrap; word-break: break-all; }
.fig { font: 12px monospace; color: #4a5563; word-break: break-all; }
img.plot { max-width: min(100%, 1000px); border: 1px solid #e4e8ee; margin: 4px 0 12px; }
figure { margin: 0 0 16px; }
figcaption { font-size: 12px; color: #4a5563; }
#filter { font: inherit; padding: 2px 6px; width: 260px; }
</style>
`

var listPage = template.Must(template.New("list").Funcs(funcs).Parse(head + `<title>ipfence store</title>
</head>
<body>
<h1>ipfence store <span class="hint">{{.Store}}</span></h1>
{{if .Runs}}
<p><input id="filter" type="search" placeholder="filter: test, verdict, checker, seed" aria-label="filter runs">
<span class="hint" id="shown">{{len .Runs}} runs</span>{{if .More}} <span class="hint">({{.More}} older runs not listed)</span>{{end}}</p>
<table id="runs">
<thead><tr><th>started</th><th>test</th><th>seed</th><th>verdict</th><th>checkers</th><th>ops</th><th>run</th></tr></thead>
<tbody>
{{range .Runs}}<tr class="run" data-verdict="{{.Verdict}}">
<td>{{when .Start}}</td>
<td>{{.Test}}</td>
<td>{{.Seed}}</td>
<td><span class="v {{.Verdict}}">{{.Verdict}}</span>{{if .Problem}} <span class="hint">{{.Problem}}</span>{{end}}</td>
<td>{{range .Checkers}}<span class="ck {{.Verdict}}">{{.Name}} {{.Verdict}}</span>{{end}}</td>
<td>{{if .Ops}}{{.Ops}} in {{secs .Duration}}{{end}}</td>
<td><a href="/run/{{esc .Test}}/{{esc .ID}}/">{{.ID}}</a></td>
</tr>
{{end}}</tbody>
</table>
{{else}}
<p>No runs yet. <code>ipfence-verify test capture</code> writes one.</p>
{{end}}
<script>
(function () {
  var f = document.getElementById("filter");
  if (f) f.addEventListener("input", function () {
    var q = f.value.toLowerCase(), n = 0;
    [].forEach.call(document.querySelectorAll("tr.run"), function (tr) {
      var on = tr.textContent.toLowerCase().indexOf(q) >= 0;
      tr.style.display = on ? "" : "none";
      if (on) n++;
    });
    document.getElementById("shown").textContent = n + " runs";
  });
  document.body.dataset.ready = String(document.querySelectorAll("tr.run").length);
})();
</script>
</body>
</html>
`))

var runPage = template.Must(template.New("run").Funcs(funcs).Parse(head + `<title>{{.Run.Test}} {{.Run.ID}} — ipfence store</title>
</head>
<body>
<p><a href="/">all runs</a></p>
<h1>{{.Run.Test}} · {{.Run.ID}} <span class="v {{.Run.Verdict}}" id="verdict">{{.Run.Verdict}}</span></h1>
<table>
<tr><th>started</th><td>{{when .Run.Start}}</td></tr>
<tr><th>seed</th><td id="seed">{{.Run.Seed}}</td></tr>
{{if .Run.Ops}}<tr><th>ops</th><td>{{.Run.Ops}} in {{secs .Run.Duration}}</td></tr>{{end}}
{{if .Command}}<tr><th>command</th><td><pre id="command">{{.Command}}</pre></td></tr>{{end}}
{{if .Run.Problem}}<tr><th>problem</th><td>{{.Run.Problem}}</td></tr>{{end}}
</table>
{{if .Checks}}
<h2>Checkers</h2>
<table id="checkers">
{{range .Checks}}<tr><td><span class="ck {{.Verdict}}">{{.Name}} {{.Verdict}}</span></td><td class="fig">{{.Figures}}</td></tr>
{{end}}</table>
{{end}}
{{if .Pages}}
<h2>Pages</h2>
<ul id="pages">{{range .Pages}}<li><a href="/file/{{esc $.Base}}/{{esc .Path}}">{{.Path}}</a> <span class="hint">{{size .Size}}</span></li>{{end}}</ul>
{{end}}
{{if .Plots}}
<h2>Plots</h2>
{{range .Plots}}<figure><img class="plot" src="/file/{{esc $.Base}}/{{esc .Path}}" alt="{{.Path}}"><figcaption>{{.Path}}</figcaption></figure>{{end}}
{{end}}
{{if .Dots}}
<h2>Cycles</h2>
<div id="cycles">{{range .Dots}}<figure><img class="plot" src="/svg/{{esc $.Base}}/{{esc .}}" alt="{{.}}"><figcaption>{{.}} · <a href="/svg/{{esc $.Base}}/{{esc .}}">SVG</a> · <a href="/file/{{esc $.Base}}/{{esc .}}">.dot</a></figcaption></figure>{{end}}</div>
{{end}}
{{if .Logs}}
<h2>Logs</h2>
<ul id="logs">{{range .Logs}}<li><a href="/file/{{esc $.Base}}/{{esc .Path}}">{{.Path}}</a> <span class="hint">{{size .Size}}</span></li>{{end}}</ul>
{{end}}
<h2>Files</h2>
<ul id="files">{{range .Others}}<li><a href="/file/{{esc $.Base}}/{{esc .Path}}">{{.Path}}{{if .Dir}}/{{end}}</a>{{if not .Dir}} <span class="hint">{{size .Size}}</span>{{end}}</li>{{end}}</ul>
<script>
document.body.dataset.ready = document.getElementById("verdict").textContent;
</script>
</body>
</html>
`))

var dirPage = template.Must(template.New("dir").Funcs(funcs).Parse(head + `<title>{{.Base}}/{{.Dir}} — ipfence store</title>
</head>
<body>
<p><a href="/run/{{esc .Base}}/">{{.Base}}</a></p>
<h1>{{.Dir}}/</h1>
<ul>{{range .Entries}}<li><a href="/file/{{esc $.Base}}/{{esc .Path}}">{{.Path}}{{if .Dir}}/{{end}}</a>{{if not .Dir}} <span class="hint">{{size .Size}}</span>{{end}}</li>{{end}}</ul>
<script>document.body.dataset.ready = "dir";</script>
</body>
</html>
`))
