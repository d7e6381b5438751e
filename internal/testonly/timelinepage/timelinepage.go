// Package timelinepage reads back the operations a timeline page
// (verify/report) embeds, so that tests in any package can check what the
// page holds without a browser.
//
// The page's JSON document carries the operations as "ops": base64 of one
// run of unsigned varints (LEB128) per operation, in invoke order:
//
//	lane, start − previous start (µs), duration + 1 (µs; 0: never
//	completed), f·8 + outcome, v·2 + has-error[, error]
//
// where lane indexes "lanes", f indexes "fs", the error indexes the texts
// (below), v is the zigzag (0, -1, 1, -2, … as 0, 1, 2, 3, …) of the
// value's index into the texts minus one past the highest index of the
// values before, and the outcome is 0 ok, 1 fail, 2 info, 3 pending,
// 4 nemesis, 5 a lane event, 6 a bad lane event. "n" is the number of
// operations.
//
// The texts (values, errors, notes) are "valt", a list of shapes, each a
// list of pieces of text, and "valn", base64 of unsigned varints: per
// text, its shape's index and then a number to put between each two
// pieces.
package timelinepage

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Ops are a page's operations, column by column.
type Ops struct {
	Lane  []int
	Start []int64 // µs from the start of the test
	Dur   []int64 // µs from invoke to completion; -1: never completed
	Out   []byte  // the outcome as a digit, '0' to '6'
	F     []int
	Val   []int
	// Err maps the position of each operation with an error to the
	// error's index in the values.
	Err map[int]int
}

// DecodeVals decodes a page's texts from their shapes and numbers.
func DecodeVals(shapes [][]string, nums string) ([]string, error) {
	b, err := base64.StdEncoding.DecodeString(nums)
	if err != nil {
		return nil, fmt.Errorf("timeline texts: %w", err)
	}
	var out []string
	for pos := 0; pos < len(b); {
		k, n := binary.Uvarint(b[pos:])
		if n <= 0 || k >= uint64(len(shapes)) {
			return nil, fmt.Errorf("timeline texts: text %d: bad shape at byte %d", len(out), pos)
		}
		pos += n
		shape := shapes[k]
		var s strings.Builder
		s.WriteString(shape[0])
		for _, piece := range shape[1:] {
			x, n := binary.Uvarint(b[pos:])
			if n <= 0 {
				return nil, fmt.Errorf("timeline texts: text %d: bad number at byte %d", len(out), pos)
			}
			pos += n
			s.WriteString(strconv.FormatUint(x, 10))
			s.WriteString(piece)
		}
		out = append(out, s.String())
	}
	return out, nil
}

// Decode decodes the n operations of the ops text of a page.
func Decode(ops string, n int) (Ops, error) {
	b, err := base64.StdEncoding.DecodeString(ops)
	if err != nil {
		return Ops{}, fmt.Errorf("timeline ops: %w", err)
	}
	o := Ops{Err: map[int]int{}}
	pos := 0
	next := func() (int64, error) {
		var x uint64
		for shift := 0; ; shift += 7 {
			if pos >= len(b) {
				return 0, errors.New("ends inside a number")
			}
			if shift > 56 {
				return 0, fmt.Errorf("number too long at byte %d", pos)
			}
			c := b[pos]
			pos++
			x |= uint64(c&127) << shift
			if c < 128 {
				return int64(x), nil
			}
		}
	}
	var t, hi int64
	for i := range n {
		var v [5]int64
		for k := range v {
			if v[k], err = next(); err != nil {
				return Ops{}, fmt.Errorf("timeline ops: op %d of %d: %w", i, n, err)
			}
		}
		t += v[1]
		o.Lane = append(o.Lane, int(v[0]))
		o.Start = append(o.Start, t)
		o.Dur = append(o.Dur, v[2]-1)
		o.Out = append(o.Out, '0'+byte(v[3]&7))
		o.F = append(o.F, int(v[3]>>3))
		z := int64(v[4] >> 1)
		val := hi + z/2
		if z%2 == 1 {
			val = hi - (z+1)/2
		}
		hi = max(hi, val+1)
		o.Val = append(o.Val, int(val))
		if v[4]&1 == 1 {
			e, err := next()
			if err != nil {
				return Ops{}, fmt.Errorf("timeline ops: op %d's error: %w", i, err)
			}
			o.Err[i] = int(e)
		}
	}
	if pos != len(b) {
		return Ops{}, fmt.Errorf("timeline ops: %d bytes after op %d", len(b)-pos, n)
	}
	return o, nil
}
