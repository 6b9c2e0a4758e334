package localcluster

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Ports are picked, not bound: a component binds its own. Between the
// pick and the bind another process can take the port, and the likeliest
// taker is an outgoing connection, which the kernel gives a port from the
// ephemeral range (net.ipv4.ip_local_port_range). So ports come from outside
// that range, at random, each checked free by a bind of our own, and never
// one this process handed out and has not released: two control planes in
// one process never share a port, and two in different processes rarely
// pick the same one. A component that still finds its port taken is
// restarted on fresh ones (Cluster.startComponent).

// portSpan is the range ports are picked from.
type portSpan struct{ lo, hi int }

var (
	portMu  sync.Mutex
	inUse   = map[int]bool{}
	spanOne sync.Once
	span    portSpan
)

// pickSpan returns the widest range of unprivileged ports outside the
// ephemeral range, or a zero span when there is none worth using (ports
// then come from the kernel's own choice of a free one).
func pickSpan() portSpan {
	eLo, eHi := 32768, 60999 // Linux's default
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			lo, err1 := strconv.Atoi(f[0])
			hi, err2 := strconv.Atoi(f[1])
			if err1 == nil && err2 == nil && lo <= hi {
				eLo, eHi = lo, hi
			}
		}
	}
	below := portSpan{10000, eLo - 1}
	above := portSpan{eHi + 1, 65535}
	best := below
	if above.hi-above.lo > below.hi-below.lo {
		best = above
	}
	if best.hi-best.lo < 1000 {
		return portSpan{}
	}
	return best
}

// reservePort returns a loopback TCP port that is free now and not held by
// this process, and marks it held until releasePorts.
func reservePort() (int, error) {
	spanOne.Do(func() { span = pickSpan() })
	portMu.Lock()
	defer portMu.Unlock()
	for range 200 {
		var p int
		if span.hi > 0 {
			p = span.lo + rand.IntN(span.hi-span.lo+1)
		} else {
			var err error
			if p, err = kernelPort(); err != nil {
				return 0, err
			}
		}
		if inUse[p] || !portFree(p) {
			continue
		}
		inUse[p] = true
		return p, nil
	}
	return 0, fmt.Errorf("no free loopback port found in %d-%d", span.lo, span.hi)
}

// holdPort marks p held by this process (a port asked for in Options.Ports).
func holdPort(p int) {
	portMu.Lock()
	defer portMu.Unlock()
	inUse[p] = true
}

func releasePorts(ports ...int) {
	portMu.Lock()
	defer portMu.Unlock()
	for _, p := range ports {
		delete(inUse, p)
	}
}

func kernelPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// portFree reports whether a listener could bind 127.0.0.1:p now.
func portFree(p int) bool {
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// WaitPortsFree waits until every port can be bound on 127.0.0.1 again, and
// returns an error naming the ones still taken after timeout.
func WaitPortsFree(ports []int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var busy []string
		for _, p := range ports {
			if p > 0 && !portFree(p) {
				busy = append(busy, strconv.Itoa(p))
			}
		}
		if len(busy) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("127.0.0.1 port(s) %s still in use %s after the control plane stopped", strings.Join(busy, ", "), timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
