package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"strings"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/ipfence/ipfence/capture"
)

// ErrCorrupt is wrapped by every error that refuses a state file because
// its contents are damaged (truncated, overwritten, inconsistent). Such a
// file is never repaired or replaced silently: the node's epochs and
// releases live in it, and starting afresh could take an address back at an
// epoch the cluster has moved past.
var ErrCorrupt = errors.New("state file is corrupt")

// bbolt's file layout, as far as the checks before opening need it: two
// meta pages at the start, each a 16-byte page header followed by the meta
// fields, closed by an FNV-64a checksum of the fields before it.
const (
	boltMagic      = 0xED0CDAED
	boltVersion    = 2
	pageHeaderSize = 16
	metaSumOffset  = 56 // bytes of meta covered by the checksum
	noFreelist     = ^uint64(0)
	// minPageSize and maxPageSize bound the page sizes bbolt writes.
	minPageSize = 1024
	maxPageSize = 1 << 16
)

// fileMeta is one meta page of a bbolt file.
type fileMeta struct {
	pageSize uint32
	root     uint64
	freelist uint64
	pgid     uint64 // high water mark: pages [0, pgid) are in use
	txid     uint64
}

// readMeta decodes and validates a meta page starting at b.
func readMeta(b []byte) (fileMeta, error) {
	if len(b) < pageHeaderSize+metaSumOffset+8 {
		return fileMeta{}, errors.New("too short")
	}
	m := b[pageHeaderSize:]
	le := binary.LittleEndian
	if le.Uint32(m[0:]) != boltMagic {
		return fileMeta{}, errors.New("no bbolt magic number")
	}
	if v := le.Uint32(m[4:]); v != boltVersion {
		return fileMeta{}, fmt.Errorf("bbolt format version %d, not %d", v, boltVersion)
	}
	h := fnv.New64a()
	h.Write(m[:metaSumOffset])
	if h.Sum64() != le.Uint64(m[metaSumOffset:]) {
		return fileMeta{}, errors.New("checksum mismatch")
	}
	fm := fileMeta{pageSize: le.Uint32(m[8:]), root: le.Uint64(m[16:]), freelist: le.Uint64(m[32:]), pgid: le.Uint64(m[40:]), txid: le.Uint64(m[48:])}
	if fm.pageSize < minPageSize || fm.pageSize > maxPageSize || fm.pageSize&(fm.pageSize-1) != 0 {
		return fileMeta{}, fmt.Errorf("page size %d", fm.pageSize)
	}
	if fm.pgid < 4 || fm.root < 2 || fm.root >= fm.pgid || (fm.freelist != noFreelist && (fm.freelist < 2 || fm.freelist >= fm.pgid)) {
		return fileMeta{}, fmt.Errorf("page numbers out of range (root %d, freelist %d, high water mark %d)", fm.root, fm.freelist, fm.pgid)
	}
	return fm, nil
}

// checkFile looks at an existing state file before bbolt maps it: bbolt
// trusts the file's size, and reading a page past the end of a truncated
// file through the mapping kills the process with SIGBUS. It returns
// (false, nil) when there is no file yet. An empty file is refused: a
// state file that existed and lost its contents is not a new node.
func checkFile(path string) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	if !fi.Mode().IsRegular() {
		return false, fmt.Errorf("%w: %s is not a regular file", ErrCorrupt, path)
	}
	size := fi.Size()
	if size == 0 {
		return false, fmt.Errorf("%w: %s is empty (truncated?); if this node's state is really lost, move the file away and start the node as a new incarnation", ErrCorrupt, path)
	}
	head := make([]byte, 2*maxPageSize)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return false, err
	}
	head = head[:n]
	var metas []fileMeta
	var why []string
	m0, err0 := readMeta(head)
	if err0 == nil {
		metas = append(metas, m0)
	} else {
		why = append(why, "meta page 0: "+err0.Error())
	}
	// The second meta page sits one page in: at meta 0's page size, or,
	// when meta 0 is damaged, at the system's.
	ps := os.Getpagesize()
	if err0 == nil {
		ps = int(m0.pageSize)
	}
	if ps < len(head) {
		if m1, err := readMeta(head[ps:]); err == nil {
			metas = append(metas, m1)
		} else {
			why = append(why, "meta page 1: "+err.Error())
		}
	} else {
		why = append(why, "meta page 1: beyond the end of the file")
	}
	if len(metas) == 0 {
		return false, fmt.Errorf("%w: %s (%d bytes) has no valid bbolt meta page (%s)", ErrCorrupt, path, size, strings.Join(why, "; "))
	}
	// bbolt uses the valid meta with the highest transaction id.
	m := metas[0]
	if len(metas) == 2 && metas[1].txid > m.txid {
		m = metas[1]
	}
	need := int64(m.pgid) * int64(m.pageSize)
	if size < need {
		return false, fmt.Errorf("%w: %s is %d bytes but its meta page says it holds %d pages of %d bytes (%d bytes): the file was truncated", ErrCorrupt, path, size, m.pgid, m.pageSize, need)
	}
	// The pages in use are read and their structure checked here, out of
	// bbolt's reach: bbolt follows page numbers and element offsets
	// through its memory mapping without bounds, and its consistency
	// check runs on a goroutine of its own where a fault cannot be caught.
	data := make([]byte, need)
	if _, err := f.ReadAt(data, 0); err != nil {
		return false, fmt.Errorf("reading state file %s: %w", path, err)
	}
	if err := checkPages(data, m); err != nil {
		return false, fmt.Errorf("%w: %s: %w", ErrCorrupt, path, err)
	}
	return true, nil
}

// Page and element layout of bbolt's format.
const (
	branchFlag     = 0x01
	leafFlag       = 0x02
	freelistFlag   = 0x10
	bucketLeafFlag = 0x01
	elementSize    = 16
	inBucketSize   = 16
)

// pages checks the structure reachable from a meta page: every page
// number below the high water mark, every page of the expected kind and
// reached once, every element's key and value inside its page.
type pages struct {
	data []byte
	m    fileMeta
	seen map[uint64]bool
}

func checkPages(data []byte, m fileMeta) (err error) {
	defer func() {
		// Slicing is bounds-checked; a miss is damage the checks below
		// did not name more precisely.
		if r := recover(); r != nil {
			err = fmt.Errorf("page structure: %v", r)
		}
	}()
	p := &pages{data: data, m: m, seen: map[uint64]bool{}}
	if m.freelist != noFreelist {
		if err := p.freelist(m.freelist); err != nil {
			return err
		}
	}
	return p.tree(m.root, 0)
}

// page returns the bytes of page id with its overflow pages.
func (p *pages) page(id uint64, flag uint16) ([]byte, error) {
	ps := uint64(p.m.pageSize)
	if id < 2 || id >= p.m.pgid {
		return nil, fmt.Errorf("page %d is outside the file's %d pages", id, p.m.pgid)
	}
	h := p.data[id*ps:]
	le := binary.LittleEndian
	if got := le.Uint64(h); got != id {
		return nil, fmt.Errorf("page %d says it is page %d", id, got)
	}
	if f := le.Uint16(h[8:]); f != flag {
		return nil, fmt.Errorf("page %d has flags %#x, want %#x", id, f, flag)
	}
	over := uint64(le.Uint32(h[12:]))
	if id+over >= p.m.pgid {
		return nil, fmt.Errorf("page %d runs %d pages past the file's %d", id, over, p.m.pgid)
	}
	for i := id; i <= id+over; i++ {
		if p.seen[i] {
			return nil, fmt.Errorf("page %d is reached twice", i)
		}
		p.seen[i] = true
	}
	return p.data[id*ps : (id+over+1)*ps], nil
}

func (p *pages) freelist(id uint64) error {
	b, err := p.page(id, freelistFlag)
	if err != nil {
		return fmt.Errorf("freelist: %w", err)
	}
	le := binary.LittleEndian
	n, at := uint64(le.Uint16(b[10:])), uint64(pageHeaderSize)
	if n == 0xFFFF {
		n, at = le.Uint64(b[pageHeaderSize:]), at+8
	}
	if n > uint64(len(b)-int(at))/8 {
		return fmt.Errorf("freelist: %d entries do not fit its page", n)
	}
	for i := range n {
		if f := le.Uint64(b[at+8*i:]); f < 2 || f >= p.m.pgid {
			return fmt.Errorf("freelist: page %d is outside the file's %d pages", f, p.m.pgid)
		}
	}
	return nil
}

// tree checks the bucket tree rooted at page id (branch or leaf).
func (p *pages) tree(id uint64, depth int) error {
	if depth > 64 {
		return errors.New("page tree too deep")
	}
	ps := uint64(p.m.pageSize)
	if id < 2 || id >= p.m.pgid {
		return fmt.Errorf("page %d is outside the file's %d pages", id, p.m.pgid)
	}
	flag := binary.LittleEndian.Uint16(p.data[id*ps+8:])
	if flag != branchFlag && flag != leafFlag {
		return fmt.Errorf("page %d has flags %#x where a branch or leaf page belongs", id, flag)
	}
	b, err := p.page(id, flag)
	if err != nil {
		return err
	}
	if flag == leafFlag {
		return p.leaf(b, depth)
	}
	le := binary.LittleEndian
	n := int(le.Uint16(b[10:]))
	if n == 0 || pageHeaderSize+n*elementSize > len(b) {
		return fmt.Errorf("branch page %d: %d elements do not fit", id, n)
	}
	for i := range n {
		e := pageHeaderSize + i*elementSize
		pos, ksize := int(le.Uint32(b[e:])), int(le.Uint32(b[e+4:]))
		if e+pos+ksize > len(b) || pos < 0 {
			return fmt.Errorf("branch page %d: element %d's key lies outside the page", id, i)
		}
		if err := p.tree(le.Uint64(b[e+8:]), depth+1); err != nil {
			return err
		}
	}
	return nil
}

// leaf checks a leaf page's elements (b starts at its page header) and
// the buckets its bucket entries open.
func (p *pages) leaf(b []byte, depth int) error {
	le := binary.LittleEndian
	id := le.Uint64(b)
	n := int(le.Uint16(b[10:]))
	if pageHeaderSize+n*elementSize > len(b) {
		return fmt.Errorf("leaf page %d: %d elements do not fit", id, n)
	}
	for i := range n {
		e := pageHeaderSize + i*elementSize
		flags, pos, ksize, vsize := le.Uint32(b[e:]), int(le.Uint32(b[e+4:])), int(le.Uint32(b[e+8:])), int(le.Uint32(b[e+12:]))
		if pos < 0 || ksize < 0 || vsize < 0 || e+pos+ksize+vsize > len(b) {
			return fmt.Errorf("leaf page %d: element %d lies outside the page", id, i)
		}
		if flags&bucketLeafFlag == 0 {
			continue
		}
		v := b[e+pos+ksize : e+pos+ksize+vsize]
		if len(v) < inBucketSize {
			return fmt.Errorf("leaf page %d: bucket %q has a %d-byte header", id, b[e+pos:e+pos+ksize], len(v))
		}
		if root := le.Uint64(v); root != 0 {
			if err := p.tree(root, depth+1); err != nil {
				return err
			}
			continue
		}
		// An inline bucket: a leaf page inside the value.
		in := v[inBucketSize:]
		if len(in) < pageHeaderSize || le.Uint16(in[8:]) != leafFlag {
			return fmt.Errorf("leaf page %d: inline bucket %q is not a leaf page", id, b[e+pos:e+pos+ksize])
		}
		if err := p.leafInline(in, id, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// leafInline checks an inline bucket's page, whose id field is not a
// page number.
func (p *pages) leafInline(in []byte, parent uint64, depth int) error {
	if depth > 64 {
		return errors.New("page tree too deep")
	}
	le := binary.LittleEndian
	n := int(le.Uint16(in[10:]))
	if pageHeaderSize+n*elementSize > len(in) {
		return fmt.Errorf("inline bucket in page %d: %d elements do not fit", parent, n)
	}
	for i := range n {
		e := pageHeaderSize + i*elementSize
		flags, pos, ksize, vsize := le.Uint32(in[e:]), int(le.Uint32(in[e+4:])), int(le.Uint32(in[e+8:])), int(le.Uint32(in[e+12:]))
		if e+pos+ksize+vsize > len(in) {
			return fmt.Errorf("inline bucket in page %d: element %d lies outside it", parent, i)
		}
		if flags&bucketLeafFlag != 0 {
			return fmt.Errorf("inline bucket in page %d holds a bucket", parent)
		}
	}
	return nil
}

// openChecked opens the bbolt file and, for a file that existed, checks
// it whole: bbolt's own consistency check, then a walk of every bucket
// and key, then the journal's invariants. bbolt panics on some damaged
// pages and faults on others; both become errors here, because the open
// runs with faults turned into panics and panics recovered.
func openChecked(path string, existed bool, bo *bolt.Options) (db *bolt.DB, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			// The half-open handle (its lock, its mapping) is abandoned:
			// closing it could fault again, and the caller refuses the
			// file and stops.
			db, err = nil, fmt.Errorf("%w: %s: reading it failed: %v", ErrCorrupt, path, r)
		}
	}()
	db, err = bolt.Open(path, 0o600, bo)
	if err != nil {
		if existed && !errors.Is(err, berrors.ErrTimeout) {
			return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, path, err)
		}
		return nil, fmt.Errorf("opening state file %s: %w", path, err)
	}
	if !existed {
		return db, nil
	}
	if err := db.View(func(tx *bolt.Tx) error {
		// Walk first, in this goroutine where faults are caught; bbolt's
		// check then runs over pages known to be readable.
		if err := walk(tx); err != nil {
			return err
		}
		var errs []string
		for e := range tx.Check() {
			if len(errs) < 5 {
				errs = append(errs, e.Error())
			}
		}
		if len(errs) > 0 {
			return fmt.Errorf("bbolt consistency check: %s", strings.Join(errs, "; "))
		}
		return invariants(tx)
	}); err != nil {
		db.Close()
		return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, path, err)
	}
	return db, nil
}

// walk reads every key and value of every bucket.
func walk(tx *bolt.Tx) error {
	var visit func(b *bolt.Bucket, depth int) error
	visit = func(b *bolt.Bucket, depth int) error {
		if depth > 8 {
			return errors.New("buckets nested too deep")
		}
		return b.ForEach(func(k, v []byte) error {
			if v == nil {
				if c := b.Bucket(k); c != nil {
					return visit(c, depth+1)
				}
			}
			return nil
		})
	}
	return tx.ForEach(func(name []byte, b *bolt.Bucket) error { return visit(b, 1) })
}

// invariants checks what the store's own code relies on: the buckets
// exist (in a file that has its schema), every record decodes, every
// by-seq entry names a row with that sequence, and every state index entry
// names a row in that state, and every unfinished row is in its index.
func invariants(tx *bolt.Tx) error {
	meta := tx.Bucket(bMeta)
	if meta == nil || meta.Get([]byte("schema")) == nil {
		// A file that never finished its first transaction; Open creates
		// the buckets. Any other bucket in it is foreign.
		n := 0
		tx.ForEach(func([]byte, *bolt.Bucket) error { n++; return nil })
		if n > 0 && meta == nil {
			return errors.New("no meta bucket: not an ipfence state file")
		}
		return nil
	}
	for _, name := range [][]byte{bEpochs, bHeld, bMarkers, bRows, bSeq} {
		if tx.Bucket(name) == nil {
			return fmt.Errorf("bucket %s is missing", name)
		}
	}
	for _, name := range bIndex {
		if tx.Bucket(name) == nil {
			return fmt.Errorf("bucket %s is missing", name)
		}
	}
	if _, err := readEpochs(tx); err != nil {
		return fmt.Errorf("epochs: %w", err)
	}
	if err := tx.Bucket(bHeld).ForEach(func(k, v []byte) error {
		key, err := capture.ParseKey(string(k))
		if err != nil {
			return fmt.Errorf("held: %w", err)
		}
		if _, err := decodeHeld(key, v); err != nil {
			return fmt.Errorf("held %s: %w", key, err)
		}
		return nil
	}); err != nil {
		return err
	}
	if err := tx.Bucket(bMarkers).ForEach(func(k, v []byte) error {
		var a capture.Action
		if err := json.Unmarshal(v, &a); err != nil {
			return fmt.Errorf("marker %q: %w", k, err)
		}
		return nil
	}); err != nil {
		return err
	}
	rows := map[string]capture.Row{}
	if err := tx.Bucket(bRows).ForEach(func(k, v []byte) error {
		var row capture.Row
		if err := json.Unmarshal(v, &row); err != nil {
			return fmt.Errorf("journal row %q: %w", k, err)
		}
		if row.IdempotencyKey != string(k) {
			return fmt.Errorf("journal row %q holds the row of %q", k, row.IdempotencyKey)
		}
		if !slices.Contains(capture.States, row.State) {
			return fmt.Errorf("journal row %q has unknown state %q", k, row.State)
		}
		rows[string(k)] = row
		return nil
	}); err != nil {
		return err
	}
	seen := 0
	if err := tx.Bucket(bSeq).ForEach(func(k, v []byte) error {
		row, ok := rows[string(v)]
		switch {
		case len(k) != 8:
			return fmt.Errorf("journal order: a key of %d bytes", len(k))
		case !ok:
			return fmt.Errorf("journal order: index names row %q, which is missing", v)
		case row.Seq != binary.BigEndian.Uint64(k):
			return fmt.Errorf("journal order: entry %d names row %q, whose sequence is %d", binary.BigEndian.Uint64(k), v, row.Seq)
		}
		seen++
		return nil
	}); err != nil {
		return err
	}
	if seen != len(rows) {
		return fmt.Errorf("journal order: %d entries for %d rows", seen, len(rows))
	}
	for st, name := range bIndex {
		if err := tx.Bucket(name).ForEach(func(k, v []byte) error {
			row, ok := rows[string(k)]
			switch {
			case !ok:
				return fmt.Errorf("index %s names row %q, which is missing", name, k)
			case row.State != st:
				return fmt.Errorf("index %s names row %q, which is %s", name, k, row.State)
			case len(v) != 8 || binary.BigEndian.Uint64(v) != row.Seq:
				return fmt.Errorf("index %s: row %q has the wrong sequence", name, k)
			}
			return nil
		}); err != nil {
			return err
		}
	}
	for k, row := range rows {
		if name, ok := bIndex[row.State]; ok && tx.Bucket(name).Get([]byte(k)) == nil {
			return fmt.Errorf("journal row %q is %s but not in index %s", k, row.State, name)
		}
	}
	return nil
}
