//go:build !unix

package vrrp

import (
	"errors"
	"os"
)

// keepalived runs on Linux; these keep the package building elsewhere.

var errNoFIFO = errors.New("vrrp: notify FIFOs need a Unix system")

func mkfifo(string, uint32) error            { return errNoFIFO }
func openFIFO(string) (*os.File, error)      { return nil, errNoFIFO }
func readFIFO(*os.File, []byte) (int, error) { return 0, errNoFIFO }
func sameFIFO(*os.File, string) bool         { return false }
