package workload

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ipfence/ipfence/verify/linear"
)

func bankErrors(t *testing.T, r *Report) []BankError {
	t.Helper()
	return r.Fields["errors"].([]BankError)
}

// Transfers of every outcome, and reads that keep the total.
func TestBankValid(t *testing.T) {
	r := check(t, Bank, Options{},
		"0 :invoke :read nil", "0 :ok :read {0 10, 1 10}",
		"1 :invoke :transfer {:from 0, :to 1, :amount 5}", "1 :ok :transfer {:from 0, :to 1, :amount 5}",
		"1 :invoke :transfer {:from 0, :to 1, :amount 50}", "1 :fail :transfer [:negative 0 -45]",
		"2 :invoke :transfer {:from 1, :to 0, :amount 1}", "2 :info :transfer :timeout",
		"0 :invoke :read nil", "0 :ok :read {0 5, 1 15}",
		"0 :invoke :read nil", "0 :info :read :timeout",
	)
	wantVerdict(t, r, linear.True)
	wantField(t, r, "total", int64(20))
	wantField(t, r, "total_inferred", true)
	wantField(t, r, "accounts", []string{"0", "1"})
	wantField(t, r, "read_count", 2)
	wantField(t, r, "transfer_count", 3)
	wantField(t, r, "error_count", 0)
	if s := r.Summary(); s != "bank: valid (6 ops): every one of 2 reads sums to 20 (the first read's total) over 2 accounts" {
		t.Fatalf("summary %q", s)
	}
}

// The total is the first ok read's (by completion) unless given.
func TestBankTotal(t *testing.T) {
	lines := []string{
		"1 :invoke :read nil",
		"0 :invoke :read nil", "0 :ok :read {0 90, 1 10}",
		"1 :ok :read {0 95, 1 10}",
		"0 :invoke :read nil", "0 :ok :read {0 80, 1 10}",
	}
	r := check(t, Bank, Options{}, lines...)
	wantVerdict(t, r, linear.False)
	wantField(t, r, "total", int64(100))
	errs := bankErrors(t, r)
	if len(errs) != 2 || errs[0].Total != 105 || errs[0].Read.Index != 3 || errs[1].Total != 90 ||
		!reflect.DeepEqual(errs[0].Kinds, []string{WrongTotal}) {
		t.Fatalf("errors %+v", errs)
	}
	wantField(t, r, "lowest_total", int64(90))
	wantField(t, r, "highest_total", int64(105))
	wantField(t, r, "error_kinds", map[string]int{WrongTotal: 2})
	if s := r.Summary(); !strings.Contains(s, "2 of 3 reads bad (2 wrong-total); first: the read completed at index 3 sums to 105, not 100 (the first read's total)") {
		t.Fatalf("summary %q", s)
	}

	r = check(t, Bank, Options{BankTotal: 90}, lines...)
	wantVerdict(t, r, linear.False)
	wantField(t, r, "total_inferred", false)
	if errs := bankErrors(t, r); len(errs) != 2 || errs[0].Total != 100 || errs[1].Total != 105 {
		t.Fatalf("errors %+v", errs)
	}
	if s := r.Summary(); !strings.Contains(s, "not 90 (given total)") {
		t.Fatalf("summary %q", s)
	}
}

// Negative balances are refused unless allowed.
func TestBankNegative(t *testing.T) {
	lines := []string{
		"0 :invoke :read nil", "0 :ok :read {0 10, 1 0, 2 0}",
		"0 :invoke :read nil", "0 :ok :read {0 12, 1 -1, 2 -1}",
	}
	r := check(t, Bank, Options{}, lines...)
	wantVerdict(t, r, linear.False)
	errs := bankErrors(t, r)
	if len(errs) != 1 || !reflect.DeepEqual(errs[0].Negative, map[string]int64{"1": -1, "2": -1}) || errs[0].Total != 10 {
		t.Fatalf("errors %+v", errs)
	}
	if s := r.Summary(); !strings.Contains(s, "has negative balances 1 = -1, 2 = -1") {
		t.Fatalf("summary %q", s)
	}
	r = check(t, Bank, Options{BankAllowNegative: true}, lines...)
	wantVerdict(t, r, linear.True)
	wantField(t, r, "negative_allowed", true)
}

// Accounts outside the known ones, and accounts with no balance.
func TestBankAccounts(t *testing.T) {
	lines := []string{
		"0 :invoke :read nil", "0 :ok :read {0 10, 1 10}",
		"0 :invoke :read nil", "0 :ok :read {0 10, 1 5, x 5}",
		"0 :invoke :read nil", "0 :ok :read {0 20, 1 nil}",
	}
	r := check(t, Bank, Options{}, lines...)
	wantVerdict(t, r, linear.False)
	errs := bankErrors(t, r)
	if len(errs) != 2 || !reflect.DeepEqual(errs[0].Unexpected, []string{"x"}) || !reflect.DeepEqual(errs[0].Kinds, []string{UnexpectedKey}) ||
		!reflect.DeepEqual(errs[1].Nil, []string{"1"}) || !reflect.DeepEqual(errs[1].Kinds, []string{NilBalance}) {
		t.Fatalf("errors %+v", errs)
	}
	wantField(t, r, "error_kinds", map[string]int{UnexpectedKey: 1, NilBalance: 1})

	// Given accounts: the first read itself names an unknown one.
	r = check(t, Bank, Options{BankAccounts: []string{"0", "1", "x"}}, lines...)
	errs = bankErrors(t, r)
	if len(errs) != 1 || errs[0].Read.Index != 5 {
		t.Fatalf("errors %+v", errs)
	}
	wantField(t, r, "accounts", []string{"0", "1", "x"})
}

func TestBankNoReads(t *testing.T) {
	r := check(t, Bank, Options{}, "0 :invoke :transfer {:from 0, :to 1, :amount 5}", "0 :ok :transfer {:from 0, :to 1, :amount 5}")
	wantVerdict(t, r, linear.True)
	wantField(t, r, "read_count", 0)
	wantField(t, r, "accounts", []string{})
}

func TestBankMalformed(t *testing.T) {
	e := checkErr(t, Bank, Options{}, "0 :invoke :read nil", "0 :ok :read [1 2]")
	if e.Index != 0 || !strings.Contains(e.Msg, "map of account to balance, found [1 2]") {
		t.Fatalf("%v", e)
	}
	e = checkErr(t, Bank, Options{}, "0 :invoke :read nil", "0 :ok :read {0 1.5}")
	if !strings.Contains(e.Msg, `account "0" has balance 1.5`) {
		t.Fatalf("%v", e)
	}
	e = checkErr(t, Bank, Options{}, "0 :invoke :read nil", "0 :ok :read {0 9223372036854775807, 1 1}")
	if !strings.Contains(e.Msg, "overflows") {
		t.Fatalf("%v", e)
	}
}

func TestCompareAccounts(t *testing.T) {
	got := []string{"10", "b", "2", "a", "-1"}
	want := []string{"-1", "2", "10", "a", "b"}
	slices.SortFunc(got, compareAccounts)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("sorted %v, want %v", got, want)
	}
}
