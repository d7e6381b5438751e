package federation

import (
	"encoding/binary"
	"fmt"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// Events signed by their origins. A batch's sender is authenticated (the
// certificate's name under mutual TLS), but most of what a node hears it
// hears relayed: without a signature of its own, an event "from" n3 in a
// batch from n2 is whatever n2 says it is — a drain, an epoch record, a
// heartbeat keeping a dead n3 alive so that nobody takes its addresses.
// With a Signer every event carries its origin's signature and the id of
// the certificate it was made under; batches and pulled records carry the
// certificates their events name, so an event can be checked wherever it
// is relayed to, and long after its origin is gone. A node keeps the
// certificates it learned in its log beside the events, so that it can
// pass them on after a restart.

// Signer binds events to their origins (auth.EventKeys under mutual TLS).
type Signer interface {
	// KeyID names this node's certificate; Cert is that certificate.
	KeyID() string
	Cert() []byte
	// Sign signs an event's signed bytes with this node's key.
	Sign(msg []byte) ([]byte, error)
	// Learn takes a certificate a peer sent, if it chains to the
	// cluster's CA and names a node; it returns its key id.
	Learn(der []byte) (string, error)
	// Verify checks a signature of origin made with the key id names.
	Verify(origin, id string, msg, sig []byte) error
}

// RefusedSignature: an event whose signature is missing or does not check
// against a certificate of its origin (only with a Signer).
const RefusedSignature = "bad-signature"

var bCerts = []byte("certs")

// maxSig bounds a signature (an RSA-4096 one is 512 bytes), and maxKeyID a
// key id, so that an event stays small whatever a peer puts in it.
const (
	maxSig   = 1024
	maxKeyID = 64
)

// SignedBytes is what an event's signature covers: every field but the
// signature, each with its length, so that no two events share them.
func (e *Event) SignedBytes() []byte {
	b := make([]byte, 0, 128)
	str := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	str("ipfence-federation-event-v1")
	str(e.Origin)
	b = binary.BigEndian.AppendUint64(b, e.Seq)
	b = binary.BigEndian.AppendUint64(b, e.Lamport)
	b = binary.BigEndian.AppendUint64(b, uint64(e.Time))
	str(string(e.Kind))
	str(e.Subject)
	if e.Record != nil {
		b = append(b, 1)
		b = binary.BigEndian.AppendUint64(b, uint64(e.Record.Epoch))
		str(e.Record.Holder)
	} else {
		b = append(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(e.Held)))
	for _, h := range e.Held {
		str(h)
	}
	str(e.Key)
	return b
}

// sign stamps this node's key id and signature on e.
func (n *Node) sign(e *Event) error {
	if n.cfg.Signer == nil {
		return nil
	}
	e.Key = n.cfg.Signer.KeyID()
	sig, err := n.cfg.Signer.Sign(e.SignedBytes())
	if err != nil {
		return fmt.Errorf("signing event %s: %w", e.ID(), err)
	}
	e.Sig = sig
	return nil
}

// verify checks e's signature; "" when it holds or no Signer is set.
func (n *Node) verify(e *Event) (string, error) {
	if n.cfg.Signer == nil {
		return "", nil
	}
	if err := n.cfg.Signer.Verify(e.Origin, e.Key, e.SignedBytes(), e.Sig); err != nil {
		return RefusedSignature, fmt.Errorf("event %s: %w", e.ID(), err)
	}
	return "", nil
}

// learnCerts takes in the certificates a batch or a pull carried for its
// events: each must chain to the CA and be filed under its own key id.
// Only those that an event names are looked at: any other is no part of
// the message, and a peer could otherwise make this node parse, check and
// keep whatever it sends, and count its junk as refused events. New ones
// are persisted before the events that name them are applied. Called with
// n.mu held; a certificate that does not check is refused and counted, and
// the events that name it are then refused too.
func (n *Node) learnCerts(certs map[string][]byte, events []Event, from string) error {
	if n.cfg.Signer == nil || len(certs) == 0 {
		return nil
	}
	named := make(map[string]bool, len(events))
	for i := range events {
		named[events[i].Key] = true
	}
	fresh := map[string][]byte{}
	for id, der := range certs {
		if _, ok := n.certs[id]; ok || !named[id] {
			continue
		}
		got, err := n.cfg.Signer.Learn(der)
		if err == nil && got != id {
			err = fmt.Errorf("a certificate filed under key %s is key %s", id, got)
		}
		if err != nil {
			n.refuse(RefusedSignature, fmt.Errorf("certificate from %s: %w", from, err), from)
			continue
		}
		fresh[id] = der
	}
	if len(fresh) == 0 {
		return nil
	}
	if err := n.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bCerts)
		for id, der := range fresh {
			if err := b.Put([]byte(id), der); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("persisting %d certificates: %w", len(fresh), err)
	}
	for id, der := range fresh {
		n.certs[id] = der
	}
	return nil
}

// certsFor are the certificates the events name, for a batch or records.
// Called with n.mu held.
func (n *Node) certsFor(events []Event) map[string][]byte {
	if n.cfg.Signer == nil {
		return nil
	}
	out := map[string][]byte{}
	for _, e := range events {
		if der, ok := n.certs[e.Key]; ok {
			out[e.Key] = der
		}
	}
	return out
}

// validSignatureFields bounds what an event carries of its signature.
func (e *Event) validSignatureFields() error {
	switch {
	case len(e.Key) > maxKeyID || strings.ContainsAny(e.Key, "|/\x00"):
		return fmt.Errorf("event %s has a bad key id", e.ID())
	case len(e.Sig) > maxSig:
		return fmt.Errorf("event %s has a signature of %d bytes, more than %d", e.ID(), len(e.Sig), maxSig)
	}
	return nil
}
