package control

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLocalRunExitAndOutput(t *testing.T) {
	ctx := context.Background()
	r := &Local{Node: "here"}
	res, err := r.Run(ctx, Cmd{Line: `echo out; echo err >&2; exit 7`})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Stdout) != "out\n" || string(res.Stderr) != "err\n" || res.Exit != 7 || res.Signal != "" {
		t.Fatalf("result %+v", res)
	}
	res, err = r.Run(ctx, Cmd{Line: `kill -s KILL $$`})
	if err != nil {
		t.Fatal(err)
	}
	if res.Exit != -1 || res.Signal != "KILL" {
		t.Fatalf("killed shell: %+v", res)
	}
	_, err = Output(ctx, r, `echo nope >&2; exit 2`)
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Result.Exit != 2 || !strings.Contains(err.Error(), "here") || !strings.Contains(err.Error(), "exit status 2: nope") {
		t.Fatalf("Output error %v", err)
	}
	out, err := Output(ctx, r, "cat")
	if err != nil || out != "" {
		t.Fatalf("cat of no stdin: %q %v", out, err)
	}
	res, err = r.Run(ctx, Cmd{Line: "tr a-z A-Z", Stdin: strings.NewReader("abc")})
	if err != nil || string(res.Stdout) != "ABC" {
		t.Fatalf("stdin: %q %v", res.Stdout, err)
	}
}

func TestLocalOutputBounded(t *testing.T) {
	res, err := (&Local{}).Run(context.Background(), Cmd{Line: `head -c 3000000 /dev/zero`})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Stdout) != MaxOutput || !res.Truncated || res.Exit != 0 {
		t.Fatalf("kept %d bytes, truncated %v, exit %d", len(res.Stdout), res.Truncated, res.Exit)
	}
}

func TestLocalContextEnds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := (&Local{}).Run(ctx, Cmd{Line: "sleep 30"})
	if !errors.Is(err, ErrUnknown) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v", err)
	}
}

func TestQuoteRoundTrip(t *testing.T) {
	words := []string{"", "plain", "a b", "it's", `"dq"`, "$HOME", "`x`", "a\nb", "\\", "*", "-n", "é"}
	out, err := Output(context.Background(), &Local{}, `printf '%s\0' `+Line(words...))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(out, "\x00"), "\x00")
	if strings.Join(got, "|") != strings.Join(words, "|") {
		t.Fatalf("words came back as %q", got)
	}
	if Quote("a/b-c.d") != "a/b-c.d" || Quote("a b") != "'a b'" {
		t.Fatalf("quote %s %s", Quote("a/b-c.d"), Quote("a b"))
	}
}

func TestUploadFetch(t *testing.T) {
	ctx := context.Background()
	r := &Local{}
	dir := t.TempDir()
	dst := filepath.Join(dir, "sub dir", "it's.txt")
	data := bytes.Repeat([]byte("line\n"), 50000)
	if err := Upload(ctx, r, bytes.NewReader(data), dst, 0o640); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dst)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o640 || fi.Size() != int64(len(data)) {
		t.Fatalf("mode %v size %d", fi.Mode(), fi.Size())
	}
	if _, err := os.Stat(dst + ".ipfence-upload"); !os.IsNotExist(err) {
		t.Fatalf("temporary file left: %v", err)
	}
	var got bytes.Buffer
	n, err := Fetch(ctx, r, dst, &got, 12)
	if err != nil || n != 12 || got.String() != "line\nline\nli" {
		t.Fatalf("fetch %d %q %v", n, got.String(), err)
	}
	got.Reset()
	if n, err := FetchTail(ctx, r, dst, &got, 7); err != nil || n != 7 || got.String() != "e\nline\n" {
		t.Fatalf("tail %d %q %v", n, got.String(), err)
	}
	_, err = Fetch(ctx, r, filepath.Join(dir, "missing"), &got, 10)
	var ee *ExitError
	if !errors.As(err, &ee) || !strings.Contains(err.Error(), "No such file") {
		t.Fatalf("missing file: %v", err)
	}
	if err := Upload(ctx, r, strings.NewReader("x"), "relative/path", 0o600); err == nil || !strings.Contains(err.Error(), "absolute") {
		t.Fatalf("relative upload: %v", err)
	}
}

// TestLocalSudo runs through sudo -n: sudo sets SUDO_USER, which a plain
// sh does not.
func TestLocalSudo(t *testing.T) {
	requireSudo(t)
	ctx := context.Background()
	plain, err := Output(ctx, &Local{}, `echo "user=${SUDO_USER-}"`)
	if err != nil {
		t.Fatal(err)
	}
	sudo, err := Output(ctx, &Local{Sudo: true}, `echo "user=${SUDO_USER-}"`)
	if err != nil {
		t.Fatal(err)
	}
	if plain != "user=\n" || sudo != "user=root\n" {
		t.Fatalf("without sudo %q, with %q", plain, sudo)
	}
}

func TestDaemonLifecycle(t *testing.T) {
	ctx := context.Background()
	r := &Local{}
	d := Daemon{Name: "sleeper", Dir: filepath.Join(t.TempDir(), "d"), Argv: []string{"sh", "-c", `echo "started $GREETING"; exec sleep 300`}, Env: []string{"GREETING=hi there"}}
	p, err := Start(ctx, r, d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Stop(ctx, r, p, time.Second) })
	if p.Pid <= 0 || p.Start == 0 {
		t.Fatalf("proc %+v", p)
	}
	if _, err := Start(ctx, r, d); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Fatalf("second start: %v", err)
	}
	found, err := Find(ctx, r, d)
	if err != nil || found != p {
		t.Fatalf("find %+v %v, want %+v", found, err, p)
	}
	// The daemon runs in its own session: setsid made it the leader.
	sid, err := Output(ctx, r, "ps -o sid= -p "+Quote(itoa(p.Pid)))
	if err != nil || strings.TrimSpace(sid) != itoa(p.Pid) {
		t.Fatalf("session %q %v", sid, err)
	}
	if st, err := StateOf(ctx, r, p); err != nil || st != Running {
		t.Fatalf("state %v %v", st, err)
	}
	if err := Signal(ctx, r, p, "STOP"); err != nil {
		t.Fatal(err)
	}
	if st, _, err := waitState(ctx, r, p, Stopped); err != nil || st != Stopped {
		t.Fatalf("after STOP: %v %v", st, err)
	}
	if err := Signal(ctx, r, p, "CONT"); err != nil {
		t.Fatal(err)
	}
	if st, _, err := waitState(ctx, r, p, Running); err != nil || st != Running {
		t.Fatalf("after CONT: %v %v", st, err)
	}
	// A process of the same pid but another start time is not ours.
	other := Proc{Pid: p.Pid, Start: p.Start + 1}
	if st, err := StateOf(ctx, r, other); err != nil || st != Gone {
		t.Fatalf("other start time: %v %v", st, err)
	}
	if err := Signal(ctx, r, other, "KILL"); !errors.Is(err, ErrGone) {
		t.Fatalf("signal to another start time: %v", err)
	}
	var logs bytes.Buffer
	if _, err := Logs(ctx, r, d, &logs, 1000); err != nil || logs.String() != "started hi there\n" {
		t.Fatalf("logs %q %v", logs.String(), err)
	}
	// A pid file naming a live process with another start time (the pid
	// reused after the daemon died) names no daemon.
	pidFile, err := os.ReadFile(d.PidPath())
	if err != nil || string(pidFile) != fmt.Sprintf("%d %d\n", p.Pid, p.Start) {
		t.Fatalf("pid file %q %v", pidFile, err)
	}
	if err := os.WriteFile(d.PidPath(), fmt.Appendf(nil, "%d %d\n", p.Pid, p.Start+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Find(ctx, r, d); !errors.Is(err, ErrGone) {
		t.Fatalf("find with another start time: %v", err)
	}
	if err := os.WriteFile(d.PidPath(), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Find(ctx, r, d); err == nil || !strings.Contains(err.Error(), `holds "garbage", not a pid and its start time`) {
		t.Fatalf("find with a bad pid file: %v", err)
	}
	if err := Stop(ctx, r, p, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if st, err := StateOf(ctx, r, p); err != nil || st != Gone {
		t.Fatalf("after Stop: %v %v", st, err)
	}
	if err := os.WriteFile(d.PidPath(), fmt.Appendf(nil, "%d %d\n", p.Pid, p.Start), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Signal(ctx, r, p, "TERM"); !errors.Is(err, ErrGone) {
		t.Fatalf("signal after stop: %v", err)
	}
	if _, err := Find(ctx, r, d); !errors.Is(err, ErrGone) {
		t.Fatalf("find after stop: %v", err)
	}
}

// TestStopEscalates: a daemon that ignores SIGTERM is killed after the
// grace period, and a stopped one is continued so that TERM can land.
func TestStopEscalates(t *testing.T) {
	ctx := context.Background()
	r := &Local{}
	d := Daemon{Name: "stubborn", Dir: t.TempDir(), Argv: []string{"sh", "-c", `trap "" TERM; while :; do sleep 1; done`}}
	p, err := Start(ctx, r, d)
	if err != nil {
		t.Fatal(err)
	}
	if err := Signal(ctx, r, p, "STOP"); err != nil {
		t.Fatal(err)
	}
	if err := Stop(ctx, r, p, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if st, err := StateOf(ctx, r, p); err != nil || st != Gone {
		t.Fatalf("after Stop: %v %v", st, err)
	}
}

func TestDaemonBadInput(t *testing.T) {
	ctx := context.Background()
	r := &Local{}
	dir := t.TempDir()
	for _, c := range []struct {
		d    Daemon
		want string
	}{
		{Daemon{Name: "", Dir: dir, Argv: []string{"true"}}, "daemon name"},
		{Daemon{Name: "x/y", Dir: dir, Argv: []string{"true"}}, "daemon name"},
		{Daemon{Name: "x", Dir: "rel", Argv: []string{"true"}}, "not absolute"},
		{Daemon{Name: "x", Dir: dir}, "no program"},
		{Daemon{Name: "x", Dir: dir, Argv: []string{"true"}, Env: []string{"1BAD=x"}}, "KEY=VALUE"},
		{Daemon{Name: "missing", Dir: dir, Argv: []string{filepath.Join(dir, "no-such-program")}}, "exited at once"},
	} {
		_, err := Start(ctx, r, c.d)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.d, err, c.want)
		}
	}
	if err := Signal(ctx, r, Proc{Pid: 1}, "kill; rm"); err == nil || !strings.Contains(err.Error(), "want a name") {
		t.Errorf("bad signal: %v", err)
	}
}
