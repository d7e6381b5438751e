package config

import (
	"fmt"
	"math"
	"math/bits"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// namePattern is the shape of every name in the file: nodes, peers, pools,
// provider references, groups and layer-2 domains. Names end up inside
// capture keys (pool/address@domain), capture domains
// (provider:<ref>:placement:<group>) and idempotency keys, which use /, @
// and : as separators, so a name must not contain them.
const namePattern = `[a-z0-9][a-z0-9-]{0,62}`

var validName = regexp.MustCompile(`^` + namePattern + `$`)

// checkName reports why s is not a valid name, or "".
func checkName(s string) string {
	if s == "" {
		return "must not be empty"
	}
	if !validName.MatchString(s) {
		return fmt.Sprintf("must match %s (lower-case letters, digits and -), found %q", namePattern, s)
	}
	return ""
}

// checkURL reports why s is not an http or https URL with a host, or "".
func checkURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Sprintf("must be an http:// or https:// URL with a host, found %q", s)
	}
	if u.User != nil {
		// Credentials in a URL end up in logs.
		return fmt.Sprintf("must not carry a user or password, found %q", s)
	}
	return ""
}

// sameURL is u in the form two URLs of one node compare equal in: the
// scheme and host lowercased, without a trailing slash. u is valid.
func sameURL(u string) string {
	v, err := url.Parse(u)
	if err != nil {
		return u
	}
	v.Scheme, v.Host = strings.ToLower(v.Scheme), strings.ToLower(v.Host)
	v.Path = strings.TrimSuffix(v.Path, "/")
	return v.String()
}

// checkListen reports why s is not host:port with a numeric port, or "";
// wildcard says whether the host is empty or unspecified (0.0.0.0, ::),
// which binds every interface but is no address a peer can dial.
func checkListen(s string) (msg string, wildcard bool) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Sprintf("must be host:port such as 127.0.0.1:7001, found %q", s), false
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Sprintf("port must be a number from 1 to 65535, found %q", port), false
	}
	if host == "" {
		return "", true
	}
	if a, err := netip.ParseAddr(host); err == nil && a.IsUnspecified() {
		return "", true
	}
	return "", false
}

// byteUnits are the suffixes a size may carry, longest first so that KiB
// is not read as K followed by "iB".
var byteUnits = []struct {
	suffix string
	factor int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1},
}

// parseSize reads a positive size such as 1MiB, 512KiB, 1MB or 1048576.
func parseSize(s string) (int64, error) {
	num, factor := strings.TrimSpace(s), int64(1)
	for _, u := range byteUnits {
		if rest, ok := strings.CutSuffix(num, u.suffix); ok {
			num, factor = strings.TrimSpace(rest), u.factor
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > math.MaxInt64/factor {
		return 0, fmt.Errorf("must be a positive size such as 1MiB, 512KiB or 1048576, found %q", s)
	}
	return n * factor, nil
}

// maxAddresses bounds a range and a whole file. A larger pool is almost
// certainly a typo (10.0.0.0-10.1.0.0), and every node plans over every
// address on every tick.
const maxAddresses = 1 << 16

// parseAddr reads one address literal. Zoned and IPv4-mapped IPv6 forms
// are refused: the same host address written two ways would escape the
// duplicate check and name two capture keys.
func parseAddr(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	switch {
	case err != nil:
		return netip.Addr{}, fmt.Errorf("%q is not an IPv4 or IPv6 address", s)
	case a.Zone() != "":
		return netip.Addr{}, fmt.Errorf("%q carries a zone; a mobile address has none", s)
	case a.Is4In6():
		return netip.Addr{}, fmt.Errorf("%q is an IPv4-mapped IPv6 address; write it as %s", s, a.Unmap())
	case a.IsUnspecified() || a.IsMulticast():
		return netip.Addr{}, fmt.Errorf("%s is not a unicast address", a)
	}
	return a, nil
}

// parseAddrs reads an address or an inclusive range first-last and returns
// its first address and how many it spans.
func parseAddrs(s string) (first netip.Addr, n int, err error) {
	lo, hi, isRange := strings.Cut(s, "-")
	if !isRange {
		a, err := parseAddr(strings.TrimSpace(s))
		return a, 1, err
	}
	a, err := parseAddr(strings.TrimSpace(lo))
	if err != nil {
		return netip.Addr{}, 0, fmt.Errorf("range %q: %w", s, err)
	}
	b, err := parseAddr(strings.TrimSpace(hi))
	if err != nil {
		return netip.Addr{}, 0, fmt.Errorf("range %q: %w", s, err)
	}
	if a.Is4() != b.Is4() {
		return netip.Addr{}, 0, fmt.Errorf("range %q mixes IPv4 and IPv6", s)
	}
	if b.Less(a) {
		return netip.Addr{}, 0, fmt.Errorf("range %q runs backwards: %s is after %s", s, a, b)
	}
	span, ok := distance(a, b)
	if !ok || span >= maxAddresses {
		return netip.Addr{}, 0, fmt.Errorf("range %q holds more than %d addresses", s, maxAddresses)
	}
	return a, int(span) + 1, nil
}

// distance is b-a for a <= b of one family, and false when it does not fit
// in 64 bits.
func distance(a, b netip.Addr) (uint64, bool) {
	x, y := a.As16(), b.As16()
	var xh, xl, yh, yl uint64
	for i := range 8 {
		xh, xl = xh<<8|uint64(x[i]), xl<<8|uint64(x[i+8])
		yh, yl = yh<<8|uint64(y[i]), yl<<8|uint64(y[i+8])
	}
	lo, borrow := bits.Sub64(yl, xl, 0)
	hi, _ := bits.Sub64(yh, xh, borrow)
	return lo, hi == 0
}
