package preflight

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/health"
	"github.com/gpufleet/upgrade-plugins/pkg/skew"
)

func (r *Runner) etcdMaxLag() uint64 {
	if r.Health.EtcdMaxLag > 0 {
		return r.Health.EtcdMaxLag
	}
	return health.DefaultEtcdMaxLag
}

// etcdClientCerts are the CA and a client certificate each self-managed
// distribution keeps for etcd on its control-plane nodes. None of them is
// least privilege: these etcds run without etcd's own authentication, so
// any client certificate their CA signed reads and writes every key
// (etcd.io/docs/v3.5/op-guide/security, "client-cert-auth": with it and
// auth off, a valid certificate is all a client needs). The gate only
// calls MemberList, Status and AlarmList; run it on a control-plane node
// rather than copying these files to a laptop.
//   - kubeadm: etcd/ca.crt and etcd/healthcheck-client.{crt,key}, the
//     certificate kubeadm issues for etcd's own liveness probe
//     (https://kubernetes.io/docs/setup/best-practices/certificates/,
//     "kube-etcd-healthcheck-client"); Cluster API's KubeadmControlPlane
//     lays out the same files on its machines.
//   - k3s with embedded etcd: server/tls/etcd/server-ca.crt and
//     client.{crt,key} under /var/lib/rancher/k3s
//     (https://docs.k3s.io/cli/certificate, "etcd" client certificates).
//   - RKE2: server/tls/etcd/server-ca.crt and server-client.{crt,key}
//     under /var/lib/rancher/rke2 (https://docs.rke2.io/security/certificates).
var etcdClientCerts = map[skew.Provider][3]string{
	skew.ProviderKubeadm: {"/etc/kubernetes/pki/etcd/ca.crt", "/etc/kubernetes/pki/etcd/healthcheck-client.crt", "/etc/kubernetes/pki/etcd/healthcheck-client.key"},
	skew.ProviderCAPI:    {"/etc/kubernetes/pki/etcd/ca.crt", "/etc/kubernetes/pki/etcd/healthcheck-client.crt", "/etc/kubernetes/pki/etcd/healthcheck-client.key"},
	skew.ProviderK3s:     {"/var/lib/rancher/k3s/server/tls/etcd/server-ca.crt", "/var/lib/rancher/k3s/server/tls/etcd/client.crt", "/var/lib/rancher/k3s/server/tls/etcd/client.key"},
	skew.ProviderRKE2:    {"/var/lib/rancher/rke2/server/tls/etcd/server-ca.crt", "/var/lib/rancher/rke2/server/tls/etcd/server-client.crt", "/var/lib/rancher/rke2/server/tls/etcd/server-client.key"},
}

// etcdQuorumCommand is the command that shows what the gate read.
func etcdQuorumCommand(acc *health.EtcdAccess) string {
	flags := "--endpoints=<etcd-endpoint>"
	if acc != nil && len(acc.Endpoints) > 0 {
		flags = "--endpoints=" + strings.Join(acc.Endpoints, ",")
		for _, f := range [][2]string{{"cacert", acc.CAFile}, {"cert", acc.CertFile}, {"key", acc.KeyFile}} {
			if f[1] != "" {
				flags += fmt.Sprintf(" --%s=%s", f[0], f[1])
			}
		}
	}
	return fmt.Sprintf("etcdctl %s member list -w table && etcdctl %s endpoint status --cluster -w table && etcdctl %s alarm list", flags, flags, flags)
}

// etcdServers reads --etcd-servers from the kube-apiserver pods of
// kube-system (kubeadm, Cluster API and RKE2 run it as a static pod).
func etcdServers(pods []*corev1.Pod) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range pods {
		if p.Labels["component"] != "kube-apiserver" {
			continue
		}
		for _, c := range p.Spec.Containers {
			for _, a := range append(append([]string{}, c.Command...), c.Args...) {
				v, ok := strings.CutPrefix(a, "--etcd-servers=")
				if !ok {
					continue
				}
				for _, ep := range strings.Split(v, ",") {
					if ep = strings.TrimSpace(ep); ep != "" && !seen[ep] {
						seen[ep] = true
						out = append(out, ep)
					}
				}
			}
		}
	}
	return out
}

// etcdQuorumGate reads etcd's members, their raft state and its alarms with
// the etcd client (pkg/health.ReadEtcdQuorum) and fails on any problem it
// finds. Where the provider runs etcd (EKS, GKE, AKS) nothing of this is
// exposed: UNKNOWN, with the reason. It returns what it read and the
// endpoints it used.
func (r *Runner) etcdQuorumGate(ctx context.Context, inv func() *skew.Inventory) (Gate, *health.EtcdQuorum, *health.EtcdAccess) {
	acc := r.Health.Etcd
	var prov skew.Provider = skew.ProviderUnknown
	if len(acc.Endpoints) == 0 {
		if i := inv(); i != nil {
			prov = skew.DetectProvider(*i).Provider
		}
		switch prov {
		case skew.ProviderEKS, skew.ProviderGKE, skew.ProviderAKS:
			return Gate{Status: StatusUnknown, Command: "kubectl get --raw '/readyz/etcd?verbose'",
				Message: fmt.Sprintf("%s runs etcd for you and exposes neither its members, their raft indexes nor its alarms; the etcd gate reads what it does expose (/readyz/etcd)", prov.Title())}, nil, nil
		}
		pods, ok := r.systemPods(ctx)
		if ok {
			acc.Endpoints = etcdServers(pods)
		}
		if len(acc.Endpoints) == 0 {
			return Gate{Status: StatusUnknown, Command: etcdFlagsHint(prov, "<https://CONTROL-PLANE-IP:2379>"), Message: noEtcdEndpoint(prov, ok)}, nil, nil
		}
	}
	q, err := health.ReadEtcdQuorum(ctx, acc)
	if err != nil {
		g := Gate{Status: StatusUnknown, Message: err.Error(), Command: etcdFlagsHint(prov, strings.Join(acc.Endpoints, ","))}
		return g, nil, &acc
	}
	maxLag := r.etcdMaxLag()
	var ev []string
	for _, m := range q.Members {
		name, leader := m.Name, m.Leader
		if name == "" {
			name = "(unstarted)"
		}
		if leader == "" {
			leader = "none"
		}
		line := fmt.Sprintf("member %s (%s)", name, m.ID)
		switch {
		case m.Reachable:
			line += fmt.Sprintf(": leader %s, raft index %d, term %d, %d behind", leader, m.RaftIndex, m.RaftTerm, m.Lag)
			if m.Learner {
				line += ", learner"
			}
		default:
			line += ": " + m.Error
		}
		ev = append(ev, line)
	}
	if q.AlarmsErr != "" {
		ev = append(ev, "alarms not read: "+q.AlarmsErr)
	}
	cmd := etcdQuorumCommand(&acc)
	if probs := q.Problems(maxLag); len(probs) > 0 {
		return Gate{Status: StatusFail, Message: fmt.Sprintf("etcd quorum unhealthy: %s", probs[0]) + more(len(probs)-1), Evidence: append(probs, ev...), Command: cmd}, q, &acc
	}
	if q.AlarmsErr != "" {
		return Gate{Status: StatusUnknown, Message: "etcd members healthy; alarms not read: " + q.AlarmsErr, Evidence: ev, Command: cmd}, q, &acc
	}
	return Gate{Status: StatusPass, Evidence: ev, Command: cmd,
		Message: fmt.Sprintf("%s started and reachable, one leader (%s), none more than %s behind, no alarm", cli.Plural(len(q.Members), "etcd member"), q.Leaders[0], cli.PluralOf(int(maxLag), "entry", "entries"))}, q, &acc
}

// noEtcdEndpoint says why no etcd endpoint was found in the kube-apiserver
// pods of kube-system, for the provider detected (EKS, GKE and AKS never
// get here), and what to do.
func noEtcdEndpoint(prov skew.Provider, podsRead bool) string {
	const pass = "; pass --etcd-endpoints"
	switch {
	case !podsRead:
		return "no etcd endpoint: the pods of kube-system could not be listed, so no kube-apiserver's --etcd-servers was read" + pass
	case prov == skew.ProviderK3s:
		// https://docs.k3s.io/datastore: SQLite through kine by default,
		// embedded etcd with --cluster-init, an external datastore
		// (etcd, MySQL, PostgreSQL) with --datastore-endpoint.
		return "no etcd endpoint: k3s runs the apiserver inside its server process, not as a pod; with embedded etcd (--cluster-init) pass --etcd-endpoints https://SERVER-IP:2379, with an external etcd (--datastore-endpoint) its endpoints; with its default SQLite datastore there is no etcd and this gate stays UNKNOWN"
	case prov == skew.ProviderCAPI:
		return "no etcd endpoint: no kube-apiserver pod in kube-system names --etcd-servers here (a Cluster API management cluster): point --kubeconfig at the workload cluster (clusterctl get kubeconfig NAME) and run on one of its control-plane nodes" + pass
	case prov == skew.ProviderKubeadm || prov == skew.ProviderRKE2:
		return fmt.Sprintf("no etcd endpoint: no kube-apiserver pod in kube-system names --etcd-servers, where %s runs it as a static pod", prov.Title()) + pass
	}
	return "no etcd endpoint: no kube-apiserver pod in kube-system names --etcd-servers; where a provider runs the control plane (a managed service other than EKS, GKE and AKS, or a hosted control plane) etcd is not reachable and this gate stays UNKNOWN (the etcd gate reads /readyz/etcd); where the apiserver runs outside a pod (a systemd unit)" + pass
}

func more(n int) string {
	if n <= 0 {
		return ""
	}
	return fmt.Sprintf(" (and %d more)", n)
}

// etcdFlagsHint is the command line that gives the gate etcd's endpoints and
// the client certificate of where etcd runs.
func etcdFlagsHint(prov skew.Provider, endpoints string) string {
	c, ok := etcdClientCerts[prov]
	if !ok {
		c = [3]string{"<etcd-ca.crt>", "<etcd-client.crt>", "<etcd-client.key>"}
	}
	return fmt.Sprintf("kubectl skew preflight --etcd-quorum --etcd-endpoints=%s --etcd-cacert=%s --etcd-cert=%s --etcd-key=%s", endpoints, c[0], c[1], c[2])
}
