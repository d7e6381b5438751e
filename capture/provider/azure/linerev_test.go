package azure_test

import (
	"testing"

	"github.com/ipfence/ipfence/capture/provider/providertest"
)

// The driver sends a request's etcd line revision as
// X-Ipfence-Line-Revision, and the simulator records it with the mutation.
func TestLineRevisionSent(t *testing.T) {
	e := newEnv(t, []string{"nic-a", "nic-b"})
	providertest.LineRevisionsSent(t, e.drv, [2]string{"nic-a", "nic-b"}, e.sim.Mutations)
}
