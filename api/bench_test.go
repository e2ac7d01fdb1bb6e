package api

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
)

func BenchmarkDecodeOrder(b *testing.B) {
	body := []byte(`{"id":"o-12345","customer":"Ada Lovelace","amount":1250,"currency":"EUR"}`)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := decodeOrder(body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPostOrder measures POST /orders end to end (HTTP, validation, one
// transaction with two inserts) on the local PostgreSQL, with parallel
// clients; with and without an Idempotency-Key.
func BenchmarkPostOrder(b *testing.B) {
	for _, keyed := range []bool{false, true} {
		b.Run(fmt.Sprintf("keyed=%v", keyed), func(b *testing.B) {
			a := newTestAPI(b)
			var n atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := n.Add(1)
					req := mustRequest(b, http.MethodPost, a.url+"/orders", orderBody("", fmt.Sprint("c", i), i, "EUR"))
					if keyed {
						req.Header.Set(HeaderIdempotencyKey, fmt.Sprint("bench-", i))
					}
					resp, err := testClient.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					_ = resp.Body.Close()
					if resp.StatusCode != http.StatusCreated {
						b.Errorf("status %d", resp.StatusCode)
						return
					}
				}
			})
		})
	}
}
