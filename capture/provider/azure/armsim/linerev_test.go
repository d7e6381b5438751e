package armsim_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/ipfence/ipfence/capture/provider/azure/armsim"
)

// The etcd line's token: a PUT's X-Ipfence-Line-Revision is recorded with
// its mutation (one per address with X-Ipfence-Addresses), absent means
// none, and a value that is not one positive decimal per address, or a
// header sent twice, is refused naming the header, changing nothing.
func TestLineRevisionHeader(t *testing.T) {
	e := newEnv(t, armsim.Limits{Off: true})
	if a := e.do("PUT", e.nicPath("nic-a"), nicBody("10.0.0.4", false, "10.0.0.50"),
		map[string]string{armsim.HeaderEpoch: "7", armsim.HeaderLineRevision: "41"}); a.status != 200 {
		t.Fatalf("%d %v", a.status, a.body)
	}
	h := map[string]string{armsim.HeaderAddresses: "10.0.0.52,10.0.0.51", armsim.HeaderEpoch: "9,8", armsim.HeaderIdempotencyKey: "k52,k51", armsim.HeaderLineRevision: "44,43"}
	if a := e.do("PUT", e.nicPath("nic-a"), nicBody("10.0.0.4", false, "10.0.0.50", "10.0.0.51", "10.0.0.52"), h); a.status != 200 {
		t.Fatalf("%d %v", a.status, a.body)
	}
	if a := e.do("PUT", e.nicPath("nic-b"), nicBody("10.0.0.5", false, "10.0.0.53"), map[string]string{armsim.HeaderEpoch: "2"}); a.status != 200 {
		t.Fatalf("%d %v", a.status, a.body)
	}
	ms := e.sim.Mutations()
	want := map[string]int64{"10.0.0.50": 41, "10.0.0.51": 43, "10.0.0.52": 44, "10.0.0.53": 0}
	if len(ms) != 4 {
		t.Fatalf("record %+v", ms)
	}
	for _, m := range ms {
		if w, ok := want[m.Address.String()]; !ok || m.LineRevision != w {
			t.Errorf("%s at epoch %d: line revision %d, want %d", m.Address, m.Epoch, m.LineRevision, w)
		}
	}
	for _, bad := range []map[string]string{
		{armsim.HeaderLineRevision: "0"},
		{armsim.HeaderLineRevision: "-3"},
		{armsim.HeaderLineRevision: "+3"},
		{armsim.HeaderLineRevision: "x"},
		{armsim.HeaderLineRevision: "4,5"},
		{armsim.HeaderAddresses: "10.0.0.54,10.0.0.55", armsim.HeaderEpoch: "6,7", armsim.HeaderIdempotencyKey: "a,b", armsim.HeaderLineRevision: "5"},
		{armsim.HeaderAddresses: "10.0.0.54,10.0.0.55", armsim.HeaderEpoch: "6,7", armsim.HeaderIdempotencyKey: "a,b", armsim.HeaderLineRevision: "5,0"},
	} {
		a := e.do("PUT", e.nicPath("nic-b"), nicBody("10.0.0.5", false, "10.0.0.53", "10.0.0.54", "10.0.0.55"), bad)
		er, _ := a.body["error"].(map[string]any)
		if msg, _ := er["message"].(string); a.status != 400 || a.code() != "InvalidRequestFormat" || !strings.Contains(msg, armsim.HeaderLineRevision) {
			t.Errorf("%v: %d %s %q", bad, a.status, a.code(), msg)
		}
	}
	// Twice: refused, whichever value.
	req, err := http.NewRequest("PUT", e.srv.URL+e.nicPath("nic-b")+"?api-version="+armsim.APIVersion,
		strings.NewReader(`{"location":"eastus","properties":{"ipConfigurations":[{"name":"ipconfig1","properties":{"privateIPAddress":"10.0.0.5","primary":true}},{"name":"c","properties":{"privateIPAddress":"10.0.0.56"}}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer token-1")
	req.Header.Add(armsim.HeaderLineRevision, "5")
	req.Header.Add(armsim.HeaderLineRevision, "6")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(body), armsim.HeaderLineRevision+": send the header once") {
		t.Errorf("the header twice: %d %s", resp.StatusCode, body)
	}
	if n := len(e.sim.Mutations()); n != 4 {
		t.Fatalf("refused PUTs recorded mutations: %d", n)
	}
	// The admin record shows the token, and nothing for none.
	resp, err = http.Get(e.srv.URL + "/admin/mutations")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if s := string(body); strings.Count(s, `"lineRevision"`) != 3 || !strings.Contains(s, `"lineRevision":41`) {
		t.Errorf("admin mutations: %s", s)
	}
}
