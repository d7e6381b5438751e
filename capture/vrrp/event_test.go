package vrrp

import (
	"fmt"
	"strings"
	"testing"
)

func TestParseLine(t *testing.T) {
	ok := []struct {
		line string
		want Event
	}{
		// The lines keepalived 2.2.7 wrote in this package's tests.
		{`INSTANCE "VI_1" MASTER 100`, Event{Instance: "VI_1", State: Master, Word: "MASTER", Priority: 100}},
		{`INSTANCE "VI_1" BACKUP 100` + "\n", Event{Instance: "VI_1", State: Backup, Word: "BACKUP", Priority: 100}},
		{`INSTANCE "VI_1" STOP 100`, Event{Instance: "VI_1", State: Stop, Word: "STOP", Priority: 100}},
		{`GROUP "G1" MASTER 0`, Event{Group: true, Instance: "G1", State: Master, Word: "MASTER", Priority: 0}},
		// The others keepalived.conf(5) documents.
		{`INSTANCE "vi-2.a" FAULT 1` + "\r\n", Event{Instance: "vi-2.a", State: Fault, Word: "FAULT", Priority: 1}},
		{`INSTANCE "VI_1" DELETED 50`, Event{Instance: "VI_1", State: Stop, Word: "DELETED", Priority: 50}},
		{`INSTANCE "VI_1" MASTER_RX_LOWER_PRI 255`, Event{Instance: "VI_1", State: Master, Word: "MASTER_RX_LOWER_PRI", Priority: 255}},
		{`INSTANCE "VI_1" MASTER_PRIORITY 90`, Event{Instance: "VI_1", State: Master, Word: "MASTER_PRIORITY", Priority: 90}},
		{`INSTANCE "VI_1" BACKUP_PRIORITY 90`, Event{Instance: "VI_1", State: Backup, Word: "BACKUP_PRIORITY", Priority: 90}},
	}
	for _, c := range ok {
		got, err := ParseLine(c.line)
		if err != nil {
			t.Errorf("ParseLine(%q): %v", c.line, err)
			continue
		}
		c.want.Line = strings.TrimRight(c.line, "\r\n")
		if got != c.want {
			t.Errorf("ParseLine(%q) = %+v, want %+v", c.line, got, c.want)
		}
	}

	bad := []struct{ line, says string }{
		{``, "want INSTANCE or GROUP"},
		{`INSTANCE`, "want INSTANCE or GROUP"},
		{`VS [192.168.201.15]:tcp:80 UP`, `type "VS"`},
		{`instance "VI_1" MASTER 100`, `type "instance"`},
		{`INSTANCE VI_1 MASTER 100`, "double-quoted name"},
		{`INSTANCE "VI_1 MASTER 100`, "no closing double quote"},
		{`INSTANCE "" MASTER 100`, "name: empty"},
		{`INSTANCE "VI 1" MASTER 100`, "printable ASCII without spaces"},
		{"INSTANCE \"VI\t1\" MASTER 100", "printable ASCII without spaces"},
		{"INSTANCE \"VÏ\" MASTER 100", "printable ASCII without spaces"},
		{`INSTANCE "VI_1"MASTER 100`, "space after the name"},
		{`INSTANCE "VI_1" MASTER`, "want a state and a priority"},
		{`INSTANCE "VI_1" master 100`, `state "master"`},
		{`INSTANCE "VI_1" UNKNOWN 100`, `state "UNKNOWN"`},
		{`INSTANCE "VI_1" MASTER `, "priority: missing"},
		{`INSTANCE "VI_1" MASTER 256`, `"256"`},
		{`INSTANCE "VI_1" MASTER -1`, `"-1"`},
		{`INSTANCE "VI_1" MASTER 0100`, `"0100"`},
		{`INSTANCE "VI_1" MASTER 010`, `"010"`},
		{`INSTANCE "VI_1" MASTER 100 extra`, `"100 extra"`},
		{`INSTANCE "VI_1" MASTER  100`, `" 100"`},
		{`INSTANCE "VI_1" MASTER 1e2`, `"1e2"`},
		{"INSTANCE \"VI_1\" MASTER 100\n\n", `"100\n"`},
	}
	for _, c := range bad {
		_, err := ParseLine(c.line)
		if err == nil {
			t.Errorf("ParseLine(%q) succeeded, want an error saying %q", c.line, c.says)
			continue
		}
		if !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), fmt.Sprintf("%q", strings.TrimSuffix(strings.TrimSuffix(c.line, "\n"), "\r"))) {
			t.Errorf("ParseLine(%q) error %q: want it to quote the line and say %q", c.line, err, c.says)
		}
	}
}

func TestStateString(t *testing.T) {
	for s, want := range map[State]string{Unknown: "UNKNOWN", Master: "MASTER", Backup: "BACKUP", Fault: "FAULT", Stop: "STOP", State(9): "State(9)"} {
		if got := s.String(); got != want {
			t.Errorf("State(%d).String() = %q, want %q", int(s), got, want)
		}
	}
}

// FuzzParseLine checks that ParseLine never panics and that whatever it
// accepts is exactly what keepalived would have printed for the event.
func FuzzParseLine(f *testing.F) {
	for _, s := range []string{
		`INSTANCE "VI_1" MASTER 100`,
		`GROUP "G1" BACKUP 0` + "\n",
		`INSTANCE "VI_1" MASTER_RX_LOWER_PRI 255`,
		`INSTANCE "x" DELETED 7` + "\r\n",
		`INSTANCE "VI_1" MASTER 256`,
		`INSTANCE "VI "1" MASTER 1`,
		`VS [1.2.3.4]:tcp:80 UP`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		e, err := ParseLine(line)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "vrrp: notify line ") {
				t.Fatalf("ParseLine(%q) error %q does not say where it comes from", line, err)
			}
			return
		}
		kind := "INSTANCE"
		if e.Group {
			kind = "GROUP"
		}
		printed := fmt.Sprintf("%s \"%s\" %s %d", kind, e.Instance, e.Word, e.Priority)
		if printed != e.Line {
			t.Fatalf("ParseLine(%q) = %+v, which prints as %q, not as its Line", line, e, printed)
		}
		if s := strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r"); s != e.Line {
			t.Fatalf("ParseLine(%q).Line = %q, want %q", line, e.Line, s)
		}
		if words[e.Word] != e.State || e.State == Unknown {
			t.Fatalf("ParseLine(%q): word %q with state %v", line, e.Word, e.State)
		}
		if e.Priority < 0 || e.Priority > 255 {
			t.Fatalf("ParseLine(%q): priority %d", line, e.Priority)
		}
	})
}
