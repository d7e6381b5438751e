package armsim_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/ipfence/ipfence/capture/provider/azure/armsim"
)

// FuzzPut sends arbitrary bodies and If-Match headers as a NIC's PUT: the
// simulator answers every one with ARM's JSON, never panics, and a PUT it
// refuses changes nothing; whatever it accepts, every address stays on at
// most one NIC and every NIC keeps its primary.
func FuzzPut(f *testing.F) {
	seed := func(v any) []byte { b, _ := json.Marshal(v); return b }
	f.Add(seed(nicBody("10.0.0.4", false, "10.0.0.50")), "")
	f.Add(seed(nicBody("10.0.0.4", true, "10.0.0.5")), "*")
	f.Add(seed(nicBody("10.0.0.60", false)), "W/\"x\"")
	f.Add([]byte(`{"properties":{"ipConfigurations":[{"name":"ipconfig1","properties":{"privateIPAddress":"10.0.0.4","primary":true}},{"name":"IPCONFIG1","properties":{"privateIPAddress":"10.0.0.9"}}]}}`), "")
	f.Add([]byte(`{"properties":null}`), "")
	f.Add([]byte(`[]`), "")
	sim, err := armsim.New(armsim.Config{NICs: []string{"nic-a", "nic-b"}, Limits: armsim.Limits{Off: true}})
	if err != nil {
		f.Fatal(err)
	}
	srv := httptest.NewServer(sim)
	defer srv.Close()
	path := srv.URL + "/subscriptions/" + armsim.DefaultSubscription + "/resourceGroups/" + armsim.DefaultResourceGroup +
		"/providers/Microsoft.Network/networkInterfaces/nic-a?api-version=" + armsim.APIVersion
	f.Fuzz(func(t *testing.T, body []byte, ifMatch string) {
		before := sim.State()
		n := len(sim.Mutations())
		req, err := http.NewRequest("PUT", path, bytes.NewReader(body))
		if err != nil {
			t.Skip()
		}
		req.Header.Set("Authorization", "Bearer t")
		if ifMatch != "" {
			req.Header["If-Match"] = []string{ifMatch}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Skip()
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var doc map[string]any
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatalf("answer %d is not JSON: %q", resp.StatusCode, raw)
		}
		after := sim.State()
		if resp.StatusCode != 200 {
			if _, ok := doc["error"]; !ok {
				t.Fatalf("refusal %d without an error: %q", resp.StatusCode, raw)
			}
			if len(sim.Mutations()) != n || after[0].ETag != before[0].ETag || !slices.Equal(after[0].Secondary, before[0].Secondary) {
				t.Fatalf("a refused PUT (%d) changed nic-a: %+v -> %+v", resp.StatusCode, before[0], after[0])
			}
		}
		seen := map[string]string{}
		for _, nic := range after {
			for _, a := range append(slices.Clone(nic.Secondary), nic.PrimaryIP) {
				if o, dup := seen[a.String()]; dup {
					t.Fatalf("%s on %s and %s", a, o, nic.Name)
				}
				seen[a.String()] = nic.Name
			}
		}
		if after[0].PrimaryIP != before[0].PrimaryIP {
			t.Fatal("the primary changed")
		}
	})
}
