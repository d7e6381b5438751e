// Command replstore is a tiny replicated register, the system under test
// of the library's worked example (replstore_test.go): three replicas on
// loopback, one process each, speaking a line protocol over TCP.
//
// The replica started without -primary is the primary: it holds the register, persists every write
// (written and fsynced before it is acknowledged) and sends its value to
// the backups every 20 ms. A backup forwards a client's writes and reads
// to the primary, so every operation is decided in one place and the
// register is linearizable, whatever the network does: an operation the
// primary cannot be reached for fails (a read) or is unknown (a write).
//
// With -local-reads, a backup answers reads from its own copy instead:
// faster, and stale by up to the replication interval, or for as long as
// a partition keeps the primary's values away. That is the planted bug
// the test must catch.
//
// Protocol, one request and one reply per connection:
//
//	read          → ok V | err MSG
//	write V       → ok   | err MSG
//	sync V        (primary to backup) → ok
package main

import (
	"bufio"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// replica is one node's state.
type replica struct {
	primary    string   // how a backup reaches the primary; "" on the primary
	backups    []string // how the primary reaches the backups
	file       string
	localReads bool

	mu    sync.Mutex
	value int64
}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to serve clients and peers on")
	primary := flag.String("primary", "", "address of the primary, on a backup")
	backups := flag.String("backups", "", "comma-separated addresses of the backups, on the primary")
	file := flag.String("file", "replstore.value", "file that keeps this replica's value")
	localReads := flag.Bool("local-reads", false, "planted bug: backups answer reads from their own copy")
	flag.Parse()

	r := &replica{primary: *primary, file: *file, localReads: *localReads}
	if *backups != "" {
		r.backups = strings.Split(*backups, ",")
	}
	if b, err := os.ReadFile(r.file); err == nil {
		v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			log.Fatalf("replstore: %s: %v", r.file, err)
		}
		r.value = v
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	if r.primary == "" {
		go r.replicate()
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			log.Fatal(err)
		}
		go r.serve(c)
	}
}

// persist writes v to disk before anyone is told of it.
func (r *replica) persist(v int64) error {
	tmp := r.file + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(f, v); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, r.file)
}

// serve answers one request.
func (r *replica) serve(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return
	}
	fmt.Fprintln(c, r.handle(strings.Fields(line)))
}

func (r *replica) handle(req []string) string {
	switch {
	case len(req) == 1 && req[0] == "read":
		if r.primary == "" || r.localReads {
			r.mu.Lock()
			defer r.mu.Unlock()
			return fmt.Sprintf("ok %d", r.value)
		}
		return call(r.primary, "read")
	case len(req) == 2 && (req[0] == "write" || req[0] == "sync"):
		v, err := strconv.ParseInt(req[1], 10, 64)
		if err != nil {
			return "err bad value"
		}
		if req[0] == "write" && r.primary != "" {
			return call(r.primary, "write "+req[1])
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if err := r.persist(v); err != nil {
			return "err " + err.Error()
		}
		r.value = v
		return "ok"
	}
	return "err bad request"
}

// replicate sends the primary's value to every backup, every 20 ms.
func (r *replica) replicate() {
	for range time.Tick(20 * time.Millisecond) {
		r.mu.Lock()
		v := r.value
		r.mu.Unlock()
		for _, p := range r.backups {
			go call(p, fmt.Sprintf("sync %d", v))
		}
	}
}

// read and write are the store's client: one operation on the replica at
// addr.
func read(addr string) (int64, error) {
	reply := call(addr, "read")
	v, ok := strings.CutPrefix(reply, "ok ")
	if !ok {
		return 0, fmt.Errorf("read from %s: %s", addr, reply)
	}
	return strconv.ParseInt(v, 10, 64)
}

func write(addr string, v int64) error {
	if reply := call(addr, fmt.Sprint("write ", v)); reply != "ok" {
		return fmt.Errorf("write to %s: %s", addr, reply)
	}
	return nil
}

// call sends one request to addr and returns the reply, or "err ..." when
// there is none within a second.
func call(addr, req string) string {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "err " + err.Error()
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := fmt.Fprintln(c, req); err != nil {
		return "err " + err.Error()
	}
	reply, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "err " + err.Error()
	}
	return strings.TrimSpace(reply)
}
