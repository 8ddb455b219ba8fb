package stream

import (
	"errors"
	"net/http"
	"testing"

	"google.golang.org/grpc/codes"
)

// Every row is found through wrapping, and nothing else is: the one table
// every transport answers from.
func TestErrorTable(t *testing.T) {
	for _, row := range table {
		c := Classify(errors.Join(errors.New("context"), row.err))
		if c != row.Class {
			t.Errorf("%v: got %+v, want %+v", row.err, c, row.Class)
		}
	}
	if c := Classify(errors.New("boom")); c.HTTP != http.StatusInternalServerError || c.GRPC != codes.Internal {
		t.Errorf("unknown error got %+v, want 500 / INTERNAL", c)
	}
	if c := Classify(InvalidParam("messages[0].role", "bad")); c.HTTP != http.StatusBadRequest || c.Param != "messages[0].role" {
		t.Errorf("param error got %+v", c)
	}
}
