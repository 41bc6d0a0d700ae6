package store

import (
	"context"
	"time"
)

// Beat records that the process id is alive now.
func (s *Store) Beat(ctx context.Context, id string) error {
	_, err := s.DB.ExecContext(ctx, `INSERT INTO workers (id, beat_at) VALUES ($1, $2)
		ON CONFLICT (id) DO UPDATE SET beat_at = excluded.beat_at`, id, ms(s.now()))
	return err
}

// Beats returns each process's last heartbeat.
func (s *Store) Beats(ctx context.Context) (map[string]time.Time, error) {
	rows, err := s.DB.QueryContext(ctx, `SELECT id, beat_at FROM workers`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]time.Time{}
	for rows.Next() {
		var id string
		var at int64
		if err := rows.Scan(&id, &at); err != nil {
			return nil, err
		}
		out[id] = Time(at)
	}
	return out, rows.Err()
}
