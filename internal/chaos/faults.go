package chaos

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

func nopLogger() *zap.Logger { return zap.NewNop() }

// Fault kinds.
const (
	FaultLeaderKill     = "leader_kill"
	FaultLeaderPause    = "leader_pause"
	FaultAgentKill      = "agent_kill"
	FaultPartition      = "leader_cut_from_etcd"
	FaultEtcdMemberKill = "etcd_member_kill"
	FaultEtcdLeaderKill = "etcd_leader_kill"
	FaultQuorumLoss     = "etcd_quorum_loss"
)

// settle is how long the suite lets the cluster work between faults.
const settle = 1500 * time.Millisecond

// faults injects cfg.Rounds rounds of faults and returns when the last one
// was healed.
func (r *run) faults(ctx context.Context) (time.Time, error) {
	kinds := []string{FaultLeaderKill, FaultLeaderPause, FaultAgentKill, FaultPartition, FaultEtcdMemberKill, FaultEtcdLeaderKill, FaultQuorumLoss}
	if r.cfg.Etcd == EtcdEmbedded {
		// One member: its loss is quorum loss.
		kinds = []string{FaultLeaderKill, FaultLeaderPause, FaultAgentKill, FaultPartition, FaultQuorumLoss}
	}
	healed := time.Now()
	sleep(ctx, 2*settle) // the workload starts first
	for round := range r.cfg.Rounds {
		for _, kind := range kinds {
			if ctx.Err() != nil {
				return healed, ctx.Err()
			}
			began := time.Now()
			what, err := r.inject(ctx, kind)
			if err != nil {
				return healed, fmt.Errorf("chaos: round %d, %s: %w", round+1, kind, err)
			}
			healed = time.Now()
			r.mu.Lock()
			r.res.Faults[kind]++
			if kind == FaultLeaderKill || kind == FaultLeaderPause {
				r.res.LeaderChanges++
			}
			r.mu.Unlock()
			r.log("round %d: %s (%s), healed after %s", round+1, kind, what, healed.Sub(began).Round(time.Millisecond))
			sleep(ctx, settle)
		}
	}
	return healed, nil
}

// inject carries out one fault and heals it; it returns what it hit.
func (r *run) inject(ctx context.Context, kind string) (string, error) {
	c := r.c
	switch kind {
	case FaultLeaderKill:
		_, p, err := c.leader(ctx, 20*time.Second, "")
		if err != nil {
			return "", err
		}
		p.kill()
		if _, _, err := c.leader(ctx, 20*time.Second, p.name); err != nil {
			return p.name, err
		}
		sleep(ctx, time.Second)
		return p.name, p.start()
	case FaultLeaderPause:
		// Longer than its lease: another server leads meanwhile, and
		// the paused one, resumed, must write nothing.
		_, p, err := c.leader(ctx, 20*time.Second, "")
		if err != nil {
			return "", err
		}
		p.pause()
		if _, _, err := c.leader(ctx, 20*time.Second, p.name); err != nil {
			p.resume()
			return p.name, err
		}
		sleep(ctx, time.Second)
		p.resume()
		return p.name, nil
	case FaultAgentKill:
		// Back within the node TTL: the node is never lost.
		a := c.agents[r.faultRng.IntN(len(c.agents))]
		down := time.Now()
		a.kill()
		sleep(ctx, time.Second)
		err := a.start()
		r.mu.Lock()
		r.agentDown[a.name] = append(r.agentDown[a.name], [2]time.Time{down, time.Now()})
		r.mu.Unlock()
		if err != nil {
			return a.name, err
		}
		return a.name, c.waitNodes(ctx, 30*time.Second)
	case FaultPartition:
		i, p, err := c.leader(ctx, 20*time.Second, "")
		if err != nil {
			return "", err
		}
		for _, px := range c.proxies[i] {
			px.Cut()
		}
		sleep(ctx, 2*leaderTTL+time.Second)
		for _, px := range c.proxies[i] {
			px.Heal()
		}
		return p.name, nil
	case FaultEtcdMemberKill, FaultEtcdLeaderKill:
		m, err := r.etcdMember(ctx, kind == FaultEtcdLeaderKill)
		if err != nil {
			return "", err
		}
		m.kill()
		sleep(ctx, 2*time.Second)
		if err := m.start(); err != nil {
			return m.name, err
		}
		return m.name, c.waitEtcd(30 * time.Second)
	case FaultQuorumLoss:
		if r.cfg.Etcd == EtcdEmbedded {
			_, s1 := c.server("s1") // it carries the embedded etcd
			s1.kill()
			sleep(ctx, 3*time.Second)
			if err := s1.start(); err != nil {
				return s1.name, err
			}
			return "s1 (embedded etcd)", c.waitEtcd(30 * time.Second)
		}
		m, err := r.etcdMember(ctx, false)
		if err != nil {
			return "", err
		}
		var down []*proc
		for _, o := range c.members {
			if o != m {
				o.kill()
				down = append(down, o)
			}
		}
		sleep(ctx, 3*time.Second)
		for _, o := range down {
			if err := o.start(); err != nil {
				return o.name, err
			}
		}
		return down[0].name + "+" + down[1].name, c.waitEtcd(30 * time.Second)
	}
	return "", fmt.Errorf("unknown fault %q", kind)
}

// etcdMember returns the external etcd's raft leader, or a follower.
func (r *run) etcdMember(ctx context.Context, leader bool) (*proc, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: r.c.etcd, DialTimeout: 2 * time.Second, Logger: nopLogger()})
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		var lead uint64
		ids := map[int]uint64{}
		agree := true
		for i, u := range r.c.etcd {
			sctx, cancel := context.WithTimeout(ctx, time.Second)
			st, err := cli.Status(sctx, u)
			cancel()
			if err != nil || st.Leader == 0 || (lead != 0 && st.Leader != lead) {
				agree = false
				break
			}
			lead, ids[i] = st.Leader, st.Header.MemberId
		}
		if agree {
			for i, m := range r.c.members {
				if (ids[i] == lead) == leader {
					return m, nil
				}
			}
		}
		sleep(ctx, 100*time.Millisecond)
	}
	return nil, fmt.Errorf("could not tell etcd's leader within 20s")
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
