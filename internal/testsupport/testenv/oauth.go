package testenv

import (
	"encoding/base64"
	"encoding/json"
	"time"
)

// UnsecuredJWT is an unsecured JWS ("alg":"none", empty signature) with
// claims sub, iat and exp, as Kafka's default OAUTHBEARER validator for
// tests (OAuthBearerUnsecuredValidatorCallbackHandler) accepts. A zero exp
// leaves the claim out, which that validator refuses.
func UnsecuredJWT(sub string, iat, exp time.Time) string {
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	claims := map[string]any{"sub": sub, "iat": iat.Unix()}
	if !exp.IsZero() {
		claims["exp"] = exp.Unix()
	}
	return enc(map[string]string{"alg": "none"}) + "." + enc(claims) + "."
}
