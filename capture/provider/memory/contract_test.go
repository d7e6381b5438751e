package memory_test

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture"
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

// memoryFaults breaks a memory provider through its own hooks.
type memoryFaults struct{ p *memory.Provider }

func (f memoryFaults) FailMutations(err error) {
	f.p.SetFail(func(call capture.Kind, _ provider.Request) error {
		if call == memory.DescribeCall {
			return nil
		}
		return err
	})
}

func (f memoryFaults) SetDelay(d time.Duration) { f.p.SetDelay(d) }

func (f memoryFaults) Heal() {
	f.p.SetFail(nil)
	f.p.SetDelay(0)
	f.p.Flush()
}

func TestContractFaults(t *testing.T) {
	providertest.RunFaults(t, func(t *testing.T, nics []string) (provider.Provider, providertest.Faults) {
		p := memory.New(memory.Options{NICs: nics})
		return p, memoryFaults{p}
	})
}
