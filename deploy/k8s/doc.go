// Package k8s holds the checks of EventForge's deployment files that need
// large dependencies (Helm, compose-go, go-containerregistry), in a module of
// their own so the product's go.mod stays lean: chart/ renders and checks
// the Helm chart of deploy/helm/eventforge, compose/ parses
// docker-compose.yml, imagebuild/ builds the OCI image without a Docker
// engine (cmd/eventforge-image). `make helm-check` runs them; `make test`
// includes it.
package k8s
