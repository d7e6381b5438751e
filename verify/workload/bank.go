package workload

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/ipfence/ipfence/verify/history"
	"github.com/ipfence/ipfence/verify/linear"
)

// The rules a bank read can break, named as Jepsen names them.
const (
	WrongTotal    = "wrong-total"
	NegativeValue = "negative-value"
	UnexpectedKey = "unexpected-key"
	NilBalance    = "nil-balance"
)

// BankError is an ok bank read that breaks at least one rule.
type BankError struct {
	Read OpRef `json:"read"`
	// Total is the sum of the read's balances, nil balances left out.
	Total int64 `json:"total"`
	// Kinds are the rules broken, in the order above.
	Kinds []string `json:"kinds"`
	// Negative maps each account read below zero to its balance.
	Negative map[string]int64 `json:"negative,omitempty"`
	// Unexpected are accounts outside the known ones; Nil those read
	// with no balance.
	Unexpected []string `json:"unexpected,omitempty"`
	Nil        []string `json:"nil,omitempty"`
}

// checkBank implements Bank.
func checkBank(c *run) error {
	type read struct {
		op       *history.Op
		balances map[string]history.Value
	}
	var reads []read
	transfers := 0
	for i := range c.ops {
		op := &c.ops[i]
		switch op.F {
		case "transfer":
			transfers++
		case "read":
			if op.Type != history.OK {
				continue
			}
			m, ok := op.Output.(map[string]history.Value)
			if !ok {
				return c.opErr(op, "an ok read must return a map of account to balance, found %s", history.Show(op.Output))
			}
			for _, acct := range slices.Sorted(maps.Keys(m)) {
				switch m[acct].(type) {
				case int64, nil:
				default:
					return c.opErr(op, "account %q has balance %s; balances must be integers", acct, history.Show(m[acct]))
				}
			}
			reads = append(reads, read{op, m})
		default:
			return c.unknownF(op, "transfer or read")
		}
	}
	slices.SortFunc(reads, func(a, b read) int { return cmp.Compare(a.op.Return, b.op.Return) })

	sum := func(r read) (int64, error) {
		var t int64
		// In key order, so that whether an intermediate sum overflows
		// does not depend on map order.
		for _, acct := range slices.Sorted(maps.Keys(r.balances)) {
			if b, ok := r.balances[acct].(int64); ok {
				s := t + b
				if (b > 0 && s < t) || (b < 0 && s > t) {
					return 0, c.opErr(r.op, "the balances' sum overflows a 64-bit integer")
				}
				t = s
			}
		}
		return t, nil
	}
	total, inferred := c.o.BankTotal, c.o.BankTotal == 0
	accounts := map[string]bool{}
	for _, a := range c.o.BankAccounts {
		accounts[a] = true
	}
	if len(reads) > 0 {
		if inferred {
			t, err := sum(reads[0])
			if err != nil {
				return err
			}
			total = t
		}
		if len(accounts) == 0 {
			for a := range reads[0].balances {
				accounts[a] = true
			}
		}
	}

	var errs []BankError
	kinds := map[string]int{}
	var lowest, highest int64
	for _, r := range reads {
		t, err := sum(r)
		if err != nil {
			return err
		}
		e := BankError{Read: c.ref(r.op, true), Total: t}
		for _, acct := range slices.SortedFunc(maps.Keys(r.balances), compareAccounts) {
			switch b := r.balances[acct].(type) {
			case nil:
				e.Nil = append(e.Nil, acct)
			case int64:
				if b < 0 && !c.o.BankAllowNegative {
					if e.Negative == nil {
						e.Negative = map[string]int64{}
					}
					e.Negative[acct] = b
				}
			}
			if !accounts[acct] {
				e.Unexpected = append(e.Unexpected, acct)
			}
		}
		if t != total {
			e.Kinds = append(e.Kinds, WrongTotal)
			if kinds[WrongTotal] == 0 || t < lowest {
				lowest = t
			}
			if kinds[WrongTotal] == 0 || t > highest {
				highest = t
			}
		}
		if len(e.Negative) > 0 {
			e.Kinds = append(e.Kinds, NegativeValue)
		}
		if len(e.Unexpected) > 0 {
			e.Kinds = append(e.Kinds, UnexpectedKey)
		}
		if len(e.Nil) > 0 {
			e.Kinds = append(e.Kinds, NilBalance)
		}
		for _, k := range e.Kinds {
			kinds[k]++
		}
		if len(e.Kinds) > 0 {
			errs = append(errs, e)
		}
	}

	f := c.r.Fields
	acctList := slices.SortedFunc(maps.Keys(accounts), compareAccounts)
	f["total"], f["total_inferred"], f["accounts"] = total, inferred, nonNilSlice(acctList)
	f["negative_allowed"] = c.o.BankAllowNegative
	f["read_count"], f["transfer_count"] = len(reads), transfers
	f["error_count"], f["error_kinds"], f["errors"] = len(errs), kinds, nonNilSlice(errs)
	if kinds[WrongTotal] > 0 {
		f["lowest_total"], f["highest_total"] = lowest, highest
	}
	source := "given"
	if inferred {
		source = "the first read's"
	}
	if len(errs) == 0 {
		c.r.Valid = linear.True
		if len(reads) == 0 {
			c.note("no ok read: nothing to contradict")
		} else {
			c.note("every one of %s sums to %d (%s total) over %s", plural(len(reads), "read", "reads"), total, source, plural(len(accounts), "account", "accounts"))
		}
		return nil
	}
	c.r.Valid = linear.False
	c.note("%d of %s bad (%s)", len(errs), plural(len(reads), "read", "reads"), kindCounts(kinds))
	c.note("first: %s", describeBankError(errs[0], total, source))
	return nil
}

// describeBankError says what is wrong with one read.
func describeBankError(e BankError, total int64, source string) string {
	var what []string
	for _, k := range e.Kinds {
		switch k {
		case WrongTotal:
			what = append(what, fmt.Sprintf("sums to %d, not %d (%s total)", e.Total, total, source))
		case NegativeValue:
			var parts []string
			for _, a := range slices.SortedFunc(maps.Keys(e.Negative), compareAccounts) {
				parts = append(parts, fmt.Sprintf("%s = %d", showAccount(a), e.Negative[a]))
			}
			what = append(what, "has negative balances "+strings.Join(parts, ", "))
		case UnexpectedKey:
			what = append(what, "names unknown accounts "+showAccounts(e.Unexpected))
		case NilBalance:
			what = append(what, "has no balance for "+showAccounts(e.Nil))
		}
	}
	return fmt.Sprintf("the read completed at index %d %s", e.Read.Index, strings.Join(what, " and "))
}

// kindCounts renders kind → count in a fixed order.
func kindCounts(kinds map[string]int) string {
	var parts []string
	for _, k := range []string{WrongTotal, NegativeValue, UnexpectedKey, NilBalance} {
		if n := kinds[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, k))
		}
	}
	return strings.Join(parts, ", ")
}

// compareAccounts orders account names numerically when both are integers,
// since EDN integer keys arrive as their decimal text.
func compareAccounts(a, b string) int {
	x, errA := strconv.ParseInt(a, 10, 64)
	y, errB := strconv.ParseInt(b, 10, 64)
	switch {
	case errA == nil && errB == nil:
		return cmp.Compare(x, y)
	case errA == nil:
		return -1
	case errB == nil:
		return 1
	}
	return strings.Compare(a, b)
}

// showAccount renders an account name for a summary line: bare when it is
// a plain word or number, quoted otherwise, so that a line stays one line.
func showAccount(a string) string {
	for _, r := range a {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || strings.ContainsRune("-_.:", r)) {
			return strconv.Quote(a)
		}
	}
	if a == "" {
		return `""`
	}
	return a
}

func showAccounts(as []string) string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = showAccount(a)
	}
	return strings.Join(out, ", ")
}
