// Package feed reads raw mail from the places the lists are archived and
// hands it on exactly once, surviving crashes and restarts.
//
// A Source yields Items: the raw RFC 5322 bytes of one message as archived,
// the list it came from, when it was received, where it sits in the source,
// and whether it is a deletion (a public-inbox `d` blob) rather than new
// mail. Sources:
//
//   - Git: a public-inbox v2 archive, the default. A local inbox directory
//     (git/N.git epochs), a single bare epoch repository, or a lore URL that
//     is mirrored with go-git (epochs found through manifest.js.gz).
//   - IMAP: a public-inbox-imapd server (mailboxes <newsgroup>.<K>).
//   - Mbox, EMLDir: local files.
//   - HTTPClient.FetchThread: one thread by Message-ID over HTTP, for manual triggers
//     (not a Source: it has no position to resume from).
//
// Every Source resumes from an opaque checkpoint string. Pump drives one
// source with a Checkpoints store: it saves an item's checkpoint only after
// the consumer's callback returned nil for it, so a crash never loses a
// message, and a restart never repeats one that was acknowledged. The
// consumer must therefore return nil only once the item is durably its
// own (stored, or reproducible); mail kept only in memory is gone after a
// crash. A consumer that wants exactly-once across its own state saves the
// checkpoint in the same transaction as its work (a database-backed
// Checkpoints whose Save joins that transaction).
//
// Errors say whose fault a failure is: a *SourceError is the archive's or
// the network's (retry later, nothing is lost); an error wrapped with Skip
// is the message's (logged, acknowledged, never retried); ErrBotWall and
// ErrCheckpointLost name specific infrastructure states.
//
// A consumer builds its sources and pumps each, once (`rdmabot lore
// scan`, with MemCheckpoints) or on every poll (serve's ingest job stores
// the mail and its checkpoints in the database and backs off a failing
// list on its own). Pump logs and skips bad items instead of stalling:
//
//	src := &feed.Git{List: "linux-rdma", Dir: dir, URL: url}
//	_, err := feed.Pump(ctx, src, cps, feed.PumpOptions{Log: log}, func(ctx context.Context, it feed.Item) error {
//		if it.Deleted {
//			return assembler.ForgetRaw(it.Raw)
//		}
//		if err := assembler.AddRaw(it.Raw, it.Received); err != nil {
//			return feed.Skip(err) // the mail is bad: log, go on
//		}
//		return nil // any other error stops the pump: read again next time
//	})
package feed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"
)

// Item is one message read from a source.
type Item struct {
	// List is the list name the source was configured with (linux-rdma).
	List string
	// Raw is the message as archived: RFC 5322 bytes, no mbox From line.
	Raw []byte
	// Received is when the archive got the message: the public-inbox
	// commit time, the IMAP INTERNALDATE, or the file's modification time.
	// The Date header is the sender's claim and may be anything.
	Received time.Time
	// Pos says where the message sits in its source, for logs and links:
	// "1:<commit>" (epoch and commit), "<mailbox>/<uid>", a file path.
	Pos string
	// Deleted marks a removal: Raw is the message the archive deleted
	// (public-inbox blob `d`, or a purged message after a history rewrite).
	Deleted bool
	// Checkpoint is the source's resume state once this item is handled.
	Checkpoint string
	// Err is set when the source found a message it cannot read (its
	// object is missing from the archive or corrupt, or too big to
	// read): Raw is then nil. Pump never hands such an item to the
	// consumer; it logs it, counts it as Unreadable and saves its
	// Checkpoint, so one bad object never stops a read. A source that
	// can try the message again later (Git) keeps it in its checkpoint.
	Err error
}

// Source is one place mail arrives.
type Source interface {
	// Key names the source in a Checkpoints store; it must be stable
	// across restarts and unique among a consumer's sources.
	Key() string
	// Read calls yield for every item after the checkpoint `after` ("" is
	// the source's beginning), in archive order. It stops at the first
	// error yield returns and returns it. On success it returns the
	// checkpoint after everything it read: never behind the last item's,
	// possibly past it (when it passed over something that was not mail).
	Read(ctx context.Context, after string, yield func(Item) error) (string, error)
}

// Checkpoints stores one opaque checkpoint per source key.
type Checkpoints interface {
	// Load returns the saved checkpoint, "" if none.
	Load(ctx context.Context, key string) (string, error)
	// Save replaces the checkpoint durably before it returns.
	Save(ctx context.Context, key, checkpoint string) error
}

// DefaultMaxSize is the largest message Pump passes on (10 MiB); lore's
// own limit is lower, so anything bigger is broken input.
const DefaultMaxSize = 10 << 20

// ErrSkip marks a consumer error that concerns the message itself (it
// cannot be parsed, it is not mail): Pump logs it and goes on. Wrap with
// Skip.
var ErrSkip = errors.New("skipped bad message")

// Skip marks err as a property of the message: Pump logs it, acknowledges
// the item and goes on, instead of retrying it forever.
func Skip(err error) error { return fmt.Errorf("%w: %w", ErrSkip, err) }

// SourceError is a failure to read a source (network, archive, server):
// the infrastructure's fault, not the mail's. Nothing was lost; the next
// pump retries from the last checkpoint.
type SourceError struct {
	Source string
	Err    error
}

func (e *SourceError) Error() string { return fmt.Sprintf("source %s: %v", e.Source, e.Err) }
func (e *SourceError) Unwrap() error { return e.Err }

// PumpOptions tunes Pump. The zero value is usable.
type PumpOptions struct {
	// MaxSize caps Raw; larger items are logged and skipped.
	// 0 means DefaultMaxSize.
	MaxSize int
	// Log receives skipped items; nil discards.
	Log *slog.Logger
}

// PumpStats counts what one Pump did.
type PumpStats struct {
	Delivered int // consumer returned nil
	Skipped   int // too big, ErrSkip, or the consumer panicked
	// Unreadable counts items the source could not read (Item.Err):
	// missing or corrupt archive objects. They are never fatal.
	Unreadable int
}

// Pump reads src from its saved checkpoint and calls consume for each
// item, saving the item's checkpoint after consume returned nil (or an
// ErrSkip error: the item is bad, and re-reading it would not help).
// Any other consume error stops the pump without saving, so the item is
// read again next time. A panic in consume is recovered and treated as a
// bad item: one malformed mail must not take the poller down.
func Pump(ctx context.Context, src Source, cps Checkpoints, opts PumpOptions, consume func(context.Context, Item) error) (PumpStats, error) {
	var st PumpStats
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	maxSize := opts.MaxSize
	if maxSize <= 0 {
		maxSize = DefaultMaxSize
	}
	key := src.Key()
	from, err := cps.Load(ctx, key)
	if err != nil {
		return st, fmt.Errorf("load checkpoint of %s: %w", key, err)
	}
	saved := from
	save := func(cp string) error {
		if cp == saved || cp == "" {
			return nil
		}
		if err := cps.Save(ctx, key, cp); err != nil {
			return fmt.Errorf("save checkpoint of %s: %w", key, err)
		}
		saved = cp
		return nil
	}
	final, err := src.Read(ctx, from, func(it Item) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if it.Err != nil {
			st.Unreadable++
			log.Warn("feed: skipped a message the source cannot read", "source", key, "pos", it.Pos, "err", it.Err)
			return save(it.Checkpoint)
		}
		var cerr error
		if len(it.Raw) > maxSize {
			cerr = Skip(fmt.Errorf("message of %d bytes is over the %d byte cap", len(it.Raw), maxSize))
		} else {
			cerr = consumeSafely(ctx, consume, it)
		}
		switch {
		case cerr == nil:
			st.Delivered++
		case errors.Is(cerr, ErrSkip):
			st.Skipped++
			log.Warn("feed: skipped a bad message", "source", key, "pos", it.Pos, "reason", cerr)
		default:
			return cerr
		}
		return save(it.Checkpoint)
	})
	if err != nil {
		return st, err
	}
	return st, save(final)
}

func consumeSafely(ctx context.Context, consume func(context.Context, Item) error, it Item) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = Skip(fmt.Errorf("consumer panicked: %v\n%s", r, debug.Stack()))
		}
	}()
	return consume(ctx, it)
}
