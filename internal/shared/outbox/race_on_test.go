//go:build race

package outbox

// raceDetector: the race detector is on. sync.Pool drops a random share of
// what is put back under it, so pooled scratch (encoding/json's scanners)
// is allocated again now and then, and allocation counts are not exact.
const raceDetector = true
