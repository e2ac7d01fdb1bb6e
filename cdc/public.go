package cdc

import "github.com/eventforge/eventforge/internal/shared/outbox"

// Mapping names the outbox table's columns and the record format
// (Config.Mapping); a program outside this module names the type through
// this alias. The zero value is the contract's outbox table and format.
type Mapping = outbox.Mapping
