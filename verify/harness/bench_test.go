package harness

import (
	"context"
	"testing"

	"github.com/ipfence/ipfence/verify/gen"
)

type noopClient struct{}

func (noopClient) Open(context.Context, string) (Client, error) { return noopClient{}, nil }
func (noopClient) Setup(context.Context) error                  { return nil }
func (noopClient) Teardown(context.Context) error               { return nil }
func (noopClient) Close(context.Context) error                  { return nil }
func (noopClient) Invoke(_ context.Context, op Op) Completion   { return OK(op.Value) }

// BenchmarkHarness measures generator → workers → recorder → history.jsonl
// with a client that does nothing, so the harness alone is timed. The
// target is at least 20,000 ops/s; ops/s is reported as a metric.
func BenchmarkHarness(b *testing.B) {
	for _, threads := range []int{1, 10} {
		b.Run(map[int]string{1: "threads=1", 10: "threads=10"}[threads], func(b *testing.B) {
			store := b.TempDir()
			g := gen.Clients(gen.Limit(b.N, gen.Repeat(gen.F("write", int64(1)))))
			b.ResetTimer()
			out, err := Run(context.Background(), Test{Name: "bench", Concurrency: threads, Client: noopClient{}, Generator: g, Store: store})
			if err != nil {
				b.Fatal(err)
			}
			if out.Ops != b.N {
				b.Fatalf("%d ops, want %d", out.Ops, b.N)
			}
			b.ReportMetric(float64(out.Ops)/out.Duration.Seconds(), "ops/s")
		})
	}
}
