package feed

import (
	"bufio"
	"bytes"
	"io"
	"regexp"
)

// mboxFromRe is a message separator: a full "From addr date" line, as
// public-inbox's reader demands, so a body line "From here on" that a
// sloppy writer left unquoted does not split a message.
var mboxFromRe = regexp.MustCompile(`^From \S+ +\S+ \S+ +\S+ [^\n:]+:[^\n:]+:[^\n:]+ [^\n:]+\r?\n$`)

// mboxQuotedFromRe matches a body line mboxrd quoted: >From, >>From ...
var mboxQuotedFromRe = regexp.MustCompile(`^>+From `)

// splitMbox reads an mboxrd stream whose first byte is at offset base and
// calls fn for each message with the offsets of its From line and of the
// byte after it, the From line, and the message with the From line dropped, one `>`
// removed from quoted From lines and the separating blank line removed.
// Text before the first From line is not a message and is ignored.
func splitMbox(r io.Reader, base int64, fn func(start, end int64, from, raw []byte) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var msg bytes.Buffer
	var from []byte
	start, off := int64(-1), base
	flush := func(end int64) error {
		if start < 0 {
			return nil
		}
		b := msg.Bytes()
		switch { // the blank line before the next From line
		case bytes.HasSuffix(b, []byte("\n\r\n")):
			b = b[:len(b)-2]
		case bytes.HasSuffix(b, []byte("\n\n")):
			b = b[:len(b)-1]
		}
		raw := bytes.Clone(b)
		msg.Reset()
		if len(bytes.TrimSpace(raw)) == 0 {
			return nil
		}
		return fn(start, end, from, raw)
	}
	for {
		line, err := br.ReadBytes('\n')
		if n := int64(len(line)); n > 0 {
			if mboxFromRe.Match(line) {
				if ferr := flush(off); ferr != nil {
					return ferr
				}
				start, from = off, bytes.Clone(line)
			} else if start >= 0 {
				if mboxQuotedFromRe.Match(line) {
					line = line[1:]
				}
				msg.Write(line)
			}
			off += n
		}
		if err == io.EOF {
			return flush(off)
		}
		if err != nil {
			return err
		}
	}
}
