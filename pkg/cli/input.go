package cli

// InputErr marks err as a local input that could not be read (exit 3, as
// a cluster that could not be evaluated: either way the answer would be
// incomplete): a file or directory named by a flag that does not exist,
// cannot be read, or holds nothing the command can read. The error names
// the flag and the path.
func InputErr(err error) error {
	if err == nil {
		return nil
	}
	return &ExitError{Code: ExitUnavailable, Err: err}
}
