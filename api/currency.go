package api

// Currencies returns the ISO 4217 codes POST /orders accepts, sorted.
func Currencies() []string {
	return []string{"AUD", "CAD", "CHF", "CZK", "DKK", "EUR", "GBP", "JPY", "NOK", "PLN", "SEK", "USD"}
}

func knownCurrency(code string) bool {
	switch code {
	case "AUD", "CAD", "CHF", "CZK", "DKK", "EUR", "GBP", "JPY", "NOK", "PLN", "SEK", "USD":
		return true
	}
	return false
}
