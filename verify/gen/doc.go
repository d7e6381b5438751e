// Package gen builds the schedule of a test: which operation each thread
// runs, and from when. A generator is a pure value; an interpreter asks it for
// operations, tells it what happened, and does the waiting. Simulate is an
// interpreter over virtual time, so every generator here is tested without a
// clock, a goroutine or a sleep; the harness's runner is the same interpreter
// over real time.
//
// Generators are pure and seeded: the ones that choose at random (Mix,
// Stagger, Fn) take a seed and carry their random state inside the value, and
// draw only when they hand out an operation, so the same seed gives the same
// choices in the same order however the operations are timed.
//
// The combinators follow the vocabulary of Jepsen's generators: Once, Repeat,
// Fn, Seq/Then, Phases, Synchronize, Cycle, Mix, Any, FlipFlop, Stagger,
// Delay, Sleep, Limit, TimeLimit, EachThread, Reserve, and the routers Clients
// and Nemesis, which put a fault schedule beside the clients:
//
//	TimeLimit(60*time.Second, Any(
//		Clients(Stagger(seed, 10*time.Millisecond, Mix(seed, reads, writes, cas))),
//		Nemesis(Cycle(Sleep(5*time.Second), Once(NemesisOp("start", nil)),
//			Sleep(5*time.Second), Once(NemesisOp("stop", nil)))),
//	))
//
// # Protocol
//
// An interpreter drives one generator value g over threads NemesisThread and
// 0..n-1. A thread is busy from the moment an operation is handed to it until
// that operation completes, and free otherwise; "now" is the time since the
// test started, on a monotonic clock. Next and Update are never called
// concurrently. The interpreter does exactly this:
//
//  1. Ask: call g.Next(ctx) with ctx = Context{Seed: the run's seed,
//     Time: now, Threads: n, Free: the free threads in ascending order
//     (NemesisThread, when free, first)}. Replace g by the returned generator, whatever the status: a
//     Pending generator may have started a clock (Sleep, TimeLimit) that
//     must not restart.
//  2. On Ready: op.Thread must be in ctx.Free and op.Time >= ctx.Time;
//     anything else (or a status that is none of the three) is a bug in the
//     generator and ends the test with an error. The op is now that thread's: the thread is busy. If op.Time <=
//     now the thread invokes it now; otherwise it waits and invokes it at
//     op.Time, and the op cannot be taken back. Ask again (step 1) at once,
//     even when no thread is left free: generators see time pass only when
//     asked, and a Sleep after the op starts when it is first asked.
//  3. On Pending: ask again when the next event happens (step 4) or, if
//     op.Time > ctx.Time, at op.Time, whichever comes first; op.Time <=
//     ctx.Time means only an event can change the answer. If neither can
//     ever come (nothing outstanding and no wake-up time), the generator is
//     stuck: end the test and say so.
//  4. Events: when a thread invokes an op, and when an op completes, call
//     g = g.Update(ctx, ev) with ev.Time = the time it happened, ctx.Time the
//     same, and ctx.Free the free threads after the event (a completed op's
//     thread is free). Deliver every event that is waiting before asking
//     again: completions first, then invocations, each in ascending thread
//     order (Simulate delivers the events of one instant so). An op handed
//     out for now is invoked, and its event delivered, before the next ask.
//  5. On Exhausted: never call Next again. Ops already handed out are still
//     invoked at their time and completed; Update need not be called any
//     more. The test ends when none is outstanding.
//
// The generator learns nothing of outcomes but what Update tells it; the
// interpreter records ok, fail and info, and after an info moves the thread
// to a new process id, which is invisible here: a thread stays a thread.
package gen
