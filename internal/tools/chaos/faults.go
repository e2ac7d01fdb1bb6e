package chaos

import (
	"context"
	"time"
)

// faulter injects the run's faults.
type faulter struct {
	*run
	rep *Report
}

// fault is one kind of fault and its share of the schedule.
type fault struct {
	name   string
	weight int
	inject func(ctx context.Context)
}

// schedule is the faults of the run's configuration with their weights
// (out of 100): SIGKILLs of relays and of workers, broker restarts and
// freezes, PostgreSQL immediate restarts and promotions. The share of the
// faults a configuration leaves out goes to PostgreSQL restarts.
func (f *faulter) schedule() []fault {
	pg := fault{"PostgreSQL restart", 10, f.restartPG}
	s := []fault{{"relay kill", 30, f.killRelay}, {"worker kills", 35, f.killWorkers}}
	if f.cfg.NoBrokerRestarts {
		pg.weight += 9 + 8
	} else {
		s = append(s, fault{"broker restart", 9, f.restartBroker}, fault{"broker freeze", 8, f.freezeBroker})
	}
	if f.cfg.Promotions {
		s = append(s, fault{"promotion", 8, f.promote})
	} else {
		pg.weight += 8
	}
	return append(s, pg)
}

// inject injects one fault every 2-6 seconds until ctx ends.
func (f *faulter) inject(ctx context.Context) {
	s := f.schedule()
	total := 0
	for _, x := range s {
		total += x.weight
	}
	pause(ctx, 5*time.Second) // let everything start
	for ctx.Err() == nil {
		pause(ctx, time.Duration(2000+f.rng.IntN(4000))*time.Millisecond)
		if ctx.Err() != nil {
			return
		}
		pick := f.rng.IntN(total)
		for _, x := range s {
			if pick < x.weight {
				x.inject(ctx)
				break
			}
			pick -= x.weight
		}
	}
}

func (f *faulter) killRelay(context.Context) {
	f.kill(f.relays[f.rng.IntN(len(f.relays))], &f.rep.RelayKills)
}

func (f *faulter) killWorkers(context.Context) {
	for range 1 + f.rng.IntN(2) {
		f.kill(f.workers[f.rng.IntN(len(f.workers))], &f.rep.WorkerKills)
	}
}

func (f *faulter) kill(m *member, count *int) {
	if m.kill() {
		f.rep.Kills++
		*count++
		f.log.Info("fault: SIGKILL", "member", m.name)
	}
}

func (f *faulter) restartPG(ctx context.Context) {
	f.log.Info("fault: PostgreSQL immediate restart")
	if err := f.svc.restartPG(context.WithoutCancel(ctx)); err != nil {
		f.log.Warn("PostgreSQL restart", "err", err)
	}
	f.rep.PGRestarts++
}

func (f *faulter) restartBroker(ctx context.Context) {
	id, hard := 1+f.rng.IntN(f.svc.kafkaNodes), f.rng.IntN(2) == 0
	f.log.Info("fault: broker restart", "broker", id, "sigkill", hard)
	if err := f.svc.restartKafka(context.WithoutCancel(ctx), id, hard); err != nil {
		f.log.Warn("broker restart", "err", err)
	}
	f.rep.BrokerRestarts++
}

// freezeBroker stops a broker with SIGSTOP for 10-20 s: longer than Kafka
// takes to fence a silent broker (9 s), so its partitions get new leaders
// while it is frozen.
func (f *faulter) freezeBroker(ctx context.Context) {
	id, d := 1+f.rng.IntN(f.svc.kafkaNodes), time.Duration(10+f.rng.IntN(11))*time.Second
	f.log.Info("fault: broker frozen", "broker", id, "for", d)
	if err := f.svc.freezeBroker(ctx, id, d); err != nil {
		f.log.Warn("broker freeze", "err", err)
	}
	f.rep.BrokerFreezes++
}

// promote stops the primary hard and promotes its standby, when the
// standby holds a synced copy of the relay's slot; else it restarts the
// primary (a promotion then would lose the slot, as the relay's failover
// check would have warned).
func (f *faulter) promote(ctx context.Context) {
	if !f.svc.promotionReady(ctx, f.slot) {
		f.log.Info("promotion skipped: the standby holds no synced copy of the slot yet")
		f.rep.PromotionsSkipped++
		f.restartPG(ctx)
		return
	}
	f.log.Info("fault: primary stopped hard, standby promoted", "standby", f.svc.standby)
	down, err := f.svc.promote(context.WithoutCancel(ctx))
	if err != nil {
		f.log.Warn("promotion", "err", err)
	}
	f.log.Info("promoted", "primary", f.svc.primary, "writes_refused_for", down.Round(time.Millisecond))
	f.rep.Promotions++
}
