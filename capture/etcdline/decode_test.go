package etcdline

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/ipfence/ipfence/capture"
)

// What etcd holds under an epoch key is input like any other: anything
// but a well-formed record in bounds is an error naming the key, never a
// record, never a panic.
func TestDecodeRefuses(t *testing.T) {
	good := kv{Key: "k", Value: encode(capture.EpochRecord{Epoch: 7, Holder: "n1"}), ModRevision: "12"}
	if r, err := decode(good); err != nil || r.Epoch != 7 || r.Holder != "n1" || r.Rev != 12 {
		t.Fatalf("a good record: %+v %v", r, err)
	}
	for what, v := range map[string]kv{
		"not base64":       {Key: "k", Value: "!!", ModRevision: "1"},
		"not JSON":         {Key: "k", Value: base64.StdEncoding.EncodeToString([]byte("epoch 3")), ModRevision: "1"},
		"unknown field":    {Key: "k", Value: base64.StdEncoding.EncodeToString([]byte(`{"epoch":3,"holder":"a","x":1}`)), ModRevision: "1"},
		"epoch 0":          {Key: "k", Value: base64.StdEncoding.EncodeToString([]byte(`{"epoch":0,"holder":"a"}`)), ModRevision: "1"},
		"epoch at bound":   {Key: "k", Value: base64.StdEncoding.EncodeToString([]byte(`{"epoch":9223372036854775807,"holder":"a"}`)), ModRevision: "1"},
		"epoch negative":   {Key: "k", Value: base64.StdEncoding.EncodeToString([]byte(`{"epoch":-1,"holder":"a"}`)), ModRevision: "1"},
		"no revision":      {Key: "k", Value: good.Value, ModRevision: ""},
		"revision 0":       {Key: "k", Value: good.Value, ModRevision: "0"},
		"revision garbage": {Key: "k", Value: good.Value, ModRevision: "x"},
	} {
		if r, err := decode(v); err == nil || !strings.Contains(err.Error(), `"k"`) {
			t.Errorf("%s: %+v %v", what, r, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(encode(capture.EpochRecord{Epoch: 7, Holder: "n1"}), "12")
	f.Add("e30=", "1")
	f.Fuzz(func(t *testing.T, value, rev string) {
		r, err := decode(kv{Key: "k", Value: value, ModRevision: rev})
		if err == nil && (r.Epoch == 0 || r.Rev <= 0 || uint64(r.Epoch) >= 1<<63-1) {
			t.Fatalf("decoded a record out of bounds: %+v", r)
		}
	})
}
