package isolation

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/ipfence/ipfence/internal/testonly/testenv"
	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
	"github.com/ipfence/ipfence/verify/txnsim"
)

// peakHeap samples the live heap while f runs and returns the largest
// sample (runtime/metrics, every 5 ms): the figure the issue bounds by 4 GB.
func peakHeap(f func()) uint64 {
	done := make(chan struct{})
	peak := make(chan uint64)
	go func() {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		var max uint64
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			max = maxU(max, s[0].Value.Uint64())
			select {
			case <-done:
				peak <- max
				return
			case <-t.C:
			}
		}
	}()
	f()
	close(done)
	return <-peak
}

func maxU(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}

// BenchmarkCheckSI checks list-append histories of a simulated snapshot-
// isolated database (concurrency 10, 100 keys) for strict serializability,
// from the JSON Lines bytes to the result, at three sizes, to show how the
// time grows. The 1,000,000-transaction target is 5 s and 1 GB (issue 20;
// BenchmarkCheckFile measures what ipfence check does, from a file):
//
//	go test ./verify/isolation -run '^$' -bench CheckSI -benchtime 1x -timeout 30m
func BenchmarkCheckSI(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("txns=%d", n), func(b *testing.B) {
			var buf bytes.Buffer
			if _, err := txnsim.Write(&buf, txnsim.Config{DB: "si", Workload: ListAppend, Ops: n, Concurrency: 10, Keys: 100, Seed: 1}); err != nil {
				b.Fatal(err)
			}
			data := buf.Bytes()
			runtime.GC()
			b.ResetTimer()
			var res *Result
			var peak uint64
			for b.Loop() {
				peak = maxU(peak, peakHeap(func() {
					var err error
					if res, err = CheckJSONL(context.Background(), "si", data, Options{Workload: ListAppend}); err != nil {
						b.Fatal(err)
					}
				}))
			}
			if res.Valid != linear.False {
				b.Fatalf("an SI history checked strict-serializable: %v %v", res.Valid, res.AnomalyTypes)
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "txns/s")
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
		})
	}
}

// BenchmarkHugeSCC reads and checks Elle's huge-scc.edn (10,300
// transactions in one strongly connected component, on which Elle's cycle
// search times out) for strict serializability; the target is 2 s for the
// full result with a concrete G2-item-realtime cycle.
func BenchmarkHugeSCC(b *testing.B) {
	path := filepath.Join(testenv.Corpus(b), "elle", "huge-scc.edn")
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		h, err := history.Parse(path, data, "")
		if err != nil {
			b.Fatal(err)
		}
		res, err := Check(context.Background(), h, Options{Workload: ListAppend})
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Anomalies["G2-item-realtime"]) == 0 {
			b.Fatalf("no G2-item-realtime cycle: %v", res.AnomalyTypes)
		}
	}
}

// BenchmarkCheckFile checks the histories of BenchmarkCheckSI as ipfence
// check does, streaming them from a file, in JSON Lines and in EDN, at
// each size up to 1,000,000 transactions (10,000,000 with
// IPFENCE_BENCH_10M=1: some 3 GB of text under TMPDIR, and several GB
// of memory). peak-heap-MiB is the largest live heap sampled; the files
// are not held, so it is the checker's own memory. jsonl-serial reads
// the JSON Lines file on one goroutine, as the reader did before it read
// on the Decoder's workers, for the ratio:
//
//	go test ./verify/isolation -run '^$' -bench CheckFile -benchtime 1x -timeout 60m
func BenchmarkCheckFile(b *testing.B) {
	sizes := []int{10_000, 100_000, 1_000_000}
	if os.Getenv("IPFENCE_BENCH_10M") != "" {
		sizes = append(sizes, 10_000_000)
	}
	for _, n := range sizes {
		for _, variant := range []string{"jsonl", "jsonl-serial", "edn"} {
			format := history.Format(strings.TrimSuffix(variant, "-serial"))
			b.Run(fmt.Sprintf("txns=%d/%s", n, variant), func(b *testing.B) {
				path := filepath.Join(b.TempDir(), "h."+string(format))
				writeSim(b, path, n, format)
				if variant == "jsonl-serial" {
					readInParallel = false
					defer func() { readInParallel = true }()
				}
				runtime.GC()
				b.ResetTimer()
				var res *Result
				var peak uint64
				for b.Loop() {
					f, err := os.Open(path)
					if err != nil {
						b.Fatal(err)
					}
					peak = maxU(peak, peakHeap(func() {
						if res, err = CheckReader(context.Background(), path, f, format, history.Limits{}, Options{Workload: ListAppend}); err != nil {
							b.Fatal(err)
						}
					}))
					f.Close()
				}
				if res.Valid != linear.False || len(res.Anomalies["G2-item-realtime"])+len(res.Anomalies["G2-item"]) == 0 {
					b.Fatalf("an SI history checked strict-serializable: %v %v", res.Valid, res.AnomalyTypes)
				}
				b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "txns/s")
				b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
			})
		}
	}
}

// writeSim writes the simulated history of n transactions to path, in
// JSON Lines or EDN (a map a line, as Jepsen writes history.edn).
func writeSim(b *testing.B, path string, n int, format history.Format) {
	b.Helper()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	cfg := txnsim.Config{DB: "si", Workload: ListAppend, Ops: n, Concurrency: 10, Keys: 100, Seed: 1}
	if format == history.JSONL {
		if _, err := txnsim.Write(w, cfg); err != nil {
			b.Fatal(err)
		}
	} else {
		pr, pw := io.Pipe()
		go func() {
			_, err := txnsim.Write(pw, cfg)
			pw.CloseWithError(err)
		}()
		d := history.NewDecoder(context.Background(), "sim", pr, history.JSONL, history.Limits{})
		for {
			e, err := d.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			fmt.Fprintf(w, "{:index %d, :type :%s, :process %d, :f :%s, :value %s, :time %d}\n", e.Index, e.Type, e.Process, e.F, history.Show(e.Value), e.Time)
		}
		d.Close()
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkOnlineFinish measures what online checking leaves for the end
// of a test: Stream.Result on a history already fed (the "finish"
// sub-benchmark), against CheckReader of the finished JSON Lines bytes
// (the "whole" one), the same simulated snapshot-isolated history, checked
// for serializability.
func BenchmarkOnlineFinish(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		events, err := txnsim.Generate(txnsim.Config{DB: "si", Workload: ListAppend, Ops: n, Concurrency: 10, Keys: 100, Seed: 1})
		if err != nil {
			b.Fatal(err)
		}
		var buf bytes.Buffer
		if err := history.WriteAll(&buf, events); err != nil {
			b.Fatal(err)
		}
		o := Options{Workload: ListAppend, Consistency: "serializable"}
		b.Run(fmt.Sprintf("txns=%d/finish", n), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				s, err := NewStream(o)
				if err != nil {
					b.Fatal(err)
				}
				if err := s.Feed(events...); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if _, err := s.Result(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("txns=%d/whole", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := CheckReader(context.Background(), "sim", bytes.NewReader(buf.Bytes()), history.JSONL, history.Limits{}, o); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
