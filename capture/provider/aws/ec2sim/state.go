package ec2sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/ipfence/ipfence/capture/provider/memory"
)

// StateFile is the name of the file in Config.StateDir that holds the
// saved model.
const StateFile = "cloudsim.json"

// stateVersion is the version of the state file's format; a file of any
// other version is refused rather than misread.
const stateVersion = 1

// maxStateFile bounds what readState reads: the record grows with every
// mutation, but a file this large is not one the simulator wrote.
const maxStateFile = 1 << 30

// stateFile is the saved model: everything a restarted simulator needs to
// answer as if it had never stopped. The random numbers are not saved:
// they start again from the seed.
type stateFile struct {
	Version  int             `json:"version"`
	Subnet   netip.Prefix    `json:"subnet"`
	NICs     []NIC           `json:"nics"`
	Provider memory.Snapshot `json:"provider"`
	Faults   Faults          `json:"faults"`
	Paused   bool            `json:"paused"`
}

// readState reads the state file at path; nil when there is none.
func readState(path string) (*stateFile, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cloudsim: state file: %w", err)
	}
	defer f.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(io.LimitReader(f, maxStateFile+1)); err != nil {
		return nil, fmt.Errorf("cloudsim: state file %s: %w", path, err)
	}
	if buf.Len() > maxStateFile {
		return nil, fmt.Errorf("cloudsim: state file %s: larger than %d bytes", path, maxStateFile)
	}
	st, err := decodeState(buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("cloudsim: state file %s: %w", path, err)
	}
	return st, nil
}

// decodeState parses a state file strictly (unknown fields and trailing
// data are errors) and checks what can be checked without building the
// model: the version, the subnet and the faults. restore checks the rest.
func decodeState(data []byte) (*stateFile, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var st stateFile
	if err := dec.Decode(&st); err != nil {
		return nil, fmt.Errorf("not a cloudsim state file: %w", err)
	}
	if dec.More() {
		return nil, errors.New("not a cloudsim state file: trailing data after the JSON object")
	}
	if st.Version != stateVersion {
		return nil, fmt.Errorf("version %d, want %d", st.Version, stateVersion)
	}
	if err := checkSubnet(st.Subnet); err != nil {
		return nil, err
	}
	if err := st.Faults.validate(); err != nil {
		return nil, fmt.Errorf("faults: %w", err)
	}
	return &st, nil
}

// restore builds the model a state file describes, with clock as the
// provider's clock, refusing one the simulator could not have written:
// bad NIC ids, primary IPs that are not distinct usable addresses of the
// subnet, NICs that are not the provider's, or secondary addresses (held or
// queued for an assign) outside the subnet or equal to a primary.
func (st *stateFile) restore(clock func() time.Time) (*model, error) {
	ids := make([]string, len(st.NICs))
	for i, n := range st.NICs {
		ids[i] = n.ID
	}
	if len(ids) == 0 {
		return nil, errors.New("no NICs")
	}
	if err := checkNICIDs(ids, st.Subnet); err != nil {
		return nil, err
	}
	m := newModel(st.Subnet, st.NICs, nil)
	if len(m.primary) != len(st.NICs) {
		return nil, errors.New("two NICs share a primary IP")
	}
	for _, n := range st.NICs {
		if n.MAC == "" || n.InstanceID == "" {
			return nil, fmt.Errorf("NIC %s: no MAC or instance id", n.ID)
		}
		if r := m.usable(n.ID, n.PrimaryIP); r != nil {
			return nil, fmt.Errorf("NIC %s: primary IP: %w", n.ID, r)
		}
	}
	p, err := memory.Restore(memory.Options{NICs: ids, Clock: clock, Delay: time.Duration(st.Faults.RemapDelay)}, st.Provider)
	if err != nil {
		return nil, err
	}
	check := func(where string, nic string, a netip.Addr) error {
		if r := m.usable(nic, a); r != nil {
			return fmt.Errorf("%s: %w", where, r)
		}
		if owner, ok := m.primary[a]; ok {
			return fmt.Errorf("%s: %s is the primary IP of %s", where, a, owner)
		}
		return nil
	}
	for _, n := range st.Provider.NICs {
		for _, a := range n.Addresses {
			if err := check("NIC "+n.Name, n.Name, a); err != nil {
				return nil, err
			}
		}
	}
	for i, q := range st.Provider.Queue {
		if q.Address.IsValid() {
			if err := check(fmt.Sprintf("pending mutation %d", i), q.NIC, q.Address); err != nil {
				return nil, err
			}
		}
	}
	m.p = p
	return m, nil
}

// saveLocked writes the model to the state file, if there is one. The
// caller holds s.mu, so saves happen in the order of the changes.
func (s *Server) saveLocked() error {
	if s.statePath == "" {
		return nil
	}
	st := stateFile{
		Version: stateVersion, Subnet: s.m.subnet, NICs: s.m.nics,
		Provider: s.m.p.Snapshot(), Faults: s.faults, Paused: s.resume != nil,
	}
	data, err := json.MarshalIndent(st, "", "\t")
	if err != nil {
		return fmt.Errorf("cloudsim: saving the state: %w", err)
	}
	if err := writeFileAtomic(s.statePath, append(data, '\n')); err != nil {
		return fmt.Errorf("cloudsim: saving the state: %w", err)
	}
	return nil
}

// writeFileAtomic replaces path with data so that a crash at any point
// leaves either the old file or the new one: the data goes to a temporary
// file in the same directory, is synced, and is renamed over path.
func writeFileAtomic(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(data); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return err
	}
	// The rename is durable once the directory is synced; a failure here
	// leaves the new file in place, so it is not worth an error.
	if d, derr := os.Open(dir); derr == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}
