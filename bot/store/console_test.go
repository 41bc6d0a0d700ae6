package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

// A console is kept once under the hash of its text and read back whole;
// names that are not a stored console's are not found.
func TestConsoles(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		text := strings.Repeat("[    0.000000] Linux version 6.12.57 (root@rdmabot)\n", 500) + "INFO: task kworker/u8:1 blocked for more than 20 seconds.\n"
		id, err := s.PutConsole(ctx, text)
		if err != nil {
			t.Fatal(err)
		}
		again, err := s.PutConsole(ctx, text)
		if err != nil || again != id {
			t.Fatalf("the same console twice: %s, %s (%v)", id, again, err)
		}
		got, err := s.Console(ctx, id)
		if err != nil || got != text {
			t.Fatalf("read back: %d bytes of %d (%v)", len(got), len(text), err)
		}
		var n int
		if err := s.DB.QueryRowContext(ctx, `SELECT COUNT(*) FROM consoles`).Scan(&n); err != nil || n != 1 {
			t.Fatalf("%d rows (%v), want 1", n, err)
		}
		empty, err := s.PutConsole(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		if got, err := s.Console(ctx, empty); err != nil || got != "" {
			t.Fatalf("an empty console: %q %v", got, err)
		}
		broken := strings.Repeat("b", 32)
		if _, err := s.DB.ExecContext(ctx, `INSERT INTO consoles (id, gz, created_at) VALUES ($1, $2, 0)`, broken, []byte("not gzip")); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Console(ctx, broken); err == nil || errors.Is(err, ErrNotFound) {
			t.Errorf("a damaged console: %v, want an error that is not a not-found", err)
		}
		for _, bad := range []string{"", "../etc/passwd", strings.Repeat("0", 32), strings.ToUpper(id)} {
			if _, err := s.Console(ctx, bad); !errors.Is(err, ErrNotFound) {
				t.Errorf("console %q: %v, want not found", bad, err)
			}
		}
	})
}

// BenchmarkConsoleRead serves an 8 MiB console (a boot's most) both
// ways: read whole into one string, and streamed as the dashboard
// serves it. B/op is the ratio to read.
func BenchmarkConsoleRead(b *testing.B) {
	s, err := Open(context.Background(), "", b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	var text strings.Builder
	for i := 0; text.Len() < 8<<20; i++ {
		fmt.Fprintf(&text, "[%6d.%06d] svcrdma: line %d of a flooding kernel\n", i/1000, i%1000, i)
	}
	id, err := s.PutConsole(ctx, text.String())
	if err != nil {
		b.Fatal(err)
	}
	b.Run("whole", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			t, err := s.Console(ctx, id)
			if err != nil || len(t) != text.Len() {
				b.Fatal(len(t), err)
			}
		}
	})
	b.Run("streamed", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			r, err := s.OpenConsole(ctx, id)
			if err != nil {
				b.Fatal(err)
			}
			if n, err := io.Copy(io.Discard, r); err != nil || n != int64(text.Len()) {
				b.Fatal(n, err)
			}
		}
	})
}
