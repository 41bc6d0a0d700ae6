package lab

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// driveSim is labtest.sh's server_drive run under sh against a
// simulated client and nfsd: nc is a shell function passing words
// through files, nfsd's byte counts a file the client's moves add to,
// the export a directory. RB_SIM names how the client behaves.
const driveSim = `
. "$LABTEST"
MNT=$SIM/mnt NFSD_STATS=$SIM/nfsd RUN=$SIM
mkdir -p "$MNT"
echo "io 0 0" >"$NFSD_STATS"
b=$((RB_MB * 1048576))
moved() { # R W: nfsd read and wrote that many bytes more
	read -r _ r w <"$NFSD_STATS"
	echo "io $((r + $1)) $((w + $2))" >"$NFSD_STATS.new" && mv "$NFSD_STATS.new" "$NFSD_STATS"
}
nc() {
	if [ "$1" = -l ]; then
		until [ -e "$SIM/to.$3" ]; do sleep 0.02; done
		cat "$SIM/to.$3" && rm -f "$SIM/to.$3"
		return
	fi
	[ "$2" = 7778 ] || return 1
	read -r _ i
	# The hang self-test's client says poweroff instead of listening.
	[ "$RB_SIM" = poweroff ] && { say poweroff; sleep 0.1; return 1; }
	# A reader ahead has read the file by the time "go" arrives.
	[ "$RB_SIM" = frontreader ] && until [ -e "$SIM/read.$i" ]; do sleep 0.005; done
	client_go "$i" </dev/null >/dev/null 2>&1 &
}
say() { echo "$1" >"$SIM/to.7777.new" && mv "$SIM/to.7777.new" "$SIM/to.7777"; }
client_go() {
	i=$1
	sleep 0.05
	case $RB_SIM in
	frontreader) ;;
	shortread) moved $((b / 2)) 0 ;;
	*) moved $b 0 ;;
	esac
	cp "$MNT/s$i" "$MNT/f$i"
	moved 0 $b
	if [ "$RB_SIM" = frontwriter ]; then
		# The next file, before it is asked for: it cannot know it.
		head -c $b /dev/zero >"$MNT/f$((i + 1))"
		moved 0 $b
	fi
	case $RB_SIM in
	wrongword) say "ok" ;;
	poweroff) ;;
	*) say "done $i" ;;
	esac
}
if [ "$RB_SIM" = frontreader ]; then
	# It reads each file as soon as it appears in the export.
	(j=1; while [ $j -le "$RB_ITERS" ]; do
		until [ -e "$MNT/s$j" ] || [ -e "$SIM/stop" ]; do sleep 0.005; done
		moved $b 0; : >"$SIM/read.$j"; j=$((j + 1))
	done) &
fi
server_drive
echo "msg=$msg"
: >"$SIM/stop"
wait
`

// The trusted server drives a candidate client per file, in the order
// it asks for: it times the honest one, and a client that reads ahead,
// writes ahead, reads short or answers with another word fails
// (DRIVE_FAIL), never a speed-up.
func TestServerDriveFrontRunning(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "labtest.sh")
	if err := os.WriteFile(script, labtestScript, 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	if err := os.WriteFile(data, make([]byte, 3<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	for sim, want := range map[string]string{
		"honest":      "",
		"frontreader": "iter=1 why=moved_before_go",
		"frontwriter": "iter=2 why=written_ahead",
		"shortread":   "iter=1 why=short_read",
		"wrongword":   "",
		"poweroff":    "",
	} {
		t.Run(sim, func(t *testing.T) {
			sim, want := sim, want
			simDir := t.TempDir()
			// busybox sh, as the guests run it.
			cmd := exec.Command("busybox", "sh", "-c", driveSim)
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "LABTEST=" + script, "SIM=" + simDir, "RB_SIM=" + sim,
				"RB_MB=1", "RB_ITERS=3", "RB_DATA=" + data, "RB_PEER=10.99.0.2"}
			cmd.WaitDelay = 5 * time.Second
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			done := make(chan struct{})
			var out []byte
			go func() { out, _ = cmd.CombinedOutput(); close(done) }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-done
				t.Fatalf("server_drive did not end:\n%s", out)
			}
			text := string(out)
			stimes := strings.Count(text, "@@RB STIME")
			switch {
			case sim == "honest" && (stimes != 3 || !strings.Contains(text, "@@RB SLOOP loop_s=") || strings.Contains(text, "DRIVE_FAIL") || !strings.Contains(text, "msg=\n")):
				t.Errorf("the honest client:\n%s", text)
			case sim == "wrongword" && (!strings.Contains(text, "DRIVE_FAIL iter=1 why=wrong_message") || !strings.Contains(text, "msg=invalid")):
				t.Errorf("a client answering ok to go 1:\n%s", text)
			case sim == "poweroff" && (stimes != 0 || strings.Contains(text, "DRIVE_FAIL") || !strings.Contains(text, "msg=poweroff")):
				t.Errorf("the hang self-test's poweroff:\n%s", text)
			case want != "" && (!strings.Contains(text, "@@RB DRIVE_FAIL "+want) || !strings.Contains(text, "msg=invalid") || strings.Contains(text, "SLOOP")):
				t.Errorf("%s: want DRIVE_FAIL %s:\n%s", sim, want, text)
			}
			for _, l := range strings.Split(text, "\n") {
				if m, ok := parseMarker(l); ok && m.Event == "STIME" && m.float("read_MBps") > 1000 {
					t.Errorf("%s: timed at %s", sim, l)
				}
			}
		})
	}
}
