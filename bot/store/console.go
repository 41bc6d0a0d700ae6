package store

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"regexp"
)

// PutConsole keeps a guest's whole serial console and returns its name:
// the hash of its text, so a console stored twice is kept once. Consoles
// are kept in the database, not on a worker's disk, so that any machine
// serving the dashboard can show them.
func (s *Store) PutConsole(ctx context.Context, text string) (string, error) {
	sum := sha256.Sum256([]byte(text))
	id := hex.EncodeToString(sum[:16])
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	if _, err := io.WriteString(w, text); err != nil {
		return "", err
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	_, err := s.DB.ExecContext(ctx, `INSERT INTO consoles (id, gz, created_at) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING`,
		id, gz.Bytes(), ms(s.now()))
	if err != nil {
		return "", fmt.Errorf("store console: %w", err)
	}
	return id, nil
}

var consoleID = regexp.MustCompile(`^[0-9a-f]{32}$`)

// Console is the console PutConsole stored as id.
func (s *Store) Console(ctx context.Context, id string) (string, error) {
	r, err := s.OpenConsole(ctx, id)
	if err != nil {
		return "", err
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return "", fmt.Errorf("console %s: %w", id, err)
	}
	return string(b), nil
}

// OpenConsole reads the console stored as id as it is uncompressed: a
// request for it holds the compressed text and gzip's window, never the
// whole text.
func (s *Store) OpenConsole(ctx context.Context, id string) (io.Reader, error) {
	gz, err := s.ConsoleGzip(ctx, id)
	if err != nil {
		return nil, err
	}
	r, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, fmt.Errorf("console %s: %w", id, err)
	}
	return r, nil
}

// ConsoleGzip is the console stored as id as it is kept, gzipped: what a
// reader who takes gzip is sent, with nothing inflated.
func (s *Store) ConsoleGzip(ctx context.Context, id string) ([]byte, error) {
	if !consoleID.MatchString(id) {
		return nil, fmt.Errorf("console %q: %w", id, ErrNotFound)
	}
	var gz []byte
	err := s.DB.QueryRowContext(ctx, `SELECT gz FROM consoles WHERE id = $1`, id).Scan(&gz)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("console %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	return gz, nil
}
