package auth

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// ReadSecret reads a shared secret from the file at path, as given to
// ipfence ctl --token-file and to the daemon. Surrounding whitespace is
// trimmed, since editors and echo add a trailing newline; the remaining
// bytes are the secret as they are, not decoded from hex or base64. At
// least MinSecretLen bytes must remain.
func ReadSecret(path string) ([]byte, error) {
	b, err := readFile("secret", path)
	if err != nil {
		return nil, err
	}
	secret := bytes.TrimSpace(b)
	if len(secret) < MinSecretLen {
		return nil, fmt.Errorf("auth: secret file %s holds %d bytes after trimming whitespace, fewer than the %d required", path, len(secret), MinSecretLen)
	}
	return secret, nil
}

// maxFile bounds what readFile reads: secrets, keys and certificates are
// small, and a mistaken path (/dev/zero, a log) must not be read whole.
const maxFile = 64 << 10

// readFile reads a regular file of at most maxFile bytes, naming it and its
// role in the error. The path is taken out of an *fs.PathError so that the
// message names it only once; the cause stays wrapped, so
// errors.Is(err, fs.ErrNotExist) still holds.
func readFile(role, path string) ([]byte, error) {
	fail := func(err error) ([]byte, error) {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("auth: read %s file %s: %w", role, path, err)
	}
	f, err := os.Open(path)
	if err != nil {
		return fail(err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return fail(err)
	}
	if !info.Mode().IsRegular() {
		return fail(errors.New("not a regular file"))
	}
	b, err := io.ReadAll(io.LimitReader(f, maxFile+1))
	if err != nil {
		return fail(err)
	}
	if len(b) > maxFile {
		return fail(fmt.Errorf("larger than %d bytes", maxFile))
	}
	return b, nil
}
