package harness

import (
	"context"
	"sync"
	"time"

	"github.com/ipfence/ipfence/verify/checker"
)

// feedEvery is how often the recorded events go to the online checkers:
// the recorder's own flush period, so they are never further behind than
// the file.
const feedEvery = flushEvery

// feeder hands the recorder's new events to an online checker while the
// test runs, from one goroutine, so that at the end only the events of
// the last period are left to feed.
type feeder struct {
	c     checker.Online
	rec   *Recorder
	prog  *progress
	begin time.Time

	ctx    context.Context
	cancel context.CancelFunc
	stopCh chan struct{}
	wg     sync.WaitGroup
	fed    int // events fed; owned by the feeding goroutine until stop returns
	panic  *checker.Result
	early  *checker.Result
	earlyT time.Duration // since begin, when early was found
}

func startFeeding(ctx context.Context, c checker.Online, rec *Recorder, prog *progress) *feeder {
	f := &feeder{c: c, rec: rec, prog: prog, begin: time.Now(), stopCh: make(chan struct{})}
	f.ctx, f.cancel = context.WithCancel(ctx)
	f.wg.Go(func() {
		t := time.NewTicker(feedEvery)
		defer t.Stop()
		for {
			select {
			case <-f.stopCh:
				return
			case <-t.C:
				f.feed(f.ctx)
			}
		}
	})
	return f
}

// feed hands over the events recorded since the last call, and reports
// the first early failure the checker finds. A panic in the checker stops
// the feeding; the result says so.
func (f *feeder) feed(ctx context.Context) {
	if f.panic != nil {
		return
	}
	events := f.rec.EventsFrom(f.fed)
	if len(events) == 0 {
		return
	}
	defer func() {
		if p := recover(); p != nil {
			r := checker.Panicked("the online checker", p)
			f.panic = &r
		}
	}()
	f.c.Feed(ctx, events)
	f.fed += len(events)
	if f.early == nil {
		if e := f.c.Early(); e != nil {
			f.early, f.earlyT = e, time.Since(f.begin)
			what := "a violation"
			if e.Failure != nil {
				what = e.Failure.Summary
			}
			f.prog.logf("online check, %d events in: INVALID: %s", f.fed, what)
		}
	}
}

// stop ends the feeding and feeds what was recorded since: call it after
// the recorder has recorded its last event. The work the checker does
// while fed only looks for early failures (a linearizability check of a
// prefix, which may be long), so it is cancelled: the end must not wait
// for it, the final Result decides.
func (f *feeder) stop() {
	f.cancel()
	close(f.stopCh)
	f.wg.Wait()
	f.feed(f.ctx)
}

// result asks the checker for its verdict on run.
func (f *feeder) result(ctx context.Context, run *checker.Run, limit time.Duration) checker.Result {
	if f.panic != nil {
		return *f.panic
	}
	if f.fed != len(run.Events) {
		// Never: the feeder took every recorded event. Should it happen,
		// a verdict on part of the history must not pass for the whole.
		return checker.Errorf("the online checker was fed %d events of %d", f.fed, len(run.Events))
	}
	return runChecker(ctx, checker.Func(f.c.Result), run, limit)
}

// earlyFields describes an early failure for results.json.
func (f *feeder) earlyFields() map[string]any {
	if f.early == nil {
		return nil
	}
	m := map[string]any{"after_s": f.earlyT.Seconds(), "valid": f.early.Valid}
	if f.early.Failure != nil {
		m["summary"] = f.early.Failure.Summary
	}
	return m
}
