package ingest

import (
	"net"
	"syscall"
)

// setReadBuffer asks for a receive buffer of n bytes and returns what the
// kernel granted. Above net.core.rmem_max SO_RCVBUF is capped; a
// privileged daemon may force it with SO_RCVBUFFORCE.
func setReadBuffer(c *net.UDPConn, n int) int {
	_ = c.SetReadBuffer(n)
	raw, err := c.SyscallConn()
	if err != nil {
		return 0
	}
	got := 0
	_ = raw.Control(func(fd uintptr) {
		got, _ = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF)
		if got/2 < n { // Linux reports twice what was set
			if syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUFFORCE, n) == nil {
				got, _ = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF)
			}
		}
	})
	return got / 2
}
