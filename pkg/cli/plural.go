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
