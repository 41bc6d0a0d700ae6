package lab

import (
	"fmt"
	"strings"
)

// The transfer test's checks of its data and of the client's figures,
// judged the same way whichever driver ran the test (a QEMU pair's
// consoles, a real pair's SSH sessions).

// holdsData says whether role is given the transfer test's data, fresh
// for each boot: the client, which writes it, and the server only when
// it runs a trusted kernel. A candidate server that knew the data could
// answer WRITEs without pulling the payload and serve READs from its
// own copy; it gets none, and vouches for no file. With the candidate
// on the client the trusted server alone holds it, a file per iteration
// it hands out as it drives the test (labtest.sh's server_drive): a
// client cannot write a file before it is given it.
func holdsData(k Kernel, role string) bool {
	if !k.Trusted("client") {
		return role == "server"
	}
	return role == "client" || k.Trusted("server")
}

// dataMiB is the size of the transfer test's data for kernel k: one
// file, or with the candidate on the client one per iteration.
func dataMiB(k Kernel, t Test) int {
	if !k.Trusted("client") {
		return t.SizeMiB * t.Iterations
	}
	return t.SizeMiB
}

// serverChecks is the server's look at the files of the transfer test
// (labtest.sh's server_check, @@RB SRVCMP), per iteration: the file the
// client wrote (with the candidate on the client, what it wrote of what
// it read: the file covers both ways).
type serverChecks struct{ wrote map[int]string }

func newServerChecks() serverChecks {
	return serverChecks{wrote: map[int]string{}}
}

// note records one of the server's SRVCMP markers.
func (s serverChecks) note(m marker) {
	s.wrote[m.int("iter")] = m.Args["result"]
}

// failure says why iteration it's data fails the test, "" when it does
// not. With the kernel under test on the client (clientUntrusted), the
// trusted server must have found the file as given (what the client
// wrote of what it read), whatever the client says of its own cmp; any server's word that one is
// not counts against the kernel under test; the client's own cmp must
// say ok.
func (s serverChecks) failure(it Iteration, clientUntrusted bool) string {
	got := s.wrote[it.N]
	switch {
	case clientUntrusted && it.Cmp == "":
		return fmt.Sprintf("iteration %d: the client reported no data check", it.N)
	case clientUntrusted && got != "ok":
		return fmt.Sprintf("iteration %d: the trusted server did not find the file as the client was given it (%q)", it.N, got)
	case serverRejected(got):
		return fmt.Sprintf("iteration %d: the server did not find the file as the client was given it (%q)", it.N, got)
	case it.Cmp != "ok":
		return fmt.Sprintf("iteration %d: data mismatch", it.N)
	}
	return ""
}

// corrupt says which iteration's data did not survive the transfer test
// ("" when all did): the server's check of what the client wrote, then
// the client's own of what it read back. A
// server that runs the kernel under test cannot vouch for a file; a
// client's word counts only against it.
func (s serverChecks) corrupt(iters []Iteration) string {
	for _, it := range iters {
		if got := s.wrote[it.N]; serverRejected(got) {
			return fmt.Sprintf("iteration %d of %d: the file the client wrote over NFS/RDMA is not, on the server, the data it was given (server's check: %s)", it.N, len(iters), got)
		}
		if it.Cmp == "mismatch" {
			return fmt.Sprintf("iteration %d of %d: the file read back over NFS/RDMA differs from the one written (cmp)", it.N, len(iters))
		}
	}
	return ""
}

// serverRejected says a server's check (SRVCMP) found a file other than
// the one the client was given, or none.
func serverRejected(result string) bool { return result == "mismatch" || result == "missing" }

// unbacked says why the figures of a client running the kernel under
// test are not backed by the trusted server's own count of the bytes it
// read and wrote for it (srvio, the server's last SRVIO marker; ok false
// when it sent none), "" when they are: a kernel that reports transfers
// it never made gets nothing. lastResult is the client's last RESULT.
func unbacked(t Test, srvio marker, ok bool, lastResult marker) string {
	if !ok {
		return "the trusted server reported no byte counts"
	}
	if t.Kind == "fstests" {
		// Its tests' results are the client's word; the server's count
		// of operations (Sample.ServerOps) is what backs them.
		return ""
	}
	// What the client says it moved: the pressure test's one result
	// names its MiB each way; the others move the file each iteration.
	var readMiB, writeMiB int
	if t.Load != nil {
		readMiB, writeMiB = lastResult.int("mb"), lastResult.int("write_mb")
	} else {
		readMiB = t.Iterations * t.SizeMiB
		if t.Kind == "transfer" {
			writeMiB = readMiB
		}
	}
	// 95 %: a server counts what it moved, the client what completed.
	for _, c := range []struct {
		what      string
		server    int64
		clientMiB int
	}{{"read", int64(srvio.float("read")), readMiB}, {"wrote", int64(srvio.float("written")), writeMiB}} {
		if c.server < int64(c.clientMiB)*(1<<20)*95/100 {
			return fmt.Sprintf("the client's figures are not the server's: the server %s %.1f MiB for it, the client says %d MiB", c.what, float64(c.server)/(1<<20), c.clientMiB)
		}
	}
	return ""
}

// loopSecs is the test loop's length: the client's word (its SUMMARY)
// when it runs a trusted kernel, else the trusted server's own clock
// (SLOOP, from the first byte of the first iteration to the last of the
// last), 0 when the server timed none.
func loopSecs(clientTrusted bool, summary, sloop marker) float64 {
	if clientTrusted {
		return summary.float("loop_s")
	}
	return sloop.float("loop_s")
}

// driveFailure is why the trusted server stopped driving a candidate
// client (labtest.sh's DRIVE_FAIL marker m).
func driveFailure(m marker) string {
	return fmt.Sprintf("iteration %s: the client broke the trusted server's protocol (%s)", m.Args["iter"], strings.TrimSpace(m.Args["why"]))
}
