package nccl

import "testing"

// FuzzParseFlags: --tolerance, --min-bytes and friends, --fabric and
// --launcher never panic on any text, and what ParseBytes accepts is not
// negative.
func FuzzParseFlags(f *testing.F) {
	for _, s := range []string{"5%", "0.05", "8G", "512M", "1GiB", "1e3", "-1", "99999999999999999999G", "ib", "roce", "mpi", "torchrun", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if n, err := ParseBytes(s); err == nil && n < 0 {
			t.Fatalf("ParseBytes(%q) = %d", s, n)
		}
		_, _ = ParseTolerance(s)
		_, _ = ParseFabric(s)
		_, _ = ParseLauncher(s)
	})
}
