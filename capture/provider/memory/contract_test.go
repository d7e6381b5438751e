package memory_test

import (
	"net/http/httptest"
	"testing"

	"github.com/ipfence/ipfence/capture/provider"
	"github.com/ipfence/ipfence/capture/provider/memory"
	"github.com/ipfence/ipfence/capture/provider/providertest"
)

func TestContract(t *testing.T) {
	providertest.Run(t, func(t *testing.T, nics []string) provider.Provider {
		return memory.New(memory.Options{NICs: nics})
	})
}

// TestContractOverHTTP runs the suite through the wire format, record
// included, so that what a killed child process did is checked the same
// way as what a provider in the test's own process did.
func TestContractOverHTTP(t *testing.T) {
	providertest.Run(t, func(t *testing.T, nics []string) provider.Provider {
		srv := httptest.NewServer(memory.Handler(memory.New(memory.Options{NICs: nics})))
		t.Cleanup(srv.Close)
		return recordingClient{Client: &memory.Client{BaseURL: srv.URL, HTTP: srv.Client()}, t: t}
	})
}

// recordingClient makes a Client a provider.Recorder by fetching the
// record over HTTP, so that the suite checks the record's round trip.
type recordingClient struct {
	*memory.Client
	t *testing.T
}

func (c recordingClient) Mutations() []provider.Mutation {
	c.t.Helper()
	ms, err := c.Client.Mutations(c.t.Context())
	if err != nil {
		c.t.Fatalf("Mutations over HTTP: %v", err)
	}
	return ms
}
