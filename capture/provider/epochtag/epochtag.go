// Package epochtag keeps, in a cloud object's tags, the highest capture
// epoch any action applied to each address: the record a driver reads
// together with the object's ETag, so that a write conditional on that
// ETag is also a write conditional on no newer epoch having acted on the
// address. A zombie whose gate is off reads the record, finds an epoch above
// its own and sends nothing; one that read before the newer write finds
// the ETag moved and the cloud answers 412.
//
// The record is spread over tags named Prefix0, Prefix1, ..., each value
// a comma-separated list of address=epoch no longer than MaxValue, so that
// it fits the tag limits of Azure (256 characters a value) and OCI
// freeform tags alike. Decode reads tags anyone can write: it is bounded
// and never panics, and a value it cannot read is an error, never a lower
// epoch.
package epochtag

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/ipfence/ipfence/capture"
)

// Prefix names the record's tags; the chunk's index follows it.
const Prefix = "ipfence-epochs-"

// Limits on the record, below the clouds' own (Azure: 50 tags a resource,
// 256 characters a value).
const (
	// MaxValue is the longest value a chunk has.
	MaxValue = 256
	// MaxChunks is how many chunks a record may use.
	MaxChunks = 16
)

// ErrTooLarge: the record does not fit MaxChunks chunks.
var ErrTooLarge = errors.New("epochtag: the epoch record does not fit the tags")

// Record is the highest epoch applied to each address.
type Record map[netip.Addr]capture.Epoch

// Stale says whether an action at epoch e on a is older than one the
// record holds. Epoch 0 (a call made outside a journal) is never stale.
func (r Record) Stale(a netip.Addr, e capture.Epoch) bool {
	return e != 0 && e < r[a]
}

// Raise records e for a when it is higher than what the record holds; it
// reports whether the record changed.
func (r Record) Raise(a netip.Addr, e capture.Epoch) bool {
	if e == 0 || e <= r[a] {
		return false
	}
	r[a] = e
	return true
}

// Decode reads the record from an object's tags, ignoring every tag
// whose name does not start with Prefix. An address named twice keeps its
// higher epoch.
func Decode(tags map[string]string) (Record, error) {
	r := Record{}
	chunks := 0
	for k, v := range tags {
		if !strings.HasPrefix(k, Prefix) {
			continue
		}
		if chunks++; chunks > MaxChunks {
			return nil, fmt.Errorf("%w: more than %d tags named %s*", ErrTooLarge, MaxChunks, Prefix)
		}
		if len(v) > MaxValue {
			return nil, fmt.Errorf("epochtag: tag %.40q: a value of %d characters, above %d", k, len(v), MaxValue)
		}
		if v == "" {
			continue
		}
		for _, e := range strings.Split(v, ",") {
			as, es, ok := strings.Cut(e, "=")
			if !ok {
				return nil, fmt.Errorf("epochtag: tag %.40q: %.60q is not address=epoch", k, e)
			}
			a, err := netip.ParseAddr(as)
			if err != nil {
				return nil, fmt.Errorf("epochtag: tag %.40q: %w", k, err)
			}
			n, err := strconv.ParseUint(es, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("epochtag: tag %.40q: epoch of %s: %w", k, a, err)
			}
			r.Raise(a, capture.Epoch(n))
		}
	}
	return r, nil
}

// Encode writes the record as tags: chunks named Prefix0 onwards, each
// address=epoch list at most MaxValue long, addresses in order so that the
// same record always makes the same tags.
func Encode(r Record) (map[string]string, error) {
	out := map[string]string{}
	var b strings.Builder
	flush := func() error {
		if b.Len() == 0 {
			return nil
		}
		if len(out) == MaxChunks {
			return fmt.Errorf("%w: %d addresses", ErrTooLarge, len(r))
		}
		out[Prefix+strconv.Itoa(len(out))] = b.String()
		b.Reset()
		return nil
	}
	for _, a := range slices.SortedFunc(maps.Keys(r), netip.Addr.Compare) {
		if r[a] == 0 {
			continue
		}
		e := a.String() + "=" + strconv.FormatUint(uint64(r[a]), 10)
		if b.Len() > 0 && b.Len()+1+len(e) > MaxValue {
			if err := flush(); err != nil {
				return nil, err
			}
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(e)
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return out, nil
}

// Merge returns tags with the record's chunks replaced by r's encoding,
// every other tag kept: the tags a conditional write sends.
func Merge(tags map[string]string, r Record) (map[string]string, error) {
	enc, err := Encode(r)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(tags)+len(enc))
	for k, v := range tags {
		if !strings.HasPrefix(k, Prefix) {
			out[k] = v
		}
	}
	maps.Copy(out, enc)
	return out, nil
}
