// Package runbooke2e runs kubectl skew plan --runbook the way an on-call
// engineer pastes it, for every provider (kubeadm, EKS, GKE, AKS, Cluster
// API, k3s, RKE2) on five inventories each (skip-level jumps, mixed
// pools, GPU pools, nodes of an unknown OS, add-ons of unknown
// management), against real clients:
//
//   - kubectl and the plugins reach the e2e package's local control plane
//     through a proxy that reports the provider's version on /version (the
//     version the provider's side moved to); the scenario's nodes are KWOK
//     nodes labelled as the provider labels them. A node kubeadm reset
//     stopped is taken from KWOK and shows Ready Unknown, as the node
//     lifecycle controller marks a node without a kubelet, until it joins
//     again (mirror.go Sync).
//   - aws, gcloud and az reach recording endpoints in this package by
//     their documented overrides: AWS_ENDPOINT_URL, the
//     CLOUDSDK_API_ENDPOINT_OVERRIDES_CONTAINER override with an access
//     token file, and az cloud register of a local cloud (an ADFS
//     authority, as for Azure Stack Hub) and az login with a service
//     principal. The endpoints answer in the APIs' shapes (botocore's EKS
//     model, gcloud's bundled container v1 messages,
//     azure-mgmt-containerservice 2022-11-01), keep state in a World, and
//     refuse what the providers refuse with the providers' own error
//     texts (each cited where it is raised).
//   - Cluster API's commands reach its real CRDs (Cluster, MachineDeployment,
//     Machine, KubeadmControlPlane of Cluster API v1.14.0, e2e/tools/build.sh
//     capi) on the local control plane, which is the management cluster
//     (context mgmt), with the Cluster's v1beta1 <-> v1beta2 conversion
//     served by the lane as Cluster API's webhook serves it. The scenario's
//     Cluster, KubeadmControlPlane, MachineDeployments and Machines (each
//     Machine's nodeRef one of the scenario's nodes; the control plane's
//     machines are kubeadm nodes with kubeadm's static pods) are created
//     from the World, and on each write to them (in the proxy, before
//     kubectl has its answer) and after each paste the lane plays the
//     topology and KubeadmControlPlane controllers (capi.go): a moved
//     spec.topology.version moves the control plane and the
//     MachineDeployment topologies without defer-upgrade, unless the
//     Cluster is paused. clusterctl is not built (capi.go says why): its
//     describe cluster is checked (flags, context, Cluster) and listed as
//     not executed.
//   - Host commands (package managers, systemd, kubeadm, the k3s and RKE2
//     installers) are not run: bash -n and mvdan.cc/sh parse them,
//     kubeadm's own command tree and version policy check kubeadm lines
//     (kubeadmcheck, built from the control plane's Kubernetes release),
//     apt-get, dnf, systemctl and the installers are checked against the
//     node's repository and their documented arguments, and their effect
//     is applied to the World. Pasted on the workstation, a host command
//     meets a shim that refuses it.
//   - azure-cli before 2.46.0 crashes in az aks nodepool upgrade before it
//     sends anything (Azure/azure-cli#25530): with such an az, that one
//     command is checked through the installed az's own --help, listed
//     as not executed, and its request sent as 2.46 sends it (azshim.go).
//   - curl and kubectl downloads go through an HTTPS proxy that answers
//     dl.k8s.io's release markers, etcd's GitHub release archives
//     (github.com's redirect to its asset host, an archive of the
//     release's layout whose etcdutl answers version and snapshot
//     status), the VPC CNI manifest at its release tags
//     (raw.githubusercontent.com), and the EKS add-on image registries'
//     manifests by tag (ACCOUNT.dkr.ecr.REGION.amazonaws.com, with the
//     password aws ecr get-login-password gets from the recording
//     endpoint), and refuses every other host.
//   - gpu-validate's check pods complete (KWOK's completion Stage) and
//     their logs (a clean kernel log, a passing DCGM run) come from a
//     second KWOK process the nodes name as their kubelet; kubectl exec
//     into an etcd pod runs an etcdctl stand-in there that writes the
//     snapshot into the node's files the lane keeps, and ssh to a node
//     runs the backup's file commands (cat, sha256sum, rm, ls -t, tar
//     -czf -, uname -m) on them, and k3s or RKE2 etcd-snapshot save on a
//     server's files (its token and datastore, written per scenario);
//     any other command over ssh is a host command and refused.
//
// Each block runs in a non-interactive bash with standard input closed, so
// a command that prompts fails instead of reading the next pasted line; a
// block with a loop placeholder (NODE='<node-name>', UNIT='<clique>',
// NODES='<node-name> ...') runs once per node, unit or batch, as the
// reader repeats it, together with the blocks after it that go on with
// the loop (those that use its variable or are pasted on its node). The
// shell variables a block sets carry to the blocks pasted after it, as in
// one terminal. An alternative ("Only if ...") runs when its condition
// holds: the outcome of the block before it, or the OS family of the node
// it is pasted on ("on cp-0:", or the node a block before it ended on). A
// step's rollback blocks ("Rollback, only if ...") run only when a block
// of the step failed.
// A block that deliberately stops the reader (a group that writes its
// message on stderr and ends in false or exit N, as the block for an OS
// family without packages does: stop.go) ends the scenario's paste: its
// own failure is no problem, and the blocks after it are listed as not
// reached, not as failed.
// Every failing command (an && list that stops before its last command
// included, a pipeline's command other than its last, in a loop's body
// or a command substitution too, and a command of a ( … ) subshell or a
// function body other than its last, which bash's ERR trap misses; not
// one of a pipeline the block tests, nor grep finding nothing or a
// writer the next command stopped reading: shell.go), every provider refusal and
// every request or effect outside the step's intent (which call, which
// version, which pool) is a problem of the block, reported with the block
// and the requests; the test fails on any.
//
// On Cluster API the mirror moves a released MachineDeployment's Machines
// to the new version in place and deletes none, so a GPU pool's unit
// block (which drains the unit of a Machine the rollout deletes and holds
// at the runbook's pre-drain hook) and the restore after it are listed as
// skipped, with why (capiSkip), not pasted; pkg/skew's
// TestCAPIUnitBlocksPasted pastes them against stand-ins. The capi/gpu-pools
// scenario took 83 s wall, 13.7 s CPU of children, with 4 blocks skipped.
// RUNBOOK_SCENARIOS=eks,gke/gpu-pools runs some scenarios only;
// RUNBOOK_REPORT=/tmp/r writes /tmp/r.json and /tmp/r.txt. Each
// scenario's log line gives its wall time and the CPU time of its pasted
// shells and clients and of the test process.
//
// Cost: most of the lane's CPU is the provider CLIs' (Python) start-up.
// Measured on a shared two-core machine under load (CPU of the pasted
// shells and clients a scenario): kubeadm 12-25 s, EKS 39-120 s, GKE
// 16-37 s, AKS 19-40 s. `make e2e E2E_RUNBOOK=subset` runs one
// scenario a provider (the Makefile's E2E_RUNBOOK_SUBSET: kubeadm's and
// EKS's mixed pools, whose runbooks paste 39 of kubeadm's 40 distinct
// commands and 21 of EKS's 25; GKE's GPU pools, as every GKE inventory
// pastes all of GKE's; the mixed pools of the others): 169 pastes, 282 s
// of CPU in all under /usr/bin/time (control plane included), 182 s of
// it the pasted shells and clients. Debian 12's azure-cli, which the AKS
// scenarios need, is 70 packages (18 MiB to download, 636 MiB installed)
// and took 7 minutes to install, 5 of them byte-compiling python3-azure.
package runbooke2e
