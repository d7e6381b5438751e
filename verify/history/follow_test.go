package history

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

const followSample = `{"index":0,"type":"invoke","process":0,"f":"write","value":1,"time":10}
{"index":1,"type":"ok","process":0,"f":"write","value":1,"time":20}

{"index":2,"type":"invoke","process":1,"f":"read","value":null,"time":30}
{"index":3,"type":"ok","process":1,"f":"read","value":1,"time":40}
`

// Fed a byte at a time, the follower returns the events Parse finds in
// the whole file, each once, and nothing of a line before its newline.
func TestFollowerBytewise(t *testing.T) {
	want, err := Parse("h", []byte(followSample), JSONL)
	if err != nil {
		t.Fatal(err)
	}
	f := NewFollower("h", 0)
	var got []Event
	for i := range len(followSample) {
		es, err := f.Add([]byte{followSample[i]})
		if err != nil {
			t.Fatal(err)
		}
		if len(es) > 0 && followSample[i] != '\n' {
			t.Fatalf("events returned at byte %d (%q), before a newline", i, followSample[i])
		}
		got = append(got, es...)
	}
	if len(got) != 4 || !reflect.DeepEqual(got, want.Events) {
		t.Fatalf("got %d events %v, want %v", len(got), got, want.Events)
	}
	if f.Lines() != 5 || f.Ended() {
		t.Fatalf("lines %d ended %v, want 5 false", f.Lines(), f.Ended())
	}
}

// A malformed line is named by its number, with what is wrong; the
// events before it come back with the error.
func TestFollowerMalformed(t *testing.T) {
	f := NewFollower("h.jsonl", 0)
	es, err := f.Add([]byte(followSample + `{"index":4,"type":"okay","process":1}` + "\n"))
	var ie *InputError
	if !errors.As(err, &ie) || ie.Line != 6 || !strings.Contains(err.Error(), "h.jsonl:6:") || !strings.Contains(err.Error(), "okay") {
		t.Fatalf("error %v (%#v), want one at h.jsonl:6 naming \"okay\"", err, ie)
	}
	if len(es) != 4 {
		t.Fatalf("%d events before the error, want 4", len(es))
	}
	f = NewFollower("h.jsonl", 40)
	if _, err := f.Add([]byte(strings.Repeat("x", 41))); err == nil || !strings.Contains(err.Error(), "h.jsonl:1:") || !strings.Contains(err.Error(), "longer than 40 bytes") {
		t.Fatalf("overlong partial line: %v", err)
	}
}

// The end marker ends the history; what follows it is not read, and
// the readers of whole files skip it.
func TestEndMarker(t *testing.T) {
	data := followSample + " { \"end\" : true }\n" + "garbage\n"
	f := NewFollower("h", 0)
	es, err := f.Add([]byte(data))
	if err != nil || len(es) != 4 || !f.Ended() {
		t.Fatalf("events %d err %v ended %v, want 4 nil true", len(es), err, f.Ended())
	}
	h, err := Parse("h", []byte(followSample+EndMarker+"\n"), JSONL)
	if err != nil || len(h.Events) != 4 {
		t.Fatalf("Parse with the marker: %v, %d events", err, len(h.Events))
	}
	for _, no := range []string{`{"end":false}`, `{"end":true,"x":1}`, `{"end":"true"}`} {
		if IsEndMarker([]byte(no)) {
			t.Errorf("%s taken for the end marker", no)
		}
	}
}

// Follow reads a file while another goroutine writes it, half lines
// included, and stops at the marker; without one it stops when the file
// has been idle, reporting the torn last line unparsed.
func TestFollowFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	w, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var got []Event
	done := make(chan error, 1)
	var end FollowEnd
	go func() {
		var err error
		end, err = Follow(context.Background(), path, FollowOptions{Poll: time.Millisecond}, func(es []Event) error {
			got = append(got, es...)
			return nil
		})
		done <- err
	}()
	// Written in pieces that cut lines, with pauses the reader sees.
	text := followSample + EndMarker + "\n"
	for i := 0; i < len(text); i += 17 {
		if _, err := w.WriteString(text[i:min(i+17, len(text))]); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("Follow did not end at the marker")
	}
	if !end.Marker || end.Events != 4 || len(got) != 4 || got[3].Value != int64(1) {
		t.Fatalf("end %+v, %d events (%v)", end, len(got), got)
	}

	torn := filepath.Join(t.TempDir(), "torn.jsonl")
	if err := os.WriteFile(torn, []byte(followSample+`{"index":4,"ty`), 0o644); err != nil {
		t.Fatal(err)
	}
	end, err = Follow(context.Background(), torn, FollowOptions{Idle: 20 * time.Millisecond, Poll: time.Millisecond}, func([]Event) error { return nil })
	if err != nil || end.Marker || end.Events != 4 || end.TornLine != 6 {
		t.Fatalf("idle end %+v, %v; want 4 events, torn line 6, no marker", end, err)
	}
}

// FuzzFollowLines holds the follower to the whole-file reader: whatever
// the pieces the bytes arrive in, it returns the same events and the same
// error as when they arrive at once, never panics, places an error on a
// line of the input, and, for input that ends in a newline and has no end
// marker, agrees with Parse.
func FuzzFollowLines(f *testing.F) {
	f.Add([]byte(followSample), uint8(7))
	f.Add([]byte(followSample+EndMarker+"\nx\n"), uint8(1))
	f.Add([]byte(`{"index":0,"type":"invoke","process":0,"f":"txn","value":[["append",1,2]]}`+"\n"+`{"ty`), uint8(3))
	f.Add([]byte("{\"type\":\"ok\"\xff}\n"), uint8(2))
	const maxLine = 4096
	f.Fuzz(func(t *testing.T, data []byte, step uint8) {
		if len(data) > 64<<10 {
			return // bounded reads: the follower's cost is linear, nothing to learn from size
		}
		whole := NewFollower("fuzz", maxLine)
		want, wantErr := whole.Add(data)
		n := max(int(step), 1)
		pieces := NewFollower("fuzz", maxLine)
		var got []Event
		var gotErr error
		for i := 0; i < len(data) && gotErr == nil; i += n {
			var es []Event
			es, gotErr = pieces.Add(data[i:min(i+n, len(data))])
			got = append(got, es...)
		}
		if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) {
			t.Fatalf("in pieces of %d: %d events, %v; at once: %d events, %v", n, len(got), gotErr, len(want), wantErr)
		}
		if wantErr != nil {
			var ie *InputError
			if !errors.As(wantErr, &ie) || ie.File != "fuzz" || ie.Line < 1 || ie.Line > bytes.Count(data, []byte("\n"))+1 {
				t.Fatalf("error not placed on a line of the input: %v", wantErr)
			}
			return
		}
		if whole.Ended() || len(data) == 0 || data[len(data)-1] != '\n' {
			return
		}
		h, err := Parse("fuzz", data, JSONL)
		if err != nil {
			// Parse also checks the whole file is UTF-8 and that it
			// holds events; the follower takes lines one by one.
			if len(want) > 0 && utf8.Valid(data) {
				t.Fatalf("Parse refuses what the follower read (%d events): %v", len(want), err)
			}
			return
		}
		if !reflect.DeepEqual(h.Events, want) && !(len(h.Events) == 0 && len(want) == 0) {
			t.Fatalf("follower %v, Parse %v", want, h.Events)
		}
	})
}
