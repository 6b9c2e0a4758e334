// Package readme holds the test that runs every example of the six
// plugins in README.md (readme_test.go) through the plugins' own command
// trees; it has no code of its own.
package readme
