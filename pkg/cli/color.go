package cli

import (
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"
)

// Colour modes accepted by --color.
const (
	ColorAuto   = "auto"
	ColorAlways = "always"
	ColorNever  = "never"
)

// Env reads an environment variable; tests pass their own.
type Env func(string) string

// IsTerminal reports whether w is a terminal. Only *os.File values can be.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// UseColor decides whether to colour output written to a stream.
// Precedence: an explicit always/never, then a non-empty NO_COLOR, then
// TERM=dumb, then whether this stream is a terminal.
func UseColor(mode string, env Env, isTTY bool) bool {
	switch mode {
	case ColorAlways:
		return true
	case ColorNever:
		return false
	}
	if env == nil {
		env = os.Getenv
	}
	if env("NO_COLOR") != "" {
		return false
	}
	if env("TERM") == "dumb" {
		return false
	}
	return isTTY
}

// Colorizer paints status words. A zero Colorizer paints nothing.
type Colorizer struct {
	Enabled bool
}

// ANSI colour codes used for status words.
const (
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiBold   = "\x1b[1m"
	ansiReset  = "\x1b[0m"
)

var statusColors = map[string]string{
	"OK": ansiGreen, "PASS": ansiGreen, "FINE": ansiGreen, "DONE": ansiGreen, "SUPPORTED": ansiGreen, "NONE": ansiGreen,
	"WARN": ansiYellow, "WARNING": ansiYellow, "DEPRECATED": ansiYellow, "EDGE": ansiYellow, "WAIT": ansiYellow, "LATER": ansiYellow,
	"FAIL": ansiRed, "BLOCKED": ansiRed, "BLOCKING": ansiRed, "REMOVED": ansiRed, "VIOLATION": ansiRed, "NEVER": ansiRed, "ERROR": ansiRed, "EOL": ansiRed,
}

// Status colours a known status word (case-insensitively); other words are
// returned unchanged. The text stays the same, so meaning never depends on
// colour.
func (c Colorizer) Status(word string) string {
	if !c.Enabled {
		return word
	}
	code, ok := statusColors[strings.ToUpper(word)]
	if !ok {
		return word
	}
	return code + word + ansiReset
}

// Red paints s red.
func (c Colorizer) Red(s string) string { return c.paint(ansiRed, s) }

// Bold makes s bold.
func (c Colorizer) Bold(s string) string { return c.paint(ansiBold, s) }

func (c Colorizer) paint(code, s string) string {
	if !c.Enabled {
		return s
	}
	return fmt.Sprint(code, s, ansiReset)
}

// visibleWidth is the number of runes of s that a terminal shows, ignoring
// ANSI escape sequences.
func visibleWidth(s string) int {
	n := 0
	inEsc := false
	for _, r := range s {
		switch {
		case inEsc:
			if (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') {
				inEsc = false
			}
		case r == '\x1b':
			inEsc = true
		default:
			n++
		}
	}
	return n
}
