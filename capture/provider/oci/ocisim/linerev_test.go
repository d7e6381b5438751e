package ocisim_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/oracle/oci-go-sdk/v65/common"

	"github.com/ipfence/ipfence/capture/provider/oci/ocisim"
)

// The etcd line's token: X-Ipfence-Line-Revision is recorded with the
// mutation; absent means none; a value that is not one positive decimal,
// or the header sent twice, is refused naming the header, changing
// nothing.
func TestLineRevisionHeader(t *testing.T) {
	s := newSDK(t, ocisim.Config{VNICs: []string{"vnic-a"}})
	rev := []string{"41"}
	s.client.Interceptor = func(r *http.Request) error {
		r.Header.Set(ocisim.HeaderEpoch, "42")
		r.Header.Del(ocisim.HeaderLineRevision)
		for _, v := range rev {
			r.Header.Add(ocisim.HeaderLineRevision, v)
		}
		return nil
	}
	if _, err := s.create(t, "vnic-a", "10.0.0.7", ""); err != nil {
		t.Fatal(err)
	}
	rev = nil
	if _, err := s.create(t, "vnic-a", "10.0.0.8", ""); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]string{{"0"}, {"-4"}, {"+4"}, {"x"}, {"4,5"}, {"4", "5"}} {
		rev = bad
		_, err := s.create(t, "vnic-a", "10.0.0.9", "")
		se, ok := common.IsServiceError(err)
		if code(err) != "400 InvalidParameter" || !ok || !strings.Contains(se.GetMessage(), "header "+ocisim.HeaderLineRevision+": ") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	ms := s.sim.Mutations()
	if len(ms) != 2 || ms[0].LineRevision != 41 || ms[1].LineRevision != 0 {
		t.Fatalf("record: %+v", ms)
	}
}
