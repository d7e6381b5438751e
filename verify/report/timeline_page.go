package report

// The page: timelineHead, the escaped title, timelineStyle, the JSON
// document, timelineScript.

const timelineHead = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>`

const timelineStyle = ` — ipfence timeline</title>
<style>
:root { font: 13px/1.35 system-ui, sans-serif; color: #1d232b; }
body { margin: 0; display: flex; flex-direction: column; height: 100vh; }
header { padding: 8px 14px 6px; border-bottom: 1px solid #cfd6df; background: #f7f9fb; }
h1 { font-size: 15px; margin: 0 0 4px; word-break: break-all; }
.facts span { margin-right: 14px; }
.facts .bad { color: #a00d25; font-weight: 600; }
.tools { margin-top: 5px; display: flex; flex-wrap: wrap; gap: 6px 14px; align-items: center; }
.tools button { font: inherit; padding: 0 8px; min-width: 28px; }
.hint { color: #5b6675; }
.key { display: inline-flex; align-items: center; gap: 4px; }
.key i { display: inline-block; width: 22px; height: 11px; border-radius: 2px; }
#view { flex: 1; min-height: 0; overflow: auto; position: relative; }
#space { position: relative; }
#stage { position: sticky; top: 0; left: 0; overflow: hidden; }
#stage canvas { position: absolute; top: 0; left: 0; }
#tip { position: fixed; z-index: 10; display: none; max-width: 460px; padding: 6px 9px; background: #1d232b; color: #f2f4f7; border-radius: 4px; font-size: 12px; box-shadow: 0 2px 8px rgba(0,0,0,.3); pointer-events: none; overflow-wrap: anywhere; }
#tip div + div { margin-top: 2px; }
#tip .h { font-weight: 600; font-size: 13px; }
#tip .o { display: inline-block; padding: 0 5px; border-radius: 3px; color: #1d232b; font-weight: 600; }
#tip .w { color: #ffc9a8; }
.verdict { display: inline-block; margin: 0 10px 4px 0; padding: 1px 10px; border-radius: 3px; font-weight: 700; font-size: 14px; letter-spacing: .04em; color: #fff; background: #6b7280; }
.verdict.good { background: #2f7d3b; }
.verdict.bad { background: #c8102e; }
.checks { display: inline; }
.ck { display: inline-block; margin: 0 6px 3px 0; padding: 0 6px; border-radius: 3px; border: 1px solid #cfd6df; background: #fff; }
.ck.bad { border-color: #c8102e; color: #a00d25; font-weight: 600; }
.ck.good { color: #2f7d3b; }
.ck .sum { font-weight: 400; color: #4a5563; }
.finds { margin: 2px 0 0; padding: 0 0 0 22px; max-height: 22vh; overflow: auto; }
.finds li { margin: 1px 0; }
.finds li.go { cursor: pointer; color: #a00d25; text-decoration: underline dotted; }
.finds li.go:hover, .finds li.go:focus { background: #fde8eb; outline: none; }
.finds li.on { background: #fbd0d7; }
.finds b { margin-right: 6px; }
</style>
</head>
<body>
<header id="head"></header>
<div id="view"><div id="space"><div id="stage"><canvas id="cv"></canvas><canvas id="hl"></canvas></div></div></div>
<div id="tip" role="tooltip"></div>
<script>
// Installed before the drawing script so that even a syntax error there is
// recorded; tests read data-errors from the DOM.
window.onerror = function (msg, src, line, col) {
  var b = document.body, prev = b.dataset.errors;
  b.dataset.errors = (prev ? prev + "\n" : "") + msg + " (" + line + ":" + col + ")";
};
</script>
<script type="application/json" id="data">`

const timelineScript = `</script>
<script>
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("data").textContent);
  var N = D.n, NL = D.lanes.length, END = Math.max(D.end, 1);
  var CLS = ["ok", "fail", "info", "pending", "nemesis", "event", "bad event"];
  var COL = ["#5aa860", "#d9473f", "#f0a33a", "#f0a33a", "#8e6cc4", "#4f7fb8", "#c8102e"];
  // Marked ops (a checker singled them out), in invoke order.
  var MK = D.mk || {}, marked = Object.keys(MK).map(Number).sort(function (a, b) { return a - b; });
  // Every timed finding, for the axis and the links.
  var finds = [];
  (D.checkers || []).forEach(function (c) {
    c.f.forEach(function (f) { if (f.s >= 0) finds.push({ c: c.n, t: f.t, s: f.s, e: Math.max(f.e, f.s) }); });
  });
  var band = null;
  var HUES = [[226, 74, 51], [52, 108, 214], [150, 84, 196], [16, 148, 136], [196, 140, 12], [110, 110, 110]];
  var AXIS = 24, FROW = 16, LABEL = 72, PAD = 16, TIP = 3;

  // The ops, decoded from D.ops in one pass into a typed array per field
  // (see opsWriter): lane, absolute start and stop (µs), duration (-1:
  // never completed), outcome, f, value and error (-1: none).
  var LN = new Int32Array(N), start = new Float64Array(N), stop = new Float64Array(N), DUR = new Float64Array(N);
  var OUT = new Uint8Array(N), FN = new Int32Array(N), VL = new Int32Array(N), ER = new Int32Array(N);
  var i, l, k, t = 0;
  // varints reads the unsigned varints of base64 text b64: next() is the
  // next one, more() whether there is one. Multiplying rather than
  // shifting keeps numbers past 2^31 right.
  function varints(b64) {
    var bin = atob(b64), pos = 0;
    return {
      more: function () { return pos < bin.length; },
      next: function () {
        var x = 0, m = 1, c;
        do { c = bin.charCodeAt(pos++); x += (c & 127) * m; m *= 128; } while (c > 127);
        return x;
      }
    };
  }
  // val returns text k (a value, an error, a note), decoding them all
  // from their shapes and numbers (see encodeVals) on the first call:
  // opening a page of bands needs none.
  var VALS = null;
  function val(k) {
    if (!VALS) {
      VALS = [];
      var r = varints(D.valn);
      while (r.more()) {
        var shape = D.valt[r.next()], s = shape[0];
        for (var j = 1; j < shape.length; j++) s += r.next() + shape[j];
        VALS.push(s);
      }
    }
    return VALS[k];
  }
  (function () {
    var uv = varints(D.ops).next, hi = 0;
    for (i = 0; i < N; i++) {
      LN[i] = uv();
      t += uv();
      start[i] = t;
      var d = uv() - 1, fo = uv(), v = uv();
      DUR[i] = d;
      stop[i] = d < 0 ? END : t + d;
      OUT[i] = fo & 7;
      FN[i] = Math.floor(fo / 8);
      // v/2 is the zigzag of the value's index minus hi (see opsWriter).
      var z = Math.floor(v / 2);
      VL[i] = hi + (z % 2 ? -(z + 1) / 2 : z / 2);
      hi = Math.max(hi, VL[i] + 1);
      ER[i] = v % 2 ? uv() : -1;
    }
  })();
  function out(i) { return OUT[i]; }

  // Rows: by default a lane per process. When a run crashed so often that
  // its processes' lanes do not fit, each worker's processes share a row
  // instead (they follow one another, so their ops do not overlap) and the
  // tooltip names the process. Each row keeps its ops in start order with
  // reach[k], the latest end among its first k+1 ops: reach never
  // decreases, so a binary search on it finds the first op of a row that
  // reaches a time, however the ops overlap.
  var byWorker = false, rows = [], rowOf = new Int32Array(NL), rowOps = [], reach = [], NR = 0;
  // Above DENSE ops in view the rows are drawn as bands of counts.
  var DENSE = D.dense > 0 ? D.dense : Infinity, NB = 8192, counts = [], banded = false, drag = null;
  function layoutRows(merge) {
    byWorker = merge;
    rows = [];
    var seen = {};
    for (l = 0; l < NL; l++) {
      var g = D.group[l];
      if (merge && g >= 0 && g in seen) {
        rowOf[l] = seen[g];
        rows[seen[g]].n++;
        continue;
      }
      if (g >= 0) seen[g] = rows.length;
      rowOf[l] = rows.length;
      rows.push({ group: g, lane: l, n: 1 });
    }
    NR = rows.length;
    rows.forEach(function (r) { r.label = D.lanes[r.lane] + (r.n > 1 ? " +" + (r.n - 1) : ""); });
    var fill = [];
    for (k = 0; k < NR; k++) fill.push(0);
    for (i = 0; i < N; i++) fill[rowOf[LN[i]]]++;
    rowOps = [];
    reach = [];
    for (k = 0; k < NR; k++) {
      rowOps.push(new Int32Array(fill[k]));
      reach.push(new Float64Array(fill[k]));
      fill[k] = 0;
    }
    for (i = 0; i < N; i++) {
      var r = rowOf[LN[i]], j = fill[r]++;
      rowOps[r][j] = i;
      reach[r][j] = j ? Math.max(reach[r][j - 1], stop[i]) : stop[i];
    }
    // Summary bands: each row's client ops counted per NB-th of the
    // run by the time they start, as ok, fail, and info or pending.
    counts = [];
    if (N <= DENSE) return;
    // Fine buckets for a few rows, coarser ones for thousands of lanes.
    NB = Math.max(256, Math.min(8192, Math.floor(1e6 / NR)));
    for (k = 0; k < NR; k++) counts.push(new Int32Array(NB * 3));
    for (i = 0; i < N; i++) {
      var o = out(i);
      if (o >= 4) continue;
      counts[rowOf[LN[i]]][Math.min(NB - 1, Math.floor(start[i] / END * NB)) * 3 + (o < 2 ? o : 2)]++;
    }
  }
  // inView counts the ops of rows l0 to l1 that overlap t0 to t1, up to
  // DENSE + 1: enough to choose between bands and bars.
  function inView(t0, t1, l0, l1) {
    var n = 0;
    for (var l = l0; l <= l1 && n <= DENSE; l++) {
      var ops = rowOps[l], lo = firstReaching(l, t0), hi = ops.length;
      while (lo < hi) {
        var m = (lo + hi) >> 1;
        if (start[ops[m]] <= t1) lo = m + 1; else hi = m;
      }
      n += Math.max(lo - firstReaching(l, t0), 0);
    }
    return n;
  }
  function firstReaching(l, t) {
    var r = reach[l], lo = 0, hi = r.length;
    while (lo < hi) {
      var m = (lo + hi) >> 1;
      if (r[m] < t) lo = m + 1; else hi = m;
    }
    return lo;
  }

  // Faults: a colour per name, and a row of the strip under the axis for
  // each set of overlapping ones.
  var hueOf = {}, nhue = 0, levels = 0, rowEnd = [];
  var faults = D.faults.map(function (f) {
    if (!(f.n in hueOf)) hueOf[f.n] = nhue++ % HUES.length;
    return { n: f.n, s: f.s, e: f.e, a: f.a, hue: HUES[hueOf[f.n]], lv: 0 };
  });
  faults.slice().sort(function (a, b) { return a.s - b.s; }).forEach(function (f) {
    var lv = 0;
    while (lv < rowEnd.length && rowEnd[lv] > f.s) lv++;
    rowEnd[lv] = Math.max(f.e, f.s + 1);
    f.lv = lv;
    levels = Math.max(levels, lv + 1);
  });
  var TOP = AXIS + levels * FROW + (levels ? 2 : 0);
  function rgba(h, a) { return "rgba(" + h[0] + "," + h[1] + "," + h[2] + "," + a + ")"; }

  function add(parent, tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text != null) e.textContent = text;
    parent.appendChild(e);
    return e;
  }
  function secs(us, dec) { return (us / 1e6).toFixed(dec) + " s"; }
  function dur(us) {
    if (us < 1000) return Math.round(us) + " µs";
    if (us < 1e6) return (us / 1e3).toFixed(us < 1e4 ? 2 : 1) + " ms";
    return (us / 1e6).toFixed(3) + " s";
  }
  function plural(n, one, many) { return n + " " + (n === 1 ? one : many || one + "s"); }

  var view = document.getElementById("view"), space = document.getElementById("space");
  var stage = document.getElementById("stage"), cv = document.getElementById("cv"), hl = document.getElementById("hl");
  var tip = document.getElementById("tip");
  var ctx = cv.getContext("2d"), hctx = hl.getContext("2d");
  var W = 0, H = 0, dpr = 1, scale = 1, rowH = 14, hover = -1, pinned = -1, layoutButton;

  // Pending ops are striped: their outcome is unknown and they never ended.
  var stripes = (function () {
    var c = document.createElement("canvas");
    c.width = c.height = 8;
    var g = c.getContext("2d");
    g.fillStyle = "#fbe3bd";
    g.fillRect(0, 0, 8, 8);
    g.strokeStyle = COL[3];
    g.lineWidth = 2.5;
    g.beginPath();
    g.moveTo(-2, 10); g.lineTo(10, -2);
    g.moveTo(-2, 2); g.lineTo(2, -2);
    g.moveTo(6, 10); g.lineTo(10, 6);
    g.stroke();
    return ctx.createPattern(c, "repeat");
  })();

  // story writes the verdict, each checker's verdict and the findings of
  // those that did not pass, each timed one a link to its moment.
  function story(h) {
    function tone(v) {
      v = String(v).toLowerCase();
      return v === "valid" || v === "true" ? "good" : v === "invalid" || v === "false" ? "bad" : "";
    }
    var cs = D.checkers || [];
    if (!D.verdict && !cs.length) return;
    var line = add(h, "div");
    if (D.verdict) add(line, "span", "verdict " + tone(D.verdict), D.verdict.toUpperCase());
    var row = add(line, "span", "checks");
    cs.forEach(function (c) {
      var e = add(row, "span", "ck " + tone(c.v));
      add(e, "span", null, c.n + " " + c.v);
      if (c.s) add(e, "span", "sum", " · " + c.s);
    });
    var list = null, n = 0;
    cs.forEach(function (c) {
      if (tone(c.v) === "good") return;
      c.f.forEach(function (f) {
        if (!list) list = add(h, "ol", "finds");
        var li = add(list, "li", f.s >= 0 ? "go" : null);
        add(li, "b", null, c.n);
        add(li, "span", null, f.t);
        n++;
        if (f.s < 0) return;
        li.tabIndex = 0;
        li.setAttribute("role", "button");
        li.title = "show this moment at " + secs(f.s, 3);
        function go() {
          [].forEach.call(list.querySelectorAll("li.on"), function (x) { x.classList.remove("on"); });
          li.classList.add("on");
          focus(f.s, Math.max(f.e, f.s), f.p);
        }
        li.addEventListener("click", go);
        li.addEventListener("keydown", function (ev) { if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); go(); } });
      });
      if (c.more) add(add(list || (list = add(h, "ol", "finds")), "li"), "span", "hint", "… and " + c.more + " more from " + c.n);
    });
    document.body.dataset.verdict = D.verdict || "";
    document.body.dataset.findings = String(n);
  }

  // focus brings the moment from s to e (µs) into view with some room on
  // either side, shades it, and pins the lane event that starts there:
  // the one whose text is pin, when given and there is one.
  function focus(s, e, pin) {
    var pad = Math.max((e - s) * 0.5, 1e6);
    zoomAt(clampScale((W - LABEL - PAD) / (e - s + 2 * pad)), W / 2);
    view.scrollLeft = Math.max(0, (s - pad) * scale);
    band = { s: s, e: e };
    var at = -1;
    for (i = 0; i < N && at < 0; i++) if (out(i) >= 5 && start[i] === s) at = i;
    if (pin) {
      for (i = at; at >= 0 && i < N && start[i] <= s; i++) {
        if (out(i) >= 5 && start[i] === s && D.fs[FN[i]] === pin) { at = i; break; }
      }
    }
    if (at >= 0) {
      var y = rowOf[LN[at]] * rowH;
      if (y < view.scrollTop || y > view.scrollTop + H - TOP - rowH) view.scrollTop = Math.max(0, y - (H - TOP) / 2);
    }
    pinned = at;
    if (at < 0) hide();
    paint();
    followPin();
    document.body.dataset.focus = String(s);
  }

  function header() {
    var h = document.getElementById("head");
    add(h, "h1", null, D.title);
    story(h);
    var count = [0, 0, 0, 0, 0, 0, 0];
    for (i = 0; i < N; i++) count[out(i)]++;
    var procs = 0, groups = {};
    D.group.forEach(function (g) { if (g >= 0) { procs++; groups[g] = 1; } });
    var f = add(h, "div", "facts");
    add(f, "span", null, plural(N - count[4] - count[5] - count[6], "client op") + " over " + secs(D.end, 3));
    add(f, "span", null, plural(procs, "process", "processes") + " (" + plural(Object.keys(groups).length, "worker") + ")");
    add(f, "span", null, count[0] + " ok · " + count[1] + " fail · " + count[2] + " info · " + count[3] + " pending");
    add(f, "span", null, plural(count[4], "nemesis op") + " · " + plural(faults.length, "fault period"));
    if (count[5] + count[6]) add(f, "span", count[6] ? "bad" : null, plural(count[5] + count[6], "lane event") + (count[6] ? " · " + count[6] + " bad" : ""));
    if (marked.length) add(f, "span", "bad", plural(marked.length, "marked op"));
    var tools = add(h, "div", "tools");
    var z = add(tools, "span");
    add(z, "span", null, "time ");
    add(z, "button", null, "\u2212").addEventListener("click", function () { zoomAt(scale / 2, W / 2); });
    add(z, "button", null, "+").addEventListener("click", function () { zoomAt(scale * 2, W / 2); });
    add(z, "button", null, "fit").addEventListener("click", function () { zoomAt(0, W / 2); });
    var r = add(tools, "span");
    add(r, "span", null, "rows ");
    add(r, "button", null, "\u2212").addEventListener("click", function () { setRows(rowH / 1.5); });
    add(r, "button", null, "+").addEventListener("click", function () { setRows(rowH * 1.5); });
    layoutButton = add(r, "button");
    layoutButton.addEventListener("click", function () {
      var mid = (view.scrollTop + (H - TOP) / 2) / rowH, lane = 0;
      for (l = 0; l < NL; l++) if (rowOf[l] <= mid) lane = l;
      layoutRows(!byWorker);
      fitRows();
      extent();
      view.scrollTop = rowOf[lane] * rowH - (H - TOP) / 2;
      relayout();
    });
    add(tools, "span", "hint", "ctrl + wheel zooms at the pointer; shift + wheel scrolls in time; click an op to pin its details" +
      (N > DENSE ? "; with more than " + DENSE + " ops in view, rows show counts per time: click or drag on them to zoom" : ""));
    var keys = add(tools, "span", "tools");
    CLS.forEach(function (c, n) {
      if (n >= 5 && !count[n]) return;
      var s = add(keys, "span", "key");
      var sw = add(s, "i");
      sw.style.background = n === 3 ? "repeating-linear-gradient(135deg, #fbe3bd 0 3px, " + COL[3] + " 3px 5px)" : COL[n];
      add(s, "span", null, c === "pending" ? "pending at the end" : c);
    });
    Object.keys(hueOf).forEach(function (name) {
      var s = add(keys, "span", "key");
      add(s, "i").style.background = rgba(HUES[hueOf[name]], 0.45);
      add(s, "span", null, name);
    });
  }

  function fitScale() { return Math.max(W - LABEL - PAD, 50) / END; }
  // The widest chart browsers lay out is about 33 million px.
  function clampScale(s) { return Math.min(Math.max(s, fitScale()), 100, 3e7 / END); }
  function extent() {
    space.style.width = LABEL + Math.ceil(END * scale) + PAD + "px";
    space.style.height = TOP + NR * rowH + PAD + "px";
  }
  function resize() {
    W = view.clientWidth;
    H = view.clientHeight;
    dpr = window.devicePixelRatio || 1;
    stage.style.width = W + "px";
    stage.style.height = H + "px";
    [cv, hl].forEach(function (c) {
      c.width = Math.round(W * dpr);
      c.height = Math.round(H * dpr);
      c.style.width = W + "px";
      c.style.height = H + "px";
    });
  }

  // ticks returns times between t0 and t1 at a step of at least 90 px,
  // and the decimals that tell them apart.
  function ticks(t0, t1) {
    var want = 90 / scale, step = 1, m = [1, 2, 5], e = 1;
    for (var n = 0; step < want; n++) {
      step = m[n % 3] * e;
      if (n % 3 === 2) e *= 10;
    }
    var dec = Math.max(0, Math.ceil(-Math.log10(step / 1e6) - 1e-9)), out = [];
    for (var t = Math.ceil(t0 / step) * step; t <= t1; t += step) out.push(t);
    return { ts: out, dec: dec };
  }

  function xOf(t) { return LABEL + t * scale - view.scrollLeft; }
  // Bars leave a gap of a px or more between rows when rows are tall
  // enough to spare it.
  function inset() { return rowH >= 8 ? 1 : 0; }
  function barH() { return rowH - (rowH >= 8 ? 3 : rowH >= 4 ? 1 : 0); }
  // barBox is where op i's bar is drawn, given the view's scroll offsets.
  function barBox(i, sl, st) {
    var w = (stop[i] - start[i]) * scale;
    if (w >= 4) w -= 1; // a gap between an op and the next
    // The nemesis's few ops are what the faults hang on: never thinner
    // than 3 px.
    return {
      x: LABEL + start[i] * scale - sl, y: TOP + rowOf[LN[i]] * rowH - st + inset(),
      w: Math.max(w, out(i) === 6 ? 5 : out(i) >= 4 ? 3 : 1), h: barH()
    };
  }
  function boxOf(i) { return barBox(i, view.scrollLeft, view.scrollTop); }

  function paint() {
    var sl = view.scrollLeft, st = view.scrollTop, b;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.fillStyle = "#fff";
    ctx.fillRect(0, 0, W, H);
    var t0 = Math.max(0, sl / scale - 2 / scale), t1 = (sl + W - LABEL) / scale + 2 / scale;
    var l0 = Math.max(0, Math.floor(st / rowH)), l1 = Math.min(NR - 1, Math.floor((st + H - TOP) / rowH));
    // Alternate workers are shaded, so that the lanes of one worker's
    // successive processes read as a group.
    for (l = l0; l <= l1; l++) {
      var g = rows[l].group;
      if (g < 0 || g % 2 === 1) {
        ctx.fillStyle = g === -1 ? "#f2eff8" : g < 0 ? "#edf3fa" : "#f3f5f8";
        ctx.fillRect(LABEL, TOP + l * rowH - st, W - LABEL, rowH);
      }
    }
    var tk = ticks(t0, t1);
    ctx.fillStyle = "#e4e8ee";
    tk.ts.forEach(function (t) { ctx.fillRect(Math.round(xOf(t)), TOP, 1, H - TOP); });
    faults.forEach(function (f) {
      if (f.e < t0 || f.s > t1) return;
      var a = Math.max(xOf(f.s), LABEL), z = Math.min(Math.max(xOf(f.e), xOf(f.s) + 2), W);
      ctx.fillStyle = rgba(f.hue, 0.14);
      ctx.fillRect(a, TOP, z - a, H - TOP);
    });

    // Ops narrower than a pixel and a half are not drawn one over another
    // (the last colour drawn would win every pixel, and a few failures
    // among many oks would paint a row red): each pixel column of a row
    // stacks its outcomes instead, in proportion to the time they cover.
    var paths = CLS.map(function () { return new Path2D(); }), texts = [], drawn = 0, bandCols = 0;
    banded = counts.length > 0 && inView(t0, t1, l0, l1) > DENSE;
    var colX = -1, cov = [0, 0, 0, 0, 0], colY = 0, colH = barH(), STACK = [0, 2, 3, 1, 4];
    function flush() {
      if (colX < 0) return;
      var sum = cov[0] + cov[1] + cov[2] + cov[3] + cov[4], y = colY + colH;
      STACK.forEach(function (c) {
        if (!cov[c]) return;
        var h = colH * cov[c] / sum;
        paths[c].rect(colX, y - h, 1, h);
        y -= h;
        cov[c] = 0;
      });
      colX = -1;
    }
    if (banded) bandCols = bands(paths, sl, st, l0, l1);
    for (l = l0; l <= l1 && !banded; l++) {
      var ops = rowOps[l];
      for (k = firstReaching(l, t0); k < ops.length; k++) {
        i = ops[k];
        if (start[i] > t1) break;
        if (stop[i] < t0) continue;
        drawn++;
        var span = (stop[i] - start[i]) * scale, o = out(i);
        if (span < 1.5 && o < 4) {
          var cx = Math.floor(LABEL + start[i] * scale - sl + span / 2);
          if (cx !== colX) {
            flush();
            colX = cx;
            colY = TOP + l * rowH - st + inset();
          }
          cov[o] += Math.max(span, 0.01);
          continue;
        }
        flush();
        b = barBox(i, sl, st);
        // Bars far off screen are cut to it: canvases draw huge
        // coordinates slowly or not at all.
        if (b.x < LABEL - 4) { b.w -= LABEL - 4 - b.x; b.x = LABEL - 4; }
        if (b.x + b.w > W + 4) b.w = W + 4 - b.x;
        b.w = Math.max(b.w, 1);
        paths[out(i)].rect(b.x, b.y, b.w, b.h);
        if (b.w >= 40 && b.h >= 10 && texts.length < 3000) texts.push([i, b]);
      }
      flush();
    }
    paths.forEach(function (p, n) {
      ctx.fillStyle = n === 3 ? stripes : COL[n];
      ctx.fill(p);
    });
    ctx.font = Math.min(11, rowH - 4) + "px system-ui, sans-serif";
    ctx.textBaseline = "middle";
    texts.forEach(function (tx) {
      var i = tx[0], b = tx[1];
      ctx.save();
      ctx.beginPath();
      ctx.rect(Math.max(b.x, LABEL), b.y, b.w - 2, b.h);
      ctx.clip();
      ctx.fillStyle = out(i) === 1 || out(i) >= 4 ? "#fff" : "#1d232b";
      // A read's invoke value says nothing: leave it to the tooltip.
      var v = val(VL[i]);
      // A lane event's text says what it is; its detail is for the tooltip.
      ctx.fillText(D.fs[FN[i]] + (v === "null" || out(i) >= 5 ? "" : " " + v), Math.max(b.x, LABEL) + 3, b.y + b.h / 2 + 0.5);
      ctx.restore();
    });

    // Marked ops: a red outline and a notch above, drawn over the bars.
    if (marked.length) {
      ctx.strokeStyle = COL[6];
      ctx.fillStyle = COL[6];
      ctx.lineWidth = 1.5;
      marked.forEach(function (i) {
        if (stop[i] < t0 || start[i] > t1) return;
        var r = rowOf[LN[i]];
        if (r < l0 || r > l1) return;
        var b = barBox(i, sl, st), x = Math.max(b.x, LABEL);
        ctx.strokeRect(x - 1, b.y - 1, Math.max(Math.min(b.w, W - x), 1) + 2, b.h + 2);
        ctx.beginPath();
        ctx.moveTo(x - 3, b.y - 1); ctx.lineTo(x + 3, b.y - 1); ctx.lineTo(x, b.y + 3);
        ctx.fill();
      });
    }

    // Lane labels, over the bars that scroll under them.
    ctx.fillStyle = "#f7f9fb";
    ctx.fillRect(0, TOP, LABEL, H - TOP);
    ctx.fillStyle = "#cfd6df";
    ctx.fillRect(LABEL - 1, TOP, 1, H - TOP);
    ctx.font = "11px system-ui, sans-serif";
    ctx.fillStyle = "#4a5563";
    ctx.save();
    ctx.beginPath();
    ctx.rect(0, TOP, LABEL - 1, H - TOP);
    ctx.clip();
    // Rows of 12 px or more are named one by one. Smaller ones are named
    // a worker at a time (the nemesis's rows count as one): the first
    // process's name and how many followed it, beside a bracket over the
    // worker's rows, centred on the part of them in view.
    var last = -1e9;
    for (l = l0; l <= l1; l++) {
      var a = l, z = l, g = rows[l].group;
      if (rowH < 12) {
        while (a > 0 && rows[a - 1].group === g) a--;
        while (z < NR - 1 && rows[z + 1].group === g) z++;
      }
      var top = TOP + a * rowH - st, bottom = TOP + (z + 1) * rowH - st;
      var y = Math.max((Math.max(top, TOP) + Math.min(bottom, H)) / 2, TOP + 6), label = rows[a].label;
      if (z > a) {
        ctx.fillStyle = "#b7c0cc";
        ctx.fillRect(2, top + 1, 2, bottom - top - 2);
        ctx.fillStyle = "#4a5563";
        var lanes = 0;
        for (k = a; k <= z; k++) lanes += rows[k].n;
        label = g < 0 ? D.lanes[rows[a].lane] : D.lanes[rows[a].lane] + " +" + (lanes - 1);
      }
      l = z;
      if (y - last < 12) continue;
      ctx.fillText(label, 7, y);
      last = y;
    }
    ctx.restore();

    // The axis and the strip of fault names stay at the top.
    ctx.fillStyle = "#fff";
    ctx.fillRect(0, 0, W, TOP);
    ctx.fillStyle = "#cfd6df";
    ctx.fillRect(0, TOP - 1, W, 1);
    ctx.fillStyle = "#5b6675";
    ctx.fillText("time", 6, AXIS / 2);
    tk.ts.forEach(function (t) {
      var x = Math.round(xOf(t));
      if (x < LABEL) return;
      ctx.fillStyle = "#b7c0cc";
      ctx.fillRect(x, AXIS - 7, 1, 7);
      ctx.fillStyle = "#5b6675";
      ctx.fillText(secs(t, tk.dec), x + 3, AXIS / 2);
    });
    // Each timed finding is a red notch under the axis, so that the page
    // shows where things went wrong at any zoom.
    ctx.fillStyle = COL[6];
    finds.forEach(function (f) {
      if (f.e < t0 || f.s > t1) return;
      var x = Math.max(xOf(f.s), LABEL);
      ctx.fillRect(x - 1, AXIS - 9, Math.max(xOf(f.e) - x, 0) + 3, 9);
    });
    if (levels) {
      ctx.fillStyle = "#5b6675";
      ctx.fillText("faults", 6, AXIS + FROW / 2);
    }
    faults.forEach(function (f) {
      if (f.e < t0 || f.s > t1) return;
      var a = Math.max(xOf(f.s), LABEL), z = Math.min(Math.max(xOf(f.e), xOf(f.s) + 2), W), y = AXIS + f.lv * FROW;
      ctx.fillStyle = rgba(f.hue, 0.4);
      ctx.fillRect(a, y + 1, z - a, FROW - 2);
      if (z - a > 16) {
        ctx.save();
        ctx.beginPath();
        ctx.rect(a, y, z - a - 2, FROW);
        ctx.clip();
        ctx.fillStyle = "#1d232b";
        ctx.fillText(f.n + (f.a ? " (until the end)" : ""), a + 3, y + FROW / 2);
        ctx.restore();
      }
    });
    overlay();
    document.body.dataset.drawn = String(drawn);
    document.body.dataset.mode = banded ? "bands" : "ops";
    document.body.dataset.bands = String(bandCols);
  }

  // bucketsAt returns the range of count buckets under pixel column x.
  function bucketsAt(x, sl) {
    var a = (x - LABEL + sl) / scale, z = (x + 1 - LABEL + sl) / scale;
    var b0 = Math.max(0, Math.floor(a / END * NB)), b1 = Math.min(NB - 1, Math.max(b0, Math.ceil(z / END * NB) - 1));
    return [b0, b1];
  }
  // sumAt sums row l's counts over buckets b0 to b1: ok, fail, other.
  function sumAt(l, b0, b1) {
    var c = counts[l], s = [0, 0, 0];
    for (var b = b0; b <= b1 && b < NB; b++) { s[0] += c[b * 3]; s[1] += c[b * 3 + 1]; s[2] += c[b * 3 + 2]; }
    return s;
  }
  // bands draws rows l0 to l1 as a column of counts per pixel: its
  // height the share of the row's busiest column, its colours the
  // outcomes stacked, and any failure or info at least a pixel tall, so
  // that a few among thousands still show. It returns the columns drawn.
  function bands(paths, sl, st, l0, l1) {
    var cols = 0, x, h = barH();
    for (var l = l0; l <= l1; l++) {
      if (!counts[l]) continue;
      var sums = [], top = 1;
      for (x = LABEL; x < W; x++) {
        var r = bucketsAt(x, sl), s = sumAt(l, r[0], r[1]);
        sums.push(s);
        top = Math.max(top, s[0] + s[1] + s[2]);
      }
      var y0 = TOP + l * rowH - st + inset() + h;
      sums.forEach(function (s, n) {
        var all = s[0] + s[1] + s[2];
        if (!all) return;
        cols++;
        var colH = Math.max(h * all / top, 1), y = y0;
        [[1, 1], [2, 2], [0, 0]].forEach(function (p) {
          var c = s[p[0]];
          if (!c) return;
          var hh = Math.max(colH * c / all, p[0] ? 1 : 0);
          paths[p[1]].rect(LABEL + n, y - hh, 1, hh);
          y -= hh;
        });
      });
    }
    return cols;
  }
  // zoomTo shows t0 to t1 (µs) across the chart.
  function zoomTo(t0, t1) {
    scale = clampScale((W - LABEL - PAD) / Math.max(t1 - t0, 1));
    extent();
    view.scrollLeft = Math.max(0, t0 * scale);
    paint();
    followPin();
  }
  function timeAt(x) { return (x - LABEL + view.scrollLeft) / scale; }

  // overlay outlines the hovered and the pinned op on a canvas of its own,
  // so that moving the pointer never repaints 100,000 bars.
  function overlay() {
    hctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    hctx.clearRect(0, 0, W, H);
    hctx.save();
    hctx.beginPath();
    hctx.rect(LABEL, TOP, W - LABEL, H - TOP);
    hctx.clip();
    if (drag && drag.x1 != null) {
      hctx.fillStyle = "rgba(26,86,219,0.15)";
      hctx.fillRect(Math.min(drag.x0, drag.x1), TOP, Math.abs(drag.x1 - drag.x0), H - TOP);
    }
    if (band) {
      var a = xOf(band.s), z = Math.max(xOf(band.e), a + 2);
      hctx.fillStyle = "rgba(200,16,46,0.12)";
      hctx.fillRect(a - 6, TOP, z - a + 12, H - TOP);
      hctx.fillStyle = "rgba(200,16,46,0.8)";
      hctx.fillRect(a - 1, TOP, 2, H - TOP);
    }
    [[hover, "#1d232b"], [pinned, "#1a56db"]].forEach(function (o) {
      if (o[0] < 0) return;
      var b = boxOf(o[0]);
      hctx.strokeStyle = o[1];
      hctx.lineWidth = 2;
      hctx.strokeRect(Math.max(b.x, LABEL - 2) - 1, b.y - 1, Math.min(b.w, W + 4 - b.x) + 2, b.h + 2);
    });
    hctx.restore();
  }

  var queued = false;
  function schedule() {
    if (queued) return;
    queued = true;
    requestAnimationFrame(function () { queued = false; paint(); followPin(); });
  }

  function zoomAt(s, ax) {
    s = clampScale(s || fitScale());
    var at = (view.scrollLeft + ax - LABEL) / scale;
    scale = s;
    extent();
    view.scrollLeft = at * scale - (ax - LABEL);
    paint();
    followPin();
  }
  function fitRows() { rowH = Math.min(Math.max(Math.floor((H - TOP - PAD) / Math.max(NR, 1)), 3), 18); }
  function relayout() {
    layoutButton.textContent = byWorker ? "a lane per process" : "a row per worker";
    document.body.dataset.rows = String(NR);
    extent();
    paint();
    followPin();
  }
  function setRows(h) {
    h = Math.min(Math.max(Math.round(h), 2), 40);
    var mid = (view.scrollTop + (H - TOP) / 2) / rowH;
    rowH = h;
    extent();
    view.scrollTop = mid * rowH - (H - TOP) / 2;
    paint();
    followPin();
  }

  // hit returns the op under a point of the view (client px relative to
  // its corner): a binary search in the lane under it, with a few px of
  // slack so that ops thinner than a pixel can be pointed at.
  function hit(x, y) {
    if (banded || x < LABEL || y < TOP) return -1;
    var l = Math.floor((y - TOP + view.scrollTop) / rowH);
    if (l < 0 || l >= NR) return -1;
    var t = (x - LABEL + view.scrollLeft) / scale, tol = TIP / scale, best = -1, bestD = Infinity, ops = rowOps[l];
    for (var k = firstReaching(l, t - tol); k < ops.length; k++) {
      var i = ops[k];
      if (start[i] > t + tol) break;
      var d = t < start[i] ? start[i] - t : t > stop[i] ? t - stop[i] : 0;
      if (d <= tol && d < bestD) { best = i; bestD = d; }
    }
    return best;
  }
  function faultAt(x, y) {
    if (x < LABEL || y < AXIS || y >= AXIS + levels * FROW) return null;
    var lv = Math.floor((y - AXIS) / FROW), t = (x - LABEL + view.scrollLeft) / scale, tol = TIP / scale;
    for (var n = 0; n < faults.length; n++) {
      var f = faults[n];
      if (f.lv === lv && f.s - tol <= t && t <= f.e + tol) return f;
    }
    return null;
  }

  function tipOp(i) {
    tip.textContent = "";
    var o = out(i), lane = D.lanes[LN[i]];
    add(tip, "div", "h", (/^p[0-9]+$/.test(lane) ? "process " : "") + lane + " · " + D.fs[FN[i]]);
    var badge = add(add(tip, "div"), "span", "o", CLS[o]);
    badge.style.background = COL[o];
    if (o >= 5) {
      if (val(VL[i])) add(tip, "div", o === 6 ? "w" : null, val(VL[i]));
      add(tip, "div", null, DUR[i] > 0 ? "from " + secs(start[i], 6) + " to " + secs(stop[i], 6) + " (" + dur(stop[i] - start[i]) + ")" : "at " + secs(start[i], 6));
      return;
    }
    add(tip, "div", null, "value " + val(VL[i]));
    if (ER[i] >= 0) add(tip, "div", "w", "error " + val(ER[i]));
    if (MK[i] != null) add(tip, "div", "w", "marked: " + val(MK[i]));
    var when = "invoked at " + secs(start[i], 6);
    if (o === 3) when += ", never completed: drawn to the end";
    else if (o === 4 && DUR[i] < 0) when += ", never ended: drawn to the end";
    else when += ", " + (o === 4 ? "ended" : CLS[o]) + " at " + secs(stop[i], 6) + " after " + dur(stop[i] - start[i]);
    add(tip, "div", null, when);
    var during = faults.filter(function (f) { return f.s <= stop[i] && f.e >= start[i]; }).map(function (f) { return f.n; });
    if (during.length) add(tip, "div", "w", "during " + during.join(", "));
  }
  function tipFault(f) {
    tip.textContent = "";
    add(tip, "div", "h", f.n);
    add(tip, "div", null, "from " + secs(f.s, 3) + (f.a ? ", still active at the end (" + secs(f.e, 3) + ")" : " to " + secs(f.e, 3) + " (" + dur(f.e - f.s) + ")"));
  }
  function place(x, y) {
    tip.style.display = "block";
    var r = tip.getBoundingClientRect();
    var left = Math.min(x + 14, window.innerWidth - r.width - 6), top = y + 16;
    if (top + r.height > window.innerHeight - 4) top = y - r.height - 10;
    tip.style.left = Math.max(left, 4) + "px";
    tip.style.top = Math.max(top, 4) + "px";
  }
  function hide() { tip.style.display = "none"; }
  // followPin keeps a pinned tooltip beside its op while the view moves,
  // and hides it while the op is out of sight.
  function followPin() {
    if (pinned < 0) return;
    var b = boxOf(pinned), v = view.getBoundingClientRect();
    if (b.x + b.w < LABEL || b.x > W || b.y + b.h < TOP || b.y > H) { hide(); return; }
    tipOp(pinned);
    place(v.left + Math.max(b.x, LABEL), v.top + b.y + b.h - 10);
  }
  function local(ev) {
    var r = view.getBoundingClientRect();
    return { x: ev.clientX - r.left, y: ev.clientY - r.top };
  }

  // On bands, a click zooms in eightfold around it and a drag zooms to
  // the range dragged over; hovering tells a column's counts.
  function tipBand(x, y) {
    var l = Math.floor((y - TOP + view.scrollTop) / rowH);
    if (x < LABEL || y < TOP || l < 0 || l >= NR || !counts[l]) return false;
    var r = bucketsAt(x, view.scrollLeft), s = sumAt(l, r[0], r[1]);
    tip.textContent = "";
    add(tip, "div", "h", rows[l].label + " · " + plural(s[0] + s[1] + s[2], "op"));
    add(tip, "div", null, s[0] + " ok · " + s[1] + " fail · " + s[2] + " info or pending");
    add(tip, "div", null, "from " + secs(r[0] / NB * END, 3) + " to " + secs((r[1] + 1) / NB * END, 3));
    add(tip, "div", "w", "click to zoom in, drag to zoom to a range");
    return true;
  }
  view.addEventListener("mousedown", function (ev) {
    var p = local(ev);
    if (banded && p.x >= LABEL && p.y >= TOP) drag = { x0: p.x, x1: null };
  });
  view.addEventListener("mouseup", function (ev) {
    if (!drag) return;
    var p = local(ev), d = drag;
    drag = null;
    zoomClick = true;
    if (d.x1 != null && Math.abs(p.x - d.x0) > 4) {
      zoomTo(timeAt(Math.min(p.x, d.x0)), timeAt(Math.max(p.x, d.x0)));
    } else {
      var t = timeAt(p.x), w = (W - LABEL) / scale / 8;
      zoomTo(t - w / 2, t + w / 2);
    }
    hide();
    document.body.dataset.zoomed = String(Number(document.body.dataset.zoomed || 0) + 1);
  });
  view.addEventListener("mousemove", function (ev) {
    if (drag) { drag.x1 = local(ev).x; overlay(); return; }
    if (banded) {
      var q = local(ev);
      if (tipBand(q.x, q.y)) place(ev.clientX, ev.clientY); else hide();
      return;
    }
    if (pinned >= 0) return;
    var p = local(ev), i = hit(p.x, p.y);
    if (i !== hover) { hover = i; overlay(); }
    if (i >= 0) { tipOp(i); place(ev.clientX, ev.clientY); return; }
    var f = faultAt(p.x, p.y);
    if (f) { tipFault(f); place(ev.clientX, ev.clientY); } else hide();
  });
  view.addEventListener("mouseleave", function () {
    hover = -1;
    overlay();
    if (pinned < 0) hide();
  });
  // A click (or a tap) pins the op's details; another click elsewhere, or
  // Escape, lets them go.
  var zoomClick = false;
  view.addEventListener("click", function (ev) {
    // The click that ends a zoom on the bands pins nothing.
    if (zoomClick) { zoomClick = false; return; }
    var p = local(ev), i = hit(p.x, p.y);
    hover = -1;
    if (i >= 0 && i !== pinned) {
      pinned = i;
      tipOp(i);
      place(ev.clientX, ev.clientY);
    } else {
      pinned = -1;
      var f = faultAt(p.x, p.y);
      if (f) { tipFault(f); place(ev.clientX, ev.clientY); } else hide();
    }
    overlay();
  });
  document.addEventListener("keydown", function (ev) {
    if (ev.key === "Escape") { pinned = -1; hide(); overlay(); }
  });
  view.addEventListener("wheel", function (ev) {
    if (!ev.ctrlKey) return;
    ev.preventDefault();
    zoomAt(scale * Math.exp(-ev.deltaY * 0.002), local(ev).x);
  }, { passive: false });
  view.addEventListener("scroll", schedule);
  window.addEventListener("resize", function () {
    var fitted = scale <= fitScale() * 1.0001;
    resize();
    scale = fitted ? fitScale() : clampScale(scale);
    extent();
    resize();
    schedule();
  });

  // For tests and the console: where op i's bar is, and where time t
  // (µs) is, in client coordinates.
  window.timeline = {
    box: function (i) {
      var b = boxOf(i), v = view.getBoundingClientRect();
      return { x: v.left + b.x, y: v.top + b.y, w: b.w, h: b.h };
    },
    x: function (t) { return view.getBoundingClientRect().left + xOf(t); },
    // y is the middle of row l in client coordinates.
    y: function (l) { return view.getBoundingClientRect().top + TOP + l * rowH - view.scrollTop + rowH / 2; },
    // ops are the decoded ops: l (lane), f and v (indexes into lanes, fs
    // and vals), o (outcome), start and stop (µs).
    ops: { l: LN, f: FN, v: VL, o: OUT, start: start, stop: stop }
  };

  // The label column fits the longest lane name, within reason.
  ctx.font = "11px system-ui, sans-serif";
  D.lanes.forEach(function (n) { LABEL = Math.max(LABEL, Math.ceil(ctx.measureText(n + " +99").width) + 12); });
  LABEL = Math.min(LABEL, 200);
  header();
  resize();
  // A lane per process when each gets at least 4 px, else a row per worker.
  layoutRows((H - TOP - PAD) / Math.max(NL, 1) < 4);
  fitRows();
  scale = fitScale();
  extent();
  // The chart's size can add or remove scroll bars, which changes the
  // room it has: measure again.
  resize();
  scale = fitScale();
  relayout();
  // When the first draw was done, in ms since navigation start: what
  // BenchmarkTimeline1MLoad reads as the time the page takes to open.
  document.body.dataset.ready = String(Math.round(performance.now()));
})();
</script>
</body>
</html>
`
