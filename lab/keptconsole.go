package lab

import (
	"fmt"
	"strings"
)

// keptConsoleHalf is how much of a boot's console is kept at each end:
// the first 4 MiB (the boot, the test's start, the first oops) and the
// last 4 MiB (the test's end, its markers, the last oops). A kernel that
// floods its console (75 MiB in 40 s was seen) costs the host at most
// 8 MiB per guest; what it printed in between is counted, not kept.
const keptConsoleHalf = 4 << 20

// keptConsole is one guest's console as a boot keeps it: the head and
// the tail, each at most half bytes, and a count of the lines between.
type keptConsole struct {
	half         int
	head         strings.Builder
	tail         []string // lines after the head, oldest first
	tailBytes    int
	dropped      int // lines dropped between head and tail
	droppedBytes int
}

func newKeptConsole(half int) *keptConsole { return &keptConsole{half: half} }

// add keeps one line (without its newline).
func (k *keptConsole) add(line string) {
	n := len(line) + 1
	if k.tail == nil && k.head.Len()+n <= k.half {
		k.head.WriteString(line)
		k.head.WriteByte('\n')
		return
	}
	k.tail = append(k.tail, line)
	k.tailBytes += n
	for k.tailBytes > k.half && len(k.tail) > 1 {
		k.tailBytes -= len(k.tail[0]) + 1
		k.droppedBytes += len(k.tail[0]) + 1
		k.dropped++
		k.tail[0] = ""
		k.tail = k.tail[1:]
	}
	// Reslicing keeps the dropped lines' slots: copy down once the
	// slice is mostly dead, so the kept memory stays near half.
	if cap(k.tail) > 4*len(k.tail)+1024 {
		k.tail = append(make([]string, 0, 2*len(k.tail)), k.tail...)
	}
}

// String is the kept console, with a line saying what was left out.
func (k *keptConsole) String() string {
	var b strings.Builder
	b.Grow(k.head.Len() + k.tailBytes + 128)
	b.WriteString(k.head.String())
	if k.dropped > 0 {
		fmt.Fprintf(&b, "[rdmabot: %d lines (%d bytes) of this console left out: a boot keeps its first and last %d MiB]\n",
			k.dropped, k.droppedBytes, k.half>>20)
	}
	for _, l := range k.tail {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}
