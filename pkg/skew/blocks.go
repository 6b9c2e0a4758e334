package skew

import "strings"

// Block is one pasted unit of a step's commands: its lines run top to
// bottom in one shell, and a line whose failure must stop what follows is
// chained to it with &&. A block with Choice set is one alternative of a
// choice the plan cannot make (the node's OS family, who manages an EKS
// add-on): of the blocks that share a Choice the reader runs the one whose
// When holds, never two, so no block carries two alternatives.
type Block struct {
	// Choice names what the alternatives of one group depend on; "" for
	// a block every reader runs.
	Choice string `json:"choice,omitempty"`
	// When says how to tell that this alternative is the one to run.
	When string `json:"when,omitempty"`
	// Commands are its lines.
	Commands []string `json:"commands"`
}

// blocks builds a step's blocks.
type blocks []Block

// add appends lines to the last block when it is not an alternative, else
// starts a block.
func (b *blocks) add(lines ...string) {
	if len(lines) == 0 {
		return
	}
	if n := len(*b); n > 0 && (*b)[n-1].Choice == "" {
		(*b)[n-1].Commands = append((*b)[n-1].Commands, lines...)
		return
	}
	*b = append(*b, Block{Commands: append([]string(nil), lines...)})
}

// alt appends one alternative of choice.
func (b *blocks) alt(choice, when string, lines ...string) {
	*b = append(*b, Block{Choice: choice, When: when, Commands: append([]string(nil), lines...)})
}

// cut ends the current block, so that the next lines start one of their
// own: a block the reader pastes apart (once per node, say).
func (b *blocks) cut() {
	if n := len(*b); n > 0 && (*b)[n-1].Choice == "" && len((*b)[n-1].Commands) > 0 {
		*b = append(*b, Block{})
	}
}

// join appends o, merging its leading lines into the current block.
func (b *blocks) join(o blocks) {
	for _, x := range o {
		if x.Choice == "" {
			b.add(x.Commands...)
			if len(o) > 1 {
				b.cut()
			}
			continue
		}
		*b = append(*b, x)
	}
}

// done drops empty blocks.
func (b blocks) done() []Block {
	var out []Block
	for _, x := range b {
		if len(x.Commands) > 0 {
			out = append(out, x)
		}
	}
	return out
}

// FlattenBlocks writes blocks as one list of lines for display (-o wide,
// a step's commands in JSON): each alternative is introduced by a comment
// that names its choice and when it applies. Paste the blocks, not this
// list, where a step has alternatives.
func FlattenBlocks(bs []Block) []string {
	var out []string
	for _, x := range bs {
		if x.Choice != "" {
			out = append(out, "# "+x.Choice+", only if "+x.When+":")
		}
		out = append(out, x.Commands...)
	}
	return out
}

// chain joins commands with && and a line continuation, so that a failed
// one stops the rest when the block is pasted. A trailing "   # ..."
// comment of any but the last command would swallow the && after it: it
// moves to a comment line of its own before the chain.
func chain(cmds ...string) []string {
	var notes, out []string
	for i, c := range cmds {
		if i < len(cmds)-1 {
			if j := strings.Index(c, "   # "); j >= 0 {
				notes = append(notes, "# "+strings.TrimSpace(c[j+5:]))
				c = strings.TrimRight(c[:j], " ")
			}
			c += " && \\"
		}
		out = append(out, c)
	}
	return append(notes, out...)
}
