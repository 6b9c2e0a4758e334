package runbooke2e

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// A runbook, as kubectl skew plan --runbook prints it, is numbered steps
// ("N. **phase name**: action"), each with fenced sh blocks. A block is
// what a reader pastes; inside it, "# on HOST:" starts lines the reader
// pastes on that host (a node), and "# here:" returns to the workstation.

// Step is one numbered step of a runbook.
type Step struct {
	Number int
	Phase  string
	// Name is the pool of a node-pool step, else the control-plane minor.
	Name string
	// From and To are the versions it moves between (from the plan's
	// -o json).
	From, To string
	Head     string
	Blocks   []*Block
}

// Block is one fenced sh block.
type Block struct {
	Step  *Step
	Index int
	Lines []string
	// Intro is the prose between the previous block (or the step's
	// heading) and this one: "Only if ...:" makes the block an
	// alternative the reader runs only when its condition holds.
	Intro []string
	// StartHost is where the block's first lines are pasted when that is
	// a node: the prose's "on HOST:" before it, or the host a block
	// before it ended on (its last lines pasted there, or "# on the
	// node:" as its last line).
	StartHost string
	// Rollback marks the blocks of a step's "Rollback, only if ...:"
	// section (that prose and every block after it in the step): the
	// reader pastes them only when the step failed. The step's "Roll back
	// if TRIGGER: ..." line under its heading only declares the trigger.
	Rollback bool
}

var introHost = regexp.MustCompile(`^on (.+?):$`)

// startHosts sets each block's StartHost.
func startHosts(st *Step) {
	// carried is the host the last block ended on; alt the host of the
	// alternatives of one choice, which the reader pastes on one node.
	carried, alt := "", ""
	for _, b := range st.Blocks {
		b.StartHost = ""
		for _, l := range b.Intro {
			if m := introHost.FindStringSubmatch(l); m != nil {
				b.StartHost = m[1]
			}
		}
		if b.Condition() == "" {
			alt = ""
		}
		if b.StartHost == "" && b.Condition() != "" {
			b.StartHost = carried
			if b.StartHost == "" {
				b.StartHost = alt
			}
		}
		if b.Condition() != "" {
			alt = b.StartHost
		}
		segs := b.Segments()
		if n := len(segs); n > 0 && segs[n-1].Host != "" {
			carried = segs[n-1].Host
		} else if b.Condition() == "" {
			carried = ""
		}
	}
}

// Condition is the block's "Only if CONDITION:" line, "" for a block
// every reader runs.
func (b *Block) Condition() string {
	for _, l := range b.Intro {
		if rest, ok := strings.CutPrefix(l, "Only if "); ok {
			cond, _, _ := strings.Cut(rest, ":")
			return cond
		}
	}
	return ""
}

// ID names a block in reports: step number, phase and name, and its
// index when the step has several.
func (b *Block) ID() string {
	id := fmt.Sprintf("step %d %s %s", b.Step.Number, b.Step.Phase, b.Step.Name)
	if len(b.Step.Blocks) > 1 {
		id += fmt.Sprintf(" block %d", b.Index+1)
	}
	return id
}

// Text is the block as pasted.
func (b *Block) Text() string { return strings.Join(b.Lines, "\n") + "\n" }

// Segment is a run of a block's lines pasted in one place.
type Segment struct {
	// Host is "" for the workstation, else the marker's host: a node
	// name, "$NODE", "each node of $NODES", ...
	Host string
	// Marker is the "# on ..." line that opened it.
	Marker string
	// First is the index in the block of its first line.
	First int
	Lines []string
}

var (
	stepHead = regexp.MustCompile(`^(\d+)\. \*\*([a-z-]+) ([^*]+)\*\*`)
	hostMark = regexp.MustCompile(`^# on (.+?):`)
	hereMark = regexp.MustCompile(`^# here:?\s*$`)
)

// ParseRunbook splits a Markdown runbook into its steps and blocks.
func ParseRunbook(md string) ([]*Step, error) {
	var steps []*Step
	var cur *Step
	var block *Block
	var prose []string
	for i, raw := range strings.Split(md, "\n") {
		line := strings.TrimPrefix(raw, "   ")
		if block != nil {
			if strings.TrimSpace(line) == "```" {
				block = nil
				continue
			}
			block.Lines = append(block.Lines, line)
			continue
		}
		if m := stepHead.FindStringSubmatch(raw); m != nil {
			n, _ := strconv.Atoi(m[1])
			cur = &Step{Number: n, Phase: m[2], Name: m[3], Head: raw}
			steps = append(steps, cur)
			prose = nil
			continue
		}
		if strings.TrimSpace(line) == "```sh" {
			if cur == nil {
				return nil, fmt.Errorf("line %d: a sh block before the first step", i+1)
			}
			block = &Block{Step: cur, Index: len(cur.Blocks), Intro: prose}
			if n := len(cur.Blocks); n > 0 && cur.Blocks[n-1].Rollback {
				block.Rollback = true
			}
			for _, p := range prose {
				if strings.HasPrefix(p, "Rollback, only if ") {
					block.Rollback = true
				}
			}
			cur.Blocks = append(cur.Blocks, block)
			prose = nil
			continue
		}
		if t := strings.TrimSpace(line); t != "" && cur != nil {
			prose = append(prose, t)
		}
	}
	if block != nil {
		return nil, fmt.Errorf("step %d: an sh block is not closed", block.Step.Number)
	}
	for _, st := range steps {
		startHosts(st)
	}
	return steps, nil
}

// Segments splits a block where the reader moves between the workstation
// and a host.
func (b *Block) Segments() []Segment {
	var out []Segment
	cur := Segment{}
	loopHost := "" // the last per-node host of the block ($NODE, each node of $NODES, ...)
	if strings.Contains(b.StartHost, "$") {
		loopHost = b.StartHost
	}
	if b.StartHost != "" {
		cur = Segment{Host: b.StartHost, Marker: "on " + b.StartHost + ":"}
	}
	flush := func(next Segment) {
		if len(cur.Lines) > 0 || cur.Host != "" {
			out = append(out, cur)
		}
		cur = next
	}
	for i, l := range b.Lines {
		t := strings.TrimSpace(l)
		if m := hostMark.FindStringSubmatch(t); m != nil && !strings.HasPrefix(m[1], "the management cluster") {
			host := m[1]
			if j := strings.Index(host, ", "); j >= 0 {
				host = host[:j]
			}
			if host == "the node" && loopHost != "" {
				// "the node" of a block that went to each node of a
				// batch or unit is that node, not the last $NODE.
				host = loopHost
			}
			if strings.Contains(host, "$") {
				loopHost = host
			}
			flush(Segment{Host: host, Marker: t, First: i + 1})
			continue
		}
		if hereMark.MatchString(t) {
			flush(Segment{First: i + 1})
			continue
		}
		if len(cur.Lines) == 0 {
			cur.First = i
		}
		cur.Lines = append(cur.Lines, l)
	}
	flush(Segment{})
	return out
}

// Loop is a variable a block asks the reader to set once per node, unit
// or batch (NODE='<node-name>', UNIT='<clique>', NODES='<node-name>
// <node-name>'): the reader pastes the block once per value.
type Loop struct {
	Var string
	// Line is the index of the assignment in the block.
	Line int
	// Kind is "node", "nodes" (a batch of Size) or "unit".
	Kind string
	Size int
}

// loopAssign matches the loop variables; other VAR='<...>' assignments
// are placeholders the reader fills once.
var loopAssign = regexp.MustCompile(`^(NODE|NODES|UNIT)='((?:<[a-z0-9.-]+> ?)+)'`)

// Loops returns the block's loop variables.
func (b *Block) Loops() []Loop {
	var out []Loop
	for i, l := range b.Lines {
		m := loopAssign.FindStringSubmatch(strings.TrimSpace(l))
		if m == nil {
			continue
		}
		phs := strings.Fields(m[2])
		lp := Loop{Var: m[1], Line: i, Size: len(phs)}
		switch {
		case phs[0] == "<node-name>" && len(phs) == 1:
			lp.Kind = "node"
		case phs[0] == "<node-name>":
			lp.Kind = "nodes"
		default:
			lp.Kind = "unit"
		}
		out = append(out, lp)
	}
	return out
}

var placeholder = regexp.MustCompile(`<[a-z0-9][a-z0-9.-]*>`)

// Placeholders lists the distinct placeholders of a text.
func Placeholders(s string) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range placeholder.FindAllString(s, -1) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}
