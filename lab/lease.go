package lab

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Leases reserve real hosts. A lease is a file per host in one directory,
// written under a lock on the directory, so both hosts of a pair are
// taken together or not at all; a lease expires on its own, so the hosts
// of a bot that died are free again.
type Leases struct {
	Dir string
	Now func() time.Time
}

type leaseFile struct {
	Holder  string    `json:"holder"`
	Expires time.Time `json:"expires"`
}

// ErrBusy means a host is leased to someone else.
var ErrBusy = errors.New("host is leased")

// Lease is a held reservation.
type Lease struct {
	l      *Leases
	holder string
	hosts  []string
}

func (l *Leases) path(host string) string {
	return filepath.Join(l.Dir, strings.NewReplacer("/", "_", ":", "_").Replace(host)+".lease")
}

func (l *Leases) lock() (func(), error) {
	if err := os.MkdirAll(l.Dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(l.Dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}

// Acquire leases all hosts to holder for ttl, or none of them.
func (l *Leases) Acquire(holder string, ttl time.Duration, hosts ...string) (*Lease, error) {
	unlock, err := l.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	now := l.Now()
	for _, h := range hosts {
		b, err := os.ReadFile(l.path(h))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var lf leaseFile
		if err := json.Unmarshal(b, &lf); err != nil {
			return nil, fmt.Errorf("lease of %s: %w", h, err)
		}
		if lf.Holder != holder && now.Before(lf.Expires) {
			return nil, fmt.Errorf("%w: %s by %s until %s", ErrBusy, h, lf.Holder, lf.Expires.Format(time.RFC3339))
		}
	}
	b, _ := json.Marshal(leaseFile{Holder: holder, Expires: now.Add(ttl)})
	for _, h := range hosts {
		tmp := l.path(h) + ".tmp"
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			return nil, err
		}
		if err := os.Rename(tmp, l.path(h)); err != nil {
			return nil, err
		}
	}
	return &Lease{l: l, holder: holder, hosts: hosts}, nil
}

// Release frees the hosts this lease still holds.
func (le *Lease) Release() error {
	unlock, err := le.l.lock()
	if err != nil {
		return err
	}
	defer unlock()
	var errs []error
	for _, h := range le.hosts {
		b, err := os.ReadFile(le.l.path(h))
		if err != nil {
			continue
		}
		var lf leaseFile
		if json.Unmarshal(b, &lf) == nil && lf.Holder == le.holder {
			errs = append(errs, os.Remove(le.l.path(h)))
		}
	}
	return errors.Join(errs...)
}
