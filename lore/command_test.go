package lore

import (
	"fmt"
	"strings"
	"testing"
)

// Each command line as written, and what the bot makes of it; quoted
// lines and the signature are never commands.
func TestParseCommands(t *testing.T) {
	body := strings.Join([]string{
		"Thanks for the report.",
		"#rdmabot test",
		"#rdmabot test rdma for-next",
		"#rdmabot retest",
		"#rdmabot invalid the lab was busy that hour",
		"#rdmabot invalid",
		"#rdmabot dup https://lore.kernel.org/r/20261130040506.2ce58ffafd08-rdmabot@rdmabot.invalid/",
		"#rdmabot dup",
		"#rdmabot dup a b",
		"#rdmabot test a b c",
		"#rdmabot test fstests",
		"#rdmabot retest fstests nfsd nfsd-testing",
		"#rdmabot test fstests a b c",
		"#rdmabot frobnicate",
		"#rdmabot",
		"#rdmabotx test",
		"> #rdmabot retest",
		"-- ",
		"#rdmabot retest",
	}, "\n")
	var got []string
	for _, c := range parseCommands(body) {
		got = append(got, fmt.Sprintf("%s|%s|%s|%s|%s%s", c.Verb, c.Tree, c.Branch, c.Note, c.Err, strings.Join(c.Profiles, "+")))
	}
	want := []string{
		"test||||",
		"test|rdma|for-next||",
		"retest||||",
		"invalid|||the lab was busy that hour|",
		"invalid||||",
		"dup|||https://lore.kernel.org/r/20261130040506.2ce58ffafd08-rdmabot@rdmabot.invalid/|",
		"||||say which report this one repeats: #rdmabot dup <link or Message-ID>",
		"||||say which report this one repeats: #rdmabot dup <link or Message-ID>",
		"||||too many arguments: #rdmabot test [fstests] [<tree> [<branch>]]",
		"test||||fstests",
		"retest|nfsd|nfsd-testing||fstests",
		"||||too many arguments: #rdmabot test [fstests] [<tree> [<branch>]]",
		`||||unknown command "frobnicate" (known: test, retest, invalid, dup)`,
		"||||no command after #rdmabot (known: test, retest, invalid, dup)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("commands\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
