package kafka

import (
	"context"
	"time"

	"github.com/aws/aws-msk-iam-sasl-signer-go/signer"
)

// mskToken signs an AWS MSK IAM token for region with the AWS SDK's
// default credentials chain (environment, shared files, web identity,
// container or instance role), through aws-msk-iam-sasl-signer-go. Such a
// token is valid for 15 minutes; the provider caches it until shortly
// before.
func mskToken(region string) fetchFunc {
	return func(ctx context.Context) (string, time.Time, error) {
		tok, expMs, err := signer.GenerateAuthToken(ctx, region)
		if err != nil {
			return "", time.Time{}, err
		}
		return tok, time.UnixMilli(expMs), nil
	}
}
