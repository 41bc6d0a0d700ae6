package testenv

import (
	"archive/tar"
	"compress/gzip"
	"io"
	"testing"
)

// TarNames lists the entries of the gzip'ed tar archive r, in order.
func TarNames(tb testing.TB, r io.Reader) []string {
	tb.Helper()
	gz, err := gzip.NewReader(r)
	if err != nil {
		tb.Fatal(err)
	}
	var names []string
	for tr := tar.NewReader(gz); ; {
		h, err := tr.Next()
		if err == io.EOF {
			return names
		}
		if err != nil {
			tb.Fatal(err)
		}
		names = append(names, h.Name)
	}
}
