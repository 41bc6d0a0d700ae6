package feed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// FileCheckpoints keeps every source's checkpoint in one JSON file,
// replaced atomically (write, fsync, rename, fsync the directory) on each
// Save, so a crash leaves either the old or the new state, never a torn
// file. It is for the CLI and single-process use; bot stores checkpoints
// in its database.
type FileCheckpoints struct {
	path string
	mu   sync.Mutex
	cps  map[string]string
}

// OpenFileCheckpoints reads path, or starts empty when it does not exist.
func OpenFileCheckpoints(path string) (*FileCheckpoints, error) {
	f := &FileCheckpoints{path: path, cps: map[string]string{}}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return f, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoints: %w", err)
	}
	if err := json.Unmarshal(b, &f.cps); err != nil {
		return nil, fmt.Errorf("checkpoints %s: %w", path, err)
	}
	return f, nil
}

// Load implements Checkpoints.
func (f *FileCheckpoints) Load(_ context.Context, key string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cps[key], nil
}

// Save implements Checkpoints.
func (f *FileCheckpoints) Save(_ context.Context, key, cp string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	next := make(map[string]string, len(f.cps)+1)
	for k, v := range f.cps {
		next[k] = v
	}
	next[key] = cp
	b, err := json.MarshalIndent(next, "", "\t")
	if err != nil {
		return err
	}
	if err := writeFileAtomic(f.path, append(b, '\n')); err != nil {
		return fmt.Errorf("checkpoints: %w", err)
	}
	f.cps = next
	return nil
}

func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

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
