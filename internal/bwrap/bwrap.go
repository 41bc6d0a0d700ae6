// Package bwrap holds what every bubblewrap sandbox of the bot shares:
// the host's system, read-only, and nothing else of it. A kernel build
// (builder/kbuild) and a QEMU guest (lab) add their own few paths.
package bwrap

import "os"

// SystemArgs bind /usr read-only, and the few files of /etc a program
// linked against it reads (the dynamic linker's cache, the alternatives
// that name cc, ld and friends). Debian's /bin, /lib ... are symlinks
// into /usr (merged /usr) and are made the same inside; where one is a
// directory it is bound read-only.
func SystemArgs() []string {
	a := []string{"--ro-bind", "/usr", "/usr"}
	for _, d := range []string{"/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"} {
		if t, err := os.Readlink(d); err == nil {
			a = append(a, "--symlink", t, d)
		} else if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			a = append(a, "--ro-bind", d, d)
		}
	}
	for _, f := range []string{"/etc/ld.so.cache", "/etc/alternatives"} {
		if _, err := os.Stat(f); err == nil {
			a = append(a, "--ro-bind", f, f)
		}
	}
	return a
}
