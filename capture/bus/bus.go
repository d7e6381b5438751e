// Package bus is the capture daemon's in-process publish/subscribe bus:
// parts of the daemon publish events of the daemon's own type, and any
// number of subscribers, the reconcile loop among them, receive them on
// channels.
//
// The bus never lets a consumer slow down a producer. Delivery is
// non-blocking: a subscriber whose buffer is full misses the event, and its
// Dropped counter says how many it missed. A subscriber that must not miss
// state therefore treats an event as a hint to re-read the level, as a
// level-triggered reconcile loop does, not as the state itself.
//
// Locking is what makes unsubscribing safe at any moment. Publish sends
// only while holding the bus's read lock, and only to subscriptions it finds
// registered under that lock; Unsubscribe and Close take the write lock,
// deregister the subscription and close its channel before releasing it.
// The write lock excludes every reader, so no send is in flight while a
// channel is closed, and a Publish that starts afterwards no longer finds
// the subscription: a send on a closed channel cannot happen. Because sends
// never block, a Publish holding the read lock always finishes promptly,
// which is why a subscriber may call Unsubscribe from inside its own
// receive loop: with a blocking send, the publisher would wait for that
// subscriber to receive while the subscriber waited for the publisher's
// read lock, and neither would move. No subscriber code ever runs while
// the lock is held, so no call can re-enter the bus under it.
package bus

import (
	"sync"
	"sync/atomic"
)

// Bus delivers events of type E to its subscriptions. The zero value is not
// usable; create one with New. A Bus is safe for concurrent use.
type Bus[E any] struct {
	// mu is read-held by Publish for the whole delivery and write-held by
	// anything that closes a channel; see the package comment.
	mu     sync.RWMutex
	subs   map[*Subscription[E]]struct{}
	closed bool
}

// New returns an open bus with no subscriptions.
func New[E any]() *Bus[E] {
	return &Bus[E]{subs: make(map[*Subscription[E]]struct{})}
}

// Subscription is one subscriber's channel of events, created by
// Bus.Subscribe. It is safe for concurrent use.
type Subscription[E any] struct {
	bus *Bus[E]
	ch  chan E
	// dropped is atomic because concurrent publishers increment it while
	// each holds only the read lock.
	dropped atomic.Uint64
	// done is guarded by bus.mu (written under the write lock); it makes
	// closing the channel happen once even when Unsubscribe and Close race.
	done bool
}

// Subscribe registers a subscription whose channel buffers up to buffer
// events. With buffer 0 an event is delivered only if the subscriber is
// already waiting in a receive at that moment, so most subscribers want a
// buffer sized for the bursts they must absorb. Subscribe panics if buffer
// is negative, as make does.
//
// On a closed bus Subscribe returns a subscription whose channel is already
// closed, so a subscriber's range loop ends at once instead of waiting for
// events that will never come.
func (b *Bus[E]) Subscribe(buffer int) *Subscription[E] {
	if buffer < 0 {
		panic("bus: Subscribe with a negative buffer")
	}
	s := &Subscription[E]{bus: b, ch: make(chan E, buffer)}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		s.done = true
		close(s.ch)
		return s
	}
	b.subs[s] = struct{}{}
	return s
}

// Publish offers e to every current subscription without blocking and
// returns how many accepted it. A subscription whose buffer is full misses
// e and its Dropped count grows by one; the others still receive it. Events
// published one after another by one goroutine reach each subscription in
// that order; events from concurrent publishers are not ordered relative to
// each other. Publish on a closed bus does nothing and returns 0.
func (b *Bus[E]) Publish(e E) (delivered int) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return 0
	}
	for s := range b.subs {
		select {
		case s.ch <- e:
			delivered++
		default:
			s.dropped.Add(1)
		}
	}
	return delivered
}

// Close closes the channel of every subscription and makes later Publish
// calls no-ops. Events already buffered stay readable. Close waits for
// publishes in progress to finish, and calling it again does nothing.
func (b *Bus[E]) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.closed = true
	for s := range b.subs {
		s.done = true
		close(s.ch)
	}
}

// C returns the channel the subscription's events arrive on. It is closed
// by Unsubscribe or by the bus's Close, after which a range loop over it
// receives the events still buffered and then ends.
func (s *Subscription[E]) C() <-chan E { return s.ch }

// Unsubscribe stops delivery to s and closes its channel. Once it returns,
// no publish delivers to s any more; events buffered before then stay
// readable. It may be called from any goroutine, including the one ranging
// over C, at any time and any number of times, before or after the bus's
// Close.
func (s *Subscription[E]) Unsubscribe() {
	b := s.bus
	b.mu.Lock()
	defer b.mu.Unlock()
	if s.done {
		return
	}
	s.done = true
	delete(b.subs, s)
	close(s.ch)
}

// Dropped returns how many events were offered to s while its buffer was
// full. Events published after s was unsubscribed are not offered to s and
// are not counted.
func (s *Subscription[E]) Dropped() uint64 { return s.dropped.Load() }
