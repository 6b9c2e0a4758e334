package cli

import (
	"fmt"
	"io"
	"sync"
)

// Progress reports the progress of long commands on stderr. On a terminal
// Update redraws one status line; off a terminal Update prints nothing and
// only Event lines (one per state change) appear, which CI logs can use.
// With quiet set nothing is printed at all.
type Progress struct {
	mu    sync.Mutex
	w     io.Writer
	tty   bool
	quiet bool
	drawn bool
}

// NewProgress returns a Progress writing to w.
func NewProgress(w io.Writer, tty, quiet bool) *Progress {
	return &Progress{w: w, tty: tty, quiet: quiet}
}

// Event prints one line for a state change.
func (p *Progress) Event(format string, args ...any) {
	if p == nil || p.quiet {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
	fmt.Fprintf(p.w, format+"\n", args...)
}

// Update redraws the live status line; it is a no-op off a terminal.
func (p *Progress) Update(format string, args ...any) {
	if p == nil || p.quiet || !p.tty {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "\r\x1b[K"+format, args...)
	p.drawn = true
}

// Done clears the live status line.
func (p *Progress) Done() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
}

func (p *Progress) clear() {
	if p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.drawn = false
	}
}
