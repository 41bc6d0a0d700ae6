package lab

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// cpioWriter writes the "newc" cpio format the kernel unpacks as an
// initramfs. Owners are always root and times zero, so an image depends
// only on its contents.
type cpioWriter struct {
	w   io.Writer
	ino uint32
	n   int64
	pad [4]byte
}

func newCpioWriter(w io.Writer) *cpioWriter { return &cpioWriter{w: w, ino: 1} }

const (
	cpioDir     = 0o040000
	cpioFile    = 0o100000
	cpioSymlink = 0o120000
	cpioChar    = 0o020000
)

func (c *cpioWriter) header(name string, mode uint32, size int64, rdevMajor, rdevMinor uint32) error {
	c.ino++
	h := fmt.Sprintf("070701%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x",
		c.ino, mode, 0, 0, 1, 0, size, 0, 0, rdevMajor, rdevMinor, len(name)+1, 0)
	if err := c.write([]byte(h + name + "\x00")); err != nil {
		return err
	}
	return c.align()
}

func (c *cpioWriter) write(b []byte) error {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return err
}

func (c *cpioWriter) align() error {
	if r := c.n % 4; r != 0 {
		return c.write(c.pad[:4-r])
	}
	return nil
}

// addPath adds one file system entry under the archive name rel.
func (c *cpioWriter) addPath(rel, path string, fi fs.FileInfo) error {
	perm := uint32(fi.Mode().Perm())
	if fi.Mode()&fs.ModeSetuid != 0 {
		perm |= 0o4000
	}
	if fi.Mode()&fs.ModeSetgid != 0 {
		perm |= 0o2000
	}
	if fi.Mode()&fs.ModeSticky != 0 {
		perm |= 0o1000
	}
	switch {
	case fi.IsDir():
		return c.header(rel, cpioDir|perm, 0, 0, 0)
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(path)
		if err != nil {
			return err
		}
		if err := c.header(rel, cpioSymlink|0o777, int64(len(target)), 0, 0); err != nil {
			return err
		}
		if err := c.write([]byte(target)); err != nil {
			return err
		}
		return c.align()
	case fi.Mode().IsRegular():
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := c.header(rel, cpioFile|perm, fi.Size(), 0, 0); err != nil {
			return err
		}
		n, err := io.Copy(c.w, f)
		c.n += n
		if err != nil {
			return err
		}
		if n != fi.Size() {
			return fmt.Errorf("%s changed while packing", path)
		}
		return c.align()
	case fi.Mode()&fs.ModeDevice != 0:
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("%s: no device number", path)
		}
		return c.header(rel, cpioChar|perm, 0, uint32(st.Rdev>>8&0xfff), uint32(st.Rdev&0xff))
	}
	return nil // sockets and fifos are not part of an image
}

// file adds a regular file holding data.
func (c *cpioWriter) file(name string, mode uint32, data []byte) error {
	if err := c.header(name, cpioFile|mode, int64(len(data)), 0, 0); err != nil {
		return err
	}
	if err := c.write(data); err != nil {
		return err
	}
	return c.align()
}

func (c *cpioWriter) device(name string, mode, major, minor uint32) error {
	return c.header(name, cpioChar|mode, 0, major, minor)
}

func (c *cpioWriter) close() error {
	if err := c.header("TRAILER!!!", 0, 0, 0, 0); err != nil {
		return err
	}
	// The kernel reads initramfs in 512-byte blocks; pad like cpio(1).
	if r := c.n % 512; r != 0 {
		return c.write(make([]byte, 512-r))
	}
	return nil
}
