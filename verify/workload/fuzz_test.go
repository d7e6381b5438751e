package workload

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
)

// FuzzCheck feeds any text that parses as a history to every model: a model
// answers or refuses the input, and never panics; an answer is a verdict
// with a one-line summary and a JSON object.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{
		"[{:type :invoke,:f :add, :value 0, :process 0}\n{:type :ok, :f :add, :value 0, :process 0}\n{:type :invoke, :f :read, :value nil, :process 0}\n{:type :ok, :f :read, :value [0 1], :process 0}]",
		`{"type":"invoke","f":"add","value":[0,1],"process":0}` + "\n" + `{"type":"ok","f":"add","value":[0,1],"process":0}` + "\n" +
			`{"type":"invoke","f":"read","value":[0,null],"process":1}` + "\n" + `{"type":"ok","f":"read","value":[0,1,1],"process":1}`,
		"{:type :invoke, :f :add, :value 1, :process 0}\n{:type :info, :f :add, :value 1, :process 0}\n{:type :invoke, :f :read, :process 1}\n{:type :ok, :f :read, :value 2, :process 1}",
		`[{"type":"invoke","f":"read","process":0},{"type":"ok","f":"read","process":0,"value":{"0":100,"7":-1,"1":1}},` +
			`{"type":"invoke","f":"transfer","value":{"from":6,"to":1,"amount":1},"process":1},{"type":"fail","f":"transfer","value":["negative",6,-1],"process":1}]`,
		"[{:type :invoke, :f :read, :value [[:r 0 nil] [:r 1 nil] [:r 2 nil]]},\n{:type :ok, :f :read, :value [[:r 0 1] [:r 1 1] [:r 2 nil]]},\n" +
			"{:type :invoke, :f :read, :value [[:r 2 nil] [:r 0 nil] [:r 1 nil]]},\n{:type :ok, :f :read, :value [[:r 2 1] [:r 0 1] [:r 1 nil]]}]",
		"{:type :invoke, :f :write, :value [[:w 0 1]], :process 3}\n{:type :ok, :f :write, :value [[:w 0 1]], :process 3}",
		"INFO  jepsen.util - 0\t:invoke\t:add\t-3\nINFO  jepsen.util - 0\t:ok\t:add\t-3\nINFO  jepsen.util - 1\t:invoke\t:read\tnil\nINFO  jepsen.util - 1\t:ok\t:read\t-3\n",
	} {
		f.Add([]byte(s))
	}
	options := []Options{{}, {LongForkGroupSize: 3, BankTotal: 100, BankAllowNegative: true, SetFullLinearizable: true, BankAccounts: []string{"0"}}}
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := history.Parse("fuzz", data, "")
		if err != nil {
			return
		}
		for _, model := range Names() {
			for _, o := range options {
				r, err := Check(model, h, o)
				if err != nil {
					var oe *OpError
					if errors.As(err, &oe) && oe.Model != model {
						t.Fatalf("%s: error names model %q", model, oe.Model)
					}
					if err.Error() == "" {
						t.Fatalf("%s: empty error", model)
					}
					continue
				}
				if r.Valid != linear.True && r.Valid != linear.False && r.Valid != linear.Unknown {
					t.Fatalf("%s: verdict %d", model, r.Valid)
				}
				if r.Valid == linear.Unknown && r.Reason == "" {
					t.Fatalf("%s: unknown without a reason", model)
				}
				if s := r.Summary(); !strings.HasPrefix(s, model+": ") || strings.Contains(s, "\n") {
					t.Fatalf("%s: summary %q", model, s)
				}
				b, err := json.Marshal(r)
				if err != nil {
					t.Fatalf("%s: marshal: %v", model, err)
				}
				var m map[string]any
				if err := json.Unmarshal(b, &m); err != nil || m["model"] != model {
					t.Fatalf("%s: JSON %s: %v", model, b, err)
				}
			}
		}
	})
}
