// Package cli is the command-line plumbing shared by every plugin of the
// suite: kubeconfig flags, output formats and printers, the colour decision,
// progress lines, exit codes, error formatting, multi-context fan-out and the
// ClientGetter that plugins use to reach a cluster.
//
// It is the only package besides the mains in cmd/ that knows about
// terminals. Domain packages under pkg/ never import it for printing: they
// return typed results that plugins render with the helpers here.
package cli
