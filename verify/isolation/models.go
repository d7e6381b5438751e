package isolation

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// The consistency models and anomalies below, and how they relate, follow
// the literature as Elle organizes it (Adya's isolation levels; Bailis et
// al., "Highly Available Transactions"; Cerone, Bernardi and Gotsman's
// framework; Daudjee and Salem on strong session and strong snapshot
// isolation), so that verdicts read the same as Elle's. A model implies
// another when every history it allows the other allows too; a model
// prohibits some anomalies directly and, through the models it implies,
// all theirs; an anomaly implies more general ones (G-single-item is a
// G-single, and a G-nonadjacent-item, ...).

// implies lists, for each model, the models it directly implies (a history
// satisfying the key satisfies each of these).
var implies = map[string][]string{
	"causal-cerone":                     {"read-atomic"},
	"consistent-view":                   {"cursor-stability", "monotonic-view"},
	"cursor-stability":                  {"read-committed"},
	"forward-consistent-view":           {"consistent-view"},
	"monotonic-atomic-view":             {"read-committed"},
	"monotonic-snapshot-read":           {"read-committed"},
	"monotonic-view":                    {"read-committed"},
	"parallel-snapshot-isolation":       {"causal-cerone", "update-atomic"},
	"prefix":                            {"causal-cerone"},
	"read-atomic":                       {"monotonic-atomic-view"},
	"read-committed":                    {"read-uncommitted"},
	"repeatable-read":                   {"cursor-stability", "monotonic-atomic-view"},
	"serializable":                      {"repeatable-read", "snapshot-isolation", "update-serializable"},
	"snapshot-isolation":                {"forward-consistent-view", "monotonic-atomic-view", "monotonic-snapshot-read", "parallel-snapshot-isolation", "prefix"},
	"strict-serializable":               {"serializable", "snapshot-isolation", "strong-snapshot-isolation", "strong-session-serializable"},
	"strong-read-committed":             {"strong-session-read-committed", "strong-read-uncommitted"},
	"strong-read-uncommitted":           {"strong-session-read-uncommitted"},
	"strong-session-read-committed":     {"read-committed", "strong-session-read-uncommitted"},
	"strong-session-read-uncommitted":   {"read-uncommitted"},
	"strong-session-serializable":       {"serializable", "strong-session-snapshot-isolation"},
	"strong-session-snapshot-isolation": {"snapshot-isolation", "strong-session-read-committed"},
	"strong-snapshot-isolation":         {"strong-session-snapshot-isolation", "strong-read-committed"},
	"update-atomic":                     {"read-atomic"},
	"update-serializable":               {"forward-consistent-view"},
}

// prohibits lists the anomalies each model directly rules out; a model
// also rules out everything the models it implies rule out. The
// "-cycle-exists" anomalies stand for "some cycle of this model's
// dependency subgraph exists": the fallback when no specific cycle was
// classified in time.
var prohibits = map[string][]string{
	"causal-cerone":                     {"internal", "G1a"},
	"cursor-stability":                  {"G1", "G-cursor", "lost-update"},
	"monotonic-view":                    {"G1", "G-monotonic"},
	"monotonic-snapshot-read":           {"G1", "G-MSR"},
	"consistent-view":                   {"G1", "G-single"},
	"forward-consistent-view":           {"G1", "G-SIb"},
	"parallel-snapshot-isolation":       {"internal", "G1a"},
	"serializable":                      {"internal", "G1", "G2", "predicate-read-miss", "PL-3-cycle-exists"},
	"read-committed":                    {"G1", "PL-2-cycle-exists"},
	"read-uncommitted":                  {"G0", "duplicate-elements", "cyclic-versions", "garbage-read", "PL-1-cycle-exists"},
	"prefix":                            {"internal", "G1a"},
	"snapshot-isolation":                {"internal", "G1", "G-SI", "G-nonadjacent", "PL-SI-cycle-exists"},
	"read-atomic":                       {"internal", "G1a", "future-read"},
	"repeatable-read":                   {"G1", "G2-item", "lost-update", "PL-2.99-cycle-exists"},
	"update-atomic":                     {"lost-update"},
	"strict-serializable":               {"G1", "G1c-realtime", "G2-realtime", "PL-SS-cycle-exists"},
	"strong-session-read-uncommitted":   {"G0-process", "strong-session-PL-1-cycle-exists"},
	"strong-session-read-committed":     {"G1c-process", "strong-session-PL-2-cycle-exists"},
	"strong-read-uncommitted":           {"G0-realtime", "strong-PL-1-cycle-exists"},
	"strong-read-committed":             {"G1c-realtime", "strong-PL-2-cycle-exists"},
	"strong-session-snapshot-isolation": {"internal", "G1-process", "G-nonadjacent-process", "strong-session-snapshot-isolation-cycle-exists"},
	"strong-snapshot-isolation":         {"internal", "G1-realtime", "G-nonadjacent-realtime", "strong-snapshot-isolation-cycle-exists"},
	"strong-session-serializable":       {"G1-process", "G2-process", "strong-session-serializable-cycle-exists"},
	"update-serializable":               {"G1", "G-update"},
}

// impliedAnomalies lists, for each anomaly, the anomalies it directly
// implies: wherever the key occurs, so do these.
var impliedAnomalies = map[string][]string{
	"G0":          {"G1c", "G0-process"},
	"G0-process":  {"G1c-process", "G0-realtime"},
	"G0-realtime": {"G1c-realtime"},

	"G1a":          {"G1"},
	"G1b":          {"G1"},
	"G1c":          {"G1", "G1c-process"},
	"G1c-process":  {"G1c-realtime", "G1-process"},
	"G1c-realtime": {"G1-realtime"},
	"G1":           {"G1-process"},
	"G1-process":   {"G1-realtime"},

	"G-single-item":          {"G-single", "G-single-item-process", "G-nonadjacent-item"},
	"G-single-item-process":  {"G-single-process", "G-single-item-realtime", "G-nonadjacent-item-process"},
	"G-single-item-realtime": {"G-single-realtime", "G-nonadjacent-item-realtime"},
	"G-single":               {"G-nonadjacent", "G-SIb", "G-single-process"},
	"G-single-process":       {"G-nonadjacent-process", "G-single-realtime"},
	"G-single-realtime":      {"G-nonadjacent-realtime"},

	"G-nonadjacent-item":          {"G-nonadjacent", "G2-item", "G-nonadjacent-item-process"},
	"G-nonadjacent-item-process":  {"G-nonadjacent-process", "G2-item-process", "G-nonadjacent-item-realtime"},
	"G-nonadjacent-item-realtime": {"G2-item-realtime", "G-nonadjacent-realtime"},
	"G-nonadjacent":               {"G2", "G-nonadjacent-process"},
	"G-nonadjacent-process":       {"G2-process", "G-nonadjacent-realtime"},
	"G-nonadjacent-realtime":      {"G2-realtime"},

	"G2":               {"G2-process"},
	"G2-item":          {"G2", "G2-item-process"},
	"G2-item-process":  {"G2-process", "G2-item-realtime"},
	"G2-item-realtime": {"G2-realtime"},
	"G2-process":       {"G2-realtime"},

	"G-SIa": {"G-SI"},
	"G-SIb": {"G-SI"},

	"incompatible-order": {"G1a"},
	"future-read":        {"G1c"},
	"dirty-update":       {"G1a"},
	"lost-update":        {"write-skew", "G2-item"},
	"write-skew":         {"G2"},
}

// modelAliases maps other names of models to the ones used here: Elle's
// canonical names (Adya's PL-n levels and their strong variants), Elle's
// other spellings, and names Elle and ipfence used before (ROLA, now
// update-atomic).
var modelAliases = map[string]string{
	"ROLA":                  "update-atomic",
	"PL-1":                  "read-uncommitted",
	"PL-2":                  "read-committed",
	"PL-2+":                 "consistent-view",
	"PL-2.99":               "repeatable-read",
	"PL-2L":                 "monotonic-view",
	"PL-3":                  "serializable",
	"PL-3U":                 "update-serializable",
	"PL-CS":                 "cursor-stability",
	"PL-FCV":                "forward-consistent-view",
	"PL-MSR":                "monotonic-snapshot-read",
	"PL-SI":                 "snapshot-isolation",
	"PL-SS":                 "strict-serializable",
	"conflict-serializable": "serializable",
	"strong-serializable":   "strict-serializable",
	"strong-session-PL-1":   "strong-session-read-uncommitted",
	"strong-session-PL-2":   "strong-session-read-committed",
	"strong-PL-1":           "strong-read-uncommitted",
	"strong-PL-2":           "strong-read-committed",
}

// anomalyAliases maps the names ipfence gave cycle-exists results before
// it took Elle's to Elle's.
var anomalyAliases = map[string]string{
	"read-uncommitted-cycle-exists":                "PL-1-cycle-exists",
	"read-committed-cycle-exists":                  "PL-2-cycle-exists",
	"snapshot-isolation-cycle-exists":              "PL-SI-cycle-exists",
	"repeatable-read-cycle-exists":                 "PL-2.99-cycle-exists",
	"serializable-cycle-exists":                    "PL-3-cycle-exists",
	"strict-serializable-cycle-exists":             "PL-SS-cycle-exists",
	"strong-session-read-uncommitted-cycle-exists": "strong-session-PL-1-cycle-exists",
	"strong-session-read-committed-cycle-exists":   "strong-session-PL-2-cycle-exists",
	"strong-read-uncommitted-cycle-exists":         "strong-PL-1-cycle-exists",
	"strong-read-committed-cycle-exists":           "strong-PL-2-cycle-exists",
}

// CanonicalModel returns the name used here for a model given by any of
// its accepted names (Elle's PL-n names, ROLA for update-atomic, ...).
func CanonicalModel(name string) string {
	if c, ok := modelAliases[name]; ok {
		return c
	}
	return name
}

// CanonicalAnomaly returns Elle's current name for an anomaly given by an
// older one.
func CanonicalAnomaly(name string) string {
	if c, ok := anomalyAliases[name]; ok {
		return c
	}
	return name
}

func init() {
	for _, cs := range cycleSubgraphs {
		if !slices.Contains(prohibits[cs.model], cs.anomaly) {
			panic("isolation: " + cs.model + " does not prohibit " + cs.anomaly)
		}
	}
}

// Models lists every consistency model name, sorted.
func Models() []string {
	set := map[string]bool{}
	for m, out := range implies {
		set[m] = true
		for _, o := range out {
			set[o] = true
		}
	}
	for m := range prohibits {
		set[m] = true
	}
	out := make([]string, 0, len(set))
	for m := range set {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

// ValidModel returns an error naming the valid models when name is not
// one of them or of their other names (see CanonicalModel).
func ValidModel(name string) error {
	if slices.Contains(Models(), CanonicalModel(name)) {
		return nil
	}
	return fmt.Errorf("unknown consistency model %q; valid: %s", name, strings.Join(Models(), ", "))
}

// closure walks a relation from the given starting points and returns
// every point reached, the starting points included.
func closure(start []string, next func(string) []string) map[string]bool {
	seen := map[string]bool{}
	stack := slices.Clone(start)
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[x] {
			continue
		}
		seen[x] = true
		stack = append(stack, next(x)...)
	}
	return seen
}

// inverse turns a relation around.
func inverse(rel map[string][]string) map[string][]string {
	out := map[string][]string{}
	for k, vs := range rel {
		for _, v := range vs {
			out[v] = append(out[v], k)
		}
	}
	return out
}

var (
	impliedBy        = inverse(implies)
	anomalyImpliedBy = inverse(impliedAnomalies)
	prohibitedBy     = inverse(prohibits)
)

// Prohibited returns every anomaly that cannot occur in a history
// satisfying model: what the model and every model it implies prohibit,
// and every anomaly that would imply one of those.
func Prohibited(model string) map[string]bool {
	models := closure([]string{CanonicalModel(model)}, func(m string) []string { return implies[m] })
	var direct []string
	for m := range models {
		direct = append(direct, prohibits[m]...)
	}
	return closure(direct, func(a string) []string { return anomalyImpliedBy[a] })
}

// Boundary returns, for the anomalies found, the weakest models they rule
// out (not) and the stronger ones they also rule out (alsoNot), both
// sorted.
func Boundary(anomalies []string) (not, alsoNot []string) {
	canon := make([]string, len(anomalies))
	for i, a := range anomalies {
		canon[i] = CanonicalAnomaly(a)
	}
	all := closure(canon, func(a string) []string { return impliedAnomalies[a] })
	var direct []string
	for a := range all {
		direct = append(direct, prohibitedBy[a]...)
	}
	impossible := closure(direct, func(m string) []string { return impliedBy[m] })
	for m := range impossible {
		// m is among the weakest unless it implies another impossible
		// model.
		weakest := true
		for other := range closure(implies[m], func(x string) []string { return implies[x] }) {
			if impossible[other] {
				weakest = false
				break
			}
		}
		if weakest {
			not = append(not, m)
		} else {
			alsoNot = append(alsoNot, m)
		}
	}
	sort.Strings(not)
	sort.Strings(alsoNot)
	return not, alsoNot
}
