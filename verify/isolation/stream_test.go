package isolation

import (
	"bytes"
	"context"
	"fmt"
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
			data := simulate(t, db, w, 1000, 3)
			h, err := history.Parse("sim", data, history.JSONL)
			if err != nil {
				t.Fatal(err)
			}
			o := Options{Workload: w, Consistency: "strict-serializable"}
			want, err := Check(context.Background(), h, o)
			if err != nil {
				t.Fatal(err)
			}
			for name, in := range asFormats(t, h.Events) {
				got, err := CheckReader(context.Background(), "sim", bytes.NewReader(in), "", history.Limits{}, o)
				if err != nil {
					t.Fatalf("%s %s %s: %v", db, w, name, err)
				}
				if got.Valid != want.Valid || !slices.Equal(got.AnomalyTypes, want.AnomalyTypes) || fmt.Sprint(got.Counts) != fmt.Sprint(want.Counts) || got.Txns != want.Txns {
					t.Fatalf("%s %s %s: %v %v %v, whole %v %v %v", db, w, name, got.Valid, got.AnomalyTypes, got.Counts, want.Valid, want.AnomalyTypes, want.Counts)
				}
				for typ, as := range want.Anomalies {
					for i, a := range as {
						b := got.Anomalies[typ][i]
						if fmt.Sprint(a.Ops) != fmt.Sprint(b.Ops) || a.Explanation != b.Explanation {
							t.Fatalf("%s %s %s: %s %d differs:\n%+v\n%+v", db, w, name, typ, i, b, a)
						}
					}
				}
			}
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
