package lore

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"strings"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/htmlindex"
	"golang.org/x/text/encoding/ianaindex"
	"golang.org/x/text/transform"

	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/internal/gitmail"
)

// maxMIMEDepth bounds nested multiparts; real mail nests two or three.
const maxMIMEDepth = 16

// decodeBody returns the text a patch tool sees in a body: for a single
// part, the whole part decoded; for a multipart, every text part except
// HTML, in order (git mailinfo reads attached .patch files as well as
// the inline text). CRLF line ends become LF first, as git mailsplit
// does before mailinfo decodes. Like mailinfo, only the text before the
// patch is converted to UTF-8: the patch keeps the bytes of the files it
// changes.
func decodeBody(h flow.Header, body []byte, depth int) (string, error) {
	inPatch := false
	return decodePart(h, body, depth, &inPatch)
}

func decodePart(h flow.Header, body []byte, depth int, inPatch *bool) (string, error) {
	if depth > maxMIMEDepth {
		return "", fmt.Errorf("multipart nested deeper than %d", maxMIMEDepth)
	}
	if bytes.IndexByte(body, '\r') >= 0 {
		body = bytes.ReplaceAll(body, []byte("\r\n"), []byte("\n"))
	}
	mediaType, params := contentType(h.Get("Content-Type"))
	if strings.HasPrefix(mediaType, "multipart/") && params["boundary"] != "" {
		parts, err := splitMultipart(body, params["boundary"])
		if err != nil {
			return "", err
		}
		var sb strings.Builder
		for _, p := range parts {
			ph, pb, err := splitPart(p)
			if err != nil {
				return "", fmt.Errorf("MIME part: %w", err)
			}
			pt, _ := contentType(ph.Get("Content-Type"))
			if !strings.HasPrefix(pt, "multipart/") && !textPart(pt) && !patchFile(partFilename(ph)) {
				continue
			}
			s, err := decodePart(ph, pb, depth+1, inPatch)
			if err != nil {
				return "", err
			}
			if sb.Len() > 0 && !strings.HasSuffix(sb.String(), "\n") {
				sb.WriteByte('\n')
			}
			sb.WriteString(s)
		}
		return sb.String(), nil
	}
	b, err := decodeTransfer(h.Get("Content-Transfer-Encoding"), body)
	if err != nil {
		return "", err
	}
	if strings.EqualFold(params["format"], "flowed") {
		b = unflow(b, strings.EqualFold(params["delsp"], "yes"))
	}
	if *inPatch {
		return string(b), nil
	}
	cut := gitmail.PatchBreak(b)
	if cut >= 0 {
		*inPatch = true
	}
	if cut < 0 || lookupCharset(params["charset"]) == nil {
		// Nothing to convert: one copy of the body, not three.
		return toUTF8(b, params["charset"]), nil
	}
	return toUTF8(b[:cut], params["charset"]) + string(b[cut:]), nil
}

// unflow undoes format=flowed (RFC 3676) as git mailinfo does
// (handle_filter_flowed): a line ending in a space is joined with the
// next, without that space when delsp=yes; a leading space (stuffing)
// is dropped; the "-- " signature line stays as it is. Unlike git, it
// never joins lines of different quote depth, as RFC 3676 says: a
// quoted "> " line ending in a space would otherwise swallow the
// reviewer's unquoted Reviewed-by: below it.
func unflow(b []byte, delsp bool) []byte {
	out := make([]byte, 0, len(b)+1)
	var prev []byte
	depth := 0 // the quote depth of prev
	flush := func() {
		if len(prev) > 0 {
			out = append(append(out, prev...), '\n')
			prev = prev[:0]
		}
	}
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if string(line) == "-- " {
			flush()
			out = append(append(out, line...), '\n')
			continue
		}
		if d := quoteDepth(line); d != depth {
			flush()
			depth = d
		}
		if len(line) > 0 && line[0] == ' ' {
			line = line[1:]
		}
		if len(line) > 0 && line[len(line)-1] == ' ' {
			if delsp {
				line = line[:len(line)-1]
			}
			prev = append(prev, line...)
			continue
		}
		out = append(append(append(out, prev...), line...), '\n')
		prev = prev[:0]
	}
	flush()
	return out
}

// quoteDepth counts the '>' that start a line (RFC 3676's quote depth).
func quoteDepth(line []byte) int {
	n := 0
	for n < len(line) && line[n] == '>' {
		n++
	}
	return n
}

// textPart says whether a MIME part carries text a patch reader wants.
func textPart(mediaType string) bool {
	switch mediaType {
	case "text/html", "text/enriched", "text/richtext":
		return false
	}
	return strings.HasPrefix(mediaType, "text/") || mediaType == "application/x-patch" || mediaType == "application/x-diff"
}

// patchFile says whether an attachment's name marks a patch, whatever
// type the mailer gave it (application/octet-stream is common).
func patchFile(name string) bool {
	name = strings.ToLower(name)
	return strings.HasSuffix(name, ".patch") || strings.HasSuffix(name, ".diff")
}

// contentType parses a Content-Type leniently: text/plain when absent,
// and a best-effort read of the parameters when mime rejects them.
func contentType(v string) (string, map[string]string) {
	if v == "" {
		return "text/plain", map[string]string{}
	}
	mt, params, err := mime.ParseMediaType(v)
	if err == nil {
		return mt, params
	}
	params = map[string]string{}
	fields := strings.Split(v, ";")
	mt = strings.ToLower(strings.TrimSpace(fields[0]))
	if mt == "" || !strings.Contains(mt, "/") {
		mt = "text/plain"
	}
	for _, f := range fields[1:] {
		k, val, ok := strings.Cut(f, "=")
		if !ok {
			continue
		}
		params[strings.ToLower(strings.TrimSpace(k))] = strings.Trim(strings.TrimSpace(val), `"`)
	}
	return mt, params
}

// splitMultipart returns the parts between the boundary lines.
func splitMultipart(body []byte, boundary string) ([][]byte, error) {
	delim := []byte("--" + boundary)
	var parts [][]byte
	// A part is the lines between two boundary lines, a slice of body
	// (not a copy), capped so that appending to it cannot touch body.
	start := -1
	in, closed := false, false
	off := 0
	for off < len(body) {
		line := body[off:]
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			line = line[:i+1]
		}
		lineStart := off
		off += len(line)
		trimmed := bytes.TrimRight(line, " \t\n")
		if bytes.HasPrefix(trimmed, delim) {
			tail := trimmed[len(delim):]
			if len(tail) == 0 || bytes.Equal(tail, []byte("--")) {
				if in {
					// The line break before a boundary belongs to it.
					parts = append(parts, bytes.TrimSuffix(body[start:lineStart:lineStart], []byte("\n")))
				}
				start = off
				in = true
				if len(tail) == 2 {
					closed = true
					break
				}
				continue
			}
		}
	}
	if !in {
		return nil, fmt.Errorf("multipart boundary %q never appears", boundary)
	}
	if !closed && start < len(body) {
		// Truncated mail: keep what arrived rather than lose the patch.
		parts = append(parts, body[start:])
	}
	return parts, nil
}

// splitPart splits a MIME part into its header and body. A part may
// have no header at all (it then starts with the blank line).
func splitPart(p []byte) (flow.Header, []byte, error) {
	if len(p) == 0 {
		return nil, nil, nil
	}
	if p[0] == '\n' {
		return nil, p[1:], nil
	}
	h, b, err := splitHeader(p)
	if err != nil {
		var me *MalformedError
		if errors.As(err, &me) {
			return nil, nil, errors.New(me.Reason)
		}
		return nil, nil, err
	}
	return h, b, nil
}

// decodeTransfer undoes a Content-Transfer-Encoding.
func decodeTransfer(cte string, b []byte) ([]byte, error) {
	switch strings.ToLower(strings.TrimSpace(cte)) {
	case "quoted-printable":
		return decodeQP(b), nil
	case "base64":
		clean := make([]byte, 0, len(b))
		for _, c := range b {
			switch c {
			case ' ', '\t', '\r', '\n':
			default:
				clean = append(clean, c)
			}
		}
		clean = bytes.TrimRight(clean, "=")
		out := make([]byte, base64.RawStdEncoding.DecodedLen(len(clean)))
		n, err := base64.RawStdEncoding.Decode(out, clean)
		if err != nil {
			return nil, fmt.Errorf("bad base64 body: %v", err)
		}
		return out[:n], nil
	}
	// 7bit, 8bit, binary, absent or unknown: the bytes as sent.
	return b, nil
}

// decodeQP decodes quoted-printable the way git mailinfo does: "=XX"
// becomes the byte, "=" at a line end joins the lines, and anything
// else (a stray "=") is kept as written instead of failing.
func decodeQP(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c != '=' {
			out = append(out, c)
			continue
		}
		if i+1 < len(b) && b[i+1] == '\n' {
			i++
			continue
		}
		if i+2 < len(b) {
			if hi, ok := unhex(b[i+1]); ok {
				if lo, ok := unhex(b[i+2]); ok {
					out = append(out, hi<<4|lo)
					i += 2
					continue
				}
			}
		}
		// "=" followed by trailing blanks then a line end is a soft
		// break too (RFC 2045 §6.7: transport may add blanks).
		j := i + 1
		for j < len(b) && (b[j] == ' ' || b[j] == '\t') {
			j++
		}
		if j < len(b) && b[j] == '\n' && j > i+1 {
			i = j
			continue
		}
		out = append(out, c)
	}
	return out
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// lookupCharset finds a decoder for a MIME charset name, or nil.
func lookupCharset(name string) encoding.Encoding {
	name = strings.ToLower(strings.TrimSpace(name))
	switch name {
	case "", "utf-8", "utf8", "us-ascii", "ascii":
		return nil
	}
	if e, err := ianaindex.MIME.Encoding(name); err == nil && e != nil {
		return e
	}
	if e, err := htmlindex.Get(name); err == nil {
		return e
	}
	return nil
}

// toUTF8 converts text in a declared charset to UTF-8. Without a
// charset, or with one nobody knows, the bytes are kept: git mailinfo
// does the same, and guessing would corrupt a patch.
func toUTF8(b []byte, charset string) string {
	e := lookupCharset(charset)
	if e == nil {
		return string(b)
	}
	out, _, err := transform.Bytes(e.NewDecoder(), b)
	if err != nil {
		return string(b)
	}
	return string(out)
}

// charsetReader serves mime.WordDecoder for non-UTF-8 encoded words.
func charsetReader(charset string, r io.Reader) (io.Reader, error) {
	e := lookupCharset(charset)
	if e == nil {
		switch strings.ToLower(charset) {
		case "utf-8", "utf8", "us-ascii", "ascii":
			return r, nil
		}
		return nil, fmt.Errorf("unknown charset %q", charset)
	}
	return transform.NewReader(r, e.NewDecoder()), nil
}
