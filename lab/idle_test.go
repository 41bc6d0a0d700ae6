package lab

import (
	"context"
	"fmt"
)

// Helpers only the SSH driver's tests use: they boot the QEMU pair idle
// and add the test's keys to its image.

// idlePair is a booted pair left to an outside driver (the SSH driver's
// tests): its consoles keep being read until stop.
type idlePair struct {
	r    *run
	quit chan struct{}
	done chan struct{}
}

// startIdle boots both guests in idle mode and returns once both are up.
func (p *QEMUPair) startIdle(ctx context.Context, k Kernel) (*idlePair, error) {
	p.idle = true
	initrd, err := p.initrd(ctx, DefaultTest())
	if err != nil {
		return nil, err
	}
	r := &run{pair: p, test: DefaultTest(), kernel: k, initrd: initrd, events: make(chan consoleEvent, 1024)}
	r.init()
	if err := r.launch(ctx); err != nil {
		r.stop()
		return nil, err
	}
	r.loop(ctx)
	if !r.has("server", "IDLE") || !r.has("client", "IDLE") {
		r.stop()
		return nil, fmt.Errorf("idle pair did not come up:\n%s\n%s", tail(r.consoles["server"].String(), 20), tail(r.consoles["client"].String(), 20))
	}
	ip := &idlePair{r: r, quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(ip.done)
		for {
			select {
			case ev := <-r.events:
				r.handle(ev)
			case <-ip.quit:
				return
			}
		}
	}()
	return ip, nil
}

// stop ends both guests and returns their consoles.
func (ip *idlePair) stop() (server, client string) {
	close(ip.quit)
	<-ip.done
	ip.r.stop()
	return ip.r.consoles["server"].String(), ip.r.consoles["client"].String()
}

// dir adds a directory.
func (c *cpioWriter) dir(name string, mode uint32) error {
	return c.header(name, cpioDir|mode, 0, 0, 0)
}
