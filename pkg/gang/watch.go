package gang

// Waiting by watching: the checkpoint answer on a gang's root object and the
// pods of a gang that is stopping or finishing arrive as watch events, so a
// wait costs no request per poll interval. The loops still wake every poll
// interval to judge timeouts against the clock from what they last saw, and
// re-read every resyncPolls intervals in case a watch missed an event.
// Where a watch is refused (a role without the watch verb) or cannot be
// opened, they read every poll interval as before and say so once.

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/watch"
)

// resyncPolls is how many poll intervals pass between re-reads while a
// watch is open (30 s at the default 1 s).
const resyncPolls = 30

// waiter waits for the next change of what one watch covers.
type waiter struct {
	d *Drainer
	// what the watch covers, for the warning when it cannot be opened.
	what string
	gang string
	// open starts the watch from a resourceVersion.
	open    func(ctx context.Context, rv string) (watch.Interface, error)
	w       watch.Interface
	polling bool
	// lastRead is when the caller last read from the API.
	lastRead time.Time
	// kick, once closed, makes the next wait ask for one read at once.
	kick <-chan struct{}
}

func (d *Drainer) newWaiter(gang, what string, open func(ctx context.Context, rv string) (watch.Interface, error)) *waiter {
	return &waiter{d: d, gang: gang, what: what, open: open, lastRead: d.clock().Now()}
}

// read records a read from the API at resourceVersion rv and (re)opens the
// watch from there when none is open. A watch that cannot be opened turns
// the waiter into a poller for good, with one warning.
func (w *waiter) read(ctx context.Context, rv string) {
	w.lastRead = w.d.clock().Now()
	if w.polling || w.w != nil {
		return
	}
	wi, err := w.open(ctx, rv)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		w.polling = true
		w.d.emit(Event{Type: EventWarning, Gang: w.gang, Message: fmt.Sprintf("gang %s: cannot watch %s (%v); reading every %s instead", w.gang, w.what, err, w.d.Options.poll())})
		return
	}
	w.w = wi
}

// next waits for one event of the watch (returned), or for the poll
// interval to pass (nil). reread is true when the caller must read from
// the API (and call read): the waiter is polling, the watch ended or
// reported an error, or resyncPolls intervals passed since the last read.
func (w *waiter) next(ctx context.Context) (ev *watch.Event, reread bool, err error) {
	poll := w.d.Options.poll()
	if w.w == nil {
		select {
		case <-ctx.Done():
			return nil, false, ctx.Err()
		case <-w.kick:
			w.kick = nil
		case <-w.d.clock().After(poll):
		}
		return nil, true, nil
	}
	select {
	case <-ctx.Done():
		return nil, false, ctx.Err()
	case <-w.kick:
		w.kick = nil
		return nil, true, nil
	case e, ok := <-w.w.ResultChan():
		if !ok || e.Type == watch.Error {
			// Ended by the server (its watch timeout) or too old a
			// resourceVersion: read again and reopen from there.
			w.stop()
			return nil, true, nil
		}
		if e.Type == watch.Bookmark {
			return nil, false, nil
		}
		return &e, false, nil
	case <-w.d.clock().After(poll):
		return nil, w.d.clock().Since(w.lastRead) >= resyncPolls*poll, nil
	}
}

func (w *waiter) stop() {
	if w.w != nil {
		w.w.Stop()
		w.w = nil
	}
}
