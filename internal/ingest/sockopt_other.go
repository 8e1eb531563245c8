//go:build !linux

package ingest

import "net"

func setReadBuffer(c *net.UDPConn, n int) int {
	if c.SetReadBuffer(n) != nil {
		return 0
	}
	return n
}
