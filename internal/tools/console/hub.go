package console

import (
	"encoding/json"
	"sync"
)

// message is one server-sent event.
type message struct {
	event string
	data  []byte
}

// hub fans run updates out to the connected pages.
type hub struct {
	mu     sync.Mutex
	subs   map[chan message]struct{}
	closed bool
}

func newHub() *hub { return &hub{subs: map[chan message]struct{}{}} }

// subscribe returns a channel of messages and its cancel function.
func (h *hub) subscribe() (<-chan message, func()) {
	ch := make(chan message, 16)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		close(ch)
		return ch, func() {}
	}
	h.subs[ch] = struct{}{}
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.subs[ch]; ok {
			delete(h.subs, ch)
			close(ch)
		}
	}
}

// publish sends v as JSON to every subscriber; a subscriber too slow to
// take it misses it (the next update carries the whole state again).
func (h *hub) publish(event string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- message{event, b}:
		default:
		}
	}
}

func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for ch := range h.subs {
		delete(h.subs, ch)
		close(ch)
	}
}
