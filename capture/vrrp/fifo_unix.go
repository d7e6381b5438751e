//go:build unix

package vrrp

import (
	"os"

	"golang.org/x/sys/unix"
)

func mkfifo(path string, mode uint32) error {
	if err := unix.Mkfifo(path, mode); err != nil {
		return &os.PathError{Op: "mkfifo", Path: path, Err: err}
	}
	return nil
}

// openFIFO opens the FIFO for reading without waiting for a writer. The
// nonblocking file lands in the Go runtime's poller, so that read
// deadlines and Close end a waiting read.
func openFIFO(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK, 0)
}

// readFIFO reads what the FIFO holds, waiting in the poller (up to f's
// read deadline) until there is something or every writer is gone. It
// returns 0 and no error for end of file: a writer came and went.
//
// A plain read cannot tell "no writer yet" from "the writer left": both
// return 0. poll can: Linux suppresses POLLHUP on a FIFO opened without a
// writer until a writer has come, so POLLHUP means one came and went. So
// readFIFO polls first and reads only when there is data or a hangup.
func readFIFO(f *os.File, buf []byte) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int
	var rerr error
	err = rc.Read(func(fd uintptr) bool {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			_, rerr = unix.Poll(pfd, 0)
			if rerr != unix.EINTR {
				break
			}
		}
		if rerr != nil {
			return true
		}
		if pfd[0].Revents&(unix.POLLIN|unix.POLLHUP|unix.POLLERR) == 0 {
			return false // wait for the poller
		}
		for {
			n, rerr = unix.Read(int(fd), buf)
			if rerr != unix.EINTR {
				break
			}
		}
		if rerr == unix.EAGAIN {
			rerr = nil
			return false
		}
		return true
	})
	if err != nil {
		return 0, err
	}
	if rerr != nil {
		return 0, rerr
	}
	return max(n, 0), nil
}

// sameFIFO reports whether path still names the file f has open.
func sameFIFO(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(path)
	if err != nil {
		return false
	}
	return os.SameFile(a, b)
}
