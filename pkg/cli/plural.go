package cli

import "fmt"

// Plural is "1 violation", "2 violations": a count and a noun that takes
// an s, in every plugin's summaries.
func Plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// PluralOf is Plural for a noun whose plural is not the noun and an s:
// PluralOf(n, "network policy", "network policies").
func PluralOf(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// Agree is the form of a verb that agrees with a count: one when n is 1,
// else many ("1 namespace pins", "2 namespaces pin").
func Agree(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
