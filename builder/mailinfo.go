package builder

import (
	"mime"
	"net/mail"
	"strings"
	"time"

	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/internal/gitmail"
)

// mailInfo is what git mailinfo extracts from a patch mail: the author,
// the date, the commit message and the patch text.
type mailInfo struct {
	name, email string
	date        time.Time
	message     string // as git am commits it (stripspace'd)
	patch       string // from the first patch line on
}

var headerWordDecoder = &mime.WordDecoder{}

// parseMailInfo does what git mailinfo (without -k, -m, -b) and git am
// do to a parsed mail: in-body From:, Date: and Subject: lines at the top
// of the body override the mail's headers; with scissors, a "-- >8 --"
// line discards everything above it; the message ends at the first line
// that starts a patch ("---", "diff -", "Index: ").
func parseMailInfo(m *flow.Message, scissors bool) mailInfo {
	mi := mailInfo{name: m.From.Name, email: m.From.Email, date: m.Date}
	subject := m.Subject
	var inFrom, inDate, inSubject *string

	body := m.Body
	var log strings.Builder
	headerStage := true
	var accum string // an in-body header being unfolded
	flush := func() {
		if accum == "" {
			return
		}
		name, value, _ := strings.Cut(accum, ":")
		value = strings.TrimSpace(decodeHeaderWords(strings.TrimSpace(value)))
		switch strings.ToLower(name) {
		case "from":
			inFrom = &value
		case "date":
			inDate = &value
		case "subject":
			inSubject = &value
		}
		accum = ""
	}
	patchAt := len(body)
	for pos := 0; pos < len(body); {
		end := strings.IndexByte(body[pos:], '\n')
		var line string
		if end < 0 {
			line = body[pos:]
		} else {
			line = body[pos : pos+end+1]
		}
		start := pos
		pos += len(line)

		if headerStage && (line == "\n" || line == "") {
			if accum != "" {
				flush()
				headerStage = false
			}
			continue
		}
		if headerStage {
			if accum != "" && (line[0] == ' ' || line[0] == '\t') && !(scissors && isScissorsLine(line)) {
				accum = strings.TrimSuffix(accum, "\n") + line
				continue
			}
			flush()
			if strings.HasPrefix(line, "[PATCH]") && len(line) > 7 && isSpace(line[7]) {
				s := strings.TrimSuffix(line, "\n")
				inSubject = &s
				continue
			}
			if isInbodyHeader(line) {
				accum = line
				continue
			}
			headerStage = false
		}
		if scissors && isScissorsLine(line) {
			log.Reset()
			headerStage = true
			inFrom, inDate, inSubject = nil, nil, nil
			continue
		}
		if gitmail.PatchBreak([]byte(line)) == 0 {
			patchAt = start
			break
		}
		log.WriteString(line)
	}
	flush()
	mi.patch = body[patchAt:]

	if inFrom != nil {
		mi.name, mi.email = parseInbodyFrom(*inFrom)
	}
	if inDate != nil {
		if t, err := mail.ParseDate(*inDate); err == nil {
			mi.date = t
		}
	}
	if inSubject != nil {
		subject = *inSubject
	}
	mi.name = saneName(mi.name, mi.email)
	mi.message = stripSpace(gitmail.Title(subject) + "\n\n" + log.String())
	return mi
}

func decodeHeaderWords(s string) string {
	if !strings.Contains(s, "=?") {
		return s
	}
	if d, err := headerWordDecoder.DecodeHeader(s); err == nil {
		return d
	}
	return s
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// isInbodyHeader is git mailinfo's test for "From: ", "Subject: ",
// "Date: " at the top of the body (case-insensitive, a blank after the
// colon).
func isInbodyHeader(line string) bool {
	for _, h := range []string{"From", "Subject", "Date"} {
		if len(line) > len(h)+1 && strings.EqualFold(line[:len(h)], h) &&
			line[len(h)] == ':' && isSpace(line[len(h)+1]) {
			return true
		}
	}
	return false
}

// isScissorsLine is git mailinfo's is_scissors_line(): a line of dashes
// (or dots, tildes) with a ">8"/"8<" mark, perforated enough, possibly
// with a short comment.
func isScissorsLine(line string) bool {
	scissors, gap := 0, 0
	first, last := -1, 0
	perforation := 0
	inPerforation := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		if isSpace(c) {
			if inPerforation {
				perforation++
				gap++
			}
			continue
		}
		last = i
		if first < 0 {
			first = i
		}
		if c == '-' {
			inPerforation = true
			perforation++
			continue
		}
		if strings.HasPrefix(line[i:], ">8") || strings.HasPrefix(line[i:], "8<") ||
			strings.HasPrefix(line[i:], ">%") || strings.HasPrefix(line[i:], "%<") {
			inPerforation = true
			perforation += 2
			scissors += 2
			i++
			continue
		}
		inPerforation = false
	}
	if first < 0 {
		return false
	}
	// At least "-- >8 --" long; the perforation more than a third of
	// the line (a comment may follow), dashes and marks more than half
	// of the perforation.
	visible := last - first + 1
	return scissors != 0 && 8 <= visible && visible < perforation*3 && gap*2 < perforation
}

// parseInbodyFrom reads "Name <email>" or "email (Name)" or a bare email.
func parseInbodyFrom(v string) (name, email string) {
	p := mail.AddressParser{WordDecoder: headerWordDecoder}
	if a, err := p.Parse(v); err == nil {
		return a.Name, a.Address
	}
	if i := strings.LastIndexByte(v, '<'); i >= 0 {
		if j := strings.IndexByte(v[i:], '>'); j > 0 {
			return strings.Trim(strings.TrimSpace(v[:i]), `"`), strings.TrimSpace(v[i+1 : i+j])
		}
	}
	if i := strings.IndexByte(v, '('); i > 0 {
		return strings.TrimSuffix(strings.TrimSpace(v[i+1:]), ")"), strings.TrimSpace(v[:i])
	}
	return "", strings.TrimSpace(v)
}

// saneName is git mailinfo's get_sane_name: a missing, overlong or
// address-like name is replaced by the email.
func saneName(name, email string) string {
	if name == "" || len(name) > 60 || strings.ContainsAny(name, "@<>") {
		return email
	}
	return name
}

// stripSpace is git's stripspace without comment removal: trailing
// blanks go, runs of blank lines become one, no blank lines at either
// end, and the text ends in a newline.
func stripSpace(s string) string {
	var b strings.Builder
	blank := 0
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimRight(line, " \t\n\v\f\r")
		if line == "" {
			blank++
			continue
		}
		if b.Len() > 0 && blank > 0 {
			b.WriteByte('\n')
		}
		blank = 0
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.String()
}
