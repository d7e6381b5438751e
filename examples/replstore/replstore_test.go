package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/verify/checker"
	"github.com/ipfence/ipfence/verify/gen"
	"github.com/ipfence/ipfence/verify/harness"
	"github.com/ipfence/ipfence/verify/model"
	"github.com/ipfence/ipfence/verify/nemesis"
	"github.com/ipfence/ipfence/verify/netfault"
)

// init runs a replica, forever, when the test starts itself as one.
func init() {
	if args := os.Getenv("REPLSTORE_ARGS"); args != "" {
		os.Args = append([]string{"replstore"}, strings.Fields(args)...)
		main()
	}
}

// The correct store is linearizable under partitions and kills; with reads
// served from the local replica it is not, and the test says so.
func TestReplstore(t *testing.T) {
	if testing.Short() {
		t.Skip("starts replica processes")
	}
	nodes := []string{"n0", "n1", "n2"}
	register, _ := model.Lookup("register")
	for _, bug := range []bool{false, true} {
		addrs, _ := nemesis.LoopbackAddrs(nodes...)
		mesh, err := netfault.NewMesh(addrs) // a proxy on every replica-to-replica link
		if err != nil {
			t.Fatal(err)
		}
		defer mesh.Close()
		dir := t.TempDir()
		procs := &nemesis.Local{Addrs: addrs, Command: func(n string) *exec.Cmd {
			peers := "-backups " + mesh.Addr("n0", "n1") + "," + mesh.Addr("n0", "n2") // n0 is the primary
			if n != "n0" {
				peers = "-primary " + mesh.Addr(n, "n0") // a backup reaches it through the mesh
			}
			args := fmt.Sprintf("REPLSTORE_ARGS=-listen %s -file %s/%s %s -local-reads=%v", addrs[n], dir, n, peers, bug)
			return &exec.Cmd{Path: os.Args[0], Env: append(os.Environ(), args), Stderr: os.Stderr}
		}}
		defer procs.StopAll(time.Second)
		if err := procs.Start(t.Context(), nodes...); err != nil {
			t.Fatal(err)
		}
		client := harness.ClientFunc(func(_ context.Context, node string, op harness.Op) harness.Completion {
			if op.F == "read" {
				return harness.Result(read(addrs[node]))
			}
			return harness.Result(op.Value, write(addrs[node], int64(op.Value.(int))))
		})
		faults := nemesis.Choices{Kinds: []string{"partition", "kill"},
			Values: map[string]nemesis.Choose{"partition": nemesis.PartitionChoice(nodes), "kill": nemesis.NodeChoice(nodes)}}
		out, err := harness.Run(t.Context(), harness.Test{
			Name: "replstore", Nodes: nodes, Concurrency: 6, Client: client, Store: t.TempDir(), Seed: 1, TimeLimit: 8 * time.Second,
			Nemesis: nemesis.Compose(map[string]nemesis.Fault{"kill": nemesis.Kill(procs, nodes),
				"partition": nemesis.Partition(nemesis.MeshNet(mesh, netfault.Drop), nodes)}),
			Generator: gen.Any(gen.Nemesis(nemesis.Schedule(1, faults, time.Second, time.Second)),
				gen.Clients(gen.Stagger(2, 5*time.Millisecond, gen.Fn(3, func(_ gen.Context, r *gen.Rand) gen.Op {
					return []gen.Op{gen.F("read", nil), gen.F("write", r.IntN(100))}[r.IntN(2)]
				})))),
			Checker: checker.Compose(map[string]checker.Checker{"stats": checker.Stats(), // invalid if reads never succeed
				"linear": checker.Linearizable(checker.LinearOptions{Model: register, Semantics: model.Options{Initial: 0}})}),
		})
		if err != nil || out.Valid() == bug || bug && out.Failure() == nil {
			t.Fatalf("local reads %v: %v, %v, %v, problems %q (%s)", bug, err, out.Verdict, out.Failure(), out.Problems, out.Dir)
		}
		t.Logf("local reads %v: %v, %d ops, %v", bug, out.Verdict, out.Ops, out.Failure())
	}
}
