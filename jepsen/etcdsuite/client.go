package etcdsuite

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ipfence/ipfence/verify/harness"
	"github.com/ipfence/ipfence/verify/history"
)

// opTimeout bounds one operation: past it the operation is info (or
// fail, for one that only reads).
const opTimeout = 2 * time.Second

// client runs one process's operations on one member.
//
// register (history values are Jepsen's independent [key value] tuples):
//
//	read  [k nil]     → [k v]: Get, v nil when the key is absent
//	write [k v]       → Put
//	cas   [k [old new]]: Txn if value(k) = old then put new; fail when the
//	                     compare did not hold
//
// set: add v → Put of the key s/v; read (value nil) → every element, a
// keys-only range read of the prefix at one revision.
//
// list-append: txn [[f k v] ...] with f "r" or "append". The transaction
// reads every key it touches in one read-only Txn, computes what it
// appends, and commits the appends in a second Txn guarded by the mod
// revision of every key it touched: if any changed, nothing is written
// and the transaction fails. A transaction that appends nothing is the
// first Txn alone.
type client struct {
	c            dialer
	node         string
	workload     string
	serializable bool
	cl           *clientv3.Client
}

// dialer opens a client of one member: the cluster on loopback or the
// one on remote nodes.
type dialer interface {
	dial(node string) (*clientv3.Client, error)
}

func (cl *client) Open(_ context.Context, node string) (harness.Client, error) {
	c, err := cl.c.dial(node)
	if err != nil {
		return nil, err
	}
	return &client{c: cl.c, node: node, workload: cl.workload, serializable: cl.serializable, cl: c}, nil
}

func (cl *client) Setup(context.Context) error    { return nil }
func (cl *client) Teardown(context.Context) error { return nil }

func (cl *client) Close(context.Context) error {
	if cl.cl != nil {
		return cl.cl.Close()
	}
	return nil
}

func (cl *client) Invoke(ctx context.Context, op harness.Op) harness.Completion {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	switch op.F {
	case "write", "cas":
		return cl.register(ctx, op)
	case "read":
		// A register read names its key; a set read names nothing.
		if op.Value == nil {
			return cl.readSet(ctx, op)
		}
		return cl.register(ctx, op)
	case "txn":
		return cl.txn(ctx, op)
	case "add":
		v, _ := op.Value.(int64)
		if _, err := cl.cl.Put(ctx, setKey(v), ""); err != nil {
			return harness.Info(op.Value, err.Error())
		}
		return harness.OK(op.Value)
	}
	return harness.Fail(op.Value, "unknown operation "+op.F)
}

// setPrefix holds the set's elements, one key each.
const setPrefix = "s/"

// setKey is the etcd key of set element v.
func setKey(v int64) string { return setPrefix + strconv.FormatInt(v, 10) }

// readSet reads the whole set (keys only) at one revision.
func (cl *client) readSet(ctx context.Context, op harness.Op) harness.Completion {
	opts := append(cl.readOpts(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	resp, err := cl.cl.Get(ctx, setPrefix, opts...)
	if err != nil {
		return harness.Fail(op.Value, err.Error())
	}
	out := make([]any, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		n, err := strconv.ParseInt(strings.TrimPrefix(string(kv.Key), setPrefix), 10, 64)
		if err != nil {
			return harness.Fail(op.Value, fmt.Sprintf("set key %q is not a number", kv.Key))
		}
		out = append(out, n)
	}
	return harness.OK(out)
}

// registerKey is the etcd key of register k.
func registerKey(k int64) string { return "r/" + strconv.FormatInt(k, 10) }

// appendKey is the etcd key of list k.
func appendKey(k int64) string { return "a/" + strconv.FormatInt(k, 10) }

func (cl *client) readOpts() []clientv3.OpOption {
	if cl.serializable {
		return []clientv3.OpOption{clientv3.WithSerializable()}
	}
	return nil
}

func (cl *client) register(ctx context.Context, op harness.Op) harness.Completion {
	tuple, _ := op.Value.([]any)
	if len(tuple) != 2 {
		return harness.Fail(op.Value, "value must be [key value]")
	}
	k, _ := tuple[0].(int64)
	key := registerKey(k)
	switch op.F {
	case "read":
		resp, err := cl.cl.Get(ctx, key, cl.readOpts()...)
		if err != nil {
			// A read changes nothing: one that did not answer certainly
			// did not happen, as far as the state goes.
			return harness.Fail(op.Value, err.Error())
		}
		var v any
		if len(resp.Kvs) > 0 {
			n, err := strconv.ParseInt(string(resp.Kvs[0].Value), 10, 64)
			if err != nil {
				return harness.Fail(op.Value, fmt.Sprintf("key %s holds %q, not a number", key, resp.Kvs[0].Value))
			}
			v = n
		}
		return harness.OK([]any{k, v})
	case "write":
		v, _ := tuple[1].(int64)
		if _, err := cl.cl.Put(ctx, key, strconv.FormatInt(v, 10)); err != nil {
			return harness.Info(op.Value, err.Error())
		}
		return harness.OK(op.Value)
	default: // cas
		pair, _ := tuple[1].([]any)
		if len(pair) != 2 {
			return harness.Fail(op.Value, "cas value must be [key [old new]]")
		}
		old, _ := pair[0].(int64)
		nu, _ := pair[1].(int64)
		resp, err := cl.cl.Txn(ctx).
			If(clientv3.Compare(clientv3.Value(key), "=", strconv.FormatInt(old, 10))).
			Then(clientv3.OpPut(key, strconv.FormatInt(nu, 10))).
			Commit()
		switch {
		case err != nil:
			return harness.Info(op.Value, err.Error())
		case !resp.Succeeded:
			return harness.Fail(op.Value, "compare failed")
		}
		return harness.OK(op.Value)
	}
}

// mop is one micro-operation of a list-append transaction.
type mop struct {
	f   string
	key int64
	val int64
}

func parseTxn(v any) ([]mop, error) {
	l, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("a transaction is a list of micro-operations, not %v", v)
	}
	out := make([]mop, len(l))
	for i, x := range l {
		m, _ := x.([]any)
		if len(m) != 3 {
			return nil, fmt.Errorf("micro-operation %d is not [f key value]", i)
		}
		f, _ := m[0].(string)
		k, kok := m[1].(int64)
		if (f != "r" && f != "append") || !kok {
			return nil, fmt.Errorf("micro-operation %d is not [r|append key value]", i)
		}
		out[i] = mop{f: f, key: k}
		if f == "append" {
			if out[i].val, ok = m[2].(int64); !ok {
				return nil, fmt.Errorf("micro-operation %d appends a non-integer", i)
			}
		}
	}
	return out, nil
}

// encodeList and decodeList store a list of integers as etcd values:
// space-separated decimals.
func encodeList(l []int64) string {
	parts := make([]string, len(l))
	for i, x := range l {
		parts[i] = strconv.FormatInt(x, 10)
	}
	return strings.Join(parts, " ")
}

func decodeList(s string) ([]int64, error) {
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, " ")
	out := make([]int64, len(parts))
	for i, p := range parts {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("list element %q is not a number", p)
		}
		out[i] = n
	}
	return out, nil
}

func (cl *client) txn(ctx context.Context, op harness.Op) harness.Completion {
	mops, err := parseTxn(op.Value)
	if err != nil {
		return harness.Fail(op.Value, err.Error())
	}
	// Read every key touched, at one revision.
	var keys []int64
	index := map[int64]int{}
	writes := false
	for _, m := range mops {
		if _, ok := index[m.key]; !ok {
			index[m.key] = len(keys)
			keys = append(keys, m.key)
		}
		writes = writes || m.f == "append"
	}
	gets := make([]clientv3.Op, len(keys))
	for i, k := range keys {
		gets[i] = clientv3.OpGet(appendKey(k), cl.readOpts()...)
	}
	resp, err := cl.cl.Txn(ctx).Then(gets...).Commit()
	if err != nil {
		return harness.Fail(op.Value, err.Error())
	}
	state := make([][]int64, len(keys))
	revs := make([]int64, len(keys))
	for i, r := range resp.Responses {
		kvs := r.GetResponseRange().GetKvs()
		if len(kvs) == 0 {
			continue
		}
		revs[i] = kvs[0].ModRevision
		if state[i], err = decodeList(string(kvs[0].Value)); err != nil {
			return harness.Fail(op.Value, fmt.Sprintf("key %s: %v", appendKey(keys[i]), err))
		}
	}
	// Run the micro-operations on the snapshot.
	out := make([]any, len(mops))
	written := make([]bool, len(keys))
	for j, m := range mops {
		i := index[m.key]
		if m.f == "r" {
			l := make([]history.Value, len(state[i]))
			for x, v := range state[i] {
				l[x] = v
			}
			out[j] = []any{"r", m.key, l}
			continue
		}
		state[i] = append(state[i], m.val)
		written[i] = true
		out[j] = []any{"append", m.key, m.val}
	}
	if !writes {
		return harness.OK(out)
	}
	// Commit only if no key touched changed since the snapshot.
	conds := make([]clientv3.Cmp, len(keys))
	var puts []clientv3.Op
	for i, k := range keys {
		conds[i] = clientv3.Compare(clientv3.ModRevision(appendKey(k)), "=", revs[i])
		if written[i] {
			puts = append(puts, clientv3.OpPut(appendKey(k), encodeList(state[i])))
		}
	}
	cresp, err := cl.cl.Txn(ctx).If(conds...).Then(puts...).Commit()
	switch {
	case err != nil:
		return harness.Info(op.Value, err.Error())
	case !cresp.Succeeded:
		return harness.Fail(op.Value, "conflict: a key changed since the transaction read it")
	}
	return harness.OK(out)
}
