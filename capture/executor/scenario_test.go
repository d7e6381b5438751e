package executor_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture"
	"github.com/ipfence/ipfence/capture/executor"
	"github.com/ipfence/ipfence/capture/policy"
	"github.com/ipfence/ipfence/capture/provider"
	"github.com/ipfence/ipfence/capture/provider/memory"
	"github.com/ipfence/ipfence/capture/store"
	"github.com/ipfence/ipfence/internal/testonly/scenario"
)

// execWorld is an executor scenario's node: its journal in a bbolt file
// that outlives "crashes", and a provider that outlives the node.
type execWorld struct {
	t     *testing.T
	path  string
	st    *store.Store
	cloud *memory.Provider
	now   time.Time
}

const scenarioDomain = "provider:mem:group:g"

func (w *execWorld) key(cs *scenario.Case) capture.Key {
	a, err := netip.ParseAddr(cs.Get("addr", "10.0.0.10"))
	if err != nil {
		w.t.Fatalf("%s: addr: %v", cs.Pos, err)
	}
	return capture.Key{Pool: "web", Address: a, Domain: scenarioDomain}
}

func (w *execWorld) open() {
	st, err := store.Open(w.path, store.Options{NoSync: true})
	if err != nil {
		w.t.Fatal(err)
	}
	w.st = st
}

// rows lists the journal: kind, address, target, epoch, state and reason.
func (w *execWorld) rows() string {
	rows, err := w.st.Rows(store.Filter{})
	if err != nil {
		w.t.Fatal(err)
	}
	var out []string
	for _, r := range rows {
		line := fmt.Sprintf("%s %s %s epoch=%d %s", r.Kind, r.Key.Address, r.Target, r.Epoch, r.State)
		if r.Reason != "" {
			line += ": " + r.Reason
		}
		out = append(out, line)
	}
	if len(out) == 0 {
		return "no rows"
	}
	return strings.Join(out, "\n")
}

// The executor's scenarios: a claim, a crash after the claim, a crash
// after the provider call, a provider error, a row gone stale before its
// claim. Commands:
//
//	desire [addr=A] holder=H        the epoch line's desired holder
//	observe [addr=A] epoch=N holder=H   a newer record seen from a peer
//	import kind=K [addr=A] nic=N holder=H epoch=E   import and approve a row
//	fail kind=K | fail off          the provider refuses calls of kind K
//	run [crash=after-claim|after-call]   one executor run (a crash stops it)
//	restart [after=D]               the node comes back after D; rows
//	                                running longer than that are requeued
//	rows                            the journal
//	provider                        where the address is, and every mutation
func TestExecutorScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenario files: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			w := &execWorld{t: t, path: filepath.Join(t.TempDir(), "state.db"), now: time.Unix(1000, 0),
				cloud: memory.New(memory.Options{NICs: []string{"eni-a", "eni-b"}})}
			w.open()
			t.Cleanup(func() { w.st.Close() })
			scenario.Run(t, f, func(t *testing.T, cs *scenario.Case) string {
				switch cs.Cmd {
				case "desire":
					recs, _, err := w.st.ReconcileEpochs(map[capture.Key]string{w.key(cs): cs.Get("holder", "")}, nil)
					if err != nil {
						return "error: " + err.Error()
					}
					r := recs[w.key(cs)]
					return fmt.Sprintf("epoch %d holder=%s", r.Epoch, r.Holder)
				case "observe":
					e, _ := strconv.ParseUint(cs.Get("epoch", "0"), 10, 64)
					if _, err := w.st.ObserveEpochs(map[capture.Key]capture.EpochRecord{w.key(cs): {Epoch: capture.Epoch(e), Holder: cs.Get("holder", "")}}); err != nil {
						return "error: " + err.Error()
					}
					epochs, _ := w.st.Epochs()
					r := epochs[w.key(cs)]
					return fmt.Sprintf("epoch %d holder=%s", r.Epoch, r.Holder)
				case "import":
					e, _ := strconv.ParseUint(cs.Get("epoch", "0"), 10, 64)
					var params map[string]string
					if capture.Kind(cs.Get("kind", "")) == capture.Assign {
						params = map[string]string{capture.ParamAllowReassignment: "true"}
					}
					act := capture.NewAction(capture.Kind(cs.Get("kind", "")), w.key(cs), "mem", cs.Get("nic", ""), cs.Get("holder", ""), capture.Epoch(e), params)
					res, err := w.st.Import([]capture.Action{act}, w.now)
					if err != nil {
						return "error: " + err.Error()
					}
					approved, err := w.st.AutoApprove(policy.AllowAll(100), w.now, 0)
					if err != nil {
						return "error: " + err.Error()
					}
					return fmt.Sprintf("imported=%d stale=%d approved=%d", res.Imported, res.Stale, len(approved))
				case "fail":
					if cs.Has("off") {
						w.cloud.SetFail(nil)
						return "ok"
					}
					kind := capture.Kind(cs.Get("kind", ""))
					w.cloud.SetFail(func(call capture.Kind, _ provider.Request) error {
						if call == kind {
							return errors.New("InternalError: the provider failed")
						}
						return nil
					})
					return "ok"
				case "run":
					crash := cs.Get("crash", "")
					errCrash := errors.New("crashed")
					ex := &executor.Executor{Store: w.st, Providers: map[string]provider.Provider{"mem": w.cloud}}
					if crash == "after-claim" {
						ex.AfterClaim = func(capture.Row) error { return errCrash }
					}
					if crash == "after-call" {
						ex.AfterCall = func(capture.Row) error { return errCrash }
					}
					w.now = w.now.Add(time.Second)
					res, err := ex.Run(context.Background(), w.now, 0)
					if errors.Is(err, errCrash) {
						return "crashed " + crash
					}
					if err != nil {
						return "error: " + err.Error()
					}
					out := []string{fmt.Sprintf("claimed=%d succeeded=%d failed=%d stale=%d", res.Claimed, res.Succeeded, res.Failed, res.Stale)}
					for _, d := range res.Done {
						line := fmt.Sprintf("%s %s epoch=%d", d.Row.Kind, d.Row.Key.Address, d.Row.Epoch)
						switch {
						case d.Fenced != "":
							line += " fenced: " + d.Fenced
						case d.Err != nil:
							line += " failed: " + d.Err.Error()
						default:
							line += " done"
						}
						out = append(out, line)
					}
					return strings.Join(out, "\n")
				case "restart":
					if err := w.st.Close(); err != nil {
						return "error: " + err.Error()
					}
					w.open()
					after, err := time.ParseDuration(cs.Get("after", "0s"))
					if err != nil {
						t.Fatalf("%s: after: %v", cs.Pos, err)
					}
					w.now = w.now.Add(after)
					keys, err := w.st.Requeue(w.now, after)
					if err != nil {
						return "error: " + err.Error()
					}
					return fmt.Sprintf("requeued %d", len(keys))
				case "rows":
					return w.rows()
				case "provider":
					out := []string{"holder: " + orNone(w.cloud.Holder(w.key(cs).Address))}
					for _, m := range w.cloud.Mutations() {
						out = append(out, fmt.Sprintf("%s %s %s epoch=%d", m.Call, m.Address, m.NIC, m.Epoch))
					}
					return strings.Join(out, "\n")
				}
				t.Fatalf("%s: unknown command %q", cs.Pos, cs.Cmd)
				return ""
			})
		})
	}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
