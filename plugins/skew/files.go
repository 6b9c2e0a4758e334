package skew

import "os"

// readFile reads a local file.
func readFile(path string) ([]byte, error) { return os.ReadFile(path) }
