package report

import (
	"io"
	"path/filepath"
	"testing"
)

// The reports of a 100,000-operation run.

func BenchmarkTimeline100k(b *testing.B) {
	events, faults := synthetic(1, 100_000, 10)
	b.ResetTimer()
	for b.Loop() {
		if err := Timeline(io.Discard, "bench", events, faults); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLatencyPNG100k(b *testing.B) {
	events, faults := synthetic(1, 100_000, 10)
	path := filepath.Join(b.TempDir(), "latency.png")
	b.ResetTimer()
	for b.Loop() {
		if err := LatencyPNG(path, events, faults); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRatePNG100k(b *testing.B) {
	events, faults := synthetic(1, 100_000, 10)
	path := filepath.Join(b.TempDir(), "rate.png")
	b.ResetTimer()
	for b.Loop() {
		if err := RatePNG(path, events, faults); err != nil {
			b.Fatal(err)
		}
	}
}
