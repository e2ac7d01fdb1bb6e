package cdc

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/eventforge/eventforge/internal/testsupport/benchcpu"
)

// copyDataStream is n CopyData messages of ~300 bytes, as a backlog's
// XLogData rows arrive.
func copyDataStream(t testing.TB, n int) []byte {
	t.Helper()
	var out []byte
	body := bytes.Repeat([]byte("w"), 300)
	for range n {
		var err error
		if out, err = (&pgproto3.CopyData{Data: body}).Encode(out); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// countingReader is a socket holding data: each Read returns as much of it
// as asked for, and is counted.
type countingReader struct {
	r     io.Reader
	reads int
}

func (c *countingReader) Read(p []byte) (int, error) {
	c.reads++
	return c.r.Read(p)
}

// TestReplicationReadsInLargeChunks: the replication connection's
// frontend reads what the socket holds in reads of up to
// replicationReadBuffer bytes (pgproto3's own reads at most 8 KiB), and
// passes every message through unchanged.
func TestReplicationReadsInLargeChunks(t *testing.T) {
	const messages = 10_000
	data := copyDataStream(t, messages)
	src := &countingReader{r: bytes.NewReader(data)}
	fe := bufferedFrontend(src, io.Discard)
	for i := range messages {
		msg, err := fe.Receive()
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if cd, ok := msg.(*pgproto3.CopyData); !ok || len(cd.Data) != 300 || cd.Data[0] != 'w' {
			t.Fatalf("message %d: %T %v", i, msg, msg)
		}
	}
	if most := len(data)/replicationReadBuffer + 2; src.reads > most {
		t.Errorf("%d reads for %d bytes, want at most %d", src.reads, len(data), most)
	}
}

// TestReplicationReadTimeout: a read deadline's timeout reaches the
// frontend's caller as a timeout, and the messages that follow it are
// received whole.
func TestReplicationReadTimeout(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	defer server.Close()
	fe := bufferedFrontend(client, io.Discard)
	if err := client.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := fe.Receive(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("receive before any message: %v, want a deadline error", err)
	}
	if err := client.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	data := copyDataStream(t, 3)
	go func() { _, _ = server.Write(data[:100]); _, _ = server.Write(data[100:]) }()
	for i := range 3 {
		if msg, err := fe.Receive(); err != nil {
			t.Fatalf("message %d: %v", i, err)
		} else if cd, ok := msg.(*pgproto3.CopyData); !ok || len(cd.Data) != 300 {
			t.Fatalf("message %d: %T", i, msg)
		}
	}
}

// BenchmarkReplicationReceive receives a backlog of ~300-byte CopyData
// messages over a loopback TCP socket with pgproto3's own reader and with
// the relay's (bufferedFrontend): CPU per message, system calls included,
// the writer's share the same in both.
func BenchmarkReplicationReceive(b *testing.B) {
	for _, tc := range []struct {
		name  string
		build func(io.Reader, io.Writer) *pgproto3.Frontend
	}{{"pgproto3", pgproto3.NewFrontend}, {"buffered", bufferedFrontend}} {
		b.Run(tc.name, func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			defer ln.Close()
			chunk := copyDataStream(b, 1000)
			go func() {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				for {
					if _, err := c.Write(chunk); err != nil {
						return
					}
				}
			}()
			conn, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			src := &countingReader{r: conn}
			fe := tc.build(src, io.Discard)
			b.ReportAllocs()
			clock := benchcpu.Start()
			for b.Loop() {
				if _, err := fe.Receive(); err != nil {
					b.Fatal(err)
				}
			}
			clock.Report(b, 1, "")
			b.ReportMetric(float64(b.N)/float64(src.reads), "messages/read")
		})
	}
}
