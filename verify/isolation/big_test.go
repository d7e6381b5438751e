package isolation

import (
	"context"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/ipfence/ipfence/verify/history"
)

func TestBigFile(t *testing.T) {
	path := os.Getenv("ISOLATION_BIG")
	if path == "" {
		t.Skip("set ISOLATION_BIG")
	}
	start := time.Now()
	h, err := history.ReadFile(path, "")
	if err != nil {
		t.Fatal(err)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("read %d events in %v, heap %d MiB", len(h.Events), time.Since(start), ms.HeapAlloc>>20)
	start = time.Now()
	res, err := Check(context.Background(), h, Options{Workload: ListAppend})
	if err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&ms)
	t.Logf("checked in %v: %v %v, heap %d MiB, incomplete %v", time.Since(start), res.Valid, res.AnomalyTypes, ms.HeapAlloc>>20, res.Incomplete)
}
