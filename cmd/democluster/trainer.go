package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/gpufleet/upgrade-plugins/pkg/checkpoint/agent"
)

// startTrainer runs the gang's side of checkpoint-and-yield as it runs in
// a real pod: the checkpoint agent (bin/gpufleet-checkpoint-agent, a local
// process here instead of a sidecar) speaks the protocol on the JobSet,
// and a scripted trainer answers through the agent's file contract in a
// shared folder (docs/checkpoint-and-yield.md): it reads request.json,
// takes CheckpointTakes to "write" its checkpoint, then writes ready.json.
// The returned function stops both.
func (r *runner) startTrainer(ctx context.Context) (stop func(), err error) {
	g := r.scn.Gang
	dir := filepath.Join(filepath.Dir(r.evidence), "trainer")
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	bin := filepath.Join(r.bin, "gpufleet-checkpoint-agent")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("the trainer's agent: %w (make build builds it)", err)
	}
	args := []string{
		"--namespace", g.Namespace,
		"--root", "JobSet/" + g.JobSet,
		"--dir", dir,
		"--poll-interval", "500ms",
		"--heartbeat-interval", "1s",
		"--progress-timeout", "0",
	}
	actx, cancel := context.WithCancel(ctx)
	cmd := exec.CommandContext(actx, bin, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 5 * time.Second
	cmd.Env = r.env
	out, err := cmd.StderrPipe()
	if err != nil {
		cancel()
		return nil, err
	}
	cmd.Stdout = cmd.Stderr
	shown := append([]string(nil), args...)
	for i := range shown {
		if shown[i] == dir {
			shown[i] = r.display(dir)
		}
	}
	r.agentCmd = "gpufleet-checkpoint-agent " + joinArgs(shown)
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			r.say("  [agent] %s", sc.Text())
		}
		_ = cmd.Wait()
		close(done)
	}()
	tdone := make(chan struct{})
	go func() {
		r.scriptedTrainer(actx, agent.Dir(dir))
		close(tdone)
	}()
	return func() {
		cancel()
		<-done
		<-tdone
	}, nil
}

// scriptedTrainer is the trainer's half of the file contract, as a
// training loop checks it each step: a new request.json is answered once,
// after the checkpoint "takes" CheckpointTakes, with ready.json; a
// withdrawn request (cancelled) resumes training; a request that ended in
// a stop of the gang (stopped) keeps it paused until its pods end.
func (r *runner) scriptedTrainer(ctx context.Context, dir agent.Dir) {
	g := r.scn.Gang
	answered := map[string]bool{}
	stopped := ""
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if id := dir.ReadStopped(); id != "" && id != stopped {
			stopped = id
			r.say("  [trainer %s] stopped: request %s ended in a stop of the gang; staying paused, not resuming, until SIGTERM", g.JobSet, id)
		}
		req, _, ok := dir.ReadRequest()
		if !ok || answered[req.ID] {
			continue
		}
		answered[req.ID] = true
		r.say("  [trainer %s] request.json: checkpoint requested (%s): writing step %s", g.JobSet, req.Reason, g.CheckpointStep)
		select {
		case <-ctx.Done():
			return
		case <-time.After(g.CheckpointTakes.Duration):
		}
		if _, _, still := dir.ReadRequest(); !still {
			r.say("  [trainer %s] request withdrawn; training on", g.JobSet)
			continue
		}
		b, _ := json.Marshal(agent.FileAnswer{ID: req.ID, Step: agent.Step(g.CheckpointStep), URI: g.CheckpointURI})
		if err := agent.WriteFileAtomic(string(dir), agent.ReadyFile, append(b, '\n')); err != nil {
			r.say("  [trainer %s] cannot write %s: %v", g.JobSet, agent.ReadyFile, err)
			continue
		}
		r.say("  [trainer %s] step %s saved to %s; stepping paused; wrote ready.json", g.JobSet, g.CheckpointStep, g.CheckpointURI)
		r.mu.Lock()
		r.checkpointed = true
		r.mu.Unlock()
	}
}
