package lore

import (
	"regexp"
	"strings"

	"github.com/rdmabot/rdmabot/flow"
)

// Other reviewers on the lists: bots whose reviews a reply of ours links
// instead of repeating. Sashiko (an AI reviewer, on linux-rdma and
// linux-nfs since 2026) sends from sashiko-bot@kernel.org with Reply-To
// sashiko-reviews@lists.linux.dev and signs "Sashiko AI review ·
// https://sashiko.dev/#/patchset/<id>?part=N"; 0-day and syzbot from
// their own addresses. A review is only linked, never believed: nothing
// it says decides anything, and a link is read only from its own site.
var reviewers = []struct {
	name string
	from *regexp.Regexp
	// link is the review's own page in its body ("" for the mail
	// itself on lore).
	link *regexp.Regexp
}{
	{"Sashiko AI review", regexp.MustCompile(`^(sashiko-bot@kernel\.org|sashiko@sashiko\.dev)$`),
		regexp.MustCompile(`https://sashiko\.dev/#/patchset/[A-Za-z0-9._%@+-]+(\?part=[0-9]+)?`)},
	{"kernel test robot (0-day)", regexp.MustCompile(`^lkp@intel\.com$`), nil},
	{"syzbot", regexp.MustCompile(`^syzbot(\+[0-9a-f]+)?@syzkaller\.appspotmail\.com$`), nil},
}

// reviewOf is the review a reply is, when it comes from one of the
// reviewers; nil otherwise.
func reviewOf(m *flow.Message) *flow.Review {
	from := strings.ToLower(m.From.Email)
	for _, r := range reviewers {
		if !r.from.MatchString(from) {
			continue
		}
		rv := &flow.Review{By: r.name, MessageID: m.MessageID}
		if r.link != nil {
			rv.URL = r.link.FindString(m.Body)
		}
		return rv
	}
	return nil
}
