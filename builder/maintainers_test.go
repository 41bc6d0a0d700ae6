package builder

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/rdmabot/rdmabot/flow"
)

func readMaintainersExcerpt(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "maintainers", "MAINTAINERS"))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func contactLines(cs []Contact) string {
	var b strings.Builder
	for _, c := range cs {
		b.WriteString(c.String() + " (" + string(c.Role) + ":" + strings.Join(c.Sections, ",") + ")\n")
	}
	return b.String()
}

// The lookup on an excerpt of the real file, in its real format (the
// introduction whose indented lines look like entries, W:/Q:/T:/P:/B:
// lines, remarks after list addresses): what get_maintainer.pl prints
// for these files, maintainers first, then reviewers, then lists.
func TestMaintainersGolden(t *testing.T) {
	isDir := func(p string) bool { return p == "drivers/infiniband/sw" }
	m, err := ParseMaintainers(readMaintainersExcerpt(t), isDir)
	if err != nil {
		t.Fatal(err)
	}
	var titles []string
	for _, s := range m.Sections {
		titles = append(titles, s.Title)
	}
	if got, want := strings.Join(titles, "|"), "INFINIBAND SUBSYSTEM|KERNEL NFSD, SUNRPC, AND LOCKD SERVERS|NFS, SUNRPC, AND LOCKD CLIENTS|"+
		"RDS - RELIABLE DATAGRAM SOCKETS|SOFT-ROCE DRIVER (rxe)|MELLANOX MLX5 IB driver|TRACING|RDMA TRACE EVENTS (an N: entry)|THE REST"; got != want {
		t.Fatalf("sections:\n%s\nwant\n%s", got, want)
	}
	for _, tc := range []struct {
		name  string
		files []string
		want  string
	}{
		{"svcrdma: net/sunrpc/ below, N: rdma in xprtrdma, THE REST's */", []string{"net/sunrpc/xprtrdma/svc_rdma_sendto.c"}, `Chuck Lever <chuck.lever@oracle.com> (maintainer:KERNEL NFSD, SUNRPC, AND LOCKD SERVERS)
Jeff Layton <jlayton@kernel.org> (maintainer:KERNEL NFSD, SUNRPC, AND LOCKD SERVERS)
Trond Myklebust <trondmy@kernel.org> (maintainer:NFS, SUNRPC, AND LOCKD CLIENTS)
Anna Schumaker <anna@kernel.org> (maintainer:NFS, SUNRPC, AND LOCKD CLIENTS)
Trace Person <trace@example.org> (maintainer:RDMA TRACE EVENTS (an N: entry))
Neil Brown <neilb@suse.de> (reviewer:KERNEL NFSD, SUNRPC, AND LOCKD SERVERS)
Olga Kornievskaia <okorniev@redhat.com> (reviewer:KERNEL NFSD, SUNRPC, AND LOCKD SERVERS)
Dai Ngo <dai.ngo@oracle.com> (reviewer:KERNEL NFSD, SUNRPC, AND LOCKD SERVERS)
Tom Talpey <tom@talpey.com> (reviewer:KERNEL NFSD, SUNRPC, AND LOCKD SERVERS)
linux-nfs@vger.kernel.org (list:KERNEL NFSD, SUNRPC, AND LOCKD SERVERS,NFS, SUNRPC, AND LOCKD CLIENTS)
linux-kernel@vger.kernel.org (list:THE REST)
`},
		{"ib_core; X: drivers/infiniband/hw/ keeps mlx5 out of the subsystem", []string{"drivers/infiniband/core/cma.c", "drivers/infiniband/hw/mlx5/main.c"}, `Jason Gunthorpe <jgg@nvidia.com> (maintainer:INFINIBAND SUBSYSTEM)
Leon Romanovsky <leonro@nvidia.com> (maintainer:INFINIBAND SUBSYSTEM,MELLANOX MLX5 IB driver)
linux-rdma@vger.kernel.org (list:INFINIBAND SUBSYSTEM,MELLANOX MLX5 IB driver)
linux-kernel@vger.kernel.org (list:THE REST)
`},
		{"a remark after a list address is dropped", []string{"net/rds/ib.c"}, `Allison Henderson <allison.henderson@oracle.com> (maintainer:RDS - RELIABLE DATAGRAM SOCKETS)
netdev@vger.kernel.org (list:RDS - RELIABLE DATAGRAM SOCKETS)
linux-rdma@vger.kernel.org (list:RDS - RELIABLE DATAGRAM SOCKETS)
rds-devel@oss.oracle.com (list:RDS - RELIABLE DATAGRAM SOCKETS)
linux-kernel@vger.kernel.org (list:THE REST)
`},
		// include/linux/nfs* has one "/" fewer than include/linux/nfs/x.h
		// (no match below), as many as include/linux/nfs_fs.h (match).
		{"a glob without a trailing slash stays in its directory", []string{"include/linux/nfs_fs.h"}, `Trond Myklebust <trondmy@kernel.org> (maintainer:NFS, SUNRPC, AND LOCKD CLIENTS)
Anna Schumaker <anna@kernel.org> (maintainer:NFS, SUNRPC, AND LOCKD CLIENTS)
linux-nfs@vger.kernel.org (list:NFS, SUNRPC, AND LOCKD CLIENTS)
linux-kernel@vger.kernel.org (list:THE REST)
`},
		{"TRACING's X: include/trace/events/ leaves rpcrdma.h to nfsd", []string{"include/trace/events/rpcrdma.h"}, `Chuck Lever <chuck.lever@oracle.com> (maintainer:KERNEL NFSD, SUNRPC, AND LOCKD SERVERS)
Jeff Layton <jlayton@kernel.org> (maintainer:KERNEL NFSD, SUNRPC, AND LOCKD SERVERS)
Trace Person <trace@example.org> (maintainer:RDMA TRACE EVENTS (an N: entry))
Neil Brown <neilb@suse.de> (reviewer:KERNEL NFSD, SUNRPC, AND LOCKD SERVERS)
Olga Kornievskaia <okorniev@redhat.com> (reviewer:KERNEL NFSD, SUNRPC, AND LOCKD SERVERS)
Dai Ngo <dai.ngo@oracle.com> (reviewer:KERNEL NFSD, SUNRPC, AND LOCKD SERVERS)
Tom Talpey <tom@talpey.com> (reviewer:KERNEL NFSD, SUNRPC, AND LOCKD SERVERS)
linux-nfs@vger.kernel.org (list:KERNEL NFSD, SUNRPC, AND LOCKD SERVERS)
linux-kernel@vger.kernel.org (list:THE REST)
`},
		{"THE REST's F: * only covers top-level files", []string{"Makefile"}, `linux-kernel@vger.kernel.org (list:THE REST)
`},
		{"rxe: its own section and the subsystem's", []string{"drivers/infiniband/sw/rxe/rxe_comp.c"}, `Jason Gunthorpe <jgg@nvidia.com> (maintainer:INFINIBAND SUBSYSTEM)
Leon Romanovsky <leonro@nvidia.com> (maintainer:INFINIBAND SUBSYSTEM)
Zhu Yanjun <zyjzyj2000@gmail.com> (maintainer:SOFT-ROCE DRIVER (rxe))
linux-rdma@vger.kernel.org (list:INFINIBAND SUBSYSTEM,SOFT-ROCE DRIVER (rxe))
linux-kernel@vger.kernel.org (list:THE REST)
`},
	} {
		if got := contactLines(m.For(tc.files)); got != tc.want {
			t.Errorf("%s: %v:\n%s\nwant\n%s", tc.name, tc.files, got, tc.want)
		}
	}
}

// get_maintainer's matching rules one by one.
func TestMaintainerPatterns(t *testing.T) {
	src := "A\nM:\ta@x.org\nF:\tdrivers/infiniband/sw\nF:\tfs/nfs?/x.c\nF:\tnet/a.c\n"
	dirs := func(p string) bool { return p == "drivers/infiniband/sw" }
	m, err := ParseMaintainers([]byte(src), dirs)
	if err != nil {
		t.Fatal(err)
	}
	s := m.Sections[0]
	for file, want := range map[string]bool{
		"drivers/infiniband/sw/rxe/rxe.c": true,  // a directory of the tree: everything below
		"drivers/infiniband/swx.c":        false, // ... and only that directory
		"fs/nfsd/x.c":                     true,  // ? is one character
		"fs/nfs/x.c":                      false,
		"net/a.c":                         true,
		"net/a.cx":                        true, // a prefix, as get_maintainer's regex is
		"net/a/c":                         false,
		"net/sub/a.c":                     false,
	} {
		if got := s.Covers(file); got != want {
			t.Errorf("%s: covered %v, want %v", file, got, want)
		}
	}
	// Without the tree, a directory named without "/" is a file name.
	m, _ = ParseMaintainers([]byte(src), nil)
	if m.Sections[0].Covers("drivers/infiniband/sw/rxe/rxe.c") {
		t.Error("a pattern not known to be a directory matched below it")
	}
	// N: is a regex anywhere in the path, white space ignored (Perl's /x).
	m, _ = ParseMaintainers([]byte("B\nM:\tb@x.org\nN:\t(?:xprt|svc_) rdma\n"), nil)
	if !m.Sections[0].Covers("net/sunrpc/xprtrdma/verbs.c") || m.Sections[0].Covers("net/sunrpc/clnt.c") {
		t.Error("N: regex")
	}
	if _, err := ParseMaintainers([]byte("C\nN:\tdrivers/(unclosed\n"), nil); err == nil || !strings.Contains(err.Error(), "MAINTAINERS:2") {
		t.Errorf("bad N: regex: %v", err)
	}
	// Names with specials are quoted, others written as get_maintainer does.
	for _, tc := range []struct {
		c    Contact
		want string
	}{
		{Contact{Name: "Doe, John", Email: "j@x.org"}, `"Doe, John" <j@x.org>`},
		{Contact{Name: "Jürgen Q", Email: "j@x.org"}, "=?utf-8?q?J=C3=BCrgen_Q?= <j@x.org>"},
		{Contact{Name: "J. Bruce", Email: "b@x.org"}, "J. Bruce <b@x.org>"},
		{Contact{Email: "l@x.org"}, "l@x.org"},
	} {
		if c, want := tc.c, tc.want; c.String() != want {
			got := c.String()
			t.Errorf("%+v: %s, want %s", c, got, want)
		}
	}
	if got := m.For([]string{"nothing/here.c"}); len(got) != 0 {
		t.Errorf("uncovered file: %v", got)
	}
}

// MaintainersAt reads the file of a commit in the store and judges
// directories by that commit's tree.
func TestMaintainersAt(t *testing.T) {
	dir := t.TempDir()
	gitT(t, dir, "init", "-q", "-b", "master")
	writeFile(t, filepath.Join(dir, "MAINTAINERS"), "SOFT-ROCE DRIVER (rxe)\nM:\tZhu Yanjun <zyjzyj2000@gmail.com>\nL:\tlinux-rdma@vger.kernel.org\nF:\tdrivers/infiniband/sw/rxe\n", 0o644)
	writeFile(t, filepath.Join(dir, "drivers/infiniband/sw/rxe/rxe.c"), "int x;\n", 0o644)
	gitT(t, dir, "add", ".")
	gitT(t, dir, "commit", "-q", "-m", "one")
	with := gitT(t, dir, "rev-parse", "HEAD")
	gitT(t, dir, "rm", "-q", "MAINTAINERS")
	gitT(t, dir, "commit", "-q", "-m", "two")
	without := gitT(t, dir, "rev-parse", "HEAD")
	st, err := OpenRepo(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.MaintainersAt(plumbing.NewHash(with))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := contactLines(m.For([]string{"drivers/infiniband/sw/rxe/rxe_comp.c"})), "Zhu Yanjun <zyjzyj2000@gmail.com> (maintainer:SOFT-ROCE DRIVER (rxe))\nlinux-rdma@vger.kernel.org (list:SOFT-ROCE DRIVER (rxe))\n"; got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if _, err := st.MaintainersAt(plumbing.NewHash(without)); !errors.Is(err, ErrNoMaintainers) {
		t.Errorf("no MAINTAINERS: %v", err)
	}
	if _, err := st.MaintainersAt(plumbing.NewHash(strings.Repeat("1", 40))); err == nil {
		t.Error("a commit not in the store")
	}
	// The lists a bisection report about these files goes to.
	stage := &Stage{Store: st}
	if got, err := stage.ListsAt(context.Background(), with, []string{"drivers/infiniband/sw/rxe/rxe_comp.c"}); err != nil || strings.Join(got, " ") != "linux-rdma@vger.kernel.org" {
		t.Errorf("ListsAt: %v, %v", got, err)
	}
	if got, err := stage.ListsAt(context.Background(), without, []string{"drivers/infiniband/sw/rxe/rxe_comp.c"}); err != nil || got != nil {
		t.Errorf("ListsAt without MAINTAINERS: %v, %v", got, err)
	}
	if _, err := stage.ListsAt(context.Background(), strings.Repeat("1", 40), nil); err == nil || !flow.IsInfra(err) {
		t.Errorf("ListsAt a commit not in the store: %v", err)
	}
}

// A reply copies the people of the sections that cover the touched
// files most specifically: not NETWORKING [GENERAL] for what is below
// net/, not THE REST, not a wider section beside a narrower one.
func TestSpecificMaintainers(t *testing.T) {
	excerpt := string(readMaintainersExcerpt(t))
	net := "\nNETWORKING [GENERAL]\nM:\tDavid S. Miller <davem@davemloft.net>\nM:\tJakub Kicinski <kuba@kernel.org>\nL:\tnetdev@vger.kernel.org\nF:\tinclude/net/\nF:\tnet/\nX:\tnet/9p/\n"
	isDir := func(p string) bool { return p == "drivers/infiniband/sw" }
	m, err := ParseMaintainers([]byte(excerpt+net), isDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		files []string
		want  string
	}{
		{"svcrdma: net/sunrpc/ beats N: rdma, net/ and */", []string{"net/sunrpc/xprtrdma/svc_rdma_sendto.c"}, `Chuck Lever <chuck.lever@oracle.com> (maintainer:KERNEL NFSD, SUNRPC, AND LOCKD SERVERS)
Jeff Layton <jlayton@kernel.org> (maintainer:KERNEL NFSD, SUNRPC, AND LOCKD SERVERS)
Trond Myklebust <trondmy@kernel.org> (maintainer:NFS, SUNRPC, AND LOCKD CLIENTS)
Anna Schumaker <anna@kernel.org> (maintainer:NFS, SUNRPC, AND LOCKD CLIENTS)
Neil Brown <neilb@suse.de> (reviewer:KERNEL NFSD, SUNRPC, AND LOCKD SERVERS)
Olga Kornievskaia <okorniev@redhat.com> (reviewer:KERNEL NFSD, SUNRPC, AND LOCKD SERVERS)
Dai Ngo <dai.ngo@oracle.com> (reviewer:KERNEL NFSD, SUNRPC, AND LOCKD SERVERS)
Tom Talpey <tom@talpey.com> (reviewer:KERNEL NFSD, SUNRPC, AND LOCKD SERVERS)
linux-nfs@vger.kernel.org (list:KERNEL NFSD, SUNRPC, AND LOCKD SERVERS,NFS, SUNRPC, AND LOCKD CLIENTS)
`},
		{"rxe: its own section, not the subsystem's wider one", []string{"drivers/infiniband/sw/rxe/rxe_comp.c"}, `Zhu Yanjun <zyjzyj2000@gmail.com> (maintainer:SOFT-ROCE DRIVER (rxe))
linux-rdma@vger.kernel.org (list:SOFT-ROCE DRIVER (rxe))
`},
		{"each file its own most specific sections", []string{"drivers/infiniband/core/cma.c", "drivers/infiniband/hw/mlx5/main.c"}, `Jason Gunthorpe <jgg@nvidia.com> (maintainer:INFINIBAND SUBSYSTEM)
Leon Romanovsky <leonro@nvidia.com> (maintainer:INFINIBAND SUBSYSTEM,MELLANOX MLX5 IB driver)
linux-rdma@vger.kernel.org (list:INFINIBAND SUBSYSTEM,MELLANOX MLX5 IB driver)
`},
		{"an F: directory beats an N: match", []string{"drivers/infiniband/ulp/rtrs/rdma_x.c"}, `Jason Gunthorpe <jgg@nvidia.com> (maintainer:INFINIBAND SUBSYSTEM)
Leon Romanovsky <leonro@nvidia.com> (maintainer:INFINIBAND SUBSYSTEM)
linux-rdma@vger.kernel.org (list:INFINIBAND SUBSYSTEM)
`},
		{"an N: match where no F: is more specific than a top-level tree", []string{"lib/rdma_helper.c"}, `Trace Person <trace@example.org> (maintainer:RDMA TRACE EVENTS (an N: entry))
`},
		{"NETWORKING [GENERAL] where it names the file's own directory", []string{"include/net/sock.h"}, `David S. Miller <davem@davemloft.net> (maintainer:NETWORKING [GENERAL])
Jakub Kicinski <kuba@kernel.org> (maintainer:NETWORKING [GENERAL])
netdev@vger.kernel.org (list:NETWORKING [GENERAL])
`},
		{"only catch-alls: nobody", []string{"net/ipv4/tcp.c", "Makefile"}, ""},
	} {
		if got := contactLines(m.SpecificFor(tc.files)); got != tc.want {
			t.Errorf("%s: %v:\n%s\nwant\n%s", tc.name, tc.files, got, tc.want)
		}
	}
}
