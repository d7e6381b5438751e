package epochtag

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/ipfence/ipfence/capture"
)

func TestRoundTripAndChunks(t *testing.T) {
	r := Record{}
	for i := range 40 {
		r[netip.AddrFrom4([4]byte{10, 0, byte(i / 200), byte(i)})] = capture.Epoch(1000 + i)
	}
	tags, err := Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	// 40 entries of about 15 characters: three chunks of at most 256.
	if len(tags) != 3 {
		t.Fatalf("%d chunks: %v", len(tags), tags)
	}
	for k, v := range tags {
		if len(v) > MaxValue || !strings.HasPrefix(k, Prefix) {
			t.Fatalf("tag %q=%q", k, v)
		}
	}
	back, err := Decode(tags)
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != 40 || back[netip.MustParseAddr("10.0.0.39")] != 1039 {
		t.Fatalf("decoded %v", back)
	}
}

func TestStaleAndRaise(t *testing.T) {
	a := netip.MustParseAddr("10.0.0.5")
	r := Record{a: 7}
	if !r.Stale(a, 6) || r.Stale(a, 7) || r.Stale(a, 8) || r.Stale(a, 0) {
		t.Fatal("Stale: want only 6 stale against 7")
	}
	if r.Raise(a, 5) || r[a] != 7 {
		t.Fatalf("Raise lowered the record: %v", r)
	}
	if !r.Raise(a, 9) || r[a] != 9 {
		t.Fatalf("Raise: %v", r)
	}
}

func TestMergeKeepsOtherTags(t *testing.T) {
	tags := map[string]string{"owner": "ops", Prefix + "0": "10.0.0.1=3", Prefix + "5": "10.0.0.9=4"}
	out, err := Merge(tags, Record{netip.MustParseAddr("10.0.0.1"): 8})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"owner": "ops", Prefix + "0": "10.0.0.1=8"}
	if fmt.Sprint(out) != fmt.Sprint(want) {
		t.Fatalf("Merge: %v, want %v", out, want)
	}
}

func TestDecodeRefusesWhatItCannotRead(t *testing.T) {
	for _, tags := range []map[string]string{
		{Prefix + "0": "10.0.0.1"},
		{Prefix + "0": "10.0.0.1=x"},
		{Prefix + "0": "nope=3"},
		{Prefix + "0": "10.0.0.1=-1"},
		{Prefix + "0": strings.Repeat("1", MaxValue+1)},
	} {
		if r, err := Decode(tags); err == nil {
			t.Errorf("Decode(%v) = %v, want an error", tags, r)
		}
	}
	many := map[string]string{}
	for i := range MaxChunks + 1 {
		many[fmt.Sprint(Prefix, i)] = ""
	}
	if _, err := Decode(many); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Decode of %d chunks: %v", len(many), err)
	}
	// Tags of others are not the record's.
	if r, err := Decode(map[string]string{"ipfence": "x", "Ipfence-epochs-0": "y"}); err != nil || len(r) != 0 {
		t.Fatalf("Decode of foreign tags: %v %v", r, err)
	}
}

func TestEncodeTooLarge(t *testing.T) {
	r := Record{}
	for i := range 1000 {
		r[netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)})] = 1 << 40
	}
	if _, err := Encode(r); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Encode of 1000 addresses: %v", err)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(Prefix+"0", "10.0.0.1=3,10.0.0.2=4", "other", "x")
	f.Add(Prefix+"1", "::1=18446744073709551615", Prefix+"0", "10.0.0.1=3")
	f.Add(Prefix+"0", "=,=", "", "")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		r, err := Decode(map[string]string{k1: v1, k2: v2})
		if err != nil {
			return
		}
		// What decodes re-encodes to a record that decodes the same.
		enc, err := Encode(r)
		if err != nil {
			return
		}
		back, err := Decode(enc)
		if err != nil || fmt.Sprint(back) != fmt.Sprint(r) {
			t.Fatalf("re-decode of %v: %v %v", enc, back, err)
		}
	})
}
