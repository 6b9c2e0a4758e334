package skew

import (
	"fmt"
	"sort"
	"strings"
)

// The immutable path of a self-managed pool whose nodes an EC2 Auto
// Scaling group makes (PlanOptions.ASGs): the nodes are replaced from a
// new AMI, never upgraded in place. Sources (aws-cli 1.45 help pages, the
// CLI the runbook's commands are checked with, read 2026-12-06):
//   - ec2 create-launch-template-version --source-version takes the
//     version it copies and --launch-template-data the fields it changes;
//     describe-launch-template-versions prints each version's
//     LaunchTemplateData, which the step diffs.
//   - autoscaling start-instance-refresh --desired-configuration names the
//     launch template version the group moves to; --preferences
//     MinHealthyPercentage ("the minimum percentage of the group to keep in
//     service"; 80 replaces a fifth at a time), CheckpointPercentages
//     ("the last number in the array must be 100"), CheckpointDelay (the
//     pause at each checkpoint), SkipMatching, AutoRollback ("roll back the
//     Auto Scaling group to its previous configuration if the instance
//     refresh fails").
//   - describe-instance-refreshes Status: Pending, InProgress, Successful,
//     Failed, Cancelling, Cancelled, RollbackInProgress, RollbackFailed,
//     RollbackSuccessful, Baking.
//   - put-lifecycle-hook --lifecycle-transition
//     autoscaling:EC2_INSTANCE_TERMINATING holds each instance the group
//     terminates in Terminating:Wait until complete-lifecycle-action or
//     the heartbeat timeout ("The range is from 30 to 7200 seconds")
//     (https://docs.aws.amazon.com/autoscaling/ec2/userguide/lifecycle-hooks-overview.html):
//     the step drains the node of each such instance, GPU nodes with
//     gang-drain's checkpointing drain, before the instance goes.
//   - RefreshPreferences ScaleInProtectedInstances: "Refresh" replaces
//     instances protected from scale in, "Ignore" leaves them out and
//     replaces the others, "Wait (default)" waits "one hour for you to
//     remove scale-in protection. Otherwise, the instance refresh will
//     fail"; StandbyInstances: Terminate, Ignore, or "Wait (default)",
//     which waits one hour for them to return to service and then fails
//     (aws-cli 1.45.11 start-instance-refresh help; the botocore 1.43.11
//     service model it ships holds the same enums). A GPU group often
//     protects its instances, so the step asks for Refresh: each protected
//     instance still waits at the terminating hook for its drain. A group
//     with instances in Standby is refused before the refresh, since
//     Terminate would end an instance the operator set aside and Ignore
//     would leave a node at the old version that verify then fails.
//   - The order: RefreshPreferences has no field that chooses which
//     instances a refresh replaces next (its fields: MinHealthyPercentage,
//     InstanceWarmup, CheckpointPercentages, CheckpointDelay, SkipMatching,
//     AutoRollback, ScaleInProtectedInstances, StandbyInstances,
//     AlarmSpecification, MaxHealthyPercentage, BakeTime); scale-in
//     protection with Ignore only keeps instances out of a refresh. One
//     refresh per fabric unit (all other instances protected) would follow
//     the units; this path runs one refresh for the pool and says what
//     that costs a GPU pool instead.
//   - cancel-instance-refresh stops a refresh; rollback-instance-refresh
//     returns the group to its previous launch template version and
//     replaces the instances already replaced.
//   - describe-auto-scaling-groups LaunchTemplate.Version is "The version
//     number, $Latest, or $Default"; with $Latest "Amazon EC2 Auto Scaling
//     selects the latest version of the launch template when launching
//     instances", so a new version would be launched before the refresh;
//     and start-instance-refresh AutoRollback: "A rollback is not
//     supported in the following situations: ... The Auto Scaling group
//     uses the launch template's $Latest or $Default version". The step
//     resolves the version to its number (describe-launch-template-versions
//     VersionNumber) and puts the group on it before the new version is
//     made. A group without a launch template of its own (a mixed
//     instances policy, a launch configuration) has LaunchTemplate null
//     ("None" in text output) and is refused.
//   - A terminating hook's default result ends in termination whether it
//     is CONTINUE or ABANDON unless the group retains instances
//     (https://docs.aws.amazon.com/autoscaling/ec2/userguide/configure-instance-retention.html);
//     update-auto-scaling-group --instance-lifecycle-policy
//     RetentionTriggers.TerminateHookAbandon "retain" moves an instance
//     whose hook is abandoned "due to failure, timeout, or explicit
//     abandonment" to a retained state, where it stays "until you call
//     TerminateInstanceInAutoScalingGroup" (aws-cli 1.45.11 help). The
//     hook's default result is ABANDON, so an instance whose node was not
//     drained in time is kept, never terminated with its gangs on it.

// asgHook is the termination lifecycle hook the step puts on the group for
// the refresh and deletes after it.
const asgHook = "gpufleet-drain"

// asgOf is the Auto Scaling group of a pool, "" when none was named.
func (r *renderer) asgOf(pool string) string {
	if r.asgs == nil || pool == NoPool || r.controlPlanePool(pool) {
		return ""
	}
	return r.asgs[pool]
}

// asgBatch is how many nodes a fifth of the pool is (at least one).
func asgBatch(nodes int) int {
	n := (nodes + 4) / 5
	if n < 1 {
		n = 1
	}
	return n
}

// asgRefresh replaces an ASG pool's nodes from a new AMI. Block one makes
// the launch template version, prints its difference from the version in
// use and refuses unless only the AMI differs, then puts the drain hook
// and starts the refresh; block two watches it to its end, draining each
// node whose instance waits to terminate (gang-drain on GPU pools), and
// cancels it (the pause) when more than one batch of the pool's nodes is
// NotReady, draining on through a cancel or an automatic rollback; block
// three checks the outcome, validates the new nodes,
// brings the gangs back and takes the hook off.
func (r *renderer) asgRefresh(s Step, sel string, gpu bool) blocks {
	asg := r.asgOf(s.Pool)
	reg := "--region " + sq(r.region)
	file := "lt-" + fileSafe(s.Pool)
	run := poolRun(s)
	describe := fmt.Sprintf("aws autoscaling describe-auto-scaling-groups %s --auto-scaling-group-names \"$ASG\"", reg)
	version := func(v string) string {
		return fmt.Sprintf(`aws ec2 describe-launch-template-versions %s --launch-template-id "$LT" --versions "$%s" --query 'LaunchTemplateVersions[0].LaunchTemplateData' --output json > %s-%s.json`, reg, v, file, strings.ToLower(v))
	}
	var b blocks
	b.add(fmt.Sprintf("# pool %s is EC2 Auto Scaling group %s: its nodes are replaced from a new AMI, never upgraded in place: a launch template version that changes the AMI alone, then an instance refresh a fifth of the pool at a time (%s), with a checkpoint after each fifth", s.Pool, asg, Nodes(asgBatch(r.pools[s.Pool].Nodes))),
		"ASG="+sq(asg),
		"AMI="+sq("<"+s.To+"-ami-id>")+"   # the node image built for v"+s.To+": its kubelet, kubeadm and containerd (and the GPU driver validated with it)")
	if gpu {
		// The cost of the path, said before it starts. A restore per batch
		// is not offered: gang-drain restore brings back the gangs of the
		// whole run, the scheduler may place them on instances of the old
		// AMI that a later batch replaces (stopping them again), and the
		// refresh goes on from a checkpoint by itself after its delay.
		b.add(fmt.Sprintf("# the cost on this GPU pool: every gang gang-drain stops as its instance waits to terminate stays stopped (checkpointed, not running) until the refresh has replaced all %s and the new nodes pass gpu-validate (the restore after the watch), so from the last batch on none of the pool's gangs run; not restored per batch, since a restore brings back all of the run's gangs, which may land on old-AMI instances a later batch stops again, and the refresh moves on from each checkpoint by itself", Nodes(r.pools[s.Pool].Nodes)),
			"# and the order is the refresh's: an instance refresh has no preference that chooses which instances go next (scale-in protection with ScaleInProtectedInstances Ignore only leaves instances out), so a fifth is not a fabric unit: one batch may hold instances of every unit and stop a gang in each")
	}
	b.add(chain(
		asgAMIAvailable(reg),
		asgNoStandby(describe),
		fmt.Sprintf("LT=$(%s --query 'AutoScalingGroups[0].LaunchTemplate.LaunchTemplateId' --output text)", describe),
		`{ [ -n "$LT" ] && [ "$LT" != None ] || { echo "group $ASG has no launch template of its own (a mixed instances policy or a launch configuration): this path changes a launch template's AMI only; refused" >&2; false; }; }`,
		fmt.Sprintf("OLD=$(%s --query 'AutoScalingGroups[0].LaunchTemplate.Version' --output text)", describe),
		fmt.Sprintf(`OLD=$(aws ec2 describe-launch-template-versions %s --launch-template-id "$LT" --versions "$OLD" --query 'LaunchTemplateVersions[0].VersionNumber' --output text)   # $Latest or $Default as its number`, reg),
		`{ [ "$OLD" -gt 0 ] 2>/dev/null || { echo "launch template $LT: no version number for the group's version: refused" >&2; false; }; }`,
		fmt.Sprintf(`aws autoscaling update-auto-scaling-group %s --auto-scaling-group-name "$ASG" --launch-template "{\"LaunchTemplateId\":\"$LT\",\"Version\":\"$OLD\"}"   # the group on that number, so the new version is not launched before the refresh`, reg),
		fmt.Sprintf(`NEW=$(aws ec2 create-launch-template-version %s --launch-template-id "$LT" --source-version "$OLD" --version-description 'gpufleet v%s AMI' --launch-template-data "{\"ImageId\":\"$AMI\"}" --query LaunchTemplateVersion.VersionNumber --output text)`, reg, s.To),
		fmt.Sprintf(`echo "$OLD" > %s-old.version   # kept for the pool's way back`, file),
		version("OLD"),
		version("NEW"))...)
	b.add(fmt.Sprintf("diff %s-old.json %s-new.json   # the whole difference", file, file))
	b.add("# refuse unless the AMI alone differs (the new version stays unused), then hold every terminating instance for its drain and start the refresh:")
	b.add(chain(
		asgOnlyAMI(file),
		asgRetain(reg),
		asgPutHook(reg),
		fmt.Sprintf(`REFRESH=$(aws autoscaling start-instance-refresh %s --auto-scaling-group-name "$ASG" --desired-configuration "{\"LaunchTemplate\":{\"LaunchTemplateId\":\"$LT\",\"Version\":\"$NEW\"}}" --preferences '{"MinHealthyPercentage":80,"CheckpointPercentages":[20,40,60,80,100],"CheckpointDelay":600,"SkipMatching":true,"AutoRollback":true,"ScaleInProtectedInstances":"Refresh","StandbyInstances":"Wait"}' --query InstanceRefreshId --output text)`, reg),
		"LATE=")...)
	b.cut()
	status := refreshStatus(reg)
	b.add(fmt.Sprintf("# watch the refresh to its end: drain the node of each instance waiting to terminate, then let it go; pause it (cancel) when more than %s of the pool are NotReady; roll it back when its new instances have not become Ready v%s nodes within 15 minutes", Nodes(asgBatch(r.pools[s.Pool].Nodes)), s.To),
		r.asgWatch(s, sel, gpu, s.To))
	b.cut()
	then := []string{fmt.Sprintf("aws autoscaling delete-lifecycle-hook %s --auto-scaling-group-name \"$ASG\" --lifecycle-hook-name %s", reg, asgHook)}
	gates := []string{status, `[ "$S" = Successful ]`}
	if gpu {
		b.add("# the refresh succeeded and the new nodes pass validation: bring the gangs back, take the hook off:")
		gates = append(gates, validateCmd(sel, s), "kubectl gang-drain restore "+run+" --dry-run", "kubectl gang-drain restore "+run)
	} else {
		b.add("# the refresh succeeded: take the hook off:")
	}
	b.add(chain(append(gates, then...)...)...)
	return b
}

// asgAMIAvailable refuses an AMI that is not an available image in the
// region: create-launch-template-version makes a version with parameters
// that are not valid and only says so in its Warning ("If the new version
// of the launch template contains parameters or parameter combinations
// that are not valid, an error code and an error message are returned for
// each issue"), and describe-images State "available" means "the image is
// successfully registered and can be used to launch an instance" (both
// aws-cli 1.45.11 help).
func asgAMIAvailable(reg string) string {
	return fmt.Sprintf(`{ aws ec2 describe-images %s --image-ids "$AMI" --query 'Images[0].State' --output text | grep -qx available || { echo "AMI $AMI is not an available image in this region: refused before any launch template version is made" >&2; false; }; }`, reg)
}

// asgOnlyAMI passes only when both versions' LaunchTemplateData were
// read, the new one's ImageId is $AMI and nothing else differs (the aws
// CLI prints each key on its own line with --output json, ImageId a
// top-level string of LaunchTemplateData: ec2
// describe-launch-template-versions, aws-cli 1.45.11 help). Anything
// else is refused with the new version left unused.
func asgOnlyAMI(file string) string {
	return fmt.Sprintf(`{ [ -s %[1]s-old.json ] && [ -s %[1]s-new.json ] && grep -qF "\"ImageId\": \"$AMI\"" %[1]s-new.json && diff <(grep -v '^ *"ImageId": ' %[1]s-old.json) <(grep -v '^ *"ImageId": ' %[1]s-new.json) >/dev/null || { echo "launch template version $NEW differs from version $OLD in more than the AMI (the diff above), or either could not be read: refused; version $NEW stays unused" >&2; false; }; }`, file)
}

// asgNoStandby refuses a group with instances in Standby or entering it
// (LifecycleState EnteringStandby, Standby: the LifecycleState enum of the
// autoscaling service model botocore 1.43.11 ships): the refresh would
// wait an hour for them and fail. A describe call that fails (the aws CLI
// exits non-zero on a service or client error) or prints no count is
// refused with its own message: nothing is known of the group's instances.
func asgNoStandby(describe string) string {
	return fmt.Sprintf(`{ { STANDBY=$(%s --query "length(AutoScalingGroups[0].Instances[?contains(LifecycleState, 'Standby')])" --output text) && case "$STANDBY" in ''|*[!0-9]*) false;; esac; } || { echo "could not read the instances of group $ASG (describe-auto-scaling-groups failed, its error above, or printed no count): check the group's name, the region and the credentials, then paste again" >&2; false; }; } && `+
		`{ [ "$STANDBY" = 0 ] || { echo "group $ASG has instances in Standby ($STANDBY): return them to service (aws autoscaling exit-standby) or detach them first; an instance refresh waits an hour for them, then fails" >&2; false; }; }`, describe)
}

// asgRetain makes the group keep, not terminate, an instance whose
// terminating hook is abandoned (its node not drained in time).
func asgRetain(reg string) string {
	return fmt.Sprintf(`aws autoscaling update-auto-scaling-group %s --auto-scaling-group-name "$ASG" --instance-lifecycle-policy '{"RetentionTriggers":{"TerminateHookAbandon":"retain"}}'`, reg)
}

// asgPutHook holds every instance the group terminates in
// Terminating:Wait for its drain; left alone it is abandoned, and so
// retained (asgRetain).
func asgPutHook(reg string) string {
	return fmt.Sprintf(`aws autoscaling put-lifecycle-hook %s --auto-scaling-group-name "$ASG" --lifecycle-hook-name %s --lifecycle-transition autoscaling:EC2_INSTANCE_TERMINATING --heartbeat-timeout 7200 --default-result ABANDON`, reg, asgHook)
}

// refreshStatus reads the status of instance refresh $REFRESH into S.
func refreshStatus(reg string) string {
	return fmt.Sprintf(`S=$(aws autoscaling describe-instance-refreshes %s --auto-scaling-group-name "$ASG" --instance-refresh-ids "$REFRESH" --query 'InstanceRefreshes[0].Status' --output text)`, reg)
}

// asgWatch is the loop that follows refresh $REFRESH of group $ASG to its
// end (a rollback included): the node of each instance held in
// Terminating:Wait is drained, GPU nodes with gang-drain, and the
// instance let go; the refresh is cancelled when more than a batch of the
// pool is NotReady. With join set (the forward step's minor), the
// instances launched from $NEW must become Ready nodes of that minor:
// fifteen minutes with fewer Ready nodes than such InService instances
// rolls the refresh back.
func (r *renderer) asgWatch(s Step, sel string, gpu bool, join string) string {
	reg := "--region " + sq(r.region)
	describe := fmt.Sprintf("aws autoscaling describe-auto-scaling-groups %s --auto-scaling-group-names \"$ASG\"", reg)
	// kubectl drain takes several nodes (ResourceNames("nodes", args...)
	// in kubectl/pkg/cmd/drain/drain.go), gang-drain run takes NODE...
	drain := fmt.Sprintf(`kubectl drain $NODES --ignore-daemonsets --delete-emptydir-data --timeout=%s`, selfDrainTimeout)
	if gpu {
		drain = fmt.Sprintf(`kubectl gang-drain run $NODES --run-id %s --timeout %s`, poolRun(s), selfDrainTimeout)
	}
	waiting := fmt.Sprintf(`$(%s --query "AutoScalingGroups[0].Instances[?LifecycleState=='Terminating:Wait'].InstanceId" --output text)`, describe)
	// Every instance waiting in this pass gets a heartbeat ("This extends
	// the timeout by the length of time defined using the
	// PutLifecycleHook API call": record-lifecycle-action-heartbeat,
	// aws-cli 1.45.11 help) and all their nodes one drain, which ends within
	// selfDrainTimeout (1h), well inside the hook's 7200 s; instances
	// that start waiting meanwhile get theirs at the next pass. Once an
	// instance is let go and terminated its Node is deleted: without a
	// cloud controller manager the dead Node would stay, NotReady, and
	// count against the pause.
	return fmt.Sprintf(`while %s && case "$S" in Pending|InProgress|Baking|Cancelling|RollbackInProgress) true;; *) false;; esac; do NODES=; IDS=; for I in %s; do NODE=$(kubectl get nodes -o custom-columns=NAME:.metadata.name,ID:.spec.providerID --no-headers | awk -v i="$I" '$2 ~ ("/" i "$") {print $1}'); if [ -z "$NODE" ]; then aws autoscaling cancel-instance-refresh %s --auto-scaling-group-name "$ASG"; echo "instance $I has no node with its aws:// provider ID: it cannot be drained, so the refresh is cancelled; the hook keeps the instance (Terminating:Wait, then retained) until it is drained by hand" >&2; break 2; fi; aws autoscaling record-lifecycle-action-heartbeat %s --auto-scaling-group-name "$ASG" --lifecycle-hook-name %s --instance-id "$I"; NODES="$NODES $NODE"; IDS="$IDS $I"; done; if [ -n "$IDS" ] && %s; then for I in $IDS; do aws autoscaling complete-lifecycle-action %s --auto-scaling-group-name "$ASG" --lifecycle-hook-name %s --instance-id "$I" --lifecycle-action-result CONTINUE; done; aws ec2 wait instance-terminated %s --instance-ids $IDS && kubectl delete node $NODES --ignore-not-found; fi; %s[ "$(kubectl get nodes -l %s --no-headers | awk '$2 ~ /NotReady/' | wc -l)" -le %d ] || [ "$S" != InProgress ] || aws autoscaling cancel-instance-refresh %s --auto-scaling-group-name "$ASG"; sleep 30; done`,
		refreshStatus(reg), waiting, reg, reg, asgHook, drain, reg, asgHook, reg, asgJoined(describe, reg, sel, join), sel, asgBatch(r.pools[s.Pool].Nodes), reg)
}

// asgJoined is the watch's check that the replacements join: the refresh
// counts an instance healthy once EC2's status checks pass ("Health checks
// for instances in an Auto Scaling group", EC2 Auto Scaling user guide),
// and CheckpointDelay only waits ("the amount of time ... to wait after a
// checkpoint before continuing", start-instance-refresh, aws-cli 1.45.11
// help), so a node image whose kubelet never joins would replace the whole
// pool. InService instances launched from $NEW (describe-auto-scaling-groups
// Instances[].LaunchTemplate.Version and LifecycleState) are compared with
// the pool's Ready nodes at the target minor; behind for more than 15
// minutes while the refresh is InProgress, it is rolled back
// (rollback-instance-refresh: "Cancels an instance refresh that is in
// progress and rolls back any changes that it made"). Empty for the
// rollback's own watch.
func asgJoined(describe, reg, sel, join string) string {
	if join == "" {
		return ""
	}
	minor := strings.ReplaceAll(join, ".", `\.`)
	return fmt.Sprintf(`UP=$(%s --query "length(AutoScalingGroups[0].Instances[?LaunchTemplate.Version=='$NEW' && LifecycleState=='InService'])" --output text); case "$UP" in ''|*[!0-9]*) UP=0;; esac; JOINED=$(kubectl get nodes -l %s --no-headers | awk '$2 ~ /^Ready/ && $5 ~ /^v%s\./' | wc -l); if [ "$JOINED" -ge "$UP" ]; then LATE=; elif [ -z "$LATE" ]; then LATE=$(date +%%s); elif [ $(( $(date +%%s) - LATE )) -gt 900 ] && [ "$S" = InProgress ]; then aws autoscaling rollback-instance-refresh %s --auto-scaling-group-name "$ASG"; echo "$UP instances launched from launch template version $NEW are InService but $JOINED nodes of the pool are Ready at v%s after 15 minutes: the new image does not join, so the refresh is rolled back" >&2; fi; `, describe, sel, minor, reg, join)
}

// asgBack is an ASG pool's way back. A refresh still running is rolled
// back (rollback-instance-refresh "Cancels an instance refresh that is in
// progress and rolls back any changes that it made"); one that ended
// (succeeded, cancelled by the watch loop, failed) cannot be, and a new
// refresh moves the group to the launch template version it ran before
// (https://docs.aws.amazon.com/autoscaling/ec2/APIReference/API_RollbackInstanceRefresh.html,
// https://docs.aws.amazon.com/autoscaling/ec2/APIReference/API_CancelInstanceRefresh.html).
// Either way the hook holds each instance it replaces for its drain, and
// the same watch follows it.
func (r *renderer) asgBack(s Step) blocks {
	reg := "--region " + sq(r.region)
	file := "lt-" + fileSafe(s.Pool)
	sel := r.selector(s.Pool)
	gpu := r.gpuPool(s.Pool)
	var b blocks
	// kubeadm join must be at the version of the cluster's last kubeadm
	// init or upgrade ("kubeadm's skew against kubeadm",
	// https://kubernetes.io/docs/setup/production-environment/tools/kubeadm/create-cluster-kubeadm/#kubeadm-s-skew-against-kubeadm):
	// the old AMI's kubeadm is older than a control plane that has moved.
	b.add(fmt.Sprintf("# the old AMI's nodes run kubeadm %s: once the control plane has moved past %s, their kubeadm join is outside kubeadm's skew (join runs at the control plane's version), so this way back holds only while the control plane is still at %s; past that, roll back to an AMI whose kubeadm is at the control plane's minor, or, where there is none, forward", s.From, s.From, s.From))
	b.add("# roll back the refresh while it runs, else refresh the group back to the launch template version it ran before the step (kept in "+file+"-old.version):",
		"ASG="+sq(r.asgOf(s.Pool)))
	b.add(chain(
		fmt.Sprintf(`REFRESH=$(aws autoscaling describe-instance-refreshes %s --auto-scaling-group-name "$ASG" --max-records 1 --query 'InstanceRefreshes[0].InstanceRefreshId' --output text)`, reg),
		refreshStatus(reg),
		fmt.Sprintf(`LT=$(aws autoscaling describe-auto-scaling-groups %s --auto-scaling-group-names "$ASG" --query 'AutoScalingGroups[0].LaunchTemplate.LaunchTemplateId' --output text)`, reg),
		fmt.Sprintf(`OLD=$(cat %s-old.version)`, file),
		asgRetain(reg),
		asgPutHook(reg),
		fmt.Sprintf(`case "$S" in Pending|InProgress|Baking) aws autoscaling rollback-instance-refresh %s --auto-scaling-group-name "$ASG";; *) %s && REFRESH=$(aws autoscaling start-instance-refresh %s --auto-scaling-group-name "$ASG" --desired-configuration "{\"LaunchTemplate\":{\"LaunchTemplateId\":\"$LT\",\"Version\":\"$OLD\"}}" --preferences '{"MinHealthyPercentage":80,"SkipMatching":true,"ScaleInProtectedInstances":"Refresh","StandbyInstances":"Wait"}' --query InstanceRefreshId --output text);; esac`, reg, asgNoStandby(fmt.Sprintf("aws autoscaling describe-auto-scaling-groups %s --auto-scaling-group-names \"$ASG\"", reg)), reg))...)
	b.cut()
	b.add("# watch it to its end, draining as the step did:", r.asgWatch(s, sel, gpu, ""))
	b.cut()
	// The old nodes come back at the kubelet minor they ran before the
	// step (its From), not one minor below its To.
	prev := s.From
	if v, err := ParseVersion(s.From); err == nil {
		prev = v.MinorString()
	}
	gates := []string{refreshStatus(reg), `case "$S" in Successful|RollbackSuccessful) true;; *) false;; esac`}
	if gpu {
		b.add("# back on the previous nodes and they pass validation: bring the gangs back, take the hook off:")
		gates = append(gates, fmt.Sprintf("kubectl gpu-validate nodes -l %s --kubelet-version v%s %s", sel, prev, validateChecks), "kubectl gang-drain restore "+poolRun(s))
	} else {
		b.add("# back on the previous nodes: take the hook off:")
	}
	b.add(chain(append(gates, fmt.Sprintf("aws autoscaling delete-lifecycle-hook %s --auto-scaling-group-name \"$ASG\" --lifecycle-hook-name %s", reg, asgHook))...)...)
	return b
}

// checkASGs refuses --asg values the immutable path cannot follow: a pool
// the inventory does not have, a pool the provider replaces itself (an
// EKS managed node group, a GKE or AKS node pool, a Cluster API
// MachineDeployment: its way back is the provider's, not a refresh of a
// launch template version this path kept), the control-plane pool (it
// moves with its own steps), and a pool where a node has no aws://
// provider ID, by which the watch finds the node of each terminating
// instance.
func checkASGs(inv Inventory, prov Provider, asgs map[string]string) error {
	pools := map[string]Pool{}
	var known []string
	for _, p := range inv.Pools {
		pools[p.Name] = p
		known = append(known, p.Name)
	}
	names := make([]string, 0, len(asgs))
	for n := range asgs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p, ok := pools[n]
		flag := fmt.Sprintf("--asg %s=%s", n, asgs[n])
		switch {
		case !ok:
			return fmt.Errorf("%s: the cluster has no pool %s (its pools: %s)", flag, n, strings.Join(known, ", "))
		case prov.Managed():
			return fmt.Errorf("%s: %s replaces pool %s's nodes itself; --asg is for the pools of a self-managed control plane (kubeadm)", flag, prov.Title(), n)
		case isControlPlaneLabel(p.Label):
			return fmt.Errorf("%s: pool %s is the control plane's, which moves with its own steps", flag, n)
		case p.AWSNodes < p.Nodes:
			return fmt.Errorf("%s: %d of pool %s's %s have an aws:// provider ID (spec.providerID), which the runbook finds each terminating instance's node by: run the AWS cloud controller manager (or set the kubelet's provider ID) on every node first", flag, p.AWSNodes, n, Nodes(p.Nodes))
		}
	}
	return nil
}

// isControlPlaneLabel reports whether a pool grouped by label is the
// control plane's (renderer.controlPlanePool).
func isControlPlaneLabel(label string) bool {
	for _, l := range controlPlaneRoles {
		if label == l {
			return true
		}
	}
	return false
}

// asgWarning says, on a self-managed cluster whose nodes run on EC2, that
// a pool an Auto Scaling group makes has an immutable path the plan takes
// only when told the group.
func (r *renderer) asgWarning() string {
	if r.pf.ProviderIDs["aws"] == 0 || r.prov.Managed() || len(r.asgs) > 0 {
		return ""
	}
	return "the nodes run on EC2: where an Auto Scaling group makes a pool's nodes (the instance's aws:autoscaling:groupName tag), plan again with --asg POOL=GROUP for the immutable path (a launch template version with the new AMI, then an instance refresh a fifth at a time with checkpoints) instead of upgrading in place"
}
