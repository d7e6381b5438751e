package report

import (
	"cmp"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ipfence/ipfence/verify/history"
)

// The page is a fixed shell around one JSON document (timelineData) that a
// script draws on a canvas. A page must open with 100,000 operations, so
// nothing is one DOM element per operation: the canvas covers only the
// visible part of the chart and is repainted on scroll and zoom, finding the
// visible operations of each lane by binary search on time.
//
// Escaping: the shell is constant text, and the only data written into it
// are the title, escaped with html.EscapeString, and the JSON document,
// which goes into a <script type="application/json"> element. The HTML
// tokenizer ends that element only at "</script" (and treats "<!--"
// specially); both need a '<', which encoding/json writes inside strings
// as \u003c, so no value can end the element early. The script puts every
// string on the page with textContent or fillText, never innerHTML.

// timelineData is the JSON document the page draws. A page must open in
// seconds with a million operations, and the browser's time goes mostly
// into reading the document's bytes: so the operations are one compact
// string (Ops) rather than JSON numbers, a third of the size, which the
// script decodes into typed arrays in one pass.
type timelineData struct {
	Title string `json:"title"`
	// End is the right edge of the chart in µs since the test started: the
	// last event or fault boundary. Pending operations run to it.
	End int64 `json:"end"`
	// Lanes are the lanes' labels, top to bottom: the nemesis's rows, the
	// extra lanes, then each client process. Group is each lane's worker:
	// the processes that followed one another after crashes share a
	// number, and the page shades alternate workers; the nemesis's rows
	// are -1 and the extra lanes -2, -3, ….
	Lanes []string `json:"lanes"`
	Group []int    `json:"group"`
	// Fs and Vals are the distinct functions and texts (values and
	// errors); operations refer to them by index, since they repeat: a
	// register's few values, "nil" for every read invoke, "timeout".
	// Vals goes on the page as ValT and ValN (see encodeVals): a
	// million-op run writes hundreds of thousands of distinct values,
	// most of them numbers in a few shapes ("17", "→ 17", "[17,18]").
	Fs   []string   `json:"fs"`
	Vals []string   `json:"-"`
	ValT [][]string `json:"valt"`
	ValN string     `json:"valn"`
	// N is the number of operations, and Ops the operations in order of
	// invoke time: base64 of a run of unsigned varints per operation
	// (see opsWriter; internal/testonly/timelinepage reads them back).
	N   int    `json:"n"`
	Ops string `json:"ops"`
	// Mark maps the position of each marked operation to its note's
	// index in Vals.
	Mark   map[int]int `json:"mk,omitempty"`
	Faults []pageFault `json:"faults"`
	// Verdict and Checkers head the page (see TimelineOptions).
	Verdict  string        `json:"verdict,omitempty"`
	Checkers []pageChecker `json:"checkers,omitempty"`
	// Dense is the number of operations in view above which the page
	// draws summary bands instead of bars (see TimelineOptions.Summarize).
	Dense int `json:"dense"`
}

// pageFault is one shaded period, in µs.
type pageFault struct {
	Name  string `json:"n"`
	Start int64  `json:"s"`
	End   int64  `json:"e"`
	// Open marks a fault still active when the test ended.
	Open bool `json:"a,omitempty"`
}

// micros converts nanoseconds to whole microseconds, rounding: µs keep
// the numbers short and are finer than anything drawn.
func micros(ns int64) int64 {
	if ns < 0 {
		return -((-ns + 500) / 1000)
	}
	return (ns + 500) / 1000
}

// Timeline writes a self-contained HTML page of the history: a lane per
// process with a bar per operation from its invoke to its completion,
// coloured by outcome, the nemesis's operations in lanes of their own, the
// faults shaded across every lane, and a time axis. Hovering over or
// clicking on a bar shows its f, value, error and times. It is
// TimelineWith without a story.
func Timeline(w io.Writer, title string, events []history.Event, faults []Fault) error {
	return TimelineWith(w, events, TimelineOptions{Title: title, Faults: faults})
}

// TimelineOptions tell the story of a run around its history: what the
// processes are called, lanes of events that a test recorded beside the
// history (a provider's mutations, a database's log), marks on the
// operations a checker singled out, and the verdict with each checker's
// findings in the header, each a link to its moment.
type TimelineOptions struct {
	// Title heads the page.
	Title string
	// Faults are shaded across every lane.
	Faults []Fault
	// Names names a process in the lanes and tooltips; nil, or "" for a
	// process, keeps the default: "nemesis" and "p" followed by the
	// number.
	Names func(history.Process) string
	// Lanes are drawn between the nemesis's and the clients', in order.
	Lanes []Lane
	// Marks single out client operations, by the position of their invoke
	// in the events: they are outlined in red and their tooltips say why.
	Marks map[int]string
	// Verdict is the run's verdict as the header shows it, such as
	// "valid", "invalid" or "unknown"; "" shows none.
	Verdict string
	// Checkers are each checker's verdict and findings, in the order the
	// header lists them.
	Checkers []CheckerSummary
	// Summarize is the number of operations in view above which the page
	// draws each row as a band of counts per time (how many ops, how many
	// failed or timed out) rather than a bar per op; a click or a drag on
	// the bands zooms in, down to single ops. 0 means DefaultSummarize.
	Summarize int
}

// DefaultSummarize is the default TimelineOptions.Summarize: a browser
// draws this many bars in a fraction of a second, and a run of a million
// operations opens at once as bands.
const DefaultSummarize = 125_000

// Lane is a row of events that are not operations of the history.
type Lane struct {
	// Name labels the lane.
	Name string
	// Events are the lane's events, in any order.
	Events []LaneEvent
}

// LaneEvent is one event of a lane: an instant, or a period when End is
// after At.
type LaneEvent struct {
	// At and End are measured from the start of the test, like event
	// times.
	At, End time.Duration
	// Text is what the event was, drawn on it and heading its tooltip;
	// Detail says more in the tooltip.
	Text, Detail string
	// Bad draws the event in red: evidence of a fault in the system.
	Bad bool
}

// CheckerSummary is one checker's line in the header.
type CheckerSummary struct {
	// Name names the checker; Verdict is its answer as shown ("true",
	// "false", "unknown"); Summary is a few words of figures.
	Name, Verdict, Summary string
	// Findings are what the checker found, first the most telling.
	Findings []Finding
}

// Finding is one thing a checker found. A finding with a moment is a link:
// clicking it brings the moment into view, shaded, and pins the lane event
// that starts exactly at At, if there is one.
type Finding struct {
	Text string
	// Timed says At and End hold the finding's moment: an instant at At,
	// or the period to End when End is after At.
	Timed   bool
	At, End time.Duration
	// Pin, when set, is the text of the lane event to pin among those
	// starting at At: several may start within the same microsecond
	// (four stale unassigns of one batch), and without it the page pins
	// the first drawn.
	Pin string
}

// maxFindings bounds the findings the header lists per checker: it is one
// element per finding, and a checker that found thousands of things says
// as much with its first.
const maxFindings = 50

// TimelineWith writes the timeline page of the history with the story o
// tells (see Timeline).
func TimelineWith(w io.Writer, events []history.Event, o TimelineOptions) error {
	r, err := prepare(events, o.Faults)
	if err != nil {
		return fmt.Errorf("timeline %q: %w", o.Title, err)
	}
	for _, l := range o.Lanes {
		for _, e := range l.Events {
			if e.At < 0 {
				return fmt.Errorf("timeline %q: lane %q: event %q at %v: events must be at or after 0", o.Title, l.Name, e.Text, e.At)
			}
			r.end = max(r.end, int64(e.At), int64(e.End))
		}
	}
	d := r.timeline(events, o)
	data, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("timeline %q: %w", o.Title, err)
	}
	for _, b := range [][]byte{
		[]byte(timelineHead), []byte(html.EscapeString(o.Title)), []byte(timelineStyle),
		data, []byte(timelineScript),
	} {
		if _, err := w.Write(b); err != nil {
			return fmt.Errorf("timeline %q: %w", o.Title, err)
		}
	}
	return nil
}

// Page outcomes beyond the history's: a lane event, and a bad one.
const (
	laneOut outcome = nemesisOut + 1 + iota
	badOut
)

// pageChecker is a CheckerSummary on the page.
type pageChecker struct {
	Name     string        `json:"n"`
	Verdict  string        `json:"v"`
	Summary  string        `json:"s,omitempty"`
	Findings []pageFinding `json:"f"`
	// More counts the findings left off.
	More int `json:"more,omitempty"`
}

// pageFinding is a Finding on the page, its moment in µs; At is -1 when
// it has none.
type pageFinding struct {
	Text string `json:"t"`
	At   int64  `json:"s"`
	End  int64  `json:"e"`
	Pin  string `json:"p,omitempty"`
}

// timeline gathers what the page shows.
func (r *run) timeline(events []history.Event, o TimelineOptions) *timelineData {
	d := &timelineData{
		Title: o.Title, Verdict: o.Verdict, End: micros(r.end),
		Lanes: []string{}, Group: []int{}, Fs: []string{}, Vals: []string{},
		Faults: []pageFault{}, Dense: cmp.Or(o.Summarize, DefaultSummarize),
	}
	for _, f := range r.faults {
		d.Faults = append(d.Faults, pageFault{Name: f.name, Start: micros(f.start), End: micros(f.end), Open: f.open})
	}
	for _, c := range o.Checkers {
		pc := pageChecker{Name: c.Name, Verdict: c.Verdict, Summary: c.Summary, Findings: []pageFinding{}}
		for i, f := range c.Findings {
			if i == maxFindings {
				pc.More = len(c.Findings) - i
				break
			}
			pf := pageFinding{Text: clip(f.Text), At: -1, End: -1, Pin: clip(f.Pin)}
			if f.Timed {
				pf.At, pf.End = micros(int64(f.At)), micros(int64(max(f.End, f.At)))
			}
			pc.Findings = append(pc.Findings, pf)
		}
		d.Checkers = append(d.Checkers, pc)
	}
	name := func(p history.Process) string {
		if o.Names != nil {
			if s := o.Names(p); s != "" {
				return s
			}
		}
		if p == history.Nemesis {
			return "nemesis"
		}
		return "p" + p.String()
	}

	spans := slices.Clone(r.spans)
	// Lane events become spans of lanes of their own, ordered after every
	// operation that starts at the same time.
	laneOf := make(map[int]int) // call → extra lane
	call := len(events)
	for k, l := range o.Lanes {
		for _, e := range l.Events {
			s := span{start: int64(e.At), end: max(int64(e.End), int64(e.At)), call: call,
				outcome: laneOut, f: clip(e.Text), value: clip(e.Detail)}
			if e.Bad {
				s.outcome = badOut
			}
			laneOf[call] = k
			call++
			spans = append(spans, s)
		}
	}
	slices.SortStableFunc(spans, func(a, b span) int {
		return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(a.call, b.call))
	})

	// The nemesis's operations may overlap, so they take as many rows as
	// they need, first fit in invoke order.
	nemRow := make(map[int]int) // call → row
	var rowEnds []int64
	for _, s := range spans {
		if s.outcome != nemesisOut {
			continue
		}
		row := slices.IndexFunc(rowEnds, func(end int64) bool { return end <= s.start })
		if row < 0 {
			row = len(rowEnds)
			rowEnds = append(rowEnds, 0)
		}
		rowEnds[row] = max(s.end, s.start+1)
		nemRow[s.call] = row
	}
	for i := range rowEnds {
		n := name(history.Nemesis)
		if i > 0 {
			n = fmt.Sprintf("%s %d", n, i+1)
		}
		d.Lanes = append(d.Lanes, n)
		d.Group = append(d.Group, -1)
	}
	// Extra lanes are groups -2, -3, …: each its own, never merged.
	firstExtra := len(d.Lanes)
	for k, l := range o.Lanes {
		d.Lanes = append(d.Lanes, l.Name)
		d.Group = append(d.Group, -2-k)
	}
	procLane := make(map[history.Process]int)
	for w, procs := range workers(events) {
		for _, p := range procs {
			procLane[p] = len(d.Lanes)
			d.Lanes = append(d.Lanes, name(p))
			d.Group = append(d.Group, w)
		}
	}

	fIndex := make(map[string]int)
	vIndex := make(map[string]int)
	intern := func(index map[string]int, table *[]string, s string) int {
		i, ok := index[s]
		if !ok {
			i = len(*table)
			index[s] = i
			*table = append(*table, s)
		}
		return i
	}
	ops := opsWriter{buf: make([]byte, 0, 8*len(spans))}
	for i, s := range spans {
		lane := procLane[s.proc]
		switch s.outcome {
		case nemesisOut:
			lane = nemRow[s.call]
		case laneOut, badOut:
			lane = firstExtra + laneOf[s.call]
		}
		start := micros(s.start)
		dur := micros(s.end) - start
		if s.outcome == pendingOut {
			dur = -1
		}
		f, v, e := intern(fIndex, &d.Fs, s.f), intern(vIndex, &d.Vals, s.value), -1
		if s.err != "" {
			e = intern(vIndex, &d.Vals, s.err)
		}
		ops.op(lane, start, dur, s.outcome, f, v, e)
		if note, ok := o.Marks[s.call]; ok && s.outcome <= pendingOut {
			if d.Mark == nil {
				d.Mark = make(map[int]int)
			}
			d.Mark[i] = intern(vIndex, &d.Vals, clip(note))
		}
	}
	d.N = len(spans)
	d.Ops = base64.StdEncoding.EncodeToString(ops.buf)
	d.ValT, d.ValN = encodeVals(d.Vals)
	return d
}

// encodeVals writes texts as shapes and numbers: each text's runs of
// digits that read as a number (up to 15 digits, no leading zero, so
// that the page's arithmetic and printing give them back exactly) are
// cut out, leaving its shape, the pieces of text around them. The shapes
// are listed once; each text is then a run of unsigned varints, its
// shape's index and its numbers, all in one base64 string. The page
// decodes them on first need: a tooltip or a bar wide enough for its
// text.
func encodeVals(vals []string) ([][]string, string) {
	shapes := [][]string{}
	index := make(map[string]int)
	var buf []byte
	var nums []uint64
	for _, v := range vals {
		var pieces []string
		nums = nums[:0]
		lit := 0 // start of the current piece
		for i := 0; i < len(v); {
			if v[i] < '0' || v[i] > '9' {
				i++
				continue
			}
			j := i
			for j < len(v) && v[j] >= '0' && v[j] <= '9' {
				j++
			}
			if j-i <= 15 && (j-i == 1 || v[i] != '0') {
				n, _ := strconv.ParseUint(v[i:j], 10, 64)
				pieces = append(pieces, v[lit:i])
				nums = append(nums, n)
				lit = j
			}
			i = j
		}
		pieces = append(pieces, v[lit:])
		// The key prefixes each piece with its length, so that no two
		// shapes share one.
		var key strings.Builder
		for _, p := range pieces {
			key.WriteString(strconv.Itoa(len(p)))
			key.WriteByte(':')
			key.WriteString(p)
		}
		k, ok := index[key.String()]
		if !ok {
			k = len(shapes)
			index[key.String()] = k
			shapes = append(shapes, pieces)
		}
		buf = binary.AppendUvarint(buf, uint64(k))
		for _, n := range nums {
			buf = binary.AppendUvarint(buf, n)
		}
	}
	return shapes, base64.StdEncoding.EncodeToString(buf)
}

// opsWriter encodes operations for the page: per operation, unsigned
// varints of its lane, its start minus the previous one's (µs, never
// negative: operations come in start order), its duration plus one (0
// for one that never completed), f·8 + outcome, and v·2 + 1 when an
// error's index follows, else v·2. The value goes as v, the zigzag of
// its index minus one past the highest index an earlier operation's
// value had: texts are numbered as they first appear, so a new value is
// 0 and a read of the value just written 1, a byte where the index took
// three. Most operations take 7 to 9 bytes.
type opsWriter struct {
	buf  []byte
	prev int64
	hi   int // one past the highest value index written
}

func (w *opsWriter) op(lane int, start, dur int64, out outcome, f, value, err int) {
	v := zigzag(value-w.hi) << 1
	if err >= 0 {
		v |= 1
	}
	w.buf = binary.AppendUvarint(w.buf, uint64(lane))
	w.buf = binary.AppendUvarint(w.buf, uint64(start-w.prev))
	w.buf = binary.AppendUvarint(w.buf, uint64(dur+1))
	w.buf = binary.AppendUvarint(w.buf, uint64(f)<<3|uint64(out))
	w.buf = binary.AppendUvarint(w.buf, v)
	if err >= 0 {
		w.buf = binary.AppendUvarint(w.buf, uint64(err))
	}
	w.prev = start
	w.hi = max(w.hi, value+1)
}

// zigzag maps 0, -1, 1, -2, … to 0, 1, 2, 3, ….
func zigzag(d int) uint64 {
	if d < 0 {
		return uint64(-d)*2 - 1
	}
	return uint64(d) * 2
}

// workers groups the client processes into the workers that ran them, in
// order of first appearance. After an indeterminate (info) completion a
// worker goes on under a new process id, since the crashed operation may
// still take effect; the history does not say which new id belongs to
// which worker, so a new process joins a worker whose process crashed
// before the new one's first invoke, preferring one whose id differs from
// the new one by a multiple of the number of workers (the usual numbering:
// process + concurrency), then the one that crashed first. The grouping
// only orders and shades the lanes, so a wrong guess misplaces a lane,
// never an operation.
func workers(events []history.Event) [][]history.Process {
	type worker struct {
		procs    []history.Process
		crashed  bool
		crashPos int
	}
	var ws []worker
	of := make(map[history.Process]int)
	for pos, e := range events {
		if e.Process < 0 {
			continue
		}
		w, known := of[e.Process]
		switch {
		case e.Type == history.Invoke && known:
			ws[w].crashed = false
		case e.Type == history.Invoke:
			best := -1
			for i := range ws {
				c := &ws[i]
				if !c.crashed {
					continue
				}
				step := e.Process - c.procs[len(c.procs)-1]
				fits := step > 0 && step%history.Process(len(ws)) == 0
				if best < 0 {
					best = i
					continue
				}
				b := &ws[best]
				bstep := e.Process - b.procs[len(b.procs)-1]
				bfits := bstep > 0 && bstep%history.Process(len(ws)) == 0
				if (fits && !bfits) || (fits == bfits && c.crashPos < b.crashPos) {
					best = i
				}
			}
			if best < 0 {
				best = len(ws)
				ws = append(ws, worker{})
			}
			ws[best].procs = append(ws[best].procs, e.Process)
			ws[best].crashed = false
			of[e.Process] = best
		case e.Type == history.Info && known:
			ws[w].crashed, ws[w].crashPos = true, pos
		}
	}
	out := make([][]history.Process, len(ws))
	for i, w := range ws {
		out[i] = w.procs
	}
	return out
}

// ProcessNames names a harness's processes the way every page of a run
// does: "nemesis", each client by its thread ("client 3"), with the
// process number when the thread crashed and went on under a new one
// ("client 3 (p9)": the harness numbers a thread's next process by adding
// the concurrency), and the pseudo-processes a test gave names of its own
// in named (a provider's record merged into the history). Other negative
// processes get "", the page's default.
func ProcessNames(concurrency int, named map[history.Process]string) func(history.Process) string {
	return func(p history.Process) string {
		if s, ok := named[p]; ok {
			return s
		}
		switch {
		case p == history.Nemesis:
			return "nemesis"
		case p < 0:
			return ""
		case concurrency > 0 && int64(p) >= int64(concurrency):
			return fmt.Sprintf("client %d (p%d)", int64(p)%int64(concurrency), p)
		}
		return fmt.Sprintf("client %d", p)
	}
}
