package config

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Error is one problem in a configuration file, placed where an editor can
// jump to it.
type Error struct {
	// File is the configuration file's path as Parse was given it.
	File string
	// Line is 1-based; 0 when the problem has no place in the file, as
	// with an empty file or a YAML error that names no line.
	Line int
	// Field is the setting's path, such as pools[0].members[1].priority;
	// empty for a YAML syntax error and for the file as a whole.
	Field string
	// Msg says what is wrong, and with which value.
	Msg string
}

// Error renders file:line: field: msg, leaving out the line when it is 0
// and the field when it is empty.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(cmp.Or(e.File, "config"))
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// joinErrors orders errs by line, keeping the order of discovery within a
// line, and returns the only one bare or several joined. An operator fixes
// a file from top to bottom; errors in discovery order would jump about,
// because the sections are checked in dependency order, not file order.
func joinErrors(errs []*Error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	slices.SortStableFunc(errs, func(a, b *Error) int { return cmp.Compare(a.Line, b.Line) })
	all := make([]error, len(errs))
	for i, e := range errs {
		all[i] = e
	}
	return errors.Join(all...)
}
