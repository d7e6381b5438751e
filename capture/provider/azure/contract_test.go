package azure_test

import (
	"errors"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture/provider"
	"github.com/ipfence/ipfence/capture/provider/aws/ec2sim"
	"github.com/ipfence/ipfence/capture/provider/azure"
	"github.com/ipfence/ipfence/capture/provider/azure/armsim"
	"github.com/ipfence/ipfence/capture/provider/providertest"
)

// TestContract runs the contract suite against the driver on the
// simulator. Azure has no one-call move (see the package documentation),
// so the suite's three subtests of the atomic move (Reassign,
// ConcurrentReassign, Record) run in their two-step versions; run
// unchanged, those three fail by design: an observer sees the address on
// no NIC between the two writes, the record shows an unassign and an
// assign instead of one assign with From, and racing movers are refused
// with 412s. The driver keeps the epoch record but refuses nothing by it:
// the suite's racing callers draw their epochs from one counter, so one
// with an older epoch often arrives second, which the record would refuse
// and the contract says succeeds (the record's refusals are tested in
// azure_test.go).
func TestContract(t *testing.T) {
	providertest.RunTwoStep(t, azure.ErrConflict, func(t *testing.T, nics []string) provider.Provider {
		e := newEnv(t, nics)
		return recorded{e.driver(t, ignoreEpochs), e.sim}
	})
}

// simFaults breaks the simulator through its fault settings.
type simFaults struct {
	t   *testing.T
	sim *armsim.Server
}

func (f simFaults) FailMutations(err error) {
	code := armsim.CodeTooManyRequests
	if errors.Is(err, provider.ErrUnavailable) {
		code = armsim.CodeInternal
	}
	if err := f.sim.SetFaults(armsim.Faults{Errors: map[string][]armsim.ErrorRate{armsim.OpPut: {{Code: code, Rate: 1}}}}); err != nil {
		f.t.Fatal(err)
	}
}

func (f simFaults) SetDelay(d time.Duration) {
	fs := f.sim.Faults()
	fs.Delay = ec2sim.Duration(d)
	if err := f.sim.SetFaults(fs); err != nil {
		f.t.Fatal(err)
	}
}

func (f simFaults) Heal() { f.sim.Reset() }

// TestContractFaults runs the suite's fault cases unchanged.
func TestContractFaults(t *testing.T) {
	providertest.RunFaults(t, func(t *testing.T, nics []string) (provider.Provider, providertest.Faults) {
		e := newEnv(t, nics)
		return recorded{e.driver(t, ignoreEpochs), e.sim}, simFaults{t, e.sim}
	})
}
