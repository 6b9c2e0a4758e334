package health

import (
	"strings"
	"testing"
)

func member(name, id, leader string, index uint64) EtcdMember {
	return EtcdMember{ID: id, Name: name, Started: true, Reachable: true, Leader: leader, RaftIndex: index}
}

func TestEtcdProblems(t *testing.T) {
	healthy := func() *EtcdQuorum {
		return &EtcdQuorum{Leaders: []string{"a"}, Members: []EtcdMember{
			member("m1", "a", "a", 5000), member("m2", "b", "a", 4990), member("m3", "c", "a", 5000)}}
	}
	cases := []struct {
		name  string
		edit  func(q *EtcdQuorum)
		want  []string
		count int
	}{
		{name: "healthy", edit: func(*EtcdQuorum) {}},
		{name: "even", edit: func(q *EtcdQuorum) { q.Members = q.Members[:2] }, want: []string{"2 voting members"}},
		{name: "learner not counted", edit: func(q *EtcdQuorum) {
			q.Members = append(q.Members, EtcdMember{ID: "d", Name: "m4", Started: true, Reachable: true, Leader: "a", RaftIndex: 5000, Learner: true})
		}},
		{name: "unstarted", edit: func(q *EtcdQuorum) {
			q.Members[2] = EtcdMember{ID: "c", PeerURLs: []string{"https://10.0.0.3:2380"}, Error: "not started"}
		}, want: []string{"member c (https://10.0.0.3:2380) has not started"}},
		{name: "unreachable", edit: func(q *EtcdQuorum) {
			q.Members[1] = EtcdMember{ID: "b", Name: "m2", Started: true, Error: "context deadline exceeded"}
		}, want: []string{"member m2 (b) is not reachable: context deadline exceeded"}},
		{name: "lag over the threshold", edit: func(q *EtcdQuorum) { q.Members[1].RaftIndex, q.Members[1].Lag = 3000, 2000 },
			want: []string{"member m2 (b) is 2000 raft entries behind the leader"}},
		{name: "lag at the threshold", edit: func(q *EtcdQuorum) { q.Members[1].Lag = 1000 }},
		{name: "two leaders", edit: func(q *EtcdQuorum) { q.Members[2].Leader = "c"; q.Leaders = []string{"a", "c"} },
			want: []string{"members name 2 different leaders (a, c)"}},
		{name: "no leader", edit: func(q *EtcdQuorum) {
			for i := range q.Members {
				q.Members[i].Leader = ""
			}
			q.Leaders = nil
		}, want: []string{"member m1 (a) knows no leader", "no reachable member names a leader"}},
		{name: "alarms", edit: func(q *EtcdQuorum) {
			q.Alarms = []EtcdAlarm{{Member: "a", Alarm: "NOSPACE"}, {Member: "b", Alarm: "CORRUPT"}}
		}, want: []string{"alarm NOSPACE raised on member a", "alarm CORRUPT raised on member b"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := healthy()
			c.edit(q)
			got := q.Problems(DefaultEtcdMaxLag)
			if len(c.want) == 0 && len(got) > 0 {
				t.Fatalf("problems %q, want none", got)
			}
			all := strings.Join(got, "\n")
			for _, w := range c.want {
				if !strings.Contains(all, w) {
					t.Errorf("problems %q lack %q", got, w)
				}
			}
		})
	}
}
