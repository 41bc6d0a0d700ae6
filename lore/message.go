package lore

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"mime"
	"net/mail"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/rdmabot/rdmabot/flow"
)

// DefaultMaxMessageSize is the largest raw message ParseMessage accepts.
// Real patch mail is far smaller; anything bigger is a generated header
// dump or an attack, and reading it would only cost memory.
const DefaultMaxMessageSize = 10 << 20

// MalformedError says a message cannot be read. It is the mail's fault,
// never the bot's: the message is logged with the reason and skipped.
type MalformedError struct {
	// MessageID is the id if it could be read before the failure.
	MessageID string
	// Reason says what is wrong, for the log.
	Reason string
}

func (e *MalformedError) Error() string {
	if e.MessageID != "" {
		return fmt.Sprintf("malformed message <%s>: %s", e.MessageID, e.Reason)
	}
	return "malformed message: " + e.Reason
}

// ParseMessage parses one raw RFC 5322 message of at most
// DefaultMaxMessageSize bytes. A leading mbox "From " line is skipped.
// Errors are *MalformedError.
func ParseMessage(raw []byte) (*flow.Message, error) {
	return ParseMessageLimit(raw, DefaultMaxMessageSize)
}

// ParseMessageLimit is ParseMessage with another size cap (<= 0: none).
func ParseMessageLimit(raw []byte, maxSize int) (*flow.Message, error) {
	if maxSize > 0 && len(raw) > maxSize {
		return nil, &MalformedError{Reason: fmt.Sprintf("%d bytes, over the %d byte cap", len(raw), maxSize)}
	}
	hdr, body, err := splitHeader(raw)
	if err != nil {
		return nil, err
	}
	m := &flow.Message{Header: hdr, Raw: raw}
	for _, v := range hdr.Values("Message-ID") {
		m.MessageIDs = appendUnique(m.MessageIDs, extractIDs(v, true)...)
	}
	if f, ok := hdr.Field("Subject"); ok {
		m.RawSubject = f.Raw
		m.Subject = decodeWords(f.Value())
	}
	m.From = firstAddress(hdr.Get("From"))
	if m.From.Email == "" {
		m.From = firstAddress(hdr.Get("Sender"))
	}
	for _, v := range hdr.Values("To") {
		m.To = append(m.To, parseAddressList(v)...)
	}
	for _, v := range hdr.Values("Cc") {
		m.Cc = append(m.Cc, parseAddressList(v)...)
	}
	m.Date = parseDate(hdr.Get("Date"))
	if r := hdr.Get("Received"); r != "" {
		if i := strings.LastIndexByte(r, ';'); i >= 0 {
			m.ReceivedAt = parseDate(r[i+1:])
		}
	}
	for _, v := range hdr.Values("List-Id") {
		if ids := extractIDs(v, false); len(ids) > 0 {
			m.ListIDs = appendUnique(m.ListIDs, ids...)
		}
	}
	irt := extractIDs(hdr.Get("In-Reply-To"), false)
	if len(irt) > 0 {
		m.InReplyTo = irt[0]
	}
	var refs []string
	for _, v := range hdr.Values("References") {
		refs = append(refs, extractIDs(v, false)...)
	}
	m.References = references(append(refs, irt...), m.MessageIDs)
	b, err := decodeBody(hdr, body, 0)
	if err != nil {
		id := ""
		if len(m.MessageIDs) > 0 {
			id = m.MessageIDs[0]
		}
		return nil, &MalformedError{MessageID: id, Reason: err.Error()}
	}
	m.Body = b
	if len(m.MessageIDs) == 0 {
		m.MessageIDs = []string{deriveID(m, body)}
		m.DerivedID = true
	}
	m.MessageID = m.MessageIDs[0]
	return m, nil
}

// splitHeader parses the header block and returns the body after the
// blank line (empty when there is none). CRLF and LF are both accepted.
// The header block is copied into one string once; fields are slices of
// it, which keeps parsing cheap for the 40-odd fields of list mail.
func splitHeader(raw []byte) (flow.Header, []byte, error) {
	off := 0
	if bytes.HasPrefix(raw, []byte("From ")) {
		// An mbox separator line, not a header field.
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			off = i + 1
		} else {
			off = len(raw)
		}
	}
	// Find the end of the header: the first empty line.
	end, bodyStart := len(raw), len(raw)
	for i := off; i < len(raw); {
		j := bytes.IndexByte(raw[i:], '\n')
		if j < 0 {
			break
		}
		line := raw[i : i+j]
		if len(line) == 0 || (len(line) == 1 && line[0] == '\r') {
			end, bodyStart = i, i+j+1
			break
		}
		i += j + 1
	}
	block := string(raw[off:end])
	if block == "" {
		if bodyStart < len(raw) || end < len(raw) {
			return nil, nil, &MalformedError{Reason: "no header fields before the body"}
		}
		return nil, nil, &MalformedError{Reason: "empty message"}
	}
	var h flow.Header
	fieldStart := -1 // offset in block of the current field's value
	flush := func(lineEnd int) {
		if len(h) > 0 && fieldStart >= 0 {
			v := strings.TrimSuffix(block[fieldStart:lineEnd], "\r")
			if strings.IndexByte(v, '\r') >= 0 {
				v = strings.ReplaceAll(v, "\r\n", "\n")
			}
			h[len(h)-1].Raw = v
		}
	}
	lineNo := 0
	for i := 0; i < len(block); {
		lineNo++
		j := strings.IndexByte(block[i:], '\n')
		lineEnd := len(block)
		if j >= 0 {
			lineEnd = i + j
		}
		line := strings.TrimSuffix(block[i:lineEnd], "\r")
		switch {
		case line == "":
			// only possible as the block's last line
		case line[0] == ' ' || line[0] == '\t':
			if len(h) == 0 {
				return nil, nil, &MalformedError{Reason: "message starts with a continuation line"}
			}
		default:
			colon := strings.IndexByte(line, ':')
			if colon <= 0 || !validFieldName(line[:colon]) {
				return nil, nil, &MalformedError{Reason: fmt.Sprintf("header line %d is not a field: %q", lineNo, clip([]byte(line), 60))}
			}
			if len(h) > 0 {
				flush(i - 1)
			}
			h = append(h, flow.Field{Name: line[:colon]})
			fieldStart = i + colon + 1
		}
		i = lineEnd + 1
	}
	flush(len(block))
	if end < len(raw) && bodyStart <= len(raw) {
		return h, raw[bodyStart:], nil
	}
	return h, nil, nil
}

func validFieldName(b string) bool {
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c < 33 || c > 126 {
			return false
		}
	}
	return true
}

func clip(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
	}
	return strings.ToValidUTF8(string(b), "?")
}

// extractIDs returns the <...> tokens of a Message-ID-like field. With
// bare set, a value without brackets counts as one id (some mailers
// write Message-ID: foo@bar).
func extractIDs(v string, bare bool) []string {
	var ids []string
	for {
		i := strings.IndexByte(v, '<')
		if i < 0 {
			break
		}
		j := strings.IndexByte(v[i+1:], '>')
		if j < 0 {
			break
		}
		if id := strings.Map(dropSpace, v[i+1:i+1+j]); validID(id) {
			ids = append(ids, id)
		}
		v = v[i+1+j+1:]
	}
	if len(ids) == 0 && bare {
		if id := strings.TrimSpace(v); validID(id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// MaxReferences caps the references kept of one mail: the first (the
// thread's root) and the last MaxReferences-1 (the nearest ancestors).
// Real threads stay far below it; replies copy them into their headers.
const MaxReferences = 256

// references are refs once each, where each first came, without the
// mail's own ids, cut to MaxReferences. A set keeps it linear: looking
// for each id among those before it took 22 s for 160,000 ids.
func references(refs, own []string) []string {
	seen := make(map[string]bool, len(own)+min(len(refs), 4*MaxReferences))
	for _, id := range own {
		seen[id] = true
	}
	out := refs[:0]
	for _, r := range refs {
		if !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	// Copies: the mail must not hold on to the whole header's ids.
	switch {
	case len(out) == 0:
		return nil
	case len(out) > MaxReferences:
		return slices.Concat(out[:1], out[len(out)-(MaxReferences-1):])
	}
	return slices.Clone(out)
}

// MaxIDLength caps a Message-ID in bytes: real ones are under 100, and
// the bot writes ids back into headers, URLs and file names.
const MaxIDLength = 250

// validID refuses what no Message-ID holds and what must never reach a
// header the bot writes: ASCII control characters (a bare CR or a NUL),
// whitespace, angle brackets, and more than MaxIDLength bytes. A refused
// Message-ID leaves the mail with a derived one; a refused reference is
// dropped.
func validID(id string) bool {
	if id == "" || len(id) > MaxIDLength {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c == 0x7f || c == '<' || c == '>' {
			return false
		}
	}
	return true
}

// dropSpace removes whitespace that folding left inside an id.
func dropSpace(r rune) rune {
	switch r {
	case ' ', '\t', '\r', '\n':
		return -1
	}
	return r
}

func appendUnique(list []string, vs ...string) []string {
	for _, v := range vs {
		if !contains(list, v) {
			list = append(list, v)
		}
	}
	return list
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// wordDecoder decodes RFC 2047 words in any charset x/text knows.
var wordDecoder = &mime.WordDecoder{CharsetReader: charsetReader}

// decodeWords decodes RFC 2047 encoded words; a broken word is kept as
// written rather than losing the subject.
func decodeWords(s string) string {
	if !strings.Contains(s, "=?") {
		return s
	}
	d, err := wordDecoder.DecodeHeader(s)
	if err != nil {
		return s
	}
	return d
}

func firstAddress(v string) flow.Address {
	if as := parseAddressList(v); len(as) > 0 {
		return as[0]
	}
	return flow.Address{}
}

// parseAddressList parses an address list, falling back to a lenient
// split when net/mail rejects it (unquoted dots and commas in names,
// trailing commas, raw 8-bit names are all seen on the lists).
func parseAddressList(v string) []flow.Address {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil
	}
	if !strings.ContainsAny(v, "(\\:;") && !strings.Contains(v, "=?") {
		// The usual "Name <addr>, addr" list: net/mail's full parser
		// was a fifth of the parse time and adds nothing here.
		var out []flow.Address
		for _, part := range splitAddresses(v) {
			if a, ok := lenientAddress(part); ok {
				out = append(out, a)
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	p := mail.AddressParser{WordDecoder: wordDecoder}
	if list, err := p.ParseList(v); err == nil {
		out := make([]flow.Address, 0, len(list))
		for _, a := range list {
			out = append(out, flow.Address{Name: a.Name, Email: a.Address})
		}
		return out
	}
	var out []flow.Address
	for _, part := range splitAddresses(v) {
		if a, ok := lenientAddress(part); ok {
			out = append(out, a)
		}
	}
	return out
}

// splitAddresses splits on commas outside quotes and angle brackets.
func splitAddresses(v string) []string {
	var parts []string
	quoted, angle, start := false, false, 0
	for i := 0; i < len(v); i++ {
		switch v[i] {
		case '\\':
			i++
		case '"':
			quoted = !quoted
		case '<':
			if !quoted {
				angle = true
			}
		case '>':
			angle = false
		case ',':
			if !quoted && !angle {
				parts = append(parts, v[start:i])
				start = i + 1
			}
		}
	}
	return append(parts, v[start:])
}

func lenientAddress(s string) (flow.Address, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return flow.Address{}, false
	}
	if i := strings.LastIndexByte(s, '<'); i >= 0 {
		j := strings.IndexByte(s[i:], '>')
		if j < 0 {
			return flow.Address{}, false
		}
		email := strings.TrimSpace(s[i+1 : i+j])
		name := strings.TrimSpace(s[:i])
		name = strings.TrimSpace(strings.Trim(name, `"`))
		name = strings.ReplaceAll(name, `\"`, `"`)
		return flow.Address{Name: decodeWords(name), Email: email}, email != ""
	}
	// addr (Comment Name) or a bare addr.
	if i := strings.IndexByte(s, '('); i > 0 {
		name := strings.TrimSuffix(strings.TrimSpace(s[i+1:]), ")")
		return flow.Address{Name: decodeWords(name), Email: strings.TrimSpace(s[:i])}, true
	}
	if strings.ContainsAny(s, " \t") || !strings.Contains(s, "@") {
		return flow.Address{}, false
	}
	return flow.Address{Email: s}, true
}

// dateLayouts are the Date forms net/mail rejects but mailers send.
var dateLayouts = []string{
	"Mon, 2 Jan 2006 15:04:05 -0700",
	"Mon, 2 Jan 2006 15:04:05 MST",
	"Mon, 2 Jan 2006 15:04 -0700",
	"2 Jan 2006 15:04:05 -0700",
	"Mon, 2 Jan 06 15:04:05 -0700",
	"Mon Jan 2 15:04:05 2006 -0700",
	"Mon Jan 2 15:04:05 2006",
	time.RFC3339,
}

// parseDate reads a Date or Received timestamp; zero when hopeless.
func parseDate(v string) time.Time {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}
	}
	// Nearly every mail uses this exact form, perhaps with a "(UTC)"
	// comment; net/mail tries dozens of layouts before it gets there.
	bare := v
	if i := strings.IndexByte(v, '('); i > 0 {
		bare = strings.TrimSpace(v[:i])
	}
	if t, err := time.Parse("Mon, 2 Jan 2006 15:04:05 -0700", bare); err == nil {
		return t
	}
	if t, err := mail.ParseDate(v); err == nil {
		return t
	}
	v = bare
	v = strings.Join(strings.Fields(v), " ")
	for _, l := range dateLayouts {
		if t, err := time.Parse(l, v); err == nil {
			return t
		}
	}
	return time.Time{}
}

// deriveID makes a Message-ID for a mail without one the way
// public-inbox does (Import::digest2mid over ContentHash::content_digest):
// "<UTC date stamp>.<base64url SHA-256 of the content>@z", the content
// being the references, From, Subject, Date, To, Cc and every MIME leaf
// with its position, file name, description and text. The same mail
// read twice, here or by public-inbox, gets the same id (mail whose text
// has 8-bit bytes but no charset can differ: public-inbox re-encodes
// those).
func deriveID(m *flow.Message, body []byte) string {
	d := sha256.New()
	for _, r := range m.References {
		fmt.Fprintf(d, "ref\x00%s\x00", r)
	}
	h := m.Header
	for _, name := range []string{"From", "Sender"} {
		vs := piValues(h, name)
		for _, v := range vs {
			fmt.Fprintf(d, "%s\x00%s\x00", name, digestAddr(v))
		}
		if len(vs) > 0 {
			break
		}
	}
	for _, name := range []string{"Subject", "Date"} {
		for _, v := range piValues(h, name) {
			fmt.Fprintf(d, "%s\x00%s\x00", name, decodeWords(v))
		}
	}
	for _, name := range []string{"To", "Cc"} {
		for _, v := range piValues(h, name) {
			fmt.Fprintf(d, "%s\x00%s\x00", name, digestAddr(v))
		}
	}
	if bytes.IndexByte(body, '\r') >= 0 {
		body = bytes.ReplaceAll(body, []byte("\r\n"), []byte("\n"))
	}
	digestParts(d, h, body, 0, "1", 0)
	sum := base64.RawURLEncoding.EncodeToString(d.Sum(nil))
	t := m.Date
	if t.IsZero() {
		t = m.ReceivedAt
	}
	return t.UTC().Format("20060102150405") + "." + sum + "@z"
}

// piValues is public-inbox's header_raw: trimmed, each line break with
// the blanks after it turned into one space.
func piValues(h flow.Header, name string) []string {
	var vs []string
	for _, f := range h {
		if strings.EqualFold(f.Name, name) {
			vs = append(vs, strings.TrimSpace(piUnfoldRe.ReplaceAllString(f.Raw, " ")))
		}
	}
	return vs
}

var (
	piUnfoldRe         = regexp.MustCompile(`\r?\n[ \t]*`)
	piUpperDomRe       = regexp.MustCompile(`@[a-z0-9_.\-()]*[A-Z]\S*`)
	qpTrailingBlanksRe = regexp.MustCompile(`[ \t]+\n`)
)

// digestParts feeds every MIME leaf to the digest as public-inbox's
// content_dig_i does: "\0depth:index\0", file name, descriptions,
// "b\0", then the text with CRLF as LF and trailing blanks removed
// (HTML and non-text parts: the transfer-decoded bytes).
func digestParts(d io.Writer, h flow.Header, body []byte, depth int, idx string, nest int) {
	mediaType, params := contentType(h.Get("Content-Type"))
	if strings.HasPrefix(mediaType, "multipart/") && params["boundary"] != "" && nest < maxMIMEDepth {
		if parts, err := splitMultipart(body, params["boundary"]); err == nil {
			for i, p := range parts {
				ph, pb, err := splitPart(p)
				if err != nil {
					continue
				}
				child := strconv.Itoa(i + 1)
				if depth > 0 {
					child = idx + "." + child
				}
				digestParts(d, ph, pb, depth+1, child, nest+1)
			}
			return
		}
	}
	fmt.Fprintf(d, "\x00%d:%s\x00", depth, idx)
	if fn := partFilename(h); fn != "" {
		fmt.Fprintf(d, "fn\x00%s\x00", fn)
	}
	for _, desc := range h.Values("Content-Description") {
		fmt.Fprintf(d, "d\x00%s\x00", decodeWords(desc))
	}
	d.Write([]byte("b\x00"))
	cte := h.Get("Content-Transfer-Encoding")
	if strings.EqualFold(strings.TrimSpace(cte), "quoted-printable") {
		// Perl's decode_qp drops blanks at line ends (RFC 2045 §6.7);
		// git mailinfo keeps them, so only the digest does this.
		body = qpTrailingBlanksRe.ReplaceAll(body, []byte("\n"))
	}
	raw, err := decodeTransfer(cte, body)
	if err != nil {
		raw = body
	}
	if strings.HasPrefix(mediaType, "text/") && !strings.Contains(mediaType, "html") {
		s := strings.ReplaceAll(toUTF8(raw, params["charset"]), "\r\n", "\n")
		d.Write([]byte(strings.TrimRightFunc(s, unicode.IsSpace)))
		return
	}
	d.Write(raw)
}

// partFilename is Content-Disposition's filename, else Content-Type's
// name.
func partFilename(h flow.Header) string {
	if _, p, err := mime.ParseMediaType(h.Get("Content-Disposition")); err == nil && p["filename"] != "" {
		return decodeWords(p["filename"])
	}
	_, p := contentType(h.Get("Content-Type"))
	return decodeWords(p["name"])
}

// digestAddr normalises an address field as public-inbox's content hash
// does: no quotes, runs of blanks squeezed, domains with capitals
// lower-cased.
func digestAddr(v string) string {
	v = strings.ReplaceAll(decodeWords(v), `"`, "")
	var b strings.Builder
	blank := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c == ' ' || c == '\t' || c == '\r' || c == '\n' {
			if !blank {
				b.WriteByte(' ')
			}
			blank = true
			continue
		}
		blank = false
		b.WriteByte(c)
	}
	return piUpperDomRe.ReplaceAllStringFunc(b.String(), strings.ToLower)
}
