package store

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/ipfence/ipfence/capture"
)

// populated writes a state file spanning many pages: epochs, held
// captures, markers and journal rows in every state.
func populated(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	desired := map[capture.Key]string{}
	var acts []capture.Action
	for i := range 200 {
		k := capture.Key{Pool: "web", Address: netip.AddrFrom4([4]byte{10, 0, byte(i / 250), byte(1 + i%250)}), Domain: "provider:aws:placement:g"}
		desired[k] = "a"
		acts = append(acts, assign(k, "a", "eni-a", 1))
	}
	if _, _, err := s.ReconcileEpochs(desired, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Import(acts, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AutoApprove(pol, t0, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.ApplyMarkers([]capture.Action{unassign(k1, "b", "eni-b", 1)}, nil); err != nil {
		t.Fatal(err)
	}
	keys, _ := s.Approved()
	for i, k := range keys[:60] {
		if _, err := s.Claim(k, t0); err != nil {
			t.Fatal(err)
		}
		var out Outcome
		if i%3 == 0 {
			out.Err = errors.New("throttled")
		}
		if i%5 != 0 {
			if err := s.Complete(k, out, t0); err != nil {
				t.Fatal(err)
			}
		}
	}
	s.Close()
	return path
}

// childEnv names the file the child process opens.
const childEnv = "IPFENCE_STORE_CHECK_CHILD"

// TestOpenChild is the child of the corruption tests: it opens the file
// named in the environment, reads everything, and says what happened on
// stdout. A fault or panic kills it, which the parent sees.
func TestOpenChild(t *testing.T) {
	path := os.Getenv(childEnv)
	if path == "" {
		t.Skip("run by the corruption tests")
	}
	s, err := Open(path, Options{})
	if err != nil {
		fmt.Printf("REFUSED %v\n", err)
		if !errors.Is(err, ErrCorrupt) {
			fmt.Println("NOT-CORRUPT-ERROR")
		}
		return
	}
	defer s.Close()
	// An open file must be wholly readable: what Open lets through, the
	// node reads on every pass and every status request.
	if _, err := s.Epochs(); err != nil {
		fmt.Printf("OPENED-BUT epochs: %v\n", err)
		return
	}
	if _, err := s.Held(); err != nil {
		fmt.Printf("OPENED-BUT held: %v\n", err)
		return
	}
	if _, err := s.Markers(); err != nil {
		fmt.Printf("OPENED-BUT markers: %v\n", err)
		return
	}
	if _, err := s.Rows(Filter{}); err != nil {
		fmt.Printf("OPENED-BUT rows: %v\n", err)
		return
	}
	for _, st := range []capture.State{capture.Pending, capture.Approved, capture.Running, capture.Failed} {
		if _, err := s.Rows(Filter{State: st}); err != nil {
			fmt.Printf("OPENED-BUT rows %s: %v\n", st, err)
			return
		}
	}
	fmt.Println("OPENED")
}

// openInChild opens path in a child process and returns its verdict line.
func openInChild(t *testing.T, path string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestOpenChild$", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"="+path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the child opening %s died (%v): a fault or panic, not an error:\n%s", path, err, tail(out))
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "REFUSED") || strings.HasPrefix(l, "OPENED") {
			if strings.Contains(string(out), "NOT-CORRUPT-ERROR") {
				t.Fatalf("%s: refused without ErrCorrupt: %s", path, l)
			}
			return l
		}
	}
	t.Fatalf("the child said nothing about %s:\n%s", path, tail(out))
	return ""
}

func tail(b []byte) string {
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

func copyFile(t *testing.T, from, to string, edit func([]byte) []byte) []byte {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	b = edit(bytes.Clone(b))
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTruncatedFilesRefused: a state file cut short (as a full disk or a
// careless copy leaves it) is refused naming the file and saying so, at
// every size below what its meta page claims, including the 8 and 12 KiB
// that crashed bbolt with SIGBUS, and the file is left as it was.
func TestTruncatedFilesRefused(t *testing.T) {
	src := populated(t)
	full, _ := os.ReadFile(src)
	m, err := readMeta(full)
	if err != nil {
		t.Fatal(err)
	}
	need := int(m.pgid) * int(m.pageSize)
	if need < 24<<10 {
		t.Fatalf("the populated file has only %d bytes in use; the test wants more than 24 KiB", need)
	}
	dir := t.TempDir()
	for _, size := range []int{0, 1, 100, 4096, 8 << 10, 8<<10 + 1, 12 << 10, 16 << 10, need / 2, need - 4096, need - 1} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			path := filepath.Join(dir, fmt.Sprintf("t%d.db", size))
			before := copyFile(t, src, path, func(b []byte) []byte { return b[:size] })
			got := openInChild(t, path)
			if !strings.HasPrefix(got, "REFUSED") || !strings.Contains(got, path) {
				t.Fatalf("a file truncated to %d of %d bytes: %s", size, need, got)
			}
			if size > 8<<10 && !strings.Contains(got, "truncated") {
				t.Fatalf("the error does not say the file was truncated: %s", got)
			}
			after, _ := os.ReadFile(path)
			if !bytes.Equal(before, after) {
				t.Fatalf("the refused file was changed (%d bytes, now %d): a silent fresh start", len(before), len(after))
			}
		})
	}
}

// TestFlippedBytesNeverCrash flips 64 random bytes of a state file, over
// many seeds: each open is a clean refusal naming the file, or an open
// whose every read succeeds. Never a panic, a fault, or an open that fails
// later.
func TestFlippedBytesNeverCrash(t *testing.T) {
	src := populated(t)
	seeds := 24
	if n, err := strconv.Atoi(os.Getenv("IPFENCE_FLIP_SEEDS")); err == nil {
		seeds = n
	}
	if testing.Short() {
		seeds = 10
	}
	// 64 flips is the reproduction; a single flip often lands where it
	// does no harm, so that both outcomes are exercised.
	for _, flips := range []int{64, 1} {
		t.Run(fmt.Sprintf("%d flips", flips), func(t *testing.T) {
			dir := t.TempDir()
			refused, opened := 0, 0
			for seed := range seeds {
				path := filepath.Join(dir, fmt.Sprintf("f%d.db", seed))
				copyFile(t, src, path, func(b []byte) []byte {
					r := rand.New(rand.NewPCG(uint64(seed), uint64(flips)))
					for range flips {
						b[r.IntN(len(b))] ^= byte(1 + r.IntN(255))
					}
					return b
				})
				got := openInChild(t, path)
				switch {
				case strings.HasPrefix(got, "REFUSED"):
					if !strings.Contains(got, path) {
						t.Errorf("seed %d: the refusal does not name the file: %s", seed, got)
					}
					refused++
				case got == "OPENED":
					opened++
				default:
					t.Errorf("seed %d: %s", seed, got)
				}
			}
			// 64 flips over a file of a hundred pages hit structure; the
			// checks must catch them rather than let them through.
			if flips == 64 && refused < seeds*3/4 {
				t.Errorf("only %d of %d files with 64 flipped bytes were refused", refused, seeds)
			}
			t.Logf("%d of %d refused, %d opened and read whole", refused, seeds, opened)
		})
	}
}

// TestJournalInvariantsAtOpen: the journal damage that made a node answer
// 500 on every status request (an order entry naming a missing row) and
// its siblings are refused at open, each with what is wrong.
func TestJournalInvariantsAtOpen(t *testing.T) {
	src := populated(t)
	cases := []struct {
		name string
		edit func(tx *bolt.Tx) error
		want string
	}{
		{"order names a missing row", func(tx *bolt.Tx) error {
			return tx.Bucket(bSeq).Put(seqBytes(9999), []byte("no-such-row"))
		}, `index names row "no-such-row", which is missing`},
		{"row deleted under its index", func(tx *bolt.Tx) error {
			k, _ := tx.Bucket(bIndex[capture.Approved]).Cursor().First()
			return tx.Bucket(bRows).Delete(k)
		}, "which is missing"},
		{"index state disagrees", func(tx *bolt.Tx) error {
			k, v := tx.Bucket(bIndex[capture.Approved]).Cursor().First()
			return tx.Bucket(bIndex[capture.Pending]).Put(k, v)
		}, "state-pending names row"},
		{"row out of its index", func(tx *bolt.Tx) error {
			k, _ := tx.Bucket(bIndex[capture.Failed]).Cursor().First()
			return tx.Bucket(bIndex[capture.Failed]).Delete(k)
		}, "but not in index state-failed"},
		{"row is not JSON", func(tx *bolt.Tx) error {
			k, _ := tx.Bucket(bRows).Cursor().First()
			return tx.Bucket(bRows).Put(k, []byte("{"))
		}, "journal row"},
		{"epoch record damaged", func(tx *bolt.Tx) error {
			k, _ := tx.Bucket(bEpochs).Cursor().First()
			return tx.Bucket(bEpochs).Put(k, []byte{0x80})
		}, "corrupt epoch record"},
		{"bucket missing", func(tx *bolt.Tx) error { return tx.DeleteBucket(bHeld) }, "bucket held is missing"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			copyFile(t, src, path, func(b []byte) []byte { return b })
			db, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Update(c.edit); err != nil {
				t.Fatal(err)
			}
			db.Close()
			_, err = Open(path, Options{})
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want ErrCorrupt naming %s and %q", err, path, c.want)
			}
		})
	}
	// The undamaged file still opens, with its 200 rows.
	s, err := Open(src, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if rows, err := s.Rows(Filter{}); err != nil || len(rows) != 200 {
		t.Fatalf("undamaged file: %d rows, %v", len(rows), err)
	}
}
