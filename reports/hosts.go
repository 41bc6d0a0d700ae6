package reports

import (
	"net"
	"strings"
)

// LocalHost says whether a host name or address cannot be reached from
// another machine: loopback and unspecified addresses, localhost, and
// the special-use names that never resolve (RFC 6761: .invalid, .test,
// .example, .localhost).
func LocalHost(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback() || ip.IsUnspecified()
	}
	if host == "" || host == "localhost" {
		return true
	}
	for _, tld := range []string{".invalid", ".test", ".example", ".localhost"} {
		if strings.HasSuffix(host, tld) || host == tld[1:] {
			return true
		}
	}
	return false
}
