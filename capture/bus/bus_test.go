package bus_test

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ipfence/ipfence/capture/bus"
)

// returns runs f and fails the test if f has not returned after a generous
// limit. It is a deadlock guard, not a timing assertion: every f here
// returns in microseconds unless the bus blocks, and without the guard a
// blocked test would hang until go test's ten-minute timeout (the runtime's
// deadlock detector stays silent while the test timeout's timer is pending).
func returns(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not return: something blocked", what)
	}
}

// buffered returns the events waiting in ch without blocking, and whether
// ch turned out to be closed.
func buffered[E any](ch <-chan E) (events []E, closed bool) {
	for {
		select {
		case e, ok := <-ch:
			if !ok {
				return events, true
			}
			events = append(events, e)
		default:
			return events, false
		}
	}
}

func TestPublishDeliversInOrderToEverySubscriber(t *testing.T) {
	b := bus.New[string]()
	subs := []*bus.Subscription[string]{b.Subscribe(8), b.Subscribe(8), b.Subscribe(3)}
	want := []string{"a", "b", "c"}
	for _, e := range want {
		if n := b.Publish(e); n != 3 {
			t.Fatalf("Publish(%q) delivered to %d subscriptions, want 3", e, n)
		}
	}
	for i, s := range subs {
		got, closed := buffered(s.C())
		if !slices.Equal(got, want) || closed {
			t.Errorf("subscription %d received %q (closed %v), want %q on an open channel", i, got, closed, want)
		}
		if d := s.Dropped(); d != 0 {
			t.Errorf("subscription %d dropped %d events, want 0", i, d)
		}
	}
}

func TestSlowSubscriberDropsWithoutBlockingOthers(t *testing.T) {
	b := bus.New[int]()
	slow := b.Subscribe(1)
	fast := b.Subscribe(10)
	// Nobody reads while these run, so a blocking send would never return.
	var delivered []int
	returns(t, "publishing to a full subscriber", func() {
		for i := range 10 {
			delivered = append(delivered, b.Publish(i))
		}
	})
	if want := []int{2, 1, 1, 1, 1, 1, 1, 1, 1, 1}; !slices.Equal(delivered, want) {
		t.Errorf("Publish returned %v, want %v", delivered, want)
	}
	if d := slow.Dropped(); d != 9 {
		t.Errorf("slow subscriber dropped %d events, want 9", d)
	}
	if got, _ := buffered(slow.C()); !slices.Equal(got, []int{0}) {
		t.Errorf("slow subscriber received %v, want [0]: the first event, kept while later ones dropped", got)
	}
	if d := fast.Dropped(); d != 0 {
		t.Errorf("fast subscriber dropped %d events, want 0", d)
	}
	if got, _ := buffered(fast.C()); !slices.Equal(got, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}) {
		t.Errorf("fast subscriber received %v, want 0 through 9", got)
	}
	// Once the slow subscriber has room again it receives new events.
	if n := b.Publish(10); n != 2 {
		t.Errorf("Publish after draining delivered to %d subscriptions, want 2", n)
	}
	if got, _ := buffered(slow.C()); !slices.Equal(got, []int{10}) {
		t.Errorf("slow subscriber received %v after draining, want [10]", got)
	}
}

func TestUnbufferedSubscriptionDropsWhenNobodyWaits(t *testing.T) {
	b := bus.New[int]()
	s := b.Subscribe(0)
	returns(t, "publishing to an unbuffered subscriber nobody reads", func() {
		if n := b.Publish(1); n != 0 {
			t.Errorf("Publish delivered to %d subscriptions, want 0", n)
		}
	})
	if d := s.Dropped(); d != 1 {
		t.Errorf("Dropped() = %d, want 1", d)
	}
}

func TestSubscribeNegativeBufferPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Subscribe(-1) did not panic")
		}
	}()
	bus.New[int]().Subscribe(-1)
}

func TestUnsubscribe(t *testing.T) {
	b := bus.New[int]()
	gone := b.Subscribe(4)
	stays := b.Subscribe(4)
	if n := b.Publish(1); n != 2 {
		t.Fatalf("Publish(1) delivered to %d subscriptions, want 2", n)
	}
	gone.Unsubscribe()
	gone.Unsubscribe() // idempotent: a second call must neither panic nor close twice
	if n := b.Publish(2); n != 1 {
		t.Errorf("Publish(2) after Unsubscribe delivered to %d subscriptions, want 1", n)
	}
	// The event buffered before Unsubscribe is still readable, then the
	// channel reports closed, so a range loop over it ends.
	if got, closed := buffered(gone.C()); !slices.Equal(got, []int{1}) || !closed {
		t.Errorf("unsubscribed channel held %v (closed %v), want [1] then closed", got, closed)
	}
	if d := gone.Dropped(); d != 0 {
		t.Errorf("unsubscribed subscription counted %d drops, want 0: it is no longer offered events", d)
	}
	if got, closed := buffered(stays.C()); !slices.Equal(got, []int{1, 2}) || closed {
		t.Errorf("remaining subscription received %v (closed %v), want [1 2] on an open channel", got, closed)
	}
}

func TestClose(t *testing.T) {
	b := bus.New[int]()
	s1 := b.Subscribe(4)
	s2 := b.Subscribe(4)
	b.Publish(7)
	b.Close()
	b.Close() // idempotent
	if n := b.Publish(8); n != 0 {
		t.Errorf("Publish after Close delivered to %d subscriptions, want 0", n)
	}
	for i, s := range []*bus.Subscription[int]{s1, s2} {
		if got, closed := buffered(s.C()); !slices.Equal(got, []int{7}) || !closed {
			t.Errorf("subscription %d held %v (closed %v) after Close, want [7] then closed", i, got, closed)
		}
		if d := s.Dropped(); d != 0 {
			t.Errorf("subscription %d counted %d drops after Close, want 0", i, d)
		}
	}
	s1.Unsubscribe() // after Close: must not close the channel again

	late := b.Subscribe(4)
	if got, closed := buffered(late.C()); len(got) != 0 || !closed {
		t.Errorf("Subscribe after Close gave a channel holding %v (closed %v), want an empty closed channel", got, closed)
	}
	late.Unsubscribe()
	if n := b.Publish(9); n != 0 {
		t.Errorf("Publish after Close and a late Subscribe delivered to %d subscriptions, want 0", n)
	}
}

func TestConcurrentPublishersKeepTheirOwnOrder(t *testing.T) {
	type event struct{ publisher, seq int }
	const publishers, each = 4, 500
	b := bus.New[event]()
	s := b.Subscribe(publishers * each)
	var wg sync.WaitGroup
	for p := range publishers {
		wg.Go(func() {
			for i := range each {
				b.Publish(event{p, i})
			}
		})
	}
	wg.Wait()
	b.Close()
	next := make([]int, publishers)
	for e := range s.C() {
		if e.seq != next[e.publisher] {
			t.Fatalf("publisher %d: received seq %d, want %d", e.publisher, e.seq, next[e.publisher])
		}
		next[e.publisher]++
	}
	for p, n := range next {
		if n != each {
			t.Errorf("publisher %d: received %d events, want %d", p, n, each)
		}
	}
	if d := s.Dropped(); d != 0 {
		t.Errorf("Dropped() = %d, want 0 with a buffer for every event", d)
	}
}

// TestUnsubscribeDuringPublish races publishers against subscribers that
// come and go, that unsubscribe from inside their own receive loops, and
// against Close. Under -race, a send on a closed channel panics and a
// close racing a send is reported; a channel left open would hang a range
// loop, which returns catches.
func TestUnsubscribeDuringPublish(t *testing.T) {
	const (
		publishers = 4
		churners   = 4
		churns     = 200
		selfUnsubs = 4
		selfRounds = 50
		untilClose = 4
	)
	b := bus.New[int]()
	stop := make(chan struct{})
	var pubs sync.WaitGroup
	for range publishers {
		pubs.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
					b.Publish(i)
					// Real publishers do work between events; a tight loop
					// on every P would keep the subscribing goroutines off
					// the CPU until the scheduler's 10ms preemption.
					runtime.Gosched()
				}
			}
		})
	}

	// Subscribers that live until Close; their loops must end when it runs
	// while publishers are still publishing.
	var closers sync.WaitGroup
	for range untilClose {
		s := b.Subscribe(2)
		closers.Go(func() {
			for range s.C() {
			}
		})
	}

	returns(t, "subscribing and unsubscribing during publishes", func() {
		var subs sync.WaitGroup
		for c := range churners {
			subs.Go(func() {
				for i := range churns {
					buffer := (c + i) % 4
					s := b.Subscribe(buffer)
					if i%2 == 0 {
						select {
						case <-s.C():
						default:
						}
					}
					if i%3 == 0 {
						// Two concurrent Unsubscribes must close the channel once.
						var both sync.WaitGroup
						both.Go(s.Unsubscribe)
						both.Go(s.Unsubscribe)
						both.Wait()
					} else {
						s.Unsubscribe()
					}
					n := 0
					for range s.C() {
						n++
					}
					if n > buffer {
						t.Errorf("%d events arrived after Unsubscribe on a buffer of %d", n, buffer)
						return
					}
				}
			})
		}
		for range selfUnsubs {
			subs.Go(func() {
				const buffer, before = 4, 3
				for range selfRounds {
					s := b.Subscribe(buffer)
					got, after := 0, 0
					for range s.C() {
						if got == before {
							after++
							continue
						}
						got++
						if got == before {
							s.Unsubscribe()
						}
					}
					if after > buffer {
						t.Errorf("%d events arrived after Unsubscribe on a buffer of %d", after, buffer)
						return
					}
				}
			})
		}
		subs.Wait()
		b.Close()
		closers.Wait()
		close(stop)
		pubs.Wait()
	})

	if n := b.Publish(1); n != 0 {
		t.Errorf("Publish after Close delivered to %d subscriptions, want 0", n)
	}
}

func BenchmarkPublish(b *testing.B) {
	for _, subscribers := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("subscribers=%d", subscribers), func(b *testing.B) {
			bs := bus.New[int]()
			var readers sync.WaitGroup
			for range subscribers {
				s := bs.Subscribe(64)
				readers.Go(func() {
					for range s.C() {
					}
				})
			}
			for i := 0; b.Loop(); i++ {
				bs.Publish(i)
			}
			b.StopTimer()
			bs.Close()
			readers.Wait()
		})
	}
}

func ExampleBus() {
	type event struct{ key string }
	b := bus.New[event]()
	s := b.Subscribe(16)
	b.Publish(event{"10.0.0.7/32"})
	b.Publish(event{"10.0.0.8/32"})
	b.Close()
	for e := range s.C() {
		fmt.Println(e.key)
	}
	fmt.Println("dropped:", s.Dropped())
	// Output:
	// 10.0.0.7/32
	// 10.0.0.8/32
	// dropped: 0
}
