package isolation

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/txnsim"
)

// asFormats writes a history's events as EDN (a map a line, and all in
// one vector) and as a JSON array.
func asFormats(t *testing.T, events []history.Event) map[string][]byte {
	t.Helper()
	var lines []string
	for _, e := range events {
		lines = append(lines, fmt.Sprintf("{:index %d, :type :%s, :process %d, :f :%s, :value %s, :time %d}", e.Index, e.Type, e.Process, e.F, history.Show(e.Value), e.Time))
	}
	var js bytes.Buffer
	if err := history.WriteAll(&js, events); err != nil {
		t.Fatal(err)
	}
	jsonLines := strings.Split(strings.TrimSpace(js.String()), "\n")
	return map[string][]byte{
		"edn":        []byte(strings.Join(lines, "\n") + "\n"),
		"edn-vector": []byte("[" + strings.Join(lines, "\n ") + "]\n"),
		"json":       []byte("[" + strings.Join(jsonLines, ",\n") + "]"),
	}
}

// The streaming check reads EDN and JSON arrays to the same results,
// examples included, as Check on the history parsed whole.
func TestStreamFormatsAgree(t *testing.T) {
	for _, db := range txnsim.DBs {
		for _, w := range []string{ListAppend, RWRegister} {
			o := Options{Workload: w, Consistency: "strict-serializable"}
			h, want := checkWhole(t, simulate(t, db, w, 1000, 3), o)
			for name, in := range asFormats(t, h.Events) {
				got, err := CheckReader(context.Background(), "sim", bytes.NewReader(in), "", history.Limits{}, o)
				if err != nil {
					t.Fatalf("%s %s %s: %v", db, w, name, err)
				}
				sameResult(t, db+" "+w+" "+name, got, want)
			}
		}
	}
}

// checkWhole parses JSON Lines data whole and checks it with Check.
func checkWhole(t *testing.T, data []byte, o Options) (*history.History, *Result) {
	t.Helper()
	h, err := history.Parse("sim", data, history.JSONL)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Check(context.Background(), h, o)
	if err != nil {
		t.Fatal(err)
	}
	return h, want
}

// sameResult fails unless got is want: verdict, anomalies, counts and
// every example's operations and explanation.
func sameResult(t *testing.T, name string, got, want *Result) {
	t.Helper()
	if got.Valid != want.Valid || !slices.Equal(got.AnomalyTypes, want.AnomalyTypes) || fmt.Sprint(got.Counts) != fmt.Sprint(want.Counts) || got.Txns != want.Txns {
		t.Fatalf("%s: %v %v %v, whole %v %v %v", name, got.Valid, got.AnomalyTypes, got.Counts, want.Valid, want.AnomalyTypes, want.Counts)
	}
	for typ, as := range want.Anomalies {
		for i, a := range as {
			b := got.Anomalies[typ][i]
			if fmt.Sprint(a.Ops) != fmt.Sprint(b.Ops) || a.Explanation != b.Explanation {
				t.Fatalf("%s: %s %d differs:\n%+v\n%+v", name, typ, i, b, a)
			}
		}
	}
}

// JSON Lines read by the fast reader on the Decoder's workers give what
// the serial reader gives (one processor) and what Check gives the
// history parsed whole, with lines left to the general reader here and
// there (an escaped string, a key field), nemesis events and events
// without an index among them, over several batches.
func TestStreamJSONLParallel(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	}
	for _, db := range []string{"serializable", "si", "read-committed"} {
		for _, w := range []string{ListAppend, RWRegister} {
			lines := strings.Split(strings.TrimSpace(string(simulate(t, db, w, 6000, 5))), "\n")
			var b strings.Builder
			for i, l := range lines {
				switch i % 101 {
				case 7:
					l = strings.Replace(l, `{`, `{"node":"n\u0031",`, 1)
				case 13:
					l = strings.Replace(l, `,"index":`, `,"x":`, 1)
					l = strings.Replace(l, `{"index":`, `{"x":`, 1)
				case 50:
					b.WriteString(`{"type":"info","process":"nemesis","f":"start","value":["n1"]}` + "\n")
				}
				b.WriteString(l + "\n")
			}
			data := []byte(b.String())
			o := Options{Workload: w, Consistency: "strict-serializable"}
			_, want := checkWhole(t, data, o)
			par, err := CheckReader(context.Background(), "sim", bytes.NewReader(data), "", history.Limits{}, o)
			if err != nil {
				t.Fatal(err)
			}
			sameResult(t, db+" "+w+" parallel", par, want)
			n := runtime.GOMAXPROCS(1)
			serial, err := CheckReader(context.Background(), "sim", bytes.NewReader(data), "", history.Limits{}, o)
			runtime.GOMAXPROCS(n)
			if err != nil {
				t.Fatal(err)
			}
			sameResult(t, db+" "+w+" serial", serial, want)
		}
	}
}

// Bad input streamed gets the errors Check gives the history parsed
// whole: of pairing, and of micro-operations.
func TestStreamErrors(t *testing.T) {
	inputs := []string{
		`{"type":"ok","process":0,"f":"txn","value":[["append",1,1]]}`,
		`{"type":"invoke","process":0,"f":"txn","value":[["append",1,1]]}` + "\n" + `{"type":"invoke","process":0,"f":"txn","value":[["append",1,2]]}`,
		`{"type":"invoke","process":0,"f":"read","value":null}`,
		`{"type":"invoke","process":0,"f":"txn","value":3}`,
		`{"type":"invoke","process":0,"f":"txn","value":[["x",1,1]]}`,
		`{"type":"invoke","process":0,"f":"txn","value":[["append",1]]}`,
		`{"type":"invoke","process":0,"f":"txn","value":[["append",1,1]]}` + "\n" + `{"type":"ok","process":0,"f":"txn","value":[["append",1,2]]}`,
		`{"type":"invoke","process":0,"f":"txn","value":[["r",1,null]]}` + "\n" + `{"type":"ok","process":0,"f":"txn","value":[["r",2,[1]]]}`,
		`{"type":"invoke","process":0,"f":"txn","value":[["r",1,null]]}` + "\n" + `{"type":"ok","process":0,"f":"txn","value":[["r",1,5]]}`,
		`{"type":"invoke","process":0,"f":"txn","value":[["r",1,null]]}` + "\n" + `{"type":"ok","process":0,"f":"txn","value":[]}`,
		`{"type":"invoke","process":0,"value":[["r",1,null]]}` + "\n" + `{"type":"ok","process":0,"f":"txn","value":[["r",1,[]]]}`,
		`{"type":"invoke","value":[["append",1,1]]}` + "\n" + `{"type":"ok","value":[["append",1,1]]}` + "\n" + `{"type":"ok","value":[["append",1,1]]}`,
	}
	for _, in := range inputs {
		h, err := history.Parse("h", []byte(in), history.JSONL)
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		_, want := Check(context.Background(), h, Options{Workload: ListAppend})
		_, got := CheckJSONL(context.Background(), "h", []byte(in), Options{Workload: ListAppend})
		if want == nil || got == nil || got.Error() != want.Error() {
			t.Errorf("%s:\nstreamed: %v\nwhole:    %v", in, got, want)
		}
	}
}

// A history read from a file is given room for all its transactions once
// the first presizeAfter are read, from the bytes they took, so that the
// transactions are not copied as they grow, serial or in parallel; one
// read from a stream of unknown size grows as it goes.
func TestReadPresizes(t *testing.T) {
	data := simulate(t, "si", ListAppend, 30_000, 1)
	file := filepath.Join(t.TempDir(), "h.jsonl")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	defer func() { readInParallel = true }()
	for _, c := range []struct {
		name      string
		parallel  bool
		fromFile  bool
		wantSized bool
	}{{"serial", false, true, true}, {"parallel", true, true, true}, {"unknown size", true, false, false}} {
		readInParallel = c.parallel
		var r io.Reader = bytes.NewReader(data)
		if c.fromFile {
			f, err := os.Open(file)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			r = f
		}
		d := history.NewDecoder(context.Background(), "h", r, history.JSONL, history.Limits{})
		p, err := read(d, ListAppend)
		d.Close()
		if err != nil {
			t.Fatal(err)
		}
		n, c0 := len(p.txns), cap(p.txns)
		if n != 30_000 {
			t.Fatalf("%s: %d transactions, want 30000", c.name, n)
		}
		// Sized: room for all, within the estimate's fifth of slack
		// (and a little for lines growing longer), and not the capacity
		// that appending one at a time arrives at.
		var grown []txn
		for range n {
			grown = append(grown, txn{})
		}
		sized := c0 >= n && c0 <= n*13/10 && c0 != cap(grown)
		if sized != c.wantSized {
			t.Errorf("%s: capacity %d for %d transactions (sized %v, want %v)", c.name, c0, n, sized, c.wantSized)
		}
	}
}
