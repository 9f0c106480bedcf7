//go:build !linux

package link

func pollerHolds(*Server) int { return 0 }
