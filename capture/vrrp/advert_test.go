package vrrp

import (
	"strings"
	"testing"
)

func TestParseAdvert(t *testing.T) {
	for _, c := range []struct {
		b       []byte
		want    Advert
		wantErr string
	}{
		{[]byte{0x31, 51, 150, 1, 0, 10, 0, 0}, Advert{Version: 3, VRID: 51, Priority: 150}, ""},
		{[]byte{0x21, 7, 100, 1, 0, 1, 0, 0, 10, 0, 0, 1}, Advert{Version: 2, VRID: 7, Priority: 100}, ""},
		{[]byte{0x31, 51, 150}, Advert{}, "advert of 3 bytes"},
		{[]byte{0x41, 51, 150, 1, 0, 10, 0, 0}, Advert{}, "version 4"},
		{[]byte{0x32, 51, 150, 1, 0, 10, 0, 0}, Advert{}, "type 2"},
		{[]byte{0x31, 0, 150, 1, 0, 10, 0, 0}, Advert{}, "virtual router 0"},
	} {
		got, err := ParseAdvert(c.b)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("% x: %v, want %q", c.b, err, c.wantErr)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("% x: %+v %v, want %+v", c.b, got, err, c.want)
		}
	}
}

func FuzzParseAdvert(f *testing.F) {
	f.Add([]byte{0x31, 51, 150, 1, 0, 10, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := ParseAdvert(b)
		if err == nil && (len(b) < 8 || a.VRID < 1 || a.Version < 2 || a.Version > 3) {
			t.Fatalf("accepted % x as %+v", b, a)
		}
	})
}
