package schemareg

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/sr"
)

// RegisterFiles registers the schema files of cfg.Register ("subject=path")
// in the format's type, each after the registry found it compatible with
// the subject's versions; an incompatible one is refused with the
// registry's answer, and nothing after it is registered. It never
// registers anything else: schemas are not inferred from payloads.
func (enc *Encoder) RegisterFiles(ctx context.Context) error {
	for _, r := range enc.cfg.Register {
		subject, path, _ := strings.Cut(r, "=")
		text, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("--register-schema %s: %w", r, err)
		}
		s := sr.Schema{Schema: string(text), Type: srType(enc.cfg.Format)}
		if _, err := compile(0, sr.SubjectSchema{Schema: s}); err != nil {
			return fmt.Errorf("--register-schema %s: %w", r, err)
		}
		if err := enc.reg.register(ctx, subject, s); err != nil {
			return fmt.Errorf("--register-schema %s: %w", r, err)
		}
	}
	return nil
}

func srType(format string) sr.SchemaType {
	switch format {
	case FormatProtobuf:
		return sr.TypeProtobuf
	case FormatJSONSchema:
		return sr.TypeJSON
	}
	return sr.TypeAvro
}

// register checks s against subject's versions (a subject without
// versions takes any schema), then registers it.
func (r *Registry) register(ctx context.Context, subject string, s sr.Schema) error {
	var res sr.CheckCompatibilityResult
	err := r.call(ctx, func(ctx context.Context) (err error) {
		res, err = r.cl.CheckCompatibility(ctx, subject, -2, s) // against all versions
		return err
	})
	switch {
	case err != nil && !isNotFound(err):
		return fmt.Errorf("check compatibility with subject %s: %w", subject, err)
	case err == nil && !res.Is:
		return fmt.Errorf("the registry finds it incompatible with subject %s: %s", subject, strings.Join(res.Messages, "; "))
	}
	return r.call(ctx, func(ctx context.Context) error {
		_, err := r.cl.CreateSchema(ctx, subject, s)
		return err
	})
}

// isNotFound: the registry answered that the subject does not exist.
func isNotFound(err error) bool {
	var re *sr.ResponseError
	return errors.As(err, &re) && re.StatusCode == 404
}
