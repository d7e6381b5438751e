package liveness_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture/liveness"
	"github.com/ipfence/ipfence/internal/testonly/scenario"
)

// The scenario files drive one node's Contact with times given as
// offsets from an origin (ms), so that each rule reads as a story: a node
// restarting, a node paused, a minority cut off, a peer flapping, the
// local clock jumping. Commands:
//
//	new nodes=N window=D           a node's record at its start
//	heard peer=P at=T              a batch from P arrived at T
//	acked peer=P made=T at=T2      P acknowledged, at T2, a heartbeat made at T
//	read peer=P                    P's records were read
//	ask peer=P                     P is asked for its records (the round noted)
//	answer peer=P                  P's answer to the last ask arrives
//	check at=T [start=T0] [within=D]
//	                               in contact (within D, default the window),
//	                               covered for a pass begun at T0 (default T),
//	                               ready (records read since news may have
//	                               been missed), and whether it may act
func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenario files: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			var c *liveness.Contact
			asked := map[string]uint64{}
			origin := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
			dur := func(cs *scenario.Case, key string, def time.Duration) time.Duration {
				v := cs.Get(key, "")
				if v == "" {
					return def
				}
				d, err := time.ParseDuration(v)
				if err != nil {
					t.Fatalf("%s: %s=%q: %v", cs.Pos, key, v, err)
				}
				return d
			}
			// at is a time given as an offset from origin.
			at := func(cs *scenario.Case, key string, def time.Time) time.Time {
				return origin.Add(dur(cs, key, def.Sub(origin)))
			}
			scenario.Run(t, f, func(t *testing.T, cs *scenario.Case) string {
				if c == nil && cs.Cmd != "new" {
					t.Fatalf("%s: %s before new", cs.Pos, cs.Cmd)
				}
				switch cs.Cmd {
				case "new":
					var n int
					fmt.Sscan(cs.Get("nodes", "3"), &n)
					c = liveness.New(n, dur(cs, "window", time.Second))
					return "ok"
				case "heard":
					c.Heard(cs.Get("peer", ""), at(cs, "at", origin))
					return "ok"
				case "acked":
					if c.Acked(cs.Get("peer", ""), at(cs, "made", origin), at(cs, "at", origin)) {
						return "cover came back after a lapse: catch up"
					}
					return "ok"
				case "read":
					c.Read(cs.Get("peer", ""))
					return "ok"
				case "ask":
					asked[cs.Get("peer", "")] = c.Round()
					return "ok"
				case "answer":
					if !c.ReadIn(cs.Get("peer", ""), asked[cs.Get("peer", "")]) {
						return "asked before news may have been missed: not counted"
					}
					return "ok"
				case "check":
					now := at(cs, "at", origin)
					start := at(cs, "start", now)
					var out []string
					contact := c.InContact(now, dur(cs, "within", c.Window()))
					out = append(out, fmt.Sprintf("in contact: %v", contact))
					cov := c.Covered(start, now)
					if cov == nil {
						out = append(out, "covered: yes")
					} else {
						out = append(out, "covered: no: "+strings.TrimPrefix(cov.Error(), liveness.ErrUncovered.Error()+": "))
					}
					ready, why := c.Ready()
					if ready {
						out = append(out, "ready: yes")
					} else {
						out = append(out, "ready: no: "+why)
					}
					out = append(out, fmt.Sprintf("may act: %v", contact && cov == nil && ready))
					return strings.Join(out, "\n")
				}
				t.Fatalf("%s: unknown command %q", cs.Pos, cs.Cmd)
				return ""
			})
		})
	}
}
