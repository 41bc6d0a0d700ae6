package store

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/rdmabot/rdmabot/internal/redact"
)

// Health is how the last reads of one source went: a mail list, or a
// kernel tree fetched from its URL; or whether the build sandbox's
// limits applied when serve started. Operators see it on the dashboard
// and in rdmabot status; the bot uses it to back off and to spot stale
// trees.
type Health struct {
	Kind string `json:"kind"` // "list", "tree" or "sandbox"
	Name string `json:"name"`
	// At is the last attempt; OK its outcome, Err its error.
	At  time.Time `json:"at"`
	OK  bool      `json:"ok"`
	Err string    `json:"err,omitempty"`
	// Failures counts failed attempts in a row, since Since.
	Failures int       `json:"failures,omitempty"`
	Since    time.Time `json:"since,omitzero"`
	// LastOK is the last attempt that worked.
	LastOK time.Time     `json:"last_ok,omitzero"`
	Took   time.Duration `json:"took"`
}

const healthPrefix = "health/"

// RecordHealth stores the outcome of one attempt to read a source,
// keeping its run of failures.
func (s *Store) RecordHealth(ctx context.Context, q Querier, kind, name string, took time.Duration, err error) (Health, error) {
	h, _, gerr := s.health(ctx, q, kind, name)
	if gerr != nil {
		return Health{}, gerr
	}
	now := s.now()
	h.Kind, h.Name, h.At, h.Took = kind, name, now, took
	if err == nil {
		h.OK, h.Err, h.Failures, h.Since, h.LastOK = true, "", 0, time.Time{}, now
	} else {
		if h.Failures == 0 {
			h.Since = now
		}
		// Shown on the dashboard and by rdmabot status: the URLs a
		// fetch error quotes lose their passwords.
		h.OK, h.Err = false, redact.URLs(err.Error())
		h.Failures++
	}
	b, merr := json.Marshal(h)
	if merr != nil {
		return Health{}, merr
	}
	return h, s.SetCheckpoint(ctx, q, healthPrefix+kind+"/"+name, string(b))
}

// HealthOf returns one source's record (found false when never read).
func (s *Store) HealthOf(ctx context.Context, q Querier, kind, name string) (Health, bool, error) {
	return s.health(ctx, q, kind, name)
}

func (s *Store) health(ctx context.Context, q Querier, kind, name string) (Health, bool, error) {
	v, err := s.Checkpoint(ctx, q, healthPrefix+kind+"/"+name)
	if err != nil || v == "" {
		return Health{Kind: kind, Name: name}, false, err
	}
	var h Health
	if err := json.Unmarshal([]byte(v), &h); err != nil {
		return Health{}, false, fmt.Errorf("store: health of %s %s: %w", kind, name, err)
	}
	return h, true, nil
}

// Healths lists every source's record, lists first, by name.
func (s *Store) Healths(ctx context.Context, q Querier) ([]Health, error) {
	rows, err := q.QueryContext(ctx, `SELECT source, value FROM checkpoints WHERE source LIKE $1`, healthPrefix+"%")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Health
	for rows.Next() {
		var src, v string
		if err := rows.Scan(&src, &v); err != nil {
			return nil, err
		}
		var h Health
		if err := json.Unmarshal([]byte(v), &h); err != nil {
			return nil, fmt.Errorf("store: %s: %w", strings.TrimPrefix(src, healthPrefix), err)
		}
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Name < out[j].Name
	})
	return out, rows.Err()
}
