package api

import (
	_ "embed"
	"net/http"
)

// openAPIDoc is the OpenAPI 3.0 description of every route of routes(),
// served at GET /openapi.json.
//
//go:embed openapi.json
var openAPIDoc []byte

// OpenAPI returns the API's OpenAPI 3.0 document (JSON).
func OpenAPI() []byte { return append([]byte(nil), openAPIDoc...) }

func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(openAPIDoc)
}
