package feed

import (
	"context"
	"sync"
)

// MemCheckpoints keeps checkpoints in memory: for a one-off scan and tests.
type MemCheckpoints struct {
	mu  sync.Mutex
	cps map[string]string
}

// Load implements Checkpoints.
func (m *MemCheckpoints) Load(_ context.Context, key string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cps[key], nil
}

// Save implements Checkpoints.
func (m *MemCheckpoints) Save(_ context.Context, key, cp string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cps == nil {
		m.cps = map[string]string{}
	}
	m.cps[key] = cp
	return nil
}
