//go:build !linux

package link

import "net"

// WrapConn returns c: only Linux's links are served without a goroutine
// each (poll_linux.go).
func WrapConn(c net.Conn) net.Conn { return c }

// pollState is never made here.
type pollState struct{}

func (*pollState) linger() {}

func (sc *serverConn) pollStart() bool { return false }

func (sc *serverConn) pollStop() {}
