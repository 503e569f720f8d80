package benchwatch

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync/atomic"
	"time"
)

// Stream is one watch read by a minimal client: a raw loopback connection, the chunked body undone by
// hand, frames split on newlines, and only the two fields it checks read.
type Stream struct {
	conn    net.Conn
	br      *bufio.Reader
	pending []byte // received frame bytes not yet split off
	off     int    // start of the unsplit part of pending

	// Got is how many frames arrived: writes 0..Got-1, in order.
	Got int
	// Chunks is how many HTTP chunks were read; Bytes how many bytes the frames that arrived took,
	// newlines included.
	Chunks, Bytes int64
	// Latency holds, per frame, the µs from its write's start to its receipt.
	Latency []int32
	// Err is why the stream fell short of every write, nil if it did not.
	Err error
}

// Open sends a GET of path (a watch) on a new connection to addr (host:port), reads the response's
// headers and checks that it is a 200 chunked stream. events sizes the latency record.
func Open(addr, path string, events int) (*Stream, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, addr); err != nil {
		conn.Close()
		return nil, err
	}
	br := bufio.NewReaderSize(conn, 32<<10)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK || !slices.Equal(resp.TransferEncoding, []string{"chunked"}) {
		conn.Close()
		return nil, fmt.Errorf("watch response %s, transfer encoding %v", resp.Status, resp.TransferEncoding)
	}
	// The body is read from br directly, chunk by chunk.
	return &Stream{conn: conn, br: br, pending: make([]byte, 0, 32<<10), Latency: make([]int32, 0, events)}, nil
}

// Close closes the connection; a ReadAll in progress returns.
func (s *Stream) Close() error { return s.conn.Close() }

// ReadAll reads frames until every write of sent (the UnixNano of each write's start) arrived, the
// stream ends or a frame is wrong; it records why in Err. Frame k must be a MODIFIED event whose
// object has "seq":"k" and a resourceVersion above startRV and the previous frame's.
func (s *Stream) ReadAll(startRV int64, sent []atomic.Int64) {
	lastRV := startRV
	for s.Got < len(sent) {
		frame, err := s.next()
		if err != nil {
			s.Err = fmt.Errorf("after %d of %d events: %w", s.Got, len(sent), err)
			return
		}
		now := time.Now().UnixNano()
		if !bytes.HasPrefix(frame, []byte(`{"type":"MODIFIED","object":{`)) {
			s.Err = fmt.Errorf("frame %d is not a MODIFIED event: %.80s", s.Got, frame)
			return
		}
		seq, ok1 := quotedIntField(frame, `"seq":"`)
		rv, ok2 := quotedIntField(frame, `"resourceVersion":"`)
		if !ok1 || !ok2 || seq != int64(s.Got) || rv <= lastRV {
			s.Err = fmt.Errorf("frame %d: seq %d, resourceVersion %d after %d: want seq %d, resourceVersion above the last", s.Got, seq, rv, lastRV, s.Got)
			return
		}
		lastRV = rv
		s.Latency = append(s.Latency, int32((now-sent[seq].Load())/1000))
		s.Got++
	}
}

// next returns the next frame without its newline; it is valid until the next call.
func (s *Stream) next() ([]byte, error) {
	for {
		if i := bytes.IndexByte(s.pending[s.off:], '\n'); i >= 0 {
			frame := s.pending[s.off : s.off+i]
			s.off += i + 1
			s.Bytes += int64(i + 1)
			return frame, nil
		}
		s.pending = append(s.pending[:0], s.pending[s.off:]...)
		s.off = 0
		if err := s.readChunk(); err != nil {
			return nil, err
		}
	}
}

// readChunk appends the data of the next HTTP chunk to pending.
func (s *Stream) readChunk() error {
	line, err := s.br.ReadSlice('\n')
	if err != nil {
		return err
	}
	size, ok := parseChunkSize(line)
	if !ok {
		return fmt.Errorf("bad chunk size line %q", line)
	}
	if size == 0 {
		return io.EOF // the server ended the watch
	}
	s.Chunks++
	for size > 0 {
		n := min(size, s.br.Size())
		p, err := s.br.Peek(n)
		if err != nil {
			return err
		}
		s.pending = append(s.pending, p...)
		s.br.Discard(n)
		size -= n
	}
	crlf, err := s.br.Peek(2)
	if err != nil {
		return err
	}
	if crlf[0] != '\r' || crlf[1] != '\n' {
		return fmt.Errorf("chunk not followed by CRLF: %q", crlf)
	}
	s.br.Discard(2)
	return nil
}

// parseChunkSize reads the hexadecimal size of a chunk-size line ending in CRLF.
func parseChunkSize(line []byte) (int, bool) {
	line = bytes.TrimSuffix(line, []byte("\r\n"))
	if len(line) == 0 || len(line) > 8 {
		return 0, false
	}
	n := 0
	for _, c := range line {
		switch {
		case '0' <= c && c <= '9':
			n = n<<4 | int(c-'0')
		case 'a' <= c && c <= 'f':
			n = n<<4 | int(c-'a'+10)
		case 'A' <= c && c <= 'F':
			n = n<<4 | int(c-'A'+10)
		default:
			return 0, false
		}
	}
	return n, true
}

// quotedIntField reads the decimal string value that follows the first occurrence of key, which ends
// with the opening quote.
func quotedIntField(frame []byte, key string) (int64, bool) {
	i := bytes.Index(frame, []byte(key))
	if i < 0 {
		return 0, false
	}
	rest := frame[i+len(key):]
	var n int64
	j := 0
	for ; j < len(rest) && '0' <= rest[j] && rest[j] <= '9'; j++ {
		n = n*10 + int64(rest[j]-'0')
	}
	return n, j > 0 && j < len(rest) && rest[j] == '"'
}

// QuotedIntField is quotedIntField for callers that parse a write's answer, such as the
// resourceVersion an update returned.
func QuotedIntField(body []byte, key string) (int64, bool) { return quotedIntField(body, key) }
