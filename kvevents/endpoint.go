package kvevents

import (
	"net"
	"strings"
)

// Binds reports whether New binds endpoint (and subscribers connect to
// Sluice) rather than dialing it (Sluice connects to a consumer that
// binds): an ipc path, a tcp wildcard ("*", 0.0.0.0, [::]), "localhost", a
// loopback address or an address of one of this machine's interfaces (the
// pod's IP) is bound; another host is dialed. vLLM binds wildcards and ipc
// paths only; its endpoints keep their meaning here.
func Binds(endpoint string) bool {
	if strings.HasPrefix(endpoint, "ipc://") {
		return true
	}
	host, ok := tcpHost(endpoint)
	if !ok {
		return false
	}
	if host == "" || host == "*" || host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return false // a host name: dialed, as vLLM does
	}
	if ip.IsUnspecified() || ip.IsLoopback() {
		return true
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return true
		}
	}
	return false
}

// AllInterfaces reports whether endpoint binds every interface of the
// machine (a tcp wildcard): reachable by whatever can route to it, which
// serve warns about.
func AllInterfaces(endpoint string) bool {
	host, ok := tcpHost(endpoint)
	if !ok {
		return false
	}
	if host == "" || host == "*" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}

// tcpHost is the host of a tcp:// endpoint, brackets removed.
func tcpHost(endpoint string) (string, bool) {
	rest, ok := strings.CutPrefix(endpoint, "tcp://")
	if !ok {
		return "", false
	}
	host, _, err := net.SplitHostPort(rest)
	return host, err == nil
}
