package auth

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadSecret(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good", "  \t0123456789abcdef 0123456789abcdef\n\n")
	got, err := ReadSecret(good)
	if err != nil || string(got) != "0123456789abcdef 0123456789abcdef" {
		t.Fatalf("ReadSecret(good) = %q, %v", got, err)
	}

	short := write("short", "0123456789abcdef0123456789abcde\n")
	if _, err := ReadSecret(short); err == nil || err.Error() != "auth: secret file "+short+" holds 31 bytes after trimming whitespace, fewer than the 32 required" {
		t.Errorf("short secret: %v", err)
	}
	blank := write("blank", " \n")
	if _, err := ReadSecret(blank); err == nil || err.Error() != "auth: secret file "+blank+" holds 0 bytes after trimming whitespace, fewer than the 32 required" {
		t.Errorf("blank secret: %v", err)
	}
	missing := filepath.Join(dir, "absent")
	_, err = ReadSecret(missing)
	if err == nil || err.Error() != "auth: read secret file "+missing+": no such file or directory" || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestReadSecretRefusesOddFiles(t *testing.T) {
	if _, err := ReadSecret("/dev/zero"); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("/dev/zero: %v", err)
	}
	if _, err := ReadSecret(t.TempDir()); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a folder: %v", err)
	}
	big := filepath.Join(t.TempDir(), "big")
	os.WriteFile(big, bytes.Repeat([]byte("s"), 70<<10), 0o600)
	if _, err := ReadSecret(big); err == nil || !strings.Contains(err.Error(), "larger than 65536 bytes") {
		t.Errorf("a big file: %v", err)
	}
}
