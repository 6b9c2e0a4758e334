package skew

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// rollbackOf is the rollback text of the step that restores etcd in a
// variant: the apiservers step of kubeadm, k3s and RKE2, the control-plane
// step of Cluster API.
func restoreStep(t *testing.T, variant string) (backup, restore Step) {
	t.Helper()
	p := variantPlan(t, variant)
	phase := PhaseAPIServers
	if variant == "capi" {
		phase = PhaseControlPlane
	}
	restore = stepOf(t, p, phase, "")
	for _, s := range p.Steps {
		if s.Phase == PhaseEtcd && s.To == restore.To {
			return s, restore
		}
	}
	t.Fatalf("%s: no backup step of the hop to %s", variant, restore.To)
	return
}

// The restore needs no download: the backup, taken while everything
// works, keeps etcdutl for the node (Linux, the node's architecture)
// beside the snapshot, and the restore copies that binary to each member
// and runs it there. k3s and RKE2 restore with their own binary.
func TestRunbookEtcdRestoreOffline(t *testing.T) {
	for _, tc := range []struct {
		variant string
		kept    bool // the backup keeps etcdutl for the node
	}{
		{"kubeadm-ha", true},
		{"kubeadm-apt", true},
		{"kubeadm-rpm", true},
		{"capi", true},
		{"k3s-etcd", false},
		{"rke2", false},
	} {
		t.Run(tc.variant, func(t *testing.T) {
			backup, restore := restoreStep(t, tc.variant)
			text := rollbackText(restore)
			// k3s and RKE2 reinstall their previous release (the
			// binary downgrade), which is no etcdutl.
			// (k3s and RKE2 stage their kept release on the server in a
			// mktemp -d directory: a copy, not a download.)
			wantNotIn(t, "restore", text, "github.com/etcd-io", "curl ", "wget ")
			if !tc.kept {
				return
			}
			wantNotIn(t, "restore", text, "mktemp")
			kept := `"$BACKUP_DIR/etcdutl-pre-` + restore.To + `-linux-$NODE_ARCH"`
			wantInOrder(t, "backup", cmds(backup),
				`NODE_ARCH=$(ssh "$NODE_SSH" uname -m | sed 's/^x86_64$/amd64/; s/^aarch64$/arm64/') && \`,
				`curl -fsSL "https://github.com/etcd-io/etcd/releases/download/v$ETCD_VER/etcd-v$ETCD_VER-linux-$NODE_ARCH.tar.gz"`,
				`cp "$ETCDUTL_DIR/linux-$NODE_ARCH/etcdutl" `+kept)
			util := "/root/etcdutl-pre-" + restore.To
			wantInOrder(t, "restore", text,
				`NODE_ARCH=$(ssh "$NODE_SSH" uname -m`,
				`scp "$BACKUP_DIR/etcd-pre-`+restore.To+`.db" `+kept+` "$NODE_SSH":/tmp/`,
				`sudo install -m 0700 "/tmp/etcdutl-pre-`+restore.To+`-linux-$NODE_ARCH" `+util,
				"sudo "+util+" snapshot restore /root/etcd-pre-"+restore.To+".db")
		})
	}
}

// etcdFixtures writes etcd release assets as etcd publishes them (a
// directory etcd-v<version>-<os>-<arch>/ holding etcdutl, tar.gz for
// Linux, zip for macOS), their etcdutl a script that says its version
// and the platform it was built for.
func etcdFixtures(t *testing.T, dir, ver string) {
	t.Helper()
	for _, asset := range []string{"linux-amd64", "linux-arm64", "darwin-amd64", "darwin-arm64"} {
		top := "etcd-v" + ver + "-" + asset
		body := []byte("#!/bin/sh\ncase \"$1\" in version) echo 'etcdutl version: " + ver + "'; echo 'platform: " + asset + "';; esac\n")
		var buf bytes.Buffer
		if strings.HasPrefix(asset, "linux") {
			gz := gzip.NewWriter(&buf)
			tw := tar.NewWriter(gz)
			for _, f := range []string{"etcdctl", "etcdutl"} {
				if err := tw.WriteHeader(&tar.Header{Name: top + "/" + f, Mode: 0o755, Size: int64(len(body))}); err != nil {
					t.Fatal(err)
				}
				_, _ = tw.Write(body)
			}
			_ = tw.Close()
			_ = gz.Close()
			asset += ".tar.gz"
		} else {
			zw := zip.NewWriter(&buf)
			for _, f := range []string{"etcdctl", "etcdutl"} {
				h := &zip.FileHeader{Name: top + "/" + f, Method: zip.Deflate}
				h.SetMode(0o755)
				w, err := zw.CreateHeader(h)
				if err != nil {
					t.Fatal(err)
				}
				_, _ = w.Write(body)
			}
			_ = zw.Close()
			asset += ".zip"
		}
		if err := os.WriteFile(filepath.Join(dir, "etcd-v"+ver+"-"+asset), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// The backup's etcdutl for the operator's machine is the asset of its OS
// and architecture (uname -s, uname -m as Linux and macOS name them), and
// the one kept for the restore is always Linux, on the node's
// architecture. The backup's lines run in bash, and in zsh (macOS's login
// shell) where it is installed, with uname, ssh and curl
// standing in (curl serves the release assets from a directory, by the
// file name of the URL's last segment), tar and unzip real.
func TestRunbookEtcdutlForTheMachine(t *testing.T) {
	for _, bin := range []string{"bash", "tar", "unzip"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skip(bin + " is not installed")
		}
	}
	backup, _ := restoreStep(t, "kubeadm-ha")
	lines := backup.Commands
	start := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "ETCD_VER=") {
			start = i
		}
	}
	if start < 0 {
		t.Fatalf("no ETCD_VER line:\n%s", cmds(backup))
	}
	script := append([]string{"ETCD_VER=3.6.5 && \\"}, lines[start+1:]...)
	shells := []string{"bash"}
	if _, err := exec.LookPath("zsh"); err == nil {
		shells = append(shells, "zsh")
	}
	for _, sh := range shells {
		for _, tc := range []struct {
			os, arch, nodeArch string
			operator, node     string // the assets fetched
		}{
			{"Linux", "x86_64", "x86_64", "linux-amd64.tar.gz", "linux-amd64.tar.gz"},
			{"Linux", "aarch64", "x86_64", "linux-arm64.tar.gz", "linux-amd64.tar.gz"},
			{"Darwin", "arm64", "x86_64", "darwin-arm64.zip", "linux-amd64.tar.gz"},
			{"Darwin", "x86_64", "aarch64", "darwin-amd64.zip", "linux-arm64.tar.gz"},
		} {
			t.Run(sh+" "+tc.os+" "+tc.arch+" node "+tc.nodeArch, func(t *testing.T) {
				dir := t.TempDir()
				assets, bin, backupDir := filepath.Join(dir, "assets"), filepath.Join(dir, "bin"), filepath.Join(dir, "backup")
				for _, d := range []string{assets, bin, backupDir} {
					if err := os.MkdirAll(d, 0o755); err != nil {
						t.Fatal(err)
					}
				}
				etcdFixtures(t, assets, "3.6.5")
				stubs := map[string]string{
					"uname": "#!/bin/sh\ncase \"$1\" in -s) echo " + tc.os + ";; -m) echo " + tc.arch + ";; esac\n",
					// ssh NODE uname -m: the node's architecture.
					"ssh": "#!/bin/sh\necho \"$@\" >> \"$LOG\"\n[ \"$2\" = uname ] && echo " + tc.nodeArch + "\n",
					"curl": `#!/bin/sh
out=
while [ $# -gt 1 ]; do case "$1" in -o) out=$2; shift 2;; *) shift;; esac; done
echo "curl $1" >> "$LOG"
f="$ASSETS/${1##*/}"
[ -f "$f" ] || { echo "curl: (22) 404 $1" >&2; exit 22; }
if [ -n "$out" ]; then cp "$f" "$out"; else cat "$f"; fi
`,
				}
				for name, body := range stubs {
					if err := os.WriteFile(filepath.Join(bin, name), []byte(body), 0o755); err != nil {
						t.Fatal(err)
					}
				}
				log := filepath.Join(dir, "log")
				cmd := exec.Command(sh, "-c", "set -o pipefail\n"+strings.Join(script, "\n")+"\n")
				cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "LOG="+log, "ASSETS="+assets,
					"BACKUP_DIR="+backupDir, "NODE_SSH=cp-0")
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("%v\n%s\n%s", err, strings.Join(script, "\n"), out)
				}
				got, _ := os.ReadFile(log)
				var fetched []string
				for _, l := range strings.Split(string(got), "\n") {
					if u, ok := strings.CutPrefix(l, "curl "); ok {
						if !strings.HasPrefix(u, "https://github.com/etcd-io/etcd/releases/download/v3.6.5/etcd-v3.6.5-") {
							t.Errorf("fetched %s, not from etcd's release", u)
						}
						fetched = append(fetched, strings.TrimPrefix(u, "https://github.com/etcd-io/etcd/releases/download/v3.6.5/etcd-v3.6.5-"))
					}
				}
				if strings.Join(fetched, " ") != tc.operator+" "+tc.node {
					t.Errorf("fetched %q, want %s for this machine then %s for the node", fetched, tc.operator, tc.node)
				}
				nodeArch := map[string]string{"x86_64": "amd64", "aarch64": "arm64"}[tc.nodeArch]
				kept, err := exec.Command(filepath.Join(backupDir, "etcdutl-pre-1.38-linux-"+nodeArch), "version").Output()
				if err != nil || !strings.Contains(string(kept), "platform: linux-"+nodeArch) {
					t.Errorf("the etcdutl kept for the node: %v %s", err, kept)
				}
			})
		}
	}
}

// The restore bumps etcd's revision past every one a client saw and marks
// the ones between compacted, waits until the member's etcd has stopped
// before it touches the data directory, and, once the control plane
// answers, restarts the kubelet on the worker nodes, as Kubernetes'
// "Restoring an etcd cluster" says.
func TestRunbookEtcdRestoreKeepsRevisions(t *testing.T) {
	for _, variant := range []string{"kubeadm-ha", "kubeadm-rpm", "capi"} {
		t.Run(variant, func(t *testing.T) {
			_, restore := restoreStep(t, variant)
			text := rollbackText(restore)
			wantIn(t, "restore", text, " --initial-cluster \"$INITIAL\" --bump-revision 1000000000 --mark-compacted && \\")
			wantInOrder(t, "restore", text,
				"sudo sh -c 'mv /etc/kubernetes/manifests/*.yaml /etc/kubernetes/manifests-stopped/' && \\",
				`while ETCD_IDS=$(sudo crictl ps --name '^etcd$' -q) && [ -n "$ETCD_IDS" ]; do sleep 2; done && \`,
				`ETCD_IDS=$(sudo crictl ps --name '^etcd$' -q) && test -z "$ETCD_IDS"`,
				`ETCD_IDS=$(sudo crictl ps --name '^etcd$' -q) && test -z "$ETCD_IDS" && \`,
				"snapshot restore /root/etcd-pre-",
				`sudo mv "$ETCD_DATA/member" "$ETCD_DATA-failed-`,
				`sudo mv "$ETCD_DATA-restored/member" "$ETCD_DATA/" && \`,
				"# on each worker node, once the control plane answers again: restart the kubelet",
				"sudo systemctl restart kubelet")
			// The data directory may be a mount point: its member
			// directory moves, never the directory itself.
			wantNotIn(t, "restore", text, `sudo mv "$ETCD_DATA" `)
			// The worker nodes' restart is a block of its own, pasted on them.
			for _, b := range restore.Rollback.Blocks {
				c := strings.Join(b.Commands, "\n")
				if strings.Contains(c, "# on each worker node") && len(b.Commands) != 2 {
					t.Errorf("the workers' block holds more than the restart:\n%s", c)
				}
			}
		})
	}
}

// kubeadm's rollback restores etcd only when the control plane ran at the
// target and must go back, and says first when not to: a kubeadm upgrade
// that failed and recovered the earlier state itself left etcd's data as
// it was. k3s and RKE2 keep the trigger of a failed upgrade command.
func TestRunbookKubeadmRestoreOnlyWhenMoved(t *testing.T) {
	for _, tc := range []struct {
		variant  string
		trigger  []string
		notTrig  []string
		notFirst bool // the first rollback block says when not to restore
	}{
		{"kubeadm-ha", []string{"the control plane ran at v1.38 and must go back", "a node's kubeadm upgrade succeeded", "is no trigger"}, []string{"a node's upgrade command fails"}, true},
		{"kubeadm-apt", []string{"the control plane ran at v1.37 and must go back"}, []string{"a node's upgrade command fails"}, true},
		{"k3s-etcd", []string{"a node's upgrade command fails"}, nil, false},
		{"rke2", []string{"a node's upgrade command fails"}, nil, false},
	} {
		t.Run(tc.variant, func(t *testing.T) {
			_, restore := restoreStep(t, tc.variant)
			wantIn(t, "trigger", restore.Rollback.Trigger, tc.trigger...)
			wantNotIn(t, "trigger", restore.Rollback.Trigger, tc.notTrig...)
			first := strings.Join(restore.Rollback.Blocks[0].Commands, "\n")
			if !tc.notFirst {
				wantNotIn(t, "rollback", rollbackText(restore), "Do NOT restore")
				return
			}
			if !commentsOnlyBlock(restore.Rollback.Blocks[0]) {
				t.Errorf("the first block is pasted; want directions only:\n%s", first)
			}
			wantInOrder(t, "first block", first,
				`# Do NOT restore etcd when a kubeadm upgrade command failed with "couldn't upgrade control plane. kubeadm has tried to recover everything into the earlier state"`,
				"etcd's data is unchanged",
				"# Restore etcd only when the control plane ran at v"+restore.To+" and must go back")
			// Nothing of the restore before it.
			wantNotIn(t, "first block", first, "member list", "snapshot restore", "manifests-stopped")
		})
	}
}

func commentsOnlyBlock(b Block) bool {
	for _, l := range b.Commands {
		if !strings.HasPrefix(l, "#") {
			return false
		}
	}
	return true
}

// The restore reads etcd's data directory from the member's --data-dir,
// not a fixed /var/lib/etcd: the line the runbook prints runs through bash
// and sed on manifests in kubeadm's form (GetEtcdPodSpec,
// cmd/kubeadm/app/phases/etcd/local.go, kubernetes v1.37.2), and the
// backup's pipeline on the pod's command as kubectl's jsonpath prints it,
// one argument a line.
func TestRunbookEtcdDataDirFromManifest(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	_, restore := restoreStep(t, "kubeadm-ha")
	back := rollbackText(restore)
	wantNotIn(t, "restore", back, "/var/lib/etcd")
	line := strings.TrimSuffix(lineWith(t, back, "ETCD_DATA=$(sudo sed"), " && \\")
	backup, _ := restoreStep(t, "kubeadm-apt")
	wantNotIn(t, "backup", cmds(backup), "/var/lib/etcd")
	bline := lineWith(t, cmds(backup), "ETCD_DATA=$(kubectl")
	_, pipe, _ := strings.Cut(bline, `{end}' | `)
	pipe, _, _ = strings.Cut(pipe, ")")
	dir := t.TempDir()
	for _, want := range []string{"/var/lib/etcd", "/data/etcd", "/mnt/nvme0/etcd-data"} {
		manifest := filepath.Join(dir, "etcd.yaml")
		args := []string{"etcd", "--advertise-client-urls=https://10.0.0.10:2379", "--data-dir=" + want, "--initial-advertise-peer-urls=https://10.0.0.10:2380", "--name=cp-0"}
		body := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: etcd\n  namespace: kube-system\nspec:\n  containers:\n  - command:\n"
		for _, a := range args {
			body += "    - " + a + "\n"
		}
		body += "    image: registry.k8s.io/etcd:3.6.5-0\n    name: etcd\n    volumeMounts:\n    - mountPath: " + want + "\n      name: etcd-data\n"
		if err := os.WriteFile(manifest, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		l := strings.ReplaceAll(strings.ReplaceAll(line, "sudo ", ""), stoppedManifests+"/etcd.yaml", manifest)
		out, err := exec.Command("bash", "-c", l+` && printf %s "$ETCD_DATA"`).CombinedOutput()
		if err != nil || string(out) != want {
			t.Errorf("restore: --data-dir=%s gives %q (%v)", want, out, err)
		}
		out, err = exec.Command("bash", "-c", "printf '%s\\n' "+strings.Join(args, " ")+" | "+pipe).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != want {
			t.Errorf("backup: --data-dir=%s gives %q (%v)", want, out, err)
		}
	}
}

// hostMarker is a rollback line that says where the lines after it are
// pasted, read as e2e/runbook's Segments reads it ("# on HOST:", HOST up
// to its first ", ").
var hostMarker = regexp.MustCompile(`^# on (.+?):`)

// Every marker of a host in every rollback is one e2e/runbook resolves to
// the cluster's nodes: no "# then on each ..." (which is no marker there),
// no host the lane cannot name.
func TestRunbookRollbackHostMarkers(t *testing.T) {
	hosts := map[string]bool{
		// e2e/runbook/hosts.go Nodes.
		"each control-plane node": true, "each server node": true, "each other server": true, "each worker node": true,
		"the first server": true, "the server": true,
		"$NODE": true, "the node": true, "each node of $NODES": true,
	}
	// Not a node: Segments keeps it on the workstation.
	single := map[string]bool{"the management cluster": true}
	for _, v := range variants {
		p := variantPlan(t, v)
		for _, s := range p.Steps {
			if s.Rollback == nil {
				continue
			}
			for _, b := range s.Rollback.Blocks {
				for _, l := range b.Commands {
					if strings.HasPrefix(l, "# then on ") {
						t.Errorf("%s step %d: %q is no host marker", v, s.Number, l)
					}
					m := hostMarker.FindStringSubmatch(l)
					if m == nil {
						continue
					}
					host, _, _ := strings.Cut(m[1], ", ")
					if !hosts[host] && !single[host] && !strings.HasPrefix(host, "each node of the unit") {
						t.Errorf("%s step %d: host %q of %q is none e2e/runbook resolves", v, s.Number, host, l)
					}
				}
			}
		}
	}
}
