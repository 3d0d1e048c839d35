package main

import (
	"encoding/json"
	"io"
	"reflect"
)

// printJSON writes v as indented JSON, the one way every --json command
// prints. A nil slice prints as [], as an empty one does, so that output
// has one shape whatever the dialect (a driver may return either).
func printJSON(w io.Writer, v any) error {
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Slice && rv.IsNil() {
		v = reflect.MakeSlice(rv.Type(), 0, 0).Interface()
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
