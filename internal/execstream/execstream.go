// Package execstream is the wire format of `drover exec`: after an HTTP
// upgrade (Upgrade: drover-exec) the connection carries frames both ways,
// CLI <-> server <-> agent. A frame is a type byte, a big-endian uint32
// length and that many bytes.
//
//	client -> agent: Stdin, CloseStdin (no payload), Resize (cols, rows: uint16 each)
//	agent -> client: Stdout, Stderr, Exit (the code, decimal), Error (a message; the command did not run)
package execstream

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
)

// Frame types.
const (
	Stdin byte = iota
	Stdout
	Stderr
	Resize
	CloseStdin
	Exit
	Error
)

// Protocol is the Upgrade header's value.
const Protocol = "drover-exec"

// MaxFrame bounds a frame's payload: a reader refuses a larger one.
const MaxFrame = 1 << 20

// Writer writes frames; safe for concurrent use (stdout and stderr
// copiers share one connection).
type Writer struct {
	mu sync.Mutex
	w  io.Writer
}

func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Frame writes one frame.
func (w *Writer) Frame(typ byte, p []byte) error {
	if len(p) > MaxFrame {
		return fmt.Errorf("execstream: frame of %d bytes is over the %d limit", len(p), MaxFrame)
	}
	var h [5]byte
	h[0] = typ
	binary.BigEndian.PutUint32(h[1:], uint32(len(p)))
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.w.Write(h[:]); err != nil {
		return err
	}
	_, err := w.w.Write(p)
	return err
}

// Exit writes the exit frame.
func (w *Writer) Exit(code int) error { return w.Frame(Exit, []byte(strconv.Itoa(code))) }

// Resize writes a terminal size.
func (w *Writer) Resize(cols, rows uint16) error {
	var p [4]byte
	binary.BigEndian.PutUint16(p[:2], cols)
	binary.BigEndian.PutUint16(p[2:], rows)
	return w.Frame(Resize, p[:])
}

// Stream returns an io.Writer that sends each write as a frame of typ.
func (w *Writer) Stream(typ byte) io.Writer { return streamWriter{w, typ} }

type streamWriter struct {
	w   *Writer
	typ byte
}

func (s streamWriter) Write(p []byte) (int, error) {
	for off := 0; off < len(p); off += MaxFrame {
		if err := s.w.Frame(s.typ, p[off:min(len(p), off+MaxFrame)]); err != nil {
			return off, err
		}
	}
	return len(p), nil
}

// Read reads one frame.
func Read(r io.Reader) (typ byte, p []byte, err error) {
	var h [5]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(h[1:])
	if n > MaxFrame {
		return 0, nil, fmt.Errorf("execstream: frame of %d bytes is over the %d limit", n, MaxFrame)
	}
	p = make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return 0, nil, err
	}
	return h[0], p, nil
}

// ParseResize reads a Resize frame's payload.
func ParseResize(p []byte) (cols, rows uint16, err error) {
	if len(p) != 4 {
		return 0, 0, errors.New("execstream: a resize frame holds 4 bytes")
	}
	return binary.BigEndian.Uint16(p[:2]), binary.BigEndian.Uint16(p[2:]), nil
}

// ParseExit reads an Exit frame's payload.
func ParseExit(p []byte) (int, error) { return strconv.Atoi(string(p)) }
