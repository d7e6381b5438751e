package history

import (
	"bytes"
	"io"
	"runtime"
	"sync"
	"unicode/utf8"
)

// A JSON Lines history of ten million operations is twenty million lines:
// decoded one after another they took two thirds of a check's time. In
// parallel mode (Decoder.Parallel) one goroutine reads lines into batches,
// workers decode the batches, and Next hands their events out in order,
// exactly as the serial reader would, errors and torn last line included.

// parBatch is a run of lines and, once decoded, their events.
type parBatch struct {
	data     []byte  // the lines, newlines dropped
	ends     []int32 // ends[k] is where line k ends in data
	lineNos  []int32 // the number of each line
	base     int64   // the index of the batch's first event
	lastNoNL bool    // the last line had no newline: the input ended
	readErr  error   // what stopped the reading after these lines

	events  []Event
	evLines []int32
	// With a LineReader: what its Prepare returned, and which lines it
	// read (their events are left zero, for Take).
	prep  any
	taken []bool
	err   error // a line that is not an event (after events)
	torn  int   // the torn last line's number
	done  chan struct{}
}

// parBatchBytes is about how much text a batch holds (tests make it
// small, so that short inputs span many batches).
var parBatchBytes = 256 << 10

// parState is a parallel Decoder's pipeline.
type parState struct {
	order chan *parBatch // batches in input order, for Next
	quit  chan struct{}
	once  sync.Once
	cur   *parBatch
	at    int   // the next event of cur
	bytes int64 // the text of the batches taken, newlines included
}

// Parallel makes the Decoder decode JSON Lines on several goroutines
// (GOMAXPROCS, at most 4) while it hands the events out in order. It has
// no effect on other formats, on a Decoder with Lines set, or with one
// processor. Call it before the first Next.
func (d *Decoder) Parallel() {
	d.wantPar = true
}

// LineReader is a fast reader of some shape of JSON Lines event, in two
// steps, so that a parallel Decoder can run the costly one on its
// workers: Prepare reads a batch of lines on a worker (batches
// concurrently, so it must keep no state of its own between calls), and
// Take, called on the Decoder's caller's goroutine in input order,
// uses what Prepare read of one line. A line Prepare leaves, or one Take
// returns false for, is decoded by the Decoder as usual.
type LineReader interface {
	// Prepare reads lines (without their newlines, each valid until
	// Take is offered it), setting taken[k] for each line k it read.
	Prepare(lines [][]byte, taken []bool) any
	// Take is offered line k of the batch Prepare returned prep for: a
	// line it takes counts as an event and is not decoded.
	Take(prep any, k int, line []byte, lineNo int) bool
}

// ParallelLines makes the Decoder parallel, as Parallel does, with r
// reading the lines it can. When the Decoder runs serially (another
// format, or one processor) r is not used, and Lines, if set, is.
func (d *Decoder) ParallelLines(r LineReader) {
	d.wantPar, d.lineReader = true, r
}

// startPar starts the pipeline: a reader, and workers.
func (d *Decoder) startPar() {
	workers := min(runtime.GOMAXPROCS(0), 4)
	p := &parState{order: make(chan *parBatch, 4*workers), quit: make(chan struct{})}
	d.par = p
	work := make(chan *parBatch, 2*workers)
	go d.readBatches(p, work, parBatchBytes)
	for range workers {
		go func() {
			for b := range work {
				d.decodeBatch(b)
				close(b.done)
			}
		}()
	}
}

// readBatches reads lines into batches and hands each to the workers and,
// in order, to Next.
func (d *Decoder) readBatches(p *parState, work chan<- *parBatch, size int) {
	defer close(work)
	defer close(p.order)
	index := d.index
	for {
		// Sized for the batch at once: lines of about 100 bytes, the
		// last one ending past size.
		b := &parBatch{base: index, done: make(chan struct{}), data: make([]byte, 0, size+size/4),
			ends: make([]int32, 0, size/64), lineNos: make([]int32, 0, size/64)}
		for len(b.data) < size {
			line, nl, err := d.readLine()
			if err != nil {
				b.readErr = err
				break
			}
			if len(bytes.TrimSpace(line)) == 0 || IsEndMarker(line) {
				continue
			}
			b.data = append(b.data, line...)
			b.ends = append(b.ends, int32(len(b.data)))
			b.lineNos = append(b.lineNos, int32(d.line))
			index++
			if !nl {
				b.lastNoNL = true
			}
		}
		select {
		case work <- b:
		case <-p.quit:
			return
		}
		select {
		case p.order <- b:
		case <-p.quit:
			return
		}
		if b.readErr != nil {
			return
		}
	}
}

// decodeBatch decodes a batch's lines as the serial reader does.
func (d *Decoder) decodeBatch(b *parBatch) {
	b.events = make([]Event, 0, len(b.ends))
	b.evLines = make([]int32, 0, len(b.ends))
	if d.lineReader != nil {
		b.taken = make([]bool, len(b.ends))
		b.prep = d.lineReader.Prepare(b.lines(), b.taken)
	}
	start := int32(0)
	for k, end := range b.ends {
		line, lineNo, index := b.data[start:end], int(b.lineNos[k]), b.base+int64(k)
		start = end
		if d.detected && !utf8.Valid(line) {
			b.err = notUTF8Line(line, lineNo)
			return
		}
		if b.taken != nil && b.taken[k] {
			// For Take; its event, should it leave the line, is decoded then.
			b.events = append(b.events, Event{})
			b.evLines = append(b.evLines, int32(lineNo))
			continue
		}
		e, err := jsonlEvent(line, lineNo, index)
		if err != nil {
			if tornJSONL(line, b.lastNoNL && k == len(b.ends)-1, int(index)) {
				b.torn = lineNo
				return
			}
			b.err = err
			return
		}
		b.events = append(b.events, e)
		b.evLines = append(b.evLines, int32(lineNo))
	}
}

// lines returns the batch's lines.
func (b *parBatch) lines() [][]byte {
	out := make([][]byte, len(b.ends))
	start := int32(0)
	for k, end := range b.ends {
		out[k] = b.data[start:end:end]
		start = end
	}
	return out
}

// line returns the batch's line k.
func (b *parBatch) line(k int) []byte {
	start := int32(0)
	if k > 0 {
		start = b.ends[k-1]
	}
	return b.data[start:b.ends[k]:b.ends[k]]
}

// nextPar is Next's decode in parallel mode.
func (d *Decoder) nextPar() (Event, error) {
	p := d.par
	for {
		if b := p.cur; b != nil {
			for p.at < len(b.events) && b.taken != nil && b.taken[p.at] {
				k, lineNo := p.at, int(b.evLines[p.at])
				p.at++
				line := b.line(k)
				if d.lineReader.Take(b.prep, k, line, lineNo) {
					d.index++
					continue
				}
				// Left to the Decoder: the line read as an event of the
				// fast reader's shape, so it is whole JSON, never torn.
				d.evLine = lineNo
				return jsonlEvent(line, lineNo, b.base+int64(k))
			}
			if p.at < len(b.events) {
				e := b.events[p.at]
				b.events[p.at] = Event{} // the caller keeps what it needs
				d.evLine = int(b.evLines[p.at])
				p.at++
				return e, nil
			}
			switch {
			case b.err != nil:
				return Event{}, b.err
			case b.torn > 0:
				d.torn = b.torn
				return Event{}, io.EOF
			case b.readErr != nil:
				return Event{}, b.readErr
			}
		}
		b, ok := <-p.order
		if !ok {
			return Event{}, io.EOF
		}
		<-b.done
		p.cur, p.at = b, 0
		p.bytes += int64(len(b.data) + len(b.ends))
	}
}

// ExpectedEvents estimates how many events the whole input holds, from
// its size and the bytes the events so far took, a fifth more for slack
// (lines grow longer as their indexes and times do, so the estimate is
// high rather than low, and never more than one event a byte); 0 when the
// input's size is unknown (not a regular file) or nothing was read yet.
func (d *Decoder) ExpectedEvents() int64 {
	size, read := d.lr.size, d.consumed()
	if size <= 0 || read <= 0 || d.index <= 0 {
		return 0
	}
	return int64(min(float64(size)/float64(read)*float64(d.index)*1.2, float64(size)))
}

// consumed is how many bytes of input the events Next returned so far
// took, blank lines included.
func (d *Decoder) consumed() int64 {
	if p := d.par; p != nil {
		if p.cur == nil || p.at == 0 {
			return p.bytes
		}
		// The batches before the current one, and its lines so far
		// (events are its lines but for the blank ones it left out).
		return p.bytes - int64(len(p.cur.data)+len(p.cur.ends)) + int64(p.cur.ends[p.at-1]) + int64(p.at)
	}
	return d.lr.n - int64(d.br.Buffered())
}

// stopPar stops the pipeline's goroutines.
func (d *Decoder) stopPar() {
	if d.par != nil {
		d.par.once.Do(func() { close(d.par.quit) })
	}
}
