package cli

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
)

// NoNodes is the usage error of a command that selects nodes and was given
// none. also names further ways to choose them ("--all-nodes").
func NoNodes(also ...string) error {
	ways := append([]string{"name them (NODE...)", "select them with -l SELECTOR"}, also...)
	return Usagef("no nodes given: %s", orList(ways))
}

// ParseSelector checks a -l/--selector value, returning the usage error
// every plugin gives for a bad one.
func ParseSelector(selector string) error {
	if _, err := labels.Parse(selector); err != nil {
		return Usagef("invalid label selector -l %q: %v", selector, err)
	}
	return nil
}

// NoNodesMatch is what a command says when its selector matches no node.
func NoNodesMatch(selector string) string {
	return fmt.Sprintf("no nodes match -l %q", selector)
}

// orList joins "a", "b" and "c" as "a, b or c".
func orList(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}
