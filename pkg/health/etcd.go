package health

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// DefaultEtcdMaxLag is how many raft entries a member may be behind the
// leader's committed index before the quorum check fails: a follower that
// far behind leaves quorum standing on paper while replication is not
// healthy (this tool's policy, not an etcd rule; --etcd-max-lag changes it).
const DefaultEtcdMaxLag = 1000

// EtcdAccess says how to reach etcd's client port: the endpoints and, for a
// TLS etcd (kubeadm, k3s, RKE2 and Cluster API all serve TLS with client
// certificates), the CA and a client certificate signed by etcd's CA.
type EtcdAccess struct {
	Endpoints []string `json:"endpoints,omitempty"`
	CAFile    string   `json:"caFile,omitempty"`
	CertFile  string   `json:"certFile,omitempty"`
	KeyFile   string   `json:"keyFile,omitempty"`
	// Timeout bounds each request (5 s when 0).
	Timeout time.Duration `json:"-"`
}

func (a EtcdAccess) timeout() time.Duration {
	if a.Timeout > 0 {
		return a.Timeout
	}
	return 5 * time.Second
}

// EtcdMember is one member of the cluster as the member list names it and as
// it answered its own status.
type EtcdMember struct {
	// ID is the member ID in hex, as etcdctl prints it.
	ID         string   `json:"id"`
	Name       string   `json:"name"`
	PeerURLs   []string `json:"peerURLs,omitempty"`
	ClientURLs []string `json:"clientURLs,omitempty"`
	Learner    bool     `json:"learner,omitempty"`
	// Started is false for a member added to the cluster that has not
	// joined yet (the member list gives it no name and no client URLs).
	Started bool `json:"started"`
	// Reachable: the member answered its status on a client URL.
	Reachable bool `json:"reachable"`
	// Error is why it did not.
	Error string `json:"error,omitempty"`
	// Leader is the member ID (hex) this member believes leads; "" for none.
	Leader string `json:"leader,omitempty"`
	// RaftIndex is the member's committed raft index, RaftTerm its term.
	RaftIndex uint64 `json:"raftIndex,omitempty"`
	RaftTerm  uint64 `json:"raftTerm,omitempty"`
	// Lag is how many entries its committed index is behind the leader's.
	Lag     uint64 `json:"lag,omitempty"`
	Version string `json:"version,omitempty"`
	DBSize  int64  `json:"dbSize,omitempty"`
}

// EtcdAlarm is one raised alarm.
type EtcdAlarm struct {
	Member string `json:"member"`
	Alarm  string `json:"alarm"`
}

// EtcdQuorum is what ReadEtcdQuorum found.
type EtcdQuorum struct {
	Members []EtcdMember `json:"members"`
	// Leaders are the distinct leaders the reachable members name.
	Leaders []string    `json:"leaders,omitempty"`
	Alarms  []EtcdAlarm `json:"alarms,omitempty"`
	// AlarmsErr is why the alarms could not be read.
	AlarmsErr string `json:"alarmsError,omitempty"`
}

func hexID(id uint64) string { return fmt.Sprintf("%x", id) }

// ReadEtcdQuorum lists the members (MemberList), asks each started member
// for its status on its own client URLs (Maintenance.Status: leader, raft
// index and term) and lists the alarms (Maintenance.AlarmList). All three
// are read-only RPCs. An error means the member list itself could not be
// read.
func ReadEtcdQuorum(ctx context.Context, a EtcdAccess) (*EtcdQuorum, error) {
	if len(a.Endpoints) == 0 {
		return nil, errors.New("no etcd endpoints")
	}
	var tlsCfg *tls.Config
	if a.CAFile != "" || a.CertFile != "" || a.KeyFile != "" {
		info := transport.TLSInfo{TrustedCAFile: a.CAFile, CertFile: a.CertFile, KeyFile: a.KeyFile}
		var err error
		if tlsCfg, err = info.ClientConfig(); err != nil {
			return nil, fmt.Errorf("etcd client certificates: %w", err)
		}
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: a.Endpoints, TLS: tlsCfg, DialTimeout: a.timeout(), Logger: zap.NewNop(), Context: ctx})
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	defer cli.Close()
	lctx, cancel := context.WithTimeout(ctx, a.timeout())
	defer cancel()
	// Serializable: answered by whichever member the client reaches, so a
	// cluster without quorum still lists its members.
	ml, err := cli.MemberList(lctx, clientv3.WithSerializable())
	if err != nil {
		return nil, fmt.Errorf("etcd member list at %s: %w", strings.Join(a.Endpoints, ","), err)
	}
	q := &EtcdQuorum{Members: make([]EtcdMember, len(ml.Members))}
	var wg sync.WaitGroup
	for i, m := range ml.Members {
		em := EtcdMember{ID: hexID(m.ID), Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs, Learner: m.IsLearner,
			Started: m.Name != "" && len(m.ClientURLs) > 0}
		q.Members[i] = em
		if !em.Started {
			q.Members[i].Error = "not started: the member list gives it no name or client URL"
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := memberStatus(ctx, cli, m.ClientURLs, a.timeout())
			if err != nil {
				q.Members[i].Error = err.Error()
				return
			}
			q.Members[i].Reachable = true
			if st.Leader != 0 {
				q.Members[i].Leader = hexID(st.Leader)
			}
			q.Members[i].RaftIndex, q.Members[i].RaftTerm = st.RaftIndex, st.RaftTerm
			q.Members[i].Version, q.Members[i].DBSize = st.Version, st.DbSize
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		actx, cancel := context.WithTimeout(ctx, a.timeout())
		defer cancel()
		al, err := cli.AlarmList(actx)
		if err != nil {
			q.AlarmsErr = err.Error()
			return
		}
		for _, am := range al.Alarms {
			if am.Alarm == pb.AlarmType_NONE {
				continue
			}
			q.Alarms = append(q.Alarms, EtcdAlarm{Member: hexID(am.MemberID), Alarm: am.Alarm.String()})
		}
	}()
	wg.Wait()
	sort.Slice(q.Members, func(i, j int) bool { return q.Members[i].Name+q.Members[i].ID < q.Members[j].Name+q.Members[j].ID })
	leaders := map[string]bool{}
	var leaderIndex uint64
	for _, m := range q.Members {
		if m.Reachable && m.Leader != "" {
			leaders[m.Leader] = true
		}
	}
	for l := range leaders {
		q.Leaders = append(q.Leaders, l)
	}
	sort.Strings(q.Leaders)
	if len(q.Leaders) == 1 {
		for _, m := range q.Members {
			if m.ID == q.Leaders[0] && m.Reachable {
				leaderIndex = m.RaftIndex
			}
		}
	}
	for i := range q.Members {
		if m := &q.Members[i]; m.Reachable && leaderIndex > m.RaftIndex {
			m.Lag = leaderIndex - m.RaftIndex
		}
	}
	return q, nil
}

// memberStatus asks a member for its status on the first of its client
// URLs that answers.
func memberStatus(ctx context.Context, cli *clientv3.Client, urls []string, timeout time.Duration) (*clientv3.StatusResponse, error) {
	var errs []string
	for _, u := range urls {
		sctx, cancel := context.WithTimeout(ctx, timeout)
		st, err := cli.Status(sctx, u)
		cancel()
		if err == nil {
			return st, nil
		}
		errs = append(errs, fmt.Sprintf("%s: %v", u, err))
	}
	return nil, errors.New(strings.Join(errs, "; "))
}

// Problems judges the quorum: an even number of voting members, a member not
// started or not reachable, not exactly one leader (or a member that knows
// none), a member more than maxLag entries behind the leader, and any alarm
// (NOSPACE, CORRUPT). Each problem is one line; none means healthy.
func (q *EtcdQuorum) Problems(maxLag uint64) []string {
	var out []string
	voters := 0
	for _, m := range q.Members {
		if !m.Learner {
			voters++
		}
	}
	if voters%2 == 0 {
		out = append(out, fmt.Sprintf("%d voting members: an even count tolerates no more failures than one member fewer; run an odd number", voters))
	}
	for _, m := range q.Members {
		name := m.Name
		if name == "" {
			name = "(unstarted)"
		}
		switch {
		case !m.Started:
			out = append(out, fmt.Sprintf("member %s (%s) has not started: %s", m.ID, strings.Join(m.PeerURLs, ","), m.Error))
		case !m.Reachable:
			out = append(out, fmt.Sprintf("member %s (%s) is not reachable: %s", name, m.ID, m.Error))
		case m.Leader == "":
			out = append(out, fmt.Sprintf("member %s (%s) knows no leader", name, m.ID))
		}
		if m.Reachable && m.Lag > maxLag {
			out = append(out, fmt.Sprintf("member %s (%s) is %d raft entries behind the leader (committed index %d), more than %d", name, m.ID, m.Lag, m.RaftIndex, maxLag))
		}
	}
	switch len(q.Leaders) {
	case 0:
		out = append(out, "no reachable member names a leader")
	case 1:
		found := false
		for _, m := range q.Members {
			if m.ID == q.Leaders[0] {
				found = true
				if !m.Reachable {
					out = append(out, fmt.Sprintf("the leader %s is not reachable, so no member's lag can be measured", m.ID))
				}
			}
		}
		if !found {
			out = append(out, fmt.Sprintf("the leader %s the members name is not in the member list", q.Leaders[0]))
		}
	default:
		out = append(out, fmt.Sprintf("members name %d different leaders (%s)", len(q.Leaders), strings.Join(q.Leaders, ", ")))
	}
	for _, a := range q.Alarms {
		out = append(out, fmt.Sprintf("alarm %s raised on member %s", a.Alarm, a.Member))
	}
	return out
}
